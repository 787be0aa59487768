//! The JavaScript socket that is a connection's face: bound while it serves a checkout, held
//! weakly while the connection idles, and called with the connection's events.

use napi::sys;

use super::{Conn, Mode, State};
use crate::binding::env::EnvCtx;
use crate::binding::js::{self, AsyncContext, Ref};

/// The JavaScript socket that is this connection's face. Like Node's agent, a connection keeps
/// one socket object for its whole life: held strongly while checked out, weakly while idle
/// (an idle connection costs no JavaScript memory once the collector takes its socket; a new
/// one is made on the next checkout).
#[derive(Clone, Copy)]
pub(super) struct Owner {
    socket: Ref,
    strong: bool,
    /// The async context of the checkout being served; none while idle.
    ctx: Option<AsyncContext>,
}

impl Conn {
    /// Makes `socket` this connection's face, serving the current checkout.
    pub fn bind(&self, env: sys::napi_env, socket: sys::napi_value) {
        self.own(env, socket, true);
        // A socket bound to a connection that is not new (its old face was collected while
        // it idled) serves a reuse.
        let reused = self.course.state() != State::Connecting;
        self.serve(env, reused);
    }

    /// Makes `socket` the face of this idle connection without serving anything: it is held
    /// weakly, as the face of any idle connection is, until a checkout takes it.
    pub fn adopt(&self, env: sys::napi_env, socket: sys::napi_value) {
        self.own(env, socket, false);
    }

    fn own(&self, env: sys::napi_env, socket: sys::napi_value, strong: bool) {
        self.forget_owner(env);
        // SAFETY: js invariant 1: a live object of this env, an argument of the current
        // call (`bind`, `adopt`); the old owner was let go of first, and `forget_owner`
        // deletes this one once (js invariant 2). Tests: __test__/reuse.test.js "30
        // sequential requests share one connection", __test__/compat.test.js
        // "agent.freeSockets holds socket objects".
        let socket = unsafe { Ref::new(env, socket, u32::from(strong)) };
        self.owner.set(Some(Owner {
            socket,
            strong,
            ctx: None,
        }));
    }

    /// The face of this idle connection if a program still holds it (null otherwise),
    /// without taking it out of the pool.
    pub fn idle_face(&self, env: sys::napi_env) -> sys::napi_value {
        let Some(owner) = self.owner.get() else {
            return std::ptr::null_mut();
        };
        let socket = owner.socket.get(env);
        if socket.is_null() {
            self.forget_owner(env);
        }
        socket
    }

    /// Starts serving a checkout with the existing face, if it is still alive: its async
    /// context becomes that of the calling JavaScript code. Returns the socket, or null when
    /// there is none (the caller then makes one and binds it).
    pub fn take(&self, env: sys::napi_env) -> sys::napi_value {
        let Some(mut owner) = self.owner.get() else {
            return std::ptr::null_mut();
        };
        let socket = owner.socket.get(env);
        if socket.is_null() {
            self.forget_owner(env);
            return socket;
        }
        if !owner.strong {
            owner.socket.strengthen(env);
            owner.strong = true;
            self.owner.set(Some(owner));
        }
        self.serve(env, true);
        socket
    }

    fn serve(&self, env: sys::napi_env, reused: bool) {
        let limit = self.keeper().map_or(0, |p| p.replay_limit());
        self.course.serve(reused, limit);
        let Some(mut owner) = self.owner.get() else {
            return;
        };
        if let Some(ctx) = owner.ctx.take() {
            ctx.destroy(env);
        }
        let socket = owner.socket.get(env);
        // SAFETY: js invariants 1 and 2: the socket is alive (a strong reference: `bind`
        // made it, `take` strengthened it) and we are in the serving JavaScript call; the old
        // context was destroyed just above and this one is destroyed once, by `park` or
        // `forget_owner`. Test: __test__/context.test.js "response callbacks see the store of
        // their request on fresh, reused and queued connections".
        owner.ctx = Some(unsafe { AsyncContext::new(env, socket, "HYPERAGENT_SOCKET") });
        self.owner.set(Some(owner));
        self.sync_ref();
        self.update_mask();
        if let Some(remote) = self.pumped() {
            remote.set_reading(true);
        }
    }

    /// The socket serving a checkout right now, if any.
    pub fn serving(&self, env: sys::napi_env) -> Option<sys::napi_value> {
        let owner = self.owner.get().filter(|o| o.strong)?;
        let socket = owner.socket.get(env);
        (!socket.is_null()).then_some(socket)
    }

    /// Drops the reference to the face entirely (the connection closes).
    /// Rust ended this idle connection (it `expired`, or the server closed it, or the agent
    /// was destroyed): a socket object that a program still holds hears of it as a
    /// `net.Socket` would (`socket._onIdleEnd(expired)`: 'timeout' when it expired, then
    /// 'close'). Called before the connection closes; a socket that was collected hears
    /// nothing, and costs nothing.
    pub fn end_idle(&self, ctx: &EnvCtx, expired: bool) {
        let Some(owner) = self.owner.get() else {
            return;
        };
        let socket = owner.socket.get(ctx.env);
        if socket.is_null() {
            return;
        }
        let func = js::get(ctx.env, socket, c"_onIdleEnd");
        js::make_callback(
            ctx.env,
            owner.ctx,
            socket,
            func,
            &[js::boolean(ctx.env, expired)],
        );
    }

    pub(super) fn forget_owner(&self, env: sys::napi_env) {
        if let Some(owner) = self.owner.take() {
            if let Some(ctx) = owner.ctx {
                ctx.destroy(env);
            }
            owner.socket.delete(env);
        }
    }

    /// Parks the connection idle: its face held weakly, watched for a FIN, an RST or stray
    /// bytes.
    pub fn park(&self, env: sys::napi_env) {
        if let Some(mut owner) = self.owner.get() {
            if let Some(ctx) = owner.ctx.take() {
                ctx.destroy(env);
            }
            // A hooked connection's stream is the connection itself: nothing could remake it,
            // so its link stays held while it idles (until the connection closes).
            if owner.strong && self.course.mode() != Mode::Foreign {
                owner.socket.weaken(env);
                owner.strong = false;
            }
            self.owner.set(Some(owner));
        }
        self.course.park();
        self.sync_ref();
        self.update_mask();
        if let Some(remote) = self.pumped() {
            // Idle, the pump keeps reading: a close or stray bytes are seen at once.
            remote.set_reading(true);
        }
    }

    /// Calls `callback(socket, ...args)` in the socket's async context.
    pub fn call_owner(&self, ctx: &EnvCtx, callback: Ref, args: &[sys::napi_value]) {
        let Some(owner) = self.owner.get().filter(|o| o.strong) else {
            return;
        };
        let socket = owner.socket.get(ctx.env);
        let func = callback.get(ctx.env);
        let mut argv = Vec::with_capacity(args.len() + 1);
        argv.push(socket);
        argv.extend_from_slice(args);
        js::make_callback(ctx.env, owner.ctx, socket, func, &argv);
    }
}
