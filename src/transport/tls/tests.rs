//! Handshakes against a rustls server on loopback, with the committed fixture certificates
//! (`__test__/fixtures/tls`), verified for real.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use rustls::client::danger::ServerCertVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::ServerConfig;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;

use super::*;

pub(crate) fn fixture(name: &str) -> Vec<u8> {
    let path = format!(
        "{}/__test__/fixtures/tls/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

pub(crate) fn chain(name: &str) -> Vec<CertificateDer<'static>> {
    CertificateDer::pem_slice_iter(&fixture(name))
        .map(|c| c.unwrap())
        .collect()
}

pub(crate) fn key(name: &str) -> PrivateKeyDer<'static> {
    PrivateKeyDer::from_pem_slice(&fixture(name)).unwrap()
}

static BOTH: [&rustls::SupportedProtocolVersion; 2] =
    [&rustls::version::TLS13, &rustls::version::TLS12];
static TLS12_ONLY: [&rustls::SupportedProtocolVersion; 1] = [&rustls::version::TLS12];

struct Server {
    cert: &'static str,
    key: &'static str,
    versions: &'static [&'static rustls::SupportedProtocolVersion],
    client_ca: Option<&'static str>,
    alpn: Vec<Vec<u8>>,
    /// Whether each handshake it served succeeded, in the order they ended.
    handshakes: tokio::sync::mpsc::UnboundedSender<bool>,
}

impl Server {
    fn new(cert: &'static str, key: &'static str) -> Self {
        Server {
            cert,
            key,
            versions: &BOTH,
            client_ca: None,
            alpn: Vec::new(),
            handshakes: tokio::sync::mpsc::unbounded_channel().0,
        }
    }

    /// Serves `connections` handshakes, answering "pong" to each "ping"; returns the port.
    async fn start(self, connections: usize) -> u16 {
        let builder = ServerConfig::builder_with_protocol_versions(self.versions);
        let builder = match self.client_ca {
            Some(ca) => {
                let mut roots = RootCertStore::empty();
                for c in chain(ca) {
                    roots.add(c).unwrap();
                }
                builder.with_client_cert_verifier(
                    WebPkiClientVerifier::builder(Arc::new(roots))
                        .build()
                        .unwrap(),
                )
            }
            None => builder.with_no_client_auth(),
        };
        let mut config = builder
            .with_single_cert(chain(self.cert), key(self.key))
            .unwrap();
        config.alpn_protocols = self.alpn;
        config.ticketer = rustls::crypto::ring::Ticketer::new().unwrap();
        let acceptor = TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let handshakes = self.handshakes;
        tokio::spawn(async move {
            for _ in 0..connections {
                let Ok((tcp, _)) = listener.accept().await else {
                    return;
                };
                let acceptor = acceptor.clone();
                let handshakes = handshakes.clone();
                tokio::spawn(async move {
                    let accepted = acceptor.accept(tcp).await;
                    let _ = handshakes.send(accepted.is_ok());
                    if let Ok(mut tls) = accepted {
                        let mut buf = [0u8; 4];
                        if tls.read_exact(&mut buf).await.is_ok() {
                            let _ = tls.write_all(b"pong").await;
                            let _ = tls.flush().await;
                        }
                    }
                });
            }
        });
        port
    }
}

pub(crate) fn options(ca: &[&str]) -> TlsOptions {
    TlsOptions {
        ca: (!ca.is_empty()).then(|| ca.iter().map(|c| fixture(c)).collect()),
        reject_unauthorized: true,
        max_cached_sessions: 100,
        ..TlsOptions::default()
    }
}

const LOCALHOST: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

/// A handshake offering no HTTP/2, its name left to JavaScript (a check of the program's).
async fn handshake(
    tcp: TcpStream,
    config: &TlsConfig,
    server: ServerName<'static>,
) -> Result<(ClientStream<TcpStream>, TlsInfo), Error> {
    handshake_offering(tcp, config, server, false, false).await
}

async fn connect(
    port: u16,
    config: &TlsConfig,
    servername: Option<&str>,
) -> Result<TlsInfo, Error> {
    let tcp = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let (mut stream, info) = handshake(tcp, config, server_name(servername, LOCALHOST)).await?;
    stream.write_all(b"ping").await.unwrap();
    let mut buf = [0u8; 4];
    stream.read_exact(&mut buf).await.unwrap();
    assert_eq!(&buf, b"pong");
    Ok(info)
}

async fn failure(server: Server, ca: &[&str]) -> String {
    let port = server.start(1).await;
    let config = TlsConfig::new(&options(ca)).unwrap();
    let err = connect(port, &config, Some("localhost")).await.unwrap_err();
    format!("{} {}", err.code(), err.message())
}

#[tokio::test]
async fn a_good_chain_verifies_and_reports_the_session() {
    let port = Server::new("localhost-chain.pem", "localhost-key.pem")
        .start(1)
        .await;
    let config = TlsConfig::new(&options(&["ca.pem"])).unwrap();
    let info = connect(port, &config, Some("localhost")).await.unwrap();
    assert_eq!(info.protocol, "TLSv1.3");
    assert_eq!(info.cipher.0, info.cipher.1, "TLS 1.3 suites have one name");
    assert!(info.cipher.0.starts_with("TLS_AES_"), "{:?}", info.cipher);
    assert_eq!(info.peer_chain.len(), 2);
    assert_eq!(info.authorization_error, None);
    assert_eq!(info.servername.as_deref(), Some("localhost"));
    assert!(!info.resumed);
}

#[tokio::test]
async fn sessions_resume_on_the_next_connection() {
    let port = Server::new("localhost-chain.pem", "localhost-key.pem")
        .start(2)
        .await;
    let config = TlsConfig::new(&options(&["ca.pem"])).unwrap();
    assert!(
        !connect(port, &config, Some("localhost"))
            .await
            .unwrap()
            .resumed
    );
    assert!(
        connect(port, &config, Some("localhost"))
            .await
            .unwrap()
            .resumed
    );
}

