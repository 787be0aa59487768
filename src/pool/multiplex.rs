//! A pool's HTTP/2 sessions: connections that carry many requests at once.
//!
//! A session holds its pool slot for its whole life (the pool counts it busy, so `maxSockets`
//! counts connections): it never idles in the pool's lists. A request to its key takes a
//! stream on it while it has room, as the server's `SETTINGS_MAX_CONCURRENT_STREAMS` allows;
//! past that it goes to the pool's checkout (another connection, within `maxSockets`), or
//! waits here for a stream. While a connection that may become a session is being set up,
//! requests to its key wait for it rather than each opening a connection of its own: they take
//! streams on it if it speaks HTTP/2, go to the checkout if it speaks HTTP/1.1, and share its
//! error if it fails.
//!
//! Like the rest of `src/pool`, it owns no sockets and reads no clock: the binding stores its
//! connection ids here, tests store numbers. Invariants, kept in this file only:
//! - a session's `open` counts the streams handed out on it and not yet given back;
//! - a request waits here only while its key has a connect under way or a session;
//!   when neither is left, the waiters come back to be routed again.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use super::KeyId;

/// Where a request goes.
#[derive(Debug, PartialEq, Eq)]
pub enum Route<C> {
    /// A stream on this session (counted).
    Stream(C),
    /// It waits here: for the connection being set up, or for a stream to end.
    Wait,
    /// The pool's checkout: an idle connection, a new one, or the pool's queue.
    Checkout,
}

/// A session with no stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Idleness {
    /// It takes new streams: it idles until its time runs out.
    Idle,
    /// It takes no new stream either (GOAWAY): it is to be closed.
    Spent,
}

/// What a new session does for the requests that waited for it.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Opened {
    /// They take a stream on it (counted).
    pub streams: Vec<u64>,
    /// It had no room for this one, which opens another connection (the rest wait for it).
    pub checkout: Option<u64>,
}

/// What a session takes, as its pool sees it when routing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Room {
    /// How many streams it takes at once now: none past `socketActiveTTL`, or once gone.
    pub streams: usize,
    /// How many its server said it takes at once, once its settings have come. Until then
    /// its `streams` are the protocol's assumed limit, which says nothing of the server.
    pub said: Option<usize>,
}

struct Session<C> {
    conn: C,
    open: usize,
    /// It takes no new streams (the server sent GOAWAY, or it is closing).
    closing: bool,
    /// Since when it has carried no stream (its idle time runs out as a pooled connection's).
    idle_since: Option<Instant>,
}

