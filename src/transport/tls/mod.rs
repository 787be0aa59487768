//! TLS with rustls, behaving as Node's `tls.connect` does where users can tell: the options of
//! `https.Agent`, OpenSSL's verification error codes, acceptance of a self-signed server
//! certificate passed as `ca`, session resumption, and the details sockets expose afterwards.
//!
//! Names are not checked here: as in Node, the host name is checked after the handshake by
//! `checkServerIdentity` (in JavaScript, with Node's own function by default), so the error,
//! `ERR_TLS_CERT_ALTNAME_INVALID` with its `reason`, `host` and `cert`, is Node's exactly.

mod ciphers;
pub mod der;
mod names;
mod pkcs12;

use std::cell::{Cell, RefCell};
use std::fmt::Write as _;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::client::{ClientSessionMemoryCache, ClientSessionStore, Resumption};
use rustls::crypto::{ring, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{
    CertificateDer, CertificateRevocationListDer, PrivateKeyDer, ServerName, UnixTime,
};
use rustls::server::ParsedCertificate;
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

use crate::error::Error;

pub use names::{alert_error, cipher_names, handshake_alert_error};

/// `https.Agent` / `tls.connect` options, as bytes and strings (the binding converts them).
#[derive(Clone, Debug, Default)]
pub struct TlsOptions {
    /// `ca`: PEM (or DER) blobs; replaces the default roots when present.
    pub ca: Option<Vec<Vec<u8>>>,
    /// The default trust without `ca`: Node's own set where JavaScript can read it (see
    /// [`Trust::node_default`]); otherwise Mozilla's roots plus `NODE_EXTRA_CA_CERTS`.
    pub default_trust: Option<Arc<Trust>>,
    /// `cert`/`key` pairs (PEM; a cert blob may carry its chain).
    pub identities: Vec<(Vec<u8>, Vec<u8>)>,
    /// `pfx`: PKCS#12 files with their passphrases; the first one's identity is used, over
    /// `cert`/`key` (Node loads `pfx` after them), and the issuers each one carries are trusted.
    pub pfx: Vec<(Vec<u8>, String)>,
    /// `crl`: PEM blobs of certificate revocation lists. With any, every certificate of the
    /// server's chain must be covered by a current CRL of its issuer (OpenSSL's
    /// `X509_V_FLAG_CRL_CHECK_ALL`, as Node sets it).
    pub crls: Vec<Vec<u8>>,
    pub reject_unauthorized: bool,
    /// `minVersion` / `maxVersion`: `'TLSv1.2'`, `'TLSv1.3'` (older ones are below rustls).
    pub min_version: Option<String>,
    pub max_version: Option<String>,
    /// `ciphers`, in OpenSSL's colon-separated form.
    pub ciphers: Option<String>,
    /// `ALPNProtocols`.
    pub alpn: Vec<Vec<u8>>,
    /// `maxCachedSessions` (0 turns resumption off).
    pub max_cached_sessions: usize,
}

/// A configuration error, named as Node would name it.
fn config_error(code: &str, message: impl Into<String>) -> Error {
    Error::tls(code, message)
}

/// Why a server's certificate chain was not trusted, in OpenSSL's words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VerifyFailure {
    pub code: &'static str,
    pub message: &'static str,
}

impl VerifyFailure {
    const fn new(code: &'static str, message: &'static str) -> Self {
        VerifyFailure { code, message }
    }
}

const DEPTH_ZERO_SELF_SIGNED_CERT: VerifyFailure =
    VerifyFailure::new("DEPTH_ZERO_SELF_SIGNED_CERT", "self-signed certificate");
const SELF_SIGNED_CERT_IN_CHAIN: VerifyFailure = VerifyFailure::new(
    "SELF_SIGNED_CERT_IN_CHAIN",
    "self-signed certificate in certificate chain",
);
const UNABLE_TO_VERIFY_LEAF_SIGNATURE: VerifyFailure = VerifyFailure::new(
    "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
    "unable to verify the first certificate",
);
const UNABLE_TO_GET_ISSUER_CERT_LOCALLY: VerifyFailure = VerifyFailure::new(
    "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
    "unable to get local issuer certificate",
);
const CERT_HAS_EXPIRED: VerifyFailure =
    VerifyFailure::new("CERT_HAS_EXPIRED", "certificate has expired");
