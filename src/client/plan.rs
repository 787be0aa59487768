//! Planning an `agent.request()`: from what the call asked for (method, target, header lines,
//! body, limits) to the [`Spec`] of its first exchange, what a replay keeps, and the writer of a
//! streamed body. The binding only reads the call's arguments and hands them here; the rules
//! (what is refused, what a timeout of 0 means, which requests keep their body for a replay,
//! how a replay's body is made again) are this module's, each tested in `tests.rs`.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::Method;
use tokio::sync::Notify;

use super::{
    channel_body, clocked, empty_body, full_body, gated, BodyWriter, Head, Recording, ReqBody,
    SourceClock, Spec, Trailers,
};
use crate::replay::{promise_replayable, refusal_replayable, PlannedBody};

/// Why a request cannot be planned: the call's input is wrong. Each is said at once, before
/// anything is sent.
#[derive(Debug, PartialEq, Eq)]
pub enum Invalid {
    Method(String),
    Path(String),
    HeaderName(String),
    HeaderValue(String),
    /// The content-length JavaScript counted is not the body's length (a server would wait for
    /// the rest, or read past it).
    ContentLength {
        declared: u64,
        actual: usize,
    },
}

impl Invalid {
    /// Whether it is a bad argument (Node-API's `InvalidArg`) rather than an inconsistency
    /// between arguments.
    pub fn is_argument(&self) -> bool {
        !matches!(self, Invalid::ContentLength { .. })
    }
}

impl std::fmt::Display for Invalid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Invalid::Method(m) => write!(f, "invalid method: {m}"),
            Invalid::Path(p) => write!(f, "invalid path: {p}"),
            Invalid::HeaderName(n) => write!(f, "invalid header name: {n}"),
            Invalid::HeaderValue(n) => write!(f, "invalid header value for {n}"),
            Invalid::ContentLength { declared, actual } => write!(
                f,
                "hyperagent: request: content-length {declared} for a body of {actual} bytes"
            ),
        }
    }
}

impl Head {
    /// Parses a request target in origin form (`/path?query`) and header lines
    /// (`name\nvalue\n...`; JavaScript checked that none holds a newline).
    pub fn parse(path: &str, lines: &[u8]) -> Result<Head, Invalid> {
        let uri = http::Uri::try_from(path).map_err(|_| Invalid::Path(path.to_owned()))?;
        Ok(Head {
            uri,
            headers: header_map(lines)?,
        })
    }
}

/// Header (or trailer) lines as JavaScript packs them (`name\nvalue\n...`), as a map.
pub fn header_map(lines: &[u8]) -> Result<http::HeaderMap, Invalid> {
    let mut headers = http::HeaderMap::new();
    let mut parts = lines.split(|&b| b == b'\n');
    while let (Some(name), Some(value)) = (parts.next(), parts.next()) {
        let name = http::HeaderName::from_bytes(name)
            .map_err(|_| Invalid::HeaderName(String::from_utf8_lossy(name).into_owned()))?;
        let value = http::HeaderValue::from_bytes(value)
            .map_err(|_| Invalid::HeaderValue(name.to_string()))?;
        headers.append(name, value);
    }
    Ok(headers)
}

/// A request's body as the call gives it.
pub enum Source {
    /// In memory (empty: no body).
    Bytes(Bytes),
    /// Written later, chunk by chunk, through the plan's [`BodyWriter`].
    Streamed,
}

/// What an `agent.request()` call asks for.
pub struct Intent {
    pub method: Method,
    pub head: Arc<Head>,
    pub body: Source,
    /// The body's length as JavaScript declared it (`content-length`), if it did.
    pub content_length: Option<u64>,
    /// `expect: 100-continue`: the body waits for the server's 100.
    pub expect_continue: bool,
    /// Informational (1xx) responses are reported.
    pub informational: bool,
    /// Milliseconds; 0, negative or not finite: none.
    pub headers_timeout_ms: f64,
    pub body_timeout_ms: f64,
    /// The largest body kept for a replay after the keep-alive race; None: no replay.
    pub replay_limit: Option<usize>,
    /// The largest response head accepted, in bytes.
    pub max_head_size: usize,
    /// It may go over HTTP/2, where a refused stream is sent again whatever its method.
    pub refusable: bool,
    /// Trailers after the body: known now, or set when the body's source ends.
    pub trailers: Option<Arc<Trailers>>,
}

