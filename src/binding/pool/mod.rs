//! One agent's pool on its JavaScript thread: the bookkeeping of [`crate::pool::Pool`] joined to
//! the connections it counts, the idle-expiry timer and the connects running on tokio.
//!
//! Nothing here calls into JavaScript from inside a JavaScript call: methods return what
//! JavaScript must do next (serve a waiter of `http.request`, connect for it); only libuv
//! callbacks (readiness, the timer, tokio's completions) call out. A waiter of
//! `agent.request()` is served here, without JavaScript (see [`PoolCell::give`]). The
//! drop-in path's connects are in `connect.rs`; what the agent's watchers hear, in `events.rs`;
//! the thread's pools by id, and what a connection asks of its pool, in `table.rs`; the expiry
//! timer of idle connections and HTTP/2 sessions in `expiry.rs`.

mod connect;
mod events;
mod expiry;
mod table;

use table::POOLS;

use std::cell::{RefCell, RefMut};
use std::rc::Rc;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use napi::sys;

use super::conn::{self, Conn, Keeper, Mode};
use super::debug::debug;
use super::env::EnvCtx;
use super::js::{self, Ref};
use super::protocol::{connection, verdict};
use super::registry::Registry;
use super::uv::Handle;
use crate::pool::moves::{self, Connections, Ended};
use crate::pool::origins::Origins;
use crate::pool::Alarm;
use crate::pool::{Fit, Grant, KeyId, Limits, Path, Pool, Stats, WaiterId};
use crate::transport::establish::Endpoints;
use crate::transport::tls::TlsConfig;
use crate::transport::ConnectOptions;

pub struct PoolState {
    pub pool: Pool<u32>,
    /// When the expiry timer is set to fire.
    alarm: Alarm,
    pub connect_opts: ConnectOptions,
}

use crate::pool::multiplex::Sessions;
pub use crate::pool::ReleasePolicy;

/// See [`PoolCell::serve`]'s field.
pub type ServePromise = fn(&Rc<PoolCell>, u32, Option<u32>) -> bool;

pub struct PoolCell {
    pub id: u32,
    pub ctx: Rc<EnvCtx>,
    pub state: RefCell<PoolState>,
    /// Each key's TLS configuration (HTTPS agents: every TLS option is part of the key's
    /// name), and where its promise-path connections go (see `crate::pool::origins`).
    pub origins: RefCell<Origins>,
    /// The largest response head the promise path accepts (`maxResponseHeaderSize`).
    pub max_header_size: std::cell::Cell<usize>,
    /// The largest drop-in request kept for a replay (0: replay off).
    pub replay_limit: std::cell::Cell<usize>,
    /// How promise-path connections go back when their exchange ends.
    pub policy: std::cell::Cell<ReleasePolicy>,
    /// How long a promise-path connection may take to open, TLS handshake included (the
    /// agent's `timeout`); `None`: no limit.
    pub connect_timeout: std::cell::Cell<Option<Duration>>,
    /// Whether TLS handshakes keep their key material for 'keylog' events; read as each
    /// secret comes (see `transport::tls::logging_keys`).
    pub keylog: Arc<AtomicBool>,
    timer: RefCell<Option<Handle>>,
    /// The JavaScript agent, weakly: the agent owns the pool, not the other way round.
    agent: Ref,
    /// The promise path tries HTTP/2: by ALPN over TLS (`allowH2`), by prior knowledge over
    /// plain TCP (`h2c`).
    pub http2: std::cell::Cell<bool>,
    /// Its HTTP/2 sessions, and the requests waiting for a stream (by request id).
    pub sessions: RefCell<Sessions<u32>>,
    /// Serves a waiting `agent.request()` (by id) on a connection handed over, or on a new one
    /// in the slot it was given; false when the request is gone. The requests sit above the
    /// pool, which reaches them through this alone.
    serve: ServePromise,
    /// Whether the agent wants to hear of its `agent.request()` connections opening, closing
    /// and failing to open (a `Dispatcher` with 'connect', 'disconnect' or
    /// 'connectionError' listeners).
    pub watch_connections: std::cell::Cell<bool>,
    /// Where its drop-in connections go, one copy for those that go to the same place.
    pub endpoints: RefCell<Endpoints>,
}

