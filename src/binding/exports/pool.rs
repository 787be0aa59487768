//! The pool's exports: `NativePool` (one per agent) with its options, limits, targets and
//! TLS settings, and the checkout of a connection. The targets' and TLS options' conversions
//! are in `target.rs` and `tls.rs`.

use std::rc::Rc;
use std::time::Duration;

use napi::bindgen_prelude::*;
use napi_derive::napi;

use super::target::{connect_target, identity_of, ConnectTarget};
use super::tls::{tls_options, ErrorInfo, TlsOptionsJs};
use crate::binding::pool::PoolCell;
use crate::binding::{conn, ctx, pool, protocol, request};
use crate::guard;
use crate::pool::origins::Destination;
use crate::pool::{settings, KeyId, Limits};
use crate::transport::ConnectOptions;

#[napi(object)]
pub struct PoolOptions {
    pub max_sockets: f64,
    pub max_free_sockets: f64,
    pub max_total_sockets: f64,
    pub lifo: bool,
    pub no_delay: bool,
    /// SO_KEEPALIVE's initial delay for new connections; absent when keep-alive is off.
    pub keep_alive_msecs: Option<f64>,
    /// The largest drop-in request kept for a replay after the keep-alive race (0: off).
    pub replay_limit: Option<f64>,
    /// Whether freed connections are kept (`keepAlive`); the promise path applies this,
    /// `idle_ms` and `active_ttl_ms` in Rust when an exchange ends.
    pub keep_alive: Option<bool>,
    /// How long a freed connection may idle (`freeSocketTimeout`); absent or infinite: no limit.
    pub idle_ms: Option<f64>,
    /// `socketActiveTTL`: a connection older than this is not reused; absent: no limit.
    pub active_ttl_ms: Option<f64>,
    /// The agent's `timeout`: how long a promise-path connection may take to open (the drop-in
    /// path's sockets time out in JavaScript); absent: no limit.
    pub connect_timeout_ms: Option<f64>,
    /// `agentKeepAliveTimeoutBuffer` (ms, default 1000).
    pub hint_buffer_ms: Option<f64>,
    /// `maxRequestsPerSocket`: the most requests an HTTP/1.1 connection carries; absent: no
    /// limit.
    pub max_requests: Option<f64>,
    /// The promise path tries HTTP/2 (`allowH2` over TLS, `h2c` over plain TCP).
    pub http2: Option<bool>,
}

/// When a promise-path connection goes back to the pool, and for how long.
fn release_policy(opts: &PoolOptions) -> pool::ReleasePolicy {
    pool::ReleasePolicy::of_options(
        opts.keep_alive,
        opts.idle_ms,
        opts.active_ttl_ms,
        opts.hint_buffer_ms,
        opts.max_requests,
    )
}

#[napi(object)]
pub struct PoolStats {
    pub create_socket_count: f64,
    pub create_socket_error_count: f64,
    pub close_socket_count: f64,
    pub error_socket_count: f64,
    pub timeout_socket_count: f64,
    pub request_count: f64,
    pub replay_count: f64,
}

/// An idle connection, for the `freeSockets` view.
#[napi(object)]
pub struct IdleConn {
    pub id: u32,
    pub name: String,
    /// Serves `http.request()` (else `agent.request()`).
    pub drop_in: bool,
    pub created: f64,
    pub number: f64,
    pub finished: u32,
    pub idle_ms: f64,
}

#[napi(object)]
pub struct KeyCounts {
    pub key: u32,
    pub name: String,
    pub busy: u32,
    pub idle: u32,
    pub waiting: u32,
    /// The queued waiters, in the order they will be served.
    pub waiters: Vec<f64>,
    /// HTTP/2 connections (counted in `busy` too) and their streams in use.
    pub sessions: u32,
    pub streams: u32,
}

fn limits(opts: &PoolOptions) -> Limits {
    Limits::of_counts(
        opts.max_sockets,
        opts.max_free_sockets,
        opts.max_total_sockets,
        opts.lifo,
    )
}

/// One agent's connection pool. The object anchors the pool's lifetime (collected with its
/// agent); the calls made for every request are plain functions below that name the pool or
/// the connection by number: no wrapper object, no `this` to unwrap (a third of the cost of a
/// method call here).
#[napi]
pub struct NativePool {
    cell: Rc<PoolCell>,
}

/// `id * 4 + verdict` (see `protocol::verdict`), or, for an idle connection whose socket is still
/// alive, that socket itself, now serving the caller.
#[napi(ts_return_type = "number | object", catch_unwind)]
pub fn checkout(env: &Env, pool: u32, key: u32) -> Result<Unknown<'_>> {
    guard::point("checkout");
    let cell = PoolCell::get(pool).ok_or_else(|| Error::from_reason("hyperagent: unknown pool"))?;
    let verdict = cell.checkout(KeyId(key));
    let base = f64::from(protocol::verdict::BASE);
    if verdict % base == f64::from(protocol::verdict::REUSE) {
        let socket = cell.take((verdict / base) as u32);
        if !socket.is_null() {
            // SAFETY: js invariants 1 and 2: a non-null value, just read from the
            // connection's live socket reference, in this call's scope. Test:
            // __test__/reuse.test.js "30 sequential requests share one connection".
            return Ok(unsafe { Unknown::from_raw_unchecked(env.raw(), socket) });
        }
    }
    verdict.into_unknown(env)
}

