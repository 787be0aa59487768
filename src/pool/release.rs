//! What becomes of a connection whose request finished: the agent's rules, for both request
//! paths. `keepAlive` (off: it may only serve a waiter), `freeSocketTimeout` (how long it may
//! idle, or a socket's own free timeout), the server's `Keep-Alive: timeout=N` hint less
//! `agentKeepAliveTimeoutBuffer` (the client gives up first, as Node's agent does), and
//! `socketActiveTTL` (an older connection is not reused, and idles no longer than what is
//! left of it), `maxRequestsPerSocket` (an HTTP/1.1 connection that carried that many requests
//! is not reused). The promise path applies them in Rust; the drop-in path asks through the
//! binding with the live values of its options, around Node's `keepSocketAlive()` hook.

use std::time::{Duration, Instant};

/// The agent's options that decide a freed connection's fate.
#[derive(Clone, Copy, Debug)]
pub struct ReleasePolicy {
    /// `keepAlive`: off, a freed connection only serves a waiter.
    pub keep_alive: bool,
    /// `freeSocketTimeout`; `None`: no limit.
    pub idle: Option<Duration>,
    /// `socketActiveTTL`; `None`: no limit.
    pub ttl: Option<Duration>,
    /// `agentKeepAliveTimeoutBuffer`: how much sooner than a server's `Keep-Alive: timeout`
    /// hint a connection stops idling.
    pub hint_buffer: Duration,
    /// `maxRequestsPerSocket` (undici's `maxRequestsPerClient`): the most requests an HTTP/1.1
    /// connection carries; `None`: no limit.
    pub max_requests: Option<u32>,
}

/// How worn a connection whose request just finished is: its `age`, and the `requests` it has
/// carried, that one included.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Wear {
    pub age: Duration,
    pub requests: u32,
}

impl Default for ReleasePolicy {
    fn default() -> Self {
        ReleasePolicy {
            keep_alive: true,
            idle: None,
            ttl: None,
            hint_buffer: Duration::from_secs(1),
            max_requests: None,
        }
    }
}

/// A freed connection's fate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    /// `socketActiveTTL` or `maxRequestsPerSocket` is reached: it closes, and serves no waiter.
    Close,
    /// Back to the pool: to a waiter, or idle for this long (`Duration::MAX`: no limit);
    /// `None`: it may serve a waiter but not idle.
    Release(Option<Duration>),
}

impl ReleasePolicy {
    /// How long a connection may idle: `own` (a socket's own free timeout) or
    /// `freeSocketTimeout` (`Duration::MAX` when neither limits it), shortened by the server's
    /// `hint` less the buffer. `None` when it may not idle: keep-alive is off, or the hint
    /// leaves nothing.
    pub fn idle_for(&self, own: Option<Duration>, hint: Option<Duration>) -> Option<Duration> {
        if !self.keep_alive {
            return None;
        }
        let idle = own.or(self.idle).unwrap_or(Duration::MAX);
        let idle = match hint {
            Some(hint) => idle.min(hint.saturating_sub(self.hint_buffer)),
            None => idle,
        };
        (!idle.is_zero()).then_some(idle)
    }

    /// Whether a connection `age` old has outlived `socketActiveTTL`: it takes no new request
    /// (an HTTP/2 session no new stream).
    pub fn outlived(&self, age: Duration) -> bool {
        self.ttl.is_some_and(|ttl| age >= ttl)
    }

    /// How many streams an HTTP/2 session `age` old takes at once, its server allowing
    /// `max_streams`: none once it has outlived `socketActiveTTL` (it idles out once its own
    /// streams are done).
    pub fn session_room(&self, age: Duration, max_streams: usize) -> usize {
        if self.outlived(age) {
            0
        } else {
            max_streams
        }
    }