const CERT_NOT_YET_VALID: VerifyFailure =
    VerifyFailure::new("CERT_NOT_YET_VALID", "certificate is not yet valid");
const CERT_SIGNATURE_FAILURE: VerifyFailure =
    VerifyFailure::new("CERT_SIGNATURE_FAILURE", "certificate signature failure");
const CERT_REJECTED: VerifyFailure = VerifyFailure::new("CERT_REJECTED", "certificate rejected");
const CERT_REVOKED: VerifyFailure = VerifyFailure::new("CERT_REVOKED", "certificate revoked");
const UNABLE_TO_GET_CRL: VerifyFailure =
    VerifyFailure::new("UNABLE_TO_GET_CRL", "unable to get certificate CRL");
const CRL_HAS_EXPIRED: VerifyFailure = VerifyFailure::new("CRL_HAS_EXPIRED", "CRL has expired");
const CRL_SIGNATURE_FAILURE: VerifyFailure =
    VerifyFailure::new("CRL_SIGNATURE_FAILURE", "CRL signature failure");

/// A prepared client configuration for one pool key, shared by its connections (rustls
/// resumes a session only with the configuration, and verifier, that made it).
pub struct TlsConfig {
    base: Arc<ClientConfig>,
    /// The same, offering HTTP/2 in ALPN (`h2` first, then `http/1.1`), for the connections
    /// of the promise path when HTTP/2 is allowed; made on first use.
    offering_h2: std::sync::OnceLock<Arc<ClientConfig>>,
    sessions: Option<Arc<ClientSessionMemoryCache>>,
    /// The leaf certificates (DER) whose server name JavaScript found right: a session resumed
    /// with one of them is not checked again, as Node does not check a resumed session. One
    /// resumed with another is: a session cached by a connection whose name was then refused
    /// (a ticket can arrive after the check) must not skip the check. JavaScript also takes a
    /// known certificate unchecked on a new session when the check is Node's own function
    /// (its verdict depends only on the certificate and the name, the pool key's).
    named: std::sync::Mutex<Vec<Vec<u8>>>,
    reject: bool,
}

/// How many leaf certificates a configuration remembers as named right (one server has one,
/// or a few while it rotates its certificate).
const NAMED_LEAVES: usize = 16;

