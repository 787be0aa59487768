//! Verification of a server's certificate chain as OpenSSL does it, with its error codes: the
//! chain, revocation with `crl`, and a certificate trusted as given in `ca`.

use std::cell::{Cell, RefCell};
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, CertificateRevocationListDer, ServerName, UnixTime};
use rustls::server::ParsedCertificate;
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};

use crate::error::Error;

use super::{config_error, der, identity};

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
pub(super) const UNABLE_TO_VERIFY_LEAF_SIGNATURE: VerifyFailure = VerifyFailure::new(
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
/// A certificate whose extended key usage leaves out TLS servers (a client's certificate).
const INVALID_PURPOSE: VerifyFailure =
    VerifyFailure::new("INVALID_PURPOSE", "unsuitable certificate purpose");
const CERT_REVOKED: VerifyFailure = VerifyFailure::new("CERT_REVOKED", "certificate revoked");
const UNABLE_TO_GET_CRL: VerifyFailure =
    VerifyFailure::new("UNABLE_TO_GET_CRL", "unable to get certificate CRL");
const CRL_HAS_EXPIRED: VerifyFailure = VerifyFailure::new("CRL_HAS_EXPIRED", "CRL has expired");
const CRL_SIGNATURE_FAILURE: VerifyFailure =
    VerifyFailure::new("CRL_SIGNATURE_FAILURE", "CRL signature failure");
/// The server's own RSA key is smaller than rustls verifies a signature with: the handshake
/// cannot be checked, so it fails even with `rejectUnauthorized: false` (where OpenSSL, at
/// Node's default security level, takes keys from 1024 bits).
pub(super) const EE_KEY_TOO_SMALL: VerifyFailure = VerifyFailure::new(
    "EE_KEY_TOO_SMALL",
    "EE certificate key too weak: RSA keys of fewer than 2048 bits are not supported",
);

/// A CA of the chain whose RSA key is smaller than rustls verifies a signature with: the
/// certificate it issued cannot be checked.
pub(super) const CA_KEY_TOO_SMALL: VerifyFailure = VerifyFailure::new(
    "CA_KEY_TOO_SMALL",
    "CA certificate key too weak: RSA keys of fewer than 2048 bits are not supported",
);

/// The smallest RSA key, in bits, that rustls (with ring) verifies a signature with.
const MIN_RSA_BITS: usize = 2048;

/// Whether `cert`'s key is RSA and smaller than [`MIN_RSA_BITS`].
pub(super) fn weak_rsa(cert: &CertificateDer<'_>) -> bool {
    der::spki(cert)
        .and_then(der::rsa_bits)
        .is_some_and(|bits| bits < MIN_RSA_BITS)
}

/// What the verifier found of the handshake running in this task: the shared verifier writes
/// it here, the handshake reads it (a per-connection verifier would defeat resumption).
#[derive(Default)]
pub(super) struct Verdict {
    /// Node's own `checkServerIdentity` is the one that applies to this connection: a name
    /// that it surely refuses fails the handshake (see [`identity`]).
    pub(super) node_name_check: bool,
    /// Why the chain was not trusted.
    pub(super) failure: Cell<Option<VerifyFailure>>,
    /// The server's chain (DER, its own certificate first, up to the trusted root where one
    /// issued it), when Node's check refuses its name.
    pub(super) wrong_name: RefCell<Option<Vec<Vec<u8>>>>,
}

impl Verdict {
    pub(super) fn new(node_name_check: bool) -> Self {
        Verdict {
            node_name_check,
            ..Verdict::default()
        }
    }
}

tokio::task_local! {
    pub(super) static VERDICT: Verdict;
}

/// Verifies chains as OpenSSL would and remembers why one failed. With
/// `rejectUnauthorized: false` it records the failure and lets the handshake go on, as Node
/// does (the socket then reports `authorized: false` and the `authorizationError`).
#[derive(Debug)]
pub(super) struct NodeVerifier {
    pub(super) roots: Arc<RootCertStore>,
    /// The certificates trusted (see [`Trust`](super::Trust)): one of these presented as the server's own
    /// certificate is trusted as OpenSSL trusts it (a self-signed internal service).
    pub(super) trusted: Arc<[CertificateDer<'static>]>,
    pub(super) algs: WebPkiSupportedAlgorithms,
    pub(super) reject: bool,
    /// With `crl`: the same chain check, with the revocation of each certificate checked too.
    pub(super) revocation: Option<Arc<WebPkiServerVerifier>>,
    /// With `sigalgs`: the handshake signature schemes offered and taken (all of `algs`'s
    /// otherwise).
    pub(super) schemes: Option<Arc<[SignatureScheme]>>,
}

/// The verifier that checks revocation, when `crl` gives CRLs: as OpenSSL with Node's flags,
/// every certificate of the chain but the trust anchor needs a CRL of its issuer, and an
/// expired one fails.
pub(super) fn revocation_verifier(
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
        // Whatever else holds of the chain, the handshake's signature cannot be checked.
        if weak_rsa(end_entity) {
            return Some(EE_KEY_TOO_SMALL);
        }
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
            // not trusted as given in `ca`, passes when a trusted root issued it (as OpenSSL
            // checks it), and otherwise fails as OpenSSL fails its chain (self-signed, or no
            // issuer found).
            Err(_) if fields.is_some() => {
                return match fields.and_then(|f| self.v1_issued(end_entity, &f, now_secs)) {
                    Some(verdict) => verdict,
                    None if self.weak_issuer(end_entity, intermediates) => Some(CA_KEY_TOO_SMALL),
                    None => Some(untrusted_chain(end_entity, intermediates)),
                };
            }
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
                CertificateError::InvalidPurpose
                | CertificateError::InvalidPurposeContext { .. } => INVALID_PURPOSE,
                _ if self.weak_issuer(end_entity, intermediates) => CA_KEY_TOO_SMALL,
                CertificateError::BadSignature => CERT_SIGNATURE_FAILURE,
                _ => untrusted_chain(end_entity, intermediates),
            }),
            Err(_) if self.weak_issuer(end_entity, intermediates) => Some(CA_KEY_TOO_SMALL),
            Err(_) => Some(untrusted_chain(end_entity, intermediates)),
        }
    }
}

