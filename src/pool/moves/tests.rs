use std::cell::{Cell, RefCell, RefMut};
use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use super::*;
use crate::pool::multiplex::{Room, Route};

/// A session whose server said it takes 10 streams at once.
const TEN: Room = Room {
    streams: 10,
    said: Some(10),
};

/// A connection as the fake keeps it.
#[derive(Clone, Copy)]
struct Rec {
    key: KeyId,
    state: State,
    mode: Mode,
    /// What a release finds: may it carry another request?
    reusable: bool,
    /// What a checkout finds of it idle.
    fit: Fit,
    detached: bool,
}

/// Connections as records, and what was done to them, in order.
struct Fake {
    pool: RefCell<Pool<u32>>,
    conns: RefCell<HashMap<u32, Rec>>,
    next: Cell<u32>,
    /// The `agent.request()`s still there to be served.
    requests: RefCell<HashSet<u32>>,
    sessions: RefCell<Sessions<u32>>,
    /// When sessions reach their `socketActiveTTL` (none: no TTL).
    session_ends: RefCell<HashMap<u32, Instant>>,
    log: RefCell<Vec<String>>,
}

impl Fake {
    fn new(max_sockets: usize) -> (Fake, KeyId) {
        let mut pool = Pool::new(Limits {
            max_sockets,
            ..Limits::default()
        });
        let key = pool.key("a:80:");
        let fake = Fake {
            pool: RefCell::new(pool),
            conns: RefCell::new(HashMap::new()),
            next: Cell::new(1),
            requests: RefCell::new(HashSet::new()),
            sessions: RefCell::new(Sessions::default()),
            session_ends: RefCell::new(HashMap::new()),
            log: RefCell::new(Vec::new()),
        };
        (fake, key)
    }

    /// The busy and idle connections of the pool's keys.
    fn counts(&self) -> (usize, usize) {
        let snapshot = self.pool.borrow().snapshot();
        (
            snapshot.iter().map(|k| k.busy).sum(),
            snapshot.iter().map(|k| k.idle).sum(),
        )
    }

    fn said(&self, what: String) {
        self.log.borrow_mut().push(what);
    }

    fn take_log(&self) -> Vec<String> {
        std::mem::take(&mut *self.log.borrow_mut())
    }

    fn rec(&self, id: u32) -> Rec {
        self.conns.borrow()[&id]
    }

    fn set(&self, id: u32, f: impl FnOnce(&mut Rec)) {
        f(self.conns.borrow_mut().get_mut(&id).unwrap());
    }

    /// A connection of `key` checked out, connected and in use.
    fn in_use(&self, key: KeyId) -> u32 {
        let Verdict::Connect(id) = checkout_drop_in(self, key) else {
            panic!("no room for a new connection");
        };
        self.set(id, |r| r.state = State::Active);
        self.take_log();
        id
    }

    /// A connection of `key` that served a request and idles.
    fn idle(&self, key: KeyId) -> u32 {
        let id = self.in_use(key);
        release(self, id, IDLE, Instant::now());
        self.take_log();
        id
    }

    /// An HTTP/2 session of `key`, its one stream ended at `at`: idle since then.
    fn idle_session(&self, key: KeyId, at: Instant) -> u32 {
        let id = self.busy_session(key);
        self.sessions.borrow_mut().stream_done(key, id, at);
        id
    }

    /// An HTTP/2 session of `key` carrying one stream.
    fn busy_session(&self, key: KeyId) -> u32 {
        let id = self.in_use(key);
        let mut sessions = self.sessions.borrow_mut();
        sessions.connecting(key);
        sessions.opened(key, id, |_| TEN);
        id
    }

    /// A checkout of `key` for `http.request` that waits: its place in the queue.
    fn queued(&self, key: KeyId) -> WaiterId {
        match checkout_drop_in(self, key) {
            Verdict::Queued(w) => w,
            other => panic!("the checkout did not wait: {other:?}"),
        }
    }

    /// A waiting `agent.request()` `req` of `key`.
    fn promise_waiter(&self, key: KeyId, req: u32) -> WaiterId {
        self.requests.borrow_mut().insert(req);
        match checkout(self, key, Waiter::Promise(req)) {
            Checkout::Queued(w) => w,
            _ => panic!("request {req} did not wait"),
        }
    }
}

