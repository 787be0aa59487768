//! One way to establish a connection, for both request paths: resolve and connect (through a
//! proxy and its tunnel when the target says so), then, for a TLS key, the handshake (its key
//! material kept while asked), both within one deadline. What follows differs by path and is
//! the caller's: the drop-in path takes a plain socket's descriptor, or pumps a TLS (or
//! proxied) stream on tokio; the promise path speaks HTTP over either with hyper.

use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use super::connect::Target;
use super::connect::{connect_telling, ConnectOptions, Connected, PathStream, Peer, Socket};
use super::pump::TcpOf;
use super::tls::{self, ClientStream, TlsConfig, TlsInfo};
use crate::error::Error;

/// An established connection.
pub enum Established {
    /// No TLS of its own (a plain socket, or a session to a proxy that tokio drives).
    Plain(Connected),
    /// A TLS session over the socket.
    Secure {
        /// Boxed: a TLS session's state is large, and the connection is moved around.
        stream: Box<SecureStream>,
        info: TlsInfo,
        local: Option<SocketAddr>,
        remote: Peer,
    },
}

/// The TLS session of an established connection, over whichever socket it has.
pub enum SecureStream {
    Tcp(ClientStream<TcpStream>),
    /// Over a `socketPath` connection (a named pipe on Windows).
    Unix(ClientStream<PathStream>),
    /// Inside a tunnel through a proxy reached over TLS.
    Proxied(Box<ClientStream<ClientStream<TcpStream>>>),
}

/// Whom a TLS connection is for, as JavaScript gives it for each connection.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Identity {
    /// The `servername` (SNI and the certificate's name); none: the peer's address.
    pub servername: Option<String>,
    /// Node's own `checkServerIdentity` applies (the program gave none of its own).
    pub node_check: bool,
}

/// Where a connection goes and whom it is for: what a connection keeps for a replay's new
/// connection.
#[derive(Debug, PartialEq)]
pub struct Endpoint {
    pub target: Target,
    pub identity: Identity,
}

/// Hands out endpoints, one copy of the same endpoint for the connections that go there: each
/// connection keeps its endpoint for as long as it lives (idle ones included), and an agent's
/// connections mostly go to the last place it connected to.
#[derive(Default)]
pub struct Endpoints {
    last: Option<Rc<Endpoint>>,
}

impl Endpoints {
    /// The endpoint of `target` and `identity`: the last one handed out when it is the same.
    pub fn share(&mut self, target: Target, identity: Identity) -> Rc<Endpoint> {
        let endpoint = Endpoint { target, identity };
        match &self.last {
            Some(last) if **last == endpoint => last.clone(),
            _ => self.last.insert(Rc::new(endpoint)).clone(),
        }
    }
}

/// The TLS side of a connection to establish.
pub struct Secure<'a> {
    pub config: &'a TlsConfig,
    /// The `servername` (SNI and the certificate's name); none: the peer's address.
    pub servername: Option<&'a str>,
    /// Node's own `checkServerIdentity` applies: a name it surely refuses fails the handshake
    /// (see `tls::handshake_offering`).
    pub node_name_check: bool,
    /// Whether the handshake's key material is kept (a 'keylog' listener), read as it comes.
    pub keylog: Arc<AtomicBool>,
    /// ALPN offers HTTP/2 (`h2`) ahead of HTTP/1.1.
    pub offer_h2: bool,
}

/// A deadline for the whole of it, and the limit it stands for (the timeout's error says it).
pub type Deadline = Option<(tokio::time::Instant, Duration)>;

/// Connects to `target` and, with `secure`, runs the TLS handshake, all by `deadline` (failing
/// with the socket timeout's error after it). `resolved` gets the addresses of a name it
/// resolved itself (see [`connect_telling`]); `connected` gets the socket's two ends once it is
/// connected (before any handshake); `on_keys` gets the handshake's key log lines, if any, whether it
/// succeeded or not (Node reports a failed handshake's lines too).
pub async fn establish(
    target: Target,
    opts: ConnectOptions,
    secure: Option<Secure<'_>>,
    deadline: Deadline,
    resolved: impl FnOnce(&str, &[std::net::IpAddr]),
    connected: impl FnOnce(Option<SocketAddr>, &Peer),
    on_keys: impl FnOnce(Vec<u8>),
) -> Result<Established, Error> {
    let conn = within(deadline, connect_telling(target, opts, resolved)).await?;
    connected(conn.local, &conn.remote);
    let Some(secure) = secure else {
        return Ok(Established::Plain(conn));
    };
    let Connected {
        socket,
        local,
        remote,
    } = conn;
    let peer_ip = match &remote {
        Peer::Tcp(addr) => addr.ip(),
        Peer::Unix(_) => std::net::IpAddr::from([127, 0, 0, 1]),
    };
    let server = tls::server_name(secure.servername, peer_ip);
    // Over TCP or a Unix socket (a named pipe on Windows) alike, as Node's https does with
    // `socketPath`.
    macro_rules! handshake {
        ($io:expr, $variant:expr) => {{
            let handshake = within(
                deadline,
                tls::handshake_offering(
                    $io,
                    secure.config,
                    server,
                    secure.offer_h2,
                    secure.node_name_check,
                ),
            );
            let (result, lines) = tls::logging_keys(secure.keylog, handshake).await;
            if !lines.is_empty() {
                on_keys(lines);
            }
            let (stream, info) = result?;
            (Box::new($variant(stream)), info)
        }};
    }
    let (stream, info) = match socket {
        Socket::Tcp(tcp) => handshake!(tcp, SecureStream::Tcp),
        Socket::Unix(unix) => handshake!(unix, SecureStream::Unix),
        Socket::Proxied(stream) => {
            handshake!(*stream, |s| SecureStream::Proxied(Box::new(s)))
        }
    };
    Ok(Established::Secure {
        stream,
        info,
        local,
        remote,
    })
}

