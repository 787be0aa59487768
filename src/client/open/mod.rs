//! Opening a connection for hyper, as the promise path does for every new connection: the
//! user's `lookup` when there is one, then the one establishing pipeline of both paths
//! (resolve, connect, a proxy's tunnel, TLS), then HTTP on it: HTTP/2 when the server chose
//! `h2` in ALPN or, without TLS, by prior knowledge (`h2c`); HTTP/1.1 otherwise. All of it
//! within the agent's timeout, whose error says which step it stopped. Then, for a new
//! connection of the promise path ([`open_and_exchange`]), the check of the server's name and
//! the first exchange.

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;

use super::{handshake, handshake_h2, Connection, Control, Ping, Sender, Sink, Spec};
use crate::error::Error;
use crate::transport::establish::{establish, Established, Secure};
use crate::transport::tls::{TlsConfig, TlsInfo};
use crate::transport::{ConnectOptions, Connected, Peer, Socket, Target};

/// What to open.
pub struct Open<'a> {
    pub target: Target,
    pub opts: ConnectOptions,
    /// TLS for an `https:` key.
    pub secure: Option<Secure<'a>>,
    /// HTTP/2 may be spoken: offered ahead of HTTP/1.1 in TLS's ALPN (whatever `secure`
    /// says), spoken by prior knowledge without TLS.
    pub http2: bool,
    pub max_header_size: usize,
    /// The agent's `timeout`: the most the whole opening (lookup included) may take.
    pub timeout: Option<Duration>,
}

/// An open connection, HTTP started on it: nothing is read or written until `connection` is
/// spawned.
pub struct Opened {
    pub sender: Sender,
    pub connection: Connection,
    pub local: Option<SocketAddr>,
    pub remote: Peer,
    /// The TLS session's facts, for a TLS connection.
    pub tls: Option<TlsInfo>,
}

/// Opens `open`'s connection. `lookup`, for a TCP target, gives the addresses to connect to
/// (the user's `lookup` function, run elsewhere) instead of DNS; `on_keys` gets the TLS
/// handshake's key log lines, if any. A timeout fails as a socket with nobody answering
/// would (`ERR_SOCKET_TIMEOUT`) or, while a proxy's tunnel is not yet open, as Node's agent
/// fails it (`ERR_PROXY_TUNNEL`).
pub async fn open<L>(
    open: Open<'_>,
    lookup: Option<L>,
    on_keys: impl FnOnce(Vec<u8>),
) -> Result<Opened, Error>
where
    L: Future<Output = Result<Vec<IpAddr>, Error>>,
{
    let Open {
        mut target,
        opts,
        mut secure,
        http2,
        max_header_size,
        timeout,
    } = open;
    let tunneled = matches!(
        &target,
        Target::Tcp {
            tunnel: Some(_),
            ..
        }
    );
    // Set once the connect (through the tunnel, when there is one) is done.
    let connected = AtomicBool::new(false);
    if let Some(secure) = &mut secure {
        secure.offer_h2 = http2;
    }
    let steps = async {
        if let (Some(lookup), Target::Tcp { addresses, .. }) = (lookup, &mut target) {
            *addresses = Some(lookup.await?);
        }
        let mark = |_, _: &_| connected.store(true, Ordering::Relaxed);
        let established = Box::pin(establish(
            target,
            opts,
            secure,
            None,
            |_, _| {},
            mark,
            on_keys,
        ))
        .await?;
        // Boxed, as the connect's steps are: the caller's future stays small.
        macro_rules! speak {
            ($io:expr, $h2:expr, $secure:expr) => {
                match $h2 {
                    true => {
                        Box::pin(handshake_h2($io, max_header_size, $secure, Ping::default()))
                            .await?
                    }
                    false => Box::pin(handshake($io, max_header_size)).await?,
                }
            };
        }
        let ((sender, connection), local, remote, tls) = match established {
            Established::Secure {
                stream,
                info,
                local,
                remote,
            } => {
                let h2 = info.alpn.as_deref() == Some(b"h2");
                (speak!(stream, h2, true), local, remote, Some(info))
            }
            Established::Plain(Connected {
                socket,
                local,
                remote,
            }) => {
                let http = match socket {
                    Socket::Tcp(tcp) => speak!(tcp, http2, false),
                    Socket::Unix(unix) => speak!(unix, http2, false),
                    Socket::Proxied(stream) => speak!(*stream, http2, false),
                };
                (http, local, remote, None)
            }
        };
        Ok(Opened {
            sender,
            connection,
            local,
            remote,
            tls,
        })
    };
    match timeout {
        Some(limit) => tokio::time::timeout(limit, steps)
            .await
            .unwrap_or_else(|_| {
                Err(match tunneled && !connected.load(Ordering::Relaxed) {
                    true => Error::proxy_tunnel_timeout(limit),
                    false => Error::socket_timeout(limit),
                })
            }),
        None => steps.await,
    }
}

/// What a new connection of the promise path tells the thread that asked for it.
pub trait Progress: Send + Sync + 'static {
    /// It opened, with its facts, or failed to (its exchange does not run then).
    fn opened(&self, result: Result<Facts, Error>);
    /// Its task ended: the server closed it, or it failed, as `end` says.
    fn closed(&self, end: crate::pool::ConnEnd);
}

/// An open connection's facts, as [`Progress::opened`] gives them.
pub struct Facts {
    pub local: Option<SocketAddr>,
    pub remote: Peer,
    pub tls: Option<Box<TlsInfo>>,
    /// Set when the server's name is still to be checked (a new TLS session: see
    /// [`TlsConfig::needs_name_check`]): nothing of HTTP is written or read until it is
    /// answered; dropped unanswered, the connection closes unused.
    pub verify: Option<oneshot::Sender<()>>,
    /// An HTTP/2 session's own sender, for its other streams.
    pub session: Option<Sender>,
}

/// Opens a connection with `to` (as [`open`] does) and runs the exchange of `spec` on it, as
/// every new connection of the promise path does. As Node's `tls.connect`, the server of a
/// new TLS session is checked by name (by the asker, told through `progress`) before a byte
/// of HTTP goes either way; a resumed session (checked when it was made) and one whose chain
/// already failed (`rejectUnauthorized: false`) are not.
#[allow(clippy::too_many_arguments)]
pub async fn open_and_exchange<L>(
    to: Open<'_>,
    lookup: Option<L>,
    on_keys: impl FnOnce(Vec<u8>),
    spec: Spec,
    ctl: Arc<Control>,
    sink: Arc<dyn Sink>,
    progress: Arc<dyn Progress>,
) where
    L: Future<Output = Result<Vec<IpAddr>, Error>>,
{
    let Opened {
        sender,
        connection,
        local,
        remote,
        tls,
    } = match Box::pin(open(to, lookup, on_keys)).await {
        Ok(opened) => opened,
        Err(err) => return progress.opened(Err(err)),
    };
    let (verify, verified) = match tls.as_ref().is_some_and(TlsConfig::needs_name_check) {
        true => {
            let (tx, rx) = oneshot::channel();
            (Some(tx), Some(rx))
        }
        false => (None, None),
    };
    let session = sender.stream();
    progress.opened(Ok(Facts {
        local,
        remote,
        tls: tls.map(Box::new),
        verify,
        session,
    }));
    if let Some(verified) = verified {
        if verified.await.is_err() {
            return;
        }
    }
    let closed = progress.clone();
    connection.spawn(move |end| closed.closed(end));
    super::exchange(sender, spec, ctl, sink).await;
}

#[cfg(test)]
mod tests;
