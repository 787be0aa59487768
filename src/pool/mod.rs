//! The connection pool's bookkeeping: keys, idle lists, limits, the waiter queue, idle expiry
//! and the statistics.
//!
//! It owns no sockets. It is generic over `C`, the idle payload (the binding stores connection
//! ids; tests store plain numbers), and it never reads a clock: every call that cares about time
//! takes `now`. That keeps every rule here reachable by `cargo test` without Node, sockets or
//! timers, and lets the binding drive it from whichever loop owns the connections.
//!
//! Invariants, enforced in this file only:
//! - `key.busy + key.idle.len() <= limits.max_sockets` for every key, unless the limit was
//!   lowered at run time (then nothing new is created or pooled until it holds again);
//! - `self.total` (every busy or idle connection) `<= limits.max_total_sockets`, likewise;
//! - a key never has idle connections and waiters at once: a released connection goes to the
//!   first waiter of its key before it may go idle;
//! - waiters are served in the order they arrived, per key and, for slots freed under
//!   `max_total_sockets`, across keys.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub mod conn;
pub mod course;
mod expiry;
mod keys;
pub mod moves;
pub mod multiplex;
pub mod origins;
pub mod place;
mod release;
pub mod settings;
mod stats;
pub mod streams;

use expiry::{Expiry, Handle};

pub use expiry::Alarm;
pub use keys::KeySnapshot;
pub use release::{keep_alive_hint, Fate, ReleasePolicy, Wear};
pub use stats::{ConnEnd, Stats};

/// Which idle connection a checkout takes: the most recently used (LIFO, Node's default, keeps
/// the set of warm connections small) or the least recently used (FIFO, spreads load).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheduling {
    Lifo,
    Fifo,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Connections (busy or idle) per key: Node's `maxSockets`.
    pub max_sockets: usize,
    /// Idle connections kept per key: Node's `maxFreeSockets`.
    pub max_free_sockets: usize,
    /// Connections (busy or idle) across all keys: Node's `maxTotalSockets`.
    pub max_total_sockets: usize,
    pub scheduling: Scheduling,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_sockets: usize::MAX,
            max_free_sockets: 256,
            max_total_sockets: usize::MAX,
            scheduling: Scheduling::Lifo,
        }
    }
}

/// A pool key: one per distinct `getName()` string.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KeyId(pub u32);

/// A queued request, in arrival order (ids only grow).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WaiterId(pub u64);

/// The request path a connection serves, or a waiter came by: `http.request` through the
/// agent (Node's HTTP over a socket of ours, or over a hook's stream), or `agent.request()`.
/// A connection stays with the path that opened it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Path {
    DropIn,
    Promise,
}

/// Who a queued request is: one of `http.request`, served where it waits (JavaScript, by its
/// [`WaiterId`]), or an `agent.request()`, served by the caller at once (by the id it gave).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Waiter {
    DropIn,
    Promise(u32),
}

impl Waiter {
    pub fn path(self) -> Path {
        match self {
            Waiter::DropIn => Path::DropIn,
            Waiter::Promise(_) => Path::Promise,
        }
    }
}

/// What a checkout gives the caller.
#[derive(Debug, PartialEq, Eq)]
pub enum Checkout<C> {
    /// An idle connection, now busy.
    Reuse(C),
    /// A slot for a new connection, now counted as busy: the caller connects, then reports
    /// [`Pool::connected`] or [`Pool::connect_failed`].
    Connect,
    /// No connection and no slot: the caller waits until a release hands it a connection
    /// ([`Release::Handoff`]) or a freed slot grants it one ([`Grant`]).
    Queued(WaiterId),
}

/// What became of a released connection.
#[derive(Debug, PartialEq, Eq)]
pub enum Release<C> {
    /// Given to the first waiter of its key, of the same request path; still busy.
    Handoff(WaiterId, Waiter, C),
    /// Kept idle until its deadline.
    Idle,
    /// Not kept: the caller closes it. Its slot may have gone to a waiter (the first of its
    /// key, when that one came by the other request path).
    Close(C, Option<Grant>),
}