impl Connections for Fake {
    fn pool(&self) -> RefMut<'_, Pool<u32>> {
        self.pool.borrow_mut()
    }

    fn sessions(&self) -> RefMut<'_, Sessions<u32>> {
        self.sessions.borrow_mut()
    }

    fn key_of(&self, id: u32) -> Option<KeyId> {
        self.conns.borrow().get(&id).map(|r| r.key)
    }

    fn fit(&self, id: u32, mode: Mode) -> Fit {
        let r = self.rec(id);
        if r.mode != mode {
            Fit::Other
        } else {
            r.fit
        }
    }

    fn reusable(&self, id: u32) -> (bool, Path) {
        let r = self.rec(id);
        (r.reusable && r.state == State::Active, r.mode.path())
    }

    fn finished(&self, id: u32, idle: Option<Duration>) {
        self.said(format!("finished {id} {idle:?}"));
    }

    fn open(&self, key: KeyId) -> u32 {
        let id = self.next.get();
        self.next.set(id + 1);
        self.conns.borrow_mut().insert(
            id,
            Rec {
                key,
                state: State::Connecting,
                mode: Mode::DropIn,
                reusable: true,
                fit: Fit::Take,
                detached: false,
            },
        );
        // As the binding does: the slot's connection counts as created.
        self.pool.borrow_mut().opening(key);
        self.said(format!("open {id}"));
        id
    }

    fn park(&self, id: u32) {
        self.set(id, |r| r.state = State::Idle);
        self.said(format!("park {id}"));
    }

    fn end_idle(&self, id: u32, expired: bool) {
        self.conns.borrow_mut().remove(&id);
        self.said(format!("end idle {id} expired={expired}"));
    }

    fn unkept(&self, id: u32) {
        self.said(format!("unkept {id}"));
    }

    fn end(&self, id: u32) -> Option<Ended> {
        let r = self.conns.borrow_mut().remove(&id)?;
        self.said(format!("end {id}"));
        Some(Ended {
            key: r.key,
            state: r.state,
            detached: r.detached,
        })
    }

    fn detach(&self, id: u32) -> Option<KeyId> {
        let mut conns = self.conns.borrow_mut();
        let r = conns.get_mut(&id)?;
        if r.detached {
            return None;
        }
        r.detached = true;
        Some(r.key)
    }

    fn session_end(&self, id: u32) -> Option<Instant> {
        self.session_ends.borrow().get(&id).copied()
    }

    fn serve(&self, req: u32, handoff: Option<u32>) -> bool {
        if !self.requests.borrow_mut().remove(&req) {
            return false;
        }
        // As the binding does: a request given a slot opens its connection at once, which
        // comes back to the pool while a move runs.
        let on = match handoff {
            Some(id) => id,
            None => {
                let id = self.open(KeyId(0));
                self.set(id, |r| r.mode = Mode::Promise);
                id
            }
        };
        self.said(format!("serve {req} on {on}"));
        true
    }
}

const IDLE: Option<Duration> = Some(Duration::from_secs(4));

#[test]
fn a_released_connection_idles_and_serves_the_next_checkout() {
    let (f, key) = Fake::new(10);
    assert_eq!(checkout_drop_in(&f, key), Verdict::Connect(1));
    assert_eq!(f.take_log(), ["open 1"]);
    f.set(1, |r| r.state = State::Active);
    assert_eq!(release(&f, 1, IDLE, Instant::now()), Verdict::Idle);
    assert_eq!(f.take_log(), ["finished 1 Some(4s)", "park 1"]);
    assert_eq!(checkout_drop_in(&f, key), Verdict::Reuse(1));
    assert_eq!(f.pool.borrow().stats.request_count, 1);
}

#[test]
fn a_connection_that_cannot_carry_another_request_closes_at_its_release() {
    let (f, key) = Fake::new(10);
    let id = f.in_use(key);
    f.set(id, |r| r.reusable = false);
    assert_eq!(release(&f, id, IDLE, Instant::now()), Verdict::Closed);
    assert_eq!(f.take_log(), ["finished 1 Some(4s)", "unkept 1", "end 1"]);
    let stats = f.pool.borrow().stats;
    assert_eq!(
        (stats.create_socket_count, stats.close_socket_count),
        (1, 1)
    );
    assert_eq!(
        release(&f, id, IDLE, Instant::now()),
        Verdict::Nothing,
        "gone"
    );
}

