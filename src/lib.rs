//! hyperagent: Node's `http.Agent` with its connection pool, sockets and DNS in Rust.
//!
//! - [`pool`]: the pool's bookkeeping (keys, idle lists, limits, waiters, expiry, statistics);
//! - [`transport`]: DNS, TCP/Unix connect and TLS on tokio, liveness checks on idle sockets;
//! - [`client`]: the promise path's HTTP/1.1 exchanges, spoken by hyper;
//! - [`replay`]: the rules for sending a request again after the keep-alive race;
//! - [`error`]: one error type, with Node's code, errno and syscall derived in one place;
//! - [`guard`]: where panics stop, before they reach Node;
//! - `binding`: the napi surface and the JavaScript thread's byte path (not in `cargo test`).

pub mod client;
pub mod error;
pub mod guard;
pub mod mailbox;
pub mod pool;
pub mod replay;
pub mod runtime;
pub mod transport;

#[cfg(not(test))]
mod binding;
#[cfg(test)]
#[path = "binding/tests.rs"]
mod binding_tests;

// Buffers cross threads on every request (hyper allocates on the tokio thread, the JavaScript
// thread frees, and back): mimalloc frees another thread's blocks without taking a lock, where
// the system allocator contends on its arenas.
#[cfg(not(test))]
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;