/// Whether a connection to `port` with `config` resumed a session.
async fn resumes(port: u16, config: &TlsConfig) -> bool {
    connect(port, config, Some("localhost"))
        .await
        .unwrap()
        .resumed
}

#[tokio::test]
async fn sessions_are_bounded_across_the_configurations_of_one_ledger() {
    let a = Server::new("localhost-chain.pem", "localhost-key.pem")
        .start(5)
        .await;
    let b = Server::new("localhost-chain.pem", "localhost-key.pem")
        .start(5)
        .await;
    // Two pool keys of one agent with maxCachedSessions 1, as Node's https.Agent counts them:
    // one server's sessions in all, the first cached evicted for the next.
    let mut opts = options(&["ca.pem"]);
    opts.max_cached_sessions = 1;
    let ledger = Ledger::new(1);
    let first = TlsConfig::sharing(&opts, &ledger).unwrap();
    let second = TlsConfig::sharing(&opts, &ledger).unwrap();
    assert!(!resumes(a, &first).await);
    assert!(resumes(a, &first).await);
    assert_eq!(ledger.servers(), 1);
    assert!(!resumes(b, &second).await);
    assert_eq!(ledger.servers(), 1);
    assert!(
        !resumes(a, &first).await,
        "evicted by the other key's session"
    );
    // A configuration dropped (its key swept) leaves the count with its sessions.
    drop(first);
    assert_eq!(ledger.servers(), 0);

    // Room for both: each keeps its own.
    opts.max_cached_sessions = 2;
    let ledger = Ledger::new(2);
    let first = TlsConfig::sharing(&opts, &ledger).unwrap();
    assert!(!resumes(a, &first).await);
    assert!(
        !resumes(b, &second).await,
        "its sessions went with the first ledger's eviction"
    );
    let third = TlsConfig::sharing(&opts, &ledger).unwrap();
    assert!(!resumes(b, &third).await);
    assert_eq!(ledger.servers(), 2);
    assert!(resumes(a, &first).await);
    assert!(resumes(b, &third).await);
    // A server whose name was refused gives its place up with its sessions.
    first.forget_sessions(&ServerName::try_from("localhost").unwrap());
    assert_eq!(ledger.servers(), 1);
}

#[test]
fn a_keys_store_is_sized_for_its_server_whatever_the_agents_limit() {
    // maxCachedSessions: Infinity reaches Rust as 2^32 - 1; rustls makes a store's room at once.
    let mut opts = options(&["ca.pem"]);
    opts.max_cached_sessions = u32::MAX as usize;
    let ledger = Ledger::new(opts.max_cached_sessions);
    let key = TlsConfig::sharing(&opts, &ledger).unwrap();
    assert_eq!(key.sessions.as_ref().unwrap().size(), KEY_STORE);
    // A smaller limit is the store's size; none is no store (resumption off).
    opts.max_cached_sessions = 1;
    let one = TlsConfig::sharing(&opts, &ledger).unwrap();
    assert_eq!(one.sessions.as_ref().unwrap().size(), 1);
    opts.max_cached_sessions = 0;
    assert!(TlsConfig::sharing(&opts, &ledger)
        .unwrap()
        .sessions
        .is_none());
}

#[tokio::test]
async fn a_name_a_programs_check_let_pass_stands_for_resumption_not_for_nodes_own_check() {
    let port = Server::new("localhost-chain.pem", "localhost-key.pem")
        .start(3)
        .await;
    let config = TlsConfig::new(&options(&["ca.pem"])).unwrap();
    let first = connect(port, &config, Some("localhost")).await.unwrap();
    config.name_checked(&first, NameCheck::Passed);
    assert!(NameCheck::Passed.goes_on());
    let resumed = connect(port, &config, Some("localhost")).await.unwrap();
    assert!(resumed.resumed && resumed.name_known && !resumed.name_known_by_node);
    assert!(
        !TlsConfig::needs_name_check(&resumed),
        "a resumed session is not checked"
    );
    // Node's own check finding it right later is remembered too.
    config.name_checked(&resumed, NameCheck::Right);
    let again = connect(port, &config, Some("localhost")).await.unwrap();
    assert!(again.name_known && again.name_known_by_node);
}

#[tokio::test]
async fn a_right_name_is_remembered_and_a_wrong_one_drops_the_servers_sessions() {
    let port = Server::new("localhost-chain.pem", "localhost-key.pem")
        .start(3)
        .await;
    let config = TlsConfig::new(&options(&["ca.pem"])).unwrap();
    let first = connect(port, &config, Some("localhost")).await.unwrap();
    assert!(TlsConfig::needs_name_check(&first));
    config.name_checked(&first, NameCheck::Right);
    let resumed = connect(port, &config, Some("localhost")).await.unwrap();
    assert!(resumed.resumed && resumed.name_known);
    assert!(
        !TlsConfig::needs_name_check(&resumed),
        "its certificate's name was found right"
    );
    assert!(
        resumed.name_known_by_node,
        "Node's own check found it right"
    );
    config.name_checked(&resumed, NameCheck::Wrong);
    assert!(!NameCheck::Wrong.goes_on() && NameCheck::LetPass.goes_on());
    let fresh = connect(port, &config, Some("localhost")).await.unwrap();
    assert!(!fresh.resumed, "the server's sessions were dropped");
}

/// The labels and client randoms of a key log, checking each line's shape.
fn keylog_lines(log: &[u8]) -> Vec<(String, String)> {
    let text = std::str::from_utf8(log).unwrap();
    assert!(text.ends_with('\n'), "{text:?}");
    text.lines()
        .map(|line| {
            let parts: Vec<&str> = line.split(' ').collect();
            assert_eq!(parts.len(), 3, "{line}");
            assert_eq!(parts[1].len(), 64, "{line}");
            assert!(parts[2].len() >= 64, "{line}");
            assert!(parts[1..].iter().all(|h| h
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())));
            (parts[0].to_owned(), parts[1].to_owned())
        })
        .collect()
}

