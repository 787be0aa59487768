//! What the agent hears of its pool outside any JavaScript call: connections opened, closed
//! or failed (undici's dispatcher events), a drop-in connect's steps, and TLS key log lines.

use super::PoolCell;
use crate::binding::conn::{self, Mode, State};
use crate::binding::inbox::Completion;
use crate::binding::js;
use crate::error::Error;
use crate::pool::KeyId;
use crate::transport::carry::Step;

impl PoolCell {
    /// Starts or stops telling the agent's watchers of its `agent.request()` connections.
    /// Those already open when it starts are told of when they end (not of their opening,
    /// which is past), as undici's dispatcher tells a listener added late.
    pub fn watch(&self, on: bool) {
        if on && !self.watch_connections.get() {
            for conn in conn::of_pool(self.id) {
                if conn.exchanges() {
                    conn.announced.set(true);
                }
            }
        }
        self.watch_connections.set(on);
    }

    /// Posts a connection event of key `key` for the agent's watchers, if it has any: it
    /// reaches them on a later turn ([`PoolCell::emit_connection`]).
    pub fn post_connection(&self, kind: u32, key: KeyId, error: Option<Error>) {
        if self.watch_connections.get() {
            self.ctx.inbox.post(Completion::Connection {
                pool: self.id,
                key,
                kind,
                error,
            });
        }
    }

    /// Tells the agent of a connection event: `agent._onConnection(kind, key, error)`.
    pub fn emit_connection(&self, kind: u32, key: KeyId, error: Option<&Error>) {
        let env = self.env();
        let agent = self.agent.get(env);
        if agent.is_null() {
            return;
        }
        let func = self.ctx.callbacks.on_connection.get(env);
        let error = error.map_or_else(|| js::null(env), |e| js::error_descriptor(env, e));
        let args = [
            agent,
            js::number(env, f64::from(kind)),
            js::number(env, f64::from(key.0)),
            error,
        ];
        js::make_callback(env, None, agent, func, &args);
    }

    /// Tells the socket of drop-in connection `id` a step of its first connect (a replay's
    /// connect is not its socket's): the addresses its name resolved to, or, with none, that
    /// its TCP connection is up before its TLS handshake. A step of another link, or one that
    /// comes once the connect is over or its socket gone, is dropped.
    pub fn emit_step(&self, id: u32, link: u32, step: Step) {
        let Some(conn) = self.conn(id) else { return };
        if conn.course.link() != link || conn.course.state() != State::Connecting {
            return;
        }
        let env = self.env();
        let args = match step {
            Step::Resolved { host, ips } => {
                let items: Vec<_> = ips
                    .iter()
                    .map(|ip| js::string(env, &ip.to_string()))
                    .collect();
                [js::string(env, &host), js::array(env, &items)]
            }
            Step::Connected { local, remote } => {
                // Its ends, which its socket reads from now on.
                conn.local.set(local);
                *conn.remote.borrow_mut() = Some(remote);
                [js::null(env), js::null(env)]
            }
            // Posted as the connection's key log (see `emit_keylog`).
            Step::Keys(_) => return,
        };
        conn.call_owner(&self.ctx, self.ctx.callbacks.on_step, &args);
    }

    /// Hands the key log lines of connection `id`'s handshake to JavaScript: to its socket (a
    /// drop-in connection's, a replay's included), or to the agent (`agent.request()`'s
    /// connections have no socket). A connection closed meanwhile, or whose socket is gone,
    /// reports nothing.
    pub fn emit_keylog(&self, id: u32, lines: &[u8]) {
        let Some(conn) = self.conn(id) else { return };
        let env = self.env();
        let on_keylog = self.ctx.callbacks.on_keylog;
        if conn.course.mode() == Mode::DropIn {
            let buffer = js::buffer_copy(env, lines);
            conn.call_owner(&self.ctx, on_keylog, &[buffer]);
            return;
        }
        let agent = self.agent.get(env);
        if !agent.is_null() {
            let buffer = js::buffer_copy(env, lines);
            js::make_callback(env, None, agent, on_keylog.get(env), &[agent, buffer]);
        }
    }
}
