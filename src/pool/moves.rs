//! The pool's moves over the connections it counts: a checkout, a release, a close, a detach,
//! an eviction, new limits and a destroy. Each says in which order the bookkeeping
//! ([`Pool`]) and the connections change, who gets a freed connection or slot (a waiter of
//! `agent.request()` is served here, through [`Connections::serve`]; one of `http.request` is
//! left to the caller), and what the caller is told: a [`Verdict`].
//!
//! The connections are the binding's (sockets, pumps, hyper's senders, JavaScript faces),
//! reached through [`Connections`]; the tests' are plain records. The bookkeeping is borrowed
//! for one step at a time, never across a call to the connections, which may come back here
//! (serving a waiter opens a connection).

use std::cell::RefMut;
use std::collections::HashSet;
use std::time::{Duration, Instant};

use super::conn::{Mode, State};
use super::multiplex::Sessions;
use super::{
    Checkout, Fate, Fit, Grant, KeyId, Limits, Path, Pool, Release, ReleasePolicy, Waiter,
    WaiterId, Wear,
};

/// What the caller of a move is told to do next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// A checkout's: idle connection `id`, now serving it.
    Reuse(u32),
    /// A checkout's: connection `id` is new; bind a socket to it and connect it.
    Connect(u32),
    /// A checkout's: queued, as this waiter.
    Queued(WaiterId),
    /// A release's: the connection (and its socket) goes on to this waiter of `http.request`.
    Handoff(WaiterId),
    /// A connection closed, and this waiter of `http.request` may open one in its slot.
    Grant(WaiterId),
    /// A release's: the connection idles in the pool.
    Idle,
    /// A release's: the connection could not be kept and closed; nobody waits.
    Closed,
    /// A release's: the connection closed for a waiting `agent.request()`, which opens another
    /// in its slot: the socket that it served is left with nothing.
    Retired,
    /// Nothing to do.
    Nothing,
}

impl Verdict {
    /// The waiter of `http.request` that a freed connection or slot went to, if any.
    pub fn drop_in_waiter(self) -> Option<WaiterId> {
        match self {
            Verdict::Handoff(w) | Verdict::Grant(w) => Some(w),
            _ => None,
        }
    }
}

/// The connections a pool counts, by id, as its moves need them.
pub trait Connections {
    /// The pool's bookkeeping.
    fn pool(&self) -> RefMut<'_, Pool<u32>>;
    /// Its HTTP/2 sessions (see `super::multiplex`).
    fn sessions(&self) -> RefMut<'_, Sessions<u32>>;
    /// The key of connection `id` while it is open (or opening); `None` once it is closed.
    fn key_of(&self, id: u32) -> Option<KeyId>;
    /// What a checkout by a request of `mode` makes of idle connection `id`.
    fn fit(&self, id: u32, mode: Mode) -> Fit;
    /// Whether connection `id`, whose request just ended, may carry another (see
    /// `conn::Conn::reusable`), and the request path it serves.
    fn reusable(&self, id: u32) -> (bool, Path);
    /// The request of connection `id` finished; it goes back for `idle` (see
    /// `course::Course::finished`).
    fn finished(&self, id: u32, idle: Option<Duration>);
    /// A new connection of `key`, opening in a slot the pool counts already: its id.
    fn open(&self, key: KeyId) -> u32;
    /// Connection `id` idles in the pool, until the pool's next deadline.
    fn park(&self, id: u32);
    /// Closes idle connection `id` (`expired`: its idle time ran out); a socket object a
    /// program still holds for it hears of it.
    fn end_idle(&self, id: u32, expired: bool);
    /// Closes connection `id`, whatever it is doing; what it was (`None`: closed already).
    fn end(&self, id: u32) -> Option<Ended>;
    /// Connection `id`, its request over, is about to close as it is not kept: it is unfit for
    /// another request, or the pool does not keep it (its server's Keep-Alive hint leaves no
    /// idle time, keep-alive is off, the free connections are full, its `socketActiveTTL` is
    /// reached). Told before its [`end`](Self::end).
    fn unkept(&self, id: u32);
    /// Takes connection `id` out of the pool's counts (an HTTP upgrade took its socket); its
    /// key the first time, while it is not closed.
    fn detach(&self, id: u32) -> Option<KeyId>;
    /// Serves waiting `agent.request()` `req` on connection `handoff` (of its path), or on a
    /// new connection in the slot it was given; false when the request is gone.
    fn serve(&self, req: u32, handoff: Option<u32>) -> bool;
    /// When HTTP/2 session `id` reaches `socketActiveTTL` (see
    /// [`ReleasePolicy::session_end`](super::release::ReleasePolicy::session_end)); `None`: no
    /// end, or no such session.
    fn session_end(&self, id: u32) -> Option<Instant>;
}