#[test]
fn a_promise_connection_settles_by_the_agents_policy() {
    let policy = ReleasePolicy {
        idle: Some(Duration::from_secs(30)),
        ttl: Some(Duration::from_secs(60)),
        ..ReleasePolicy::default()
    };
    let (f, key) = Fake::new(10);
    let hint = Some(Duration::from_secs(5));
    let age = Wear {
        age: Duration::from_secs(10),
        requests: 1,
    };
    let id = f.in_use(key);
    let now = Instant::now();
    assert_eq!(settle(&f, id, true, age, hint, &policy, now), Verdict::Idle);
    assert_eq!(
        f.take_log(),
        ["finished 1 Some(4s)", "park 1"],
        "the server's hint less the buffer"
    );
    close(&f, id);
    f.take_log();

    let id = f.in_use(key);
    let old = Wear {
        age: Duration::from_secs(60),
        requests: 1,
    };
    assert_eq!(
        settle(&f, id, true, old, None, &policy, now),
        Verdict::Nothing
    );
    assert_eq!(
        f.take_log(),
        ["unkept 2", "end 2"],
        "past socketActiveTTL: closed, not reused"
    );

    let id = f.in_use(key);
    assert_eq!(
        settle(&f, id, false, age, None, &policy, now),
        Verdict::Nothing
    );
    assert_eq!(f.take_log(), ["end 3"], "hyper closed it");

    let off = ReleasePolicy {
        keep_alive: false,
        ..policy
    };
    let id = f.in_use(key);
    assert_eq!(settle(&f, id, true, age, None, &off, now), Verdict::Closed);
    assert_eq!(
        f.take_log(),
        ["finished 4 None", "unkept 4", "end 4"],
        "keep-alive off"
    );

    let id = f.in_use(key);
    let brief = Some(policy.hint_buffer);
    assert_eq!(
        settle(&f, id, true, age, brief, &policy, now),
        Verdict::Closed
    );
    assert_eq!(
        f.take_log(),
        ["finished 5 None", "unkept 5", "end 5"],
        "the server's hint leaves no idle time"
    );

    let counted = ReleasePolicy {
        max_requests: Some(3),
        ..policy
    };
    let id = f.in_use(key);
    let second = Wear { requests: 2, ..age };
    assert_eq!(
        settle(&f, id, true, second, None, &counted, now),
        Verdict::Idle
    );
    assert_eq!(
        f.take_log(),
        [format!("finished {id} Some(30s)"), format!("park {id}")]
    );
    close(&f, id);
    f.take_log();
    let id = f.in_use(key);
    let third = Wear { requests: 3, ..age };
    let counted_before = f.pool().stats.request_count;
    assert_eq!(
        settle(&f, id, true, third, None, &counted, now),
        Verdict::Nothing
    );
    assert_eq!(
        f.take_log(),
        [format!("unkept {id}"), format!("end {id}")],
        "its maxRequestsPerSocket-th request: closed, not reused"
    );
    assert_eq!(
        f.pool().stats.request_count,
        counted_before + 1,
        "a completed request, counted"
    );
}

#[test]
fn a_checkout_closes_the_dead_idle_connections_it_meets() {
    let (f, key) = Fake::new(10);
    let id = f.idle(key);
    f.set(id, |r| r.fit = Fit::Dead);
    assert_eq!(checkout_drop_in(&f, key), Verdict::Connect(2));
    assert_eq!(f.take_log(), ["end idle 1 expired=false", "open 2"]);
}

#[test]
fn a_released_connection_goes_to_the_waiter_of_its_path() {
    let (f, key) = Fake::new(1);
    let id = f.in_use(key);
    let w = f.queued(key);
    assert_eq!(release(&f, id, IDLE, Instant::now()), Verdict::Handoff(w));
    assert_eq!(f.rec(id).state, State::Active, "still bound, not parked");
}

#[test]
fn a_waiting_agent_request_is_served_in_the_slot_of_a_drop_in_connection() {
    let (f, key) = Fake::new(1);
    let id = f.in_use(key);
    f.promise_waiter(key, 7);
    // The drop-in connection cannot serve it: it closes, and the request connects in its slot.
    assert_eq!(release(&f, id, IDLE, Instant::now()), Verdict::Retired);
    assert_eq!(
        f.take_log(),
        [
            "finished 1 Some(4s)",
            "unkept 1",
            "end 1",
            "open 2",
            "serve 7 on 2"
        ]
    );
    assert_eq!(f.counts(), (1, 0), "one slot, held by the new connection");
}

