//! The events of `agent.request()` exchanges on the JavaScript thread, each run by
//! `client::driver` for its request, and the sweep of long headers timeouts.

use std::time::Instant;

use super::pool_of;
use crate::binding::env::EnvCtx;
use crate::client::{driver, Event};

/// Fails the requests whose headers deadline passed before their response head came (see
/// `driver::sweep`); sweeps again while other deadlines run.
pub fn sweep_headers_deadlines(ctx: &EnvCtx) {
    let now = Instant::now();
    // Deadlines armed meanwhile (by code the failures run) schedule a sweep themselves.
    let mut running = false;
    for req in super::all() {
        running |= driver::sweep(pool_of(&req), &req, now);
    }
    if running {
        ctx.schedule_sweep();
    }
}

/// Request `req_id` went out on connection `conn`: JavaScript hears it, unless the request is
/// over (see `JsFace::sending`).
pub fn on_sending(req_id: u32, conn: u32) {
    if let Some(req) = super::by_id(req_id) {
        req.tell(|face| face.tell_sending(conn));
    }
}

/// An event of request `req_id`'s exchange, on the JavaScript thread.
pub fn on_request_event(req_id: u32, event: Event) {
    // Aborted meanwhile: a connection that comes back is not reused (the abort already
    // closed it), so there is nothing to do.
    if let Some(req) = super::by_id(req_id) {
        driver::on_event(pool_of(&req), &req, event);
    }
}
