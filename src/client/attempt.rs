//! One `agent.request()` across its attempts: what it sends until an attempt takes it, the
//! replay it may still make, what its exchange has said so far, and the headers timeout its
//! caller keeps instead of the exchange (see [`Spec::take_coarse_headers_timeout`]).
//!
//! What each event of an exchange means for the request is decided here: an answer ends any
//! chance of a replay, a failure before the answer is a replay or the request's error (by
//! `crate::replay`'s rules: one replay after the keep-alive race, a few after refusals). The
//! caller (the binding) applies the outcome: it tells JavaScript, and opens or routes the next
//! attempt.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::plan::Replay;
use super::{BodyWriter, HeaderLines, SourceClock, Spec};
use crate::error::Error;

/// What an attempt goes out on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Connection {
    /// A connection that served before: an idle one, or a stream of an HTTP/2 session.
    Reused,
    /// A new connection. A request on one is never sent again after the keep-alive race (the
    /// server may be refusing it), unless it `may_refuse`: it may speak HTTP/2, whose server
    /// may refuse the stream, and a refused stream is sent again.
    New { may_refuse: bool },
}

/// What the end of an attempt that is being replayed gives.
#[derive(Debug)]
pub enum Retry {
    /// Sent again: the next attempt's description is ready ([`Attempt::start`]). `drain`: the
    /// body's writer was held back by the lost connection, and may go on now.
    Again { drain: bool },
    /// A streamed body outgrew what a replay keeps meanwhile: the request fails as it would
    /// have without a replay, with the attempt's error.
    Fails(Option<Error>),
}

/// A headers deadline, as a sweep finds it.
#[derive(Debug, PartialEq, Eq)]
pub enum Deadline {
    /// None to watch: no long headers timeout, the head came, or a replay is under way.
    Unwatched,
    /// Still ahead.
    Running,
    /// Passed without a response head: the request fails with the timeout given (once).
    Passed(Duration),
}

pub struct Attempt {
    /// The next attempt's description until it starts (a queued request keeps it here).
    spec: Option<Spec>,
    /// The streamed body's writer, while the request has one.
    writer: Option<BodyWriter>,
    /// What it takes to send the request again, while it may be (see `plan`). Each replay
    /// gives the next one's; dropped once the server has the request, or when no more replay
    /// is allowed.
    replay: Option<Replay>,
    /// It went again after the keep-alive race (which happens once).
    raced: bool,
    /// How many times the server refused it unprocessed.
    refusals: u8,
    /// The current attempt went out on a reused connection.
    reused: bool,
    /// The response head came (errors after it are "aborted", and no replay can follow).
    headed: bool,
    /// A replay is under way: the failed attempt's end is not the request's. Holds that
    /// attempt's error, the request's should the replay not be possible after all.
    retrying: Option<Error>,
    /// How long the server said it keeps the connection idle (`Keep-Alive: timeout=N`).
    hint: Option<Duration>,
    /// The headers timeout the caller keeps, when the current attempt's was armed, and when
    /// it runs out (later, where the attempt's streamed body moves it: see `body_clock`).
    headers_timeout: Option<Duration>,
    headers_armed: Option<Instant>,
    headers_deadline: Option<Instant>,
    /// The current attempt's streamed body's progress (see [`SourceClock`]).
    body_clock: Option<Arc<SourceClock>>,
}

impl Attempt {
    pub fn new(spec: Spec, replay: Option<Replay>, writer: Option<BodyWriter>) -> Attempt {
        Attempt {
            spec: Some(spec),
            writer,
            replay,
            raced: false,
            refusals: 0,
            reused: false,
            headed: false,
            retrying: None,
            hint: None,
            headers_timeout: None,
            headers_armed: None,
            headers_deadline: None,
            body_clock: None,
        }
    }

    /// The next attempt starts on `on`: what it sends, or None if it has started already. A
    /// headers timeout longer than the exchange keeps is taken out for the caller's deadline
    /// ([`Attempt::arm`]).
    pub fn start(&mut self, on: Connection) -> Option<Spec> {
        let mut spec = self.spec.take()?;
        if let Some(t) = spec.take_coarse_headers_timeout() {
            self.headers_timeout = Some(t);
        }
        self.headers_deadline = None;
        self.body_clock = spec.body_clock.clone();
        self.reused = on == Connection::Reused;
        if on == (Connection::New { may_refuse: false }) {
            // Never sent again: a streamed body need not be kept for it.
            if let Some(replay) = &self.replay {
                replay.drop_recording();
            }
        }
        Some(spec)
    }

