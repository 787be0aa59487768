//! Where the inbox's completions go, and what ends with the env: the top of the binding's
//! stack below the exports, the one place that knows every kind the inbox serves (pools,
//! connections, requests). The env below calls it through [`HOOKS`].

use std::rc::Rc;

use super::conn;
use super::env::{EnvCtx, Hooks};
use super::inbox::Completion;
use super::pool::PoolCell;
use super::request::{self, ReqState};
use crate::{client, guard};

/// What the env calls for its inbox, its sweep and its teardown.
pub const HOOKS: Hooks = Hooks {
    deliver,
    sweep: request::sweep_headers_deadlines,
    teardown,
};

/// Handles one item of the inbox; a panic while handling it fails the request or the
/// connection it is of, and nothing else.
fn deliver(ctx: &EnvCtx, item: Completion) {
    let owner = match &item {
        Completion::Req { req, .. } | Completion::Sending { req, .. } => Owner::Request(*req),
        Completion::HyperConnected {
            pool, conn, req, ..
        } => Owner::HyperConnect(*pool, *conn, *req),
        Completion::Connected { pool, conn, .. } => Owner::Connect(*pool, *conn),
        Completion::Pump { conn, .. } => Owner::Conn(*conn),
        _ => Owner::None,
    };
    if let Err(panic) = guard::catch(|| complete(item)) {
        super::debug::debug!("a completion panicked: {panic}");
        let _ = guard::catch(|| fail_owner(ctx, owner, &panic));
    }
}

/// What an item of the inbox belongs to (see [`deliver`]).
enum Owner {
    Request(u32),
    HyperConnect(u32, u32, u32),
    Connect(u32, u32),
    Conn(u32),
    None,
}

/// Fails what a panic left half done: the request ends with the panic's error (its
/// exchange stopped, its connection closed), a connect fails as one that could not be
/// made, a connection in use fails its socket.
fn fail_owner(ctx: &EnvCtx, owner: Owner, panic: &str) {
    let err = || guard::internal(panic);
    match owner {
        Owner::Request(id) => {
            if let Some(req) = request::by_id(id) {
                req.stop();
            }
            request::on_request_event(id, client::Event::Error(err()));
            request::on_request_event(id, client::Event::Done(None));
        }
        Owner::HyperConnect(pool, conn, req) => {
            if let Some(cell) = PoolCell::get(pool) {
                crate::client::driver::connected(&cell, conn, req, Err(err()));
            }
        }
        Owner::Connect(pool, conn) => {
            if let Some(cell) = PoolCell::get(pool) {
                cell.finish_connect(conn, Err(err()));
            }
        }
        Owner::Conn(id) => {
            if let Some(conn) = conn::by_id(id) {
                conn.fail(ctx, err());
            }
        }
        Owner::None => {}
    }
}

/// Handles one item of the inbox.
fn complete(item: Completion) {
    guard::point("completion");
    match item {
        // A pool that is gone let go of its connects' holds as it went.
        Completion::Connected { pool, conn, result } => {
            if let Some(cell) = PoolCell::get(pool) {
                cell.finish_connect(conn, result);
            }
        }
        Completion::Pump {
            pool,
            conn,
            link,
            event,
        } => {
            if let Some(cell) = PoolCell::get(pool) {
                cell.on_pump(conn, link, event);
            }
        }
        Completion::Req { req, event } => request::on_request_event(req, event),
        Completion::Sending { req, conn } => request::on_sending(req, conn),
        Completion::HyperConnected {
            pool,
            conn,
            req,
            result,
        } => {
            if let Some(cell) = PoolCell::get(pool) {
                crate::client::driver::connected(&cell, conn, req, result);
            }
        }
        Completion::HyperClosed { pool, conn, end } => {
            if let Some(cell) = PoolCell::get(pool) {
                request::hyper_closed(&cell, conn, end);
            }
        }
        Completion::HyperLookup {
            pool,
            conn,
            req,
            reply,
        } => {
            if let Some(cell) = PoolCell::get(pool) {
                request::hyper_lookup(&cell, conn, req, reply);
            }
        }
        Completion::Keylog { pool, conn, lines } => {
            if let Some(cell) = PoolCell::get(pool) {
                cell.emit_keylog(conn, &lines);
            }
        }
        Completion::Step {
            pool,
            conn,
            link,
            step,
        } => {
            if let Some(cell) = PoolCell::get(pool) {
                cell.emit_step(conn, link, step);
            }
        }
        Completion::Connection {
            pool,
            key,
            kind,
            error,
        } => {
            if let Some(cell) = PoolCell::get(pool) {
                cell.emit_connection(kind, key, error.as_ref());
            }
        }
    }
}

/// The env's teardown, for what is above it: every pool shuts down (closing its
/// connections), every request stops. The requests' tasks stop; tokio holds no memory of this
/// env (request bodies are copied), so nothing is waited for.
fn teardown(ctx: &EnvCtx) {
    for pool in PoolCell::all() {
        pool.shutdown();
    }
    let requests: Vec<Rc<ReqState>> = request::take_all();
    for req in &requests {
        req.stop();
    }
    drop(requests);
    // The pools took theirs; any other left in the thread's table closes too, so that none
    // outlives the env (the table lives until the thread ends).
    for conn in conn::take_all() {
        conn.close(ctx.env);
    }
}
