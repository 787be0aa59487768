//! How the drop-in path carries a new connection's bytes: the one establishing pipeline
//! ([`establish`]), then a plain TCP or Unix socket is handed over as its descriptor, for the
//! JavaScript thread's loop to drive with no hop to tokio; a TLS session, or any connection
//! through a proxy reached over TLS, stays on tokio and is pumped ([`pump`]) to a sink. On
//! Windows every connection is pumped, a plain one too (see [`open`]).

use std::net::{IpAddr, SocketAddr};
#[cfg(unix)]
use std::os::fd::OwnedFd;
use std::sync::Arc;

use super::establish::{establish, Deadline, Established, Secure};
use super::pump::{pump, Attached, Remote, Sink, TcpOf};
use super::tls::TlsInfo;
use super::{ConnectOptions, Connected, Peer, Socket, Target};
use crate::error::Error;

/// A connection ready for its socket's bytes.
pub struct Carried {
    pub local: Option<SocketAddr>,
    pub remote: Peer,
    pub link: Link,
}

/// How the JavaScript thread reaches a connection's bytes.
pub enum Link {
    /// A plain socket, driven on the JavaScript thread's loop.
    #[cfg(unix)]
    Fd(OwnedFd),
    /// A connection pumped on tokio (a TLS one, with its session's details, or one through a
    /// proxy reached over TLS; on Windows, a plain one too).
    Pumped(Arc<Remote>, Option<Box<TlsInfo>>),
}

/// What a connect tells its socket as it goes, before its outcome: what a `net.Socket` (or a
/// `tls.TLSSocket`) emits then.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// A name resolved to these addresses (`'lookup'`, for each).
    Resolved { host: String, ips: Vec<IpAddr> },
    /// The TCP connection of a TLS one is up, with these ends, its handshake next (`'connect'`).
    Connected {
        local: Option<SocketAddr>,
        remote: Peer,
    },
    /// The handshake's key log lines, whether it succeeded or not (`'keylog'`; see
    /// [`establish`]).
    Keys(Vec<u8>),
}

/// Establishes a connection to `target` (TLS with `secure`, all by `deadline`) and tells
/// `ready` how its bytes are reached; `on_step` hears of its steps before then (see [`Step`]).
/// A pumped one is pumped here, to `sink`, once `ready` has been told: this returns when its
/// pump stops.
pub async fn open(
    target: Target,
    opts: ConnectOptions,
    secure: Option<Secure<'_>>,
    deadline: Deadline,
    on_step: impl Fn(Step),
    sink: impl Sink,
    ready: impl FnOnce(Result<Carried, Error>),
) {
    let handshake = secure.is_some();
    let resolved = |host: &str, ips: &[IpAddr]| {
        on_step(Step::Resolved {
            host: host.to_owned(),
            ips: ips.to_vec(),
        })
    };
    let connected = |local, remote: &Peer| {
        if handshake {
            on_step(Step::Connected {
                local,
                remote: remote.clone(),
            });
        }
    };
    let on_keys = |lines| on_step(Step::Keys(lines));
    // Boxed: the caller's future stays small.
    let established = Box::pin(establish(
        target, opts, secure, deadline, resolved, connected, on_keys,
    ))
    .await;
    let (stream, info, local, remote): (Box<dyn Stream>, _, _, _) = match established {
        Err(err) => return ready(Err(err)),
        // Plain HTTP through a proxy reached over TLS: tokio keeps the session to the proxy.
        Ok(Established::Plain(Connected {
            socket: Socket::Proxied(stream),
            local,
            remote,
        })) => (stream, None, local, remote),
        #[cfg(unix)]
        Ok(Established::Plain(Connected {
            socket,
            local,
            remote,
        })) => {
            return ready(socket.into_fd().map(|fd| Carried {
                local,
                remote,
                link: Link::Fd(fd),
            }))
        }
        // Windows: a plain connection is pumped too, as a TLS one is. The descriptor path
        // (binding/conn/plain.rs) is built on POSIX sockets: a descriptor a libuv poll handle
        // watches, read and written with non-blocking read/sendmsg, peeked with
        // recv(MSG_PEEK|MSG_DONTWAIT) while idle. A Windows SOCKET is a handle, libuv only
        // emulates readiness for it (AFD polling), and each of those calls would need a Winsock
        // twin; the pumped path serves TLS connections on every system already, and learns of
        // an idle connection's close from its pump.
        #[cfg(windows)]
        Ok(Established::Plain(Connected {
            socket,
            local,
            remote,
        })) => (pumped(socket), None, local, remote),
        Ok(Established::Secure {
            stream,
            info,
            local,
            remote,
        }) => (stream, Some(Box::new(info)), local, remote),
    };
    let remote_end = Arc::new(Remote::new());
    // Its TCP socket takes the options a program sets from here on (`setNoDelay`).
    let stream = Attached::new(stream, remote_end.clone());
    ready(Ok(Carried {
        local,
        remote,
        link: Link::Pumped(remote_end.clone(), info),
    }));
    Box::pin(pump(stream, remote_end, sink)).await;
}

/// A stream tokio pumps.
trait Stream: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + TcpOf {}
impl<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + TcpOf> Stream for S {}

