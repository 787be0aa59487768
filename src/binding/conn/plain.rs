//! A plain socket's side of a connection: the libuv poll handle that watches it on the
//! JavaScript thread's loop, and the reads and writes done there with non-blocking syscalls
//! (see the parent module for why).

use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::os::raw::c_int;
use std::rc::Rc;

use super::{Conn, Io, State};
use crate::binding::env::EnvCtx;
use crate::binding::js;
use crate::binding::protocol::write;
use crate::binding::uv::{self, Handle};
use crate::error::Error;
use crate::guard;
use crate::pool::course::PollError;
use crate::transport::liveness::{self, Liveness};
use crate::transport::raw::{self, Outbox};
use crate::transport::{ConnectOptions, Direct};

/// A plain socket and the poll handle that watches it on this thread's loop.
pub(super) struct Plain {
    /// Always there until the drop, which closes it before the socket (libuv forgets the
    /// descriptor first).
    pub(super) poll: Option<Handle>,
    pub(super) fd: OwnedFd,
    /// The events the poll handle watches (0: stopped).
    pub(super) mask: c_int,
    /// Bytes the kernel has not taken yet.
    pub(super) outbox: Outbox,
    /// A shutdown waits for the outbox to empty.
    pub(super) shutdown_after_flush: bool,
}

/// A connection dropped without its `close` (a panic in the middle of one, say) still closes
/// its poll handle: the handle's data points at the connection, and libuv calls nothing more
/// for a handle once it is closing (see `on_poll`).
impl Drop for Plain {
    fn drop(&mut self) {
        if let Some(poll) = self.poll.take() {
            poll.close();
        }
    }
}

/// Reads per readiness callback before yielding to the rest of the loop (as libuv does).
const READS_PER_WAKE: usize = 32;

impl Conn {
    pub(super) fn raw_fd(&self) -> RawFd {
        match &*self.io.borrow() {
            Io::Plain(plain) => plain.fd.as_raw_fd(),
            _ => -1,
        }
    }

    /// Whether the plain socket is there and open, as a peek at it tells.
    pub(super) fn plain_alive(&self) -> bool {
        let fd = self.raw_fd();
        fd >= 0 && liveness::peek(fd).is_open()
    }

    /// Writes `chunks` to the plain socket now if the kernel takes them; queues the rest (see
    /// [`Conn::write`]).
    pub(super) fn write_plain(self: &Rc<Self>, chunks: &[&[u8]]) -> i32 {
        let sent = match &mut *self.io.borrow_mut() {
            Io::Plain(plain) => plain.outbox.write(plain.fd.as_raw_fd(), chunks),
            _ => Err(libc::EBADF),
        };
        match sent {
            Ok(sent) => {
                self.course.wrote(sent.written);
                if !sent.queued {
                    return write::DONE;
                }
                self.update_mask();
                write::PENDING
            }
            // The peer reset the connection under the request: the race a replay is for.
            Err(errno) => {
                if self.try_replay() {
                    return write::DONE;
                }
                -errno
            }
        }
    }

    /// Half-closes the plain socket's sending side once every queued byte is out (see
    /// [`Conn::shutdown`]).
    pub(super) fn shutdown_plain(&self) -> i32 {
        let fd = match &mut *self.io.borrow_mut() {
            Io::Plain(plain) if !plain.outbox.is_empty() => {
                plain.shutdown_after_flush = true;
                return write::PENDING;
            }
            Io::Plain(plain) => plain.fd.as_raw_fd(),
            _ => -1,
        };
        raw::shutdown_write(fd).map_or_else(|errno| -errno, |()| 0)
    }

    /// Takes over a connected socket and starts watching it.
    pub fn attach(self: &Rc<Self>, ctx: &EnvCtx, fd: OwnedFd) -> Result<(), Error> {
        self.watch_socket(ctx, fd)?;
        self.dialed();
        Ok(())
    }

