//! The HTTP/1.1 and HTTP/2 server that `npm run bench` measures its clients against.
//!
//! It runs in its own process, on one thread (a tokio current-thread runtime pinned to its own
//! core by the runner), and does as little as it can per request so that the clients are what is
//! measured: bodies are preallocated and shared, nothing is logged.
//!
//! Usage: `hyperagent-bench-server [--close] [--tls <cert.pem> <key.pem>]`. It listens on
//! 127.0.0.1 on a port the system picks and prints that port on stdout as one line. With
//! `--close` every response carries `Connection: close` (and the server closes each connection
//! after one response). With `--tls` it speaks HTTPS (TLS 1.3 or 1.2, rustls) with that
//! certificate chain and private key; there it speaks HTTP/2 to a client that chooses `h2` in
//! ALPN (it offers `h2` and `http/1.1`; with `--close`, only `http/1.1`), and HTTP/1.1 to every
//! other client (one that offers no ALPN, or only `http/1.1`). An HTTP/2 connection takes up to
//! 1,000 concurrent streams, so that one connection carries the bench's 500 requests in flight.
//! It exits when its standard input closes, so it never outlives the runner that started it.
//!
//! Endpoints:
//! - `GET /hello`: `Hello World\n` (12 bytes)
//! - `GET /64k`, `GET /1m`: bodies of 65,536 and 1,048,576 bytes
//! - `POST /echo-length`: reads the whole request body and answers its length in decimal
//! - `GET /delay/<ms>`: `Hello World\n` after `ms` milliseconds (at most a minute)
//! - `GET /hold/<n>`: holds every such request until `n` of them are held, then answers them
//!   all at once (`Hello World\n`); this makes a client open `n` connections. A request held
//!   longer than a minute gets `503` instead, so a client that cannot open them all fails
//!   rather than hangs.
//! - `GET /park`: held until a `GET /unpark` (which answers how many it released), then
//!   `Hello World\n`; `503` after a minute. This keeps requests (HTTP/2 streams) open for as
//!   long as a client needs to measure them.
//! - `GET /version`: the request's HTTP version, `HTTP/1.1` or `HTTP/2.0`.
//! - `GET /stats`: `{"accepted":A,"open":O,"requests":R,"h2":H,"parked":P}`, connections
//!   accepted since start, connections open now, requests answered, connections accepted since
//!   start that speak HTTP/2, and requests held by `/park` now.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONNECTION, CONTENT_TYPE};
use hyper::server::conn::{http1, http2};
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode, Version};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::AsyncReadExt;
use tokio::net::TcpSocket;
use tokio::sync::oneshot;
use tokio_rustls::TlsAcceptor;

const HELLO: &[u8] = b"Hello World\n";
/// Longest `/delay/<ms>` and longest a `/hold/<n>` request waits.
const MAX_WAIT: Duration = Duration::from_secs(60);
/// Pending connections the kernel queues for us: enough for a client opening thousands at once.
const BACKLOG: u32 = 8192;
/// Concurrent streams an HTTP/2 connection takes (hyper's default is 200): the bench's 500
/// requests in flight fit on one connection.
const MAX_STREAMS: u32 = 1000;

struct State {
    close: bool,
    hello: Bytes,
    body_64k: Bytes,
    body_1m: Bytes,
    accepted: AtomicU64,
    open: AtomicU64,
    requests: AtomicU64,
    /// Connections accepted that speak HTTP/2.
    h2: AtomicU64,
    /// Requests held by `/hold/<n>`, by `n`.
    held: Mutex<HashMap<u64, Vec<oneshot::Sender<()>>>>,
    /// Requests held by `/park` until `/unpark`.
    parked: Mutex<Vec<oneshot::Sender<()>>>,
}

const USAGE: &str = "usage: hyperagent-bench-server [--close] [--tls <cert.pem> <key.pem>]";

fn main() {
    let mut close = false;
    let mut tls = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--close" => close = true,
            "--tls" => match (args.next(), args.next()) {
                (Some(cert), Some(key)) => tls = Some((cert, key)),
                _ => usage_error("--tls takes a certificate file and a key file"),
            },
            other => usage_error(&format!("unknown argument {other:?}")),
        }
    }
    let acceptor = tls.map(|(cert, key)| match tls_acceptor(&cert, &key, !close) {
        Ok(acceptor) => acceptor,
        Err(err) => {
            eprintln!("bench server: cannot load {cert} and {key}: {err}");
            std::process::exit(2);
        }
    });
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("cannot start the tokio runtime");
    if let Err(err) = runtime.block_on(serve(close, acceptor)) {
        eprintln!("bench server: {err}");
        std::process::exit(1);
    }
}

