//! TLS with rustls, behaving as Node's `tls.connect` does where users can tell: the options of
//! `https.Agent`, OpenSSL's verification error codes, acceptance of a self-signed server
//! certificate passed as `ca`, session resumption, and the details sockets expose afterwards.
//!
//! Names are checked as in Node: by `checkServerIdentity` (in JavaScript, with Node's own
//! function by default) after the handshake, so the error, `ERR_TLS_CERT_ALTNAME_INVALID` with
//! its `reason`, `host` and `cert`, is Node's exactly. Where Node's own function applies, a
//! name it surely refuses also fails the handshake itself, as Node's fails before its client
//! has finished (see `identity`).

mod ciphers;
pub mod der;
mod groups;
mod identity;
mod names;
mod pkcs12;
mod sessions;
mod sigalgs;
mod stream;
mod verify;

use std::net::IpAddr;
use std::sync::{Arc, OnceLock};

use rustls::client::Resumption;
use rustls::crypto::ring;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::server::ParsedCertificate;
use rustls::{ClientConfig, RootCertStore};
use tokio_rustls::TlsConnector;

use crate::error::Error;

use stream::{alpn_with_h2, TaskKeyLog};
use verify::{revocation_verifier, NodeVerifier};

pub use names::{alert_error, cipher_names, ephemeral_key, handshake_alert_error};
pub use sessions::Ledger;
pub use stream::{handshake_offering, logging_keys, read_error, ClientStream};
pub use verify::VerifyFailure;

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
    /// `ecdhCurve`: key exchange groups, `:`-separated, or `auto`.
    pub ecdh_curve: Option<String>,
    /// `sigalgs`: signature schemes, `:`-separated.
    pub sigalgs: Option<String>,
    /// `ALPNProtocols`.
    pub alpn: Vec<Vec<u8>>,
    /// `maxCachedSessions` (0 turns resumption off): how many servers may hold sessions over
    /// all the configurations that share a [`Ledger`].
    pub max_cached_sessions: usize,
}

/// A configuration error, named as Node would name it.
fn config_error(code: &str, message: impl Into<String>) -> Error {
    Error::tls(code, message)
}

/// A client certificate and key that rustls refused (`from`: the options they came from):
/// their key does not match, or, `weak`, the certificate's RSA key is smaller than rustls signs
/// with (OpenSSL's error where its security level refuses such a key).
fn identity_error(weak: bool, from: &str, err: &rustls::Error) -> Error {
    if weak {
        return config_error(
            "ERR_SSL_EE_KEY_TOO_SMALL",
            format!("{from}: ee key too small: RSA keys of fewer than 2048 bits are not supported"),
        );
    }
    config_error(
        "ERR_OSSL_X509_KEY_VALUES_MISMATCH",
        format!("{from}: {err}"),
    )
}

/// The client certificate and its key, as the handshake presents them. rustls'
/// `with_client_auth_cert` would check that the key is the certificate's by parsing the leaf
/// with webpki, which takes no X.509 version 1 certificate (what `openssl x509 -req` makes
/// without extensions, and OpenSSL, so Node, presents). The check here is the same, the key's
/// public half against the leaf's `subjectPublicKeyInfo`, read by [`der::spki`]. A key whose
/// public half cannot be told is taken, as rustls takes it.
fn client_identity(
    provider: &rustls::crypto::CryptoProvider,
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
) -> Result<Arc<dyn rustls::client::ResolvesClientCert>, rustls::Error> {
    let key = provider.key_provider.load_private_key(key)?;
    let leaf = chain
        .first()
        .ok_or(rustls::Error::NoCertificatesPresented)?;
    if let Some(public) = key.public_key() {
        let Some(spki) = der::spki(leaf) else {
            return Err(rustls::CertificateError::BadEncoding.into());
        };
        if spki != public.as_ref() {
            return Err(rustls::InconsistentKeys::KeyMismatch.into());
        }
    }
    let certified = rustls::sign::CertifiedKey::new(chain, key);
    Ok(Arc::new(rustls::sign::SingleCertAndKey::from(certified)))
}