impl<C: Copy> Session<C> {
    /// When this session, carrying no stream, closes: once it has idled `idle`, or at the end
    /// `end` gives it (past `socketActiveTTL` it takes no new stream, and would otherwise idle
    /// on, unused); `None` while it carries streams.
    fn idle_deadline(
        &self,
        idle: Duration,
        end: &impl Fn(C) -> Option<Instant>,
    ) -> Option<Instant> {
        let idled = self.idle_since?.checked_add(idle);
        match (idled, end(self.conn)) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

struct Key<C> {
    sessions: Vec<Session<C>>,
    /// Connects under way that may become sessions.
    connecting: usize,
    /// The last connect of this key spoke HTTP/1.1: requests no longer wait for connects.
    plain: bool,
    /// What the key's server said last to one of its sessions (see [`Key::limit`]); kept
    /// until the key is forgotten, as `plain` is.
    said: Option<usize>,
    waiting: VecDeque<u64>,
}

impl<C> Default for Key<C> {
    fn default() -> Self {
        Key {
            sessions: Vec::new(),
            connecting: 0,
            plain: false,
            said: None,
            waiting: VecDeque::new(),
        }
    }
}

impl<C: Copy> Key<C> {
    /// The most streams a session takes at once as the key's server said it to the key's
    /// sessions. A new session's server has not said its own limit yet: its first requests
    /// would go out under the protocol's assumed 100, and be refused past the real one.
    /// - Those that take streams count first: the fewest any of them heard.
    /// - If none of them has heard, those closing (after a GOAWAY or a refusal, or past
    ///   `socketActiveTTL`) count: the same server said it.
    /// - If none of those has, what the key heard last (kept here, and when a session closes).
    ///   Without it, requests sent again after a refusal would go to a new session under the
    ///   assumed limit, and be refused there again.
    ///
    /// A session counts by what its server said, not by the streams it takes now (none past
    /// `socketActiveTTL`): counted so, it would hold every new session to one stream. A server
    /// that says none (it takes no stream now) says nothing of its limit.
    fn limit(&mut self, room: &impl Fn(C) -> Room) -> usize {
        let said = |closing: bool| {
            self.sessions
                .iter()
                .filter(|s| s.closing == closing)
                .filter_map(|s| room(s.conn).said)
                .filter(|&n| n > 0)
                .min()
        };
        let heard = said(false).or_else(|| said(true));
        if heard.is_some() {
            self.said = heard;
        }
        self.said.unwrap_or(usize::MAX)
    }
}

impl<C> Key<C> {
    fn is_empty(&self) -> bool {
        self.sessions.is_empty() && self.connecting == 0 && self.waiting.is_empty()
    }
}

pub struct Sessions<C> {
    keys: HashMap<KeyId, Key<C>>,
}

impl<C> Default for Sessions<C> {
    fn default() -> Self {
        Sessions {
            keys: HashMap::new(),
        }
    }
}

/// A key's sessions, their streams in use and the requests waiting for one, for the agent's
/// status.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    pub sessions: usize,
    pub streams: usize,
    pub waiting: usize,
}

impl<C: Copy + PartialEq> Sessions<C> {
    /// Routes request `req` to `key`; `room` tells how many streams a session takes at once
    /// (the server's latest setting, or the protocol's assumed one until it comes), and what
    /// its server said. A session with room is taken, the first one first (the others can then
    /// idle and expire).
    pub fn route(&mut self, key: KeyId, req: u64, room: impl Fn(C) -> Room) -> Route<C> {
        let Some(k) = self.keys.get_mut(&key) else {
            return Route::Checkout;
        };
        let limit = k.limit(&room);
        if let Some(s) = k
            .sessions
            .iter_mut()
            .find(|s| !s.closing && s.open < room(s.conn).streams.min(limit))
        {
            s.open += 1;
            s.idle_since = None;
            return Route::Stream(s.conn);
        }
        // Something to wait for: a connect that may speak HTTP/2, or a full session when
        // another connection is on its way (whose own waiters wait behind it).
        if k.connecting > 0 && !k.plain {
            k.waiting.push_back(req);
            return Route::Wait;
        }
        Route::Checkout
    }

    /// The pool's checkout had no slot for `req` while `key` has sessions: it waits here for a
    /// stream rather than in the pool's queue (whose slots free only when a connection ends).
    /// False when the key has no session to wait for.
    pub fn wait(&mut self, key: KeyId, req: u64) -> bool {
        match self.keys.get_mut(&key) {
            Some(k) if k.sessions.iter().any(|s| !s.closing) => {
                k.waiting.push_back(req);
                true
            }
            _ => false,
        }
    }

    /// A new connection of `key` that may speak HTTP/2 is being set up.
    pub fn connecting(&mut self, key: KeyId) {
        self.keys.entry(key).or_default().connecting += 1;
    }

    /// The connect came up speaking HTTP/2 as `conn`, with a first stream for the request that
    /// opened it; `room` streams at once (no more than the key's server said to its sessions:
    /// see `Key::limit`). The waiters take streams on it as it has room.
    pub fn opened(&mut self, key: KeyId, conn: C, room: impl Fn(C) -> Room) -> Opened {
        let k = self.keys.entry(key).or_default();
        let room = room(conn).streams.min(k.limit(&room));
        k.connecting = k.connecting.saturating_sub(1);
        k.plain = false;
        let mut session = Session {
            conn,
            open: 1,
            closing: false,
            idle_since: None,
        };
        let mut opened = Opened::default();
        while session.open < room {
            let Some(req) = k.waiting.pop_front() else {
                break;
            };
            session.open += 1;
            opened.streams.push(req);
        }
        k.sessions.push(session);
        // No room for the rest: one of them opens the next connection, unless one is on its
        // way already.
        if k.connecting == 0 {
            opened.checkout = k.waiting.pop_front();
        }
        opened
    }