tokio::task_local! {
    /// Why the chain of the handshake running in this task was not trusted: the shared
    /// verifier writes it here, the handshake reads it (a per-connection verifier would
    /// defeat resumption).
    static VERIFY_FAILURE: Cell<Option<VerifyFailure>>;

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
struct TaskKeyLog;

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

/// The Mozilla roots plus `NODE_EXTRA_CA_CERTS`, built once: the default trust until JavaScript
/// hands Node's own (see `lib/tls.js`), and where it cannot (a Node before 22.15 that trusts
/// OpenSSL's store, which it cannot list).
fn builtin_trust() -> Trust {
    static TRUST: OnceLock<Trust> = OnceLock::new();
    TRUST
        .get_or_init(|| {
            let mut roots = RootCertStore::empty();
            roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
            let mut extra = Vec::new();
            if let Some(path) = std::env::var_os("NODE_EXTRA_CA_CERTS") {
                // As Node: a file that cannot be read is ignored (Node warns and goes on).
                if let Ok(pem) = std::fs::read(path) {
                    for cert in CertificateDer::pem_slice_iter(&pem).flatten() {
                        let _ = roots.add(cert.clone());
                        extra.push(cert);
                    }
                }
            }
            Trust {
                roots: Arc::new(roots),
                certs: extra.into(),
            }
        })
        .clone()
}

/// Certificates trusted as roots: webpki's trust anchors, and the certificates themselves (one
/// presented as the server's own certificate is trusted as OpenSSL trusts it, even where
/// webpki refuses it as an anchor: a self-signed internal service).
#[derive(Clone, Debug)]
pub struct Trust {
    roots: Arc<RootCertStore>,
    certs: Arc<[CertificateDer<'static>]>,
}

impl Trust {
    fn of(certs: Vec<CertificateDer<'static>>) -> Trust {
        let mut roots = RootCertStore::empty();
        for cert in &certs {
            let _ = roots.add(cert.clone());
        }
        Trust {
            roots: Arc::new(roots),
            certs: certs.into(),
        }
    }

    /// The trust of a `ca` option's blobs (PEM, any number of certificates each, or DER).
    pub fn from_ca(blobs: &[Vec<u8>]) -> Result<Trust, Error> {
        let mut certs = Vec::new();
        for blob in blobs {
            certs.extend(certificates(blob, "ca")?);
        }
        Ok(Trust::of(certs))
    }

    /// Node's default trust, as `tls.getCACertificates('default')` lists it (PEM): Node's
    /// bundled roots, or the system's with `--use-system-ca`, plus `NODE_EXTRA_CA_CERTS`, or
    /// what `tls.setDefaultCACertificates()` set. Node has read each one already; one that
    /// does not read here is left out.
    pub fn node_default(pems: &[String]) -> Trust {
        let certs = pems
            .iter()
            .flat_map(|pem| CertificateDer::pem_slice_iter(pem.as_bytes()).flatten())
            .collect();
        Trust::of(certs)
    }

    /// How many certificates it trusts (beside webpki's built-in roots, for the default).
    pub fn certificates(&self) -> usize {
        self.certs.len()
    }

    /// The certificates it trusts whose subject is the issuer of `der`: where a chain that
    /// stops short of its root ends (the caller checks which one signed it).
    pub fn issuers_of(&self, der: &[u8]) -> Vec<&CertificateDer<'static>> {
        let Some(issuer) = der::parse(der).map(|f| f.issuer) else {
            return Vec::new();
        };
        self.certs
            .iter()
            .filter(|c| der::parse(c).is_some_and(|f| f.subject == issuer))
            .collect()
    }
}

/// Certificates in a `ca`/`cert` value: PEM (any number) or a single DER certificate.
fn certificates(blob: &[u8], option: &str) -> Result<Vec<CertificateDer<'static>>, Error> {
    if blob.first() == Some(&0x30) {
        return Ok(vec![CertificateDer::from(blob.to_vec())]);
    }
    let certs: Vec<_> = CertificateDer::pem_slice_iter(blob)
        .collect::<Result<_, _>>()
        .map_err(|e| config_error("ERR_OSSL_PEM_BAD_BASE64_DECODE", format!("{option}: {e}")))?;
    if certs.is_empty() {
        return Err(config_error(
            "ERR_OSSL_PEM_NO_START_LINE",
            format!("{option}: no certificate found"),
        ));
    }
    Ok(certs)
}

fn version(name: &str, option: &str) -> Result<u8, Error> {
    match name {
        "TLSv1" => Ok(10),
        "TLSv1.1" => Ok(11),
        "TLSv1.2" => Ok(12),
        "TLSv1.3" => Ok(13),
        _ => Err(config_error(
            "ERR_TLS_INVALID_PROTOCOL_VERSION",
            format!("{name} is not a valid TLS protocol version ({option})"),
        )),
    }
}

