//! One pooled connection as the JavaScript thread drives it.
//!
//! The design, and why: a request through Node's `http` exchanges a few small writes and reads
//! per connection. Handing each of them between the JavaScript thread and a tokio thread costs
//! a thread wake-up both ways, more than the I/O itself (a prototype that did so ran at 0.6x
//! Node's agent). So while a connection is checked out, or idle in the pool, its socket is
//! watched by a libuv poll handle on the JavaScript thread's own loop, and Rust reads and
//! writes it there with plain non-blocking syscalls, exactly where `net.Socket` would: no
//! thread hop per request at all. tokio only connects (DNS, Happy Eyeballs), which is once per
//! connection; a connect that needs none of that (an IP address, nothing to bind, no proxy)
//! starts here too, watched by the same poll handle until it ends (`Conn::dial`).
//!
//! - Reads: on readiness, read until the socket is drained (or 32 reads), one JavaScript call
//!   per read with a copied Buffer. Back-pressure: JavaScript stops reading (`readStop`) when
//!   its stream is full, which removes the socket from the poll set, so the kernel's receive
//!   window fills and the server stalls.
//! - Writes: `sendmsg` straight from the JavaScript call (a corked flush is one call); only what
//!   the kernel refuses is copied and finished on writability, with one completion callback.
//! - Idle: no JavaScript object at all; readiness means the peer closed, reset or sent stray
//!   bytes, and the connection is evicted at once. The handle is unreferenced, so idle
//!   connections never keep the process alive.
//!
//! On Windows, this path is not taken: a plain connection is pumped on tokio as a TLS one is
//! (see `transport::carry` for why), so there is no plain socket on the JavaScript thread there.
//!
//! `plain.rs` holds the plain socket's side (the poll handle and its syscalls), `face.rs` the
//! JavaScript socket that is the connection's face, `lost.rs` what a connection that ends in
//! use does (a replay, or its socket told), `table.rs` the thread's connections by id.

mod face;
mod lost;
#[cfg(unix)]
mod plain;
mod table;

use face::Owner;
#[cfg(unix)]
pub use plain::dial_error;
#[cfg(unix)]
use plain::Plain;
pub use table::{by_id, next_id, of_pool, register, take_all, take_of_pool, unregister};

use std::cell::{Cell, RefCell};
use std::net::SocketAddr;
use std::rc::{Rc, Weak};
use std::sync::Arc;
use std::time::Instant;

use napi::sys;

use super::env::{EnvCtx, Hold};
use super::js;
use super::protocol::write;
use crate::client;
use crate::error::{uv_errno, Error};
use crate::pool::conn::Carrier;
use crate::pool::course::{Course, Gate};
use crate::pool::KeyId;
use crate::transport::establish::Endpoint;
use crate::transport::pump::{self, Event, Remote};
use crate::transport::tls::{TlsConfig, TlsInfo};
use crate::transport::Peer;

pub use crate::pool::conn::{Mode, State};

