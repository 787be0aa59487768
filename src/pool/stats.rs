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
    /// Requests that completed and gave their connection back (to be kept, or closed at
    /// `socketActiveTTL` or `maxRequestsPerSocket`).
    pub request_count: u64,
    /// Requests sent again on a fresh connection after a reused one died before answering.
    pub replay_count: u64,
}

impl Stats {
    /// Counts a failure of an established connection as agentkeepalive counts its socket's: an
    /// error of the connection itself (a reset, a TLS alert) in `errorSocketCount`; a timeout
    /// (headers or body) in `timeoutSocketCount` and `errorSocketCount`, as agentkeepalive's
    /// socket also errs when its timeout destroys it; a malformed response or the server
    /// closing is neither.
    pub fn count_failure(&mut self, err: &crate::error::Error) {
        if err.is_socket_fault() {
            self.error_socket_count += 1;
        } else if err.timed_out() {
            self.timeout_socket_count += 1;
            self.error_socket_count += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::error::Error;

    #[test]
    fn failures_count_by_their_kind() {
        let mut stats = Stats::default();
        stats.count_failure(&Error::os(libc::ECONNRESET, "read").as_socket_fault());
        assert_eq!(
            (stats.error_socket_count, stats.timeout_socket_count),
            (1, 0)
        );
        stats.count_failure(&Error::socket_timeout(Duration::from_secs(1)));
        assert_eq!(
            (stats.error_socket_count, stats.timeout_socket_count),
            (2, 1)
        );
        stats.count_failure(&crate::client::headers_timeout(Duration::from_millis(300)));
        assert_eq!(
            (stats.error_socket_count, stats.timeout_socket_count),
            (3, 2)
        );
        // The server closing, or an answer that is not HTTP: not the socket's fault.
        stats.count_failure(&Error::tls("ECONNRESET", "socket hang up"));
        stats.count_failure(&Error::tls("HPE_INVALID_CONSTANT", "Parse Error"));
        assert_eq!(
            (stats.error_socket_count, stats.timeout_socket_count),
            (3, 2)
        );
    }
}
