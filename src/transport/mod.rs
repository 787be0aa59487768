//! Getting a connection: DNS lookups and TCP or Unix (on Windows, named pipe) connects on the
//! tokio runtime, and, on Unix, the liveness check that tells a healthy idle socket from one its
//! peer has closed.

pub mod carry;
pub mod connect;
pub mod dns;
pub mod establish;
#[cfg(unix)]
pub mod liveness;
pub mod pump;
#[cfg(unix)]
pub mod raw;
pub mod tls;

pub use connect::{
    connect, keepalive_time, AddressChoice, ConnectOptions, Connected, Direct, Order, PathStream,
    Peer, ProxyTls, Socket, Target, Tunnel,
};