/// A waiter that a freed slot lets connect: its key's busy count already includes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grant {
    pub key: KeyId,
    pub waiter: WaiterId,
    pub who: Waiter,
}

/// What a checkout makes of an idle connection (see [`Pool::checkout`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fit {
    Take,
    /// Healthy, but for the other request path.
    Other,
    Dead,
}

/// Why an idle connection left the pool without being used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Eviction {
    /// Its idle deadline passed (`freeSocketTimeout`, the server's hint, `socketActiveTTL`).
    Expired,
    /// The peer closed it, reset it, or sent bytes nobody asked for.
    Dead,
    /// Closed to make room: for a request to another key under `maxTotalSockets`, or for the
    /// other request path under `maxSockets`.
    Room,
}

struct Idle<C> {
    conn: C,
    seq: u64,
    /// Its entry in the expiry lists.
    expiry: Handle,
}

/// An idle timeout this long means "no timeout": far enough never to fire, near enough that
/// `Instant + NEVER` cannot overflow.
const NEVER: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

struct Key<C> {
    /// Shared with `Pool::by_name`: an HTTPS key's name holds every TLS option (a CA bundle,
    /// often), so it is kept once.
    name: Arc<str>,
    idle: VecDeque<Idle<C>>,
    /// Connections being connected or in use.
    busy: usize,
    waiters: VecDeque<WaiterId>,
    /// When it last served a checkout (the pool's `ticks`): which empty keys a sweep keeps.
    used: u64,
    /// Swept (see [`Pool::sweep`]): its slot waits in `Pool::vacant` for the next new key.
    vacant: bool,
}

impl<C> Key<C> {
    fn count(&self) -> usize {
        self.busy + self.idle.len()
    }

    /// Nothing connected, idle or waiting.
    fn is_empty(&self) -> bool {
        self.count() == 0 && self.waiters.is_empty()
    }
}

pub struct Pool<C> {
    limits: Limits,
    keys: Vec<Key<C>>,
    by_name: HashMap<Arc<str>, KeyId>,
    /// Slots of swept keys, for new keys to take.
    vacant: Vec<KeyId>,
    /// Counts checkouts, to date each key's last use.
    ticks: u64,
    /// Busy plus idle connections across keys.
    total: usize,
    /// Idle deadlines (see `expiry.rs`); `seq` identifies the idle entry.
    expiry: Expiry,
    /// Every waiter in arrival order, for serving slots across keys fairly.
    waiters: BTreeMap<WaiterId, (KeyId, Waiter)>,
    next_seq: u64,
    next_waiter: u64,
    pub stats: Stats,
}

