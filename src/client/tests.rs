//! Exchanges against raw servers on loopback that script every byte of the response.

use std::sync::atomic::AtomicBool;
use std::sync::Mutex;
use std::task::{Context, Poll};

use http::HeaderValue;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};

use super::*;
use crate::pool::ConnEnd;

struct Chan(Mutex<UnboundedSender<Event>>);

impl Sink for Chan {
    fn post(&self, event: Event) {
        let _ = self.0.lock().unwrap().send(event);
    }
}

pub(crate) fn sink() -> (Arc<dyn Sink>, UnboundedReceiver<Event>) {
    let (tx, rx) = unbounded_channel();
    (Arc::new(Chan(Mutex::new(tx))), rx)
}

/// Runs one exchange to its end on a new connection to `port`, with no body credit: what it
/// posted is in the receiver.
async fn run(port: u16, spec: Spec) -> UnboundedReceiver<Event> {
    let (sink, rx) = sink();
    exchange(
        connect(port).await,
        spec,
        Arc::new(Control::default()),
        sink,
    )
    .await;
    rx
}

/// A server that reads one request head (and `body` bytes) per reply, then writes the reply.
async fn server(replies: Vec<&'static [u8]>) -> (u16, tokio::task::JoinHandle<Vec<Vec<u8>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let task = tokio::spawn(async move {
        let (mut sock, _) = listener.accept().await.unwrap();
        let mut requests = Vec::new();
        for reply in replies {
            let mut buf = Vec::new();
            let mut byte = [0u8; 1];
            while !buf.ends_with(b"\r\n\r\n") {
                if sock.read(&mut byte).await.unwrap() == 0 {
                    return requests;
                }
                buf.push(byte[0]);
            }
            let head = String::from_utf8_lossy(&buf).to_lowercase();
            if let Some(len) = head.split("content-length: ").nth(1) {
                let n: usize = len.split("\r\n").next().unwrap().parse().unwrap();
                let mut body = vec![0u8; n];
                sock.read_exact(&mut body).await.unwrap();
                buf.extend_from_slice(&body);
            }
            requests.push(buf);
            sock.write_all(reply).await.unwrap();
        }
        // Keep the connection open until the client is done with it.
        let mut rest = [0u8; 64];
        while matches!(sock.read(&mut rest).await, Ok(n) if n > 0) {}
        requests
    });
    (port, task)
}

/// A server that reads one request head, writes `reply` and closes the connection.
async fn reply_then_close(reply: &'static [u8]) -> (u16, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let task = tokio::spawn(async move {
        let (mut sock, _) = listener.accept().await.unwrap();
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            assert_eq!(sock.read(&mut byte).await.unwrap(), 1);
            head.push(byte[0]);
        }
        sock.write_all(reply).await.unwrap();
    });
    (port, task)
}

async fn connect(port: u16) -> Sender {
    let tcp = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let (sender, connection) = handshake(tcp, 16 * 1024).await.unwrap();
    connection.spawn(|_| {});
    sender
}

pub(crate) fn get(path: &str) -> Spec {
    Spec {
        method: Method::GET,
        head: Arc::new(Head {
            uri: path.parse().unwrap(),
            headers: http::HeaderMap::from_iter([(
                http::header::HOST,
                HeaderValue::from_static("127.0.0.1"),
            )]),
        }),
        body: empty_body(),
        expect_continue: None,
        informational: false,
        headers_timeout: None,
        body_clock: None,
        body_timeout: None,
        max_head_size: 16 * 1024,
    }
}

#[tokio::test]
async fn a_small_response_arrives_with_its_head_and_the_connection_comes_back() {
    let (port, srv) = server(vec![
        b"HTTP/1.1 200 Fine\r\nContent-Length: 5\r\nX-A: 1\r\nX-A: 2\r\n\r\nhello",
    ])
    .await;
    let mut rx = run(port, get("/x?y=1")).await;
    let Some(Event::Head {
        status,
        reason,
        headers,
        chunks,
        end,
        done,
    }) = rx.recv().await
    else {
        panic!("head expected")
    };
    assert_eq!((status, &*reason), (200, &b"Fine"[..]));
    assert_eq!(chunks.concat(), b"hello");
    assert_eq!(end, Some(HeaderLines::default()));
    let xa: Vec<_> = headers
        .pairs()
        .filter(|(k, _)| *k == b"x-a")
        .map(|(_, v)| v)
        .collect();
    assert_eq!(xa, vec![b"1", b"2"]);
    assert_eq!(
        headers.as_bytes(),
        b"content-length\n5\nx-a\n1\nx-a\n2",
        "packed as JavaScript splits them"
    );
    let sender = settled(done, &mut rx).await;
    assert!(sender.is_some(), "the connection must come back");
    drop(sender);
    let requests = srv.await.unwrap();
    assert!(String::from_utf8_lossy(&requests[0]).starts_with("GET /x?y=1 HTTP/1.1\r\n"));
}

/// Informational responses ahead of the final one are posted, in order and before its head,
/// when the spec asks for them; otherwise nothing but the head comes.
#[tokio::test]
async fn informational_responses_come_before_the_head_when_asked_for() {
    const REPLY: &[u8] = b"HTTP/1.1 102 Processing\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\nLink: </b.js>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    for asked in [true, false] {
        let (port, _srv) = server(vec![REPLY]).await;
        let mut spec = get("/");
        spec.informational = asked;
        let mut rx = run(port, spec).await;
        let mut seen = Vec::new();
        while let Ok(event) = rx.try_recv() {
            match event {
                Event::Info { status, headers } => seen.push(format!(
                    "{status} {}",
                    String::from_utf8_lossy(headers.as_bytes())
                )),
                Event::Head { status, chunks, .. } => seen.push(format!(
                    "{status} {}",
                    String::from_utf8_lossy(&chunks.concat())
                )),
                _ => {}
            }
        }
        let expected: &[&str] = if asked {
            &["102 ", "103 link\n</a.css>\nlink\n</b.js>", "200 ok"]
        } else {
            &["200 ok"]
        };
        assert_eq!(seen, expected);
    }
}

/// Responses one after another on one connection, each read to its end: one whose body is
/// taken whole with its head (the wake-up that taking it sends the connection held back), one
/// chunked (hyper hands it over a frame at a time: the wake-up that taking its first chunk
/// sends must reach the connection, or its end never comes), one without a body. The
/// connection carries each next request, each exchange run either way.
#[tokio::test]
async fn responses_follow_one_another_on_one_connection() {
    follow_one_another(Way::OwnTask).await;
}

#[tokio::test]
async fn responses_follow_one_another_in_the_connections_task() {
    follow_one_another(Way::InConnection).await;
}