    /// The connect came up speaking HTTP/1.1: requests stop waiting for connects, and those
    /// that waited are routed again (each to the pool's checkout).
    pub fn plain(&mut self, key: KeyId) -> Vec<u64> {
        let Some(k) = self.keys.get_mut(&key) else {
            return Vec::new();
        };
        k.connecting = k.connecting.saturating_sub(1);
        k.plain = true;
        let waiting = k.waiting.drain(..).collect();
        self.forget_if_empty(key);
        waiting
    }

    /// The connect failed. When no other is under way and no session has room later, the
    /// requests that waited for it fail with its error (returned); otherwise they wait on.
    pub fn connect_failed(&mut self, key: KeyId) -> Vec<u64> {
        let Some(k) = self.keys.get_mut(&key) else {
            return Vec::new();
        };
        k.connecting = k.connecting.saturating_sub(1);
        let waiting = match k.connecting == 0 && !k.sessions.iter().any(|s| !s.closing) {
            true => k.waiting.drain(..).collect(),
            false => Vec::new(),
        };
        self.forget_if_empty(key);
        waiting
    }

    /// A stream of session `conn` ended (at `now`): the first waiter takes its place
    /// (counted), if the session takes new streams.
    pub fn stream_done(&mut self, key: KeyId, conn: C, now: Instant) -> Option<u64> {
        let k = self.keys.get_mut(&key)?;
        let s = k.sessions.iter_mut().find(|s| s.conn == conn)?;
        s.open = s.open.saturating_sub(1);
        let next = match s.closing {
            true => None,
            false => k.waiting.pop_front(),
        };
        match next {
            Some(_) => s.open += 1,
            None if s.open == 0 => s.idle_since = Some(now),
            None => {}
        }
        next
    }

    /// What session `conn` carries now: None while it has streams (or is gone).
    pub fn idleness(&self, key: KeyId, conn: C) -> Option<Idleness> {
        let s = self
            .keys
            .get(&key)?
            .sessions
            .iter()
            .find(|s| s.conn == conn && s.open == 0)?;
        Some(match s.closing {
            true => Idleness::Spent,
            false => Idleness::Idle,
        })
    }

    /// When the first idle session's time runs out, for sessions that may idle `idle` and live
    /// until `end` gives (`socketActiveTTL`; `None`: no end).
    pub fn next_deadline(
        &self,
        idle: Duration,
        end: impl Fn(C) -> Option<Instant>,
    ) -> Option<Instant> {
        self.keys
            .values()
            .flat_map(|k| k.sessions.iter())
            .filter_map(|s| s.idle_deadline(idle, &end))
            .min()
    }

    /// Takes out the sessions idle for `idle` or longer at `now`, or idle past the end `end`
    /// gives them, for them to be closed.
    pub fn expire(
        &mut self,
        now: Instant,
        idle: Duration,
        end: impl Fn(C) -> Option<Instant>,
    ) -> Vec<(KeyId, C)> {
        let mut out = Vec::new();
        for (&key, k) in &mut self.keys {
            k.sessions.retain(|s| {
                let expired = s
                    .idle_deadline(idle, &end)
                    .is_some_and(|deadline| deadline <= now);
                if expired {
                    out.push((key, s.conn));
                }
                !expired
            });
        }
        for &(key, _) in &out {
            self.forget_if_empty(key);
        }
        out
    }

    /// Session `conn` takes no new streams (a GOAWAY came); those it carries go on.
    pub fn close_gracefully(&mut self, key: KeyId, conn: C) {
        if let Some(s) = self
            .keys
            .get_mut(&key)
            .and_then(|k| k.sessions.iter_mut().find(|s| s.conn == conn))
        {
            s.closing = true;
        }
    }

    /// Marks the sessions of `key` that `retired` says are past their time (`socketActiveTTL`)
    /// as taking no new stream; those of them that carry none are returned, to be closed now
    /// (the others close once their last stream ends, as after a GOAWAY).
    pub fn retire(&mut self, key: KeyId, retired: impl Fn(C) -> bool) -> Vec<C> {
        let Some(k) = self.keys.get_mut(&key) else {
            return Vec::new();
        };
        let mut spent = Vec::new();
        for s in k.sessions.iter_mut().filter(|s| !s.closing) {
            if retired(s.conn) {
                s.closing = true;
                if s.open == 0 {
                    spent.push(s.conn);
                }
            }
        }
        spent
    }