pub struct Conn {
    pub id: u32,
    pub pool_id: u32,
    pub key: KeyId,
    /// The pool that counts it, which sits above it (see [`Keeper`]).
    keeper: Weak<dyn Keeper>,
    /// Where it is in its life, and what that decides (see `crate::pool::course`).
    pub course: Course,
    /// What carries its bytes (see [`Io`]).
    io: RefCell<Io>,
    owner: Cell<Option<Owner>>,
    pub abort: RefCell<Option<tokio::task::AbortHandle>>,
    pub created: Instant,
    pub local: Cell<Option<SocketAddr>>,
    pub remote: RefCell<Option<Peer>>,
    /// For TLS: the session's details.
    pub tls: RefCell<Option<Box<TlsInfo>>>,
    /// A drop-in connect runs on tokio for this connection and keeps the process alive until
    /// it reports or the connection closes, whichever comes first. A promise-path connect is
    /// held by its request instead.
    pub connect_hold: RefCell<Option<Hold>>,
    /// For the promise path, while the user's `lookup` runs: where its addresses go.
    pub lookup: RefCell<Option<tokio::sync::oneshot::Sender<Vec<std::net::IpAddr>>>>,
    /// Where the connection goes (kept for a replay's new connection), shared with the pool's
    /// other connections that go there (see `Endpoints`).
    pub target: RefCell<Option<Rc<Endpoint>>>,
    /// A promise-path connect that may become an HTTP/2 session is under way: requests of its
    /// key wait for it (`pool::multiplex`) until it reports, or closes.
    pub h2_pending: Cell<bool>,
    /// Its opening was told to the agent's watchers (`PoolCell::post_connection`): its end
    /// will be too.
    pub announced: Cell<bool>,
    /// How its end is told to the watchers (a `protocol::connection` kind of `DISCONNECT`),
    /// and with which error, if its exchange failed.
    pub end_told: Cell<u32>,
    pub end_error: RefCell<Option<Error>>,
    /// Its socket was destroyed in use: its bytes stopped, its slot held until `close`
    /// ([`Conn::halt`]).
    pub halted: Cell<bool>,
    /// What its socket last set with `setNoDelay()`, `setKeepAlive()` (with the delay in ms)
    /// and `setTypeOfService()`: set on each connection it attaches, so that what a socket
    /// sets while its connection opens, or before a replay's, holds there too.
    no_delay: Cell<Option<bool>>,
    keep_alive: Cell<Option<(bool, u32)>>,
    tos: Cell<Option<u8>>,
}

/// What carries a connection's bytes: one kind at a time. A replay or the close takes the
/// transport away.
enum Io {
    /// Nothing yet (opening, replaying) or any more (closed); or a hook's stream, whose bytes
    /// never reach Rust.
    None,
    /// A plain socket driven on this thread's loop (the drop-in path).
    #[cfg(unix)]
    Plain(Plain),
    /// A connection pumped on tokio (TLS, or through a proxy reached over TLS; on Windows, any
    /// drop-in connection).
    Pumped {
        remote: Arc<Remote>,
        /// Held while the connection keeps the thread's inbox referenced (a pumped connection
        /// serving a referenced socket keeps the process alive, as an active socket does).
        holding: Option<Hold>,
    },
    /// The promise path's HTTP/2 connection: many exchanges at once, each with a sender of
    /// its own ([`Conn::stream`]); it never idles in the pool (see `pool::multiplex`).
    Session {
        sender: client::Sender,
        stopper: client::Stopper,
    },
    /// The promise path's hyper connection.
    Hyper {
        /// Its request half while the connection is idle (an exchange in flight holds it).
        sender: Option<client::Sender>,
        /// What stops the exchange running in the connection's task (see
        /// `client::Sender::start`), shared by the requests it serves; made on first use.
        stopper: Option<Rc<client::Stopper>>,
    },
}

/// What a connection asks of the pool that counts it. The pool sits above the connection
/// (it holds and hands out connections); the connection reaches it through this alone.
pub trait Keeper {
    /// The JavaScript thread's context the pool lives on.
    fn ctx(&self) -> &Rc<EnvCtx>;
    /// The largest drop-in request kept for a replay (0: replay off).
    fn replay_limit(&self) -> usize;
    /// The TLS configuration of `key`, for an HTTPS key.
    fn tls_config(&self, key: KeyId) -> Option<Arc<TlsConfig>>;
    /// `conn` lost its network connection before an answer and replays its request: the pool
    /// opens another for it.
    fn replayed(self: Rc<Self>, conn: &Rc<Conn>);
    /// Idle `conn` was found closed or unusable (by its poll handle: a pumped connection's
    /// events reach the pool directly): the pool forgets it.
    #[cfg(unix)]
    fn evict_idle(self: Rc<Self>, conn: &Rc<Conn>);
    /// The connect `conn` started on this thread (`Conn::dial`) ended, as its socket's poll
    /// handle told (`status` < 0: libuv's error).
    #[cfg(unix)]
    fn dialed(self: Rc<Self>, conn: &Rc<Conn>, status: std::os::raw::c_int);
}