async fn follow_one_another(way: Way) {
    let replies: Vec<&'static [u8]> = vec![
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfirst",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: x-sum\r\n\r\n\
          6\r\nsecond\r\n0\r\nx-sum: 6\r\n\r\n",
        b"HTTP/1.1 204 No Content\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nlast",
    ];
    let expected: [(&[u8], &[u8]); 4] = [
        (b"first", b""),
        (b"second", b"x-sum\n6"),
        (b"", b""),
        (b"last", b""),
    ];
    let (port, srv) = server(replies).await;
    let mut sender = connect(port).await;
    // A wake-up held back that was needed would leave the connection waiting for ever.
    let bound = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    for (i, (body, trailers)) in expected.into_iter().enumerate() {
        let (sink, mut rx) = sink();
        let ctl = Arc::new(Control::default());
        ctl.grant();
        let task = start(way, sender, get("/"), ctl, sink);
        let Some(Event::Head {
            mut chunks,
            mut end,
            done,
            ..
        }) = next(&mut rx, bound, i, way).await
        else {
            panic!("head expected for response {i}")
        };
        while end.is_none() {
            match next(&mut rx, bound, i, way).await {
                Some(Event::Data(more)) => chunks.extend(more),
                Some(Event::End(t)) => end = Some(t),
                other => panic!("body or end expected for response {i}, got {other:?}"),
            }
        }
        assert_eq!(chunks.concat(), body, "response {i}");
        assert_eq!(
            end.as_ref().map(HeaderLines::as_bytes),
            Some(trailers),
            "response {i}"
        );
        let done = match done {
            Some(done) => done,
            None => match next(&mut rx, bound, i, way).await {
                Some(Event::Done(sender)) => sender,
                other => panic!("Done expected, got {other:?}"),
            },
        };
        sender = done.unwrap_or_else(|| panic!("the connection must come back after response {i}"));
        if let Some(task) = task {
            task.await.unwrap();
        }
    }
    drop(sender);
    assert_eq!(srv.await.unwrap().len(), 4);
}

/// The next event of response `i`, before `bound`.
async fn next(
    rx: &mut UnboundedReceiver<Event>,
    bound: tokio::time::Instant,
    i: usize,
    way: Way,
) -> Option<Event> {
    tokio::time::timeout_at(bound, rx.recv())
        .await
        .unwrap_or_else(|_| panic!("response {i} never ended ({way:?})"))
}

/// How a test runs an exchange on a connection: in a task of its own (as on a new connection)
/// or in the connection's task (as on a reused one, see [`Sender::start`]).
#[derive(Clone, Copy, Debug)]
enum Way {
    OwnTask,
    InConnection,
}

/// Starts an exchange `way`; the handle of its task, when it has one.
fn start(
    way: Way,
    sender: Sender,
    spec: Spec,
    ctl: Arc<Control>,
    sink: Arc<dyn Sink>,
) -> Option<tokio::task::JoinHandle<()>> {
    match way {
        Way::OwnTask => Some(tokio::spawn(exchange(sender, spec, ctl, sink))),
        Way::InConnection => {
            let started = sender.start(spec, ctl, sink);
            assert!(started.is_ok(), "the connection's task takes the exchange");
            None
        }
    }
}

/// A small chunked response that arrives at once goes with its head, trailers included, as a
/// small response with a length does: hyper hands its chunks over one at a time, and the
/// exchange lets the connection decode the next while they come.
#[tokio::test]
async fn a_small_chunked_response_arrives_whole_with_its_head() {
    let (port, _srv) = server(vec![
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\
          3\r\none\r\n3\r\ntwo\r\n0\r\nx-sum: 6\r\n\r\n",
    ])
    .await;
    // No credit: an exchange whose body did not come whole would wait for the consumer.
    let mut rx = tokio::time::timeout(std::time::Duration::from_secs(30), run(port, get("/")))
        .await
        .expect("the body came with the head, needing no credit");
    let Some(Event::Head {
        chunks, end, done, ..
    }) = rx.recv().await
    else {
        panic!("head expected")
    };
    assert_eq!(chunks.concat(), b"onetwo");
    assert_eq!(
        end.as_ref().map(HeaderLines::as_bytes),
        Some(&b"x-sum\n6"[..])
    );
    assert!(settled(done, &mut rx).await.is_some());
}

/// A body cut after the chunk that came with its head fails only once its consumer asks for
/// more, as a streamed body would: the consumer has the response first.
#[tokio::test]
async fn a_body_cut_after_its_first_chunk_fails_once_its_consumer_asks() {
    // Closed 93 bytes short.
    let (port, srv) =
        reply_then_close(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial").await;
    let (sink, mut rx) = sink();
    let ctl = Arc::new(Control::default());
    let task = tokio::spawn(exchange(connect(port).await, get("/"), ctl.clone(), sink));
    let Some(Event::Head {
        chunks, end, done, ..
    }) = rx.recv().await
    else {
        panic!("head expected")
    };
    assert_eq!(
        (chunks.concat(), end, done.is_none()),
        (b"partial".to_vec(), None, true)
    );
    srv.await.unwrap();
    // Nothing more until the consumer asks, however long the connection has been closed.
    tokio::task::yield_now().await;
    assert!(rx.try_recv().is_err(), "the failure waits for the consumer");
    ctl.grant();
    let err = next_error(&mut rx).await;
    assert_eq!(err.code(), "ECONNRESET");
    assert!(matches!(rx.recv().await, Some(Event::Done(None))));
    task.await.unwrap();
}

/// A chunked response of 200 KiB and a trailer.
fn big_chunked() -> &'static [u8] {
    let mut out =
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: x-sum\r\n\r\n".to_vec();
    for _ in 0..50 {
        out.extend_from_slice(format!("{:x}\r\n", 4096).as_bytes());
        out.extend_from_slice(&[b'z'; 4096]);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"0\r\nx-sum: 42\r\n\r\n");
    Box::leak(out.into_boxed_slice())
}

// Paused time: a timeout fires only once every task is idle, so "nothing came" is certain.
#[tokio::test(start_paused = true)]
async fn a_body_streams_only_as_credit_is_granted_and_trailers_end_it() {
    stream_as_granted(Way::OwnTask).await;
}

#[tokio::test(start_paused = true)]
async fn a_body_streams_as_granted_in_the_connections_task() {
    stream_as_granted(Way::InConnection).await;
}

