//! Reaching an origin through a proxy: the TLS session to a proxy reached over TLS, and the
//! `CONNECT` tunnel through an HTTP proxy, read as Node reads the proxy's answer.

use std::net::IpAddr;
use std::sync::Arc;

use tokio::net::TcpStream;

use crate::error::Error;
use crate::transport::tls::{self, ClientStream, TlsConfig};

/// A tunnel through an HTTP proxy (`CONNECT`), as Node's https.Agent opens one for an agent
/// with a proxy: the request goes out as JavaScript wrote it, and the connection is the
/// origin's once the proxy answers 200.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tunnel {
    /// The whole `CONNECT` request.
    pub request: String,
    /// What a refusal's message starts with (`Failed to establish tunnel to <origin> via
    /// <proxy>: `); the proxy's status line follows.
    pub refused: String,
}

/// The TLS session to a proxy reached over TLS, as Node's agent opens it: the default trust,
/// the proxy's own name checked as `tls.checkServerIdentity` checks it.
#[derive(Clone)]
pub struct ProxyTls {
    pub config: Arc<TlsConfig>,
    /// The proxy's host: its SNI when it is a name, and the name its certificate must hold.
    pub host: String,
}

impl std::fmt::Debug for ProxyTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProxyTls")
            .field("host", &self.host)
            .finish()
    }
}

/// The same session: the same configuration (not merely an equal one) and host.
impl PartialEq for ProxyTls {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.config, &other.config) && self.host == other.host
    }
}

/// The longest response head a proxy may answer a `CONNECT` with.
const MAX_TUNNEL_HEAD: usize = 16 * 1024;

/// The TLS session to a proxy reached over TLS; its certificate must name the proxy, unless
/// `rejectUnauthorized` is off (then, as Node, the failure is only reported, and not here).
/// Node reaches it with `tls.connect` and its own name check: a name that check refuses fails
/// the handshake itself.
pub(super) async fn proxy_session(
    stream: TcpStream,
    proxy: &ProxyTls,
    ip: IpAddr,
) -> Result<ClientStream<TcpStream>, Error> {
    let server = tls::server_name(Some(&proxy.host), ip);
    let (secure, info) =
        tls::handshake_offering(stream, &proxy.config, server.clone(), false, true).await?;
    if proxy.config.rejects_unauthorized() {
        tls::check_name(&info, &server)?;
    }
    Ok(secure)
}

fn tunnel_ended() -> Error {
    Error::proxy_tunnel(
        "Connection to establish proxy tunnel ended unexpectedly",
        None,
    )
}

/// The proxy's answer to `CONNECT`, from its head: through on 200, otherwise Node's
/// `ERR_PROXY_TUNNEL` with the status.
fn tunnel_answer(head: &[u8], tunnel: &Tunnel) -> Result<(), Error> {
    let line_end = head
        .windows(2)
        .position(|w| w == b"\r\n")
        .unwrap_or(head.len());
    let status_line = String::from_utf8_lossy(&head[..line_end]);
    let status = status_line.split(' ').nth(1).unwrap_or("");
    if status == "200" {
        return Ok(());
    }
    Err(Error::proxy_tunnel(
        format!("{}{status_line}", tunnel.refused),
        Some(status.parse().unwrap_or(0)),
    ))
}

fn tunnel_head_too_long() -> Error {
    Error::proxy_tunnel(
        format!("Proxy response headers exceeded {MAX_TUNNEL_HEAD} bytes"),
        None,
    )
}

/// [`open_tunnel`] inside a TLS session to the proxy: the answer is read a byte at a time (from
/// the session's buffer, not the socket), so that nothing of the origin's is taken with it.
pub(super) async fn open_tunnel_within<S>(stream: &mut S, tunnel: &Tunnel) -> Result<(), Error>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    stream
        .write_all(tunnel.request.as_bytes())
        .await
        .map_err(|e| Error::io(&e, "write"))?;
    stream.flush().await.map_err(|e| Error::io(&e, "write"))?;
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        if head.len() > MAX_TUNNEL_HEAD {
            return Err(tunnel_head_too_long());
        }
        let mut byte = [0u8; 1];
        match stream.read(&mut byte).await {
            Ok(0) => return Err(tunnel_ended()),
            Ok(_) => head.push(byte[0]),
            Err(e) => return Err(Error::io(&e, "read")),
        }
    }
    tunnel_answer(&head, tunnel)
}

/// Sends the `CONNECT` request and reads the proxy's answer, to the end of its head and not a
/// byte further (what follows is the origin's). Fails as Node fails: `ERR_PROXY_TUNNEL`, with
/// the `statusCode` of an answer other than 200.
pub(super) async fn open_tunnel(stream: &mut TcpStream, tunnel: &Tunnel) -> Result<(), Error> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    stream
        .write_all(tunnel.request.as_bytes())
        .await
        .map_err(|e| Error::io(&e, "write"))?;
    let mut head = Vec::new();
    let mut buf = [0u8; 2048];
    loop {
        // Peeked first: the head's end may come with nothing after it, or with the start of
        // what the origin sends, which must stay in the socket.
        let n = match stream.peek(&mut buf).await {
            Ok(0) => return Err(tunnel_ended()),
            Ok(n) => n,
            Err(e) => return Err(Error::io(&e, "read")),
        };
        let from = head.len().saturating_sub(3);
        head.extend_from_slice(&buf[..n]);
        let end = head[from..]
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .map(|at| from + at + 4);
        let take = match end {
            Some(end) => n - (head.len() - end),
            None => n,
        };
        stream
            .read_exact(&mut buf[..take])
            .await
            .map_err(|e| Error::io(&e, "read"))?;
        if let Some(end) = end {
            head.truncate(end);
            break;
        }
        if head.len() > MAX_TUNNEL_HEAD {
            return Err(tunnel_head_too_long());
        }
    }
    tunnel_answer(&head, tunnel)
}