    /// When an HTTP/2 session opened at `created` reaches `socketActiveTTL`: it takes no new
    /// stream from then on, and closes then if it carries none (rather than idle on, unused,
    /// for `freeSocketTimeout`). `None` without a TTL.
    pub fn session_end(&self, created: Instant) -> Option<Instant> {
        created.checked_add(self.ttl?)
    }

    /// How long an HTTP/2 session may carry no stream: as long as a pooled connection may idle
    /// (`freeSocketTimeout`; a server's hint is a connection's, not a session's), and not at
    /// all with keep-alive off.
    pub fn session_idle(&self) -> Duration {
        self.idle_for(None, None).unwrap_or(Duration::ZERO)
    }

    /// Whether a connection that has carried `requests` has carried all `maxRequestsPerSocket`
    /// allows: it takes no other.
    pub fn spent(&self, requests: u32) -> bool {
        self.max_requests.is_some_and(|max| requests >= max)
    }

    /// The fate of a connection as `wear` as it is that may idle for `idle` (see
    /// [`Self::idle_for`]): it closes once it has carried `maxRequestsPerSocket` requests; under
    /// `socketActiveTTL`, it closes once the TTL is reached, and idles no longer than what is
    /// left of it.
    pub fn settle(&self, wear: Wear, idle: Option<Duration>) -> Fate {
        if self.spent(wear.requests) {
            return Fate::Close;
        }
        let Some(ttl) = self.ttl else {
            return Fate::Release(idle);
        };
        if wear.age >= ttl {
            return Fate::Close;
        }
        Fate::Release(idle.map(|idle| idle.min(ttl - wear.age)))
    }
}