/// What a connection was when it was closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ended {
    pub key: KeyId,
    pub state: State,
    /// Out of the pool's counts already (an HTTP upgrade).
    pub detached: bool,
}

/// A checkout of `key` for `who`: an idle connection (those found dead on the way are
/// closed), a slot for a new one, or a place in the queue.
pub fn checkout<C: Connections + ?Sized>(conns: &C, key: KeyId, who: Waiter) -> Checkout<u32> {
    let mode = match who {
        Waiter::DropIn => Mode::DropIn,
        Waiter::Promise(_) => Mode::Promise,
    };
    let mut discard = Vec::new();
    let out = conns
        .pool()
        .checkout(key, who, |&id| conns.fit(id, mode), &mut discard);
    for (id, _) in discard {
        conns.end_idle(id, false);
    }
    match out {
        Checkout::Queued(w) if room_from_session(conns, key, w) => Checkout::Connect,
        out => out,
    }
}

/// Checkout `w` of `key` was queued for want of a slot while an HTTP/2 session idles: the
/// session idle longest closes and its slot goes to `w`, as an idle connection's would (the
/// pool closes those itself). It is one of `key` when `key` has all `maxSockets` allows (a
/// session carries no `http.request`, and an `agent.request()` of its key that reaches the
/// checkout found it past its time), or of any key when `maxTotalSockets` holds `w` back.
/// Only for the one waiter: an older one would take the slot. True when `w` got the slot
/// (counted, as a `Checkout::Connect`).
fn room_from_session<C: Connections + ?Sized>(conns: &C, key: KeyId, w: WaiterId) -> bool {
    let own = {
        let pool = conns.pool();
        if pool.waiting() != 1 {
            return false;
        }
        pool.key_full(key)
    };
    let idle = conns.sessions().idle_longest(|k| !own || k == key);
    let Some((of, conn)) = idle else {
        return false;
    };
    // Idle, and none waits for its key's streams: nothing to route again, and no new session
    // of its key to keep its server's limit for.
    conns.sessions().closed(of, conn, None);
    match closed_in_use(conns, conn) {
        Some(grant) if grant.waiter == w => true,
        // `w` was the only waiter: the slot can only be its own, or stay free.
        grant => {
            debug_assert!(
                grant.is_none(),
                "a slot went to a waiter other than the only one"
            );
            false
        }
    }
}

/// A checkout for `http.request`: a new connection is opened at once, for the caller to bind
/// a socket to.
pub fn checkout_drop_in<C: Connections + ?Sized>(conns: &C, key: KeyId) -> Verdict {
    match checkout(conns, key, Waiter::DropIn) {
        Checkout::Reuse(id) => Verdict::Reuse(id),
        Checkout::Connect => Verdict::Connect(conns.open(key)),
        Checkout::Queued(w) => Verdict::Queued(w),
    }
}

/// Connection `id` finished its request: it goes to the first waiter of its key (or, when
/// that one came by the other path, closes and gives it its slot), idles for `idle` (`None`:
/// it may serve a waiter but not idle), or closes when it cannot carry another request.
pub fn release<C: Connections + ?Sized>(
    conns: &C,
    id: u32,
    idle: Option<Duration>,
    now: Instant,
) -> Verdict {
    let Some(key) = conns.key_of(id) else {
        return Verdict::Nothing;
    };
    conns.pool().stats.request_count += 1;
    hand_on(conns, id, key, idle, now)
}

/// Connection `id` of `key`, its request over and counted, goes on as [`release`] says.
fn hand_on<C: Connections + ?Sized>(
    conns: &C,
    id: u32,
    key: KeyId,
    idle: Option<Duration>,
    now: Instant,
) -> Verdict {
    conns.finished(id, idle);
    let released = match conns.reusable(id) {
        (true, path) => conns.pool().release(key, id, path, idle, now),
        (false, _) => {
            let grant = conns.pool().closed(key);
            Release::Close(id, grant)
        }
    };
    match released {
        // The socket goes on with its waiter: it stays bound.
        Release::Handoff(w, Waiter::DropIn, _) => Verdict::Handoff(w),
        // An `agent.request()` goes on this connection: its socket, if any, is left with
        // nothing.
        Release::Handoff(_, Waiter::Promise(req), _) => {
            serve_promise(conns, req, key, Some(id), Verdict::Retired)
        }
        Release::Idle => {
            conns.park(id);
            Verdict::Idle
        }
        // Closed; its slot may let a waiter connect (the first of its key, when that one came
        // by the other path and could not take the connection).
        Release::Close(_, grant) => {
            conns.unkept(id);
            conns.end(id);
            let otherwise = match grant.map(|g| g.who) {
                Some(Waiter::Promise(_)) => Verdict::Retired,
                _ => Verdict::Closed,
            };
            give(conns, grant, otherwise)
        }
    }
}

