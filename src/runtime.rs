//! The process-wide tokio runtime that connects, resolves and (later) speaks TLS and HTTP.
//!
//! One worker thread: on a loaded machine the JavaScript thread needs a core of its own, and a
//! single worker avoids the wake-ups between workers that cost more than the work they carry.
//! DNS lookups run on tokio's blocking pool (`getaddrinfo` blocks), bounded like libuv's pool.
//! The runtime's threads never keep Node alive: Node waits on its own handles, not on these.

use std::sync::OnceLock;
use tokio::runtime::{Builder, Runtime};

static RUNTIME: OnceLock<Runtime> = OnceLock::new();

pub fn runtime() -> &'static Runtime {
    RUNTIME.get_or_init(|| {
        Builder::new_multi_thread()
            .worker_threads(1)
            .max_blocking_threads(8)
            .thread_name("hyperagent-io")
            .enable_all()
            .build()
            .expect("hyperagent: cannot start the tokio runtime")
    })
}
