//! agentkeepalive's counters, kept where the events they count happen.

/// The counters of `agent.getCurrentStatus()`, with agentkeepalive's meanings.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Connections established.
    pub create_socket_count: u64,
    /// Connection attempts that failed (DNS, refused, unreachable, ...).
    pub create_socket_error_count: u64,
    /// Connections closed, for any reason.
    pub close_socket_count: u64,
    /// Errors on established connections.
    pub error_socket_count: u64,
    /// Connections closed by a timeout, idle (`freeSocketTimeout`) or active (`timeout`).
    pub timeout_socket_count: u64,
    /// Requests that completed and gave their connection back.
    pub request_count: u64,
    /// Requests sent again on a fresh connection after a reused one died before answering.
    pub replay_count: u64,
}