impl TlsConfig {
    pub fn new(opts: &TlsOptions) -> Result<TlsConfig, Error> {
        let pfx = opts
            .pfx
            .iter()
            .map(|(data, passphrase)| pkcs12::read(data, passphrase))
            .collect::<Result<Vec<_>, _>>()?;
        let Trust {
            mut roots,
            certs: mut trusted,
        } = match (&opts.ca, &opts.default_trust) {
            (Some(blobs), _) => Trust::from_ca(blobs)?,
            (None, Some(trust)) => (**trust).clone(),
            (None, None) => builtin_trust(),
        };
        // As Node: the certificates that come with a PFX's key are trusted too.
        if pfx.iter().any(|id| !id.authorities.is_empty()) {
            let mut extended = (*roots).clone();
            let mut certs = trusted.to_vec();
            for cert in pfx.iter().flat_map(|id| &id.authorities) {
                let _ = extended.add(cert.clone());
                certs.push(cert.clone());
            }
            roots = Arc::new(extended);
            trusted = certs.into();
        }

        let mut provider = ring::default_provider();
        let mut tls13_only = false;
        if let Some(ciphers) = &opts.ciphers {
            let selection = ciphers::select(ciphers)?;
            tls13_only = selection.tls13_only;
            // In the list's order: the client offers its suites by preference.
            let offered = std::mem::take(&mut provider.cipher_suites);
            provider.cipher_suites = selection
                .suites
                .iter()
                .filter_map(|want| offered.iter().find(|s| s.suite() == *want).copied())
                .collect();
        }

        let min = opts
            .min_version
            .as_deref()
            .map(|v| version(v, "minVersion"))
            .transpose()?
            .unwrap_or(12)
            // TLS 1.3 suites alone: Node raises the minimum version.
            .max(if tls13_only { 13 } else { 0 });
        let max = opts
            .max_version
            .as_deref()
            .map(|v| version(v, "maxVersion"))
            .transpose()?
            .unwrap_or(13);
        if max < 12 {
            return Err(Error::tls(
                "ERR_HYPERAGENT_UNSUPPORTED",
                "maxVersion: TLS versions before TLSv1.2 are not supported (rustls)",
            ));
        }
        if min > max {
            return Err(Error::tls(
                "ERR_TLS_PROTOCOL_VERSION_CONFLICT",
                "minVersion is greater than maxVersion",
            ));
        }
        let mut versions: Vec<&'static rustls::SupportedProtocolVersion> = Vec::new();
        if min <= 13 && max >= 13 {
            versions.push(&rustls::version::TLS13);
        }
        if min <= 12 && max >= 12 {
            versions.push(&rustls::version::TLS12);
        }

        let provider = Arc::new(provider);
        let algs = provider.signature_verification_algorithms;
        let revocation = revocation_verifier(&opts.crls, &roots, &provider)?;
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&versions)
            .map_err(|e| {
                Error::tls(
                    "ERR_HYPERAGENT_UNSUPPORTED",
                    format!("ciphers/versions: {e}"),
                )
            })?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NodeVerifier {
                roots,
                trusted,
                algs,
                reject: opts.reject_unauthorized,
                revocation,
            }));
        let mut config = match (pfx.into_iter().next(), opts.identities.as_slice()) {
            (Some(id), _) => builder
                .with_client_auth_cert(id.chain, id.key)
                .map_err(|e| {
                    config_error("ERR_OSSL_X509_KEY_VALUES_MISMATCH", format!("pfx: {e}"))
                })?,
            (None, []) => builder.with_no_client_auth(),
            (None, [(cert, key), ..]) => {
                let chain = certificates(cert, "cert")?;
                let key = PrivateKeyDer::from_pem_slice(key).map_err(|e| {
                    config_error(
                        "ERR_OSSL_UNSUPPORTED",
                        format!("key: cannot read the private key: {e}"),
                    )
                })?;
                builder.with_client_auth_cert(chain, key).map_err(|e| {
                    config_error(
                        "ERR_OSSL_X509_KEY_VALUES_MISMATCH",
                        format!("cert/key: {e}"),
                    )
                })?
            }
        };
        config.alpn_protocols = opts.alpn.clone();
        config.key_log = Arc::new(TaskKeyLog);
        let sessions = (opts.max_cached_sessions > 0)
            .then(|| Arc::new(ClientSessionMemoryCache::new(opts.max_cached_sessions)));
        config.resumption = match &sessions {
            Some(store) => Resumption::store(store.clone()),
            None => Resumption::disabled(),
        };
        Ok(TlsConfig {
            base: Arc::new(config),
            offering_h2: std::sync::OnceLock::new(),
            sessions,
            named: std::sync::Mutex::new(Vec::new()),
            reject: opts.reject_unauthorized,
        })
    }

    /// `rejectUnauthorized`: a chain (or, where Rust checks it, a name) that fails ends the
    /// handshake.
    pub fn rejects_unauthorized(&self) -> bool {
        self.reject
    }

    fn connector(&self, offer_h2: bool) -> TlsConnector {
        if !offer_h2 {
            return TlsConnector::from(self.base.clone());
        }
        let config = self.offering_h2.get_or_init(|| {
            let mut config = (*self.base).clone();
            config.alpn_protocols = alpn_with_h2(&self.base.alpn_protocols);
            Arc::new(config)
        });
        TlsConnector::from(config.clone())
    }

    /// Whether JavaScript is to check the name of the server of session `info`: not when the
    /// chain already failed (`rejectUnauthorized: false` let it pass), nor when the session
    /// was resumed with a certificate found right before (Node checks no resumed session).
    pub fn needs_name_check(info: &TlsInfo) -> bool {
        info.authorization_error.is_none() && !(info.name_known && info.resumed)
    }

    /// Remembers that the server of the session `info` was found to have the right name.
    pub fn name_verified(&self, info: &TlsInfo) {
        let Some(leaf) = info.peer_chain.first() else {
            return;
        };
        let mut named = self.named.lock().unwrap_or_else(|e| e.into_inner());
        if !named.contains(leaf) {
            if named.len() >= NAMED_LEAVES {
                named.remove(0);
            }
            named.push(leaf.clone());
        }
    }

    fn name_known(&self, leaf: Option<&Vec<u8>>) -> bool {
        let named = self.named.lock().unwrap_or_else(|e| e.into_inner());
        leaf.is_some_and(|leaf| named.contains(leaf))
    }

    /// Drops the sessions cached for `server` (its last connection ended in a TLS error).
    pub fn forget_sessions(&self, server: &ServerName<'static>) {
        if let Some(store) = &self.sessions {
            store.remove_tls12_session(server);
            // TLS 1.3 tickets are single-use: take them all.
            for _ in 0..64 {
                if store.take_tls13_ticket(server).is_none() {
                    break;
                }
            }
        }
    }
}

