//! Opening connections for hyper against servers on loopback: HTTP/1.1, HTTP/2 by ALPN and by
//! prior knowledge, the user's lookup, and which error a timeout gives at each step; a new
//! connection's check of the server's name before its first exchange.

use std::sync::{Arc, Mutex};

use rustls::ServerConfig;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

use super::*;
use crate::client::tests::{get, sink};
use crate::client::Event;
use crate::transport::tls::tests::{chain, key, options};
use crate::transport::Tunnel;

type Lookup = std::future::Ready<Result<Vec<IpAddr>, Error>>;

fn tcp(host: &str, port: u16) -> Target {
    Target::tcp(host, port)
}

fn through_proxy(proxy_port: u16) -> Target {
    let mut target = tcp("127.0.0.1", proxy_port);
    if let Target::Tcp { tunnel, .. } = &mut target {
        *tunnel = Some(Tunnel {
            request: "CONNECT localhost:443 HTTP/1.1\r\nhost: localhost:443\r\n\r\n".into(),
            refused: "Failed to establish tunnel".into(),
        });
    }
    target
}

fn to(target: Target, secure: Option<Secure<'_>>, http2: bool) -> Open<'_> {
    Open {
        target,
        opts: ConnectOptions::default(),
        secure,
        http2,
        max_header_size: 16 * 1024,
        timeout: Some(Duration::from_secs(10)),
    }
}

fn secure(config: &TlsConfig) -> Secure<'_> {
    Secure {
        config,
        servername: Some("localhost"),
        node_name_check: true,
        keylog: Arc::new(AtomicBool::new(false)),
        offer_h2: false,
    }
}

async fn listen() -> (TcpListener, u16) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    (listener, port)
}

/// Accepts connections and holds them, saying nothing.
async fn silent() -> (u16, JoinHandle<()>) {
    let (listener, port) = listen().await;
    let task = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((sock, _)) = listener.accept().await {
            held.push(sock);
        }
    });
    (port, task)
}

/// Serves HTTP/2 on `io` until its client goes.
async fn serve_h2<IO>(io: IO)
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    if let Ok(mut conn) = h2::server::handshake(io).await {
        while let Some(Ok(_)) = conn.accept().await {}
    }
}

/// HTTP/2 by prior knowledge (h2c).
async fn h2c_server() -> (u16, JoinHandle<()>) {
    let (listener, port) = listen().await;
    let task = tokio::spawn(async move {
        while let Ok((sock, _)) = listener.accept().await {
            tokio::spawn(serve_h2(sock));
        }
    });
    (port, task)
}

/// TLS with the fixture certificate for `localhost`, choosing among `alpn`; HTTP/2 when it
/// chose `h2`, otherwise a connection held open.
async fn tls_server(alpn: &[&[u8]]) -> (u16, JoinHandle<()>) {
    let mut config = ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(chain("localhost-chain.pem"), key("localhost-key.pem"))
        .unwrap();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    let acceptor = TlsAcceptor::from(Arc::new(config));
    let (listener, port) = listen().await;
    let task = tokio::spawn(async move {
        while let Ok((sock, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(sock).await else {
                    return;
                };
                if tls.get_ref().1.alpn_protocol() == Some(b"h2") {
                    serve_h2(tls).await;
                } else {
                    let _ = tls.read(&mut [0u8; 1024]).await;
                }
            });
        }
    });
    (port, task)
}

#[tokio::test]
async fn http1_unless_http2_may_be_spoken_and_then_by_prior_knowledge() {
    let (port, server) = silent().await;
    let opened = open(
        to(tcp("127.0.0.1", port), None, false),
        None::<Lookup>,
        |_| {},
    )
    .await
    .unwrap();
    assert!(!opened.sender.is_multiplexed());
    assert!(opened.tls.is_none());
    assert!(opened.local.is_some());
    assert!(matches!(opened.remote, Peer::Tcp(a) if a.port() == port));
    server.abort();

    let (port, server) = h2c_server().await;
    let opened = open(
        to(tcp("127.0.0.1", port), None, true),
        None::<Lookup>,
        |_| {},
    )
    .await
    .unwrap();
    assert!(opened.sender.is_multiplexed());
    server.abort();
}

#[tokio::test]
async fn over_tls_http2_only_when_offered_and_chosen_in_alpn() {
    let config = TlsConfig::new(&options(&["ca.pem"])).unwrap();
    let (port, server) = tls_server(&[b"h2", b"http/1.1"]).await;
    let target = || tcp("127.0.0.1", port);
    let opened = open(
        to(target(), Some(secure(&config)), true),
        None::<Lookup>,
        |_| {},
    )
    .await
    .unwrap();
    assert!(opened.sender.is_multiplexed());
    assert_eq!(opened.tls.unwrap().alpn.as_deref(), Some(&b"h2"[..]));
    // Not offered: the server chooses nothing, HTTP/1.1 is spoken.
    let opened = open(
        to(target(), Some(secure(&config)), false),
        None::<Lookup>,
        |_| {},
    )
    .await
    .unwrap();
    assert!(!opened.sender.is_multiplexed());
    assert_eq!(opened.tls.unwrap().alpn, None);
    server.abort();

    // Offered, but the server takes HTTP/1.1.
    let (port, server) = tls_server(&[b"http/1.1"]).await;
    let opened = open(
        to(tcp("127.0.0.1", port), Some(secure(&config)), true),
        None::<Lookup>,
        |_| {},
    )
    .await
    .unwrap();
    assert!(!opened.sender.is_multiplexed());
    assert_eq!(opened.tls.unwrap().alpn.as_deref(), Some(&b"http/1.1"[..]));
    server.abort();
}