    /// The session idle longest (carrying no stream, not closing) among the keys `of` takes
    /// that have no request waiting for a stream: one whose slot may serve a checkout instead.
    pub fn idle_longest(&self, of: impl Fn(KeyId) -> bool) -> Option<(KeyId, C)> {
        self.keys
            .iter()
            .filter(|(&key, k)| of(key) && k.waiting.is_empty())
            .flat_map(|(&key, k)| {
                k.sessions
                    .iter()
                    .filter(|s| s.open == 0 && !s.closing)
                    .filter_map(move |s| Some((s.idle_since?, key, s.conn)))
            })
            .min_by_key(|&(since, _, _)| since)
            .map(|(_, key, conn)| (key, conn))
    }

    /// Whether `conn` is a session of `key` (its streams are counted here).
    pub fn is_session(&self, key: KeyId, conn: C) -> bool {
        self.keys
            .get(&key)
            .is_some_and(|k| k.sessions.iter().any(|s| s.conn == conn))
    }

    /// Session `conn` has closed, its server having said `said` (see [`Room::said`]): the key
    /// keeps that for its next sessions. With no session left to take them and no connect
    /// under way, the requests that waited for a stream are routed again (returned).
    pub fn closed(&mut self, key: KeyId, conn: C, said: Option<usize>) -> Vec<u64> {
        let Some(k) = self.keys.get_mut(&key) else {
            return Vec::new();
        };
        if let Some(n) = said.filter(|&n| n > 0) {
            k.said = Some(n);
        }
        k.sessions.retain(|s| s.conn != conn);
        let stranded = k.connecting == 0 && !k.sessions.iter().any(|s| !s.closing);
        let waiting = match stranded {
            true => k.waiting.drain(..).collect(),
            false => Vec::new(),
        };
        self.forget_if_empty(key);
        waiting
    }

    /// Forgets waiter `req` of `key` (aborted); whether it waited here.
    pub fn cancel(&mut self, key: KeyId, req: u64) -> bool {
        let Some(k) = self.keys.get_mut(&key) else {
            return false;
        };
        let before = k.waiting.len();
        k.waiting.retain(|&r| r != req);
        let found = k.waiting.len() != before;
        self.forget_if_empty(key);
        found
    }

    /// Takes out every session (the agent is destroyed), for them to be closed; the requests
    /// that waited are failed by their agent.
    pub fn drain(&mut self) -> Vec<(KeyId, C)> {
        let mut out = Vec::new();
        for (key, k) in self.keys.drain() {
            out.extend(k.sessions.into_iter().map(|s| (key, s.conn)));
        }
        out
    }

    /// The sessions of `key`, their streams in use and the requests waiting for one.
    pub fn usage(&self, key: KeyId) -> Usage {
        self.keys.get(&key).map_or_else(Usage::default, |k| Usage {
            sessions: k.sessions.len(),
            streams: k.sessions.iter().map(|s| s.open).sum(),
            waiting: k.waiting.len(),
        })
    }

    /// Forgets `key` (swept from the pool: its number may name another origin next), with
    /// what it learnt of its server.
    pub fn forget(&mut self, key: KeyId) {
        self.keys.remove(&key);
    }

