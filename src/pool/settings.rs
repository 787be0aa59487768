//! The pool's settings from an agent's options as JavaScript gives them: counts and
//! milliseconds as numbers, any of which may be absent, infinite, negative or fractional.
//! JavaScript has checked each option with Node's error codes; what each value means for the
//! pool (unlimited, none, the default) is decided here.

use std::time::Duration;

use super::{Limits, ReleasePolicy, Scheduling};

/// How much sooner than a server's `Keep-Alive: timeout` a connection stops idling, unless the
/// agent says (`agentKeepAliveTimeoutBuffer`, as Node's default).
pub const HINT_BUFFER: Duration = Duration::from_secs(1);

/// The largest drop-in request body kept for a replay, unless the agent says.
pub const REPLAY_LIMIT: usize = 64 * 1024;

/// A duration in milliseconds: none unless positive and finite (a fraction of a millisecond
/// is kept to the microsecond).
pub fn duration_ms(ms: Option<f64>) -> Option<Duration> {
    ms.filter(|ms| *ms > 0.0 && ms.is_finite())
        .map(|ms| Duration::from_micros((ms * 1000.0) as u64))
}

/// A count of connections: unlimited unless finite and not negative.
fn count(n: f64) -> usize {
    if n.is_finite() && n >= 0.0 {
        n as usize
    } else {
        usize::MAX
    }
}

impl Limits {
    /// `maxSockets`, `maxFreeSockets`, `maxTotalSockets` and `scheduling: 'lifo'`.
    pub fn of_counts(
        max_sockets: f64,
        max_free_sockets: f64,
        max_total_sockets: f64,
        lifo: bool,
    ) -> Limits {
        Limits {
            max_sockets: count(max_sockets),
            max_free_sockets: count(max_free_sockets),
            max_total_sockets: count(max_total_sockets),
            scheduling: if lifo {
                Scheduling::Lifo
            } else {
                Scheduling::Fifo
            },
        }
    }
}

impl ReleasePolicy {
    /// `keepAlive` (default on), `freeSocketTimeout` and `socketActiveTTL` (none unless
    /// positive and finite), `agentKeepAliveTimeoutBuffer` (1 s unless finite and not
    /// negative).
    pub fn of_options(
        keep_alive: Option<bool>,
        idle_ms: Option<f64>,
        ttl_ms: Option<f64>,
        hint_buffer_ms: Option<f64>,
    ) -> ReleasePolicy {
        ReleasePolicy {
            keep_alive: keep_alive.unwrap_or(true),
            idle: duration_ms(idle_ms),
            ttl: duration_ms(ttl_ms),
            hint_buffer: hint_buffer_ms
                .filter(|ms| *ms >= 0.0 && ms.is_finite())
                .map_or(HINT_BUFFER, |ms| {
                    Duration::from_micros((ms * 1000.0) as u64)
                }),
        }
    }
}

/// The largest drop-in request body kept for a replay: 0 turns replays off.
pub fn replay_limit(bytes: Option<f64>) -> usize {
    bytes.map_or(REPLAY_LIMIT, |n| n.max(0.0) as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_duration_is_none_unless_positive_and_finite() {
        assert_eq!(duration_ms(None), None);
        for none in [0.0, -1.0, f64::INFINITY, f64::NEG_INFINITY, f64::NAN] {
            assert_eq!(duration_ms(Some(none)), None, "{none}");
        }
        assert_eq!(duration_ms(Some(1500.0)), Some(Duration::from_millis(1500)));
        assert_eq!(duration_ms(Some(0.25)), Some(Duration::from_micros(250)));
    }

    #[test]
    fn a_count_is_unlimited_unless_finite_and_not_negative() {
        let limits = Limits::of_counts(f64::INFINITY, 0.0, -1.0, true);
        assert_eq!(limits.max_sockets, usize::MAX);
        assert_eq!(limits.max_free_sockets, 0);
        assert_eq!(limits.max_total_sockets, usize::MAX);
        assert_eq!(limits.scheduling, Scheduling::Lifo);
        let limits = Limits::of_counts(10.0, f64::NAN, 50.0, false);
        assert_eq!(
            (
                limits.max_sockets,
                limits.max_free_sockets,
                limits.max_total_sockets
            ),
            (10, usize::MAX, 50)
        );
        assert_eq!(limits.scheduling, Scheduling::Fifo);
    }

    #[test]
    fn the_release_policy_takes_nodes_defaults_where_the_agent_says_nothing() {
        let default = ReleasePolicy::of_options(None, None, None, None);
        assert!(default.keep_alive);
        assert_eq!((default.idle, default.ttl), (None, None));
        assert_eq!(default.hint_buffer, HINT_BUFFER);
        let given =
            ReleasePolicy::of_options(Some(false), Some(4000.0), Some(f64::INFINITY), Some(0.0));
        assert!(!given.keep_alive);
        assert_eq!(given.idle, Some(Duration::from_secs(4)));
        assert_eq!(given.ttl, None);
        assert_eq!(given.hint_buffer, Duration::ZERO);
        for ms in [-1.0, f64::NAN, f64::INFINITY] {
            let odd = ReleasePolicy::of_options(None, None, None, Some(ms));
            assert_eq!(odd.hint_buffer, HINT_BUFFER, "{ms}");
        }
    }

    #[test]
    fn replays_keep_64_kib_unless_the_agent_says_and_a_negative_limit_turns_them_off() {
        assert_eq!(replay_limit(None), 64 * 1024);
        assert_eq!(replay_limit(Some(0.0)), 0);
        assert_eq!(replay_limit(Some(-5.0)), 0);
        assert_eq!(replay_limit(Some(1024.0)), 1024);
    }
}