#[tokio::test]
async fn a_lookup_gives_the_addresses_and_its_failure_is_the_opens() {
    let (port, server) = silent().await;
    let loopback = async { Ok(vec![IpAddr::from([127, 0, 0, 1])]) };
    // A name no resolver knows: only the lookup's answer can reach the server.
    let opened = open(
        to(tcp("nowhere.invalid", port), None, false),
        Some(loopback),
        |_| {},
    )
    .await
    .unwrap();
    assert!(matches!(opened.remote, Peer::Tcp(a) if a.port() == port && a.ip().is_loopback()));

    let refused = async { Err(Error::tls("ENOTFOUND", "getaddrinfo ENOTFOUND nowhere")) };
    let err = open(
        to(tcp("nowhere.invalid", port), None, false),
        Some(refused),
        |_| {},
    )
    .await
    .err()
    .expect("the lookup's error");
    assert_eq!(err.code(), "ENOTFOUND");
    server.abort();
}

#[tokio::test]
async fn a_timeout_fails_as_a_socket_timeout_or_before_a_tunnel_opens_as_the_proxys() {
    let limit = Duration::from_millis(100);
    let within = |target, secure| Open {
        timeout: Some(limit),
        ..to(target, secure, false)
    };
    let timed_out = |result: Result<Opened, Error>, code: &str| {
        let err = result.err().expect("a timeout");
        assert_eq!(err.code(), code);
        assert!(err.timed_out());
    };
    let config = TlsConfig::new(&options(&["ca.pem"])).unwrap();

    // A lookup that never answers: the timeout bounds it too.
    let (port, server) = silent().await;
    let never = std::future::pending::<Result<Vec<IpAddr>, Error>>();
    let result = open(
        within(tcp("nowhere.invalid", port), None),
        Some(never),
        |_| {},
    )
    .await;
    timed_out(result, "ERR_SOCKET_TIMEOUT");

    // Connected, the TLS handshake never answered.
    let result = open(
        within(tcp("127.0.0.1", port), Some(secure(&config))),
        None::<Lookup>,
        |_| {},
    )
    .await;
    timed_out(result, "ERR_SOCKET_TIMEOUT");

    // A proxy that never answers the tunnel's CONNECT.
    let result = open(within(through_proxy(port), None), None::<Lookup>, |_| {}).await;
    timed_out(result, "ERR_PROXY_TUNNEL");
    server.abort();

    // A proxy that opens the tunnel to a peer that never answers the handshake.
    let (listener, proxy) = listen().await;
    let server = tokio::spawn(async move {
        let (mut sock, _) = listener.accept().await.unwrap();
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") && sock.read(&mut byte).await.unwrap_or(0) == 1 {
            head.push(byte[0]);
        }
        sock.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
            .await
            .unwrap();
        let _ = sock.read(&mut [0u8; 1024]).await;
        let _ = sock.read(&mut [0u8; 1024]).await;
    });
    let result = open(
        within(through_proxy(proxy), Some(secure(&config))),
        None::<Lookup>,
        |_| {},
    )
    .await;
    timed_out(result, "ERR_SOCKET_TIMEOUT");
    server.abort();
}

/// What a connection told its asker.
enum Heard {
    Opened(Result<Facts, Error>),
    Closed,
}

struct Ear(Mutex<UnboundedSender<Heard>>);

impl Progress for Ear {
    fn opened(&self, result: Result<Facts, Error>) {
        let _ = self.0.lock().unwrap().send(Heard::Opened(result));
    }

    fn closed(&self, _end: crate::pool::ConnEnd) {
        let _ = self.0.lock().unwrap().send(Heard::Closed);
    }
}

fn ear() -> (Arc<dyn Progress>, UnboundedReceiver<Heard>) {
    let (tx, rx) = unbounded_channel();
    (Arc::new(Ear(Mutex::new(tx))), rx)
}