fn usage_error(problem: &str) -> ! {
    eprintln!("{problem}; {USAGE}");
    std::process::exit(2);
}

/// A TLS acceptor for the certificate chain in `cert` and the private key in `key` (PEM),
/// offering `h2` in ALPN ahead of `http/1.1` when `h2`.
fn tls_acceptor(
    cert: &str,
    key: &str,
    h2: bool,
) -> Result<TlsAcceptor, Box<dyn std::error::Error>> {
    let chain = CertificateDer::pem_file_iter(cert)?.collect::<Result<Vec<_>, _>>()?;
    let key = PrivateKeyDer::from_pem_file(key)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(chain, key)?;
    config.alpn_protocols = if h2 {
        vec![b"h2".to_vec(), b"http/1.1".to_vec()]
    } else {
        vec![b"http/1.1".to_vec()]
    };
    Ok(TlsAcceptor::from(Arc::new(config)))
}

async fn serve(close: bool, tls: Option<TlsAcceptor>) -> std::io::Result<()> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(SocketAddr::from(([127, 0, 0, 1], 0)))?;
    let listener = socket.listen(BACKLOG)?;
    println!("{}", listener.local_addr()?.port());

    // The runner keeps our stdin open for as long as it wants us; end of file means it is gone.
    tokio::spawn(async {
        let mut stdin = tokio::io::stdin();
        let mut buf = [0u8; 64];
        while matches!(stdin.read(&mut buf).await, Ok(n) if n > 0) {}
        std::process::exit(0);
    });

    let state = Arc::new(State {
        close,
        hello: Bytes::from_static(HELLO),
        body_64k: Bytes::from(vec![b'x'; 64 * 1024]),
        body_1m: Bytes::from(vec![b'x'; 1024 * 1024]),
        accepted: AtomicU64::new(0),
        open: AtomicU64::new(0),
        requests: AtomicU64::new(0),
        h2: AtomicU64::new(0),
        held: Mutex::new(HashMap::new()),
        parked: Mutex::new(Vec::new()),
    });
    let mut builder = http1::Builder::new();
    builder.keep_alive(!close);
    let mut h2_builder = http2::Builder::new(TokioExecutor::new());
    h2_builder.max_concurrent_streams(MAX_STREAMS);

    loop {
        let (stream, _) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(err) => {
                // Out of descriptors or a connection reset before we took it: back off a
                // little so a full descriptor table does not spin this loop, then go on.
                eprintln!("bench server: accept failed: {err}");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        state.accepted.fetch_add(1, Ordering::Relaxed);
        state.open.fetch_add(1, Ordering::Relaxed);
        let state = state.clone();
        let builder = builder.clone();
        let h2_builder = h2_builder.clone();
        let tls = tls.clone();
        tokio::spawn(async move {
            let service = service_fn({
                let state = state.clone();
                move |req| handle(state.clone(), req)
            });
            // A client that resets its connection, or fails its handshake, is not an error
            // worth reporting here.
            match tls {
                None => {
                    let _ = builder
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                }
                Some(tls) => {
                    if let Ok(stream) = tls.accept(stream).await {
                        // HTTP/2 only for a client that chose it in ALPN.
                        if stream.get_ref().1.alpn_protocol() == Some(b"h2") {
                            state.h2.fetch_add(1, Ordering::Relaxed);
                            let _ = h2_builder
                                .serve_connection(TokioIo::new(stream), service)
                                .await;
                        } else {
                            let _ = builder
                                .serve_connection(TokioIo::new(stream), service)
                                .await;
                        }
                    }
                }
            }
            state.open.fetch_sub(1, Ordering::Relaxed);
        });
    }
}