impl Conn {
    pub fn new(id: u32, key: KeyId, pool_id: u32, keeper: Weak<dyn Keeper>) -> Conn {
        Conn {
            id,
            pool_id,
            key,
            keeper,
            course: Course::new(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0.0, |d| d.as_millis() as f64),
            ),
            io: RefCell::new(Io::None),
            owner: Cell::new(None),
            abort: RefCell::new(None),
            created: Instant::now(),
            local: Cell::new(None),
            remote: RefCell::new(None),
            tls: RefCell::new(None),
            connect_hold: RefCell::new(None),
            lookup: RefCell::new(None),
            target: RefCell::new(None),
            h2_pending: Cell::new(false),
            announced: Cell::new(false),
            end_told: Cell::new(crate::binding::protocol::connection::DISCONNECT),
            end_error: RefCell::new(None),
            halted: Cell::new(false),
            no_delay: Cell::new(None),
            keep_alive: Cell::new(None),
            tos: Cell::new(None),
        }
    }

    /// The pool that counts it, while it lives.
    pub fn keeper(&self) -> Option<Rc<dyn Keeper>> {
        self.keeper.upgrade()
    }

    /// Runs `f` with the TLS configuration of the connection's pool key and its session, if it
    /// has them.
    pub fn with_tls(&self, f: impl FnOnce(&TlsConfig, &TlsInfo)) {
        let Some(config) = self.keeper().and_then(|pool| pool.tls_config(self.key)) else {
            return;
        };
        if let Some(info) = self.tls.borrow().as_deref() {
            f(&config, info);
        }
    }

    /// Records why the server's name did not check out on a connection that went on
    /// (`rejectUnauthorized: false`), for a socket made for it later.
    pub fn set_name_error(&self, code: String) {
        if let Some(info) = self.tls.borrow_mut().as_deref_mut() {
            info.name_error = Some(code);
        }
    }

    /// Takes over a connection pumped on tokio (a TLS one, with its session's details).
    pub fn attach_pumped(&self, ctx: &Rc<EnvCtx>, remote: Arc<Remote>, info: Option<Box<TlsInfo>>) {
        *self.io.borrow_mut() = Io::Pumped {
            remote,
            holding: None,
        };
        *self.tls.borrow_mut() = info;
        self.course.set_state(State::Active);
        self.sync_ref_with(ctx);
    }

    fn pumped(&self) -> Option<Arc<Remote>> {
        match &*self.io.borrow() {
            Io::Pumped { remote, .. } => Some(remote.clone()),
            _ => None,
        }
    }

    /// A promise-path connection goes idle with hyper's request half.
    pub fn keep_sender(&self, sender: client::Sender) {
        let mut io = self.io.borrow_mut();
        match &mut *io {
            Io::Hyper { sender: kept, .. } => *kept = Some(sender),
            _ => {
                *io = Io::Hyper {
                    sender: Some(sender),
                    stopper: None,
                }
            }
        }
    }

    /// Makes this promise-path connection an HTTP/2 session, with its request half.
    pub fn make_session(&self, sender: client::Sender) {
        let stopper = sender.stopper();
        *self.io.borrow_mut() = Io::Session { sender, stopper };
    }

    /// Whether it is an `agent.request()` connection that carries exchanges: one that has
    /// opened (an HTTP/1.1 connection or an HTTP/2 session), not one still connecting.
    pub fn exchanges(&self) -> bool {
        matches!(&*self.io.borrow(), Io::Session { .. } | Io::Hyper { .. })
    }

    /// A sender for one more stream, if this is an open HTTP/2 session.
    pub fn stream(&self) -> Option<client::Sender> {
        match &*self.io.borrow() {
            Io::Session { sender, .. } if !sender.is_closed() => sender.stream(),
            _ => None,
        }
    }

    /// How many streams this HTTP/2 session takes at once (0 when it is not one), and how
    /// many its server said it takes, once its settings have come.
    pub fn max_streams(&self) -> (usize, Option<usize>) {
        match &*self.io.borrow() {
            Io::Session { sender, .. } => (sender.max_streams(), sender.said_max_streams()),
            _ => (0, None),
        }
    }

    /// Takes hyper's request half of an idle promise-path connection, with what stops the
    /// exchanges it runs in the connection's task.
    pub fn take_sender(&self) -> Option<(client::Sender, Rc<client::Stopper>)> {
        let mut io = self.io.borrow_mut();
        let Io::Hyper { sender, stopper } = &mut *io else {
            return None;
        };
        let sender = sender.take()?;
        let stopper = stopper
            .get_or_insert_with(|| Rc::new(sender.stopper()))
            .clone();
        Some((sender, stopper))
    }

    /// The connection as the pool's rules see it (see `crate::pool::conn`). Whether its byte
    /// stream is clean matters only for one in use (a release asks it): an idle one's is not
    /// looked at (a pump's takes a lock), and counts as not clean.
    fn facts(&self) -> crate::pool::conn::Conn {
        let in_use = self.course.state() == State::Active;
        let carrier = match &*self.io.borrow() {
            Io::None => Carrier::None,
            #[cfg(unix)]
            Io::Plain(plain) => Carrier::Stream {
                clean: in_use && !plain.shutdown_after_flush && plain.outbox.is_empty(),
            },
            Io::Pumped { remote, .. } => Carrier::Stream {
                clean: in_use && remote.is_clean(),
            },
            Io::Session { .. } => Carrier::Session,
            Io::Hyper { sender, .. } => Carrier::Hyper {
                idle_open: sender.as_ref().is_some_and(|s| !s.is_closed()),
            },
        };
        self.course.facts(carrier)
    }

    /// Whether its byte stream is open: what the pump has seen of a pumped connection (it
    /// reads an idle one all along, so it knows of a close at once), a peek at a plain socket.
    fn stream_open(&self) -> bool {
        match self.pumped() {
            Some(remote) => !remote.is_dead(),
            None => self.plain_alive(),
        }
    }

    /// True when the connection may go back to the pool: nothing half-written, nothing
    /// half-closed.
    pub fn reusable(&self) -> bool {
        self.facts().reusable(|| self.stream_open())
    }

    /// The request path it serves, as the pool knows it (a hook's stream serves `http.request`).
    pub fn path(&self) -> crate::pool::Path {
        self.course.mode().path()
    }

    /// What a checkout for `mode` makes of this idle connection.
    pub fn fit(&self, mode: Mode) -> crate::pool::Fit {
        self.facts().fit(mode, || self.stream_open())
    }

    pub fn set_reading(&self, on: bool) {
        self.course.set_reading(on);
        if let Some(remote) = self.pumped() {
            remote.set_reading(self.course.pump_reads());
            return;
        }
        self.update_mask();
    }

    pub fn set_ref(&self, on: bool) {
        self.course.set_ref(on);
        self.sync_ref();
    }

    fn sync_ref(&self) {
        self.sync_connect_hold();
        #[cfg(unix)]
        if let Io::Plain(plain) = &*self.io.borrow() {
            if let Some(poll) = &plain.poll {
                // In use, or connecting on this thread's loop: as the core says of each.
                poll.set_ref(self.course.holds_loop() || self.course.connect_holds_loop());
            }
            return;
        }
        if let Some(pool) = self.keeper() {
            self.sync_ref_with(pool.ctx());
        }
    }

    /// A connect under way on tokio holds the process as the core decides (while its socket is
    /// referenced). Nothing else here holds one: a hook's stream opening, or a lookup of the
    /// program's, is JavaScript's to hold.
    fn sync_connect_hold(&self) {
        let on_tokio = self.abort.borrow().is_some();
        if !on_tokio || !self.course.state().awaits_connect() || self.halted.get() {
            return;
        }
        let want = self.course.connect_holds_loop();
        let mut hold = self.connect_hold.borrow_mut();
        if want != hold.is_some() {
            *hold = match self.keeper() {
                Some(pool) if want => Some(pool.ctx().hold()),
                _ => None,
            };
        }
    }

    /// A pumped connection in use keeps the inbox (its only way in) referenced.
    fn sync_ref_with(&self, ctx: &Rc<EnvCtx>) {
        let want = self.course.holds_loop();
        if let Io::Pumped { holding, .. } = &mut *self.io.borrow_mut() {
            if want != holding.is_some() {
                *holding = want.then(|| ctx.hold());
            }
        }
    }

    /// Writes `chunks` now if the kernel takes them; queues the rest.
    pub fn write(self: &Rc<Self>, chunks: &[&[u8]]) -> i32 {
        match self.course.gate(chunks) {
            Gate::Send => {}
            Gate::Held => return write::DONE,
            Gate::NotConnected => return uv_errno(libc::ENOTCONN),
        }
        if let Some(remote) = self.pumped() {
            self.course.wrote(chunks.iter().map(|c| c.len()).sum());
            return match remote.write(chunks) {
                pump::Write::Done => write::DONE,
                pump::Write::Pending => write::PENDING,
                // The pump saw the connection close after the checkout found it open: the
                // race a replay is for, as a failed send on a plain connection.
                pump::Write::Closed => {
                    if self.try_replay() {
                        return write::DONE;
                    }
                    // It ended with an error the socket is yet to hear of (a TLS alert the
                    // server sent before it closed, say): that error fails the request, as the
                    // read that would have followed the write does in Node.
                    if remote.has_failed() {
                        return write::DONE;
                    }
                    uv_errno(libc::EPIPE)
                }
            };
        }
        self.write_plain(chunks)
    }

    /// Half-closes the sending side once every queued byte is out.
    pub fn shutdown(&self) -> i32 {
        if let Some(remote) = self.pumped() {
            remote.shutdown();
            return 0;
        }
        self.shutdown_plain()
    }

    /// Stops everything: the poll handle first (libuv forgets the descriptor), then the socket.
    pub fn close(&self, env: sys::napi_env) {
        self.course.close();
        self.halt(env);
    }

    /// Stops the connection (its connect, its socket or pump) and forgets its face, but leaves
    /// it counted in its pool: a destroyed socket in use holds its slot until its 'close', as
    /// Node's agent frees it only then; `close` follows.
    pub fn halt(&self, env: sys::napi_env) {
        self.halted.set(true);
        self.forget_owner(env);
        if let Some(abort) = self.abort.borrow_mut().take() {
            abort.abort();
        }
        self.connect_hold.borrow_mut().take();
        self.end_io();
    }

    /// Ends what carries the connection's bytes: a plain socket's poll handle closes before the
    /// socket (libuv forgets the descriptor first), a pump is told to close, and hyper closes
    /// its connection once its request half is gone.
    fn end_io(&self) {
        let io = std::mem::replace(&mut *self.io.borrow_mut(), Io::None);
        match &io {
            Io::Pumped { remote, .. } => remote.close(),
            // Its streams' senders outlive it: the connection is stopped, not left to them.
            Io::Session { stopper, .. } => stopper.stop(),
            _ => {}
        }
        drop(io);
    }

    /// An event from the pump of a connection in use.
    pub fn on_pump(self: &Rc<Self>, ctx: &EnvCtx, event: Event) {
        match event {
            Event::Data(bytes) => {
                self.course.read(bytes.len(), ctx.wakes.get());
                let chunk = ctx.chunks.chunk(&bytes);
                self.call_owner(ctx, ctx.callbacks.on_read, &[chunk]);
            }
            Event::Eof => self.lost(ctx, None),
            Event::Drained => self.call_owner(ctx, ctx.callbacks.on_write, &[js::null(ctx.env)]),
            Event::Error(err) => self.lost(ctx, Some(err)),
        }
    }

    /// The connection broke while in use: stop watching it and tell its socket.
    pub fn fail(&self, ctx: &EnvCtx, err: Error) {
        self.course.failed();
        match &mut *self.io.borrow_mut() {
            Io::Pumped { remote, .. } => remote.set_reading(false),
            #[cfg(unix)]
            Io::Plain(plain) => plain.outbox.clear(),
            Io::None | Io::Hyper { .. } | Io::Session { .. } => {}
        }
        self.update_mask();
        let desc = js::error_descriptor(ctx.env, &err);
        self.call_owner(ctx, ctx.callbacks.on_error, &[desc]);
    }
}