/// `step`, failing as a socket timeout once `deadline` (the instant, and the limit it came
/// from) has passed. `step` is boxed where it starts: a connect's steps are large, and the
/// future that awaits this one keeps only the box.
pub async fn within<T>(
    deadline: Deadline,
    step: impl std::future::Future<Output = Result<T, Error>>,
) -> Result<T, Error> {
    let step = Box::pin(step);
    match deadline {
        Some((at, limit)) => tokio::time::timeout_at(at, step)
            .await
            .unwrap_or_else(|_| Err(Error::socket_timeout(limit))),
        None => step.await,
    }
}

macro_rules! each {
    ($self:expr, $s:ident => $e:expr) => {
        match $self.get_mut() {
            SecureStream::Tcp($s) => $e,
            SecureStream::Unix($s) => $e,
            SecureStream::Proxied($s) => {
                let $s = &mut **$s;
                $e
            }
        }
    };
}

impl TcpOf for SecureStream {
    #[cfg(unix)]
    fn tcp_fd(&self) -> Option<std::os::fd::RawFd> {
        match self {
            SecureStream::Tcp(s) => s.tcp_fd(),
            SecureStream::Unix(s) => s.tcp_fd(),
            SecureStream::Proxied(s) => s.tcp_fd(),
        }
    }
}

impl AsyncRead for SecureStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        each!(self, s => Pin::new(s).poll_read(cx, buf))
    }
}

impl AsyncWrite for SecureStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        each!(self, s => Pin::new(s).poll_write(cx, buf))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        each!(self, s => Pin::new(s).poll_write_vectored(cx, bufs))
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            SecureStream::Tcp(s) => s.is_write_vectored(),
            SecureStream::Unix(s) => s.is_write_vectored(),
            SecureStream::Proxied(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        each!(self, s => Pin::new(s).poll_flush(cx))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        each!(self, s => Pin::new(s).poll_shutdown(cx))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(servername: &str) -> Identity {
        Identity {
            servername: Some(servername.into()),
            node_check: true,
        }
    }

    #[test]
    fn the_same_endpoint_is_shared_and_another_is_not() {
        let mut endpoints = Endpoints::default();
        let first = endpoints.share(Target::tcp("a.test", 443), named("a.test"));
        let again = endpoints.share(Target::tcp("a.test", 443), named("a.test"));
        assert!(Rc::ptr_eq(&first, &again));
        // Each part of the endpoint counts: another port, another name to check.
        let port = endpoints.share(Target::tcp("a.test", 8443), named("a.test"));
        assert!(!Rc::ptr_eq(&first, &port));
        assert_eq!(port.target, Target::tcp("a.test", 8443));
        let name = endpoints.share(Target::tcp("a.test", 8443), named("b.test"));
        assert!(!Rc::ptr_eq(&port, &name));
        assert_eq!(name.identity, named("b.test"));
        // Only the last is kept: going back makes a new copy, equal to the first.
        let back = endpoints.share(Target::tcp("a.test", 443), named("a.test"));
        assert!(!Rc::ptr_eq(&first, &back));
        assert_eq!(*back, *first);
    }

    #[test]
    fn a_unix_socket_path_is_an_endpoint_too() {
        let mut endpoints = Endpoints::default();
        let path = || Target::Unix {
            path: "/tmp/a.sock".into(),
        };
        let first = endpoints.share(path(), Identity::default());
        assert!(Rc::ptr_eq(
            &first,
            &endpoints.share(path(), Identity::default())
        ));
        let tcp_one = endpoints.share(Target::tcp("localhost", 80), Identity::default());
        assert!(!Rc::ptr_eq(&first, &tcp_one));
    }
}
