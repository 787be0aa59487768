//! The events of `agent.request()` exchanges on the JavaScript thread: each goes to its
//! request's handle; the end of an exchange gives its connection back to the pool (or closes
//! it), counts its failure, or sends the request again after the keep-alive race; the sweep of
//! long headers timeouts.

use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use super::{drain_to, header_string, ReqState};
use crate::binding::conn::State;
use crate::binding::env::EnvCtx;
use crate::binding::js::{self};
use crate::binding::protocol::{kind, verdict};
use crate::client::attempt::{Deadline, Retry};
use crate::client::{self, Event};
use crate::error::Error;
use crate::pool::moves;
use crate::pool::place::Place;

/// Starts the headers deadline of `req`, whose exchange just started, when this thread
/// keeps its timeout.
pub fn arm_headers_deadline(ctx: &EnvCtx, req: &ReqState) {
    if req.attempt.borrow_mut().arm(Instant::now()) {
        ctx.schedule_sweep();
    }
}

/// Fails the requests whose headers deadline passed before their response head came, as
/// the exchange would at its own timeout; sweeps again while other deadlines run.
pub fn sweep_headers_deadlines(ctx: &EnvCtx) {
    let now = Instant::now();
    // Deadlines armed meanwhile (by code the failures run) schedule a sweep themselves.
    let mut running = false;
    for req in super::all() {
        let deadline = req.attempt.borrow_mut().sweep(now);
        let t = match deadline {
            Deadline::Unwatched => continue,
            Deadline::Running => {
                running = true;
                continue;
            }
            Deadline::Passed(t) => t,
        };
        crate::binding::debug::debug!("request {}: no response head within {t:?}", req.id);
        // Stopped where it is, as an abort stops it: its connection closes.
        if let Some(exchange) = req.abort.borrow_mut().take() {
            exchange.stop();
        }
        on_request_event(ctx, req.id, Event::Error(client::headers_timeout(t)));
        on_request_event(ctx, req.id, Event::Done(None));
    }
    if running {
        ctx.schedule_sweep();
    }
}

/// An event of request `req`'s exchange, on the JavaScript thread.
pub fn on_request_event(ctx: &EnvCtx, req_id: u32, event: Event) {
    let Some(req) = super::by_id(req_id) else {
        // Aborted meanwhile: a connection that comes back is not reused (the abort
        // already closed it), so there is nothing to do.
        return;
    };
    let env = ctx.env;
    match event {
        Event::Info { status, headers } => {
            req.attempt.borrow_mut().informed();
            req.emit(
                kind::INFO,
                &[js::number(env, status as f64), header_string(env, &headers)],
            );
        }
        Event::Head {
            status,
            reason,
            headers,
            chunks,
            end,
            done,
        } => {
            req.attempt.borrow_mut().headed(&headers);
            let body = if chunks.is_empty() {
                js::null(env)
            } else {
                ctx.chunks.chunk_concat(&chunks)
            };
            let trailers = end
                .as_ref()
                .map_or_else(|| js::null(env), |t| header_string(env, t));
            // HTTP/2 has no reason phrase: a null says the response came over it.
            let reason = match super::streams::on_session(&req) {
                true => js::null(env),
                false => js::latin1(env, &reason),
            };
            let mut args = [
                js::number(env, status as f64),
                reason,
                header_string(env, &headers),
                body,
                trailers,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            ];
            // The exchange ended with its head: the connection is settled first, so that
            // code the response's end runs finds it back in the pool.
            let finished = done.map(|sender| settle(&req, sender));
            let given = match finished {
                Some((conn_id, verdict)) => {
                    args[5] = js::number(env, verdict);
                    args[6] = js::number(env, conn_id as f64);
                    7
                }
                None => 5,
            };
            req.emit(kind::HEAD, &args[..given]);
            if finished.is_some() {
                req.finish();
            }
        }
        Event::Data(chunks) => {
            req.emit(kind::DATA, &[ctx.chunks.chunk_concat(&chunks)]);
        }
        Event::End(trailers) => {
            req.emit(kind::END, &[header_string(env, &trailers)]);
        }
        Event::Error(err) => {
            count_failure(&req, &err);
            let desc = js::error_descriptor(env, &err);
            req.emit(kind::ERROR, &[desc]);
        }
        Event::Unsent(err) => {
            count_failure(&req, &err);
            // The keep-alive race: a reused connection died before answering (see
            // `Attempt::unsent`). Its error waits while the request goes again.
            let failed = req.attempt.borrow_mut().unsent(err);
            if let Some(err) = failed {
                req.emit(kind::ERROR, &[js::error_descriptor(env, &err)]);
            }
        }
        Event::Refused(err) => {
            // The server did not process it: its session takes no more streams, and the
            // request goes again elsewhere, whatever its method.
            if let Place::Stream(conn_id) = req.place.get() {
                super::streams::session_draining(&req.pool, req.key, conn_id);
            }
            let failed = req.attempt.borrow_mut().refused(err);
            if let Some(err) = failed {
                req.emit(kind::ERROR, &[js::error_descriptor(env, &err)]);
            }
        }
        Event::BodyDrain => {
            req.emit(kind::DRAIN, &[]);
        }
        Event::Answered => {
            req.emit(kind::ANSWERED, &[]);
        }
        Event::Done(sender) if req.attempt.borrow().retrying() => {
            let id = Arc::new(std::sync::atomic::AtomicU32::new(req.id));
            let retry = req.attempt.borrow_mut().retry(drain_to(&ctx.inbox, id));
            match retry {
                Retry::Again { drain } => {
                    crate::binding::debug::debug!("replay request {} on a new connection", req.id);
                    req.unhold();
                    let pool = req.pool();
                    pool.state.borrow_mut().pool.stats.replay_count += 1;
                    match req.place.take() {
                        // Its stream is over; it is routed as a new request is (the session
                        // it met takes no more).
                        Place::Stream(conn_id) => {
                            req.abort.borrow_mut().take();
                            super::streams::stream_done(&pool, req.key, conn_id);
                            super::streams::route(&pool, &req);
                        }
                        place => {
                            if let Some(conn_id) = place.conn() {
                                pool.retire(conn_id);
                            }
                            super::open::connect_for(&pool, &req);
                        }
                    }
                    // A writer held back while the connection was lost goes on, into the
                    // new connection's body.
                    if drain {
                        req.emit(kind::DRAIN, &[]);
                    }
                }
                // The request fails as it would have without a replay.
                Retry::Fails(err) => {
                    if let Some(err) = err {
                        req.emit(kind::ERROR, &[js::error_descriptor(env, &err)]);
                    }
                    on_request_event(ctx, req.id, Event::Done(sender));
                }
            }
        }
        Event::Done(sender) => {
            let (conn_id, verdict) = settle(&req, sender);
            req.emit(
                kind::DONE,
                &[js::number(env, verdict), js::number(env, conn_id as f64)],
            );
            req.finish();
        }
    }
}