/// The server's `Keep-Alive: timeout=N` hint (the header's value): how long it says it keeps
/// the connection idle. Other parameters (`max=`) and a value that is not a number give none.
pub fn keep_alive_hint(value: &[u8]) -> Option<Duration> {
    let value = std::str::from_utf8(value).ok()?.trim_start();
    let rest = value.strip_prefix("timeout=")?;
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    let secs: u64 = rest[..digits].parse().ok()?;
    Some(Duration::from_secs(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_takes_streams_until_its_ttl_ends_and_idles_as_a_connection_would() {
        let policy = ReleasePolicy {
            idle: Some(Duration::from_secs(4)),
            ttl: Some(Duration::from_secs(60)),
            ..ReleasePolicy::default()
        };
        assert_eq!(policy.session_room(Duration::from_secs(59), 100), 100);
        assert_eq!(policy.session_room(Duration::from_secs(60), 100), 0);
        assert_eq!(policy.session_idle(), Duration::from_secs(4));
        let t0 = Instant::now();
        assert_eq!(policy.session_end(t0), Some(t0 + Duration::from_secs(60)));
        assert_eq!(ReleasePolicy::default().session_end(t0), None, "no TTL");
        let off = ReleasePolicy {
            keep_alive: false,
            ..policy
        };
        assert_eq!(
            off.session_idle(),
            Duration::ZERO,
            "keep-alive off: none idles"
        );
        assert_eq!(ReleasePolicy::default().session_idle(), Duration::MAX);
    }

    #[test]
    fn a_connection_outlives_the_ttl_once_it_is_reached() {
        let policy = ReleasePolicy {
            ttl: Some(Duration::from_secs(5)),
            ..ReleasePolicy::default()
        };
        assert!(!policy.outlived(Duration::from_secs(4)));
        assert!(policy.outlived(Duration::from_secs(5)));
        assert!(!ReleasePolicy::default().outlived(Duration::MAX));
    }

    const S: fn(u64) -> Duration = Duration::from_secs;

    /// A connection `age` old whose first request just finished.
    fn aged(age: Duration) -> Wear {
        Wear { age, requests: 1 }
    }

    fn policy(idle: Option<Duration>, ttl: Option<Duration>) -> ReleasePolicy {
        ReleasePolicy {
            idle,
            ttl,
            ..ReleasePolicy::default()
        }
    }

    #[test]
    fn free_timeout_and_the_servers_hint_less_the_buffer() {
        let p = policy(Some(S(4)), None);
        assert_eq!(p.idle_for(None, None), Some(S(4)));
        // The socket's own free timeout wins over the agent's.
        assert_eq!(p.idle_for(Some(S(9)), None), Some(S(9)));
        // `timeout=3`: idle 2 s at most, the buffer being 1 s.
        assert_eq!(p.idle_for(None, Some(S(3))), Some(S(2)));
        assert_eq!(p.idle_for(None, Some(S(60))), Some(S(4)));
        // A hint the buffer eats entirely: not kept.
        assert_eq!(p.idle_for(None, Some(S(1))), None);
        assert_eq!(p.idle_for(None, Some(S(0))), None);
        // No freeSocketTimeout: no limit but the hint.
        assert_eq!(policy(None, None).idle_for(None, None), Some(Duration::MAX));
        assert_eq!(policy(None, None).idle_for(None, Some(S(5))), Some(S(4)));
        let buffered = ReleasePolicy {
            hint_buffer: Duration::ZERO,
            ..policy(None, None)
        };
        assert_eq!(buffered.idle_for(None, Some(S(1))), Some(S(1)));
    }

    #[test]
    fn keep_alive_off_serves_a_waiter_only() {
        let p = ReleasePolicy {
            keep_alive: false,
            ..policy(Some(S(4)), None)
        };
        assert_eq!(p.idle_for(None, None), None);
        assert_eq!(p.settle(aged(S(1)), None), Fate::Release(None));
    }

    #[test]
    fn active_ttl_closes_old_connections_and_caps_the_idle_time() {
        let p = policy(Some(S(4)), Some(S(10)));
        assert_eq!(p.settle(aged(S(10)), Some(S(4))), Fate::Close);
        assert_eq!(p.settle(aged(S(11)), None), Fate::Close);
        assert_eq!(p.settle(aged(S(8)), Some(S(4))), Fate::Release(Some(S(2))));
        assert_eq!(p.settle(aged(S(1)), Some(S(4))), Fate::Release(Some(S(4))));
        assert_eq!(p.settle(aged(S(1)), None), Fate::Release(None));
        assert_eq!(
            policy(None, None).settle(aged(S(1_000_000)), Some(S(4))),
            Fate::Release(Some(S(4)))
        );
    }

    #[test]
    fn a_connection_that_carried_max_requests_closes() {
        let p = ReleasePolicy {
            max_requests: Some(3),
            ..policy(Some(S(4)), Some(S(10)))
        };
        let wear = |requests| Wear {
            age: S(1),
            requests,
        };
        assert!(!p.spent(2));
        assert!(p.spent(3));
        assert_eq!(p.settle(wear(2), Some(S(4))), Fate::Release(Some(S(4))));
        assert_eq!(p.settle(wear(3), Some(S(4))), Fate::Close);
        assert_eq!(p.settle(wear(4), None), Fate::Close);
        // Under both limits, the first reached closes it.
        let old = Wear {
            age: S(10),
            requests: 1,
        };
        assert_eq!(p.settle(old, Some(S(4))), Fate::Close);
        // No limit: any number.
        assert!(!ReleasePolicy::default().spent(u32::MAX));
        assert_eq!(
            policy(None, None).settle(wear(u32::MAX), None),
            Fate::Release(None)
        );
    }

    #[test]
    fn the_hint_is_read_from_the_header_value() {
        assert_eq!(keep_alive_hint(b"timeout=5"), Some(S(5)));
        assert_eq!(keep_alive_hint(b"timeout=5, max=100"), Some(S(5)));
        assert_eq!(keep_alive_hint(b" timeout=30"), Some(S(30)));
        assert_eq!(keep_alive_hint(b"max=100, timeout=5"), None);
        assert_eq!(keep_alive_hint(b"timeout=abc"), None);
        assert_eq!(keep_alive_hint(b"timeout="), None);
        assert_eq!(keep_alive_hint(b"\xff"), None);
    }
}