impl PoolCell {
    pub fn new(
        ctx: Rc<EnvCtx>,
        agent: sys::napi_value,
        limits: Limits,
        connect_opts: ConnectOptions,
        serve: ServePromise,
    ) -> Rc<PoolCell> {
        // SAFETY: js invariant 1: a live object, an argument of the constructor call; count
        // 0 makes the reference weak (so `get` may give null, which `notify_grants` checks).
        // Deleted once, in `Drop` (js invariant 2).
        let agent = unsafe { Ref::new(ctx.env, agent, 0) };
        let cell = Rc::new(PoolCell {
            id: POOLS.with(Registry::next_id),
            ctx: ctx.clone(),
            state: RefCell::new(PoolState {
                pool: Pool::new(limits),
                alarm: Alarm::default(),
                connect_opts,
            }),
            timer: RefCell::new(None),
            origins: RefCell::new(Origins::default()),
            max_header_size: std::cell::Cell::new(16 * 1024),
            replay_limit: std::cell::Cell::new(crate::pool::settings::REPLAY_LIMIT),
            policy: std::cell::Cell::new(ReleasePolicy::default()),
            connect_timeout: std::cell::Cell::new(None),
            keylog: Arc::new(AtomicBool::new(false)),
            agent,
            http2: std::cell::Cell::new(false),
            sessions: RefCell::new(Sessions::default()),
            serve,
            watch_connections: std::cell::Cell::new(false),
            endpoints: RefCell::new(Endpoints::default()),
        });
        POOLS.with(|t| t.insert(cell.id, Rc::downgrade(&cell)));
        // SAFETY: uv.rs invariants 2 and 3: this thread's loop; the data is the cell, whose
        // `Drop` runs `shutdown`, which closes the timer before the memory goes. Test:
        // __test__/idle.test.js "an idle connection closes after freeSocketTimeout".
        let timer = unsafe { Handle::timer(ctx.uv_loop, Rc::as_ptr(&cell) as *mut _) };
        timer.set_ref(false);
        *cell.timer.borrow_mut() = Some(timer);
        cell
    }

    fn env(&self) -> sys::napi_env {
        self.ctx.env
    }

    /// A connection of `key` that starts opening now, in a slot the pool gave it.
    pub fn new_conn(self: &Rc<Self>, key: KeyId) -> Rc<Conn> {
        let keeper: std::rc::Weak<dyn Keeper> = Rc::downgrade(self) as std::rc::Weak<PoolCell>;
        let conn = Rc::new(Conn::new(conn::next_id(), key, self.id, keeper));
        conn::register(conn.clone());
        self.state.borrow_mut().pool.opening(key);
        conn
    }

    pub fn conn(&self, id: u32) -> Option<Rc<Conn>> {
        conn::by_id(id).filter(|c| c.pool_id == self.id)
    }

    /// When HTTP/2 session `id` reaches the agent's `socketActiveTTL` (`None`: no TTL).
    pub fn session_end(&self, id: u32) -> Option<Instant> {
        self.policy.get().session_end(self.conn(id)?.created)
    }

    /// Takes connection `id` out of the thread's table (it is closing); the agent's watchers
    /// hear of its end if they heard of its opening.
    pub fn remove_conn(&self, id: u32) -> Option<Rc<Conn>> {
        let conn = conn::unregister(id)?;
        if conn.announced.get() {
            let error = conn.end_error.borrow_mut().take();
            self.post_connection(conn.end_told.get(), conn.key, error);
        }
        Some(conn)
    }

    /// Closes idle connection `id`, which its socket object (if a program still holds it)
    /// hears of first (see [`Conn::end_idle`]).
    pub fn drop_idle(&self, id: u32, expired: bool) {
        if let Some(conn) = self.conn(id).filter(|_| expired) {
            conn.end_told.set(connection::DISCONNECT_IDLE_TIMEOUT);
        }
        if let Some(conn) = self.remove_conn(id) {
            conn.end_idle(&self.ctx, expired);
            conn.close(self.env());
        }
    }

    /// An idle connection (checked for life first), a new one, or a place in the queue.
    /// JavaScript then takes the connection's socket ([`PoolCell::take`]) or binds a new one.
    pub fn checkout(self: &Rc<Self>, key: KeyId) -> f64 {
        verdict::of(moves::checkout_drop_in(self, key))
    }