/// A prepared client configuration for one pool key, shared by its connections (rustls
/// resumes a session only with the configuration, and verifier, that made it).
pub struct TlsConfig {
    base: Arc<ClientConfig>,
    /// The same, offering HTTP/2 in ALPN (`h2` first, then `http/1.1`), for the connections
    /// of the promise path when HTTP/2 is allowed; made on first use.
    offering_h2: std::sync::OnceLock<Arc<ClientConfig>>,
    sessions: Option<Arc<sessions::Store>>,
    /// The leaf certificates (DER) whose server name JavaScript found right: a session resumed
    /// with one of them is not checked again, as Node does not check a resumed session. One
    /// resumed with another is: a session cached by a connection whose name was then refused
    /// (a ticket can arrive after the check) must not skip the check. JavaScript also takes a
    /// known certificate unchecked on a new session when the check is Node's own function
    /// (its verdict depends only on the certificate and the name, the pool key's): only one
    /// that Node's own check found right (the flag), not one a check of the program's let
    /// pass.
    named: std::sync::Mutex<Vec<(Vec<u8>, bool)>>,
    reject: bool,
    /// The client certificate's leaf (DER), when one is configured: `getCertificate()`.
    local_cert: Option<Arc<[u8]>>,
    /// Its options leave no version this client speaks (see [`TlsConfig::unspeakable`]).
    unspeakable: bool,
}

/// The size of a pool key's store of sessions (see [`TlsConfig::sharing`]): room for two
/// servers' TLS 1.3 tickets.
const KEY_STORE: usize = 16;

/// How many leaf certificates a configuration remembers as named right (one server has one,
/// or a few while it rotates its certificate).
const NAMED_LEAVES: usize = 16;

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
    pub fn from_ca(blobs: &[Vec<u8>]) -> Trust {
        Trust::of(
            blobs
                .iter()
                .flat_map(|blob| ca_certificates(blob))
                .collect(),
        )
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

/// The certificates of a `ca` value as Node reads one (OpenSSL's PEM reader): a single DER
/// certificate, or its PEM certificates in order up to the first that does not read. What is
/// not a certificate (text, a key) is passed over, and a value with none is no error: it adds
/// nothing to the trust, and a server it alone would have vouched for fails verification.
fn ca_certificates(blob: &[u8]) -> Vec<CertificateDer<'static>> {
    if blob.first() == Some(&0x30) {
        return vec![CertificateDer::from(blob.to_vec())];
    }
    CertificateDer::pem_slice_iter(blob)
        .map_while(Result::ok)
        .collect()
}