    /// The attempt's exchange runs on its connection from `now`: its headers deadline starts.
    /// True when there is one for the caller to watch.
    pub fn arm(&mut self, now: Instant) -> bool {
        // A deadline past what an Instant holds never comes.
        self.headers_armed = Some(now);
        self.headers_deadline = self.headers_timeout.and_then(|t| now.checked_add(t));
        self.headers_deadline.is_some()
    }

    /// The headers deadline at `now`. A passed one is reported once.
    pub fn sweep(&mut self, now: Instant) -> Deadline {
        let Some(deadline) = self.headers_deadline else {
            return Deadline::Unwatched;
        };
        if self.headed || self.retrying.is_some() {
            return Deadline::Unwatched;
        }
        if deadline > now {
            return Deadline::Running;
        }
        let t = self.headers_timeout.unwrap_or_default();
        // A streamed body that moved it since, or whose source the connection waits on.
        if let (Some(clock), Some(armed)) = (&self.body_clock, self.headers_armed) {
            let at = tokio::time::Instant::from_std;
            let later = clock.deadline(at(armed), t, at(now));
            if let Some(later) = later {
                self.headers_deadline = Some(later.into_std());
                return Deadline::Running;
            }
        }
        self.headers_deadline = None;
        Deadline::Passed(t)
    }

    /// An informational (1xx) response: the server has the request, so no replay will send it
    /// again (the exchange fails as answered if the connection dies now).
    pub fn informed(&mut self) {
        self.answered();
    }

    /// The response head came, with `headers`.
    pub fn headed(&mut self, headers: &HeaderLines) {
        self.headed = true;
        self.answered();
        self.hint = headers
            .pairs()
            .find(|(name, _)| *name == b"keep-alive")
            .and_then(|(_, value)| crate::pool::keep_alive_hint(value));
    }

    fn answered(&mut self) {
        if let Some(replay) = self.replay.take() {
            replay.drop_recording();
        }
    }

    /// The keep-alive race: a reused connection died before answering. An idempotent request
    /// is sent once more, on a fresh connection (RFC 9110 §9.2.2): None, the error is held
    /// until the attempt ends. Anything else fails with `err`, returned.
    pub fn unsent(&mut self, err: Error) -> Option<Error> {
        let possible = !self.raced
            && self
                .replay
                .as_ref()
                .is_some_and(|r| r.idempotent && r.possible());
        let replays = crate::replay::replays_after_race(self.reused, possible);
        self.raced |= replays;
        self.hold_or_give(replays, err)
    }

    /// The server refused the request unprocessed (an HTTP/2 stream): it goes again, whatever
    /// its method, while it can (None); otherwise it fails with `err`, returned.
    pub fn refused(&mut self, err: Error) -> Option<Error> {
        let possible = self.replay.as_ref().is_some_and(Replay::possible);
        let replays = crate::replay::replays_after_refusal(possible, self.refusals);
        if replays {
            self.refusals += 1;
        }
        self.hold_or_give(replays, err)
    }

    /// Whether a replay could still be allowed after the one under way: another refusal, or
    /// the race for an idempotent request that has not met it.
    fn may_go_again(&self, next: &Replay) -> bool {
        crate::replay::replays_after_refusal(true, self.refusals)
            || (next.idempotent && !self.raced)
    }

    fn hold_or_give(&mut self, replays: bool, err: Error) -> Option<Error> {
        if !replays {
            return Some(err);
        }
        self.retrying = Some(err);
        None
    }

    /// A replay is under way (the attempt's end is not the request's).
    pub fn retrying(&self) -> bool {
        self.retrying.is_some()
    }

    /// The attempt being replayed ended: the request is made again, its new writer, whose
    /// drain calls `drained`, in the old one's place; what a further replay would send is kept
    /// while one may still be allowed.
    pub fn retry(&mut self, drained: impl Fn() + Send + Sync + 'static) -> Retry {
        let err = self.retrying.take();
        let Some(resend) = self.replay.take().and_then(|r| r.resend(drained)) else {
            return Retry::Fails(err);
        };
        let drain = match resend.writer {
            Some(writer) => {
                let old = self.writer.replace(writer);
                old.is_some_and(|w| w.is_waiting()) && !resend.ended
            }
            None => false,
        };
        if self.may_go_again(&resend.next) {
            self.replay = Some(resend.next);
        } else {
            resend.next.drop_recording();
        }
        self.spec = Some(resend.spec);
        Retry::Again { drain }
    }