impl<C> Pool<C> {
    pub fn new(limits: Limits) -> Self {
        Pool {
            limits,
            keys: Vec::new(),
            by_name: HashMap::new(),
            vacant: Vec::new(),
            ticks: 0,
            total: 0,
            expiry: Expiry::default(),
            waiters: BTreeMap::new(),
            next_seq: 0,
            next_waiter: 0,
            stats: Stats::default(),
        }
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Changes the limits (Node lets users assign `agent.maxSockets` at any time). Raising a
    /// limit can let waiters connect; they are returned in order.
    pub fn set_limits(&mut self, limits: Limits) -> Vec<Grant> {
        self.limits = limits;
        let mut grants = Vec::new();
        while let Some(grant) = self.grant_slot() {
            grants.push(grant);
        }
        grants
    }

    /// Connections busy or idle, across keys.
    pub fn total(&self) -> usize {
        self.total
    }

    pub fn idle_total(&self) -> usize {
        self.expiry.len()
    }

    /// How many checkouts wait for a slot, across keys.
    pub fn waiting(&self) -> usize {
        self.waiters.len()
    }

    /// Whether `key` has all the connections `maxSockets` allows it (busy or idle).
    pub fn key_full(&self, key: KeyId) -> bool {
        self.keys[key.0 as usize].count() >= self.limits.max_sockets
    }

    /// Whether a slot of `key` freed now would go to a waiter: one of `key`, or of a key under
    /// `maxSockets`, the total then under `maxTotalSockets`.
    pub fn wants_slot_of(&self, key: KeyId) -> bool {
        self.total <= self.limits.max_total_sockets
            && self.waiters.values().any(|&(k, _)| {
                let count = self.keys[k.0 as usize]
                    .count()
                    .saturating_sub(usize::from(k == key));
                count < self.limits.max_sockets
            })
    }

    /// Takes an idle connection of `key`, or a slot for a new one, or queues `who`.
    ///
    /// `fit` judges each idle candidate, in scheduling order: [`Fit::Take`] hands it out;
    /// [`Fit::Dead`] means it cannot carry a request any more (the binding peeks at the socket
    /// for a FIN, an RST or stray bytes its idle watch has not seen yet) and it is discarded;
    /// [`Fit::Other`] means it is healthy but belongs to the other request path, and it stays
    /// unless its slot is needed. Discarded connections, and idle ones closed to make room
    /// (of another path, or under `maxTotalSockets` of another key), go to `discard` for the
    /// caller to close.
    pub fn checkout(
        &mut self,
        key: KeyId,
        who: Waiter,
        mut fit: impl FnMut(&C) -> Fit,
        discard: &mut Vec<(C, Eviction)>,
    ) -> Checkout<C> {
        let lifo = self.limits.scheduling == Scheduling::Lifo;
        self.ticks += 1;
        self.keys[key.0 as usize].used = self.ticks;
        let mut i = 0;
        loop {
            let k = &mut self.keys[key.0 as usize];
            let len = k.idle.len();
            if i >= len {
                break;
            }
            let pos = if lifo { len - 1 - i } else { i };
            match fit(&k.idle[pos].conn) {
                Fit::Other => {
                    i += 1;
                    continue;
                }
                verdict => {
                    let idle = k.idle.remove(pos).expect("index in range");
                    self.expiry.remove(idle.expiry);
                    if verdict == Fit::Take {
                        self.keys[key.0 as usize].busy += 1;
                        return Checkout::Reuse(idle.conn);
                    }
                    self.total -= 1;
                    self.stats.close_socket_count += 1;
                    discard.push((idle.conn, Eviction::Dead));
                }
            }
        }

        let mut under_key = self.keys[key.0 as usize].count() < self.limits.max_sockets;
        if !under_key || self.total >= self.limits.max_total_sockets {
            // Healthy idle connections of the other path give their slot up first, the one
            // idle longest.
            let k = &mut self.keys[key.0 as usize];
            if let Some(idle) = k.idle.pop_front() {
                self.expiry.remove(idle.expiry);
                self.total -= 1;
                self.stats.close_socket_count += 1;
                discard.push((idle.conn, Eviction::Room));
                under_key = true;
            }
        }
        if under_key && self.total >= self.limits.max_total_sockets {
            // A request should not starve behind idle connections to other origins: close the
            // one that has been idle longest (earliest deadline) to make room.
            if let Some(conn) = self.evict_other_idle(key) {
                discard.push((conn, Eviction::Room));
            }
        }
        if under_key && self.total < self.limits.max_total_sockets {
            self.keys[key.0 as usize].busy += 1;
            self.total += 1;
            return Checkout::Connect;
        }

        let waiter = WaiterId(self.next_waiter);
        self.next_waiter += 1;
        self.keys[key.0 as usize].waiters.push_back(waiter);
        self.waiters.insert(waiter, (key, who));
        Checkout::Queued(waiter)
    }

    /// A new connection of `key` starts opening, in a slot it holds (from `checkout`, or a
    /// grant). agentkeepalive counts a socket as created here, when `http.get()` returns, not
    /// once it is established; every connection counted here is later counted once as closed
    /// (or stays idle), so `create = close + in use + idle` holds.
    pub fn opening(&mut self, _key: KeyId) {
        self.stats.create_socket_count += 1;
    }

    /// A new connection of `key` could not be established: its slot is free again. Counted as
    /// agentkeepalive counts its socket: an error (after a timeout, if it timed out), then a
    /// close.
    pub fn connect_failed(&mut self, key: KeyId, timed_out: bool) -> Option<Grant> {
        // agentkeepalive's socket hears the timeout, then is destroyed with its error.
        if timed_out {
            self.stats.timeout_socket_count += 1;
        }
        self.stats.error_socket_count += 1;
        self.closed(key)
    }

    /// A busy connection of `key` closed, established or not (one given up while it opened,
    /// its request aborted or the agent destroyed, counts too, as agentkeepalive's socket
    /// does): its slot is free again.
    pub fn closed(&mut self, key: KeyId) -> Option<Grant> {
        self.stats.close_socket_count += 1;
        self.unbusy(key);
        self.grant_slot()
    }

    /// A busy connection of `key` gave its slot up without counting as closed: an HTTP
    /// upgrade (or a CONNECT) took its socket over, and agentkeepalive stops counting a socket
    /// at its 'agentRemove'.
    pub fn detached(&mut self, key: KeyId) -> Option<Grant> {
        self.unbusy(key);
        self.grant_slot()
    }

    /// A busy connection of request path `path` finished its request and can carry another:
    /// the first waiter of its key gets it, or, when that one came by the other path (which
    /// cannot use it), the connection closes and the waiter gets its slot; otherwise it stays
    /// idle for `idle` (`Duration::MAX`: no limit) if there is room, or is closed when `idle`
    /// is `None` (keep-alive off, the server's hint too short). A connection that cannot carry
    /// another request is reported with [`Pool::closed`].
    pub fn release(
        &mut self,
        key: KeyId,
        conn: C,
        path: Path,
        idle: Option<Duration>,
        now: Instant,
    ) -> Release<C> {
        let k = &mut self.keys[key.0 as usize];
        if let Some(waiter) = k.waiters.pop_front() {
            let who = match self.waiters.remove(&waiter) {
                Some((_, who)) => who,
                None => Waiter::DropIn,
            };
            if who.path() == path {
                return Release::Handoff(waiter, who, conn);
            }
            // The slot goes on to the waiter, still counted as busy.
            self.stats.close_socket_count += 1;
            return Release::Close(conn, Some(Grant { key, waiter, who }));
        }
        let room = k.idle.len() < self.limits.max_free_sockets
            && k.count() <= self.limits.max_sockets
            && self.total <= self.limits.max_total_sockets
            // Waiters of other keys blocked by `maxTotalSockets`: closing this connection lets
            // one of them connect, keeping it idle would not.
            && (self.waiters.is_empty() || self.total < self.limits.max_total_sockets);
        match idle {
            Some(timeout) if room => {
                let k = &mut self.keys[key.0 as usize];
                k.busy -= 1;
                let seq = self.next_seq;
                self.next_seq += 1;
                let (_, expiry) = self.expiry.insert(now, timeout.min(NEVER), seq, key);
                self.keys[key.0 as usize]
                    .idle
                    .push_back(Idle { conn, seq, expiry });
                Release::Idle
            }
            _ => Release::Close(conn, self.closed(key)),
        }
    }

    /// Removes the idle connection of `key` that `is` picks (its peer closed it, or it is being
    /// destroyed). Returns it, and a waiter its slot now lets connect.
    pub fn evict(
        &mut self,
        key: KeyId,
        mut is: impl FnMut(&C) -> bool,
    ) -> Option<(C, Option<Grant>)> {
        let k = &mut self.keys[key.0 as usize];
        let pos = k.idle.iter().position(|idle| is(&idle.conn))?;
        let idle = k.idle.remove(pos)?;
        self.expiry.remove(idle.expiry);
        self.total -= 1;
        self.stats.close_socket_count += 1;
        Some((idle.conn, self.grant_slot()))
    }

    /// Removes every idle connection whose deadline is at or before `now` into `out`, and returns
    /// the waiters their slots let connect.
    pub fn expire(&mut self, now: Instant, out: &mut Vec<C>) -> Vec<Grant> {
        let mut grants = Vec::new();
        while let Some((deadline, seq, key, handle)) = self.expiry.first() {
            if deadline > now {
                break;
            }
            self.expiry.remove(handle);
            let k = &mut self.keys[key.0 as usize];
            if let Some(pos) = k.idle.iter().position(|idle| idle.seq == seq) {
                if let Some(idle) = k.idle.remove(pos) {
                    out.push(idle.conn);
                }
                self.total -= 1;
                self.stats.close_socket_count += 1;
                self.stats.timeout_socket_count += 1;
                if let Some(grant) = self.grant_slot() {
                    grants.push(grant);
                }
            }
        }
        grants
    }

    /// When the next idle connection expires.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.expiry.first().map(|(deadline, ..)| deadline)
    }