/// Windows drives no plain socket on this thread (every drop-in connection there is pumped, see
/// `transport::carry`): what watches, peeks, writes or sets a plain socket finds none, as it
/// finds none for a pumped connection on Unix.
#[cfg(windows)]
impl Conn {
    fn update_mask(&self) {}

    fn plain_alive(&self) -> bool {
        false
    }

    fn write_plain(self: &Rc<Self>, _chunks: &[&[u8]]) -> i32 {
        uv_errno(libc::EBADF)
    }

    fn shutdown_plain(&self) -> i32 {
        uv_errno(libc::EBADF)
    }

    fn apply_no_delay(&self, _on: bool) -> Result<(), i32> {
        Ok(())
    }

    fn apply_keep_alive(&self, _on: bool, _initial_delay_ms: u32) -> Result<(), i32> {
        Ok(())
    }

    fn apply_type_of_service(&self, _tos: u8) -> Result<(), i32> {
        Ok(())
    }

    fn apply_reset_on_close(&self) -> Result<(), i32> {
        Ok(())
    }

    fn read_type_of_service(&self) -> Result<Option<u8>, i32> {
        Ok(None)
    }
}

/// The options a socket sets (`net.Socket`'s setters): kept, and set on the connection it has.
/// Errors are negative errnos.
impl Conn {
    pub fn set_no_delay(&self, on: bool) -> i32 {
        self.no_delay.set(Some(on));
        self.apply_no_delay(on).map_or_else(|errno| -errno, |()| 0)
    }