    /// Starts connecting to `to` on this thread (a target that needs nothing but a connect
    /// call: `Target::direct`): the socket is watched until its connect ends, which
    /// `on_poll` hands to the pool (`Keeper::dialed`). This spares a connect the two thread
    /// hops of one run on tokio. A failure to start is returned, for the pool to tell later.
    pub fn dial(
        self: &Rc<Self>,
        ctx: &EnvCtx,
        to: Direct<'_>,
        opts: ConnectOptions,
    ) -> Result<(), Error> {
        let started = match to {
            Direct::Tcp(addr) => raw::connect_start(addr, opts.no_delay, opts.keep_alive),
            Direct::Path(path) => raw::connect_path_start(path),
        };
        let fd = started.map_err(|failed| {
            let err = dial_error(failed.errno, failed.syscall, to);
            // As net words a connect refused in the call: with the socket's local end.
            match failed.local {
                Some(local) => {
                    err.with_detail(format!("- Local ({}:{})", local.ip(), local.port()))
                }
                None => err,
            }
        })?;
        self.watch_socket(ctx, fd)?;
        self.sync_ref();
        self.update_mask();
        Ok(())
    }

    /// How the connect `dial` started ended, once its socket is writable (or libuv reported
    /// an error, `status` < 0): the socket's local address, or the errno it failed with.
    pub fn dial_end(&self, status: c_int) -> Result<Option<SocketAddr>, i32> {
        let io = self.io.borrow();
        let Io::Plain(plain) = &*io else {
            return Err(libc::EBADF);
        };
        if let Some(errno) = raw::pending_error(plain.fd.as_raw_fd()) {
            return Err(errno);
        }
        if status < 0 {
            return Err(-status);
        }
        Ok(raw::local_addr(plain.fd.as_fd()))
    }

    /// Its socket is connected: the connection is in use, watched for what that needs.
    pub fn dialed(&self) {
        self.course.set_state(State::Active);
        self.sync_ref();
        self.update_mask();
    }

    /// Has this thread's loop watch `fd`, a socket of this connection's.
    fn watch_socket(self: &Rc<Self>, ctx: &EnvCtx, fd: OwnedFd) -> Result<(), Error> {
        // SAFETY: uv.rs invariants 2 and 3: this thread's loop; a fresh socket nobody else
        // watches, which `close` and `try_replay` drop only after closing the handle. The data
        // is this connection, kept alive by `EnvCtx::conns` until a caller of `remove_conn`
        // runs `close`, which closes the handle. Tests: __test__/idle.test.js "an idle
        // connection is evicted at once on ${what}" and "socket.unref() lets the process exit
        // during a request, while it connects or once connected"; __test__/errors.test.js "a
        // refused connection fails the request with ECONNREFUSED, as net reports it".
        let handle =
            unsafe { Handle::poll(ctx.uv_loop, fd.as_raw_fd(), Rc::as_ptr(self) as *mut _) }
                .map_err(|rc| Error::os(-rc, "uv_poll_init"))?;
        *self.io.borrow_mut() = Io::Plain(Plain {
            poll: Some(handle),
            fd,
            mask: 0,
            outbox: Outbox::default(),
            shutdown_after_flush: false,
        });
        Ok(())
    }

    /// Watches what the state needs: readable while reading (or idle), writable while bytes
    /// wait. A stopped handle keeps nothing alive.
    pub(super) fn update_mask(&self) {
        let mut io = self.io.borrow_mut();
        let Io::Plain(plain) = &mut *io else {
            return;
        };
        let watch = self.course.watch(!plain.outbox.is_empty());
        let mut want = 0;
        if watch.readable {
            want |= uv::READABLE | uv::DISCONNECT;
        }
        if watch.writable {
            want |= uv::WRITABLE;
        }
        if want == plain.mask {
            return;
        }
        if let Some(poll) = &plain.poll {
            if want == 0 {
                poll.poll_stop();
            } else {
                poll.poll_start(want, on_poll);
            }
            plain.mask = want;
        }
    }

    /// Has the poll handle watch again what the state needs, as if it watched nothing (libuv
    /// stopped it at an error).
    pub(super) fn restart_mask(&self) {
        if let Io::Plain(plain) = &mut *self.io.borrow_mut() {
            plain.mask = 0;
        }
        self.update_mask();
    }