    /// The server's keep-alive hint, from the response head.
    pub fn hint(&self) -> Option<Duration> {
        self.hint
    }

    /// The streamed body's writer, while the request has one.
    pub fn writer(&mut self) -> Option<&mut BodyWriter> {
        self.writer.as_mut()
    }

    /// The request is over (its exchange ended, or it was aborted): its body's writer goes.
    pub fn over(&mut self) {
        self.writer = None;
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::client::plan::{self, Source};

    fn attempt(method: &str, body: Source, headers_timeout_ms: f64) -> Attempt {
        let plan = plan::for_test(method, body, headers_timeout_ms);
        Attempt::new(plan.spec, plan.replay, plan.writer)
    }

    fn get() -> Attempt {
        attempt("GET", Source::Bytes(Bytes::new()), 0.0)
    }

    fn reset() -> Error {
        Error::os(libc::ECONNRESET, "read")
    }

    fn head(lines: &[(&str, &str)]) -> HeaderLines {
        let mut map = http::HeaderMap::new();
        for (name, value) in lines {
            map.append(
                http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                value.parse().unwrap(),
            );
        }
        HeaderLines::of(&map)
    }

    #[test]
    fn an_attempt_starts_once_until_a_replay_makes_another() {
        let mut a = get();
        assert!(a.start(Connection::Reused).is_some());
        assert!(a.start(Connection::Reused).is_none());
        assert_eq!(a.unsent(reset()).map(|e| e.code().to_owned()), None);
        assert!(matches!(a.retry(|| {}), Retry::Again { drain: false }));
        assert!(a.start(Connection::New { may_refuse: false }).is_some());
        assert!(a.start(Connection::New { may_refuse: false }).is_none());
    }

    #[test]
    fn the_keep_alive_race_replays_an_idempotent_request_once_and_only_from_a_reused_connection() {
        // On a reused connection: held, then sent again.
        let mut a = get();
        a.start(Connection::Reused);
        assert!(a.unsent(reset()).is_none());
        assert!(a.retrying());
        assert!(matches!(a.retry(|| {}), Retry::Again { .. }));
        assert!(!a.retrying());
        // Its second attempt, on a new connection, fails as it is: the replay is spent.
        a.start(Connection::New { may_refuse: false });
        assert_eq!(a.unsent(reset()).unwrap().code(), "ECONNRESET");
        assert!(!a.retrying());

        // A first attempt on a new connection fails at once.
        let mut fresh = get();
        fresh.start(Connection::New { may_refuse: false });
        assert!(fresh.unsent(reset()).is_some());

        // So does a POST, even on a reused connection.
        let mut post = attempt("POST", Source::Bytes(Bytes::from_static(b"x")), 0.0);
        post.start(Connection::Reused);
        assert!(post.unsent(reset()).is_some());
    }

    #[test]
    fn an_answer_ends_every_chance_of_a_replay() {
        let mut informed = get();
        informed.start(Connection::Reused);
        informed.informed();
        assert!(informed.unsent(reset()).is_some());
        assert!(informed.refused(reset()).is_some());

        let mut headed = get();
        headed.start(Connection::Reused);
        headed.headed(&head(&[]));
        assert!(headed.unsent(reset()).is_some());
    }

    #[test]
    fn a_refused_stream_goes_again_whatever_its_method_a_bounded_number_of_times() {
        let mut post = attempt("POST", Source::Bytes(Bytes::from_static(b"x")), 0.0);
        post.start(Connection::New { may_refuse: true });
        for _ in 0..crate::replay::REFUSALS_REPLAYED {
            assert!(post.refused(reset()).is_none());
            assert!(matches!(post.retry(|| {}), Retry::Again { .. }));
            assert!(post.start(Connection::Reused).is_some());
        }
        // Refused once more than the bound: it fails with the refusal's error, and keeps
        // nothing for a replay (a POST never goes again after the race).
        assert!(post.refused(reset()).is_some());
        assert!(post.replay.is_none());
    }

    #[test]
    fn refusals_and_the_race_each_have_their_own_budget() {
        // Refused, then met the race on the connection it went to: sent again both times.
        let mut a = get();
        a.start(Connection::New { may_refuse: true });
        assert!(a.refused(reset()).is_none());
        assert!(matches!(a.retry(|| {}), Retry::Again { .. }));
        a.start(Connection::Reused);
        assert!(a.unsent(reset()).is_none());
        assert!(matches!(a.retry(|| {}), Retry::Again { .. }));
        // The race is met once: the next one fails it; a refusal still sends it again.
        a.start(Connection::Reused);
        assert!(a.refused(reset()).is_none());
        assert!(matches!(a.retry(|| {}), Retry::Again { .. }));
        a.start(Connection::Reused);
        assert_eq!(a.unsent(reset()).unwrap().code(), "ECONNRESET");
    }

    #[test]
    fn a_streamed_body_goes_again_after_each_refusal_with_what_was_written_meanwhile() {
        use crate::client::body::WriteResult;
        let mut a = attempt("PUT", Source::Streamed, 0.0);
        drop(a.start(Connection::New { may_refuse: true }));
        assert_eq!(
            a.writer().unwrap().write(Bytes::from_static(b"ab")),
            WriteResult::Full
        );
        assert!(a.refused(reset()).is_none());
        assert!(matches!(a.retry(|| {}), Retry::Again { drain: true }));
        // The second attempt's writer records on: written while it ran, sent by the third.
        drop(a.start(Connection::Reused));
        assert_eq!(
            a.writer().unwrap().write(Bytes::from_static(b"cd")),
            WriteResult::Full
        );
        a.writer().unwrap().end();
        assert!(a.refused(reset()).is_none());
        assert!(matches!(a.retry(|| {}), Retry::Again { drain: false }));
        let third = a.start(Connection::Reused).unwrap();
        let sent = read_body(third.body);
        assert_eq!(sent, b"abcd");
    }

    // What a request body gives, read to its end (a test runtime of its own).
    fn read_body(body: crate::client::ReqBody) -> Vec<u8> {
        use http_body_util::BodyExt;
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async { body.collect().await.unwrap().to_bytes().to_vec() })
    }