#[napi]
impl NativePool {
    #[napi(constructor, catch_unwind)]
    pub fn new(agent: Unknown, options: PoolOptions) -> Result<Self> {
        let connect_opts = ConnectOptions {
            no_delay: options.no_delay,
            keep_alive: options
                .keep_alive_msecs
                .map(|ms| Duration::from_millis(ms.max(0.0) as u64)),
        };
        let cell = PoolCell::new(
            ctx()?,
            agent.raw(),
            limits(&options),
            connect_opts,
            crate::client::driver::serve,
        );
        cell.policy.set(release_policy(&options));
        cell.connect_timeout
            .set(settings::duration_ms(options.connect_timeout_ms));
        cell.http2.set(options.http2.unwrap_or(false));
        cell.replay_limit
            .set(settings::replay_limit(options.replay_limit));
        Ok(NativePool { cell })
    }

    /// The number the plain functions name this pool by.
    #[napi(getter, catch_unwind)]
    pub fn id(&self) -> u32 {
        self.cell.id
    }

    /// The key for a `getName()` string.
    #[napi(catch_unwind)]
    pub fn key(&self, name: String) -> u32 {
        self.cell.state.borrow_mut().pool.key(&name).0
    }

    /// Keys in use.
    #[napi(getter, catch_unwind)]
    pub fn key_count(&self) -> u32 {
        self.cell.state.borrow().pool.key_count() as u32
    }

    /// Forgets empty keys but the `keep` most recently used; returns their ids.
    #[napi(catch_unwind)]
    pub fn sweep_keys(&self, keep: u32) -> Vec<u32> {
        self.cell
            .sweep_keys(keep as usize, request::request_keys(&self.cell))
    }

    #[napi(catch_unwind)]
    pub fn open_granted(&self, key: u32) -> u32 {
        self.cell.open_granted(KeyId(key))
    }

    #[napi(catch_unwind)]
    pub fn connect(&self, id: u32, target: ConnectTarget) -> Result<()> {
        let identity = identity_of(&target);
        self.cell.connect(id, connect_target(target)?, identity);
        Ok(())
    }

    /// Sets key `key`'s TLS configuration; returns the error to throw, if the options are bad.
    #[napi(catch_unwind)]
    pub fn set_tls(&self, key: u32, options: TlsOptionsJs) -> Option<ErrorInfo> {
        let opts = tls_options(options);
        self.cell
            .origins
            .borrow_mut()
            .set_tls(KeyId(key), &opts)
            .err()
            .map(|e| ErrorInfo {
                code: e.code().to_owned(),
                message: e.message(),
            })
    }