    /// Sets TCP_NODELAY on the plain socket, or on the TCP socket under a pumped one.
    pub(super) fn apply_no_delay(&self, on: bool) -> Result<(), i32> {
        match &*self.io.borrow() {
            Io::Plain(plain) => raw::set_no_delay(plain.fd.as_fd(), on),
            Io::Pumped { remote, .. } => remote.set_no_delay(on),
            _ => Ok(()),
        }
    }

    /// Sets TCP keep-alive, as [`Conn::apply_no_delay`].
    pub(super) fn apply_keep_alive(&self, on: bool, initial_delay_ms: u32) -> Result<(), i32> {
        let delay = std::time::Duration::from_millis(initial_delay_ms as u64);
        match &*self.io.borrow() {
            Io::Plain(plain) => raw::set_keep_alive(plain.fd.as_fd(), on, delay),
            Io::Pumped { remote, .. } => remote.set_keep_alive(on, delay),
            _ => Ok(()),
        }
    }

    /// Sets the IP TOS byte, as [`Conn::apply_no_delay`] (a socket without one takes none).
    pub(super) fn apply_type_of_service(&self, tos: u8) -> Result<(), i32> {
        match &*self.io.borrow() {
            Io::Plain(plain) => raw::set_type_of_service(plain.fd.as_fd(), tos),
            Io::Pumped { remote, .. } => remote.set_type_of_service(tos),
            _ => Ok(()),
        }
    }

    /// Makes closing the socket reset its connection, as [`Conn::apply_no_delay`].
    pub(super) fn apply_reset_on_close(&self) -> Result<(), i32> {
        match &*self.io.borrow() {
            Io::Plain(plain) => raw::set_reset_on_close(plain.fd.as_fd()),
            Io::Pumped { remote, .. } => remote.set_reset_on_close(),
            _ => Ok(()),
        }
    }

    /// The kernel's IP TOS byte for the socket; None for a socket without one (a Unix socket,
    /// or none open).
    pub(super) fn read_type_of_service(&self) -> Result<Option<u8>, i32> {
        match &*self.io.borrow() {
            Io::Plain(plain) => raw::type_of_service(plain.fd.as_fd()),
            Io::Pumped { remote, .. } => remote.type_of_service(),
            _ => Ok(None),
        }
    }

    /// Readiness on an in-use connection: flush queued bytes, then read.
    pub(super) fn on_ready(self: &Rc<Self>, ctx: &EnvCtx, status: c_int, events: c_int) {
        if status < 0 {
            // What arrived before the error (a response, then an RST) is read first (see
            // `Course::after_poll_error`). libuv stopped the poll at the error.
            let mut read_some = false;
            if self.course.reads_before_error() {
                let before = self.course.bytes_read();
                self.read(ctx);
                read_some = self.course.bytes_read() != before;
            }
            match self.course.after_poll_error(read_some) {
                PollError::Later => self.restart_mask(),
                PollError::Nothing => {}
                PollError::Fail => {
                    // libuv reports any socket error (EPOLLERR) as EBADF; the socket knows
                    // the real one.
                    let errno = raw::pending_error(self.raw_fd()).unwrap_or(-status);
                    self.lost(ctx, Some(Error::os(errno, "read")));
                }
            }
            return;
        }
        if events & uv::WRITABLE != 0 {
            self.flush(ctx);
        }
        if self.course.state() == State::Active
            && self.course.reading()
            && events & (uv::READABLE | uv::DISCONNECT) != 0
        {
            self.read(ctx);
        }
    }

    pub(super) fn flush(&self, ctx: &EnvCtx) {
        let sent = match &mut *self.io.borrow_mut() {
            Io::Plain(plain) => plain.outbox.flush(plain.fd.as_raw_fd()).inspect(|sent| {
                if !sent.queued && std::mem::take(&mut plain.shutdown_after_flush) {
                    let _ = raw::shutdown_write(plain.fd.as_raw_fd());
                }
            }),
            _ => return,
        };
        match sent {
            Ok(sent) => {
                self.course.wrote(sent.written);
                if sent.queued {
                    return;
                }
                self.update_mask();
                self.call_owner(ctx, ctx.callbacks.on_write, &[js::null(ctx.env)]);
            }
            Err(errno) => {
                self.update_mask();
                let err = js::error_descriptor(ctx.env, &Error::os(errno, "write"));
                self.call_owner(ctx, ctx.callbacks.on_write, &[err]);
            }
        }
    }

