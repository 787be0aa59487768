//! What the pool's rules need of one connection: the state it is in, the request path it
//! serves, and how its transport stands. From these alone: whether a connection whose request
//! ended may go back to the pool, what a checkout makes of an idle one, and what its close
//! frees. The binding keeps the connections (sockets, pumps, hyper's senders) and asks here.

use super::{Fit, Grant, KeyId, Path, Pool};

/// Where a connection is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    Connecting,
    Active,
    Idle,
    /// Its connection died before answering a replayable request: a new one is being opened
    /// under the same socket (see `crate::replay`).
    Replaying,
    Closed,
}

impl State {
    /// Whether the end of a connect concerns a connection in this state: one closed meanwhile
    /// is done with it (its close freed its slot; what connected anyway closes unused).
    pub fn awaits_connect(self) -> bool {
        matches!(self, State::Connecting | State::Replaying)
    }

    /// What the end of a drop-in connect (`up` or not) makes of a connection that awaited it
    /// in this state (see [`Self::awaits_connect`]).
    pub fn connect_end(self, up: bool) -> ConnectEnd {
        match (self, up) {
            (State::Replaying, true) => ConnectEnd::Resume,
            (State::Replaying, false) => ConnectEnd::ReplayFailed,
            (_, true) => ConnectEnd::Up,
            (_, false) => ConnectEnd::Failed,
        }
    }
}

/// What the end of a drop-in connect makes of its connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnectEnd {
    /// Up: its socket hears that it connected.
    Up,
    /// Not up: it closes, the pool counts a failed connect (see [`Pool::connect_failed`]),
    /// and its socket hears why before a waiter takes its slot.
    Failed,
    /// A replay's connection is up: the replayed request goes out on it, and what was written
    /// since follows.
    Resume,
    /// A replay's connection could not open: the request fails as its first attempt did (its
    /// socket, destroyed with the error, counts the error and the close): no connect failure
    /// is counted, as the socket had connected once.
    ReplayFailed,
}

/// The request path a connection belongs to: opened by one, it stays with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// `http.request` through the agent: Node's HTTP code over the agent's socket.
    DropIn,
    /// `agent.request()`: hyper on tokio.
    Promise,
    /// `http.request` over a stream a hook of the program's made (`createConnection`, or a
    /// `createSocket()` that passes on a stream of its own): its bytes never reach Rust, and
    /// JavaScript reports its close the moment it happens, so it is never peeked nor replayed.
    Foreign,
}

impl Mode {
    /// The request path it serves, as the pool counts it: a hook's stream serves
    /// `http.request`.
    pub fn path(self) -> Path {
        match self {
            Mode::Promise => Path::Promise,
            Mode::DropIn | Mode::Foreign => Path::DropIn,
        }
    }
}

/// How a connection's transport stands, as far as reuse goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Carrier {
    /// Nothing carries it (opening, replaying, closed), or a hook's stream, whose bytes never
    /// reach Rust.
    None,
    /// A byte stream (a plain socket, or a connection pumped on tokio): `clean` when nothing
    /// is half-written and its sending side is not closed.
    Stream { clean: bool },
    /// hyper's connection: `idle_open` when its request half is back with it and the
    /// connection has not closed.
    Hyper { idle_open: bool },
    /// An HTTP/2 session (it never idles in the pool's lists).
    Session,
}

/// One connection as the rules see it.
#[derive(Clone, Copy, Debug)]
pub struct Conn {
    pub mode: Mode,
    pub state: State,
    /// Its peer's end came (the connection cannot carry another request).
    pub eof: bool,
    pub carrier: Carrier,
}

impl Conn {
    /// Whether it can carry a request right now. `open` asks the transport of a byte stream
    /// (a peek at a plain socket, what a pump has seen), only when that is needed.
    fn alive(&self, open: impl FnOnce() -> bool) -> bool {
        match (self.mode, self.carrier) {
            (Mode::Promise, Carrier::Hyper { idle_open }) => idle_open,
            (Mode::Promise, _) => false,
            // JavaScript reports its stream's close the moment it happens (the pool forgets it
            // then): while the pool lists it, it is open.
            (Mode::Foreign, _) => true,
            (Mode::DropIn, _) => open(),
        }
    }

