//! The pool's settings from an agent's options as JavaScript gives them: counts and
//! milliseconds as numbers, any of which may be absent, infinite, negative or fractional.
//! JavaScript has checked each option with Node's error codes; what each value means for the
//! pool (unlimited, none, the default) is decided here.

use std::time::Duration;

use super::{Limits, ReleasePolicy, Scheduling, Wear};

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
    /// negative), `maxRequestsPerSocket` (no limit unless at least 1 and finite).
    pub fn of_options(
        keep_alive: Option<bool>,
        idle_ms: Option<f64>,
        ttl_ms: Option<f64>,
        hint_buffer_ms: Option<f64>,
        max_requests: Option<f64>,
    ) -> ReleasePolicy {
        ReleasePolicy {
            max_requests: max_requests.and_then(request_count),
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

/// A count of requests: none (no limit) unless at least 1 and finite; a fraction is rounded
/// up (Node compares counts with `<`), and more than `u32::MAX` is `u32::MAX`.
fn request_count(n: f64) -> Option<u32> {
    (n >= 1.0 && n.is_finite()).then(|| n.ceil().min(f64::from(u32::MAX)) as u32)
}

/// The largest drop-in request body kept for a replay: 0 turns replays off.
pub fn replay_limit(bytes: Option<f64>) -> usize {
    bytes.map_or(REPLAY_LIMIT, |n| n.max(0.0) as usize)
}

/// How long a connection may idle, in milliseconds as JavaScript gives it at a release: none
/// (it may only serve a waiter) when negative, no limit (`Duration::MAX`) when infinite.
pub fn idle_ms(ms: f64) -> Option<Duration> {
    if ms < 0.0 || ms.is_nan() {
        None
    } else if ms.is_infinite() {
        Some(Duration::MAX)
    } else {
        Some(Duration::from_micros((ms * 1000.0) as u64))
    }
}

/// A duration for JavaScript, in milliseconds: `Duration::MAX` (no limit) is infinite.
pub fn as_ms(d: Duration) -> f64 {
    if d == Duration::MAX {
        f64::INFINITY
    } else {
        d.as_secs_f64() * 1000.0
    }
}

/// How long a drop-in connection its request freed may idle, by the agent's rule (see
/// [`ReleasePolicy::idle_for`]): `own_ms` the socket's free timeout or the agent's (infinite:
/// no limit; not positive: not kept), `hint` the response's `Keep-Alive` header, `buffer_ms`
/// the agent's `agentKeepAliveTimeoutBuffer`. None: not kept.
pub fn drop_in_idle(own_ms: f64, hint: Option<&[u8]>, buffer_ms: f64) -> Option<Duration> {
    if own_ms.is_nan() || own_ms <= 0.0 {
        return None;
    }
    let own = idle_ms(own_ms)?;
    let policy = ReleasePolicy {
        hint_buffer: Duration::from_micros((buffer_ms.max(0.0) * 1000.0) as u64),
        ..ReleasePolicy::default()
    };
    policy.idle_for(Some(own), hint.and_then(super::keep_alive_hint))
}

/// How much longer a drop-in connection as `wear` as it is may serve, by the agent's rule (see
/// [`ReleasePolicy::settle`]) with `socketActiveTTL` (`ttl_ms`) and `maxRequestsPerSocket`
/// (`max_requests`) as JavaScript reads them now: zero once either is reached, what is left of
/// the TTL, None without a limit.
pub fn use_left(ttl_ms: f64, max_requests: f64, wear: Wear) -> Option<Duration> {
    let policy = ReleasePolicy {
        ttl: duration_ms(Some(ttl_ms)),
        max_requests: request_count(max_requests),
        ..ReleasePolicy::default()
    };
    match policy.settle(wear, Some(Duration::MAX)) {
        super::Fate::Close => Some(Duration::ZERO),
        super::Fate::Release(Some(left)) if left != Duration::MAX => Some(left),
        super::Fate::Release(_) => None,
    }
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
        let default = ReleasePolicy::of_options(None, None, None, None, None);
        assert!(default.keep_alive);
        assert_eq!((default.idle, default.ttl), (None, None));
        assert_eq!(default.hint_buffer, HINT_BUFFER);
        assert_eq!(default.max_requests, None);
        let given = ReleasePolicy::of_options(
            Some(false),
            Some(4000.0),
            Some(f64::INFINITY),
            Some(0.0),
            Some(100.0),
        );
        assert!(!given.keep_alive);
        assert_eq!(given.idle, Some(Duration::from_secs(4)));
        assert_eq!(given.ttl, None);
        assert_eq!(given.hint_buffer, Duration::ZERO);
        assert_eq!(given.max_requests, Some(100));
        for ms in [-1.0, f64::NAN, f64::INFINITY] {
            let odd = ReleasePolicy::of_options(None, None, None, Some(ms), None);
            assert_eq!(odd.hint_buffer, HINT_BUFFER, "{ms}");
        }
        for (n, max) in [
            (0.0, None),
            (0.5, None),
            (-1.0, None),
            (f64::NAN, None),
            (f64::INFINITY, None),
            (1.0, Some(1)),
            (2.5, Some(3)),
            (1e12, Some(u32::MAX)),
        ] {
            let policy = ReleasePolicy::of_options(None, None, None, None, Some(n));
            assert_eq!(policy.max_requests, max, "{n}");
        }
    }

    #[test]
    fn replays_keep_64_kib_unless_the_agent_says_and_a_negative_limit_turns_them_off() {
        assert_eq!(replay_limit(None), 64 * 1024);
        assert_eq!(replay_limit(Some(0.0)), 0);
        assert_eq!(replay_limit(Some(-5.0)), 0);
        assert_eq!(replay_limit(Some(1024.0)), 1024);
    }

    #[test]
    fn a_released_connections_idle_time_is_none_when_negative_and_unlimited_when_infinite() {
        assert_eq!(idle_ms(-1.0), None);
        assert_eq!(idle_ms(f64::NAN), None);
        assert_eq!(idle_ms(0.0), Some(Duration::ZERO));
        assert_eq!(idle_ms(f64::INFINITY), Some(Duration::MAX));
        assert_eq!(idle_ms(2.5), Some(Duration::from_micros(2500)));
        assert_eq!(as_ms(Duration::MAX), f64::INFINITY);
        assert_eq!(as_ms(Duration::from_micros(2500)), 2.5);
    }

    #[test]
    fn a_drop_in_connection_idles_for_its_own_limit_or_the_servers_hint_less_the_buffer() {
        assert_eq!(drop_in_idle(0.0, None, 1000.0), None);
        assert_eq!(drop_in_idle(-5.0, None, 1000.0), None);
        assert_eq!(drop_in_idle(f64::NAN, None, 1000.0), None);
        assert_eq!(
            drop_in_idle(f64::INFINITY, None, 1000.0),
            Some(Duration::MAX)
        );
        assert_eq!(
            drop_in_idle(4000.0, None, 1000.0),
            Some(Duration::from_secs(4))
        );
        // The server keeps it 5 s: it idles 4 s (the buffer before the server's close).
        let hint = Some(&b"timeout=5"[..]);
        assert_eq!(
            drop_in_idle(f64::INFINITY, hint, 1000.0),
            Some(Duration::from_secs(4))
        );
        assert_eq!(
            drop_in_idle(f64::INFINITY, hint, -1.0),
            Some(Duration::from_secs(5))
        );
        // Its own shorter limit wins.
        assert_eq!(
            drop_in_idle(2000.0, hint, 1000.0),
            Some(Duration::from_secs(2))
        );
    }

    #[test]
    fn what_is_left_of_a_connections_use_is_none_without_limits_and_zero_once_one_is_reached() {
        let wear = |secs, requests| Wear {
            age: Duration::from_secs(secs),
            requests,
        };
        assert_eq!(use_left(0.0, 0.0, wear(1, 1)), None);
        assert_eq!(use_left(f64::INFINITY, f64::INFINITY, wear(1, 1)), None);
        assert_eq!(
            use_left(5000.0, 0.0, wear(1, 1)),
            Some(Duration::from_secs(4))
        );
        assert_eq!(use_left(1000.0, 0.0, wear(2, 1)), Some(Duration::ZERO));
        // maxRequestsPerSocket: reached with the request that brings the count to it.
        assert_eq!(use_left(0.0, 3.0, wear(1, 2)), None);
        assert_eq!(use_left(0.0, 3.0, wear(1, 3)), Some(Duration::ZERO));
        assert_eq!(use_left(5000.0, 3.0, wear(1, 3)), Some(Duration::ZERO));
        assert_eq!(
            use_left(5000.0, 3.0, wear(1, 2)),
            Some(Duration::from_secs(4))
        );
    }
}