#[test]
fn a_waiting_agent_request_takes_a_promise_connection_as_it_is_released() {
    let (f, key) = Fake::new(1);
    let id = f.in_use(key);
    f.set(id, |r| r.mode = Mode::Promise);
    f.promise_waiter(key, 7);
    assert_eq!(release(&f, id, IDLE, Instant::now()), Verdict::Retired);
    assert_eq!(f.take_log(), ["finished 1 Some(4s)", "serve 7 on 1"]);
}

#[test]
fn what_a_request_gone_from_the_queue_was_given_goes_on() {
    let (f, key) = Fake::new(1);
    let id = f.in_use(key);
    f.set(id, |r| r.mode = Mode::Promise);
    f.promise_waiter(key, 7);
    f.requests.borrow_mut().clear();
    // Handed over to nobody: released again, with no idle time, it closes.
    assert_eq!(release(&f, id, IDLE, Instant::now()), Verdict::Closed);
    assert_eq!(
        f.take_log(),
        [
            "finished 1 Some(4s)",
            "finished 1 None",
            "unkept 1",
            "end 1"
        ]
    );
    assert_eq!(f.counts(), (0, 0), "its slot is free");
    assert_eq!(
        f.pool.borrow().stats.request_count,
        1,
        "one request, counted once"
    );
}

#[test]
fn a_close_frees_the_slot_of_a_connection_in_use_or_idle() {
    let (f, key) = Fake::new(1);
    let id = f.in_use(key);
    let w = f.queued(key);
    assert_eq!(close(&f, id), Verdict::Grant(w));
    assert_eq!(close(&f, id), Verdict::Nothing, "once");

    let (f, key) = Fake::new(1);
    let id = f.in_use(key);
    release(&f, id, IDLE, Instant::now());
    assert_eq!(close(&f, id), Verdict::Nothing);
    assert_eq!(f.counts(), (0, 0), "out of the idle list");
    assert_eq!(checkout_drop_in(&f, key), Verdict::Connect(2));
}

#[test]
fn a_detached_connection_frees_its_slot_once_and_its_close_nothing() {
    let (f, key) = Fake::new(1);
    let id = f.in_use(key);
    let w = f.queued(key);
    assert_eq!(detach(&f, id), Verdict::Grant(w));
    assert_eq!(detach(&f, id), Verdict::Nothing);
    assert_eq!(close(&f, id), Verdict::Nothing);
    assert_eq!(
        f.pool.borrow().stats.close_socket_count,
        0,
        "an upgraded socket is not counted as closed"
    );
}

#[test]
fn an_evicted_idle_connection_closes_once() {
    let (f, key) = Fake::new(1);
    let id = f.idle(key);
    assert_eq!(evict(&f, id), None, "nobody waits for its slot");
    assert_eq!(f.take_log(), ["end idle 1 expired=false"]);
    assert_eq!(f.counts(), (0, 0));
    assert_eq!(evict(&f, id), None);
    assert!(f.take_log().is_empty(), "once");
}

#[test]
fn freed_slots_serve_agent_requests_here_and_return_the_others() {
    let (f, key) = Fake::new(1);
    f.requests.borrow_mut().insert(9);
    let grants = [
        Grant {
            key,
            waiter: WaiterId(1),
            who: Waiter::Promise(9),
        },
        Grant {
            key,
            waiter: WaiterId(2),
            who: Waiter::DropIn,
        },
    ];
    assert_eq!(grant_all(&f, grants), vec![WaiterId(2)]);
    assert_eq!(f.take_log(), ["open 1", "serve 9 on 1"]);
}

#[test]
fn expired_connections_close_and_their_slots_go_to_waiters() {
    let (f, key) = Fake::new(10);
    let id = f.in_use(key);
    let now = Instant::now();
    release(&f, id, Some(Duration::from_millis(10)), now);
    f.take_log();
    assert_eq!(expire(&f, now, IDLE.unwrap()), vec![], "not yet");
    assert_eq!(
        expire(&f, now + Duration::from_millis(10), IDLE.unwrap()),
        vec![]
    );
    assert_eq!(f.take_log(), ["end idle 1 expired=true"]);
    assert_eq!(f.pool.borrow().stats.timeout_socket_count, 1);
}

