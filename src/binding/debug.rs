//! `NODE_DEBUG=hyperagent` lines for what happens in Rust (evictions, expiries, replays),
//! written as Node's `util.debuglog` writes them: `HYPERAGENT <pid>: <message>` on stderr.

use std::sync::atomic::{AtomicBool, Ordering};

static ENABLED: AtomicBool = AtomicBool::new(false);

pub fn set_enabled(on: bool) {
    ENABLED.store(on, Ordering::Relaxed);
}

pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

pub fn line(message: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr(),
        "HYPERAGENT {}: {}",
        std::process::id(),
        message
    );
}

/// `debug!("evicted connection {}", id)`: formats only when NODE_DEBUG names hyperagent.
macro_rules! debug {
    ($($arg:tt)*) => {
        if $crate::binding::debug::enabled() {
            $crate::binding::debug::line(format_args!($($arg)*));
        }
    };
}

pub(crate) use debug;