fn sorted_labels(lines: &[(String, String)]) -> Vec<&str> {
    let mut labels: Vec<&str> = lines.iter().map(|(l, _)| l.as_str()).collect();
    labels.sort_unstable();
    labels
}

#[tokio::test]
async fn keys_are_logged_for_the_handshakes_that_ask_only() {
    let port = Server::new("localhost-chain.pem", "localhost-key.pem")
        .start(4)
        .await;
    let mut opts = options(&["ca.pem"]);
    opts.max_cached_sessions = 0;
    let config = TlsConfig::new(&opts).unwrap();
    let on = Arc::new(AtomicBool::new(true));
    let off = Arc::new(AtomicBool::new(false));
    let localhost = Some("localhost");
    // Handshakes of one configuration at once, in one task: each keeps its own keys.
    let ((a, a_log), (b, b_log), (c, c_log), d) = tokio::join!(
        logging_keys(on.clone(), connect(port, &config, localhost)),
        logging_keys(on.clone(), connect(port, &config, localhost)),
        logging_keys(off, connect(port, &config, localhost)),
        connect(port, &config, localhost),
    );
    for result in [a, b, c, d] {
        assert_eq!(result.unwrap().protocol, "TLSv1.3");
    }
    assert!(c_log.is_empty());
    let (a, b) = (keylog_lines(&a_log), keylog_lines(&b_log));
    for lines in [&a, &b] {
        assert_eq!(
            sorted_labels(lines),
            [
                "CLIENT_HANDSHAKE_TRAFFIC_SECRET",
                "CLIENT_TRAFFIC_SECRET_0",
                "EXPORTER_SECRET",
                "SERVER_HANDSHAKE_TRAFFIC_SECRET",
                "SERVER_TRAFFIC_SECRET_0",
            ]
        );
        assert!(lines.iter().all(|(_, random)| *random == lines[0].1));
    }
    assert_ne!(a[0].1, b[0].1, "two handshakes, two client randoms");
}

#[tokio::test]
async fn a_failed_handshake_keeps_the_keys_it_had() {
    // The certificate is checked after the handshake keys are made (TLS 1.3).
    let port = Server::new("localhost-chain.pem", "localhost-key.pem")
        .start(1)
        .await;
    let config = TlsConfig::new(&options(&["other-ca.pem"])).unwrap();
    let on = Arc::new(AtomicBool::new(true));
    let (result, log) = logging_keys(on, connect(port, &config, Some("localhost"))).await;
    assert_eq!(
        result.unwrap_err().code(),
        "UNABLE_TO_GET_ISSUER_CERT_LOCALLY"
    );
    assert_eq!(
        sorted_labels(&keylog_lines(&log)),
        [
            "CLIENT_HANDSHAKE_TRAFFIC_SECRET",
            "SERVER_HANDSHAKE_TRAFFIC_SECRET"
        ]
    );
}

#[tokio::test]
async fn tls_1_2_reports_openssl_cipher_names() {
    let mut server = Server::new("localhost-chain.pem", "localhost-key.pem");
    server.versions = &TLS12_ONLY;
    let port = server.start(1).await;
    let config = TlsConfig::new(&options(&["ca.pem"])).unwrap();
    let info = connect(port, &config, Some("localhost")).await.unwrap();
    assert_eq!(info.protocol, "TLSv1.2");
    assert!(info.cipher.0.starts_with("ECDHE-"), "{:?}", info.cipher);
    assert!(info.cipher.1.starts_with("TLS_ECDHE_"), "{:?}", info.cipher);
}

#[tokio::test]
async fn a_self_signed_certificate_given_as_ca_is_trusted_as_node_trusts_it() {
    // Made by `openssl req -x509`: marked CA:TRUE, which webpki refuses as an end entity.
    let port = Server::new("self-signed.pem", "self-signed-key.pem")
        .start(1)
        .await;
    let config = TlsConfig::new(&options(&["self-signed.pem"])).unwrap();
    connect(port, &config, Some("localhost")).await.unwrap();
}

#[test]
fn a_ca_value_is_read_as_node_reads_it_up_to_its_first_unreadable_certificate() {
    let ca = fixture("ca.pem");
    let other = fixture("other-ca.pem");
    let truncated = ca[..ca.len() / 2].to_vec();
    let count = |blobs: &[Vec<u8>]| Trust::from_ca(blobs).certificates();
    assert_eq!(count(&[[ca.clone(), other.clone()].concat()]), 2);
    assert_eq!(count(&[[ca.clone(), truncated.clone()].concat()]), 1);
    assert_eq!(count(&[[truncated, ca.clone()].concat()]), 0);
    assert_eq!(count(&[b"nope".to_vec(), Vec::new()]), 0);
    assert_eq!(count(&[fixture("ca-key.pem")]), 0);
    assert_eq!(count(&[[fixture("ca-key.pem"), ca.clone()].concat()]), 1);
    assert_eq!(count(&[ca, b"nope".to_vec()]), 1);
}

#[tokio::test]
async fn node_default_trust_replaces_the_builtin_roots_and_trusts_as_ca_trusts() {
    let pem = |name: &str| String::from_utf8(fixture(name)).unwrap();
    // As `tls.getCACertificates('default')` lists them, with one Node read and we cannot.
    let trust = Trust::node_default(&[pem("ca.pem"), pem("self-signed.pem"), "junk".into()]);
    assert_eq!(trust.certificates(), 2);
    let opts = TlsOptions {
        default_trust: Some(Arc::new(trust)),
        ..options(&[])
    };
    let config = TlsConfig::new(&opts).unwrap();
    let port = Server::new("localhost-chain.pem", "localhost-key.pem")
        .start(1)
        .await;
    connect(port, &config, Some("localhost")).await.unwrap();
    // A self-signed certificate in the default set is trusted as OpenSSL trusts it.
    let port = Server::new("self-signed.pem", "self-signed-key.pem")
        .start(1)
        .await;
    connect(port, &config, Some("localhost")).await.unwrap();
    // `ca` still replaces the default.
    let opts = TlsOptions {
        default_trust: opts.default_trust.clone(),
        ..options(&["self-signed.pem"])
    };
    let config = TlsConfig::new(&opts).unwrap();
    let port = Server::new("localhost-chain.pem", "localhost-key.pem")
        .start(1)
        .await;
    let err = connect(port, &config, Some("localhost")).await.unwrap_err();
    assert_eq!(err.code(), "UNABLE_TO_GET_ISSUER_CERT_LOCALLY");
}

