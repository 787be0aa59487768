//! Node's `sigalgs` option (`SSL_CTX_set1_sigalgs_list`), read into the signature schemes
//! rustls offers: a `:`-separated list, in order of preference, of `ALGORITHM+HASH` items
//! (`RSA+SHA256`, `RSA-PSS+SHA384`, `ECDSA+SHA256`) or TLS 1.3 scheme names
//! (`rsa_pss_rsae_sha256`, `ecdsa_secp384r1_sha384`, `ed25519`), in any case (as Node 22 and
//! later read them).
//!
//! The schemes are what the client offers in `signature_algorithms`, what it takes from the
//! server's handshake signature, and what its own certificate may sign with. A name OpenSSL
//! does not know fails at once; schemes rustls does not check here (DSA, SHA-1, SHA-224, ECDSA
//! over P-521, `rsa_pss_pss_*`, Ed448, brainpool curves, ML-DSA) are passed over, and a list of
//! only those fails at once.

use std::sync::Arc;

use rustls::client::ResolvesClientCert;
use rustls::sign::{CertifiedKey, Signer, SigningKey};
use rustls::{SignatureAlgorithm, SignatureScheme};

use crate::error::Error;

/// The scheme an item names: `Ok(None)` for one OpenSSL knows that rustls does not speak.
fn scheme(item: &str) -> Result<Option<SignatureScheme>, ()> {
    use SignatureScheme as S;
    let item = item.to_ascii_lowercase();
    if let Some((alg, hash)) = item.split_once('+') {
        let hash = match hash {
            "sha1" => 1,
            "sha224" => 224,
            "sha256" => 256,
            "sha384" => 384,
            "sha512" => 512,
            _ => return Err(()),
        };
        return Ok(match (alg, hash) {
            ("rsa", 1) => Some(S::RSA_PKCS1_SHA1),
            ("rsa", 256) => Some(S::RSA_PKCS1_SHA256),
            ("rsa", 384) => Some(S::RSA_PKCS1_SHA384),
            ("rsa", 512) => Some(S::RSA_PKCS1_SHA512),
            ("rsa-pss" | "pss", 256) => Some(S::RSA_PSS_SHA256),
            ("rsa-pss" | "pss", 384) => Some(S::RSA_PSS_SHA384),
            ("rsa-pss" | "pss", 512) => Some(S::RSA_PSS_SHA512),
            ("ecdsa", 1) => Some(S::ECDSA_SHA1_Legacy),
            ("ecdsa", 256) => Some(S::ECDSA_NISTP256_SHA256),
            ("ecdsa", 384) => Some(S::ECDSA_NISTP384_SHA384),
            ("ecdsa", 512) => Some(S::ECDSA_NISTP521_SHA512),
            ("rsa" | "rsa-pss" | "pss" | "ecdsa" | "dsa", _) => None,
            _ => return Err(()),
        });
    }
    Ok(match item.as_str() {
        "rsa_pkcs1_sha1" => Some(S::RSA_PKCS1_SHA1),
        "rsa_pkcs1_sha256" => Some(S::RSA_PKCS1_SHA256),
        "rsa_pkcs1_sha384" => Some(S::RSA_PKCS1_SHA384),
        "rsa_pkcs1_sha512" => Some(S::RSA_PKCS1_SHA512),
        "rsa_pss_rsae_sha256" => Some(S::RSA_PSS_SHA256),
        "rsa_pss_rsae_sha384" => Some(S::RSA_PSS_SHA384),
        "rsa_pss_rsae_sha512" => Some(S::RSA_PSS_SHA512),
        "ecdsa_sha1" => Some(S::ECDSA_SHA1_Legacy),
        "ecdsa_secp256r1_sha256" => Some(S::ECDSA_NISTP256_SHA256),
        "ecdsa_secp384r1_sha384" => Some(S::ECDSA_NISTP384_SHA384),
        "ecdsa_secp521r1_sha512" => Some(S::ECDSA_NISTP521_SHA512),
        "ed25519" => Some(S::ED25519),
        "ed448"
        | "rsa_pss_pss_sha256"
        | "rsa_pss_pss_sha384"
        | "rsa_pss_pss_sha512"
        | "ecdsa_brainpoolp256r1_sha256"
        | "ecdsa_brainpoolp384r1_sha384"
        | "ecdsa_brainpoolp512r1_sha512"
        | "mldsa44"
        | "mldsa65"
        | "mldsa87" => None,
        _ => return Err(()),
    })
}

/// The schemes of `supported` (those the verifier checks) that `list` names, in its order.
pub fn select(list: &str, supported: &[SignatureScheme]) -> Result<Vec<SignatureScheme>, Error> {
    let mut schemes = Vec::new();
    for item in list.split(':') {
        let named = scheme(item).map_err(|()| {
            Error::tls(
                "ERR_INVALID_ARG_VALUE",
                format!(
                    "The property 'options.sigalgs' is invalid. Received '{list}': '{item}' is no signature algorithm OpenSSL knows"
                ),
            )
        })?;
        if let Some(s) = named.filter(|s| supported.contains(s) && !schemes.contains(s)) {
            schemes.push(s);
        }
    }
    if schemes.is_empty() {
        return Err(Error::tls(
            "ERR_HYPERAGENT_UNSUPPORTED",
            format!("sigalgs '{list}' names no signature scheme rustls speaks"),
        ));
    }
    Ok(schemes)
}