/// A planned request: its first exchange, what its replay needs (when it may have one), and
/// the writer of its streamed body.
pub struct Plan {
    pub spec: Spec,
    pub replay: Option<Replay>,
    pub writer: Option<BodyWriter>,
    /// Its trailers, to be set when its body's source ends (when they were not known).
    pub trailers: Option<Arc<Trailers>>,
}

/// A timeout in milliseconds as the call gives it: 0, negative or not finite is none; a
/// fraction of a millisecond is kept, as the agent's own durations keep it (a timeout of 0.5
/// is half a millisecond, not one that has passed at once).
pub fn timeout(ms: f64) -> Option<Duration> {
    crate::pool::settings::duration_ms(Some(ms))
}

/// Parses a method: a token (JavaScript checked it is ASCII).
pub fn method(bytes: &[u8]) -> Result<Method, Invalid> {
    Method::from_bytes(bytes).map_err(|_| Invalid::Method(String::from_utf8_lossy(bytes).into()))
}

/// Plans `intent`. `drained` is called (on any thread) when a streamed body's channel has room
/// again after a write found it full.
pub fn plan(intent: Intent, drained: impl Fn() + Send + Sync + 'static) -> Result<Plan, Invalid> {
    let Intent {
        method,
        head,
        body,
        content_length,
        expect_continue,
        informational,
        headers_timeout_ms,
        body_timeout_ms,
        replay_limit,
        max_head_size,
        refusable,
        trailers,
    } = intent;
    if let (Source::Bytes(bytes), Some(declared)) = (&body, content_length) {
        if declared != bytes.len() as u64 {
            return Err(Invalid::ContentLength {
                declared,
                actual: bytes.len(),
            });
        }
    }
    // A body whose length hyper will not know: streamed with no length given, or followed
    // by trailers (sent after a chunked body only).
    let unsized_body =
        content_length.is_none() && (matches!(body, Source::Streamed) || trailers.is_some());
    let head = chunked_if_unsized(&method, head, unsized_body);
    let planned = match &body {
        Source::Bytes(bytes) => PlannedBody::Bytes(bytes.len()),
        Source::Streamed => PlannedBody::Streamed,
    };
    let idempotent = promise_replayable(
        replay_limit,
        method.as_str().as_bytes(),
        head.headers.contains_key("idempotency-key"),
        expect_continue,
        planned,
    );
    let replayable =
        idempotent || (refusable && refusal_replayable(replay_limit, expect_continue, planned));
    let headers_timeout = timeout(headers_timeout_ms);
    let body_timeout = timeout(body_timeout_ms);
    let (req_body, writer, replay_body) = match body {
        Source::Bytes(bytes) => {
            let req_body = if bytes.is_empty() {
                empty_body()
            } else {
                full_body(bytes.clone())
            };
            (
                req_body,
                None,
                replayable.then_some(ReplayBody::Bytes(bytes)),
            )
        }
        Source::Streamed => {
            let (req_body, writer) = channel_body(Vec::new(), content_length, drained);
            match replay_limit.filter(|_| replayable) {
                Some(limit) => {
                    let recording = Recording::new(limit);
                    let writer = writer.record(recording.clone());
                    let kept = ReplayBody::Streamed {
                        recording,
                        len: content_length,
                    };
                    (req_body, Some(writer), Some(kept))
                }
                None => (req_body, Some(writer), None),
            }
        }
    };
    let req_body = match &trailers {
        Some(t) => t.after(req_body),
        None => req_body,
    };
    let (req_body, body_clock) = clock_of(
        req_body,
        matches!(planned, PlannedBody::Streamed) || trailers.is_some(),
    );
    let replay = replay_body.map(|body| Replay {
        idempotent,
        trailers: trailers.clone(),
        method: method.clone(),
        head: head.clone(),
        body,
        headers_timeout,
        body_timeout,
        max_head_size,
        informational,
    });
    let gate = expect_continue.then(|| Arc::new(Notify::new()));
    let req_body = match &gate {
        Some(gate) => gated(req_body, gate.clone()),
        None => req_body,
    };
    let spec = Spec {
        method,
        head,
        body: req_body,
        expect_continue: gate,
        informational,
        headers_timeout,
        body_clock,
        body_timeout,
        max_head_size,
    };
    Ok(Plan {
        spec,
        replay,
        writer,
        trailers,
    })
}