    #[test]
    fn a_streamed_body_on_a_new_connection_keeps_no_recording_but_where_a_stream_may_be_refused() {
        // Kept for a possible refusal: the replay still has all it needs.
        let mut kept = attempt("PUT", Source::Streamed, 0.0);
        kept.start(Connection::New { may_refuse: true });
        kept.writer().unwrap().end();
        assert!(kept.refused(reset()).is_none());
        assert!(matches!(kept.retry(|| {}), Retry::Again { .. }));

        // Let go: a refusal then finds the replay impossible, and the request fails.
        let mut dropped = attempt("PUT", Source::Streamed, 0.0);
        dropped.start(Connection::New { may_refuse: false });
        dropped.writer().unwrap().end();
        assert!(dropped.refused(reset()).is_some());
    }

    #[test]
    fn a_replay_that_is_no_longer_possible_fails_with_the_attempts_error() {
        let mut a = attempt("PUT", Source::Streamed, 0.0);
        a.start(Connection::New { may_refuse: true });
        assert!(a.refused(reset()).is_none());
        // The recording is dropped meanwhile (an answer on another stream cannot do this, but
        // a body that outgrew the limit does the same): nothing to send again.
        a.replay.as_ref().unwrap().drop_recording();
        match a.retry(|| {}) {
            Retry::Fails(Some(err)) => assert_eq!(err.code(), "ECONNRESET"),
            other => panic!("expected the attempt's error, got {other:?}"),
        }
        assert!(!a.retrying());
    }

    #[test]
    fn the_servers_keep_alive_hint_comes_from_the_head() {
        let mut a = get();
        a.start(Connection::Reused);
        a.headed(&head(&[
            ("content-length", "0"),
            ("keep-alive", "timeout=5, max=100"),
        ]));
        assert_eq!(a.hint(), Some(Duration::from_secs(5)));
        let mut none = get();
        none.headed(&head(&[("keep-alive", "max=100")]));
        assert_eq!(none.hint(), None);
    }