/// A plain connection's socket, as the stream its pump drives (Windows).
#[cfg(windows)]
fn pumped(socket: Socket) -> Box<dyn Stream> {
    match socket {
        Socket::Tcp(tcp) => Box::new(tcp),
        Socket::Unix(pipe) => Box::new(pipe),
        Socket::Proxied(stream) => stream,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;
    use tokio::sync::mpsc::unbounded_channel;
    use tokio::sync::oneshot;

    use super::*;
    use crate::transport::pump::tests::Chan;
    use crate::transport::pump::Event;
    use crate::transport::tls::tests::{chain, key, options};
    use crate::transport::tls::TlsConfig;

    /// Opens `target`, returning what `ready` was told, the pump's events, its task and the
    /// steps the connect told before `ready`.
    async fn carry(
        target: Target,
        config: Option<&'static TlsConfig>,
    ) -> (
        Result<Carried, Error>,
        tokio::sync::mpsc::UnboundedReceiver<Event>,
        tokio::task::JoinHandle<()>,
        Vec<Step>,
    ) {
        let (tx, rx) = unbounded_channel();
        let (told, outcome) = oneshot::channel();
        let steps = Arc::new(std::sync::Mutex::new(Vec::new()));
        let heard = steps.clone();
        let task = tokio::spawn(async move {
            let secure = config.map(|config| Secure {
                config,
                servername: Some("localhost"),
                node_name_check: true,
                keylog: Arc::new(AtomicBool::new(false)),
                offer_h2: false,
            });
            let ready = |result| {
                let _ = told.send(result);
            };
            open(
                target,
                Default::default(),
                secure,
                None,
                |step| heard.lock().unwrap().push(step),
                Chan(tx),
                ready,
            )
            .await;
        });
        let carried = outcome.await.unwrap();
        let steps = std::mem::take(&mut *steps.lock().unwrap());
        (carried, rx, task, steps)
    }

    #[tokio::test]
    async fn a_plain_socket_is_handed_over_and_a_tls_session_is_pumped() {
        // Echoes "pong" to "ping", over TLS on its second connection.
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let mut config = rustls::ServerConfig::builder()
            .with_no_client_auth()
            .with_single_cert(chain("localhost-chain.pem"), key("localhost-key.pem"))
            .unwrap();
        config.alpn_protocols.clear();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let server = tokio::spawn(async move {
            let (mut plain, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 4];
            plain.read_exact(&mut buf).await.unwrap();
            plain.write_all(b"pong").await.unwrap();
            let (tcp, _) = listener.accept().await.unwrap();
            let mut tls = acceptor.accept(tcp).await.unwrap();
            tls.read_exact(&mut buf).await.unwrap();
            tls.write_all(b"pong").await.unwrap();
            tls.flush().await.unwrap();
            tls
        });

        let (carried, rx, task, steps) = carry(Target::tcp("127.0.0.1", port), None).await;
        let carried = carried.unwrap();
        assert!(matches!(carried.remote, Peer::Tcp(a) if a.port() == port));
        // An IP address is not looked up, and a plain socket's connect is its outcome.
        assert_eq!(steps, []);
        #[cfg(unix)]
        {
            let Link::Fd(fd) = carried.link else {
                panic!("a plain socket is handed over");
            };
            // Nothing is pumped for it: its task is over.
            task.await.unwrap();
            drop(rx);
            // (Non-blocking, as the loop that drives it wants it.)
            let mut plain = tokio::net::TcpStream::from_std(std::net::TcpStream::from(fd)).unwrap();
            plain.write_all(b"ping").await.unwrap();
            let mut buf = [0u8; 4];
            plain.read_exact(&mut buf).await.unwrap();
            assert_eq!(&buf, b"pong");
        }
        // On Windows it is pumped, with no session's details.
        #[cfg(windows)]
        {
            let Link::Pumped(remote, None) = carried.link else {
                panic!("a plain socket is pumped");
            };
            let mut rx = rx;
            remote.write(&[b"ping"]);
            let Some(Event::Data(got)) = rx.recv().await else {
                panic!("the server's answer");
            };
            assert_eq!(got, b"pong");
            remote.close();
            task.await.unwrap();
        }

        let config: &'static TlsConfig =
            Box::leak(Box::new(TlsConfig::new(&options(&["ca.pem"])).unwrap()));
        let (carried, mut rx, task, steps) =
            carry(Target::tcp("localhost", port), Some(config)).await;
        let Link::Pumped(remote, Some(info)) = carried.unwrap().link else {
            panic!("a TLS session is pumped");
        };
        // The name's address, then the TCP connection with its ends, before the handshake's
        // outcome.
        let [resolved, connected] = &steps[..] else {
            panic!("two steps, got {steps:?}");
        };
        assert_eq!(
            resolved,
            &Step::Resolved {
                host: "localhost".into(),
                ips: vec![IpAddr::from([127, 0, 0, 1])]
            }
        );
        assert!(
            matches!(connected, Step::Connected { local: Some(_), remote: Peer::Tcp(a) } if a.port() == port),
            "{connected:?}"
        );
        assert_eq!(info.servername.as_deref(), Some("localhost"));
        remote.write(&[b"ping"]);
        let Some(Event::Data(got)) = rx.recv().await else {
            panic!("the server's answer");
        };
        assert_eq!(got, b"pong");
        drop(server.await.unwrap());
        // The server gone, the consumer hears of it; once it closes its end, the pump ends.
        assert!(matches!(
            rx.recv().await,
            Some(Event::Eof | Event::Error(_))
        ));
        remote.close();
        tokio::time::timeout(std::time::Duration::from_secs(10), task)
            .await
            .expect("the pump stopped")
            .unwrap();
    }

    #[tokio::test]
    async fn a_failure_is_told_and_nothing_is_pumped() {
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = closed.local_addr().unwrap().port();
        drop(closed);
        let (carried, mut rx, task, _) = carry(Target::tcp("127.0.0.1", port), None).await;
        assert_eq!(carried.err().expect("refused").code(), "ECONNREFUSED");
        task.await.unwrap();
        assert!(rx.recv().await.is_none());
    }
}
