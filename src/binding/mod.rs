//! The binding: the only Rust code that touches Node-API and libuv. It drives the JavaScript
//! thread's side of the pool, the connections and the requests; the `#[napi]` exports (in
//! `exports/`) convert and check arguments and call it. Option validation with Node's error
//! codes is done once, in JavaScript, before anything reaches here.
//!
//! The modules form a one-way stack; each imports only those below it:
//!
//! 1. `js`, `uv`, `protocol`, `debug`: Node-API, libuv, the numbers JavaScript reads;
//! 2. `inbox`, `slab`, `registry`, `env`: what tokio hands back, the chunk slab, the tables by
//!    id, the thread's context (which calls up through its `Hooks` alone);
//! 3. `conn`: one connection (it calls its pool through `conn::Keeper`);
//! 4. `pool`: one agent's pool (it serves a waiting `agent.request()` through its `serve`);
//! 5. `request`: `agent.request()` on this thread;
//! 6. `deliver`: where the inbox's items go, and what ends with the env;
//! 7. `exports`: the `#[napi]` functions.

#![cfg_attr(test, allow(dead_code))]

mod conn;
pub(crate) mod debug;
mod deliver;
mod env;
mod exports;
mod inbox;
mod js;
mod pool;
mod protocol;
mod registry;
mod request;
mod slab;
mod uv;

use std::rc::Rc;

use napi::bindgen_prelude::*;
use napi::sys;
use napi_derive::napi;

use crate::guard;
use protocol::{arg, connection, flags, kind, name, verdict, write};

/// Registers the JavaScript functions Rust calls on this thread. Called once by `index.js`.
#[napi(js_name = "init", catch_unwind)]
#[allow(clippy::too_many_arguments)]
pub fn init(
    env: Env,
    on_read: Unknown,
    on_write: Unknown,
    on_error: Unknown,
    on_connect: Unknown,
    on_grant: Unknown,
    on_request: Unknown,
    set_slab: Unknown,
    on_keylog: Unknown,
    on_connection: Unknown,
    on_step: Unknown,
) -> Result<()> {
    let raw = env.raw();
    // SAFETY: js invariant 1: arguments of this call; each reference is deleted once, by
    // env.rs `teardown`, or at once when the thread was set up already (js invariant 2).
    // Test: __test__/chunks.test.js "a second load of the package on the same thread gets its
    // small chunks right".
    let r = |v: &Unknown| unsafe { js::Ref::new(raw, v.raw(), 1) };
    env::init(
        raw,
        env::Callbacks {
            on_read: r(&on_read),
            on_write: r(&on_write),
            on_error: r(&on_error),
            on_connect: r(&on_connect),
            on_grant: r(&on_grant),
            on_request: r(&on_request),
            set_slab: r(&set_slab),
            on_keylog: r(&on_keylog),
            on_connection: r(&on_connection),
            on_step: r(&on_step),
        },
        deliver::HOOKS,
    )?;
    Ok(())
}

/// The numbers JavaScript and Rust exchange (declared in `protocol.rs`), read by `lib/` at load
/// ([`protocol()`]): the pool's verdicts, agent.request()'s event kinds and flags, and what a
/// write answers.
#[napi(object)]
pub struct Protocol {
    /// A verdict is `id * verdict_base + kind` when not negative.
    pub verdict_base: u32,
    pub reuse: u32,
    pub connect: u32,
    pub queued: u32,
    pub handoff: u32,
    pub grant: u32,
    pub none: f64,
    pub idle: f64,
    pub closed: f64,
    /// `release`: the connection closed for an `agent.request()` that waited.
    pub retired: f64,
    /// agent.request()'s event kinds, in `protocol::kind` order.
    pub events: Vec<String>,
    pub expect_continue: u32,
    pub informational: u32,
    /// A request flag: it hears which connection it goes out on.
    pub sending: u32,
    /// Answers to a `VERIFY` event (`protocol::name`).
    pub name_right: f64,
    pub name_let_pass: f64,
    pub name_passed: f64,
    pub write_done: i32,
    pub write_pending: i32,
    /// The request function's arguments, by name, in the order it takes them (see `protocol::arg`).
    pub request_args: Vec<String>,
    /// `onConnection` kinds (`protocol::connection`): any other is a plain `DISCONNECT`.
    pub connection_connect: u32,
    pub connection_error: u32,
    pub connection_idle_timeout: u32,
    pub connection_other_side: u32,
    pub connection_reset: u32,
    pub connection_aborted: u32,
}

/// See [`Protocol`].
#[napi(catch_unwind)]
pub fn protocol() -> Protocol {
    Protocol {
        verdict_base: verdict::BASE,
        reuse: verdict::REUSE,
        connect: verdict::CONNECT,
        queued: verdict::QUEUED,
        handoff: verdict::HANDOFF,
        grant: verdict::GRANT,
        none: verdict::NONE,
        idle: verdict::IDLE,
        closed: verdict::CLOSED,
        retired: verdict::RETIRED,
        events: kind::NAMES.iter().map(|n| n.to_string()).collect(),
        expect_continue: flags::EXPECT_CONTINUE,
        informational: flags::INFORMATIONAL,
        sending: flags::SENDING,
        name_right: name::RIGHT,
        name_let_pass: name::LET_PASS,
        name_passed: name::PASSED,
        write_done: write::DONE,
        write_pending: write::PENDING,
        request_args: arg::NAMES.iter().map(|n| n.to_string()).collect(),
        connection_connect: connection::CONNECT,
        connection_error: connection::CONNECTION_ERROR,
        connection_idle_timeout: connection::DISCONNECT_IDLE_TIMEOUT,
        connection_other_side: connection::DISCONNECT_OTHER_SIDE,
        connection_reset: connection::DISCONNECT_RESET,
        connection_aborted: connection::DISCONNECT_ABORTED,
    }
}

fn ctx() -> Result<Rc<env::EnvCtx>> {
    env::current().ok_or_else(|| Error::from_reason("hyperagent: the binding was not initialised"))
}

fn conn(id: u32) -> Option<Rc<conn::Conn>> {
    conn::by_id(id)
}

fn undefined(env: &Env) -> sys::napi_value {
    let mut value = std::ptr::null_mut();
    // SAFETY: js invariant 1 (a plain value lookup on this env, during a call from it).
    unsafe { sys::napi_get_undefined(env.raw(), &mut value) };
    value
}

/// Makes the next pass through the named place panic (see `guard`): for the tests of what a
/// panic does at each boundary with Node. An empty name disarms it.
#[napi(catch_unwind)]
pub fn inject_panic(site: String) {
    guard::arm(&site);
}

/// Turns the `NODE_DEBUG=hyperagent` lines of the Rust side on or off.
#[napi(catch_unwind)]
pub fn set_debug(on: bool) {
    debug::set_enabled(on);
}

/// For tests: what keeps this thread's process alive for work on tokio, as `[holds,
/// releases without a hold]`. With nothing in flight both are 0; the second is never anything
/// else (each such release could have let the process exit under other work).
#[napi(catch_unwind)]
pub fn held_operations() -> Vec<f64> {
    ctx().map_or(vec![0.0, 0.0], |ctx| {
        let (held, extra) = ctx.held();
        vec![held as f64, extra as f64]
    })
}
