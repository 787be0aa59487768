//! The drop-in path's connects: opened on tokio (`transport::carry`), applied on the
//! JavaScript thread; a replay's new connection under the same socket; the events of a
//! pumped connection.

use std::rc::Rc;
use std::time::Duration;

use super::PoolCell;
#[cfg(unix)]
use crate::binding::conn::dial_error;
use crate::binding::conn::{Conn, State};
use crate::binding::debug::debug;
use crate::binding::inbox::{post_keys, Completion, PumpSink};
use crate::binding::js;
use crate::error::Error;
use crate::pool::conn::ConnectEnd;
use crate::pool::course::{Heard, Told};
use crate::pool::moves;
use crate::runtime::runtime;
use crate::transport::carry::{self, Carried, Link, Step};
use crate::transport::establish::{Endpoint, Identity, Secure};
use crate::transport::pump::Event;
use crate::transport::Target;
#[cfg(unix)]
use crate::transport::{Direct, Peer};

impl PoolCell {
    /// Starts connecting `id` on tokio; the result arrives through the thread's inbox. For a
    /// TLS key the same task runs the handshake, then pumps the connection.
    pub fn connect(self: &Rc<Self>, id: u32, target: Target, identity: Identity) {
        let Some(conn) = self.conn(id) else { return };
        if conn.course.state() != State::Connecting {
            return;
        }
        let endpoint = self.endpoints.borrow_mut().share(target, identity);
        *conn.target.borrow_mut() = Some(endpoint.clone());
        // Nothing but a connect call to make (a path, or an address: no name to resolve, no
        // proxy; and no TLS): it runs on this thread's loop, which will drive the connection's
        // bytes, sparing the two thread hops of a connect on tokio.
        #[cfg(unix)]
        if let Some(to) = endpoint.target.direct() {
            if self.tls_config(conn.key).is_none() {
                self.dial(&conn, to);
                return;
            }
        }
        self.spawn_connect(&conn, &endpoint, None);
    }

    /// Starts connecting `conn` to `to` on this thread (see `Conn::dial`). A connect that
    /// fails at once is told on a later turn of the loop, as one that fails later is, and
    /// holds the process until then as a connect does.
    #[cfg(unix)]
    fn dial(self: &Rc<Self>, conn: &Rc<Conn>, to: Direct<'_>) {
        let opts = self.state.borrow().connect_opts;
        if let Err(err) = conn.dial(&self.ctx, to, opts) {
            *conn.connect_hold.borrow_mut() =
                conn.course.connect_holds_loop().then(|| self.ctx.hold());
            self.ctx.inbox.post(Completion::Connected {
                pool: self.id,
                conn: conn.id,
                result: Err(err),
            });
        }
    }

    /// Applies the end of a connect started on this thread, as its socket's poll handle told
    /// it (`status` < 0: libuv's error), as `finish_connect` applies one from tokio.
    #[cfg(unix)]
    pub fn dialed(self: &Rc<Self>, conn: &Rc<Conn>, status: std::os::raw::c_int) {
        if !conn.course.state().awaits_connect() || conn.halted.get() {
            return;
        }
        let was = conn.course.state();
        let endpoint = conn.target.borrow().clone();
        let to = endpoint.as_ref().and_then(|e| e.target.direct());
        let result = match (conn.dial_end(status), to) {
            (Ok(local), Some(to)) => {
                let remote = match to {
                    Direct::Tcp(addr) => Peer::Tcp(addr),
                    Direct::Path(path) => Peer::Unix(path.to_owned()),
                };
                conn.local.set(local);
                *conn.remote.borrow_mut() = Some(remote);
                conn.dialed();
                Ok(())
            }
            (Err(errno), Some(to)) => Err(dial_error(errno, "connect", to)),
            (_, None) => Err(Error::os(libc::EINVAL, "connect")),
        };
        self.connect_ended(conn, was, result);
    }

    /// A drop-in connection died before answering a replayable request (see `crate::replay`):
    /// a new connection is opened for the same socket and slot.
    pub fn replayed(self: &Rc<Self>, conn: &Rc<Conn>) {
        debug!(
            "replay the request of connection {} on a new connection ({})",
            conn.id,
            self.key_name(conn.key)
        );
        moves::replaying(self, conn.key);
        let Some(endpoint) = conn.target.borrow().clone() else {
            return;
        };
        // Its socket is open as far as JavaScript knows (no connect timeout of its own runs):
        // the new connection must open within the promise path's bound, or the request fails
        // as the first attempt did, rather than wait on a peer (a proxy's tunnel) that never
        // answers.
        self.spawn_connect(conn, &endpoint, self.connect_timeout.get());
    }

