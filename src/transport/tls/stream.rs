//! The client side of a TLS connection: the handshake on a connected socket, the stream it
//! gives, the key log Node's 'keylog' events carry, and TLS errors in Node's terms.

use std::cell::RefCell;
use std::fmt::Write as _;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_rustls::client::TlsStream;

use crate::error::Error;

use super::verify::{Verdict, VerifyFailure, VERDICT};
use super::{alert_error, cipher_names, handshake_alert_error, TlsConfig, TlsInfo};

tokio::task_local! {
    /// The key material of the handshake running in this task, as lines of the NSS key log
    /// format (what Node's 'keylog' events carry), when its agent logs keys: the shared
    /// configuration's [`TaskKeyLog`] writes them here.
    static KEY_LOG: KeyLogLines;
}

/// A handshake's key log: written only while `wanted` is set (the agent, or a socket of it, has
/// a 'keylog' listener; read as each secret comes, so a listener added while the handshake
/// runs gets the secrets still to come).
struct KeyLogLines {
    wanted: Arc<AtomicBool>,
    lines: RefCell<String>,
}

impl KeyLogLines {
    fn wanted(&self) -> bool {
        self.wanted.load(Ordering::Relaxed)
    }
}

/// The configurations' key log: hands each secret to the handshake of the task it runs in
/// (one configuration serves every connection of a pool key, which may log or not).
#[derive(Debug)]
pub(super) struct TaskKeyLog;

impl rustls::KeyLog for TaskKeyLog {
    fn log(&self, label: &str, client_random: &[u8], secret: &[u8]) {
        let _ = KEY_LOG.try_with(|log| {
            if !log.wanted() {
                return;
            }
            let mut lines = log.lines.borrow_mut();
            lines.push_str(label);
            for bytes in [client_random, secret] {
                lines.push(' ');
                for b in bytes {
                    let _ = write!(lines, "{b:02x}");
                }
            }
            lines.push('\n');
        });
    }

    fn will_log(&self, _label: &str) -> bool {
        KEY_LOG.try_with(KeyLogLines::wanted).unwrap_or(false)
    }
}

/// A client TLS stream that reads the peer's close without a `close_notify` as the end of the
/// stream, as Node (OpenSSL) does, where rustls reports an error: HTTP's own framing still
/// finds a body cut short (a length or a chunk not met), and a body that ends with the
/// connection ends there, as it does in Node.
pub struct ClientStream<IO>(TlsStream<IO>);

impl<IO> ClientStream<IO> {
    /// The stream the session runs over.
    pub fn io(&self) -> &IO {
        self.0.get_ref().0
    }
}

impl<IO: AsyncRead + AsyncWrite + Unpin> AsyncRead for ClientStream<IO> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        match Pin::new(&mut self.get_mut().0).poll_read(cx, buf) {
            Poll::Ready(Err(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                Poll::Ready(Ok(()))
            }
            other => other,
        }
    }
}

impl<IO: AsyncRead + AsyncWrite + Unpin> AsyncWrite for ClientStream<IO> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().0).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().0).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.0.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_shutdown(cx)
    }
}

/// Runs `handshake` (a future that runs a [`handshake`]), keeping the key material of its TLS
/// handshake while `wanted` is set: the NSS key log lines it gave, whether it succeeded, failed
/// or was cut short (Node reports a failed handshake's lines too).
pub async fn logging_keys<F: std::future::Future>(
    wanted: Arc<AtomicBool>,
    handshake: F,
) -> (F::Output, Vec<u8>) {
    let log = KeyLogLines {
        wanted,
        lines: RefCell::new(String::new()),
    };
    KEY_LOG
        .scope(log, async {
            let output = handshake.await;
            (output, KEY_LOG.with(|log| log.lines.take().into_bytes()))
        })
        .await
}

/// What ALPN offers when HTTP/2 is allowed: `h2` ahead of the protocols otherwise offered
/// (`http/1.1` when none are).
pub(super) fn alpn_with_h2(given: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let mut offered = vec![b"h2".to_vec()];
    match given {
        [] => offered.push(b"http/1.1".to_vec()),
        _ => offered.extend(given.iter().filter(|p| p.as_slice() != b"h2").cloned()),
    }
    offered
}