async fn stream_as_granted(way: Way) {
    let (port, _srv) = server(vec![big_chunked()]).await;
    let (sink, mut rx) = sink();
    let ctl = Arc::new(Control::default());
    let task = start(way, connect(port).await, get("/"), ctl.clone(), sink);
    let Some(Event::Head { chunks, end, .. }) = rx.recv().await else {
        panic!("head expected")
    };
    assert!(end.is_none(), "200 KiB cannot all come with the head");
    let mut total: usize = chunks.iter().map(|c| c.len()).sum();
    assert!(total <= 64 * 1024 + 4096);
    // Without a grant, nothing more comes.
    let quiet = tokio::time::timeout(Duration::from_secs(5), rx.recv()).await;
    assert!(quiet.is_err(), "no data without credit");
    let trailers = loop {
        ctl.grant();
        match rx.recv().await {
            Some(Event::Data(d)) => total += d.iter().map(|c| c.len()).sum::<usize>(),
            Some(Event::End(trailers)) => break trailers,
            other => panic!("unexpected {other:?}"),
        }
    };
    assert_eq!(total, 50 * 4096);
    assert_eq!(
        trailers.pairs().collect::<Vec<_>>(),
        vec![(&b"x-sum"[..], &b"42"[..])]
    );
    assert!(matches!(rx.recv().await, Some(Event::Done(Some(_)))));
    if let Some(task) = task {
        task.await.unwrap();
    }
}

#[tokio::test]
async fn a_connection_close_response_does_not_come_back() {
    let (port, _srv) = server(vec![
        b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n",
    ])
    .await;
    let mut rx = run(port, get("/")).await;
    let Some(Event::Head {
        status: 204, done, ..
    }) = rx.recv().await
    else {
        panic!("a 204 head expected")
    };
    assert!(settled(done, &mut rx).await.is_none());
}

/// The next event, which must be an error.
async fn next_error(rx: &mut UnboundedReceiver<Event>) -> Error {
    match rx.recv().await {
        Some(Event::Error(err)) => err,
        other => panic!("an error expected, got {other:?}"),
    }
}

/// What became of the connection: told with the head, or by the Done that follows it.
async fn settled(
    with_head: Option<Option<Sender>>,
    rx: &mut tokio::sync::mpsc::UnboundedReceiver<Event>,
) -> Option<Sender> {
    match with_head {
        Some(sender) => sender,
        None => match rx.recv().await {
            Some(Event::Done(sender)) => sender,
            other => panic!("Done expected, got {other:?}"),
        },
    }
}

#[tokio::test]
async fn a_malformed_status_line_is_named_like_llhttp() {
    let (port, _srv) = server(vec![b"HTTP/1.1 2x0 Nope\r\n\r\n"]).await;
    let mut rx = run(port, get("/")).await;
    let err = next_error(&mut rx).await;
    assert!(err.code().starts_with("HPE_INVALID_"), "{}", err.code());
    assert!(matches!(rx.recv().await, Some(Event::Done(None))));
}

#[tokio::test]
async fn an_answer_that_is_not_http_is_told_from_an_unknown_version_like_llhttp() {
    // A server of another protocol, and a TLS alert (a TLS port spoken to in plain text).
    let other: [&'static [u8]; 2] = [b"SSH-2.0-OpenSSH_9.6\r\n", b"\x15\x03\x01\x00\x02\x02\x50"];
    for reply in other {
        let (port, _srv) = server(vec![reply]).await;
        let err = next_error(&mut run(port, get("/")).await).await;
        assert_eq!(err.code(), "HPE_INVALID_CONSTANT");
        assert_eq!(err.message(), "Parse Error: Expected HTTP/, RTSP/ or ICE/");
    }
    let (port, _srv) = server(vec![b"HTTP/1.2 200 OK\r\nContent-Length: 0\r\n\r\n"]).await;
    let err = next_error(&mut run(port, get("/")).await).await;
    assert_eq!(err.code(), "HPE_INVALID_VERSION");
    assert_eq!(err.message(), "Parse Error: Invalid HTTP version");
}

#[test]
fn a_connections_first_bytes_are_matched_against_a_status_lines_start_across_reads() {
    use super::handshake::fits_status_line;
    assert!(fits_status_line(0, b"HTTP/1.1 200 OK"));
    assert!(fits_status_line(0, b"HT"));
    assert!(fits_status_line(2, b"TP/1.1"));
    assert!(fits_status_line(4, b"/"));
    assert!(!fits_status_line(0, b"SSH-2.0"));
    assert!(!fits_status_line(0, b"http/1.1"));
    assert!(!fits_status_line(2, b"XP/"));
    assert!(!fits_status_line(0, b"\x15\x03"));
}

#[tokio::test]
async fn a_switch_of_protocols_nobody_asked_for_fails_the_exchange() {
    let (port, _srv) = server(vec![
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: other\r\nConnection: upgrade\r\n\r\nnot http",
    ])
    .await;
    let mut rx = run(port, get("/")).await;
    let err = next_error(&mut rx).await;
    assert_eq!(err.code(), "ERR_HYPERAGENT_HTTP");
    // The connection is given up, not offered for another request.
    assert!(matches!(rx.recv().await, Some(Event::Done(None))));
    assert!(rx.recv().await.is_none());
}

#[tokio::test]
async fn a_head_larger_than_the_limit_overflows() {
    let big: &'static [u8] = Box::leak(
        format!("HTTP/1.1 200 OK\r\nX-Big: {}\r\n\r\n", "a".repeat(20_000))
            .into_bytes()
            .into_boxed_slice(),
    );
    let (port, _srv) = server(vec![big]).await;
    let mut rx = run(port, get("/")).await;
    let err = next_error(&mut rx).await;
    assert_eq!(err.code(), "HPE_HEADER_OVERFLOW");
}