#[test]
fn new_limits_let_waiters_connect() {
    let (f, key) = Fake::new(1);
    f.in_use(key);
    let w = f.queued(key);
    f.promise_waiter(key, 3);
    let limits = Limits {
        max_sockets: 3,
        ..Limits::default()
    };
    assert_eq!(
        set_limits(&f, limits),
        vec![w],
        "the caller connects for the drop-in one"
    );
    assert_eq!(f.take_log(), ["open 2", "serve 3 on 2"]);
}

#[test]
fn destroy_returns_the_waiters_to_fail() {
    let (f, key) = Fake::new(1);
    let a = f.in_use(key);
    let w = f.queued(key);
    assert_eq!(destroy(&f), vec![w]);
    assert!(
        f.take_log().is_empty(),
        "in-use connections close with their sockets"
    );
    assert_eq!(close(&f, a), Verdict::Nothing, "nobody waits any more");
}

#[test]
fn destroy_closes_what_idles() {
    let (f, key) = Fake::new(2);
    let id = f.idle(key);
    assert_eq!(destroy(&f), vec![]);
    assert_eq!(f.take_log(), [format!("end idle {id} expired=false")]);
}

#[test]
fn a_retired_connection_keeps_its_slot_counted() {
    let (f, key) = Fake::new(1);
    let id = f.in_use(key);
    retire(&f, id);
    assert_eq!(f.counts(), (1, 0));
    assert_eq!(f.pool.borrow().stats.close_socket_count, 1);
    retire(&f, id);
    assert_eq!(f.pool.borrow().stats.close_socket_count, 1, "once");
    assert!(closed_in_use(&f, id).is_none(), "gone already");
}

#[test]
fn destroy_closes_the_sessions() {
    let (f, key) = Fake::new(2);
    let s = f.idle_session(key, Instant::now());
    assert_eq!(destroy(&f), vec![]);
    assert_eq!(f.take_log(), [format!("end {s}")]);
    assert_eq!(f.sessions.borrow().usage(key).sessions, 0);
    assert_eq!(f.counts(), (0, 0), "its slot is free");
}

#[test]
fn an_idle_session_closes_when_its_time_runs_out_and_its_slot_serves_a_waiter() {
    let (f, key) = Fake::new(1);
    let t0 = Instant::now();
    // The waiter came while the session was busy; the session then idled (the streams' layer
    // closes it at once for a waiter, see `streams::stream_done`; expiry is the backstop).
    let s = f.busy_session(key);
    let w = f.queued(key);
    f.sessions.borrow_mut().stream_done(key, s, t0);
    let idle = Duration::from_secs(4);
    assert_eq!(expire(&f, t0 + Duration::from_secs(3), idle), vec![]);
    assert!(f.take_log().is_empty(), "not yet");
    assert_eq!(
        expire(&f, t0 + idle, idle),
        vec![w],
        "the caller connects for it"
    );
    assert_eq!(f.take_log(), [format!("end {s}")]);
    assert_eq!(f.sessions.borrow().usage(key).sessions, 0);
}

#[test]
fn an_idle_session_past_its_ttl_closes_before_its_idle_time_runs_out() {
    let (f, key) = Fake::new(1);
    let t0 = Instant::now();
    let s = f.busy_session(key);
    let w = f.queued(key);
    f.session_ends
        .borrow_mut()
        .insert(s, t0 + Duration::from_secs(1));
    f.sessions.borrow_mut().stream_done(key, s, t0);
    let idle = Duration::from_secs(60);
    assert_eq!(expire(&f, t0, idle), vec![]);
    assert!(f.take_log().is_empty(), "not yet");
    assert_eq!(
        expire(&f, t0 + Duration::from_secs(1), idle),
        vec![w],
        "its slot goes to the waiter"
    );
    assert_eq!(f.take_log(), [format!("end {s}")]);
    assert_eq!(f.sessions.borrow().usage(key).sessions, 0);
}