    /// From now on, the TLS handshakes of this pool's connections report their key material
    /// (Node's 'keylog' events); for good, as Node's agents do once asked.
    #[napi(catch_unwind)]
    pub fn log_keys(&self) {
        self.cell
            .keylog
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Where the promise path connects for `key`.
    #[napi(catch_unwind)]
    pub fn set_target(&self, key: u32, target: ConnectTarget) -> Result<()> {
        let destination = Destination {
            identity: identity_of(&target),
            js_lookup: target.js_lookup == Some(true),
            target: connect_target(target)?,
        };
        self.cell
            .origins
            .borrow_mut()
            .set_destination(KeyId(key), destination);
        Ok(())
    }

    /// The largest response head the promise path accepts, for new connections.
    #[napi(catch_unwind)]
    pub fn set_max_header_size(&self, bytes: u32) {
        self.cell.max_header_size.set(bytes as usize);
    }

    /// Connection `id` leaves the pool's counts (HTTP upgrade). Returns a verdict.
    #[napi(catch_unwind)]
    pub fn detach(&self, id: u32) -> f64 {
        self.cell.detach(id)
    }

    /// `[name, socket, name, socket, ...]` for every socket serving a checkout.
    #[napi(ts_return_type = "Array<string | object>", catch_unwind)]
    pub fn active_sockets<'env>(&self, env: &'env Env) -> Result<Vec<Unknown<'env>>> {
        let mut out = Vec::new();
        for (name, socket) in self.cell.active_sockets() {
            out.push(name.into_unknown(env)?);
            // SAFETY: js invariants 1 and 2: a non-null socket from a live strong reference
            // (`Conn::serving`), in this call's scope. Test: __test__/errors.test.js
            // "agent.destroy() closes idle and active connections and fails queued requests".
            out.push(unsafe { Unknown::from_raw_unchecked(env.raw(), socket) });
        }
        Ok(out)
    }

    /// The idle connections, for the `freeSockets` view.
    #[napi(catch_unwind)]
    pub fn idle_connections(&self) -> Vec<IdleConn> {
        self.cell
            .idle_conns()
            .into_iter()
            .map(|(name, c)| {
                let stamp = c.course.stamp();
                IdleConn {
                    id: c.id,
                    name,
                    drop_in: c.course.mode() != conn::Mode::Promise,
                    created: stamp.created_ms,
                    number: stamp.number,
                    finished: stamp.finished,
                    idle_ms: stamp.idle_ms,
                }
            })
            .collect()
    }

    #[napi(catch_unwind)]
    pub fn set_limits(&self, options: PoolOptions) -> Vec<f64> {
        self.cell.policy.set(release_policy(&options));
        self.cell
            .connect_timeout
            .set(settings::duration_ms(options.connect_timeout_ms));
        self.cell.set_limits(limits(&options))
    }

    #[napi(catch_unwind)]
    pub fn destroy(&self) -> Vec<f64> {
        self.cell.destroy()
    }

    /// The handles of the `agent.request()`s on a connection (see
    /// `request::requests_in_flight`).
    #[napi(ts_return_type = "object[]", catch_unwind)]
    pub fn requests_in_flight<'env>(&self, env: &'env Env) -> Vec<Unknown<'env>> {
        request::requests_in_flight(&self.cell)
            .into_iter()
            // SAFETY: js invariants 1 and 2: handles from the strong references of requests
            // not finished (`finish` takes a request out of the map before deleting its
            // reference), in this call's scope. Test: __test__/request/aborts.test.js
            // "agent.destroy() ends agent.request()s: queued, waiting for the head, and mid-body".
            .map(|v| unsafe { Unknown::from_raw_unchecked(env.raw(), v) })
            .collect()
    }

    /// The handles of the `agent.request()`s waiting in the pool's queue (see
    /// `request::requests_queued`), for `agent.destroy()` to fail.
    #[napi(ts_return_type = "object[]", catch_unwind)]
    pub fn requests_queued<'env>(&self, env: &'env Env) -> Vec<Unknown<'env>> {
        request::requests_queued(&self.cell)
            .into_iter()
            // SAFETY: js invariants 1 and 2: handles from the strong references of requests
            // not finished (`finish` takes a request out of the map before deleting its
            // reference), in this call's scope. Test: __test__/request/aborts.test.js
            // "agent.destroy() ends agent.request()s: queued, waiting for the head, and mid-body".
            .map(|v| unsafe { Unknown::from_raw_unchecked(env.raw(), v) })
            .collect()
    }

    /// Counts an error on an established socket (`errorSocketCount`).
    #[napi(catch_unwind)]
    pub fn count_error(&self) {
        self.cell.state.borrow_mut().pool.stats.error_socket_count += 1;
    }

    /// Counts a socket that could not be made (`createSocketErrorCount`): a `createSocket()`
    /// of the program's gave an error, as agentkeepalive counts it.
    #[napi(catch_unwind)]
    pub fn count_connect_error(&self) {
        self.cell
            .state
            .borrow_mut()
            .pool
            .stats
            .create_socket_error_count += 1;
    }

    /// Counts a socket closed by its active timeout (`timeoutSocketCount`).
    #[napi(catch_unwind)]
    pub fn count_timeout(&self) {
        self.cell.state.borrow_mut().pool.stats.timeout_socket_count += 1;
    }

    #[napi(catch_unwind)]
    pub fn stats(&self) -> PoolStats {
        let s = self.cell.stats();
        PoolStats {
            create_socket_count: s.create_socket_count as f64,
            create_socket_error_count: s.create_socket_error_count as f64,
            close_socket_count: s.close_socket_count as f64,
            error_socket_count: s.error_socket_count as f64,
            timeout_socket_count: s.timeout_socket_count as f64,
            request_count: s.request_count as f64,
            replay_count: s.replay_count as f64,
        }
    }

    /// Whether the agent hears of its `agent.request()` connections opening, closing and
    /// failing to open (`onConnection`).
    #[napi(catch_unwind)]
    pub fn watch_connections(&self, on: bool) {
        self.cell.watch(on);
    }

    /// Counts per key, for the `sockets`, `freeSockets` and `requests` views.
    #[napi(catch_unwind)]
    pub fn snapshot(&self) -> Vec<KeyCounts> {
        let st = self.cell.state.borrow();
        let sessions = self.cell.sessions.borrow();
        st.pool
            .snapshot()
            .into_iter()
            .map(|k| {
                let h2 = sessions.usage(k.key);
                KeyCounts {
                    key: k.key.0,
                    waiters: st.pool.waiters_of(k.key).map(|w| w.0 as f64).collect(),
                    name: k.name,
                    busy: k.busy as u32,
                    idle: k.idle as u32,
                    waiting: (k.waiting + h2.waiting) as u32,
                    sessions: h2.sessions as u32,
                    streams: h2.streams as u32,
                }
            })
            .collect()
    }
}
