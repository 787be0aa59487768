//! hyperagent: Node's `http.Agent` with its connection pool, sockets and DNS in Rust.
//!
//! - [`pool`]: the pool's bookkeeping (keys, idle lists, limits, waiters, expiry, statistics);
//! - [`transport`]: DNS and TCP/Unix connect on tokio, liveness checks on idle sockets;
//! - [`error`]: one error type, with Node's code, errno and syscall derived in one place;
//! - `binding`: the napi surface and the JavaScript thread's byte path (not in `cargo test`).

pub mod error;
pub mod pool;
pub mod runtime;
pub mod transport;

#[cfg(not(test))]
mod binding;