    pub fn set_keep_alive(&self, on: bool, initial_delay_ms: u32) -> i32 {
        self.keep_alive.set(Some((on, initial_delay_ms)));
        self.apply_keep_alive(on, initial_delay_ms)
            .map_or_else(|errno| -errno, |()| 0)
    }

    pub fn set_type_of_service(&self, tos: u8) -> i32 {
        self.tos.set(Some(tos));
        self.apply_type_of_service(tos)
            .map_or_else(|errno| -errno, |()| 0)
    }

    /// `socket.resetAndDestroy()`: closing the connection resets it (RST); 0 or a negative
    /// errno.
    pub fn reset_on_close(&self) -> i32 {
        self.apply_reset_on_close()
            .map_or_else(|errno| -errno, |()| 0)
    }

    /// The kernel's TOS byte; the one kept where the socket has none (a Unix socket, or while
    /// its connection opens), as `net.Socket` keeps it; or a negative errno.
    pub fn type_of_service(&self) -> i32 {
        match self.read_type_of_service() {
            Ok(Some(tos)) => tos.into(),
            Ok(None) => self.tos.get().unwrap_or(0).into(),
            Err(errno) => -errno,
        }
    }

    /// Sets what the socket asked for on the connection just attached (its first, or a
    /// replay's). What the kernel refuses here was accepted when asked; it goes unreported, as
    /// `net.Socket` ignores a failure of what it applies at connect.
    pub fn apply_socket_options(&self) {
        if let Some(on) = self.no_delay.get() {
            let _ = self.apply_no_delay(on);
        }
        if let Some((on, delay_ms)) = self.keep_alive.get() {
            let _ = self.apply_keep_alive(on, delay_ms);
        }
        if let Some(tos) = self.tos.get() {
            let _ = self.apply_type_of_service(tos);
        }
    }
}