#[test]
fn the_default_trust_names_the_issuer_where_a_chain_stops() {
    let pem = |name: &str| String::from_utf8(fixture(name)).unwrap();
    let trust = Trust::node_default(&[pem("self-signed.pem"), pem("ca.pem")]);
    let sent = chain("localhost-chain.pem");
    // The server sends its leaf and the intermediate; the root is the test CA.
    let issuers = trust.issuers_of(&sent[1]);
    assert_eq!(issuers, vec![&chain("ca.pem")[0]]);
    // The leaf's issuer (the intermediate) is not in the trust.
    assert!(trust.issuers_of(&sent[0]).is_empty());
    assert!(trust.issuers_of(b"not a certificate").is_empty());
}

#[tokio::test]
async fn verification_failures_carry_openssl_codes() {
    let cases = [
        (
            Server::new("self-signed.pem", "self-signed-key.pem"),
            "DEPTH_ZERO_SELF_SIGNED_CERT self-signed certificate",
        ),
        (
            Server::new("expired.pem", "expired-key.pem"),
            "CERT_HAS_EXPIRED certificate has expired",
        ),
        (
            Server::new("notyet.pem", "notyet-key.pem"),
            "CERT_NOT_YET_VALID certificate is not yet valid",
        ),
        (
            Server::new("unknown-ca.pem", "unknown-ca-key.pem"),
            "UNABLE_TO_VERIFY_LEAF_SIGNATURE unable to verify the first certificate",
        ),
        (
            Server::new("unknown-ca-chain.pem", "unknown-ca-key.pem"),
            "SELF_SIGNED_CERT_IN_CHAIN self-signed certificate in certificate chain",
        ),
        (
            // The server forgets its intermediate: the chain cannot be built.
            Server::new("localhost.pem", "localhost-key.pem"),
            "UNABLE_TO_VERIFY_LEAF_SIGNATURE unable to verify the first certificate",
        ),
        (
            // A client's certificate (extended key usage clientAuth alone).
            Server::new("client.pem", "client-key.pem"),
            "INVALID_PURPOSE unsuitable certificate purpose",
        ),
    ];
    for (server, expected) in cases {
        let cert = server.cert;
        assert_eq!(failure(server, &["ca.pem"]).await, expected, "{cert}");
    }
}

/// The verifier a configuration with `ca` (and `rejectUnauthorized: reject`) uses.
fn verifier(ca: &[&str], reject: bool) -> verify::NodeVerifier {
    let certs: Vec<CertificateDer<'static>> = ca.iter().flat_map(|c| chain(c)).collect();
    let mut roots = RootCertStore::empty();
    for cert in &certs {
        let _ = roots.add(cert.clone());
    }
    verify::NodeVerifier {
        roots: Arc::new(roots),
        trusted: certs.into(),
        algs: rustls::crypto::ring::default_provider().signature_verification_algorithms,
        reject,
        revocation: None,
        schemes: None,
    }
}

/// With `sigalgs`, the verifier offers those schemes alone, and refuses a handshake signature
/// in another (rustls leaves that check to the verifier); without, every scheme it checks.
#[test]
fn sigalgs_narrow_the_schemes_offered_and_taken() {
    use rustls::SignatureScheme as S;
    let mut v = verifier(&["ca.pem"], true);
    assert!(v.supported_verify_schemes().len() > 2);
    assert_eq!(v.offered(S::ECDSA_NISTP256_SHA256), Ok(()));
    v.schemes = Some(vec![S::RSA_PSS_SHA256, S::ED25519].into());
    assert_eq!(
        v.supported_verify_schemes(),
        vec![S::RSA_PSS_SHA256, S::ED25519]
    );
    assert_eq!(v.offered(S::RSA_PSS_SHA256), Ok(()));
    assert_eq!(
        v.offered(S::ECDSA_NISTP256_SHA256),
        Err(rustls::Error::PeerMisbehaved(
            rustls::PeerMisbehaved::SignedHandshakeWithUnadvertisedSigScheme
        ))
    );
}

/// What `verifier` makes of `leaf` for the name localhost: its error, and the failure the
/// handshake reads to name it (see `handshake_error`).
fn verdict(
    verifier: &verify::NodeVerifier,
    leaf: &CertificateDer<'_>,
) -> (bool, Option<verify::VerifyFailure>) {
    let name = ServerName::try_from("localhost").unwrap();
    verify::VERDICT.sync_scope(verify::Verdict::new(false), || {
        let result = verifier.verify_server_cert(leaf, &[], &name, &[], UnixTime::now());
        (result.is_ok(), verify::VERDICT.with(|v| v.failure.get()))
    })
}

/// One DER TLV of `tag` around `contents`.
fn der_tlv(tag: u8, contents: &[u8]) -> Vec<u8> {
    let mut out = der::sequence(contents);
    out[0] = tag;
    out
}