    #[test]
    fn a_long_headers_timeout_runs_from_a_streamed_bodys_progress_and_not_while_it_waits() {
        use std::task::{Context, Poll, Waker};

        use hyper::body::Body;

        use crate::client::WriteResult;

        let long = crate::client::COARSE_TIMEOUT + Duration::from_secs(1);
        let mut a = attempt("POST", Source::Streamed, long.as_millis() as f64);
        let spec = a.start(Connection::New { may_refuse: false }).unwrap();
        let mut body = spec.body;
        let mut cx = Context::from_waker(Waker::noop());
        let mut poll = || match std::pin::Pin::new(&mut body).poll_frame(&mut cx) {
            Poll::Pending => None,
            Poll::Ready(frame) => Some(frame.map(|f| f.unwrap().into_data().ok())),
        };
        // Armed in the past, as if the exchange had started ten timeouts ago.
        let now = Instant::now();
        let armed = now - 10 * long;
        assert!(a.arm(armed));
        // The connection asks for the body and its source has nothing yet: not a late answer,
        // however long ago the exchange started.
        assert!(poll().is_none());
        assert_eq!(a.sweep(now), Deadline::Running);
        // The source gives a chunk: the timeout runs from there.
        let written = a.writer().unwrap().write(Bytes::from_static(b"chunk"));
        assert_eq!(written, WriteResult::Ready);
        let progressed = Instant::now();
        assert_eq!(poll(), Some(Some(Some(Bytes::from_static(b"chunk")))));
        assert_eq!(a.sweep(progressed), Deadline::Running);
        // The connection takes no more (it holds the chunk back, or waits for the answer):
        // the timeout runs out `long` after the body's last progress, once.
        let after = Instant::now() + long;
        assert_eq!(a.sweep(after), Deadline::Passed(long));
        assert_eq!(a.sweep(after), Deadline::Unwatched);

        // A body given whole moves nothing: the timeout runs from the start.
        let mut whole = attempt(
            "POST",
            Source::Bytes(Bytes::from_static(b"x")),
            long.as_millis() as f64,
        );
        whole.start(Connection::Reused);
        assert!(whole.arm(armed));
        assert_eq!(whole.sweep(now), Deadline::Passed(long));
    }

    #[test]
    fn a_long_headers_timeout_is_kept_by_the_caller_and_passes_once() {
        let long = crate::client::COARSE_TIMEOUT + Duration::from_secs(1);
        let mut a = attempt("GET", Source::Bytes(Bytes::new()), long.as_millis() as f64);
        let spec = a.start(Connection::Reused).unwrap();
        // Taken out of the exchange.
        assert_eq!(spec.headers_timeout, None);
        let now = Instant::now();
        assert_eq!(a.sweep(now), Deadline::Unwatched);
        assert!(a.arm(now));
        assert_eq!(a.sweep(now), Deadline::Running);
        assert_eq!(a.sweep(now + long), Deadline::Passed(long));
        assert_eq!(a.sweep(now + long), Deadline::Unwatched);

        // Not once the head came, nor while a replay is under way.
        a.arm(now);
        a.headed(&head(&[]));
        assert_eq!(a.sweep(now + long), Deadline::Unwatched);
        let mut replaying = attempt("GET", Source::Bytes(Bytes::new()), long.as_millis() as f64);
        replaying.start(Connection::Reused);
        replaying.arm(now);
        assert!(replaying.unsent(reset()).is_none());
        assert_eq!(replaying.sweep(now + long), Deadline::Unwatched);

        // A short one stays with the exchange: nothing for the caller to watch.
        let mut short = attempt("GET", Source::Bytes(Bytes::new()), 500.0);
        let spec = short.start(Connection::Reused).unwrap();
        assert_eq!(spec.headers_timeout, Some(Duration::from_millis(500)));
        assert!(!short.arm(now));
    }

    #[test]
    fn a_writer_held_back_by_the_lost_connection_is_told_to_go_on_after_the_replay() {
        use crate::client::body::WriteResult;
        let mut a = attempt("PUT", Source::Streamed, 0.0);
        // The connection is lost: its exchange, and the body's receiving end, are gone.
        drop(a.start(Connection::Reused));
        let writer = a.writer().unwrap();
        assert_eq!(writer.write(Bytes::from_static(b"abc")), WriteResult::Full);
        assert!(writer.is_waiting());
        assert!(a.unsent(reset()).is_none());
        assert!(matches!(a.retry(|| {}), Retry::Again { drain: true }));
        // The new writer carries on, into the next attempt's body.
        let next = a.start(Connection::New { may_refuse: false });
        assert!(next.is_some());
        assert!(!a.writer().unwrap().is_waiting());
        a.over();
        assert!(a.writer().is_none());

        // A source that ended has nothing more to write: no drain.
        let mut ended = attempt("PUT", Source::Streamed, 0.0);
        drop(ended.start(Connection::Reused));
        let writer = ended.writer().unwrap();
        assert_eq!(writer.write(Bytes::from_static(b"abc")), WriteResult::Full);
        writer.end();
        assert!(ended.unsent(reset()).is_none());
        assert!(matches!(ended.retry(|| {}), Retry::Again { drain: false }));
    }
}