    fn forget_if_empty(&mut self, key: KeyId) {
        // A key that learnt its server speaks HTTP/1.1, or how many streams it takes, keeps
        // it: the requests sent again after a session's streams were all refused are between
        // two routes when it closes.
        if self
            .keys
            .get(&key)
            .is_some_and(|k| k.is_empty() && !k.plain && k.said.is_none())
        {
            self.keys.remove(&key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const K: KeyId = KeyId(1);

    fn at(secs: u64) -> Instant {
        use std::sync::OnceLock;
        static BASE: OnceLock<Instant> = OnceLock::new();
        *BASE.get_or_init(Instant::now) + Duration::from_secs(secs)
    }

    /// A session that takes `n` streams at once, as its server said.
    fn heard(n: usize) -> Room {
        Room {
            streams: n,
            said: Some(n),
        }
    }

    fn room(n: usize) -> impl Fn(u32) -> Room {
        move |_| heard(n)
    }

    #[test]
    fn a_key_without_sessions_goes_to_the_checkout() {
        let mut s = Sessions::<u32>::default();
        assert_eq!(s.route(K, 1, room(10)), Route::Checkout);
    }

    #[test]
    fn requests_wait_for_the_connect_and_share_the_session_it_opens() {
        let mut s = Sessions::<u32>::default();
        assert_eq!(s.route(K, 1, room(10)), Route::Checkout);
        s.connecting(K);
        for req in 2..=5 {
            assert_eq!(s.route(K, req, room(10)), Route::Wait);
        }
        let opened = s.opened(K, 7, room(10));
        assert_eq!(opened.streams, vec![2, 3, 4, 5]);
        assert_eq!(opened.checkout, None);
        // The next ones take streams at once; a session in use does not expire.
        assert_eq!(s.route(K, 6, room(10)), Route::Stream(7));
        assert_eq!(s.next_deadline(Duration::ZERO, |_| None), None);
        assert_eq!(
            s.usage(K),
            Usage {
                sessions: 1,
                streams: 6,
                waiting: 0
            }
        );
    }

    #[test]
    fn past_the_servers_limit_one_more_connection_opens_and_the_rest_wait() {
        let mut s = Sessions::<u32>::default();
        s.connecting(K);
        for req in 2..=6 {
            assert_eq!(s.route(K, req, room(2)), Route::Wait);
        }
        let opened = s.opened(K, 7, room(2));
        assert_eq!(opened.streams, vec![2]);
        assert_eq!(opened.checkout, Some(3));
        s.connecting(K);
        // 4, 5, 6 wait on; a stream that ends serves the first of them.
        assert_eq!(s.stream_done(K, 7, at(0)), Some(4));
        let second = s.opened(K, 8, room(2));
        assert_eq!(second.streams, vec![5]);
        assert_eq!(second.checkout, Some(6));
    }

    #[test]
    fn a_new_session_takes_no_more_streams_than_the_keys_others_until_its_server_says() {
        let mut s = Sessions::<u32>::default();
        s.connecting(K);
        s.opened(K, 7, room(2));
        assert_eq!(s.route(K, 2, room(2)), Route::Stream(7));
        // Full: the next request opens another connection; two more wait for it.
        assert_eq!(s.route(K, 3, room(2)), Route::Checkout);
        s.connecting(K);
        assert_eq!(s.route(K, 4, room(2)), Route::Wait);
        assert_eq!(s.route(K, 5, room(2)), Route::Wait);
        // Its own server has not said its limit yet (the protocol's assumed 100): the key's
        // other session's, 2, holds for it too: the opener's stream and one more.
        let per_conn = |c: u32| match c {
            8 => Room {
                streams: 100,
                said: None,
            },
            _ => heard(2),
        };
        let opened = s.opened(K, 8, per_conn);
        assert_eq!(opened.streams, vec![4]);
        assert_eq!(opened.checkout, Some(5));
        assert_eq!(s.route(K, 6, per_conn), Route::Checkout);
    }

    #[test]
    fn a_session_that_takes_no_stream_does_not_hold_the_keys_new_sessions_to_one() {
        let mut s = Sessions::<u32>::default();
        s.connecting(K);
        s.opened(K, 7, room(10));
        assert_eq!(s.stream_done(K, 7, at(0)), None);
        // 7 is past its TTL: it takes no stream, but its server said 10; the first request
        // opens a connection, the rest wait for it and all take streams on the new session.
        let retired = |c: u32| match c {
            7 => Room {
                streams: 0,
                said: Some(10),
            },
            _ => heard(10),
        };
        assert_eq!(s.route(K, 2, retired), Route::Checkout);
        s.connecting(K);
        for req in 3..=6 {
            assert_eq!(s.route(K, req, retired), Route::Wait);
        }
        let opened = s.opened(K, 8, retired);
        assert_eq!(opened.streams, vec![3, 4, 5, 6]);
        assert_eq!(opened.checkout, None);
        assert_eq!(s.route(K, 9, retired), Route::Stream(8));
        // A server that says it takes no stream now says nothing of its limit either.
        let none_now = |c: u32| match c {
            8 => heard(0),
            _ => Room {
                streams: 100,
                said: None,
            },
        };
        s.close_gracefully(K, 7);
        assert_eq!(s.route(K, 10, none_now), Route::Checkout);
        s.connecting(K);
        assert_eq!(s.route(K, 11, none_now), Route::Wait);
        assert_eq!(s.route(K, 12, none_now), Route::Wait);
        let third = s.opened(K, 9, none_now);
        assert_eq!(third.streams, vec![11, 12]);
    }

    #[test]
    fn requests_sent_again_after_refusals_take_no_more_streams_than_the_server_said() {
        // A first session took six requests before its server's settings came; the server
        // said 2 and refused the other four, and the session takes no new stream.
        let unheard = Room {
            streams: 100,
            said: None,
        };
        let rooms = |c: u32| match c {
            7 => heard(2),
            _ => unheard,
        };
        let mut s = Sessions::<u32>::default();
        s.connecting(K);
        for req in 2..=6 {
            assert_eq!(s.route(K, req, |_| unheard), Route::Wait);
        }
        assert_eq!(s.opened(K, 7, |_| unheard).streams, vec![2, 3, 4, 5, 6]);
        s.close_gracefully(K, 7);
        for _ in 3..=6 {
            assert_eq!(s.stream_done(K, 7, at(0)), None);
        }
        // The four go again: one opens a connection, the others wait for it, whose server
        // has not said its limit yet. The closing session's server, the same, said 2.
        assert_eq!(s.route(K, 3, rooms), Route::Checkout);
        s.connecting(K);
        for req in 4..=6 {
            assert_eq!(s.route(K, req, rooms), Route::Wait);
        }
        let second = s.opened(K, 8, rooms);
        assert_eq!(second.streams, vec![4]);
        assert_eq!(second.checkout, Some(5));
        s.connecting(K);
        // The first session closes with its last stream; the key keeps what its server
        // said. The second closes before its own server said anything.
        assert_eq!(s.stream_done(K, 7, at(0)), None);
        assert_eq!(s.closed(K, 7, Some(2)), Vec::<u64>::new());
        s.close_gracefully(K, 8);
        assert_eq!(s.closed(K, 8, None), Vec::<u64>::new());
        assert_eq!(s.route(K, 9, rooms), Route::Wait);
        let third = s.opened(K, 10, rooms);
        assert_eq!(third.streams, vec![6]);
        assert_eq!(third.checkout, Some(9));
        // Once a session that takes streams heard its own server, that counts.
        let raised = |c: u32| match c {
            10 => heard(3),
            _ => unheard,
        };
        assert_eq!(s.route(K, 11, raised), Route::Stream(10));
        assert_eq!(s.route(K, 12, raised), Route::Checkout);
    }

    #[test]
    fn a_key_keeps_what_its_server_said_when_its_last_session_closes_between_routes() {
        let unheard = Room {
            streams: 100,
            said: None,
        };
        let mut s = Sessions::<u32>::default();
        s.connecting(K);
        for req in 2..=3 {
            assert_eq!(s.route(K, req, |_| unheard), Route::Wait);
        }
        s.opened(K, 7, |_| unheard);
        // Its server said 1 and refused the other two streams; then the connection closed
        // (a GOAWAY that left none through): its three requests are between two routes.
        s.close_gracefully(K, 7);
        for _ in 1..=3 {
            assert_eq!(s.stream_done(K, 7, at(0)), None);
        }
        assert_eq!(s.closed(K, 7, Some(1)), Vec::<u64>::new());
        assert_eq!(s.usage(K), Usage::default());
        // Routed again, they go to a connection that takes one at first, as its server said.
        assert_eq!(s.route(K, 1, |_| unheard), Route::Checkout);
        s.connecting(K);
        for req in 2..=3 {
            assert_eq!(s.route(K, req, |_| unheard), Route::Wait);
        }
        let opened = s.opened(K, 8, |_| unheard);
        assert_eq!(opened.streams, Vec::<u64>::new());
        assert_eq!(opened.checkout, Some(2));
        // Swept from the pool, the key forgets it.
        s.forget(K);
        s.connecting(K);
        assert_eq!(s.route(K, 4, |_| unheard), Route::Wait);
        assert_eq!(s.opened(K, 9, |_| unheard).streams, vec![4]);
    }

    #[test]
    fn a_full_session_sends_requests_to_the_checkout_and_they_may_wait_for_a_stream() {
        let mut s = Sessions::<u32>::default();
        s.connecting(K);
        s.opened(K, 7, room(1));
        assert_eq!(s.route(K, 2, room(1)), Route::Checkout);
        // The pool had no slot: it waits for a stream.
        assert!(s.wait(K, 2));
        assert_eq!(s.usage(K).waiting, 1);
        assert_eq!(s.stream_done(K, 7, at(0)), Some(2));
        assert_eq!(s.stream_done(K, 7, at(1)), None);
        assert_eq!(s.idleness(K, 7), Some(Idleness::Idle));
        // Idle from then on: its time runs out as a pooled connection's.
        let idle = Duration::from_secs(4);
        assert_eq!(s.next_deadline(idle, |_| None), Some(at(5)));
        assert!(s.expire(at(4), idle, |_| None).is_empty());
        assert_eq!(s.expire(at(5), idle, |_| None), vec![(K, 7)]);
        // Its key keeps only what its server said, until the pool sweeps it.
        assert_eq!(s.usage(K), Usage::default());
        s.forget(K);
        assert!(s.keys.is_empty());
    }

    #[test]
    fn an_idle_session_closes_at_its_end_when_that_comes_before_its_idle_time() {
        let mut s = Sessions::<u32>::default();
        s.connecting(K);
        s.opened(K, 7, room(10));
        s.connecting(K);
        s.opened(K, 8, room(10));
        let idle = Duration::from_secs(60);
        // Session 7 ends (socketActiveTTL) at 3 s, 8 at 100 s; neither counts while busy.
        let end = |c: u32| Some(at(if c == 7 { 3 } else { 100 }));
        assert_eq!(s.next_deadline(idle, end), None);
        assert_eq!(s.stream_done(K, 7, at(1)), None);
        assert_eq!(s.stream_done(K, 8, at(1)), None);
        assert_eq!(s.next_deadline(idle, end), Some(at(3)));
        assert!(s.expire(at(2), idle, end).is_empty());
        assert_eq!(s.expire(at(3), idle, end), vec![(K, 7)]);
        // 8 idles out before its end; without an end, its idle time alone counts.
        assert_eq!(s.next_deadline(idle, end), Some(at(61)));
        assert_eq!(s.next_deadline(idle, |_| None), Some(at(61)));
        assert_eq!(s.expire(at(61), idle, end), vec![(K, 8)]);
    }

    #[test]
    fn an_http1_server_stops_the_waiting_for_connects() {
        let mut s = Sessions::<u32>::default();
        s.connecting(K);
        assert_eq!(s.route(K, 2, room(10)), Route::Wait);
        assert_eq!(s.route(K, 3, room(10)), Route::Wait);
        assert_eq!(s.plain(K), vec![2, 3]);
        // The key keeps what it learnt until it is swept.
        assert_eq!(s.keys.len(), 1);
        // Each routed again opens its own connection, as HTTP/1.1 needs.
        s.connecting(K);
        assert_eq!(s.route(K, 2, room(10)), Route::Checkout);
        s.connecting(K);
        assert_eq!(s.route(K, 3, room(10)), Route::Checkout);
    }

    #[test]
    fn a_failed_connect_fails_its_waiters_unless_another_may_serve_them() {
        let mut s = Sessions::<u32>::default();
        s.connecting(K);
        s.connecting(K);
        assert_eq!(s.route(K, 2, room(10)), Route::Wait);
        assert!(s.connect_failed(K).is_empty());
        assert_eq!(s.connect_failed(K), vec![2]);
        assert!(s.keys.is_empty());
    }

    #[test]
    fn a_closed_session_hands_its_waiters_back_and_a_graceful_close_takes_no_streams() {
        let mut s = Sessions::<u32>::default();
        s.connecting(K);
        s.opened(K, 7, room(1));
        assert!(s.wait(K, 2));
        s.close_gracefully(K, 7);
        assert_eq!(s.idleness(K, 7), None);
        assert_eq!(s.stream_done(K, 7, at(0)), None);
        assert_eq!(s.idleness(K, 7), Some(Idleness::Spent));
        assert_eq!(s.route(K, 3, room(1)), Route::Checkout);
        assert!(!s.wait(K, 3));
        assert_eq!(s.closed(K, 7, None), vec![2]);
        assert!(!s.is_session(K, 7));
    }

    #[test]
    fn an_aborted_waiter_is_forgotten() {
        let mut s = Sessions::<u32>::default();
        s.connecting(K);
        assert_eq!(s.route(K, 2, room(10)), Route::Wait);
        assert!(s.cancel(K, 2));
        assert!(!s.cancel(K, 2));
        assert_eq!(s.opened(K, 7, room(10)), Opened::default());
    }
}