    /// Opens `conn`'s connection (TLS included); `bound` limits how long that may take.
    fn spawn_connect(
        self: &Rc<Self>,
        conn: &Rc<Conn>,
        endpoint: &Endpoint,
        bound: Option<Duration>,
    ) {
        let target = endpoint.target.clone();
        let identity = endpoint.identity.clone();
        let id = conn.id;
        let link = conn.course.link();
        let opts = self.state.borrow().connect_opts;
        let tls = self.tls_config(conn.key);
        let keylog = self.keylog.clone();
        let inbox = self.ctx.inbox.clone();
        let pool = self.id;
        *conn.connect_hold.borrow_mut() = conn.course.connect_holds_loop().then(|| self.ctx.hold());
        let task = runtime().spawn(async move {
            let deadline = bound.map(|limit| (tokio::time::Instant::now() + limit, limit));
            let secure = tls.as_deref().map(|config| Secure {
                config,
                servername: identity.servername.as_deref(),
                node_name_check: identity.node_check,
                keylog,
                // `http.request` speaks HTTP/1.1 only.
                offer_h2: false,
            });
            // The steps reach the socket before the connect's outcome, as Node emits 'lookup',
            // 'connect' and 'keylog' (a failed handshake's too) before it.
            let on_step = |step| match step {
                Step::Keys(lines) => post_keys(&inbox, pool, id, lines),
                step => inbox.post(Completion::Step {
                    pool,
                    conn: id,
                    link,
                    step,
                }),
            };
            let sink = PumpSink {
                inbox: inbox.clone(),
                pool,
                conn: id,
                link,
            };
            let ready = |result| {
                inbox.post(Completion::Connected {
                    pool,
                    conn: id,
                    result,
                })
            };
            // Boxed: made here on tokio's thread, while the spawned future, which the
            // JavaScript thread allocates for every connect, stays small.
            Box::pin(carry::open(
                target, opts, secure, deadline, on_step, sink, ready,
            ))
            .await;
        });
        *conn.abort.borrow_mut() = Some(task.abort_handle());
    }

    /// Applies a finished connect on the JavaScript thread (see `ConnectEnd`).
    pub fn finish_connect(self: &Rc<Self>, id: u32, result: Result<Carried, Error>) {
        let conn = self.conn(id);
        let Some(conn) = conn.filter(|c| c.course.state().awaits_connect() && !c.halted.get())
        else {
            // Closed (or its socket destroyed) while connecting: `close` (or `halt`) already
            // released the hold. What connected anyway is closed here (dropping the
            // descriptor, or stopping the pump).
            if let Ok(Carried {
                link: Link::Pumped(pumped, _),
                ..
            }) = result
            {
                pumped.close();
            }
            return;
        };
        let was = conn.course.state();
        // (On Windows every link is pumped, which cannot fail to attach.)
        #[cfg_attr(windows, allow(clippy::bind_instead_of_map))]
        let result = result.and_then(|established| {
            conn.local.set(established.local);
            *conn.remote.borrow_mut() = Some(established.remote);
            match established.link {
                #[cfg(unix)]
                Link::Fd(fd) => conn.attach(&self.ctx, fd),
                Link::Pumped(pumped, info) => {
                    conn.attach_pumped(&self.ctx, pumped, info);
                    Ok(())
                }
            }
        });
        self.connect_ended(&conn, was, result);
    }

    /// The connect of `conn` (which was in state `was`) ended: its link attached, or not.
    fn connect_ended(self: &Rc<Self>, conn: &Rc<Conn>, was: State, result: Result<(), Error>) {
        let id = conn.id;
        conn.connect_hold.borrow_mut().take();
        conn.abort.borrow_mut().take();
        if result.is_ok() {
            conn.apply_socket_options();
        }
        match was.connect_end(result.is_ok()) {
            ConnectEnd::Resume => conn.resume_replay(),
            ConnectEnd::ReplayFailed => conn.fail(&self.ctx, crate::replay::replay_failed()),
            ConnectEnd::Up => {
                let info = conn.tls.borrow().as_deref().map_or_else(
                    || js::null(self.env()),
                    |info| js::tls_info(self.env(), info),
                );
                conn.call_owner(
                    &self.ctx,
                    self.ctx.callbacks.on_connect,
                    &[js::null(self.env()), info],
                );
            }
            ConnectEnd::Failed => {
                let Err(err) = result else { return };
                self.remove_conn(id);
                let grant = self
                    .state
                    .borrow_mut()
                    .pool
                    .connect_failed(conn.key, err.timed_out());
                let desc = js::error_descriptor(self.env(), &err);
                conn.call_owner(&self.ctx, self.ctx.callbacks.on_connect, &[desc]);
                conn.close(self.env());
                self.notify_grants(grant);
            }
        }
    }

    /// An event of a pumped (TLS) connection: to its socket while in use; while idle, any
    /// event means the connection is over.
    pub fn on_pump(self: &Rc<Self>, id: u32, link: u32, event: Event) {
        let Some(conn) = self.conn(id) else { return };
        let kind = match event {
            Event::Data(_) | Event::Drained => Told::Data,
            Event::Eof => Told::End,
            Event::Error(_) => Told::Error,
        };
        match conn.course.heard(link, kind, self.ctx.wakes.get()) {
            // An error right behind data of the same batch waits a turn of the event loop, as
            // a libuv stream meets a read error only at its next read: a response that data
            // completed ends first and its socket goes back to the pool, where the error only
            // evicts it, instead of failing a request that has its response. So does the end
            // of a socket that data handed over (an upgrade's): the program that took it
            // listens by then, as it would to a TLS socket of Node's.
            Heard::Wait => self.ctx.inbox.post(Completion::Pump {
                pool: self.id,
                conn: id,
                link,
                event,
            }),
            Heard::Deliver => conn.on_pump(&self.ctx, event),
            Heard::Evict => self.evict_idle(&conn),
            Heard::Drop => {}
        }
    }
}