/// A body that may wait on its source (streamed, or with trailers made at its end), with the
/// clock of its progress that the headers timeout runs from; a body given whole has none.
fn clock_of(body: ReqBody, waits: bool) -> (ReqBody, Option<Arc<SourceClock>>) {
    if !waits {
        return (body, None);
    }
    let clock = SourceClock::new();
    (clocked(body, clock.clone()), Some(clock))
}

/// The head of a request whose body's length is not known: over HTTP/1.1 hyper sends such a
/// body chunked, but for a GET, HEAD or CONNECT it sends none at all (it takes a body there
/// for a mistake) unless the head asks for chunked. A body given with one of those is sent as
/// it is with any other method (and as Node and undici send it): the head gets
/// `transfer-encoding: chunked`, unless it names a transfer coding of its own. HTTP/2 drops
/// the line and sends the body in its frames.
fn chunked_if_unsized(method: &Method, head: Arc<Head>, unsized_body: bool) -> Arc<Head> {
    let bodiless = matches!(*method, Method::GET | Method::HEAD | Method::CONNECT);
    if !unsized_body || !bodiless || head.headers.contains_key(http::header::TRANSFER_ENCODING) {
        return head;
    }
    let mut headers = head.headers.clone();
    headers.insert(
        http::header::TRANSFER_ENCODING,
        http::HeaderValue::from_static("chunked"),
    );
    Arc::new(Head {
        uri: head.uri.clone(),
        headers,
    })
}

/// What it takes to send a request again: its head, and its body in memory or as its writer
/// recorded it.
pub struct Replay {
    /// It may also go again after the keep-alive race (an idempotent request); otherwise only
    /// after a refusal.
    pub idempotent: bool,
    /// Its trailers, sent again too.
    pub trailers: Option<Arc<Trailers>>,
    pub method: Method,
    pub head: Arc<Head>,
    pub body: ReplayBody,
    pub headers_timeout: Option<Duration>,
    pub body_timeout: Option<Duration>,
    pub max_head_size: usize,
    pub informational: bool,
}

/// A replay's body: in memory, or what a streamed body's writer recorded (the rest of the
/// source follows it on the new connection).
pub enum ReplayBody {
    Bytes(Bytes),
    Streamed {
        recording: Arc<Recording>,
        len: Option<u64>,
    },
}

/// A replay ready to go: its exchange, and for a streamed body the writer that takes over from
/// the old one (already ended or failed when the source was), and whether the source ended;
/// and what it takes to send the request once more after this attempt (its streamed body
/// recorded on by the new writer).
pub struct Resend {
    pub spec: Spec,
    pub writer: Option<BodyWriter>,
    pub ended: bool,
    pub next: Replay,
}

impl Replay {
    /// Whether the request can still go again (a streamed body may have outgrown the limit).
    pub fn possible(&self) -> bool {
        match &self.body {
            ReplayBody::Bytes(_) => true,
            ReplayBody::Streamed { recording, .. } => recording.is_complete(),
        }
    }