#[tokio::test]
async fn a_truncated_body_is_aborted() {
    let (port, srv) = server(vec![
        b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial",
    ])
    .await;
    let (sink, mut rx) = sink();
    let ctl = Arc::new(Control::default());
    let sender = connect(port).await;
    let task = tokio::spawn(exchange(sender, get("/"), ctl.clone(), sink));
    assert!(matches!(rx.recv().await, Some(Event::Head { .. })));
    srv.abort(); // the server goes away after "partial"
    ctl.grant();
    let mut saw_error = None;
    while let Some(event) = rx.recv().await {
        match event {
            Event::Data(_) => ctl.grant(),
            Event::Error(e) => saw_error = Some(e),
            Event::Done(sender) => {
                assert!(sender.is_none());
                break;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    let err = saw_error.expect("an error");
    assert_eq!(
        (err.code(), err.message().as_str()),
        ("ECONNRESET", "aborted")
    );
    task.await.unwrap();
}

/// A server that accepts a connection, then reads nothing from it and never answers.
async fn silent_server() -> (u16, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let hold = tokio::spawn(async move {
        let (sock, _) = listener.accept().await.unwrap();
        std::future::pending::<()>().await;
        drop(sock);
    });
    (port, hold)
}

#[tokio::test(start_paused = true)]
async fn the_headers_timeout_fires_when_no_head_comes() {
    let (port, _hold) = silent_server().await;
    let mut spec = get("/");
    spec.headers_timeout = Some(Duration::from_secs(30));
    let mut rx = run(port, spec).await;
    let err = next_error(&mut rx).await;
    assert_eq!(err.code(), "ERR_HYPERAGENT_HEADERS_TIMEOUT");
}

/// `spec`'s exchange on a new connection to `port`, in a task of its own, and its events.
async fn spawned(port: u16, spec: Spec) -> (tokio::task::JoinHandle<()>, UnboundedReceiver<Event>) {
    let (sink, rx) = sink();
    let ctl = Arc::new(Control::default());
    (
        tokio::spawn(exchange(connect(port).await, spec, ctl, sink)),
        rx,
    )
}

/// A `POST /` with a body of `len` bytes (none yet).
fn post(len: u64) -> Spec {
    let mut spec = get("/");
    spec.method = Method::POST;
    spec.head = Arc::new(Head {
        uri: spec.head.uri.clone(),
        headers: http::HeaderMap::from_iter([
            (http::header::HOST, HeaderValue::from_static("127.0.0.1")),
            (http::header::CONTENT_LENGTH, HeaderValue::from(len)),
        ]),
    });
    spec
}

/// A `POST /` whose body of `len` bytes streams through the returned writer, its progress kept
/// for the headers timeout, as `plan` makes a streamed request.
fn streamed_post(len: u64, headers_timeout: Duration) -> (Spec, BodyWriter, Arc<Notify>) {
    let drained = Arc::new(Notify::new());
    let drain = drained.clone();
    let (body, writer) = channel_body(Vec::new(), Some(len), move || drain.notify_one());
    let clock = SourceClock::new();
    let mut spec = post(len);
    spec.body = clocked(body, clock.clone());
    spec.body_clock = Some(clock);
    spec.headers_timeout = Some(headers_timeout);
    (spec, writer, drained)
}

// Real time: the source's silence is the scenario (a slow upload), not a wait for something.
#[tokio::test]
async fn a_headers_timeout_waits_out_a_slow_body_source_and_runs_from_the_bodys_end() {
    let (port, srv) = server(vec![b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"]).await;
    // Long enough for the server to answer in once the body has come, however busy the
    // machine; the source's silence outlasts it three times.
    let timeout = Duration::from_millis(400);
    let (spec, mut writer, _) = streamed_post(10, timeout);
    assert_eq!(
        writer.write(Bytes::from_static(b"01234")),
        WriteResult::Ready
    );
    let (task, mut rx) = spawned(port, spec).await;
    // The source is silent for three timeouts: the connection waits on it, not on the server.
    tokio::time::sleep(3 * timeout).await;
    assert_eq!(
        writer.write(Bytes::from_static(b"56789")),
        WriteResult::Ready
    );
    writer.end();
    match rx.recv().await {
        Some(Event::Head { status, .. }) => assert_eq!(status, 200),
        other => panic!("the answer expected, got {other:?}"),
    }
    task.await.unwrap();
    assert!(srv.await.unwrap()[0].ends_with(b"0123456789"));
}

#[tokio::test]
async fn a_headers_timeout_fires_when_the_server_takes_no_more_of_the_body() {
    // The body fills the socket's buffers, and the connection can take no more of it.
    let (port, _hold) = silent_server().await;
    let chunk = Bytes::from(vec![b'x'; 1 << 20]);
    let len = 256 * chunk.len() as u64;
    let (spec, writer, drained) = streamed_post(len, Duration::from_millis(200));
    let (task, mut rx) = spawned(port, spec).await;
    // The source keeps the channel full, writing again at each drain: whatever stops the body
    // is the connection.
    let feeding = tokio::spawn(async move {
        for _ in 0..256 {
            if writer.write(chunk.clone()) == WriteResult::Full {
                drained.notified().await;
            }
        }
        writer
    });
    let err = loop {
        match rx.recv().await {
            Some(Event::Error(err)) => break err,
            Some(Event::BodyDrain) => continue,
            other => panic!("an error expected, got {other:?}"),
        }
    };
    assert_eq!(err.code(), "ERR_HYPERAGENT_HEADERS_TIMEOUT");
    feeding.abort();
    task.await.unwrap();
}

#[tokio::test]
async fn a_streamed_request_body_applies_back_pressure_and_reports_the_drain() {
    let (port, srv) = server(vec![b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"]).await;
    let srv = async move { srv.await.unwrap() };
    let (sink, mut rx) = sink();
    let drained = sink.clone();
    let (body, mut writer) =
        channel_body(Vec::new(), Some(40), move || drained.post(Event::BodyDrain));
    let mut spec = post(40);
    spec.body = body;
    // Fill the channel before anything is sent: the writer is told to wait.
    let mut results = Vec::new();
    for _ in 0..8 {
        results.push(writer.write(Bytes::from_static(b"01234")));
    }
    assert_eq!(results.last(), Some(&WriteResult::Full));
    assert!(results[..7].iter().all(|r| *r == WriteResult::Ready));
    writer.end();
    exchange(
        connect(port).await,
        spec,
        Arc::new(Control::default()),
        sink,
    )
    .await;
    let mut drains = 0;
    while let Some(event) = rx.recv().await {
        match event {
            Event::BodyDrain => drains += 1,
            Event::Done(sender) => {
                drop(sender);
                break;
            }
            _ => {}
        }
    }
    assert_eq!(drains, 1);
    let requests = srv.await;
    assert!(requests[0].ends_with(b"0123401234012340123401234012340123401234"));
}

#[tokio::test]
async fn a_recording_keeps_what_was_written_for_a_replay_within_its_limit() {
    use http_body_util::BodyExt;
    let recording = Recording::new(12);
    let (body, writer) = channel_body(Vec::new(), None, || {});
    let mut writer = writer.record(recording.clone());
    assert_eq!(
        writer.write(Bytes::from_static(b"abcd")),
        WriteResult::Ready
    );
    // The connection is gone: its body dropped. What is written meanwhile waits in the
    // recording, and the writer waits for the drain a replay sends.
    drop(body);
    assert_eq!(writer.write(Bytes::from_static(b"efgh")), WriteResult::Full);
    assert!(writer.is_waiting());
    writer.end();
    let recorded = recording.take().expect("within the limit");
    assert!(recorded.ended);
    // The replay's body: what was recorded, then what its new writer gets.
    let (replay, mut next) = channel_body(recorded.chunks, None, || {});
    assert_eq!(next.write(Bytes::from_static(b"ijkl")), WriteResult::Ready);
    next.end();
    let bytes = replay.collect().await.unwrap().to_bytes();
    assert_eq!(&bytes[..], b"abcdefghijkl");
    assert!(recording.take().is_none(), "taken once");

    // Past the limit nothing is kept, and a write the connection refuses is refused.
    let recording = Recording::new(6);
    let (body, writer) = channel_body(Vec::new(), None, || {});
    let writer = writer.record(recording.clone());
    assert_eq!(
        writer.write(Bytes::from_static(b"abcd")),
        WriteResult::Ready
    );
    assert_eq!(
        writer.write(Bytes::from_static(b"efgh")),
        WriteResult::Ready
    );
    assert!(!recording.is_complete());
    drop(body);
    assert_eq!(
        writer.write(Bytes::from_static(b"ijkl")),
        WriteResult::Closed
    );
    assert!(recording.take().is_none());
}

/// An exchange's future is boxed once per request: under 1 KiB, mimalloc serves it from its
/// small-object path (larger blocks take a slower, generic one).
#[tokio::test]
async fn an_exchange_fits_a_small_allocation() {
    let (port, _srv) = server(vec![b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"]).await;
    let (sink, _rx) = sink();
    let exchange = exchange(
        connect(port).await,
        get("/"),
        Arc::new(Control::default()),
        sink,
    );
    let size = std::mem::size_of_val(&*exchange);
    assert!(size <= 1024, "the exchange's future takes {size} bytes");
}

/// A connection that closes after part of a response (a byte, a head cut short, an
/// informational response) fails its exchange as answered: an [`Event::Error`], which is never
/// replayed; one that closes before any byte fails as [`Event::Unsent`].
#[tokio::test]
async fn a_connection_closed_after_a_response_began_is_not_unsent() {
    for (tail, unsent) in [
        (&b""[..], true),
        (b"H", false),
        (b"HTTP/1.1 200 OK\r\ncontent-", false),
        (b"HTTP/1.1 103 Early Hints\r\n\r\n", false),
    ] {
        let (port, srv) = reply_then_close(tail).await;
        let mut rx = run(port, get("/")).await;
        srv.await.unwrap();
        let first = rx.recv().await;
        let got_unsent = match first {
            Some(Event::Unsent(_)) => true,
            Some(Event::Error(_)) => false,
            other => panic!("{tail:?}: an error expected, got {other:?}"),
        };
        assert_eq!(got_unsent, unsent, "{tail:?}");
    }
}

/// An in-memory stream that takes vectored writes, as a TCP stream does (hyper then queues a
/// body given whole instead of copying it), one buffer at a time; the flag is set when it is
/// shut down (a graceful end).
struct Vectored(tokio::io::DuplexStream, Arc<AtomicBool>);

impl AsyncRead for Vectored {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for Vectored {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let first = bufs
            .iter()
            .find(|b| !b.is_empty())
            .map_or(&[][..], |b| &**b);
        self.poll_write(cx, first)
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.1.store(true, Ordering::Relaxed);
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

/// `POST /upload` with `body`, given whole.
fn upload(body: Bytes) -> Spec {
    let mut spec = get("/upload");
    spec.method = Method::POST;
    Arc::get_mut(&mut spec.head)
        .unwrap()
        .headers
        .insert(http::header::CONTENT_LENGTH, body.len().into());
    spec.body = full_body(body);
    spec
}

/// A connection whose peer answers once the request's head has gone, then resets it: every
/// later write fails as a reset connection's do (`ECONNRESET`), and the reads give `answer`,
/// then the reset.
struct AnsweredThenReset {
    answer: &'static [u8],
    read: usize,
    head_sent: bool,
    reader: Option<std::task::Waker>,
}

impl AnsweredThenReset {
    fn new(answer: &'static [u8]) -> Self {
        AnsweredThenReset {
            answer,
            read: 0,
            head_sent: false,
            reader: None,
        }
    }
}

fn reset_error() -> std::io::Error {
    std::io::Error::from_raw_os_error(libc::ECONNRESET)
}

impl AsyncRead for AnsweredThenReset {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        if !self.head_sent {
            self.reader = Some(cx.waker().clone());
            return Poll::Pending;
        }
        let rest = &self.answer[self.read..];
        if rest.is_empty() {
            return Poll::Ready(Err(reset_error()));
        }
        let n = rest.len().min(buf.remaining());
        buf.put_slice(&rest[..n]);
        self.read += n;
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for AnsweredThenReset {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        if self.head_sent {
            return Poll::Ready(Err(reset_error()));
        }
        self.head_sent = true;
        if let Some(reader) = self.reader.take() {
            reader.wake();
        }
        // Never all of a large body: the rest waits for a later write, which fails.
        Poll::Ready(Ok(buf.len().min(1024)))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// Runs an upload on a connection that answers after the head and is then reset.
async fn upload_answered_then_reset(answer: &'static [u8]) -> UnboundedReceiver<Event> {
    let io = AnsweredThenReset::new(answer);
    let (sender, connection) = handshake(io, 16 * 1024).await.unwrap();
    connection.spawn(|_| {});
    let (sink, rx) = sink();
    let spec = upload(Bytes::from(vec![7u8; 1024 * 1024]));
    let ended = exchange(sender, spec, Arc::new(Control::default()), sink);
    tokio::time::timeout(Duration::from_secs(10), ended)
        .await
        .expect("the exchange must end");
    rx
}

/// A server that answers an upload early (a 413) and resets the connection: the writes of the
/// rest of the body fail, and hyper, which fails an exchange at its first write error, would
/// lose the response. It comes whole, and the connection is not offered again.
#[tokio::test]
async fn an_early_answer_to_an_upload_survives_the_reset_that_follows_it() {
    for keep_alive in [false, true] {
        let answer: &'static [u8] = match keep_alive {
            true => b"HTTP/1.1 413 Payload Too Large\r\nContent-Length: 8\r\n\r\ntoo big!",
            false => b"HTTP/1.1 413 Payload Too Large\r\nContent-Length: 8\r\nConnection: close\r\n\r\ntoo big!",
        };
        let mut rx = upload_answered_then_reset(answer).await;
        let mut body = Vec::new();
        let mut status = 0;
        let mut settled = None;
        while let Some(event) = rx.recv().await {
            match event {
                Event::Head {
                    status: s,
                    chunks,
                    done,
                    ..
                } => {
                    status = s;
                    body.extend(chunks.concat());
                    if let Some(sender) = done {
                        settled = Some(sender.is_some());
                    }
                }
                Event::Data(chunks) => body.extend(chunks.concat()),
                Event::End(_) | Event::Answered => {}
                Event::Done(sender) => settled = Some(sender.is_some()),
                other => panic!("keep-alive {keep_alive}: the response expected, got {other:?}"),
            }
        }
        assert_eq!(
            (status, &body[..]),
            (413, &b"too big!"[..]),
            "keep-alive {keep_alive}"
        );
        assert_eq!(
            settled,
            Some(false),
            "keep-alive {keep_alive}: the connection is given up"
        );
    }
}

/// The same reset with no answer before it: the exchange fails with the reset, as before.
#[tokio::test]
async fn a_reset_during_an_upload_with_no_answer_fails_with_the_reset() {
    let mut rx = upload_answered_then_reset(b"").await;
    match rx.recv().await {
        Some(Event::Unsent(err)) => assert_eq!(err.code(), "ECONNRESET"),
        other => panic!("the reset expected, got {other:?}"),
    }
    assert!(matches!(rx.recv().await, Some(Event::Done(None))));
}

/// A server that answers before it has read the request's body, then reads all of it: once
/// the last of the body has gone out, the connection is free for another request. hyper lets
/// its connection's task sleep when the end of a backlog of request bytes goes out after the
/// response has come, with nothing to tell the sender that the connection is ready again; the
/// exchange would wait for it until the server closed the connection.
#[tokio::test]
async fn a_connection_answered_before_its_upload_ended_comes_back_once_it_has_gone_out() {
    const WINDOW: usize = 64 * 1024;
    for tail in [1, 1000, WINDOW / 2, WINDOW - 1] {
        let body_len = 3 * WINDOW + tail;
        let (client, mut server) = tokio::io::duplex(WINDOW);
        let (sender, connection) = handshake(Vectored(client, Arc::default()), 16 * 1024)
            .await
            .unwrap();
        connection.spawn(|_| {});
        let spec = upload(Bytes::from(vec![7u8; body_len]));
        let (sink, mut rx) = sink();
        tokio::spawn(exchange(sender, spec, Arc::new(Control::default()), sink));

        // The request's head, then the answer at once.
        let mut buf = vec![0u8; WINDOW];
        let mut seen = Vec::new();
        let head_end = loop {
            let n = server.read(&mut buf).await.unwrap();
            assert!(n > 0, "the request's head must come");
            seen.extend_from_slice(&buf[..n]);
            if let Some(at) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
                break at + 4;
            }
        };
        server
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nearly")
            .await
            .unwrap();
        let Some(Event::Head { status: 200, .. }) = rx.recv().await else {
            panic!("the head must come first")
        };
        // The rest of the body, as fast as it comes.
        let mut got = seen.len() - head_end;
        while got < body_len {
            let n = server.read(&mut buf).await.unwrap();
            assert!(n > 0, "the body must all come");
            got += n;
        }
        assert_eq!(got, body_len, "tail {tail}");
        let done = tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                match rx.recv().await {
                    Some(Event::Done(sender)) => break sender,
                    Some(Event::Answered) => continue,
                    other => panic!("Answered, then Done expected, got {other:?}"),
                }
            }
        })
        .await
        .unwrap_or_else(|_| panic!("tail {tail}: the exchange never ended"));
        assert!(done.is_some(), "tail {tail}: the connection must come back");
    }
}

/// An exchange given up mid-upload (aborted, as an abort or a stopped env stops its task) to a
/// server that reads none of the body closes its connection at once: hyper's graceful end
/// would first send what it still holds of the body, and wait for the server for ever, holding
/// the connection and the body.
#[tokio::test]
async fn a_connection_whose_exchange_is_given_up_mid_upload_closes_at_once() {
    const WINDOW: usize = 64 * 1024;
    let (client, mut server) = tokio::io::duplex(WINDOW);
    let (sender, connection) = handshake(Vectored(client, Arc::default()), 16 * 1024)
        .await
        .unwrap();
    let (closed_tx, closed_rx) = tokio::sync::oneshot::channel();
    connection.spawn(move |_| {
        let _ = closed_tx.send(());
    });
    let body_len = 16 * WINDOW;
    let body = Bytes::from(vec![7u8; body_len]);
    let spec = upload(body.clone());
    let (sink, _rx) = sink();
    let task = tokio::spawn(exchange(sender, spec, Arc::new(Control::default()), sink));
    // The window fills with the head and the start of the body; the server reads no more.
    let mut buf = vec![0u8; 1024];
    let n = server.read(&mut buf).await.unwrap();
    assert!(buf[..n].starts_with(b"POST /upload"));
    task.abort();
    tokio::time::timeout(Duration::from_secs(10), closed_rx)
        .await
        .expect("the connection must close once its exchange is given up")
        .unwrap();
    // hyper's hold on the body went with the connection.
    assert!(body.is_unique(), "the body must be let go of");
    // The server sees the end of the connection after what was sent.
    let mut rest = Vec::new();
    server.read_to_end(&mut rest).await.unwrap();
    assert!(n + rest.len() < body_len, "the body must not have all gone");
}

/// An idle connection whose request half is dropped (the pool closing it) ends as hyper ends
/// it, shut down gracefully (over TLS, with a close_notify), not cut.
#[tokio::test]
async fn an_idle_connection_let_go_of_ends_gracefully() {
    let (client, mut server) = tokio::io::duplex(64 * 1024);
    let shut = Arc::new(AtomicBool::new(false));
    let (sender, connection) = handshake(Vectored(client, shut.clone()), 16 * 1024)
        .await
        .unwrap();
    let (closed_tx, closed_rx) = tokio::sync::oneshot::channel();
    connection.spawn(move |_| {
        let _ = closed_tx.send(());
    });
    let (sink, mut rx) = sink();
    tokio::spawn(exchange(
        sender,
        get("/"),
        Arc::new(Control::default()),
        sink,
    ));
    let mut buf = vec![0u8; 1024];
    let n = server.read(&mut buf).await.unwrap();
    assert!(buf[..n].starts_with(b"GET / "));
    server
        .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        .await
        .unwrap();
    let sender = loop {
        match rx.recv().await {
            Some(Event::Head {
                done: Some(sender), ..
            })
            | Some(Event::Done(sender)) => break sender,
            Some(_) => continue,
            None => panic!("the exchange ended without its connection"),
        }
    };
    drop(sender.expect("the connection must be reusable"));
    tokio::time::timeout(Duration::from_secs(10), closed_rx)
        .await
        .expect("the connection must end")
        .unwrap();
    assert!(shut.load(Ordering::Relaxed), "shut down, not cut");
}

/// A connection to `port`, and what tells when hyper's side of it has ended.
async fn connect_told(port: u16) -> (Sender, tokio::sync::oneshot::Receiver<ConnEnd>) {
    let tcp = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let (sender, connection) = handshake(tcp, 16 * 1024).await.unwrap();
    let (tx, ended) = tokio::sync::oneshot::channel();
    connection.spawn(move |end| {
        let _ = tx.send(end);
    });
    (sender, ended)
}

/// An exchange stopped in its connection's task (an abort) is dropped there and then, and its
/// connection closed, though the response had not ended: nothing more is posted.
#[tokio::test]
async fn an_exchange_stopped_in_its_connections_task_closes_the_connection() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let srv = tokio::spawn(async move {
        let (mut sock, _) = listener.accept().await.unwrap();
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            assert_eq!(sock.read(&mut byte).await.unwrap(), 1);
            head.push(byte[0]);
        }
        sock.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\npart")
            .await
            .unwrap();
        let mut rest = [0u8; 64];
        sock.read(&mut rest).await
    });
    let (sender, ended) = connect_told(port).await;
    let (sink, mut rx) = sink();
    let stopper = sender.stopper();
    start(
        Way::InConnection,
        sender,
        get("/"),
        Arc::new(Control::default()),
        sink,
    );
    assert!(matches!(
        rx.recv().await,
        Some(Event::Head { done: None, .. })
    ));
    stopper.stop();
    tokio::time::timeout(Duration::from_secs(10), ended)
        .await
        .expect("the connection closes at once")
        .unwrap();
    let read = srv.await.unwrap();
    assert!(
        matches!(read, Ok(0) | Err(_)),
        "the server sees the connection end, got {read:?}"
    );
    // The exchange is gone, and its sink with it.
    let after = tokio::time::timeout(Duration::from_secs(10), rx.recv()).await;
    assert!(matches!(after, Ok(None)), "nothing after the stop");
}

/// An exchange for a connection whose task has ended comes back, to run in a task of its own,
/// where it finds the connection closed before anything was sent.
#[tokio::test]
async fn an_exchange_for_an_ended_connection_comes_back() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let srv = tokio::spawn(async move { drop(listener.accept().await.unwrap()) });
    let (sender, ended) = connect_told(port).await;
    srv.await.unwrap();
    assert_eq!(
        ended.await.unwrap(),
        ConnEnd::Closed,
        "its server closed it"
    );
    let (sink, mut rx) = sink();
    let Err(queued) = sender.start(get("/"), Arc::new(Control::default()), sink) else {
        panic!("an ended connection's task takes no exchange")
    };
    queued.start().await;
    assert!(matches!(rx.recv().await, Some(Event::Unsent(_))));
    assert!(matches!(rx.recv().await, Some(Event::Done(None))));
}

/// A connection its server resets ended failed (the pool counts it as a socket error); one
/// its server closes ended closed (see `an_exchange_for_an_ended_connection_comes_back`).
#[tokio::test]
async fn a_connection_its_server_resets_ends_failed() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let srv = tokio::spawn(async move {
        let (sock, _) = listener.accept().await.unwrap();
        // Closed with a reset: no linger.
        socket2::SockRef::from(&sock)
            .set_linger(Some(Duration::ZERO))
            .unwrap();
        drop(sock);
    });
    let (_sender, ended) = connect_told(port).await;
    srv.await.unwrap();
    let end = tokio::time::timeout(Duration::from_secs(10), ended)
        .await
        .expect("hyper's side ends with the reset")
        .unwrap();
    assert_eq!(end, ConnEnd::Failed);
}

/// hyper's side ending while the exchange in its task still runs (the server gone in the
/// middle of a body) leaves the exchange to end as it would in a task of its own.
#[tokio::test]
async fn an_exchange_in_its_connections_task_outlives_the_connection() {
    let (port, srv) = server(vec![
        b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial",
    ])
    .await;
    let (sender, ended) = connect_told(port).await;
    let (sink, mut rx) = sink();
    let ctl = Arc::new(Control::default());
    start(Way::InConnection, sender, get("/"), ctl.clone(), sink);
    assert!(matches!(rx.recv().await, Some(Event::Head { .. })));
    srv.abort();
    // No credit yet: the exchange waits for its consumer while the connection ends.
    tokio::time::timeout(Duration::from_secs(10), ended)
        .await
        .expect("hyper's side ends with the server gone")
        .unwrap();
    ctl.grant();
    let err = next_error(&mut rx).await;
    assert_eq!(
        (err.code(), err.message().as_str()),
        ("ECONNRESET", "aborted")
    );
    assert!(matches!(rx.recv().await, Some(Event::Done(None))));
}

/// An HTTP/2 server on loopback: answers each request with `hello <path>` while `serving`;
/// otherwise it takes the handshake and then reads nothing more (a peer that died quietly).
async fn h2_server(serving: bool) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        let (sock, _) = listener.accept().await.unwrap();
        let mut conn = h2::server::handshake(sock).await.unwrap();
        if !serving {
            // Held, never polled again: no PING is answered.
            let _held = conn;
            return std::future::pending::<()>().await;
        }
        while let Some(Ok((req, mut respond))) = conn.accept().await {
            let body = format!("hello {}", req.uri().path());
            let mut stream = respond
                .send_response(http::Response::new(()), false)
                .unwrap();
            stream.send_data(Bytes::from(body), true).unwrap();
        }
    });
    port
}

/// PINGs after 100 ms of quiet, answered within 200 ms.
const QUICK_PING: Ping = Ping {
    after: Duration::from_millis(100),
    timeout: Duration::from_millis(200),
};

async fn h2_connect(port: u16) -> (Sender, tokio::sync::oneshot::Receiver<ConnEnd>) {
    let tcp = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let (sender, connection) = handshake_h2(tcp, 16 * 1024, false, QUICK_PING)
        .await
        .unwrap();
    let (closed_tx, closed) = tokio::sync::oneshot::channel();
    connection.spawn(move |end| {
        let _ = closed_tx.send(end);
    });
    (sender, closed)
}

#[tokio::test]
async fn http2_streams_run_at_once_on_one_connection() {
    let port = h2_server(true).await;
    let (sender, _closed) = h2_connect(port).await;
    assert!(sender.is_multiplexed());
    let mut receivers = Vec::new();
    for i in 0..5 {
        let (sink, rx) = sink();
        let stream = sender.stream().expect("a stream of an HTTP/2 connection");
        tokio::spawn(exchange(
            stream,
            get(&format!("/{i}")),
            Arc::new(Control::default()),
            sink,
        ));
        receivers.push(rx);
    }
    for (i, mut rx) in receivers.into_iter().enumerate() {
        let Some(Event::Head { status, chunks, .. }) = rx.recv().await else {
            panic!("no head");
        };
        assert_eq!(status, 200);
        let mut body = chunks.concat();
        while let Some(event) = rx.recv().await {
            match event {
                Event::Data(more) => body.extend(more.concat()),
                Event::End(_) | Event::Done(_) => {}
                other => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(body, format!("hello /{i}").as_bytes());
    }
    assert!(!sender.is_closed());
}

/// Until an HTTP/2 server's settings come, a connection carries the protocol's assumed limit
/// on streams and says its server has said none; once they came, it says what the server said,
/// and a server that names no limit has none.
#[tokio::test]
async fn an_http2_connection_says_its_servers_limit_on_streams_once_its_settings_came() {
    for (limit, said) in [(Some(3u32), 3usize), (None, usize::MAX)] {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let (go_tx, go) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            let (sock, _) = listener.accept().await.unwrap();
            // Nothing is sent until the client has looked.
            go.await.unwrap();
            let mut builder = h2::server::Builder::new();
            if let Some(n) = limit {
                builder.max_concurrent_streams(n);
            }
            let mut conn = builder.handshake(sock).await.unwrap();
            while let Some(Ok((_, mut respond))) = conn.accept().await {
                let mut stream = respond
                    .send_response(http::Response::new(()), false)
                    .unwrap();
                stream.send_data(Bytes::from_static(b"ok"), true).unwrap();
            }
        });
        let (sender, _closed) = h2_connect(port).await;
        assert_eq!(sender.max_streams(), 100);
        assert_eq!(sender.said_max_streams(), None);
        go_tx.send(()).unwrap();
        // A response comes after the server's settings, which the connection applied first.
        let (sink, mut rx) = sink();
        let stream = sender.stream().expect("a stream of an HTTP/2 connection");
        tokio::spawn(exchange(
            stream,
            get("/"),
            Arc::new(Control::default()),
            sink,
        ));
        assert!(matches!(
            rx.recv().await,
            Some(Event::Head { status: 200, .. })
        ));
        while rx.recv().await.is_some() {}
        // Read in the connection's task, which the read of the settings woke: a few turns
        // of this thread at most (no request polls it meanwhile).
        for _ in 0..100 {
            if sender.said_max_streams().is_some() {
                break;
            }
            tokio::task::yield_now().await;
        }
        assert_eq!(sender.said_max_streams(), Some(said));
        assert_eq!(sender.max_streams(), said);
    }
}

/// A quiet connection is asked for a PING: one whose peer answers stays open, one whose peer
/// died quietly closes once the answer is late.
#[tokio::test]
async fn a_quiet_http2_connection_that_does_not_answer_a_ping_closes() {
    let (alive, mut alive_closed) = h2_connect(h2_server(true).await).await;
    let (dead, dead_closed) = h2_connect(h2_server(false).await).await;
    // Bounded: the silent one is found within a PING's wait and its timeout (300 ms).
    let end = tokio::time::timeout(Duration::from_secs(10), dead_closed)
        .await
        .expect("the silent connection closed")
        .unwrap();
    assert_eq!(end, ConnEnd::TimedOut, "the pool counts it as a timeout");
    assert!(dead.is_closed());
    // By then the answering one has been asked (and answered) at least once.
    assert!(alive_closed.try_recv().is_err());
    assert!(!alive.is_closed());
}

#[test]
fn a_headers_timeout_over_a_second_is_taken_out_of_the_exchange_and_a_shorter_one_stays() {
    let mut spec = get("/");
    spec.headers_timeout = Some(Duration::from_secs(300));
    assert_eq!(
        spec.take_coarse_headers_timeout(),
        Some(Duration::from_secs(300))
    );
    assert_eq!(spec.headers_timeout, None);
    for short in [COARSE_TIMEOUT, Duration::from_millis(50)] {
        spec.headers_timeout = Some(short);
        assert_eq!(spec.take_coarse_headers_timeout(), None);
        assert_eq!(spec.headers_timeout, Some(short), "{short:?} stays exact");
    }
    spec.headers_timeout = None;
    assert_eq!(spec.take_coarse_headers_timeout(), None);
}

/// An HTTP/2 connection given up while a request's body waits for the server's window (a
/// server that answered and reads none of the upload: `agent.destroy()`, a Worker's end)
/// closes: hyper's task that sends the body, waiting for the window, held it open for ever.
#[tokio::test]
async fn an_http2_connection_given_up_with_an_upload_waiting_for_its_window_closes() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (shut_tx, shut) = tokio::sync::oneshot::channel::<usize>();
    let (ended_tx, ended) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        let (sock, _) = listener.accept().await.unwrap();
        let mut conn = h2::server::handshake(sock).await.unwrap();
        let (req, mut respond) = conn.accept().await.unwrap().unwrap();
        // Kept, never released: the stream's window shuts once the first 64 KiB are in.
        let _responding = respond
            .send_response(http::Response::new(()), false)
            .unwrap();
        let mut body = req.into_body();
        let serve = async move {
            let mut received = 0;
            let mut shut_tx = Some(shut_tx);
            loop {
                tokio::select! {
                    data = body.data(), if shut_tx.is_some() => {
                        received += data.unwrap().unwrap().len();
                        if received >= 65_535 {
                            let _ = shut_tx.take().unwrap().send(received);
                        }
                    }
                    // The connection's end (a GOAWAY and a close, or an error).
                    more = conn.accept() => {
                        if !matches!(more, Some(Ok(_))) {
                            return;
                        }
                    }
                }
            }
        };
        serve.await;
        let _ = ended_tx.send(());
    });
    let tcp = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let (sender, connection) = handshake_h2(tcp, 16 * 1024, false, Ping::default())
        .await
        .unwrap();
    connection.spawn(|_| {});
    let (spec, writer, drained) = streamed_post(1 << 30, Duration::from_secs(300));
    let (sink, mut rx) = sink();
    let stream = sender.stream().expect("a stream of an HTTP/2 connection");
    let task = tokio::spawn(exchange(stream, spec, Arc::new(Control::default()), sink));
    // The body is written as fast as the connection takes it.
    tokio::spawn(async move {
        loop {
            match writer.write(Bytes::from(vec![7u8; 16 * 1024])) {
                WriteResult::Ready => {}
                WriteResult::Full => drained.notified().await,
                WriteResult::Closed => return,
            }
        }
    });
    assert!(matches!(
        rx.recv().await,
        Some(Event::Head { status: 200, .. })
    ));
    let received = tokio::time::timeout(Duration::from_secs(10), shut)
        .await
        .expect("the window to shut")
        .unwrap();
    assert!(received < 1 << 20, "{received} bytes went past the window");
    // As the pool gives up a session (`agent.destroy()`): the connection, and its exchanges.
    sender.stopper().stop();
    task.abort();
    tokio::time::timeout(Duration::from_secs(10), ended)
        .await
        .expect("the connection must close once given up")
        .unwrap();
}

/// A streamed body whose writer goes without the source's end (its request aborted, or its
/// exchange over) fails rather than ends: a clean end would hand an HTTP/2 server a cut body as
/// whole, where the error resets the stream.
#[tokio::test]
async fn a_streamed_body_given_up_before_its_end_fails_and_one_ended_ends() {
    for ended in [false, true] {
        let (mut body, mut writer) = channel_body(Vec::new(), None, || {});
        assert_eq!(writer.write(Bytes::from_static(b"ab")), WriteResult::Ready);
        if ended {
            writer.end();
        }
        drop(writer);
        let first = body.frame().await.unwrap().unwrap();
        assert_eq!(first.into_data().unwrap(), Bytes::from_static(b"ab"));
        let last = body.frame().await;
        if ended {
            assert!(last.is_none(), "an ended body ends");
        } else {
            assert!(matches!(last, Some(Err(_))), "a body given up fails");
        }
    }
}