/// The client certificate of a configuration with `sigalgs`: it signs with those schemes only
/// (none of them among the server's: no certificate is sent, as OpenSSL sends none).
#[derive(Debug)]
pub struct Restricted {
    pub inner: Arc<dyn ResolvesClientCert>,
    pub schemes: Arc<[SignatureScheme]>,
}

impl ResolvesClientCert for Restricted {
    fn resolve(
        &self,
        root_hint_subjects: &[&[u8]],
        sigschemes: &[SignatureScheme],
    ) -> Option<Arc<CertifiedKey>> {
        let allowed: Vec<SignatureScheme> = sigschemes
            .iter()
            .copied()
            .filter(|s| self.schemes.contains(s))
            .collect();
        let key = self.inner.resolve(root_hint_subjects, &allowed)?;
        let mut restricted = CertifiedKey::new(
            key.cert.clone(),
            Arc::new(RestrictedKey {
                inner: key.key.clone(),
                schemes: self.schemes.clone(),
            }),
        );
        restricted.ocsp = key.ocsp.clone();
        Some(Arc::new(restricted))
    }

    fn has_certs(&self) -> bool {
        self.inner.has_certs()
    }
}

#[derive(Debug)]
struct RestrictedKey {
    inner: Arc<dyn SigningKey>,
    schemes: Arc<[SignatureScheme]>,
}

impl SigningKey for RestrictedKey {
    fn choose_scheme(&self, offered: &[SignatureScheme]) -> Option<Box<dyn Signer>> {
        let allowed: Vec<SignatureScheme> = offered
            .iter()
            .copied()
            .filter(|s| self.schemes.contains(s))
            .collect();
        self.inner.choose_scheme(&allowed)
    }

    fn algorithm(&self) -> SignatureAlgorithm {
        self.inner.algorithm()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use SignatureScheme as S;

    fn supported() -> Vec<SignatureScheme> {
        rustls::crypto::ring::default_provider()
            .signature_verification_algorithms
            .supported_schemes()
    }

    fn select_codes(list: &str) -> Result<Vec<SignatureScheme>, String> {
        select(list, &supported()).map_err(|e| e.code().to_owned())
    }

    #[test]
    fn both_forms_any_case_in_order() {
        assert_eq!(
            select_codes("RSA-PSS+SHA256:ecdsa_secp384r1_sha384:rsa+sha512:PSS+SHA384"),
            Ok(vec![
                S::RSA_PSS_SHA256,
                S::ECDSA_NISTP384_SHA384,
                S::RSA_PKCS1_SHA512,
                S::RSA_PSS_SHA384
            ])
        );
        assert_eq!(
            select_codes("ED25519:RSA_PSS_RSAE_SHA256:ed25519"),
            Ok(vec![S::ED25519, S::RSA_PSS_SHA256])
        );
    }

    #[test]
    fn schemes_rustls_lacks_are_passed_over_and_alone_fail() {
        assert_eq!(
            select_codes("DSA+SHA256:RSA+SHA224:rsa_pss_pss_sha256:ed448:ECDSA+SHA256"),
            Ok(vec![S::ECDSA_NISTP256_SHA256])
        );
        for list in ["DSA+SHA256", "ed448:rsa_pss_pss_sha512", "RSA+SHA1"] {
            assert_eq!(
                select_codes(list),
                Err("ERR_HYPERAGENT_UNSUPPORTED".into()),
                "{list}"
            );
        }
    }

    #[test]
    fn what_openssl_does_not_know_fails() {
        for list in [
            "foo",
            "SHA256",
            "RSA",
            "RSA+MD5",
            "RSA+SHA256:",
            "ECDSA+SHA256:bar",
        ] {
            assert_eq!(
                select_codes(list),
                Err("ERR_INVALID_ARG_VALUE".into()),
                "{list}"
            );
        }
    }

    /// A key that can sign with any scheme it is offered, and tells which.
    #[derive(Debug)]
    struct AnyKey;
    #[derive(Debug)]
    struct Chosen(SignatureScheme);
    impl Signer for Chosen {
        fn sign(&self, _message: &[u8]) -> Result<Vec<u8>, rustls::Error> {
            Ok(Vec::new())
        }
        fn scheme(&self) -> SignatureScheme {
            self.0
        }
    }
    impl SigningKey for AnyKey {
        fn choose_scheme(&self, offered: &[SignatureScheme]) -> Option<Box<dyn Signer>> {
            offered
                .first()
                .map(|s| Box::new(Chosen(*s)) as Box<dyn Signer>)
        }
        fn algorithm(&self) -> SignatureAlgorithm {
            SignatureAlgorithm::RSA
        }
    }

    #[test]
    fn the_client_certificate_signs_only_with_the_schemes_named() {
        let key = CertifiedKey::new(Vec::new(), Arc::new(AnyKey));
        let restricted = Restricted {
            inner: Arc::new(rustls::client::AlwaysResolvesClientRawPublicKeys::new(
                Arc::new(key),
            )),
            schemes: vec![S::RSA_PSS_SHA384, S::ECDSA_NISTP256_SHA256].into(),
        };
        let certified = restricted
            .resolve(&[], &[S::RSA_PKCS1_SHA256, S::RSA_PSS_SHA384])
            .unwrap();
        let signer = certified
            .key
            .choose_scheme(&[S::RSA_PKCS1_SHA256, S::RSA_PSS_SHA384])
            .unwrap();
        assert_eq!(signer.scheme(), S::RSA_PSS_SHA384);
        // The server takes none of them: nothing to sign with.
        assert!(certified
            .key
            .choose_scheme(&[S::RSA_PKCS1_SHA256, S::ED25519])
            .is_none());
    }
}
