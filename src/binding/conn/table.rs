//! The thread's table of its connections by id (see `registry`).

use std::rc::Rc;

use super::Conn;
use crate::binding::registry::Registry;

thread_local! {
    /// Every connection of every pool on this thread, by id: the hot-path calls from
    /// JavaScript name a connection by its id alone.
    static CONNS: Registry<Rc<Conn>> = const { Registry::new() };
}

/// Connection `id` of this thread, while it is open or idle.
pub fn by_id(id: u32) -> Option<Rc<Conn>> {
    CONNS.with(|t| t.get(id))
}

/// A fresh connection id, never 0 (JavaScript's "no connection").
pub fn next_id() -> u32 {
    CONNS.with(Registry::next_id)
}

pub fn register(conn: Rc<Conn>) {
    CONNS.with(|t| t.insert(conn.id, conn));
}

/// Takes connection `id` out of the table: it is closing.
pub fn unregister(id: u32) -> Option<Rc<Conn>> {
    CONNS.with(|t| t.remove(id))
}

/// Every connection of pool `pool`, in id order.
pub fn of_pool(pool: u32) -> Vec<Rc<Conn>> {
    let mut out: Vec<Rc<Conn>> = CONNS.with(|t| t.values());
    out.retain(|c| c.pool_id == pool);
    out.sort_by_key(|c| c.id);
    out
}

/// Takes every connection of pool `pool` out of the table (none once the thread's table is
/// gone, as its thread ends: see `teardown` in `deliver`, which emptied it before).
pub fn take_of_pool(pool: u32) -> Vec<Rc<Conn>> {
    CONNS
        .try_with(|t| t.take_where(|c| c.pool_id == pool))
        .unwrap_or_default()
}

/// Takes every connection out of the table: the env is going away.
pub fn take_all() -> Vec<Rc<Conn>> {
    CONNS.with(|t| t.take_where(|_| true))
}