/// Certificates in a `cert` value: PEM (any number) or a single DER certificate.
fn cert_chain(blob: &[u8]) -> Result<Vec<CertificateDer<'static>>, Error> {
    if blob.first() == Some(&0x30) {
        return Ok(vec![CertificateDer::from(blob.to_vec())]);
    }
    let certs: Vec<_> = CertificateDer::pem_slice_iter(blob)
        .collect::<Result<_, _>>()
        .map_err(|e| config_error("ERR_OSSL_PEM_BAD_BASE64_DECODE", format!("cert: {e}")))?;
    if certs.is_empty() {
        return Err(config_error(
            "ERR_OSSL_PEM_NO_START_LINE",
            "cert: no certificate found",
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
    /// A configuration whose sessions are bounded by its own `maxCachedSessions`, for as many
    /// servers as that lets it reach.
    pub fn new(opts: &TlsOptions) -> Result<TlsConfig, Error> {
        let ledger = Ledger::new(opts.max_cached_sessions);
        Self::with_store(opts, &ledger, opts.max_cached_sessions)
    }

    /// A pool key's configuration, whose sessions count in `ledger`, with those of the other
    /// keys of its agent (see [`sessions`]). A key's connections go to one server name, so its
    /// store is sized for that, whatever the limit (rustls allocates a store's room at once:
    /// `maxCachedSessions: Infinity` would cost gigabytes per key).
    pub fn sharing(opts: &TlsOptions, ledger: &Arc<Ledger>) -> Result<TlsConfig, Error> {
        Self::with_store(opts, ledger, opts.max_cached_sessions.min(KEY_STORE))
    }

    /// `store` is the size of its store of sessions, as rustls counts it (TLS 1.3 tickets, 8 per
    /// server).
    fn with_store(
        opts: &TlsOptions,
        ledger: &Arc<Ledger>,
        store: usize,
    ) -> Result<TlsConfig, Error> {
        let pfx = opts
            .pfx
            .iter()
            .map(|(data, passphrase)| pkcs12::read(data, passphrase))
            .collect::<Result<Vec<_>, _>>()?;
        let Trust {
            mut roots,
            certs: mut trusted,
        } = match (&opts.ca, &opts.default_trust) {
            (Some(blobs), _) => Trust::from_ca(blobs),
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
        if let Some(list) = &opts.ecdh_curve {
            provider.kx_groups = groups::select(list, &provider.kx_groups)?;
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
        // Only versions before TLS 1.2 left: a configuration whose connections fail their
        // handshake, rather than an error at once, as Node's fail with the minimum left at TLS
        // 1.2 (with it lowered, Node offers 1.0 or 1.1, which a server of today refuses).
        let unspeakable = max < 12;
        let (min, max) = if unspeakable { (12, 12) } else { (min, max) };
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
        let schemes: Option<Arc<[rustls::SignatureScheme]>> = opts
            .sigalgs
            .as_deref()
            .map(|list| sigalgs::select(list, &algs.supported_schemes()))
            .transpose()?
            .map(Arc::from);
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
                schemes: schemes.clone(),
            }));
        let mut local_cert = None;
        let mut config = match (pfx.into_iter().next(), opts.identities.as_slice()) {
            (Some(id), _) => {
                let weak = id.chain.first().is_some_and(verify::weak_rsa);
                local_cert = id.chain.first().map(|c| Arc::from(c.as_ref()));
                let identity = client_identity(&provider, id.chain, id.key)
                    .map_err(|e| identity_error(weak, "pfx", &e))?;
                builder.with_client_cert_resolver(identity)
            }
            (None, []) => builder.with_no_client_auth(),
            (None, [(cert, key), ..]) => {
                let chain = cert_chain(cert)?;
                let key = PrivateKeyDer::from_pem_slice(key).map_err(|e| {
                    config_error(
                        "ERR_OSSL_UNSUPPORTED",
                        format!("key: cannot read the private key: {e}"),
                    )
                })?;
                let weak = chain.first().is_some_and(verify::weak_rsa);
                local_cert = chain.first().map(|c| Arc::from(c.as_ref()));
                let identity = client_identity(&provider, chain, key)
                    .map_err(|e| identity_error(weak, "cert/key", &e))?;
                builder.with_client_cert_resolver(identity)
            }
        };
        if let Some(schemes) = schemes {
            config.client_auth_cert_resolver = Arc::new(sigalgs::Restricted {
                inner: config.client_auth_cert_resolver.clone(),
                schemes,
            });
        }
        config.alpn_protocols = opts.alpn.clone();
        config.key_log = Arc::new(TaskKeyLog);
        let sessions = (opts.max_cached_sessions > 0).then(|| ledger.store(store));
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
            local_cert,
            unspeakable,
        })
    }

    /// Why a connection with this configuration fails before its handshake starts: its options
    /// leave no version rustls speaks (`maxVersion` before TLS 1.2, or `secureOptions` turning
    /// off both 1.2 and 1.3), in OpenSSL's code and words, as Node's fails then.
    pub fn unspeakable(&self) -> Option<Error> {
        self.unspeakable.then(|| {
            Error::tls(
                "ERR_SSL_NO_PROTOCOLS_AVAILABLE",
                "no protocols available: the TLS options leave neither TLS 1.2 nor TLS 1.3, \
                 the versions hyperagent speaks (rustls)",
            )
        })
    }

    /// The client certificate's leaf (DER), when one is configured.
    pub fn local_cert(&self) -> Option<Arc<[u8]>> {
        self.local_cert.clone()
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

    /// Remembers that the server of the session `info` was found to have the right name, by
    /// Node's own check (`by_node`) or by a check of the program's.
    pub fn name_verified(&self, info: &TlsInfo, by_node: bool) {
        let Some(leaf) = info.peer_chain.first() else {
            return;
        };
        let mut named = self.named.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(entry) = named.iter_mut().find(|(l, _)| l == leaf) {
            entry.1 |= by_node;
            return;
        }
        if named.len() >= NAMED_LEAVES {
            named.remove(0);
        }
        named.push((leaf.clone(), by_node));
    }

    /// Whether `leaf` was found named right before, and whether by Node's own check.
    fn name_known(&self, leaf: Option<&Vec<u8>>) -> (bool, bool) {
        let named = self.named.lock().unwrap_or_else(|e| e.into_inner());
        leaf.and_then(|leaf| named.iter().find(|(l, _)| l == leaf))
            .map_or((false, false), |&(_, by_node)| (true, by_node))
    }

    /// Applies what the check of the name of the server of session `info` found (see
    /// [`NameCheck`]): a right name is remembered, so that a session resumed with the same
    /// certificate needs no check; a wrong one drops the server's cached sessions, so that its
    /// next connection is checked anew (as Node's https.Agent evicts them).
    pub fn name_checked(&self, info: &TlsInfo, check: NameCheck) {
        match check {
            NameCheck::Right => self.name_verified(info, true),
            NameCheck::Passed => self.name_verified(info, false),
            NameCheck::LetPass => {}
            NameCheck::Wrong => self.forget_sessions(&info.server),
        }
    }

    /// Drops the sessions cached for `server` (its last connection ended in a TLS error).
    pub fn forget_sessions(&self, server: &ServerName<'static>) {
        if let Some(store) = &self.sessions {
            store.forget(server);
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
    /// ... by Node's own check: a new session with it needs no check by that function.
    pub name_known_by_node: bool,
    /// Why the server's name did not check out, when `rejectUnauthorized` is false and the
    /// connection went on (the check runs in JavaScript, after the handshake).
    pub name_error: Option<String>,
    /// The group of the handshake's ephemeral key exchange (none for a TLS 1.2 resumption).
    pub key_exchange: Option<rustls::NamedGroup>,
    /// The client certificate's leaf (DER), when one is configured (sent or not).
    pub local_cert: Option<Arc<[u8]>>,
}

/// What the check of a server's name in JavaScript (`checkServerIdentity`, after the
/// handshake, as Node's `tls.connect` runs it) found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NameCheck {
    /// Right, as Node's own check found it.
    Right,
    /// A check of the program's let it pass: right for a session resumed with it (Node checks
    /// none), not for Node's own check on a new one.
    Passed,
    /// Wrong, but `rejectUnauthorized: false` lets the connection go on.
    LetPass,
    /// Wrong (or the check could not run): the connection fails.
    Wrong,
}

impl NameCheck {
    /// Whether the connection goes on.
    pub fn goes_on(self) -> bool {
        self != NameCheck::Wrong
    }
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
    Err(altname_error(server, info.peer_chain.clone()))
}

/// `ERR_TLS_CERT_ALTNAME_INVALID` for `server`, refused for the first certificate of `chain`
/// (DER), which JavaScript words as Node's check does.
fn altname_error(server: &ServerName<'_>, chain: Vec<Vec<u8>>) -> Error {
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
    if chain.is_empty() {
        return err;
    }
    err.with_name_check(name, chain)
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

#[cfg(test)]
pub(crate) mod tests;
