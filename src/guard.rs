//! Where panics stop. A panic must never unwind into Node (from an `extern "C"` function it
//! aborts the process): every `#[napi]` function catches it (`catch_unwind` on each, an error
//! that `lib/errors.js` turns into `ERR_HYPERAGENT_INTERNAL`), and every libuv callback runs
//! its work through [`catch`], failing only what the panic belongs to.
//!
//! A test-only hook, [`arm`], makes the next pass through a named [`point`] panic, so that the
//! JavaScript tests can check each boundary without a real bug (`__test__/safety.test.js`).

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use crate::error::Error;

/// Runs `f`; a panic in it becomes `Err` with the panic's message.
pub fn catch<R>(f: impl FnOnce() -> R) -> Result<R, String> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|payload| {
        let text = message(&*payload);
        // A payload whose own drop panics would unwind out of here: it is leaked instead.
        std::mem::forget(payload);
        text
    })
}

/// What a panic said.
pub fn message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".to_owned()
    }
}

/// The error a caught panic becomes on the request or socket it belongs to.
pub fn internal(message: &str) -> Error {
    Error::tls(
        "ERR_HYPERAGENT_INTERNAL",
        format!("hyperagent: internal error: {message}"),
    )
}

static ARMED: AtomicBool = AtomicBool::new(false);
static SITE: Mutex<String> = Mutex::new(String::new());

/// Makes the next pass through `point(site)` panic (tests only).
pub fn arm(site: &str) {
    *SITE.lock().unwrap_or_else(|e| e.into_inner()) = site.to_owned();
    ARMED.store(!site.is_empty(), Ordering::Release);
}

/// A place a test may make panic (see [`arm`]): one relaxed load when unarmed.
#[inline]
pub fn point(site: &str) {
    if ARMED.load(Ordering::Relaxed) {
        fire(site);
    }
}

#[cold]
fn fire(site: &str) {
    let mut armed = SITE.lock().unwrap_or_else(|e| e.into_inner());
    if *armed == site {
        armed.clear();
        ARMED.store(false, Ordering::Release);
        drop(armed);
        panic!("injected panic at {site}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_its_message() {
        assert_eq!(catch(|| 7), Ok(7));
        assert_eq!(
            catch(|| panic!("static")),
            Err::<(), _>("static".to_owned())
        );
        let n = 3;
        assert_eq!(
            catch(|| panic!("formatted {n}")),
            Err::<(), _>("formatted 3".to_owned())
        );
        let other = catch(|| std::panic::panic_any(42_u8));
        assert_eq!(other, Err::<(), _>("a panic without a message".to_owned()));
    }

    #[test]
    fn an_armed_point_panics_once_and_only_at_its_site() {
        arm("unit-test-site");
        point("elsewhere");
        assert!(catch(|| point("unit-test-site"))
            .unwrap_err()
            .contains("unit-test-site"));
        // Disarmed by the panic.
        point("unit-test-site");
        let err = internal("boom");
        assert_eq!(err.code(), "ERR_HYPERAGENT_INTERNAL");
    }
}