/// Version 1 certificate `leaf` issued again, in the name of `issuer`, signed with `key`
/// (sha256WithRSAEncryption).
fn reissued(
    leaf: &CertificateDer<'_>,
    issuer: &CertificateDer<'_>,
    key: &str,
) -> CertificateDer<'static> {
    let (tbs, algorithm, _) = der::signed(leaf).unwrap();
    // A version 1 TBSCertificate: serial, signature, issuer, validity, subject, key.
    let mut fields = Vec::new();
    let mut rest = der::contents(tbs).unwrap();
    while let Some((_, _, after)) = der::tlv(rest) {
        fields.push(&rest[..rest.len() - after.len()]);
        rest = after;
    }
    let name = der::parse(issuer).unwrap().subject;
    fields[2] = name;
    let tbs = der::sequence(&fields.concat());
    let signer = rustls::crypto::ring::sign::any_supported_type(&self::key(key))
        .unwrap()
        .choose_scheme(&[rustls::SignatureScheme::RSA_PKCS1_SHA256])
        .unwrap();
    let signature = signer.sign(&tbs).unwrap();
    let mut bits = vec![0];
    bits.extend_from_slice(&signature);
    let cert = [tbs, der_tlv(0x30, algorithm), der_tlv(0x03, &bits)].concat();
    CertificateDer::from(der::sequence(&cert))
}

#[test]
fn which_certificates_may_issue() {
    for (name, expected) in [
        ("ca.pem", true),
        ("intermediate.pem", true),
        ("weak-ca.pem", true),
        ("v1-localhost.pem", true),
        ("localhost.pem", false),
        ("self-signed-leaf.pem", false),
        ("v1-leaf.pem", false),
    ] {
        assert_eq!(der::may_issue(&chain(name)[0]), expected, "{name}");
    }
    assert!(!der::may_issue(b"\x30\x03\x02\x01\x01"));
}

#[test]
fn a_version_1_leaf_a_trusted_root_issued_is_trusted_as_openssl_trusts_it() {
    // rustls serves no version 1 certificate: the verifier is asked directly (Node serves one
    // in __test__/https.test.js).
    let leaf = &chain("v1-leaf.pem")[0];
    assert_eq!(verdict(&verifier(&["ca.pem"], true), leaf), (true, None));
    // Issued by a root not trusted: no issuer found.
    assert_eq!(
        verdict(&verifier(&["other-ca.pem"], true), leaf).1,
        Some(verify::UNABLE_TO_VERIFY_LEAF_SIGNATURE)
    );
    // A trusted certificate that may not issue (a pinned server's leaf) issues nothing, even
    // a certificate its own key signed.
    let pinned = verifier(&["localhost.pem"], true);
    let minted = reissued(leaf, &chain("localhost.pem")[0], "localhost-key.pem");
    let (trusted, failure) = verdict(&pinned, &minted);
    assert!(!trusted && failure.is_some(), "{failure:?}");
    // The same signed by a CA's key is taken (the certificate made here is right).
    let by_ca = reissued(leaf, &chain("ca.pem")[0], "ca-key.pem");
    assert_eq!(verdict(&verifier(&["ca.pem"], true), &by_ca), (true, None));
    // Another certificate's signature is not its own.
    let mut forged = leaf.to_vec();
    let last = forged.len() - 1;
    forged[last] ^= 1;
    assert_eq!(
        verdict(&verifier(&["ca.pem"], true), &CertificateDer::from(forged)).1,
        Some(verify::UNABLE_TO_VERIFY_LEAF_SIGNATURE)
    );
}

#[tokio::test]
async fn a_chain_through_a_ca_whose_key_is_too_small_is_told_so() {
    let server = Server::new("weak-ca-leaf.pem", "weak-ca-leaf-key.pem");
    assert_eq!(
        failure(server, &["weak-ca.pem"]).await,
        format!("CA_KEY_TOO_SMALL {}", verify::CA_KEY_TOO_SMALL.message)
    );
}

#[tokio::test]
async fn reject_unauthorized_false_connects_and_reports_why() {
    let port = Server::new("self-signed.pem", "self-signed-key.pem")
        .start(1)
        .await;
    let mut opts = options(&["ca.pem"]);
    opts.reject_unauthorized = false;
    let config = TlsConfig::new(&opts).unwrap();
    let info = connect(port, &config, Some("localhost")).await.unwrap();
    assert_eq!(
        info.authorization_error.map(|f| f.code),
        Some("DEPTH_ZERO_SELF_SIGNED_CERT")
    );
}

#[tokio::test]
async fn a_name_nodes_own_check_refuses_fails_within_the_handshake() {
    // Node's own check applies: the server never sees the handshake finish (as Node's client
    // stops before its Finished), and the error is the check's, with what JavaScript needs to
    // word it.
    let (told, mut handshakes) = tokio::sync::mpsc::unbounded_channel();
    let mut server = Server::new("wrong-host.pem", "wrong-host-key.pem");
    server.handshakes = told;
    let port = server.start(3).await;
    let open = |config: TlsConfig, node_name_check: bool| async move {
        let tcp = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        let server = server_name(Some("localhost"), LOCALHOST);
        handshake_offering(tcp, &config, server, false, node_name_check).await
    };
    let config = TlsConfig::new(&options(&["ca.pem"])).unwrap();
    let err = open(config, true).await.err().expect("a wrong name");
    assert_eq!(err.code(), "ERR_TLS_CERT_ALTNAME_INVALID");
    let (host, certs) = err.name_check().expect("the name and the certificates");
    assert_eq!(host, "localhost");
    // The server's certificate, then the trusted CA that issued it, as Node's error shows them.
    let expected: Vec<Vec<u8>> = [chain("wrong-host.pem"), chain("ca.pem")]
        .concat()
        .iter()
        .map(|c| c.to_vec())
        .collect();
    assert_eq!(certs, expected.as_slice());
    assert_eq!(handshakes.recv().await, Some(false));

    // A check of the program's (which may take the name), or `rejectUnauthorized: false`: the
    // handshake completes, and the name is JavaScript's to check.
    let config = TlsConfig::new(&options(&["ca.pem"])).unwrap();
    assert!(open(config, false).await.is_ok());
    assert_eq!(handshakes.recv().await, Some(true));
    let lenient = TlsOptions {
        reject_unauthorized: false,
        ..options(&["ca.pem"])
    };
    let info = open(TlsConfig::new(&lenient).unwrap(), true)
        .await
        .unwrap()
        .1;
    assert_eq!(info.authorization_error, None);
    assert_eq!(handshakes.recv().await, Some(true));
}