    /// Takes a waiter out of the queue (its request was aborted). False if it was not queued.
    pub fn cancel(&mut self, waiter: WaiterId) -> bool {
        let Some((key, _)) = self.waiters.remove(&waiter) else {
            return false;
        };
        let k = &mut self.keys[key.0 as usize];
        if let Some(pos) = k.waiters.iter().position(|&w| w == waiter) {
            k.waiters.remove(pos);
        }
        true
    }

    /// Empties the pool for `agent.destroy()`: every idle connection (to close) and every waiter
    /// (to fail). Busy connections stay counted until the caller reports them closed.
    pub fn drain(&mut self) -> (Vec<C>, Vec<WaiterId>) {
        let mut idle = Vec::new();
        for k in &mut self.keys {
            k.waiters.clear();
            idle.extend(k.idle.drain(..).map(|entry| entry.conn));
        }
        self.total -= idle.len();
        self.stats.close_socket_count += idle.len() as u64;
        self.expiry.clear();
        let waiters = std::mem::take(&mut self.waiters).into_keys().collect();
        (idle, waiters)
    }

    /// The waiters of `key` in the order they will be served.
    pub fn waiters_of(&self, key: KeyId) -> impl Iterator<Item = WaiterId> + '_ {
        self.keys[key.0 as usize].waiters.iter().copied()
    }

    /// The idle connections of `key`, oldest first.
    pub fn idle_of(&self, key: KeyId) -> impl Iterator<Item = &C> + '_ {
        self.keys[key.0 as usize].idle.iter().map(|idle| &idle.conn)
    }

    fn unbusy(&mut self, key: KeyId) {
        let k = &mut self.keys[key.0 as usize];
        debug_assert!(k.busy > 0, "a key's busy count went below zero");
        k.busy -= 1;
        self.total -= 1;
    }

    /// Gives a free slot to the oldest waiter whose key is under `maxSockets`.
    fn grant_slot(&mut self) -> Option<Grant> {
        if self.waiters.is_empty() {
            return None;
        }
        if self.total >= self.limits.max_total_sockets {
            return None;
        }
        let max = self.limits.max_sockets;
        let (&waiter, &(key, who)) = self
            .waiters
            .iter()
            .find(|(_, (key, _))| self.keys[key.0 as usize].count() < max)?;
        self.waiters.remove(&waiter);
        let k = &mut self.keys[key.0 as usize];
        if let Some(pos) = k.waiters.iter().position(|&w| w == waiter) {
            k.waiters.remove(pos);
        }
        k.busy += 1;
        self.total += 1;
        Some(Grant { key, waiter, who })
    }

    /// Closes the idle connection of another key that expires first.
    fn evict_other_idle(&mut self, key: KeyId) -> Option<C> {
        let (seq, other, handle) = self.expiry.first_not_of(key)?;
        self.expiry.remove(handle);
        let k = &mut self.keys[other.0 as usize];
        let pos = k.idle.iter().position(|idle| idle.seq == seq)?;
        let idle = k.idle.remove(pos)?;
        self.total -= 1;
        self.stats.close_socket_count += 1;
        Some(idle.conn)
    }
}

#[cfg(test)]
mod scale_bench;
#[cfg(test)]
mod tests;