/// What a socket tells about its TLS session (`getProtocol()`, `getCipher()`, ...).
#[derive(Clone, Debug)]
pub struct TlsInfo {
    pub protocol: &'static str,
    /// OpenSSL's name and the IANA name of the cipher suite.
    pub cipher: (&'static str, &'static str),
    pub alpn: Option<Vec<u8>>,
    /// The server's certificate chain as sent, leaf first (DER).
    pub peer_chain: Vec<Vec<u8>>,
    pub resumed: bool,
    /// Why the chain is not trusted, when `rejectUnauthorized` is false and it is not.
    pub authorization_error: Option<VerifyFailure>,
    /// The SNI sent (none for IP addresses).
    pub servername: Option<String>,
    /// The name the session was made for: its cached sessions are kept under it.
    pub server: ServerName<'static>,
    /// The server's certificate is one whose name was found right before (see
    /// [`TlsConfig::name_verified`]).
    pub name_known: bool,
    /// Why the server's name did not check out, when `rejectUnauthorized` is false and the
    /// connection went on (the check runs in JavaScript, after the handshake).
    pub name_error: Option<String>,
}

/// Whether the server's certificate names `server`, as `tls.checkServerIdentity` asks (where
/// Rust checks a name itself: a proxy's). Node's error: `ERR_TLS_CERT_ALTNAME_INVALID`.
pub fn check_name(info: &TlsInfo, server: &ServerName<'_>) -> Result<(), Error> {
    let leaf = info
        .peer_chain
        .first()
        .map(|der| CertificateDer::from(der.as_slice()));
    let named = leaf.as_ref().is_some_and(|leaf| {
        ParsedCertificate::try_from(leaf)
            .is_ok_and(|cert| rustls::client::verify_server_name(&cert, server).is_ok())
    });
    if named {
        return Ok(());
    }
    let (name, host) = match server {
        ServerName::DnsName(name) => (
            name.as_ref().to_owned(),
            format!("Host: {}.", name.as_ref()),
        ),
        ServerName::IpAddress(ip) => {
            let ip = std::net::IpAddr::from(*ip).to_string();
            (ip.clone(), format!("IP: {ip}"))
        }
        _ => (String::new(), String::new()),
    };
    let err = Error::tls(
        "ERR_TLS_CERT_ALTNAME_INVALID",
        format!("Hostname/IP does not match certificate's altnames: {host} is not in the cert's altnames"),
    );
    // JavaScript words it as Node's check does, from the certificate itself.
    Err(match info.peer_chain.first() {
        Some(leaf) => err.with_name_check(name, leaf.clone()),
        None => err,
    })
}