#[tokio::test]
async fn names_are_left_to_check_server_identity() {
    // The chain is good; the name is wrong. Node checks names after the handshake, with
    // checkServerIdentity, and so does hyperagent.
    let port = Server::new("wrong-host.pem", "wrong-host-key.pem")
        .start(1)
        .await;
    let config = TlsConfig::new(&options(&["ca.pem"])).unwrap();
    let info = connect(port, &config, Some("localhost")).await.unwrap();
    assert_eq!(info.authorization_error, None);
    // Where Rust checks a name itself (a proxy's), it fails as checkServerIdentity does.
    let err = check_name(&info, &server_name(Some("localhost"), LOCALHOST)).unwrap_err();
    assert_eq!(err.code(), "ERR_TLS_CERT_ALTNAME_INVALID");
    assert_eq!(
        err.message(),
        "Hostname/IP does not match certificate's altnames: Host: localhost. is not in the cert's altnames"
    );
    // With what JavaScript needs to word it as Node does: the name and the certificate.
    assert_eq!(
        err.name_check(),
        Some(("localhost", info.peer_chain.as_slice()))
    );
    let port = Server::new("localhost-chain.pem", "localhost-key.pem")
        .start(1)
        .await;
    let info = connect(port, &config, Some("localhost")).await.unwrap();
    check_name(&info, &server_name(Some("localhost"), LOCALHOST)).unwrap();
}

#[tokio::test]
async fn alpn_is_negotiated() {
    let mut server = Server::new("localhost-chain.pem", "localhost-key.pem");
    server.alpn = vec![b"http/1.1".to_vec()];
    let port = server.start(1).await;
    let mut opts = options(&["ca.pem"]);
    opts.alpn = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let info = connect(port, &TlsConfig::new(&opts).unwrap(), Some("localhost"))
        .await
        .unwrap();
    assert_eq!(info.alpn.as_deref(), Some(&b"http/1.1"[..]));
}

#[tokio::test]
async fn http2_is_offered_ahead_of_http1_when_asked() {
    let mut server = Server::new("localhost-chain.pem", "localhost-key.pem");
    server.alpn = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let port = server.start(2).await;
    let config = TlsConfig::new(&options(&["ca.pem"])).unwrap();
    let server_name = server_name(Some("localhost"), LOCALHOST);
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let (_, info) = handshake_offering(tcp, &config, server_name.clone(), true, false)
        .await
        .unwrap();
    assert_eq!(info.alpn.as_deref(), Some(&b"h2"[..]));
    // Without the offer, the same configuration offers nothing: no protocol is chosen.
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let (_, info) = handshake(tcp, &config, server_name).await.unwrap();
    assert_eq!(info.alpn, None);
    assert_eq!(
        alpn_with_h2(&[b"http/1.1".to_vec(), b"h2".to_vec()]),
        vec![b"h2".to_vec(), b"http/1.1".to_vec()]
    );
}

#[tokio::test]
async fn a_pfx_identity_is_presented_and_its_authorities_trusted() {
    let mut server = Server::new("localhost-chain.pem", "localhost-key.pem");
    server.client_ca = Some("ca.pem");
    let port = server.start(3).await;
    // No `ca`: client.p12 carries the root that issued the server's chain.
    let mut opts = TlsOptions {
        reject_unauthorized: true,
        ..TlsOptions::default()
    };
    opts.pfx = vec![(fixture("client.p12"), "secret".to_owned())];
    connect(port, &TlsConfig::new(&opts).unwrap(), Some("localhost"))
        .await
        .unwrap();
    let mut legacy = options(&["ca.pem"]);
    legacy.pfx = vec![(fixture("client-legacy.p12"), "secret".to_owned())];
    connect(port, &TlsConfig::new(&legacy).unwrap(), Some("localhost"))
        .await
        .unwrap();
    // Neither MAC nor encryption: read as it is when no passphrase is given, as OpenSSL reads it.
    let mut plain = options(&["ca.pem"]);
    plain.pfx = vec![(fixture("client-plain.p12"), String::new())];
    connect(port, &TlsConfig::new(&plain).unwrap(), Some("localhost"))
        .await
        .unwrap();
}

#[test]
fn a_passphrase_for_a_pfx_without_a_mac_fails_as_in_openssl() {
    let mut opts = options(&["ca.pem"]);
    for file in ["client-nomac.p12", "client-plain.p12"] {
        opts.pfx = vec![(fixture(file), "secret".to_owned())];
        let err = TlsConfig::new(&opts).err().unwrap();
        assert_eq!(
            (err.code(), err.message().as_str()),
            ("ERR_OSSL_PKCS12_MAC_ABSENT", "mac absent"),
            "{file}"
        );
    }
    // Without one, the encrypted file cannot be opened: its decryption fails (OpenSSL's words).
    opts.pfx = vec![(fixture("client-nomac.p12"), String::new())];
    let err = TlsConfig::new(&opts).err().unwrap();
    assert_eq!(
        (err.code(), err.message().as_str()),
        ("ERR_OSSL_BAD_DECRYPT", "bad decrypt")
    );
}

#[test]
fn a_pfx_with_the_wrong_passphrase_or_no_pfx_at_all_is_refused() {
    let mut opts = options(&["ca.pem"]);
    opts.pfx = vec![(fixture("client.p12"), "wrong".to_owned())];
    let err = TlsConfig::new(&opts).err().unwrap();
    assert_eq!(err.code(), "ERR_OSSL_PKCS12_MAC_VERIFY_FAILURE");
    opts.pfx = vec![(b"not a pfx".to_vec(), String::new())];
    let err = TlsConfig::new(&opts).err().unwrap();
    assert_eq!(err.code(), "ERR_CRYPTO_OPERATION_FAILED");
    // A file with certificates only (a trust store) has no identity to present.
    let ca = CertificateDer::pem_slice_iter(&fixture("ca.pem"))
        .next()
        .unwrap()
        .unwrap();
    let mut store = p12_keystore::KeyStore::new();
    store.add_entry(
        "ca",
        p12_keystore::KeyStoreEntry::Certificate(
            p12_keystore::Certificate::from_der(ca.as_ref()).unwrap(),
        ),
    );
    opts.pfx = vec![(store.writer("secret").write().unwrap(), "secret".to_owned())];
    let err = TlsConfig::new(&opts).err().unwrap();
    assert_eq!(
        (err.code(), err.message().as_str()),
        (
            "ERR_CRYPTO_OPERATION_FAILED",
            "Unable to load private key from PFX data"
        )
    );
}

