//! The keep-alive race, and what may be done about it.
//!
//! A server may close an idle keep-alive connection at the moment a client reuses it; the
//! request then meets a FIN or an RST before any byte of a response (nodejs/node#47130,
//! agentkeepalive#23). RFC 9110 §9.2.2 allows a client to send an idempotent request again
//! in that case. The rules, in one place:
//! - only on a *reused* connection (on a fresh one the server may be refusing the request);
//! - only before the first byte of the response;
//! - only idempotent methods (GET, HEAD, OPTIONS, TRACE, PUT, DELETE) or a request carrying
//!   an `Idempotency-Key` header;
//! - only if every byte of the request is still at hand (within the replay buffer);
//! - once.
//!
//! An HTTP/2 request the server did not process (a refused stream, or one a GOAWAY left out)
//! goes again whatever its method, a bounded number of times ([`replays_after_refusal`]).
//!
//! [`ReplayBuf`] keeps the bytes of a drop-in request (written by Node's HTTP code) while they
//! may be needed: from checkout to the first response byte. An `agent.request()` is planned for
//! a replay by [`promise_replayable`] (its body kept in memory, or recorded as it streams), and
//! sent again when [`replays_after_race`] says so.

use crate::error::Error;

/// Idempotent per RFC 9110 §9.2.2.
pub fn idempotent_method(method: &[u8]) -> bool {
    matches!(
        method,
        b"GET" | b"HEAD" | b"OPTIONS" | b"TRACE" | b"PUT" | b"DELETE"
    )
}

/// Whether an HTTP/1.1 request whose first bytes are `head` may be sent again: by its method,
/// or by an `Idempotency-Key` header in its head.
pub fn replayable_request(head: &[u8]) -> bool {
    let Some(space) = head.iter().position(|&b| b == b' ') else {
        return false;
    };
    if idempotent_method(&head[..space]) {
        return true;
    }
    let end = find(head, b"\r\n\r\n").unwrap_or(head.len());
    head[..end]
        .split(|&b| b == b'\n')
        .skip(1)
        .any(|line| line.len() > 16 && line[..16].eq_ignore_ascii_case(b"idempotency-key:"))
}

/// The body of an `agent.request()` as its plan knows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlannedBody {
    /// In memory, this many bytes (0: none).
    Bytes(usize),
    /// Streamed from a source: what its writer records, up to the limit, is kept.
    Streamed,
}

/// Whether an `agent.request()` is planned for a replay (its body kept while it may be needed):
/// replay on (`limit`: the largest body kept), an idempotent method or an `Idempotency-Key`,
/// no `Expect: 100-continue` (the server decides on the body's sending), and a body in memory
/// within the limit (a streamed one is recorded, and a replay gives up if it outgrows it).
pub fn promise_replayable(
    limit: Option<usize>,
    method: &[u8],
    idempotency_key: bool,
    expect_continue: bool,
    body: PlannedBody,
) -> bool {
    let Some(limit) = limit else { return false };
    let within = match body {
        PlannedBody::Bytes(n) => n <= limit,
        PlannedBody::Streamed => true,
    };
    within && !expect_continue && (idempotent_method(method) || idempotency_key)
}

/// Whether an `agent.request()` that may go over HTTP/2 keeps its body for a replay whatever
/// its method: a stream the server refused, or left out with a GOAWAY, was not processed
/// (RFC 9113 §8.7), and may go again (replay on, within the limit, no `Expect: 100-continue`).
pub fn refusal_replayable(limit: Option<usize>, expect_continue: bool, body: PlannedBody) -> bool {
    let Some(limit) = limit else { return false };
    let within = match body {
        PlannedBody::Bytes(n) => n <= limit,
        PlannedBody::Streamed => true,
    };
    within && !expect_continue
}

/// How many times a request the server did not process is sent again, at most. The protocol
/// makes any number safe; the bound keeps a server that refuses everything from being asked
/// for ever.
pub const REFUSALS_REPLAYED: u8 = 3;

/// Whether a request the server did not process (see [`refusal_replayable`]) is sent again:
/// on whatever connection it met it, fresh or reused, while its replay is still possible and
/// it has been refused fewer than [`REFUSALS_REPLAYED`] times before (`refused_before`).
/// Refusals and the race have budgets of their own: a request refused on the connection it
/// went to after the race goes again too.
pub fn replays_after_refusal(possible: bool, refused_before: u8) -> bool {
    possible && refused_before < REFUSALS_REPLAYED
}

/// Whether a request that met the race (its connection died before any byte of the answer)
/// is sent again: only after it went out on a reused connection, and while its replay is
/// still possible (every byte at hand, not replayed yet).
pub fn replays_after_race(reused: bool, possible: bool) -> bool {
    reused && possible
}

