//! Getting a connection: DNS lookups and TCP or Unix connects on the tokio runtime, and the
//! liveness check that tells a healthy idle socket from one its peer has closed.

pub mod carry;
pub mod connect;
pub mod dns;
pub mod establish;
pub mod liveness;
pub mod pump;
pub mod raw;
pub mod tls;

pub use connect::{
    connect, keepalive_time, AddressChoice, ConnectOptions, Connected, Order, Peer, ProxyTls,
    Socket, Target, Tunnel,
};