/// TLS with the fixture certificate for `localhost`, HTTP/1.1: on each connection, reads a
/// request head and answers it, closing the connection after. What each connection read
/// before its head ended (or its client went) comes out of the receiver.
async fn tls_http1_server() -> (u16, UnboundedReceiver<Vec<u8>>, JoinHandle<()>) {
    let config = ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(chain("localhost-chain.pem"), key("localhost-key.pem"))
        .unwrap();
    let acceptor = TlsAcceptor::from(Arc::new(config));
    let (listener, port) = listen().await;
    let (tx, rx) = unbounded_channel();
    let task = tokio::spawn(async move {
        while let Ok((sock, _)) = listener.accept().await {
            let (acceptor, tx) = (acceptor.clone(), tx.clone());
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(sock).await else {
                    return;
                };
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.ends_with(b"\r\n\r\n") {
                    match tls.read(&mut buf).await {
                        Ok(n) if n > 0 => head.extend_from_slice(&buf[..n]),
                        _ => break,
                    }
                }
                let whole = head.ends_with(b"\r\n\r\n");
                let _ = tx.send(head);
                if whole {
                    let reply =
                        b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok";
                    let _ = tls.write_all(reply).await;
                    let _ = tls.shutdown().await;
                }
            });
        }
    });
    (port, rx, task)
}

/// Runs [`open_and_exchange`] for `GET /` to `port` on tokio: what the exchange posts and
/// what the connection tells come out of the receivers.
fn open_for_get(
    port: u16,
    config: Option<Arc<TlsConfig>>,
) -> (
    UnboundedReceiver<Event>,
    UnboundedReceiver<Heard>,
    JoinHandle<()>,
) {
    let (sink, events) = sink();
    let (progress, heard) = ear();
    let task = tokio::spawn(async move {
        let target = tcp("127.0.0.1", port);
        let to = to(target, config.as_deref().map(secure), false);
        let ctl = Arc::new(Control::default());
        open_and_exchange(to, None::<Lookup>, |_| {}, get("/"), ctl, sink, progress).await;
    });
    (events, heard, task)
}

async fn opened(heard: &mut UnboundedReceiver<Heard>) -> Result<Facts, Error> {
    match heard.recv().await {
        Some(Heard::Opened(result)) => result,
        Some(Heard::Closed) => panic!("closed before it opened"),
        None => panic!("nothing told"),
    }
}

async fn status(events: &mut UnboundedReceiver<Event>) -> u16 {
    match events.recv().await {
        Some(Event::Head { status, .. }) => status,
        other => panic!("not a head: {other:?}"),
    }
}

#[tokio::test]
async fn a_new_tls_session_waits_for_its_servers_name_and_one_refused_sends_nothing() {
    let config = Arc::new(TlsConfig::new(&options(&["ca.pem"])).unwrap());
    let (port, mut read, server) = tls_http1_server().await;

    // The name is answered right: the exchange runs, then the connection's end is told.
    let (mut events, mut heard, task) = open_for_get(port, Some(config.clone()));
    let facts = opened(&mut heard).await.unwrap();
    assert!(facts.tls.is_some());
    assert!(facts.session.is_none());
    let verify = facts.verify.expect("a new session's name to check");
    verify.send(()).unwrap();
    assert_eq!(status(&mut events).await, 200);
    assert!(read
        .recv()
        .await
        .unwrap()
        .starts_with(b"GET / HTTP/1.1\r\n"));
    assert!(matches!(heard.recv().await, Some(Heard::Closed)));
    task.await.unwrap();

    // Left unanswered (the name was wrong): the connection closes with nothing of HTTP
    // written, and the exchange posts nothing.
    let (mut events, mut heard, task) = open_for_get(port, Some(config.clone()));
    let facts = opened(&mut heard).await.unwrap();
    assert!(facts.verify.is_some());
    drop(facts);
    task.await.unwrap();
    assert_eq!(read.recv().await.unwrap(), b"");
    assert!(events.recv().await.is_none());
    assert!(heard.recv().await.is_none());
    server.abort();
}

#[tokio::test]
async fn without_tls_the_exchange_runs_at_once_and_a_failed_open_runs_none() {
    let (listener, port) = listen().await;
    let server = tokio::spawn(async move {
        let (mut sock, _) = listener.accept().await.unwrap();
        let mut head = Vec::new();
        let mut buf = [0u8; 1024];
        while !head.ends_with(b"\r\n\r\n") {
            let n = sock.read(&mut buf).await.unwrap();
            assert!(n > 0, "the request head");
            head.extend_from_slice(&buf[..n]);
        }
        sock.write_all(b"HTTP/1.1 204 No Content\r\nconnection: close\r\n\r\n")
            .await
            .unwrap();
    });
    let (mut events, mut heard, task) = open_for_get(port, None);
    let facts = opened(&mut heard).await.unwrap();
    assert!(facts.tls.is_none() && facts.verify.is_none());
    assert_eq!(status(&mut events).await, 204);
    assert!(matches!(heard.recv().await, Some(Heard::Closed)));
    task.await.unwrap();
    server.await.unwrap();

    // Nobody listens there now.
    let (mut events, mut heard, task) = open_for_get(port, None);
    let err = opened(&mut heard).await.err().expect("a refused connect");
    assert_eq!(err.code(), "ECONNREFUSED");
    task.await.unwrap();
    assert!(events.recv().await.is_none());
}