/// Counts a failure of the established connection of `req` (see `Stats::count_failure`).
pub(super) fn count_failure(req: &ReqState, err: &Error) {
    let established = req
        .place
        .get()
        .conn()
        .and_then(crate::binding::conn::by_id)
        .is_some_and(|c| c.course.state() == State::Active);
    if !established {
        return;
    }
    req.pool.state.borrow_mut().pool.stats.count_failure(err);
}

/// The exchange of `req` is over: its connection goes back to the pool (with `sender`, if
/// hyper keeps it open) or closes, by the agent's rules. Returns the connection and the
/// pool's verdict (a waiter the JavaScript side serves, when not negative).
pub(super) fn settle(req: &Rc<ReqState>, sender: Option<client::Sender>) -> (u32, f64) {
    // The exchange is over: stopping it now would stop what its connection runs next.
    req.abort.borrow_mut().take();
    req.unhold();
    req.attempt.borrow_mut().over();
    // An HTTP/2 stream's end frees a stream, not the connection; one that completed counts
    // as a request, as a released connection does.
    let conn_id = match req.place.take() {
        Place::Stream(conn_id) => {
            if sender.is_some() {
                req.pool.state.borrow_mut().pool.stats.request_count += 1;
            }
            super::streams::stream_done(&req.pool(), req.key, conn_id);
            return (conn_id, verdict::NONE);
        }
        // The connection is the pool's again: an abort from now on does not close it.
        place => place.conn().unwrap_or(0),
    };
    let Some(conn) = crate::binding::conn::by_id(conn_id) else {
        return (conn_id, verdict::NONE);
    };
    let pool = req.pool();
    let kept = match sender {
        Some(sender) if conn.course.state() == State::Active => {
            conn.keep_sender(sender);
            true
        }
        _ => false,
    };
    let hint = req.attempt.borrow().hint();
    let age = conn.created.elapsed();
    // A waiting `agent.request()` takes it here (see `PoolCell::serve`).
    let settled = moves::settle(
        &pool,
        conn_id,
        kept,
        age,
        hint,
        &pool.policy.get(),
        Instant::now(),
    );
    (conn_id, verdict::of(settled))
}