    /// A slot granted to a waiter: a new connection for it to bind a socket to and connect.
    pub fn open_granted(self: &Rc<Self>, key: KeyId) -> u32 {
        self.new_conn(key).id
    }

    fn key_name(&self, key: KeyId) -> String {
        self.state
            .borrow()
            .pool
            .key_name(key)
            .split("-----BEGIN")
            .next()
            .unwrap_or_default()
            .to_owned()
    }

    /// Closes connection `id` whose slot goes on to a request of the other path: the slot
    /// stays counted (the caller opens the new connection in it).
    pub fn retire(self: &Rc<Self>, id: u32) {
        moves::retire(self, id);
    }

    pub fn tls_config(&self, key: KeyId) -> Option<Arc<TlsConfig>> {
        self.origins.borrow().tls(key)
    }

    /// The socket's request finished: the connection goes to a waiter, idles for `idle`
    /// (`None`: it may serve a waiter but not idle), or closes when it cannot be reused.
    pub fn release(self: &Rc<Self>, id: u32, idle: Option<Duration>) -> f64 {
        verdict::of(moves::release(self, id, idle, Instant::now()))
    }

    /// The face of connection `id` for a new checkout, or null if it has none any more.
    pub fn take(&self, id: u32) -> sys::napi_value {
        match self.conn(id) {
            Some(conn) => conn.take(self.env()),
            None => std::ptr::null_mut(),
        }
    }

    /// The socket was destroyed: close the connection, connecting or in use.
    pub fn close(self: &Rc<Self>, id: u32) -> f64 {
        verdict::of(moves::close(self, id))
    }

    /// Takes an in-use connection out of the pool's counts: after an HTTP upgrade the socket
    /// belongs to the user, and its slot to the next request; it is not counted as closed.
    /// Returns a verdict.
    pub fn detach(self: &Rc<Self>, id: u32) -> f64 {
        verdict::of(moves::detach(self, id))
    }

    /// The sockets serving checkouts (connecting or in use), with their key names.
    pub fn active_sockets(&self) -> Vec<(String, sys::napi_value)> {
        let st = self.state.borrow();
        conn::of_pool(self.id)
            .into_iter()
            .filter(|c| c.course.serving_checkout())
            .filter_map(|c| Some((st.pool.key_name(c.key).to_owned(), c.serving(self.env())?)))
            .collect()
    }

    /// The idle connections, with their key names.
    pub fn idle_conns(&self) -> Vec<(String, Rc<Conn>)> {
        let st = self.state.borrow();
        conn::of_pool(self.id)
            .into_iter()
            .filter(|c| c.course.idle())
            .map(|c| (st.pool.key_name(c.key).to_owned(), c))
            .collect()
    }

    pub fn cancel(&self, waiter: u64) -> bool {
        self.state.borrow_mut().pool.cancel(WaiterId(waiter))
    }

    /// Called from an idle connection's readiness: its peer closed it or wrote to it.
    pub fn evict_idle(self: &Rc<Self>, conn: &Rc<Conn>) {
        conn.end_told.set(connection::DISCONNECT_OTHER_SIDE);
        let grant = moves::evict(self, conn.id);
        self.notify_grants(grant);
    }

    /// Serves the waiters that freed slots let connect: those of `agent.request()` here, and
    /// those of `http.request` through the agent (outside any JavaScript call).
    pub fn notify_grants(self: &Rc<Self>, grants: impl IntoIterator<Item = Grant>) {
        let waiters = moves::grant_all(self, grants);
        self.tell_grants(waiters);
    }

    /// Tells the agent which waiters of `http.request` may now connect (outside any
    /// JavaScript call).
    fn tell_grants(&self, waiters: Vec<WaiterId>) {
        for waiter in waiters {
            let agent = self.agent.get(self.env());
            if agent.is_null() {
                return;
            }
            let func = self.ctx.callbacks.on_grant.get(self.env());
            let waiter = js::number(self.env(), waiter.0 as f64);
            js::make_callback(self.env(), None, agent, func, &[agent, waiter]);
        }
    }

    /// New limits; returns the waiters of `http.request` they let connect (those of
    /// `agent.request()` connect now).
    pub fn set_limits(self: &Rc<Self>, limits: Limits) -> Vec<f64> {
        let waiters = moves::set_limits(self, limits);
        waiters.into_iter().map(|w| w.0 as f64).collect()
    }