    /// No replay will come (the request is answered, or on a fresh connection): a streamed
    /// body's recording lets go of what it kept.
    pub fn drop_recording(&self) {
        if let ReplayBody::Streamed { recording, .. } = &self.body {
            recording.stop();
        }
    }

    /// The request made again; None when a streamed body outgrew what was kept. The body goes
    /// as recorded, then continues from its source through the new writer, whose drain calls
    /// `drained`. How many times a request goes again is the caller's rule (see
    /// `crate::replay`): each resend gives the replay for the next.
    pub fn resend(self, drained: impl Fn() + Send + Sync + 'static) -> Option<Resend> {
        let (body, writer, ended, next_body) = match &self.body {
            ReplayBody::Bytes(bytes) if bytes.is_empty() => {
                (empty_body(), None, true, ReplayBody::Bytes(Bytes::new()))
            }
            ReplayBody::Bytes(bytes) => (
                full_body(bytes.clone()),
                None,
                true,
                ReplayBody::Bytes(bytes.clone()),
            ),
            ReplayBody::Streamed { recording, len } => {
                let (recorded, renewed) = recording.take_renewed()?;
                let (body, writer) = channel_body(recorded.chunks, *len, drained);
                // The new writer records on from what was sent, how the source ended included.
                let mut writer = writer.record(renewed.clone());
                if let Some(message) = recorded.failed {
                    writer.fail(message);
                } else if recorded.ended {
                    writer.end();
                }
                let next = ReplayBody::Streamed {
                    recording: renewed,
                    len: *len,
                };
                (body, Some(writer), recorded.ended, next)
            }
        };
        let body = match &self.trailers {
            Some(t) => t.after(body),
            None => body,
        };
        let streamed = matches!(self.body, ReplayBody::Streamed { .. });
        let (body, body_clock) = clock_of(body, streamed || self.trailers.is_some());
        let spec = Spec {
            method: self.method.clone(),
            head: self.head.clone(),
            body,
            expect_continue: None,
            informational: self.informational,
            headers_timeout: self.headers_timeout,
            body_clock,
            body_timeout: self.body_timeout,
            max_head_size: self.max_head_size,
        };
        let next = Replay {
            body: next_body,
            ..self
        };
        Some(Resend {
            spec,
            writer,
            ended,
            next,
        })
    }
}

