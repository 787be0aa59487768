//! The thread's pools by id (see `registry`), and what a connection asks of the pool that
//! counts it ([`Keeper`]).

use std::rc::{Rc, Weak};
use std::sync::Arc;

use super::PoolCell;
use crate::binding::conn::{Conn, Keeper};
use crate::binding::env::EnvCtx;
use crate::binding::registry::Registry;
use crate::pool::KeyId;
use crate::transport::tls::TlsConfig;

thread_local! {
    /// The pools of this thread, by id; a pool leaves when its agent is collected.
    pub(super) static POOLS: Registry<Weak<PoolCell>> = const { Registry::new() };
}

impl PoolCell {
    /// Pool `id` of this thread, while its agent lives.
    pub fn get(id: u32) -> Option<Rc<PoolCell>> {
        POOLS.with(|t| t.get(id)).and_then(|p| p.upgrade())
    }

    /// Every pool of this thread.
    pub fn all() -> Vec<Rc<PoolCell>> {
        POOLS
            .with(Registry::values)
            .iter()
            .filter_map(Weak::upgrade)
            .collect()
    }

    /// The pool of connection `conn`, while it lives.
    pub fn of(conn: &Conn) -> Option<Rc<PoolCell>> {
        PoolCell::get(conn.pool_id)
    }
}

impl Keeper for PoolCell {
    fn ctx(&self) -> &Rc<EnvCtx> {
        &self.ctx
    }

    fn replay_limit(&self) -> usize {
        self.replay_limit.get()
    }

    fn tls_config(&self, key: KeyId) -> Option<Arc<TlsConfig>> {
        PoolCell::tls_config(self, key)
    }

    fn replayed(self: Rc<Self>, conn: &Rc<Conn>) {
        PoolCell::replayed(&self, conn);
    }

    #[cfg(unix)]
    fn evict_idle(self: Rc<Self>, conn: &Rc<Conn>) {
        PoolCell::evict_idle(&self, conn);
    }

    #[cfg(unix)]
    fn dialed(self: Rc<Self>, conn: &Rc<Conn>, status: std::os::raw::c_int) {
        PoolCell::dialed(&self, conn, status);
    }
}