/// Runs the client handshake on a connected socket, offering HTTP/2 in ALPN if `h2`. With
/// `node_name_check` (Node's own `checkServerIdentity` applies), a server name that check
/// refuses fails the handshake (see [`identity`](super::identity)).
pub async fn handshake_offering<IO>(
    io: IO,
    config: &TlsConfig,
    server: ServerName<'static>,
    h2: bool,
    node_name_check: bool,
) -> Result<(ClientStream<IO>, TlsInfo), Error>
where
    IO: AsyncRead + AsyncWrite + Unpin,
{
    if let Some(err) = config.unspeakable() {
        return Err(err);
    }
    let connector = config.connector(h2);
    let servername = match &server {
        ServerName::DnsName(name) => Some(name.as_ref().to_owned()),
        _ => None,
    };
    let (result, failure, wrong_name) = VERDICT
        .scope(Verdict::new(node_name_check), async {
            let result = connector.connect(server.clone(), io).await;
            VERDICT.with(|v| (result, v.failure.get(), v.wrong_name.take()))
        })
        .await;
    let stream = match result {
        Ok(stream) => stream,
        Err(err) => {
            config.forget_sessions(&server);
            return Err(match wrong_name {
                Some(chain) => super::altname_error(&server, chain),
                None => handshake_error(&err, failure),
            });
        }
    };
    let (_, conn) = stream.get_ref();
    let suite = conn.negotiated_cipher_suite();
    let peer_chain: Vec<Vec<u8>> = conn
        .peer_certificates()
        .map(|certs| certs.iter().map(|c| c.to_vec()).collect())
        .unwrap_or_default();
    let resumed = conn.handshake_kind() == Some(rustls::HandshakeKind::Resumed);
    let (name_known, name_known_by_node) = config.name_known(peer_chain.first());
    let info = TlsInfo {
        protocol: match conn.protocol_version() {
            Some(rustls::ProtocolVersion::TLSv1_3) => "TLSv1.3",
            _ => "TLSv1.2",
        },
        cipher: suite.map_or(("", ""), |s| cipher_names(s.suite())),
        alpn: conn.alpn_protocol().map(|p| p.to_vec()),
        peer_chain,
        resumed,
        authorization_error: failure,
        servername,
        server,
        name_known,
        name_known_by_node,
        name_error: None,
        key_exchange: conn.negotiated_key_exchange_group().map(|g| g.name()),
        local_cert: config.local_cert(),
    };
    Ok((ClientStream(stream), info))
}

/// A handshake that failed, in Node's terms.
fn handshake_error(err: &std::io::Error, verify: Option<VerifyFailure>) -> Error {
    if let Some(failure) = verify {
        return Error::tls(failure.code, failure.message);
    }
    match err
        .get_ref()
        .and_then(|e| e.downcast_ref::<rustls::Error>())
    {
        Some(rustls::Error::AlertReceived(alert)) => handshake_alert_error(*alert),
        Some(rustls::Error::PeerIncompatible(why)) => Error::tls(
            "ERR_SSL_UNSUPPORTED_PROTOCOL",
            format!("the server and hyperagent share no TLS version or cipher suite ({why:?})"),
        ),
        // Anything else the server sent that is not TLS as the handshake needs it (a plain
        // HTTP server's answer, a record too long, a message out of turn): as Node reports
        // such a failure, `EPROTO` on the handshake's write, with OpenSSL's reason where it has
        // one of the same meaning.
        Some(other) => Error::os(libc::EPROTO, "write").with_detail(protocol_reason(other)),
        // The connection ended or broke before the handshake finished.
        None => {
            let mut e = Error::io(err, "read");
            if matches!(
                err.kind(),
                std::io::ErrorKind::UnexpectedEof | std::io::ErrorKind::ConnectionReset
            ) {
                e = Error::tls(
                    "ECONNRESET",
                    "Client network socket disconnected before secure TLS connection was established",
                );
            }
            e
        }
    }
}

/// OpenSSL's reason for a handshake that met `err`, where it has one of the same meaning;
/// rustls's words otherwise.
fn protocol_reason(err: &rustls::Error) -> String {
    use rustls::InvalidMessage as M;
    match err {
        // A record's header that is not TLS: what OpenSSL checks first is the version.
        rustls::Error::InvalidMessage(M::InvalidContentType | M::UnknownProtocolVersion) => {
            "wrong version number".to_owned()
        }
        rustls::Error::InvalidMessage(M::MessageTooLarge) => "packet length too long".to_owned(),
        rustls::Error::InappropriateMessage { .. }
        | rustls::Error::InappropriateHandshakeMessage { .. } => "unexpected message".to_owned(),
        other => format!("TLS handshake failed: {other}"),
    }
}

/// An error reading or writing an established TLS connection, in Node's terms: an alert from
/// the peer keeps its OpenSSL name, anything else is the socket error it wraps.
pub fn read_error(err: &std::io::Error) -> Error {
    match err
        .get_ref()
        .and_then(|e| e.downcast_ref::<rustls::Error>())
    {
        Some(rustls::Error::AlertReceived(alert)) => alert_error(*alert),
        Some(other) => Error::tls("ERR_SSL_PROTOCOL_ERROR", format!("TLS error: {other}")),
        None => Error::io(err, "read"),
    }
}