impl NodeVerifier {
    /// The chain the server presented (DER, its own certificate first), with the trusted
    /// certificate of the last one's issuer where that one is not self-issued: the chain that
    /// Node's `getPeerCertificate(true)` gives, and its name check's error shows.
    fn chain_to_root(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
    ) -> Vec<Vec<u8>> {
        let mut chain: Vec<Vec<u8>> = std::iter::once(end_entity)
            .chain(intermediates)
            .map(|cert| cert.to_vec())
            .collect();
        let top = chain.last().and_then(|cert| der::parse(cert));
        if let Some(issuer) = top.filter(|f| !f.self_issued()).map(|f| f.issuer) {
            let root = self
                .trusted
                .iter()
                .find(|cert| der::parse(cert).is_some_and(|c| c.subject == issuer));
            if let Some(root) = root {
                chain.push(root.to_vec());
            }
        }
        chain
    }

    /// Whether the issuer of `end_entity` (by name, among the certificates the server sent and
    /// those trusted) has an RSA key too small to check its signature with.
    fn weak_issuer(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
    ) -> bool {
        let Some(issuer) = der::parse(end_entity).map(|f| f.issuer) else {
            return false;
        };
        let weak_named = |cert: &CertificateDer<'_>| {
            der::parse(cert).is_some_and(|c| c.subject == issuer) && weak_rsa(cert)
        };
        let weak_bits = |spki: &[u8]| der::rsa_bits(spki).is_some_and(|bits| bits < MIN_RSA_BITS);
        intermediates.iter().any(weak_named)
            || self.trusted.iter().any(weak_named)
            || der::contents(issuer).is_some_and(|name| {
                self.roots.roots.iter().any(|root| {
                    root.subject.as_ref() == name
                        && weak_bits(&der::sequence(root.subject_public_key_info.as_ref()))
                })
            })
    }

    /// A version 1 end entity (which webpki cannot take) issued directly by a trusted root:
    /// its signature checked with the root's key, and its dates, as OpenSSL checks them. `None`
    /// when no trusted root issued it, or when CRLs are given (webpki checks revocation only for
    /// the certificates it takes): the chain fails then as before. The roots are the trusted
    /// certificates whole, not webpki's anchors, whose bare keys cannot say whether they may
    /// issue (the built-in roots' anchors are left out: no public CA issues version 1).
    fn v1_issued(
        &self,
        end_entity: &CertificateDer<'_>,
        fields: &der::CertFields<'_>,
        now_secs: i64,
    ) -> Option<Option<VerifyFailure>> {
        if self.revocation.is_some() {
            return None;
        }
        let (tbs, algorithm, signature) = der::signed(end_entity)?;
        let signed_by = |spki: &[u8]| {
            let spki = rustls::pki_types::SubjectPublicKeyInfoDer::from(spki);
            let Ok(key) = webpki::RawPublicKeyEntity::try_from(&spki) else {
                return false;
            };
            self.algs
                .all
                .iter()
                .filter(|alg| alg.signature_alg_id().as_ref() == algorithm)
                .any(|alg| key.verify_signature(*alg, tbs, signature).is_ok())
        };
        // Among the trusted certificates (`ca`, or the default trust's certificates; webpki
        // refuses a version 1 one as an anchor), one of the issuer's name that may issue: a
        // trusted leaf (a pinned server) signs no other certificate.
        let issued = self
            .trusted
            .iter()
            .filter(|root| der::parse(root).is_some_and(|r| r.subject == fields.issuer))
            .filter(|root| der::may_issue(root))
            .any(|root| der::spki(root).is_some_and(signed_by));
        if !issued {
            return None;
        }
        Some(if now_secs < fields.not_before {
            Some(CERT_NOT_YET_VALID)
        } else if now_secs > fields.not_after {
            Some(CERT_HAS_EXPIRED)
        } else {
            None
        })
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
        // A trusted chain whose name Node's own check refuses: Node stops the handshake with
        // that check's error before finishing its side (`rejectUnauthorized: false` lets the
        // connection go on, with the name left to JavaScript as its `authorizationError`).
        let wrong_name = failure.is_none()
            && self.reject
            && VERDICT.try_with(|v| v.node_name_check).unwrap_or(false)
            && matches!(server_name, ServerName::DnsName(name) if identity::node_refuses(end_entity, name.as_ref()));
        let _ = VERDICT.try_with(|v| {
            v.failure.set(failure);
            if wrong_name {
                *v.wrong_name.borrow_mut() = Some(self.chain_to_root(end_entity, intermediates));
            }
        });
        match failure {
            // A key the handshake's signature cannot be checked with fails it whatever
            // `rejectUnauthorized` says.
            Some(f) if self.reject || f == EE_KEY_TOO_SMALL => {
                Err(rustls::Error::InvalidCertificate(CertificateError::Other(
                    rustls::OtherError(Arc::new(VerifyError(f))),
                )))
            }
            _ if wrong_name => Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName,
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
        self.offered(dss.scheme)?;
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algs)
            .or_else(|e| self.signed_by_key(e, message, cert, dss, false))
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.offered(dss.scheme)?;
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algs)
            .or_else(|e| self.signed_by_key(e, message, cert, dss, true))
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        match &self.schemes {
            Some(schemes) => schemes.to_vec(),
            None => self.algs.supported_schemes(),
        }
    }
}

impl NodeVerifier {
    /// A handshake signature in a scheme `sigalgs` left out fails, as OpenSSL fails one it did
    /// not offer ("wrong signature type").
    pub(super) fn offered(&self, scheme: SignatureScheme) -> Result<(), rustls::Error> {
        match &self.schemes {
            Some(schemes) if !schemes.contains(&scheme) => Err(rustls::Error::PeerMisbehaved(
                rustls::PeerMisbehaved::SignedHandshakeWithUnadvertisedSigScheme,
            )),
            _ => Ok(()),
        }
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