#[tokio::test]
async fn client_certificates_are_presented_when_asked() {
    let mut server = Server::new("localhost-chain.pem", "localhost-key.pem");
    server.client_ca = Some("ca.pem");
    let port = server.start(2).await;
    let mut opts = options(&["ca.pem"]);
    opts.identities = vec![(fixture("client.pem"), fixture("client-key.pem"))];
    connect(port, &TlsConfig::new(&opts).unwrap(), Some("localhost"))
        .await
        .unwrap();

    // Without one, the server refuses: an alert, in OpenSSL's words.
    let config = TlsConfig::new(&options(&["ca.pem"])).unwrap();
    let tcp = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let outcome = async {
        let (mut stream, _) =
            handshake(tcp, &config, server_name(Some("localhost"), LOCALHOST)).await?;
        // TLS 1.3 reports the server's refusal after the handshake, on the first read.
        stream
            .write_all(b"ping")
            .await
            .map_err(|e| Error::io(&e, "write"))?;
        let mut buf = [0u8; 4];
        match stream.read_exact(&mut buf).await {
            Ok(_) => Ok(()),
            Err(e) => Err(read_error(&e)),
        }
    }
    .await;
    let err = outcome.unwrap_err();
    assert!(
        err.code().starts_with("ERR_SSL_"),
        "{} {}",
        err.code(),
        err.message()
    );
}

#[test]
fn bad_options_are_named() {
    // (A `ca` that does not read is no error: see
    // `a_ca_value_is_read_as_node_reads_it_up_to_its_first_unreadable_certificate`.)
    let mut opts = options(&[]);
    opts.min_version = Some("TLSv9".into());
    assert_eq!(
        TlsConfig::new(&opts).err().unwrap().code(),
        "ERR_TLS_INVALID_PROTOCOL_VERSION"
    );
    // Only versions before TLS 1.2: the configuration is made, and its connections fail
    // before their handshake, as Node's do with the minimum left at TLS 1.2.
    let mut opts = options(&[]);
    opts.max_version = Some("TLSv1.1".into());
    let config = TlsConfig::new(&opts).unwrap();
    assert_eq!(
        config.unspeakable().unwrap().code(),
        "ERR_SSL_NO_PROTOCOLS_AVAILABLE"
    );
    assert!(TlsConfig::new(&options(&[]))
        .unwrap()
        .unspeakable()
        .is_none());
    let mut opts = options(&[]);
    opts.ciphers = Some("RC4-MD5".into());
    assert_eq!(
        TlsConfig::new(&opts).err().unwrap().code(),
        "ERR_SSL_NO_CIPHER_MATCH"
    );
    // A client certificate whose key does not match it, and one whose RSA key is too small
    // for rustls to sign with.
    for ((cert, key), code) in [
        (
            ("client.pem", "localhost-key.pem"),
            "ERR_OSSL_X509_KEY_VALUES_MISMATCH",
        ),
        (
            ("weak-localhost.pem", "weak-localhost-key.pem"),
            "ERR_SSL_EE_KEY_TOO_SMALL",
        ),
        (
            ("v1-leaf.pem", "localhost-key.pem"),
            "ERR_OSSL_X509_KEY_VALUES_MISMATCH",
        ),
    ] {
        let mut opts = options(&[]);
        opts.identities = vec![(fixture(cert), fixture(key))];
        assert_eq!(TlsConfig::new(&opts).err().unwrap().code(), code, "{cert}");
    }
    // An X.509 version 1 client certificate with its own key is taken, as OpenSSL takes it
    // (webpki parses no version 1 certificate); presented to Node's server in https.test.js.
    let mut opts = options(&[]);
    opts.identities = vec![(fixture("v1-leaf.pem"), fixture("v1-leaf-key.pem"))];
    assert!(TlsConfig::new(&opts).is_ok());
}

#[test]
fn servername_rules_follow_node() {
    assert!(matches!(
        server_name(Some("example.com"), LOCALHOST),
        ServerName::DnsName(_)
    ));
    assert!(matches!(
        server_name(Some(""), LOCALHOST),
        ServerName::IpAddress(_)
    ));
    assert!(matches!(
        server_name(None, LOCALHOST),
        ServerName::IpAddress(_)
    ));
    assert!(matches!(
        server_name(Some("10.0.0.1"), LOCALHOST),
        ServerName::IpAddress(_)
    ));
}

#[tokio::test]
async fn crls_revoke_and_every_certificate_of_the_chain_needs_one() {
    let port = Server::new("localhost-chain.pem", "localhost-key.pem")
        .start(5)
        .await;
    let outcome = |crls: &[&str]| {
        let mut opts = options(&["ca.pem"]);
        opts.crls = crls.iter().map(|name| fixture(name)).collect();
        async move {
            let config = TlsConfig::new(&opts).unwrap();
            match connect(port, &config, Some("localhost")).await {
                Ok(_) => "ok".to_owned(),
                Err(err) => format!("{} {}", err.code(), err.message()),
            }
        }
    };
    assert_eq!(
        outcome(&["crl-root.pem", "crl-intermediate.pem"]).await,
        "ok"
    );
    assert_eq!(
        outcome(&["crl-root.pem", "crl-intermediate-revoked.pem"]).await,
        "CERT_REVOKED certificate revoked"
    );
    // As OpenSSL with Node's flags: the intermediate needs the root's CRL too.
    assert_eq!(
        outcome(&["crl-intermediate.pem"]).await,
        "UNABLE_TO_GET_CRL unable to get certificate CRL"
    );
    assert_eq!(
        outcome(&["crl-root-expired.pem", "crl-intermediate.pem"]).await,
        "CRL_HAS_EXPIRED CRL has expired"
    );
    // No CRL: no revocation check.
    assert_eq!(outcome(&[]).await, "ok");
}