/// Gives a freed slot to its waiter: an `agent.request()` connects now, and the caller is
/// told `otherwise`, as when nobody waited; a waiter of `http.request` is the caller's to
/// serve.
pub fn give<C: Connections + ?Sized>(
    conns: &C,
    grant: Option<Grant>,
    otherwise: Verdict,
) -> Verdict {
    match grant {
        None => otherwise,
        Some(Grant {
            waiter,
            who: Waiter::DropIn,
            ..
        }) => Verdict::Grant(waiter),
        Some(Grant {
            key,
            who: Waiter::Promise(req),
            ..
        }) => serve_promise(conns, req, key, None, otherwise),
    }
}

/// Serves waiting `agent.request()` `req` (of `key`) on connection `handoff`, or in the slot
/// it was given; the caller is told `served`. A request gone without leaving the queue (which
/// cannot happen while an abort cancels its place) passes what it was given to the next
/// waiter.
fn serve_promise<C: Connections + ?Sized>(
    conns: &C,
    req: u32,
    key: KeyId,
    handoff: Option<u32>,
    served: Verdict,
) -> Verdict {
    if conns.serve(req, handoff) {
        return served;
    }
    match handoff {
        // Its request was counted as it was released: it goes on uncounted.
        Some(id) => match conns.key_of(id) {
            Some(key) => hand_on(conns, id, key, None, Instant::now()),
            None => Verdict::Nothing,
        },
        None => {
            let grant = conns.pool().detached(key);
            give(conns, grant, served)
        }
    }
}

/// The exchange on promise-path connection `id` (as `wear` as it is) is over: with its
/// connection `kept` open by hyper, it goes back to the pool by the agent's `policy` (idle no
/// longer than the server's Keep-Alive `hint` allows), or closes.
pub fn settle<C: Connections + ?Sized>(
    conns: &C,
    id: u32,
    kept: bool,
    wear: Wear,
    hint: Option<Duration>,
    policy: &ReleasePolicy,
    now: Instant,
) -> Verdict {
    if !kept {
        return close(conns, id);
    }
    match policy.settle(wear, policy.idle_for(None, hint)) {
        Fate::Close => {
            retired(conns);
            conns.unkept(id);
            close(conns, id)
        }
        Fate::Release(idle) => release(conns, id, idle, now),
    }
}

/// A request completed and its connection closes rather than go back, past `socketActiveTTL`
/// or at `maxRequestsPerSocket`: it counts among the completed requests, as one whose
/// connection goes back does (agentkeepalive counts every request that frees its socket).
pub fn retired<C: Connections + ?Sized>(conns: &C) {
    conns.pool().stats.request_count += 1;
}

/// Connection `id` closes (its socket was destroyed, its request aborted), connecting, in use
/// or idle: its slot goes to the next waiter. One detached by an upgrade frees nothing.
pub fn close<C: Connections + ?Sized>(conns: &C, id: u32) -> Verdict {
    let Some(ended) = conns.end(id) else {
        return Verdict::Nothing;
    };
    if ended.detached {
        return Verdict::Nothing;
    }
    let grant = conns
        .pool()
        .close_conn(ended.key, ended.state, |&c| c == id);
    give(conns, grant, Verdict::Nothing)
}

/// Connection `id`, in use, closes and its slot goes to a waiting `agent.request()` (a
/// session's end, a connect given up): the waiters its slot lets connect.
pub fn closed_in_use<C: Connections + ?Sized>(conns: &C, id: u32) -> Option<Grant> {
    let ended = conns.end(id)?;
    conns.pool().closed(ended.key)
}

/// Connection `id` closes for a request of the other path, which opens a new one in its slot:
/// the slot stays counted.
pub fn retire<C: Connections + ?Sized>(conns: &C, id: u32) {
    if conns.end(id).is_some() {
        conns.pool().stats.close_socket_count += 1;
    }
}

/// Connection `id` leaves the pool's counts (an HTTP upgrade took its socket): its slot goes
/// to the next waiter; it does not count as closed.
pub fn detach<C: Connections + ?Sized>(conns: &C, id: u32) -> Verdict {
    let Some(key) = conns.detach(id) else {
        return Verdict::Nothing;
    };
    let grant = conns.pool().detached(key);
    give(conns, grant, Verdict::Nothing)
}

