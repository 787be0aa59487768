//! What the agent hears of its pool outside any JavaScript call: connections opened, closed
//! or failed (undici's dispatcher events), and TLS key log lines.

use super::PoolCell;
use crate::binding::conn::{self, Mode};
use crate::binding::inbox::Completion;
use crate::binding::js;
use crate::error::Error;
use crate::pool::KeyId;

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
