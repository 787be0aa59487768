//! A connection that ends while in use: its request sent again on a new connection under the
//! same socket (the keep-alive race, see `crate::replay`), or its socket told of the end.

use std::rc::Rc;

use super::Conn;
use crate::binding::env::EnvCtx;
use crate::binding::js;
use crate::error::Error;
use crate::replay::Ending;

impl Conn {
    /// The connection ended (`err` None: the peer's FIN) while in use. Before any response to
    /// a replayable request on a reused connection, the request goes again on a new one;
    /// before any response otherwise, the request fails saying whether it went out; after,
    /// the socket hears of the end or the error as it is.
    pub(super) fn lost(self: &Rc<Self>, ctx: &EnvCtx, err: Option<Error>) {
        if self.try_replay() {
            return;
        }
        match self.course.ending(err) {
            Ending::Fail(err) => self.fail(ctx, err),
            Ending::Eof => {
                self.update_mask();
                self.call_owner(ctx, ctx.callbacks.on_read, &[js::null(ctx.env)]);
            }
        }
    }

    /// Starts a replay if the request allows one (see `crate::replay`): the dead connection is
    /// closed and a new one opened under the same socket, which notices nothing.
    pub fn try_replay(self: &Rc<Self>) -> bool {
        let Some(pool) = self.keeper() else {
            return false;
        };
        if !self.course.begin_replay(self.target.borrow().is_some()) {
            return false;
        }
        // Stop the dead transport; the socket, its owner and its slot stay.
        self.end_io();
        *self.tls.borrow_mut() = None;
        pool.replayed(self);
        true
    }

    /// The replay's new connection is up: send the request again, then whatever followed.
    pub fn resume_replay(self: &Rc<Self>) {
        let bytes = self.course.resume();
        if !bytes.is_empty() && self.write(&[&bytes]) < 0 {
            if let Some(pool) = self.keeper() {
                self.fail(pool.ctx(), crate::replay::replay_failed());
            }
        }
    }
}