/// The name rustls checks sessions and SNI against: the `servername` when it is a DNS name
/// (sent as SNI), otherwise the IP address (no SNI, as Node sends none for IPs).
pub fn server_name(servername: Option<&str>, peer: IpAddr) -> ServerName<'static> {
    match servername.filter(|s| !s.is_empty()) {
        Some(name) => match crate::transport::dns::parse_ip(name) {
            Some(ip) => ServerName::IpAddress(ip.into()),
            None => {
                ServerName::try_from(name.to_owned()).unwrap_or(ServerName::IpAddress(peer.into()))
            }
        },
        None => ServerName::IpAddress(peer.into()),
    }
}

/// A client TLS stream that reads the peer's close without a `close_notify` as the end of the
/// stream, as Node (OpenSSL) does, where rustls reports an error: HTTP's own framing still
/// finds a body cut short (a length or a chunk not met), and a body that ends with the
/// connection ends there, as it does in Node.
pub struct ClientStream<IO>(TlsStream<IO>);

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
fn alpn_with_h2(given: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let mut offered = vec![b"h2".to_vec()];
    match given {
        [] => offered.push(b"http/1.1".to_vec()),
        _ => offered.extend(given.iter().filter(|p| p.as_slice() != b"h2").cloned()),
    }
    offered
}

/// Runs the client handshake on a connected socket.
pub async fn handshake<IO>(
    io: IO,
    config: &TlsConfig,
    server: ServerName<'static>,
) -> Result<(ClientStream<IO>, TlsInfo), Error>
where
    IO: AsyncRead + AsyncWrite + Unpin,
{
    handshake_offering(io, config, server, false).await
}