    pub(super) fn read(self: &Rc<Self>, ctx: &EnvCtx) {
        for _ in 0..READS_PER_WAKE {
            let fd = self.raw_fd();
            if fd < 0 {
                return;
            }
            let (got, full) = {
                let mut buf = ctx.read_buf.borrow_mut();
                let got = raw::read(fd, &mut buf);
                let full = got == raw::Read::Data(buf.len());
                (got, full)
            };
            match got {
                raw::Read::Data(n) => {
                    self.course.read(n, ctx.wakes.get());
                    let chunk = ctx.chunks.chunk(&ctx.read_buf.borrow()[..n]);
                    self.call_owner(ctx, ctx.callbacks.on_read, &[chunk]);
                    if !full || self.course.state() != State::Active || !self.course.reading() {
                        return;
                    }
                }
                raw::Read::Eof => {
                    self.lost(ctx, None);
                    return;
                }
                raw::Read::WouldBlock => return,
                raw::Read::Failed(errno) => {
                    self.lost(ctx, Some(Error::os(errno, "read")));
                    return;
                }
            }
        }
    }
}

/// A failed connect to `to`, named as net names it: the address and port, or the path.
pub fn dial_error(errno: i32, syscall: &'static str, to: Direct<'_>) -> Error {
    match to {
        Direct::Tcp(addr) => {
            Error::os(errno, syscall).with_peer(addr.ip().to_string(), Some(addr.port()))
        }
        Direct::Path(path) => Error::os(errno, syscall).with_peer(path, None),
    }
}

/// # Safety
/// Called by libuv alone, on this thread's loop, for a connection's open poll handle.
unsafe extern "C" fn on_poll(handle: *mut uv::RawHandle, status: c_int, events: c_int) {
    // SAFETY: uv.rs invariant 3: libuv's own live handle; its data is null (closed) or the
    // connection, from `Rc::as_ptr` in `attach`, kept alive by `EnvCtx::conns` while the handle
    // is open (every caller of `remove_conn` runs `close`, which closes the handle).
    let ptr = unsafe { uv::data_of(handle) } as *const Conn;
    if ptr.is_null() {
        return;
    }
    // SAFETY: as above, the `Rc` is alive; the count taken here keeps the connection for this
    // callback even if JavaScript closes it meanwhile, and is given back when `conn` drops.
    // Tests: __test__/safety.test.js 'a panic at "poll" ...'; __test__/errors.test.js "a reset
    // during the response fails the request with ECONNRESET".
    let conn = unsafe {
        Rc::increment_strong_count(ptr);
        Rc::from_raw(ptr)
    };
    let Some(pool) = conn.keeper() else {
        return;
    };
    let ctx = pool.ctx().clone();
    let _scope = js::HandleScope::open(ctx.env);
    let ran = guard::catch(|| {
        guard::point("poll");
        match conn.course.state() {
            State::Active => conn.on_ready(&ctx, status, events),
            State::Connecting => pool.clone().dialed(&conn, status),
            State::Idle => {
                let state = if status < 0 {
                    Liveness::Failed(-status)
                } else {
                    liveness::peek(conn.raw_fd())
                };
                if !state.is_open() {
                    pool.clone().evict_idle(&conn);
                }
            }
            State::Replaying | State::Closed => {}
        }
    });
    // A panic while serving the connection: its socket fails (and closes it, which the pool
    // counts); an idle one is evicted. Whatever the panic left half done dies with it.
    if let Err(panic) = ran {
        let _ = guard::catch(|| match conn.course.state() {
            State::Idle => pool.clone().evict_idle(&conn),
            State::Closed => {}
            _ => conn.fail(&ctx, guard::internal(&panic)),
        });
    }
}