#[test]
fn a_checkout_held_back_takes_the_slot_of_an_idle_session() {
    // Its own key at maxSockets: an http.request takes the slot of the key's idle session.
    let (f, key) = Fake::new(1);
    let t0 = Instant::now();
    let s = f.idle_session(key, t0);
    let new = s + 1;
    assert_eq!(checkout_drop_in(&f, key), Verdict::Connect(new));
    assert_eq!(f.take_log(), [format!("end {s}"), format!("open {new}")]);
    assert_eq!(f.sessions.borrow().usage(key).sessions, 0);
    assert_eq!(f.counts(), (1, 0));

    // maxTotalSockets: a checkout of another key takes the slot of the session idle longest.
    let (f, a) = Fake::new(10);
    f.pool.borrow_mut().set_limits(Limits {
        max_sockets: 10,
        max_total_sockets: 2,
        ..Limits::default()
    });
    let b = f.pool.borrow_mut().key("b:80:");
    let c = f.pool.borrow_mut().key("c:80:");
    let older = f.idle_session(a, t0);
    let younger = f.idle_session(b, t0 + Duration::from_secs(1));
    f.requests.borrow_mut().insert(9);
    assert_eq!(checkout(&f, c, Waiter::Promise(9)), Checkout::Connect);
    assert_eq!(f.take_log(), [format!("end {older}")]);
    assert_eq!(f.sessions.borrow().usage(b).sessions, 1, "{younger} stays");

    // A session still carrying a stream gives nothing: the checkout waits.
    let (f, key) = Fake::new(1);
    f.busy_session(key);
    assert!(matches!(checkout_drop_in(&f, key), Verdict::Queued(_)));
    // Nor one of another key while only this key's own limit holds the checkout back.
    let (f, a) = Fake::new(1);
    let b = f.pool.borrow_mut().key("b:80:");
    f.idle_session(b, t0);
    f.in_use(a);
    assert!(matches!(checkout_drop_in(&f, a), Verdict::Queued(_)));
    assert_eq!(f.sessions.borrow().usage(b).sessions, 1);
}

#[test]
fn expiry_closes_idle_connections_and_idle_sessions_in_one_pass() {
    let (f, a) = Fake::new(1);
    let b = f.pool.borrow_mut().key("b:80:");
    let t0 = Instant::now();
    let conn = f.idle(a);
    let s = f.idle_session(b, t0);
    let later = t0 + Duration::from_secs(60);
    assert_eq!(expire(&f, later, Duration::from_secs(4)), vec![]);
    assert_eq!(
        f.take_log(),
        [format!("end idle {conn} expired=true"), format!("end {s}")]
    );
    assert_eq!(f.counts(), (0, 0));
}

#[test]
fn an_expired_sessions_slot_serves_a_waiting_promise_request() {
    let (f, key) = Fake::new(1);
    let t0 = Instant::now();
    let s = f.busy_session(key);
    f.promise_waiter(key, 7);
    f.sessions.borrow_mut().stream_done(key, s, t0);
    let idle = Duration::from_secs(4);
    assert_eq!(
        expire_sessions(&f, t0 + Duration::from_secs(1), idle),
        vec![]
    );
    assert!(f.take_log().is_empty(), "not yet");
    assert_eq!(expire_sessions(&f, t0 + idle, idle), vec![]);
    let new = s + 1;
    assert_eq!(
        f.take_log(),
        [
            format!("end {s}"),
            format!("open {new}"),
            format!("serve 7 on {new}")
        ]
    );
}

#[test]
fn a_replay_counts_a_close_a_replay_and_a_new_connection_in_the_same_slot() {
    let (f, key) = Fake::new(1);
    f.in_use(key);
    replaying(&f, key);
    let stats = f.pool.borrow().stats;
    assert_eq!(
        (
            stats.create_socket_count,
            stats.close_socket_count,
            stats.replay_count
        ),
        (2, 1, 1)
    );
    assert_eq!(f.counts(), (1, 0), "one slot, still taken");
}

#[test]
fn a_sweep_keeps_named_keys_and_forgets_what_the_swept_ones_learnt() {
    let (f, a) = Fake::new(1);
    let (b, c) = {
        let mut pool = f.pool.borrow_mut();
        (pool.key("b:80:"), pool.key("c:80:"))
    };
    // `b` waits for a connect that may speak HTTP/2: its requests wait for it.
    f.sessions.borrow_mut().connecting(b);
    assert_eq!(f.sessions.borrow_mut().route(b, 1, |_| TEN), Route::Wait);
    let named = HashSet::from([c]);
    let mut swept = sweep(&f, 0, &named);
    swept.sort_by_key(|k| k.0);
    assert_eq!(swept, vec![a, b], "the empty keys nobody names");
    assert_eq!(f.pool.borrow().key_name(c), "c:80:", "a named key stays");
    assert_eq!(
        f.sessions.borrow_mut().route(b, 2, |_| TEN),
        Route::Checkout,
        "what `b` knew went with it"
    );
    assert!(sweep(&f, 0, &named).is_empty(), "once");
}