/// Runs the client handshake on a connected socket, offering HTTP/2 in ALPN if `h2`.
pub async fn handshake_offering<IO>(
    io: IO,
    config: &TlsConfig,
    server: ServerName<'static>,
    h2: bool,
) -> Result<(ClientStream<IO>, TlsInfo), Error>
where
    IO: AsyncRead + AsyncWrite + Unpin,
{
    let connector = config.connector(h2);
    let servername = match &server {
        ServerName::DnsName(name) => Some(name.as_ref().to_owned()),
        _ => None,
    };
    let (result, failure) = VERIFY_FAILURE
        .scope(Cell::new(None), async {
            let result = connector.connect(server.clone(), io).await;
            (result, VERIFY_FAILURE.with(Cell::get))
        })
        .await;
    let stream = match result {
        Ok(stream) => stream,
        Err(err) => {
            config.forget_sessions(&server);
            return Err(handshake_error(&err, failure));
        }
    };
    let (_, conn) = stream.get_ref();
    let suite = conn.negotiated_cipher_suite();
    let peer_chain: Vec<Vec<u8>> = conn
        .peer_certificates()
        .map(|certs| certs.iter().map(|c| c.to_vec()).collect())
        .unwrap_or_default();
    let resumed = conn.handshake_kind() == Some(rustls::HandshakeKind::Resumed);
    let name_known = config.name_known(peer_chain.first());
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
        name_error: None,
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
        Some(other) => Error::tls(
            "ERR_SSL_PROTOCOL_ERROR",
            format!("TLS handshake failed: {other}"),
        ),
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

/// Verifies chains as OpenSSL would and remembers why one failed. With
/// `rejectUnauthorized: false` it records the failure and lets the handshake go on, as Node
/// does (the socket then reports `authorized: false` and the `authorizationError`).
#[derive(Debug)]
struct NodeVerifier {
    roots: Arc<RootCertStore>,
    /// The certificates trusted (see [`Trust`]): one of these presented as the server's own
    /// certificate is trusted as OpenSSL trusts it (a self-signed internal service).
    trusted: Arc<[CertificateDer<'static>]>,
    algs: WebPkiSupportedAlgorithms,
    reject: bool,
    /// With `crl`: the same chain check, with the revocation of each certificate checked too.
    revocation: Option<Arc<WebPkiServerVerifier>>,
}

/// The verifier that checks revocation, when `crl` gives CRLs: as OpenSSL with Node's flags,
/// every certificate of the chain but the trust anchor needs a CRL of its issuer, and an
/// expired one fails.
fn revocation_verifier(
    blobs: &[Vec<u8>],
    roots: &Arc<RootCertStore>,
    provider: &Arc<rustls::crypto::CryptoProvider>,
) -> Result<Option<Arc<WebPkiServerVerifier>>, Error> {
    if blobs.is_empty() {
        return Ok(None);
    }
    let unreadable = || config_error("ERR_CRYPTO_OPERATION_FAILED", "Failed to parse CRL");
    let mut crls = Vec::new();
    for blob in blobs {
        let found = CertificateRevocationListDer::pem_slice_iter(blob)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| unreadable())?;
        if found.is_empty() {
            return Err(unreadable());
        }
        crls.extend(found);
    }
    WebPkiServerVerifier::builder_with_provider(roots.clone(), provider.clone())
        .with_crls(crls)
        .enforce_revocation_expiration()
        .build()
        .map(Some)
        .map_err(|_| unreadable())
}

impl NodeVerifier {
    fn check(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        now: UnixTime,
    ) -> Option<VerifyFailure> {
        let now_secs = now.as_secs() as i64;
        let fields = der::parse(end_entity);
        // A certificate the user trusts explicitly, presented as the server's own: OpenSSL
        // accepts it (even marked CA:TRUE, which webpki refuses as an end entity).
        if self
            .trusted
            .iter()
            .any(|t| t.as_ref() == end_entity.as_ref())
        {
            return match fields {
                Some(f) if now_secs < f.not_before => Some(CERT_NOT_YET_VALID),
                Some(f) if now_secs > f.not_after => Some(CERT_HAS_EXPIRED),
                _ => None,
            };
        }
        let parsed = match ParsedCertificate::try_from(end_entity) {
            Ok(p) => p,
            // webpki takes no X.509 version 1 end entity: such a certificate, well formed but
            // not trusted as given in `ca`, fails as OpenSSL fails its chain (self-signed, or
            // no issuer found).
            Err(_) if fields.is_some() => return Some(untrusted_chain(end_entity, intermediates)),
            Err(_) => return Some(CERT_REJECTED),
        };
        let result = match &self.revocation {
            // The name is JavaScript's to check (`checkServerIdentity`), after the handshake.
            Some(verifier) => {
                match verifier.verify_server_cert(end_entity, intermediates, server_name, &[], now)
                {
                    Err(rustls::Error::InvalidCertificate(
                        CertificateError::NotValidForName
                        | CertificateError::NotValidForNameContext { .. },
                    )) => Ok(()),
                    other => other.map(|_| ()),
                }
            }
            None => rustls::client::verify_server_cert_signed_by_trust_anchor(
                &parsed,
                &self.roots,
                intermediates,
                now,
                self.algs.all,
            ),
        };
        match result {
            Ok(()) => None,
            Err(rustls::Error::InvalidCertificate(CertificateError::Revoked)) => Some(CERT_REVOKED),
            Err(rustls::Error::InvalidCertificate(CertificateError::UnknownRevocationStatus)) => {
                Some(UNABLE_TO_GET_CRL)
            }
            Err(rustls::Error::InvalidCertificate(
                CertificateError::ExpiredRevocationList
                | CertificateError::ExpiredRevocationListContext { .. },
            )) => Some(CRL_HAS_EXPIRED),
            Err(rustls::Error::InvalidCertRevocationList(_)) => Some(CRL_SIGNATURE_FAILURE),
            Err(rustls::Error::InvalidCertificate(e)) => Some(match e {
                CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
                    CERT_HAS_EXPIRED
                }
                CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
                    CERT_NOT_YET_VALID
                }
                CertificateError::BadSignature => CERT_SIGNATURE_FAILURE,
                _ => untrusted_chain(end_entity, intermediates),
            }),
            Err(_) => Some(untrusted_chain(end_entity, intermediates)),
        }
    }
}