/// A request of `method` to `/items` with `body`, planned as a call with a 64-byte replay
/// limit and `headers_timeout_ms` would be: for the tests of what runs requests.
#[cfg(test)]
pub fn for_test(method: &str, body: Source, headers_timeout_ms: f64) -> Plan {
    let intent = Intent {
        method: self::method(method.as_bytes()).unwrap(),
        head: Arc::new(Head::parse("/items", b"host\nexample\n").unwrap()),
        body,
        content_length: None,
        expect_continue: false,
        informational: false,
        headers_timeout_ms,
        body_timeout_ms: 0.0,
        replay_limit: Some(64),
        max_head_size: 16 * 1024,
        refusable: true,
        trailers: None,
    };
    match plan(intent, || {}) {
        Ok(plan) => plan,
        Err(e) => panic!("not planned: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use http_body_util::BodyExt;

    use super::*;

    fn head(lines: &[u8]) -> Arc<Head> {
        Arc::new(Head::parse("/items?x=1", lines).unwrap())
    }

    fn intent(method: &str, lines: &[u8], body: Source) -> Intent {
        Intent {
            method: super::method(method.as_bytes()).unwrap(),
            head: head(lines),
            body,
            content_length: None,
            expect_continue: false,
            informational: false,
            headers_timeout_ms: 0.0,
            body_timeout_ms: 0.0,
            replay_limit: Some(16),
            max_head_size: 16 * 1024,
            refusable: false,
            trailers: None,
        }
    }

    fn planned(intent: Intent) -> Plan {
        match plan(intent, || {}) {
            Ok(plan) => plan,
            Err(e) => panic!("not planned: {e}"),
        }
    }

    async fn bytes_of(body: super::super::ReqBody) -> Bytes {
        body.collect().await.unwrap().to_bytes()
    }

    #[test]
    fn a_head_keeps_its_target_and_every_header_line_in_order() {
        let head = Head::parse("/a/b?c=d", b"x-one\n1\nset-me\na\nset-me\nb\n").unwrap();
        assert_eq!(head.uri.path(), "/a/b");
        assert_eq!(head.uri.query(), Some("c=d"));
        assert_eq!(head.headers["x-one"], "1");
        let all: Vec<_> = head.headers.get_all("set-me").iter().collect();
        assert_eq!(all, ["a", "b"]);
    }

    #[test]
    fn a_bad_target_or_header_is_refused_as_an_argument() {
        let bad_path = Head::parse("/a b", b"").unwrap_err();
        assert_eq!(bad_path, Invalid::Path("/a b".into()));
        let bad_name = Head::parse("/", b"x y\n1\n").unwrap_err();
        assert_eq!(bad_name, Invalid::HeaderName("x y".into()));
        let bad_value = Head::parse("/", b"x\n\x7f\n").unwrap_err();
        assert_eq!(bad_value, Invalid::HeaderValue("x".into()));
        assert!(bad_path.is_argument() && bad_name.is_argument() && bad_value.is_argument());
        assert_eq!(bad_name.to_string(), "invalid header name: x y");
        let bad_method = super::method(b"G ET").unwrap_err();
        assert_eq!(bad_method.to_string(), "invalid method: G ET");
    }

    #[test]
    fn a_timeout_of_zero_or_less_or_not_finite_is_none() {
        for ms in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert_eq!(timeout(ms), None, "{ms}");
        }
        assert_eq!(timeout(1500.0), Some(Duration::from_millis(1500)));
        assert_eq!(timeout(0.5), Some(Duration::from_micros(500)));
        let mut ask = intent("GET", b"", Source::Bytes(Bytes::new()));
        ask.headers_timeout_ms = 250.0;
        ask.body_timeout_ms = 0.0;
        let plan = planned(ask);
        assert_eq!(plan.spec.headers_timeout, Some(Duration::from_millis(250)));
        assert_eq!(plan.spec.body_timeout, None);
        let replay = plan.replay.expect("a GET keeps its replay");
        assert_eq!(replay.headers_timeout, Some(Duration::from_millis(250)));
    }

    #[test]
    fn a_content_length_that_is_not_the_bodys_is_refused() {
        let mut ask = intent("POST", b"", Source::Bytes(Bytes::from_static(b"abc")));
        ask.content_length = Some(4);
        let Err(e) = plan(ask, || {}) else {
            panic!("planned with a wrong content-length")
        };
        assert_eq!(
            e,
            Invalid::ContentLength {
                declared: 4,
                actual: 3
            }
        );
        assert!(!e.is_argument());
        let mut ask = intent("POST", b"", Source::Bytes(Bytes::from_static(b"abc")));
        ask.content_length = Some(3);
        assert!(plan(ask, || {}).is_ok());
        // A streamed body's length is the writer's to keep.
        let mut ask = intent("POST", b"", Source::Streamed);
        ask.content_length = Some(10);
        assert!(plan(ask, || {}).is_ok());
    }

    #[test]
    fn only_idempotent_requests_within_the_limit_keep_a_replay() {
        let small = || Source::Bytes(Bytes::from_static(b"0123456789"));
        let large = || Source::Bytes(Bytes::from(vec![b'x'; 17]));
        assert!(planned(intent("GET", b"", small())).replay.is_some());
        assert!(planned(intent("PUT", b"", small())).replay.is_some());
        assert!(planned(intent("POST", b"", small())).replay.is_none());
        let keyed = intent("POST", b"idempotency-key\nk1\n", small());
        assert!(planned(keyed).replay.is_some());
        assert!(planned(intent("PUT", b"", large())).replay.is_none());
        let mut off = intent("GET", b"", small());
        off.replay_limit = None;
        assert!(planned(off).replay.is_none());
        let mut expect = intent("PUT", b"", small());
        expect.expect_continue = true;
        let plan = planned(expect);
        assert!(plan.replay.is_none(), "the server decides on the body");
        assert!(
            plan.spec.expect_continue.is_some(),
            "the body waits for the 100"
        );
        // A streamed body of a request that may not go again is not recorded.
        let plan = planned(intent("POST", b"", Source::Streamed));
        assert!(plan.replay.is_none() && plan.writer.is_some());
    }

    #[test]
    fn a_get_or_head_with_a_body_of_unknown_length_asks_for_chunked() {
        let te = |plan: &Plan| {
            plan.spec
                .head
                .headers
                .get(http::header::TRANSFER_ENCODING)
                .map(|v| v.to_str().unwrap().to_owned())
        };
        for method in ["GET", "HEAD"] {
            let plan = planned(intent(method, b"host\nh\n", Source::Streamed));
            assert_eq!(te(&plan).as_deref(), Some("chunked"), "{method}");
            assert_eq!(
                plan.spec.head.headers["host"], "h",
                "{method}: the other lines stay"
            );
            let replay = plan
                .replay
                .expect("a streamed GET within the limit keeps a replay");
            assert_eq!(
                replay.head.headers[http::header::TRANSFER_ENCODING],
                "chunked",
                "{method}: a replay sends the same head"
            );
        }
        // Trailers go after a chunked body only.
        let mut trailed = intent("GET", b"", Source::Bytes(Bytes::from_static(b"abc")));
        trailed.trailers = Some(Trailers::new(Some(http::HeaderMap::new())));
        assert_eq!(te(&planned(trailed)).as_deref(), Some("chunked"));
        // hyper frames the other methods' bodies itself; a known length needs nothing.
        assert_eq!(te(&planned(intent("POST", b"", Source::Streamed))), None);
        let mut sized = intent("GET", b"content-length\n3\n", Source::Streamed);
        sized.content_length = Some(3);
        assert_eq!(te(&planned(sized)), None);
        let memory = Source::Bytes(Bytes::from_static(b"abc"));
        assert_eq!(te(&planned(intent("GET", b"", memory))), None);
        // A coding the head names is left as it is.
        let own = planned(intent(
            "GET",
            b"transfer-encoding\ngzip, chunked\n",
            Source::Streamed,
        ));
        assert_eq!(te(&own).as_deref(), Some("gzip, chunked"));
    }

    #[tokio::test]
    async fn a_body_in_memory_goes_again_as_it_was() {
        let body = Bytes::from_static(b"hello");
        let plan = planned(intent("PUT", b"", Source::Bytes(body.clone())));
        assert!(plan.writer.is_none());
        assert_eq!(bytes_of(plan.spec.body).await, body);
        let replay = plan.replay.unwrap();
        assert!(replay.possible());
        let again = replay.resend(|| {}).unwrap();
        assert!(again.writer.is_none() && again.ended);
        assert_eq!(again.spec.method, Method::PUT);
        assert_eq!(again.spec.head.uri.path(), "/items");
        assert_eq!(bytes_of(again.spec.body).await, body);
    }

    #[tokio::test]
    async fn a_streamed_body_goes_again_as_recorded_then_from_its_source() {
        let plan = planned(intent("PUT", b"", Source::Streamed));
        let writer = plan.writer.unwrap();
        let first = tokio::spawn(bytes_of(plan.spec.body));
        writer.write(Bytes::from_static(b"ab"));
        writer.write(Bytes::from_static(b"cd"));
        let replay = plan.replay.unwrap();
        assert!(replay.possible());
        let mut again = replay.resend(|| {}).unwrap();
        assert!(!again.ended, "the source goes on");
        drop(writer);
        first.abort();
        let mut next = again.writer.take().unwrap();
        next.write(Bytes::from_static(b"ef"));
        next.end();
        assert_eq!(bytes_of(again.spec.body).await, "abcdef");
    }

    #[tokio::test]
    async fn a_streamed_body_that_outgrew_the_limit_cannot_go_again() {
        let plan = planned(intent("GET", b"", Source::Streamed));
        let writer = plan.writer.unwrap();
        let _first = tokio::spawn(bytes_of(plan.spec.body));
        writer.write(Bytes::from(vec![b'x'; 17]));
        let replay = plan.replay.unwrap();
        assert!(!replay.possible());
        assert!(replay.resend(|| {}).is_none());
    }

    #[tokio::test]
    async fn an_ended_or_failed_source_ends_its_replay_the_same_way() {
        let plan = planned(intent("PUT", b"", Source::Streamed));
        let mut writer = plan.writer.unwrap();
        let _first = tokio::spawn(bytes_of(plan.spec.body));
        writer.write(Bytes::from_static(b"all"));
        writer.end();
        let again = plan.replay.unwrap().resend(|| {}).unwrap();
        assert!(again.ended);
        assert_eq!(bytes_of(again.spec.body).await, "all");

        let plan = planned(intent("PUT", b"", Source::Streamed));
        let mut writer = plan.writer.unwrap();
        let _first = tokio::spawn(bytes_of(plan.spec.body));
        writer.write(Bytes::from_static(b"part"));
        writer.fail("source broke".into());
        let again = plan.replay.unwrap().resend(|| {}).unwrap();
        let err = again.spec.body.collect().await.unwrap_err();
        assert!(err.to_string().contains("source broke"), "{err}");
    }

    #[tokio::test]
    async fn trailers_follow_the_body_and_go_again_with_a_replay() {
        // Known with the request: after the bytes, with no exact length (HTTP/1.1 chunks it).
        let known = header_map(b"x-sum\nabc").unwrap();
        let mut given = intent("PUT", b"", Source::Bytes(Bytes::from_static(b"hello")));
        given.trailers = Some(Trailers::new(Some(known.clone())));
        let plan = planned(given);
        assert_eq!(hyper::body::Body::size_hint(&plan.spec.body).exact(), None);
        let collected = plan.spec.body.collect().await.unwrap();
        assert_eq!(collected.trailers(), Some(&known));
        assert_eq!(collected.to_bytes(), "hello");
        // The replay sends them too.
        let resend = plan.replay.unwrap().resend(|| {}).unwrap();
        let again = resend.spec.body.collect().await.unwrap();
        assert_eq!(again.trailers(), Some(&known));

        // Set when a streamed body's source ends.
        let mut later = intent("POST", b"", Source::Streamed);
        later.trailers = Some(Trailers::new(None));
        let mut plan = planned(later);
        let mut writer = plan.writer.take().unwrap();
        assert_eq!(
            writer.write(Bytes::from_static(b"ab")),
            super::super::WriteResult::Ready
        );
        let trailers = plan.trailers.take().unwrap();
        trailers.set(header_map(b"x-late\n1").unwrap());
        // A second setting changes nothing.
        trailers.set(header_map(b"x-late\n2").unwrap());
        writer.end();
        let collected = plan.spec.body.collect().await.unwrap();
        assert_eq!(collected.trailers().unwrap()["x-late"], "1");
        assert_eq!(collected.to_bytes(), "ab");
    }

    #[tokio::test]
    async fn a_body_whose_trailers_never_come_ends_without_them() {
        let mut later = intent("POST", b"", Source::Streamed);
        later.trailers = Some(Trailers::new(None));
        let mut plan = planned(later);
        let mut writer = plan.writer.take().unwrap();
        writer.end();
        // The request ended without setting them (its handle let go of them).
        drop(plan.trailers.take());
        drop(plan.replay.take());
        let collected = plan.spec.body.collect().await.unwrap();
        assert!(collected.trailers().is_none());
    }
}