    /// Whether it may go back to the pool now that its request is over: still in use, and
    /// nothing half-written, half-closed or closed.
    pub fn reusable(&self, open: impl FnOnce() -> bool) -> bool {
        if self.state != State::Active {
            return false;
        }
        match self.mode {
            Mode::Promise => self.alive(open),
            // JavaScript checked its stream before releasing it.
            Mode::Foreign => true,
            Mode::DropIn => !self.eof && matches!(self.carrier, Carrier::Stream { clean: true }),
        }
    }

    /// What a checkout by a request of path `wanted` makes of it, idle (a hook's stream
    /// serves `http.request`, as the drop-in path's connections do).
    pub fn fit(&self, wanted: Mode, open: impl FnOnce() -> bool) -> Fit {
        let serves = self.mode == wanted || (self.mode == Mode::Foreign && wanted == Mode::DropIn);
        if !serves {
            Fit::Other
        } else if self.alive(open) {
            Fit::Take
        } else {
            Fit::Dead
        }
    }
}

impl<C> Pool<C> {
    /// Connection `conn` of `key` closed while in state `was`: its slot is free again (a busy
    /// one's, or an idle one's taken out of the idle list), given to a waiter if one may have
    /// it. A connection that had closed already frees nothing.
    pub fn close_conn(
        &mut self,
        key: KeyId,
        was: State,
        is: impl FnMut(&C) -> bool,
    ) -> Option<Grant> {
        match was {
            State::Connecting | State::Replaying | State::Active => self.closed(key),
            State::Idle => self.evict(key, is).and_then(|(_, grant)| grant),
            State::Closed => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;
    use crate::pool::{Checkout, Limits, Release, Scheduling, Waiter};

    #[test]
    fn a_connect_ends_by_the_state_it_found() {
        assert!(State::Connecting.awaits_connect());
        assert!(State::Replaying.awaits_connect());
        for done in [State::Active, State::Idle, State::Closed] {
            assert!(!done.awaits_connect(), "{done:?}");
        }
        assert_eq!(State::Connecting.connect_end(true), ConnectEnd::Up);
        assert_eq!(State::Connecting.connect_end(false), ConnectEnd::Failed);
        assert_eq!(State::Replaying.connect_end(true), ConnectEnd::Resume);
        assert_eq!(
            State::Replaying.connect_end(false),
            ConnectEnd::ReplayFailed
        );
    }

    fn conn(mode: Mode, state: State, carrier: Carrier) -> Conn {
        Conn {
            mode,
            state,
            eof: false,
            carrier,
        }
    }

    const CLEAN: Carrier = Carrier::Stream { clean: true };
    const DIRTY: Carrier = Carrier::Stream { clean: false };

    #[test]
    fn a_drop_in_connection_goes_back_only_when_active_clean_and_not_ended() {
        let ok = conn(Mode::DropIn, State::Active, CLEAN);
        assert!(ok.reusable(|| true));
        assert!(!conn(Mode::DropIn, State::Active, DIRTY).reusable(|| true));
        assert!(!Conn { eof: true, ..ok }.reusable(|| true));
        for state in [
            State::Connecting,
            State::Idle,
            State::Replaying,
            State::Closed,
        ] {
            assert!(!Conn { state, ..ok }.reusable(|| true), "{state:?}");
        }
        assert!(!conn(Mode::DropIn, State::Active, Carrier::None).reusable(|| true));
        // Its transport's word on being open is asked at checkout, not at release.
        assert!(ok.reusable(|| panic!("not asked")));
    }

    #[test]
    fn a_promise_connection_goes_back_only_with_hypers_request_half_open() {
        let open = Carrier::Hyper { idle_open: true };
        assert!(conn(Mode::Promise, State::Active, open).reusable(|| false));
        let closed = Carrier::Hyper { idle_open: false };
        assert!(!conn(Mode::Promise, State::Active, closed).reusable(|| true));
        assert!(!conn(Mode::Promise, State::Active, Carrier::Session).reusable(|| true));
        assert!(!conn(Mode::Promise, State::Closed, open).reusable(|| true));
    }

    #[test]
    fn a_hooks_stream_goes_back_while_active_and_is_never_peeked() {
        let hooked = conn(Mode::Foreign, State::Active, Carrier::None);
        assert!(hooked.reusable(|| panic!("a hook's stream is not peeked")));
        assert!(!Conn {
            state: State::Closed,
            ..hooked
        }
        .reusable(|| true));
        let idle = Conn {
            state: State::Idle,
            ..hooked
        };
        assert_eq!(idle.fit(Mode::DropIn, || panic!("not peeked")), Fit::Take);
    }

    #[test]
    fn a_checkout_takes_a_live_connection_of_its_own_path() {
        let idle = conn(Mode::DropIn, State::Idle, CLEAN);
        assert_eq!(idle.fit(Mode::DropIn, || true), Fit::Take);
        assert_eq!(idle.fit(Mode::DropIn, || false), Fit::Dead);
        // The other path's connection is left for it, healthy or not, and not peeked.
        assert_eq!(idle.fit(Mode::Promise, || panic!("not peeked")), Fit::Other);
        let promise = conn(
            Mode::Promise,
            State::Idle,
            Carrier::Hyper { idle_open: true },
        );
        assert_eq!(promise.fit(Mode::Promise, || false), Fit::Take);
        assert_eq!(promise.fit(Mode::DropIn, || true), Fit::Other);
        let gone = conn(
            Mode::Promise,
            State::Idle,
            Carrier::Hyper { idle_open: false },
        );
        assert_eq!(gone.fit(Mode::Promise, || true), Fit::Dead);
        // A hook's stream serves http.request only.
        let hooked = conn(Mode::Foreign, State::Idle, Carrier::None);
        assert_eq!(hooked.fit(Mode::Promise, || true), Fit::Other);
    }

    #[test]
    fn the_pool_counts_a_mode_by_its_path() {
        assert_eq!(Mode::DropIn.path(), Path::DropIn);
        assert_eq!(Mode::Foreign.path(), Path::DropIn);
        assert_eq!(Mode::Promise.path(), Path::Promise);
    }

    fn pool() -> (Pool<u32>, KeyId) {
        let mut pool = Pool::new(Limits {
            max_sockets: 1,
            max_free_sockets: 1,
            max_total_sockets: usize::MAX,
            scheduling: Scheduling::Fifo,
        });
        let key = pool.key("a");
        (pool, key)
    }

    #[test]
    fn a_close_frees_the_slot_of_a_busy_or_idle_connection_once() {
        // Busy (connecting, in use or replaying): its slot goes to the waiter.
        for was in [State::Connecting, State::Active, State::Replaying] {
            let (mut pool, key) = pool();
            assert!(matches!(
                pool.checkout(key, Waiter::DropIn, |_| Fit::Take, &mut Vec::new()),
                Checkout::Connect
            ));
            assert!(matches!(
                pool.checkout(key, Waiter::DropIn, |_| Fit::Take, &mut Vec::new()),
                Checkout::Queued(_)
            ));
            let grant = pool.close_conn(key, was, |_| false);
            assert!(grant.is_some(), "{was:?}");
            assert_eq!(pool.stats.close_socket_count, 1);
        }
        // Idle: taken out of the idle list (once), its close counted.
        let (mut pool, key) = pool();
        pool.checkout(key, Waiter::DropIn, |_| Fit::Take, &mut Vec::new());
        let idle = Some(Duration::from_secs(5));
        let released = pool.release(key, 7, Path::DropIn, idle, Instant::now());
        assert!(matches!(released, Release::Idle));
        assert!(pool.close_conn(key, State::Idle, |&c| c == 7).is_none());
        assert_eq!(pool.stats.close_socket_count, 1);
        assert!(pool.close_conn(key, State::Idle, |&c| c == 7).is_none());
        assert_eq!(pool.stats.close_socket_count, 1);
        let next = pool.checkout(key, Waiter::DropIn, |_| Fit::Take, &mut Vec::new());
        assert!(
            matches!(next, Checkout::Connect),
            "the idle connection is gone"
        );
        // Closed already: nothing more is freed or counted.
        let closes = pool.stats.close_socket_count;
        assert!(pool.close_conn(key, State::Closed, |_| true).is_none());
        assert_eq!(pool.stats.close_socket_count, closes);
    }
}
