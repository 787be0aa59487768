//! The pool's expiry timer: one libuv timer per agent, set for the earliest deadline of an idle
//! connection or an idle HTTP/2 session, which closes what ran out.

use std::rc::Rc;
use std::time::Instant;

use super::{PoolCell, PoolState};
use crate::binding::js;
use crate::binding::uv;
use crate::guard;
use crate::pool::moves;

impl PoolCell {
    /// Closes the HTTP/2 sessions whose idle time ran out (their slots go back to the pool),
    /// and sets the timer for the next.
    pub fn expire_sessions(self: &Rc<Self>) {
        let waiters =
            moves::expire_sessions(self, Instant::now(), self.policy.get().session_idle());
        self.arm_timer(&mut self.state.borrow_mut());
        self.tell_grants(waiters);
    }

    /// Sets the expiry timer for the earliest idle deadline (of an idle connection or an idle
    /// HTTP/2 session), if it is not set earlier already.
    pub(super) fn arm_timer(&self, st: &mut PoolState) {
        let sessions = self
            .sessions
            .borrow()
            .next_deadline(self.policy.get().session_idle(), |id| self.session_end(id));
        let deadlines = [st.pool.next_deadline(), sessions];
        let Some(ms) = st.alarm.set_for(deadlines, Instant::now()) else {
            return;
        };
        if let Some(timer) = &*self.timer.borrow() {
            timer.timer_start(on_timer, ms);
        }
    }

    fn expire(self: &Rc<Self>) {
        self.state.borrow_mut().alarm.fired();
        let waiters = moves::expire(self, Instant::now(), self.policy.get().session_idle());
        self.arm_timer(&mut self.state.borrow_mut());
        self.tell_grants(waiters);
    }
}

/// # Safety
/// Called by libuv alone, on this thread's loop, for a pool's open expiry timer.
unsafe extern "C" fn on_timer(handle: *mut uv::RawHandle) {
    // SAFETY: uv.rs invariant 3: libuv's own live handle; its data is null (closed) or the
    // cell, from `Rc::as_ptr` in `new`, alive while the timer is open (its `Drop` closes it).
    let ptr = unsafe { uv::data_of(handle) } as *const PoolCell;
    if ptr.is_null() {
        return;
    }
    // SAFETY: as above, the `Rc` is alive (strong count above zero, or `Drop` would have
    // closed the timer); the count taken here keeps it for the callback and is given back when
    // `cell` drops. Test: __test__/idle.test.js "an idle connection closes after
    // freeSocketTimeout".
    let cell = unsafe {
        Rc::increment_strong_count(ptr);
        Rc::from_raw(ptr)
    };
    let _scope = js::HandleScope::open(cell.ctx.env);
    // A panic in the expiry leaves the idle connections as they were: the next timer tries
    // again.
    if let Err(panic) = guard::catch(|| cell.expire()) {
        crate::binding::debug::debug!("expiry failed: {panic}");
    }
}