/// The error of a drop-in request sent again that met no connection either (the replay's
/// connect failed, or its first write): it fails as its first attempt would have, having gone
/// out.
pub fn replay_failed() -> Error {
    Error::tls("ECONNRESET", "socket hang up").with_request_sent(true)
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// The bytes of the request in flight on a reused connection, until its response begins.
#[derive(Debug, Default)]
pub struct ReplayBuf {
    /// Bytes this checkout wrote, while they may still be needed.
    buf: Vec<u8>,
    /// Collecting (a reused connection, replay on, not replayed yet).
    armed: bool,
    /// More was written than the limit: no replay for this request.
    overflow: bool,
    /// A response byte arrived: the request was received, no replay.
    answered: bool,
    limit: usize,
}

impl ReplayBuf {
    /// A new checkout: collect its bytes if the connection was reused and replay is on
    /// (`limit` > 0).
    pub fn start(&mut self, reused: bool, limit: usize) {
        self.buf.clear();
        self.armed = reused && limit > 0;
        self.overflow = false;
        self.answered = false;
        self.limit = limit;
    }

    /// Bytes the request wrote.
    pub fn record(&mut self, chunks: &[&[u8]]) {
        if !self.armed || self.answered || self.overflow {
            return;
        }
        let n: usize = chunks.iter().map(|c| c.len()).sum();
        if self.buf.len() + n > self.limit {
            self.overflow = true;
            self.buf = Vec::new();
            return;
        }
        for chunk in chunks {
            self.buf.extend_from_slice(chunk);
        }
    }

    /// The first byte of the response arrived.
    pub fn answered(&mut self) {
        if !self.answered {
            self.answered = true;
            self.buf = Vec::new();
        }
    }

    /// Whether the request may be sent again now (the connection died before answering).
    pub fn can_replay(&self) -> bool {
        self.armed
            && !self.answered
            && !self.overflow
            && !self.buf.is_empty()
            && replayable_request(&self.buf)
    }

    /// The bytes to send on the new connection; no second replay for this request.
    pub fn take_for_replay(&mut self) -> Vec<u8> {
        self.armed = false;
        std::mem::take(&mut self.buf)
    }

    /// A reused connection's request is in flight without an answer yet.
    fn armed_unanswered(&self) -> bool {
        self.armed && !self.answered
    }

    /// Anything of the request went out before the connection died.
    fn sent_any(&self) -> bool {
        !self.buf.is_empty() || self.overflow
    }

    /// What the end of the connection while in use (`err`, or `None` for the peer's FIN)
    /// gives its socket when the request is not sent again. Before any answer on a reused
    /// connection, the request fails saying whether anything of it went out (a FIN as Node
    /// says it: "socket hang up"); otherwise the socket hears of the end or the error as it is.
    pub fn ending(&self, err: Option<Error>) -> Ending {
        let unanswered = self.armed_unanswered().then(|| self.sent_any());
        match (err, unanswered) {
            (None, Some(sent)) => {
                Ending::Fail(Error::tls("ECONNRESET", "socket hang up").with_request_sent(sent))
            }
            (None, None) => Ending::Eof,
            (Some(err), Some(sent)) => Ending::Fail(err.with_request_sent(sent)),
            (Some(err), None) => Ending::Fail(err),
        }
    }
}

/// What a connection that ended while in use gives its socket (see [`ReplayBuf::ending`]).
#[derive(Debug)]
pub enum Ending {
    /// The end of the stream.
    Eof,
    /// An error.
    Fail(Error),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replay_that_meets_no_connection_fails_as_a_sent_request() {
        let err = replay_failed();
        assert_eq!(
            (err.code(), err.message().as_str()),
            ("ECONNRESET", "socket hang up")
        );
        assert_eq!(err.request_sent(), Some(true));
    }

    #[test]
    fn promise_requests_are_planned_for_a_replay_by_the_same_rules() {
        let get = |limit, body| promise_replayable(limit, b"GET", false, false, body);
        assert!(get(Some(65_536), PlannedBody::Bytes(0)));
        assert!(get(Some(65_536), PlannedBody::Bytes(65_536)));
        // A body over the limit is not kept; a streamed one is recorded up to it.
        assert!(!get(Some(65_536), PlannedBody::Bytes(65_537)));
        assert!(get(Some(0), PlannedBody::Streamed));
        // Replay off.
        assert!(!get(None, PlannedBody::Bytes(0)));
        // Not idempotent, unless an Idempotency-Key makes it so.
        assert!(!promise_replayable(
            Some(1024),
            b"POST",
            false,
            false,
            PlannedBody::Bytes(3)
        ));
        assert!(promise_replayable(
            Some(1024),
            b"POST",
            true,
            false,
            PlannedBody::Bytes(3)
        ));
        assert!(!promise_replayable(
            Some(1024),
            b"PATCH",
            false,
            false,
            PlannedBody::Streamed
        ));
        // With Expect: 100-continue the server decides whether the body goes: never replayed.
        assert!(!promise_replayable(
            Some(1024),
            b"PUT",
            false,
            true,
            PlannedBody::Bytes(3)
        ));
    }

    #[test]
    fn only_a_reused_connection_with_the_request_at_hand_replays() {
        assert!(replays_after_refusal(true, 0));
        assert!(replays_after_refusal(true, REFUSALS_REPLAYED - 1));
        assert!(!replays_after_refusal(true, REFUSALS_REPLAYED));
        assert!(!replays_after_refusal(false, 0));
        assert!(refusal_replayable(Some(10), false, PlannedBody::Bytes(10)));
        assert!(!refusal_replayable(Some(10), false, PlannedBody::Bytes(11)));
        assert!(!refusal_replayable(Some(10), true, PlannedBody::Streamed));
        assert!(!refusal_replayable(None, false, PlannedBody::Bytes(0)));
        assert!(replays_after_race(true, true));
        assert!(!replays_after_race(false, true));
        assert!(!replays_after_race(true, false));
    }

    #[test]
    fn idempotent_methods_and_keys_are_replayable() {
        for head in [
            &b"GET / HTTP/1.1\r\n\r\n"[..],
            b"PUT /x HTTP/1.1\r\nContent-Length: 1\r\n\r\nx",
            b"DELETE /a HTTP/1.1\r\n",
        ] {
            assert!(
                replayable_request(head),
                "{}",
                String::from_utf8_lossy(head)
            );
        }
        assert!(!replayable_request(
            b"POST /pay HTTP/1.1\r\nHost: a\r\n\r\n"
        ));
        assert!(!replayable_request(b"PATCH /x HTTP/1.1\r\n\r\n"));
        assert!(replayable_request(
            b"POST /pay HTTP/1.1\r\nHost: a\r\nIdempotency-Key: 123\r\n\r\n"
        ));
        // A header in the body does not count.
        assert!(!replayable_request(
            b"POST /p HTTP/1.1\r\nHost: a\r\n\r\nIdempotency-Key: 1\r\n"
        ));
        assert!(!replayable_request(b"GETX"));
    }

    #[test]
    fn the_buffer_replays_only_a_complete_unanswered_request_once() {
        let mut r = ReplayBuf::default();
        r.start(true, 64);
        r.record(&[b"GET / HTTP/1.1\r\n", b"\r\n"]);
        assert!(r.can_replay());
        assert_eq!(r.take_for_replay(), b"GET / HTTP/1.1\r\n\r\n");
        assert!(!r.can_replay(), "once");

        r.start(true, 64);
        r.record(&[b"GET / HTTP/1.1\r\n\r\n"]);
        r.answered();
        assert!(!r.can_replay(), "answered");

        r.start(false, 64);
        r.record(&[b"GET / HTTP/1.1\r\n\r\n"]);
        assert!(!r.can_replay(), "a fresh connection");

        r.start(true, 16);
        r.record(&[b"GET / HTTP/1.1\r\nHost: example\r\n\r\n"]);
        assert!(!r.can_replay(), "over the limit");
        assert!(r.sent_any());

        r.start(true, 0);
        r.record(&[b"GET / HTTP/1.1\r\n\r\n"]);
        assert!(!r.can_replay(), "replay off");
    }

    #[test]
    fn a_connection_lost_before_its_answer_fails_saying_whether_the_request_went_out() {
        let fail = |ending: Ending| match ending {
            Ending::Fail(err) => err,
            Ending::Eof => panic!("an end of stream, not an error"),
        };
        let reset = || Error::tls("ECONNRESET", "read ECONNRESET");
        let mut r = ReplayBuf::default();

        // A reused connection's FIN before the answer: "socket hang up", sent or not.
        r.start(true, 64);
        let err = fail(r.ending(None));
        assert_eq!(err.code(), "ECONNRESET");
        assert_eq!(err.message(), "socket hang up");
        assert_eq!(err.request_sent(), Some(false));
        r.record(&[b"POST / HTTP/1.1\r\n"]);
        assert_eq!(fail(r.ending(None)).request_sent(), Some(true));
        // An error instead: that error, saying so too.
        let err = fail(r.ending(Some(reset())));
        assert_eq!(err.message(), "read ECONNRESET");
        assert_eq!(err.request_sent(), Some(true));

        // Answered: the end and the error reach the socket as they are.
        r.answered();
        assert!(matches!(r.ending(None), Ending::Eof));
        assert_eq!(fail(r.ending(Some(reset()))).request_sent(), None);

        // A fresh connection (or replay off) says nothing of what went out.
        r.start(false, 64);
        r.record(&[b"GET / HTTP/1.1\r\n\r\n"]);
        assert!(matches!(r.ending(None), Ending::Eof));
        r.start(true, 0);
        assert_eq!(fail(r.ending(Some(reset()))).request_sent(), None);
    }
}
