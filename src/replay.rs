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
//! [`ReplayBuf`] keeps the bytes of a drop-in request (written by Node's HTTP code) while they
//! may be needed: from checkout to the first response byte.

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
    pub fn armed_unanswered(&self) -> bool {
        self.armed && !self.answered
    }

    /// Anything of the request went out before the connection died.
    pub fn sent_any(&self) -> bool {
        !self.buf.is_empty() || self.overflow
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
