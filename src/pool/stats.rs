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

/// How a connection ended, as an HTTP/2 session's end counts (see [`Stats::count_end`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnEnd {
    /// Closed by its peer (a FIN, a TLS close_notify, an HTTP/2 GOAWAY without error), or by
    /// the pool.
    Closed,
    /// An error ended it: a reset, a TLS alert, an HTTP/2 GOAWAY with an error code.
    Failed,
    /// A timeout ended it: an HTTP/2 PING that was not answered in time.
    TimedOut,
}

impl Stats {
    /// Counts the end of an HTTP/2 session as one socket's, as Node's http2 session errs: an
    /// error in `errorSocketCount`; a timeout in `timeoutSocketCount` too, as for a connection
    /// in use (see [`Stats::count_failure`]). An idle HTTP/1.1 connection's end counts
    /// nothing: agentkeepalive's free socket that its server resets closes without an error
    /// from Node 22 on.
    pub fn count_end(&mut self, end: ConnEnd) {
        match end {
            ConnEnd::Closed => {}
            ConnEnd::Failed => self.error_socket_count += 1,
            ConnEnd::TimedOut => {
                self.timeout_socket_count += 1;
                self.error_socket_count += 1;
            }
        }
    }

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

    #[test]
    fn the_end_of_a_session_counts_by_its_kind() {
        let mut stats = Stats::default();
        stats.count_end(ConnEnd::Closed);
        assert_eq!(stats, Stats::default());
        stats.count_end(ConnEnd::Failed);
        assert_eq!(
            (stats.error_socket_count, stats.timeout_socket_count),
            (1, 0)
        );
        stats.count_end(ConnEnd::TimedOut);
        assert_eq!(
            (stats.error_socket_count, stats.timeout_socket_count),
            (2, 1)
        );
        // Neither closes it: the pool counts that where it lets the connection go.
        assert_eq!(stats.close_socket_count, 0);
    }
}