    /// `agent.destroy()`: closes idle connections and HTTP/2 sessions, and returns the queued
    /// waiters to fail. Connections in use are closed by destroying their sockets.
    pub fn destroy(self: &Rc<Self>) -> Vec<f64> {
        let waiters = moves::destroy(self);
        waiters.into_iter().map(|w| w.0 as f64).collect()
    }

    pub fn stats(&self) -> Stats {
        self.state.borrow().pool.stats
    }

    /// Forgets the empty keys but the `keep` most recently used (see `moves::sweep`), with
    /// their origins; returns their ids, for JavaScript to forget too. The keys named by a
    /// connection of the pool (even one detached by an upgrade) or by `requests` stay.
    pub fn sweep_keys(self: &Rc<Self>, keep: usize, requests: Vec<KeyId>) -> Vec<u32> {
        let mut named: std::collections::HashSet<KeyId> =
            conn::of_pool(self.id).iter().map(|c| c.key).collect();
        named.extend(requests);
        let swept = moves::sweep(self, keep, &named);
        self.origins.borrow_mut().forget(&swept);
        swept.into_iter().map(|k| k.0).collect()
    }

    /// Closes every connection without telling anyone: the env is going away.
    pub fn shutdown(&self) {
        for conn in conn::take_of_pool(self.id) {
            conn.close(self.env());
        }
        if let Some(timer) = self.timer.borrow_mut().take() {
            timer.close();
        }
    }
}

/// The pool's moves (`crate::pool::moves`) over this thread's connections.
impl Connections for Rc<PoolCell> {
    fn pool(&self) -> RefMut<'_, Pool<u32>> {
        RefMut::map(self.state.borrow_mut(), |st| &mut st.pool)
    }

    fn sessions(&self) -> RefMut<'_, Sessions<u32>> {
        self.sessions.borrow_mut()
    }

    fn key_of(&self, id: u32) -> Option<KeyId> {
        self.conn(id).map(|c| c.key)
    }

    fn fit(&self, id: u32, mode: Mode) -> Fit {
        conn::by_id(id).map_or(Fit::Dead, |c| c.fit(mode))
    }

    fn reusable(&self, id: u32) -> (bool, Path) {
        self.conn(id)
            .map_or((false, Path::DropIn), |c| (c.reusable(), c.path()))
    }

    fn finished(&self, id: u32, idle: Option<Duration>) {
        if let Some(conn) = self.conn(id) {
            conn.course.finished(idle);
        }
    }

    fn open(&self, key: KeyId) -> u32 {
        self.new_conn(key).id
    }

    fn park(&self, id: u32) {
        if let Some(conn) = self.conn(id) {
            conn.park(self.env());
            self.arm_timer(&mut self.state.borrow_mut());
        }
    }

    fn end_idle(&self, id: u32, expired: bool) {
        debug!("close idle connection {id} (expired: {expired})");
        self.drop_idle(id, expired);
    }

    fn unkept(&self, id: u32) {
        // Told to the dispatcher's 'disconnect' as undici tells a connection its response
        // left unfit for another: a reset.
        use crate::client::driver::{Ending, Lanes};
        Lanes::ending(self, id, Ending::Reset);
    }

    fn end(&self, id: u32) -> Option<Ended> {
        self.conn(id)?;
        let conn = self.remove_conn(id)?;
        let state = conn.course.state();
        debug!("close connection {id} ({state:?})");
        // Its connect's hold, if any, goes with it.
        conn.close(self.env());
        Some(Ended {
            key: conn.key,
            state,
            detached: conn.course.detached(),
        })
    }

    fn detach(&self, id: u32) -> Option<KeyId> {
        let conn = self.conn(id)?;
        conn.course.detach().then_some(conn.key)
    }

    fn serve(&self, req: u32, handoff: Option<u32>) -> bool {
        debug!("serve waiting request {req}");
        (self.serve)(self, req, handoff)
    }

    fn session_end(&self, id: u32) -> Option<Instant> {
        PoolCell::session_end(self, id)
    }
}

impl Drop for PoolCell {
    fn drop(&mut self) {
        self.shutdown();
        self.agent.delete(self.ctx.env);
        // A pool dropped as its thread ends finds the table gone: nothing to take it from.
        let _ = POOLS.try_with(|t| t.remove(self.id));
    }
}