#[test]
fn a_crl_that_cannot_be_read_is_refused() {
    let mut opts = options(&["ca.pem"]);
    opts.crls = vec![b"not a crl".to_vec()];
    let err = TlsConfig::new(&opts).err().unwrap();
    assert_eq!(
        (err.code(), err.message().as_str()),
        ("ERR_CRYPTO_OPERATION_FAILED", "Failed to parse CRL")
    );
}

#[test]
fn the_size_of_an_rsa_key_is_read_from_its_certificate() {
    let bits = |name| der::spki(&chain(name)[0]).and_then(der::rsa_bits);
    assert_eq!(bits("localhost.pem"), Some(2048));
    assert_eq!(bits("v1-localhost.pem"), Some(2048));
    assert_eq!(bits("weak-localhost.pem"), Some(1024));
    assert_eq!(bits("ec-localhost.pem"), None, "not RSA");
    assert_eq!(der::rsa_bits(b"\x30\x03\x02\x01\x01"), None);
}

#[test]
fn a_server_key_too_small_to_check_a_signature_with_fails_whatever_reject_unauthorized_says() {
    let leaf = &chain("weak-localhost.pem")[0];
    for reject in [true, false] {
        assert_eq!(
            verdict(&verifier(&["ca.pem"], reject), leaf),
            (false, Some(verify::EE_KEY_TOO_SMALL)),
            "rejectUnauthorized: {reject}"
        );
    }
}

#[test]
fn the_public_key_of_a_version_1_certificate_is_found() {
    for name in ["v1-localhost.pem", "localhost.pem", "ec-localhost.pem"] {
        let cert = &chain(name)[0];
        let spki = der::spki(cert).unwrap_or_else(|| panic!("{name}: no key found"));
        let spki = rustls::pki_types::SubjectPublicKeyInfoDer::from(spki);
        assert!(
            webpki::RawPublicKeyEntity::try_from(&spki).is_ok(),
            "{name}: not a key"
        );
    }
    // webpki takes the version 3 certificates whole, and not the version 1 one: that is why.
    assert!(ParsedCertificate::try_from(&chain("localhost.pem")[0]).is_ok());
    assert!(ParsedCertificate::try_from(&chain("v1-localhost.pem")[0]).is_err());
    assert_eq!(der::spki(b"\x30\x03\x02\x01\x01"), None);
}

fn loopback(port: u16) -> crate::transport::Target {
    crate::transport::Target::tcp("127.0.0.1", port)
}

#[tokio::test]
async fn establish_connects_then_shakes_hands_reporting_keys_and_the_connect() {
    use crate::transport::establish::{establish, Established, Secure};
    use std::sync::atomic::{AtomicBool, Ordering};
    let port = Server::new("localhost-chain.pem", "localhost-key.pem")
        .start(2)
        .await;
    let config = TlsConfig::new(&options(&["ca.pem"])).unwrap();
    let connected = AtomicBool::new(false);
    let mut keys = Vec::new();
    let secure = Secure {
        config: &config,
        servername: Some("localhost"),
        node_name_check: true,
        keylog: Arc::new(AtomicBool::new(true)),
        offer_h2: false,
    };
    let established = establish(
        loopback(port),
        Default::default(),
        Some(secure),
        None,
        |_, _| {},
        |_, _: &_| connected.store(true, Ordering::Relaxed),
        |lines| keys = lines,
    )
    .await
    .unwrap();
    assert!(connected.load(Ordering::Relaxed));
    assert!(!keylog_lines(&keys).is_empty());
    let Established::Secure {
        mut stream,
        info,
        local,
        remote,
    } = established
    else {
        panic!("no TLS session");
    };
    assert_eq!(info.authorization_error, None);
    assert_eq!(info.servername.as_deref(), Some("localhost"));
    assert!(local.is_some());
    assert!(matches!(remote, crate::transport::Peer::Tcp(a) if a.port() == port));
    stream.write_all(b"ping").await.unwrap();
    let mut buf = [0u8; 4];
    stream.read_exact(&mut buf).await.unwrap();
    assert_eq!(&buf, b"pong");

    // Without TLS, the socket itself, for the caller to drive.
    let plain = establish(
        loopback(port),
        Default::default(),
        None,
        None,
        |_, _| {},
        |_, _: &_| {},
        |_| {},
    )
    .await
    .unwrap();
    assert!(matches!(
        plain,
        Established::Plain(crate::transport::Connected {
            socket: crate::transport::Socket::Tcp(_),
            ..
        })
    ));
}

#[tokio::test]
async fn establish_fails_at_its_deadline_when_the_handshake_never_comes() {
    use crate::transport::establish::{establish, Secure};
    // Accepts, then says nothing.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let held = tokio::spawn(async move { listener.accept().await });
    let config = TlsConfig::new(&options(&["ca.pem"])).unwrap();
    let limit = std::time::Duration::from_millis(100);
    let deadline = Some((tokio::time::Instant::now() + limit, limit));
    let secure = Secure {
        config: &config,
        servername: Some("localhost"),
        node_name_check: false,
        keylog: Arc::new(std::sync::atomic::AtomicBool::new(false)),
        offer_h2: false,
    };
    let err = establish(
        loopback(port),
        Default::default(),
        Some(secure),
        deadline,
        |_, _| {},
        |_, _: &_| {},
        |_| {},
    )
    .await
    .err()
    .expect("a timeout");
    assert_eq!(err.code(), "ERR_SOCKET_TIMEOUT");
    assert!(err.timed_out());
    held.abort();
}