async fn handle(
    state: Arc<State>,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let http1 = req.version() != Version::HTTP_2;
    let path = req.uri().path();
    let mut res = match (req.method(), path) {
        (&Method::GET, "/hello") => Response::new(Full::new(state.hello.clone())),
        (&Method::GET, "/64k") => Response::new(Full::new(state.body_64k.clone())),
        (&Method::GET, "/1m") => Response::new(Full::new(state.body_1m.clone())),
        (&Method::POST, "/echo-length") => {
            let mut body = req.into_body();
            let mut length: u64 = 0;
            let mut failed = false;
            while let Some(frame) = body.frame().await {
                match frame {
                    Ok(frame) => {
                        if let Some(data) = frame.data_ref() {
                            length += data.len() as u64;
                        }
                    }
                    Err(_) => {
                        failed = true;
                        break;
                    }
                }
            }
            if failed {
                status(StatusCode::BAD_REQUEST, "request body failed")
            } else {
                Response::new(Full::new(Bytes::from(length.to_string())))
            }
        }
        (&Method::GET, "/version") => {
            Response::new(Full::new(Bytes::from(format!("{:?}", req.version()))))
        }
        (&Method::GET, "/park") => park(&state).await,
        (&Method::GET, "/unpark") => {
            let parked = std::mem::take(&mut *state.parked.lock().unwrap());
            let mut released = 0u64;
            for tx in parked {
                released += u64::from(tx.send(()).is_ok());
            }
            Response::new(Full::new(Bytes::from(released.to_string())))
        }
        (&Method::GET, "/stats") => {
            let parked = {
                let mut parked = state.parked.lock().unwrap();
                // Requests given up (their stream or connection closed) no longer count.
                parked.retain(|tx| !tx.is_closed());
                parked.len()
            };
            let stats = format!(
                "{{\"accepted\":{},\"open\":{},\"requests\":{},\"h2\":{},\"parked\":{}}}",
                state.accepted.load(Ordering::Relaxed),
                state.open.load(Ordering::Relaxed),
                state.requests.load(Ordering::Relaxed),
                state.h2.load(Ordering::Relaxed),
                parked,
            );
            let mut res = Response::new(Full::new(Bytes::from(stats)));
            res.headers_mut()
                .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
            res
        }
        (&Method::GET, p) if p.starts_with("/delay/") => {
            match p["/delay/".len()..].parse::<u64>() {
                Ok(ms) => {
                    tokio::time::sleep(Duration::from_millis(ms).min(MAX_WAIT)).await;
                    Response::new(Full::new(state.hello.clone()))
                }
                Err(_) => status(StatusCode::BAD_REQUEST, "bad delay"),
            }
        }
        (&Method::GET, p) if p.starts_with("/hold/") => match p["/hold/".len()..].parse::<u64>() {
            Ok(n) if n > 0 => hold(&state, n).await,
            _ => status(StatusCode::BAD_REQUEST, "bad hold count"),
        },
        _ => status(StatusCode::NOT_FOUND, "not found"),
    };
    // HTTP/2 has no `Connection` header (and `--close` offers only HTTP/1.1).
    if state.close && http1 {
        res.headers_mut()
            .insert(CONNECTION, HeaderValue::from_static("close"));
    }
    state.requests.fetch_add(1, Ordering::Relaxed);
    Ok(res)
}

/// Waits until `n` requests wait here, then lets them all answer.
async fn hold(state: &State, n: u64) -> Response<Full<Bytes>> {
    let (tx, rx) = oneshot::channel();
    {
        let mut held = state.held.lock().unwrap();
        let waiting = held.entry(n).or_default();
        waiting.push(tx);
        if waiting.len() as u64 >= n {
            for tx in held.remove(&n).unwrap_or_default() {
                let _ = tx.send(());
            }
        }
    }
    match tokio::time::timeout(MAX_WAIT, rx).await {
        Ok(Ok(())) => Response::new(Full::new(state.hello.clone())),
        _ => status(StatusCode::SERVICE_UNAVAILABLE, "hold timed out"),
    }
}

/// Waits until `/unpark` lets it answer.
async fn park(state: &State) -> Response<Full<Bytes>> {
    let (tx, rx) = oneshot::channel();
    state.parked.lock().unwrap().push(tx);
    match tokio::time::timeout(MAX_WAIT, rx).await {
        Ok(Ok(())) => Response::new(Full::new(state.hello.clone())),
        _ => status(StatusCode::SERVICE_UNAVAILABLE, "park timed out"),
    }
}

fn status(code: StatusCode, text: &'static str) -> Response<Full<Bytes>> {
    let mut res = Response::new(Full::new(Bytes::from_static(text.as_bytes())));
    *res.status_mut() = code;
    res
}