/// Idle connection `id` was found closed (its peer closed it, reset it or wrote to it): it
/// closes, and its slot may let a waiter connect.
pub fn evict<C: Connections + ?Sized>(conns: &C, id: u32) -> Option<Grant> {
    let key = conns.key_of(id)?;
    let (_, grant) = conns.pool().evict(key, |&c| c == id)?;
    conns.end_idle(id, false);
    grant
}

/// The slots freed for waiters (`grants`): those of `agent.request()` connect now; those of
/// `http.request` are returned, for the caller to tell.
pub fn grant_all<C: Connections + ?Sized>(
    conns: &C,
    grants: impl IntoIterator<Item = Grant>,
) -> Vec<WaiterId> {
    grants
        .into_iter()
        .filter_map(|g| give(conns, Some(g), Verdict::Nothing).drop_in_waiter())
        .collect()
}

/// The idle connections and HTTP/2 sessions whose time ran out at `now` close (a session may
/// idle for `session_idle`, and not past its `socketActiveTTL`); the slots they free go to
/// waiters (those of `http.request` are returned).
pub fn expire<C: Connections + ?Sized>(
    conns: &C,
    now: Instant,
    session_idle: Duration,
) -> Vec<WaiterId> {
    let mut closed = Vec::new();
    let mut grants = conns.pool().expire(now, &mut closed);
    for id in closed {
        conns.end_idle(id, true);
    }
    grants.extend(expired_sessions(conns, now, session_idle));
    grant_all(conns, grants)
}

/// The HTTP/2 sessions idle for `idle` at `now`, or idle past their `socketActiveTTL`, close;
/// the slots they free go to waiters (those of `http.request` are returned).
pub fn expire_sessions<C: Connections + ?Sized>(
    conns: &C,
    now: Instant,
    idle: Duration,
) -> Vec<WaiterId> {
    let grants = expired_sessions(conns, now, idle);
    grant_all(conns, grants)
}

/// Closes the sessions idle for `idle` at `now`, or idle past their end: the grants of the
/// slots they free.
fn expired_sessions<C: Connections + ?Sized>(
    conns: &C,
    now: Instant,
    idle: Duration,
) -> Vec<Grant> {
    let expired = conns
        .sessions()
        .expire(now, idle, |id| conns.session_end(id));
    expired
        .into_iter()
        .filter_map(|(_, id)| closed_in_use(conns, id))
        .collect()
}

/// Drop-in connection `id` (of `key`) lost its network connection before its request was
/// answered and replays it (see `crate::replay`): the old connection counts as closed and the
/// replay as one, and a new connection opens in the same slot, under the same socket.
pub fn replaying<C: Connections + ?Sized>(conns: &C, key: KeyId) {
    let mut pool = conns.pool();
    pool.stats.close_socket_count += 1;
    pool.stats.replay_count += 1;
    pool.opening(key);
}

/// Forgets the empty keys but the `keep` most recently used (see [`Pool::sweep`]), and what
/// their sessions learnt of their servers (the key's slot may serve another origin next). A
/// key in `named` stays: the caller names those of its connections (opening, open, or detached
/// by an upgrade) and of its `agent.request()`s. Returns the keys forgotten, for the caller to
/// forget too.
pub fn sweep<C: Connections + ?Sized>(
    conns: &C,
    keep: usize,
    named: &HashSet<KeyId>,
) -> Vec<KeyId> {
    let swept = conns.pool().sweep(keep, |k| named.contains(&k));
    let mut sessions = conns.sessions();
    for &key in &swept {
        sessions.forget(key);
    }
    swept
}

/// New limits: the waiters of `http.request` that they let connect (those of `agent.request()`
/// connect now).
pub fn set_limits<C: Connections + ?Sized>(conns: &C, limits: Limits) -> Vec<WaiterId> {
    let grants = conns.pool().set_limits(limits);
    grant_all(conns, grants)
}

/// `agent.destroy()`: the idle connections and the HTTP/2 sessions close; the queued waiters
/// are returned, to fail. Connections in use close as their sockets are destroyed.
pub fn destroy<C: Connections + ?Sized>(conns: &C) -> Vec<WaiterId> {
    let (idle, waiters) = conns.pool().drain();
    for id in idle {
        conns.end_idle(id, false);
    }
    let sessions = conns.sessions().drain();
    for (_, id) in sessions {
        let grant = closed_in_use(conns, id);
        debug_assert!(
            grant.is_none(),
            "the queue is drained: a slot freed now goes to nobody"
        );
    }
    waiters
}

#[cfg(test)]
mod tests;