/// OpenSSL's classification of a chain that leads to no trusted root.
fn untrusted_chain(
    end_entity: &CertificateDer<'_>,
    intermediates: &[CertificateDer<'_>],
) -> VerifyFailure {
    let leaf_self_issued = der::parse(end_entity).is_some_and(|f| f.self_issued());
    if intermediates.is_empty() {
        return if leaf_self_issued {
            DEPTH_ZERO_SELF_SIGNED_CERT
        } else {
            UNABLE_TO_VERIFY_LEAF_SIGNATURE
        };
    }
    let top_self_issued = intermediates
        .last()
        .and_then(|c| der::parse(c))
        .is_some_and(|f| f.self_issued());
    if top_self_issued {
        SELF_SIGNED_CERT_IN_CHAIN
    } else {
        UNABLE_TO_GET_ISSUER_CERT_LOCALLY
    }
}

impl NodeVerifier {
    /// The handshake's signature checked with the public key of a certificate webpki could
    /// not parse whole (X.509 version 1, which `openssl x509 -req -signkey` makes): the
    /// certificate itself has passed already (`rejectUnauthorized: false`, or trusted as
    /// given in `ca`), and OpenSSL checks such a signature the same way. `err`, webpki's
    /// refusal, stays the answer for anything else.
    fn signed_by_key(
        &self,
        err: rustls::Error,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
        tls13: bool,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        if !matches!(
            err,
            rustls::Error::InvalidCertificate(
                CertificateError::Other(_) | CertificateError::BadEncoding
            )
        ) {
            return Err(err);
        }
        let Some(spki) = der::spki(cert) else {
            return Err(err);
        };
        let spki = rustls::pki_types::SubjectPublicKeyInfoDer::from(spki);
        if tls13 {
            return rustls::crypto::verify_tls13_signature_with_raw_key(
                message, &spki, dss, &self.algs,
            );
        }
        let key = webpki::RawPublicKeyEntity::try_from(&spki).map_err(|_| err.clone())?;
        let algs = self
            .algs
            .mapping
            .iter()
            .find(|(scheme, _)| *scheme == dss.scheme)
            .map_or(&[][..], |(_, algs)| *algs);
        // TLS 1.2 names no single algorithm for a scheme: any that the key takes will do.
        if algs
            .iter()
            .any(|alg| key.verify_signature(*alg, message, dss.signature()).is_ok())
        {
            Ok(HandshakeSignatureValid::assertion())
        } else {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::BadSignature,
            ))
        }
    }
}

impl ServerCertVerifier for NodeVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let failure = self.check(end_entity, intermediates, server_name, now);
        let _ = VERIFY_FAILURE.try_with(|slot| slot.set(failure));
        match failure {
            Some(f) if self.reject => Err(rustls::Error::InvalidCertificate(
                CertificateError::Other(rustls::OtherError(Arc::new(VerifyError(f)))),
            )),
            _ => Ok(ServerCertVerified::assertion()),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algs)
            .or_else(|e| self.signed_by_key(e, message, cert, dss, false))
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algs)
            .or_else(|e| self.signed_by_key(e, message, cert, dss, true))
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algs.supported_schemes()
    }
}

#[derive(Debug)]
struct VerifyError(VerifyFailure);

impl std::fmt::Display for VerifyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0.message)
    }
}

impl std::error::Error for VerifyError {}

#[cfg(test)]
pub(crate) mod tests;
