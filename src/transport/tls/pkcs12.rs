//! `pfx`: a PKCS#12 file's private key and certificate chain, for client authentication, as
//! Node's `tls.createSecureContext` takes them: the file's integrity (MAC) and its encrypted
//! parts are checked and opened with the passphrase (an absent one is the empty one).

use p12_keystore::{KeyStore, Pkcs12ImportPolicy};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use super::der;
use crate::error::Error;

/// What a PKCS#12 file holds for a client: its key, the key's certificate followed by the
/// certificates that issued it (as sent to the server), and those issuers again, which Node
/// also trusts when it verifies the server.
pub struct Pkcs12Identity {
    pub chain: Vec<CertificateDer<'static>>,
    pub key: PrivateKeyDer<'static>,
    pub authorities: Vec<CertificateDer<'static>>,
}

pub fn read(data: &[u8], passphrase: &str) -> Result<Pkcs12Identity, Error> {
    // As OpenSSL (so Node): a passphrase is checked against the file's MAC, which must be
    // there; without a passphrase, a file without a MAC is read as it is.
    if !passphrase.is_empty() && has_mac(data) == Some(false) {
        return Err(Error::tls("ERR_OSSL_PKCS12_MAC_ABSENT", "mac absent"));
    }
    // Relaxed: a key whose certificate is missing still comes out, so that the error can say
    // which of the two the file lacks, in Node's words.
    let store = KeyStore::from_pkcs12(data, passphrase, Pkcs12ImportPolicy::Relaxed)
        .map_err(|e| load_error(&e))?;
    let Some((_, keychain)) = store.private_key_chain() else {
        return Err(Error::tls(
            "ERR_CRYPTO_OPERATION_FAILED",
            "Unable to load private key from PFX data",
        ));
    };
    if keychain.certs().is_empty() {
        return Err(Error::tls(
            "ERR_CRYPTO_OPERATION_FAILED",
            "Unable to load certificate from PFX data",
        ));
    }
    let chain: Vec<CertificateDer<'static>> = keychain
        .certs()
        .iter()
        .map(|c| CertificateDer::from(c.as_der().to_vec()))
        .collect();
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(keychain.key().as_der().to_vec()));
    let authorities = chain.iter().skip(1).cloned().collect();
    Ok(Pkcs12Identity {
        chain,
        key,
        authorities,
    })
}

/// Node's errors where it has them: a wrong passphrase fails the MAC check, or, for a file
/// without a MAC, the decryption (OpenSSL's "bad decrypt"), and a scheme it cannot decrypt is
/// unsupported data.
fn load_error(e: &p12_keystore::error::Error) -> Error {
    use p12_keystore::error::Error as E;
    match e {
        E::MacError(_) => Error::tls("ERR_OSSL_PKCS12_MAC_VERIFY_FAILURE", "mac verify failure"),
        // A wrong key shows as bad padding: PBES2's decryption fails (the pkcs5 crate's
        // DecryptFailed), PBES1's unpadding. Other PKCS#5 errors are the file's.
        E::Pkcs5Error(m) if m.ends_with("decryption failed") => bad_decrypt(),
        E::UnpadError => bad_decrypt(),
        E::UnsupportedEncryptionScheme | E::UnsupportedMacAlgorithm | E::UnsupportedContentType => {
            Error::tls(
                "ERR_CRYPTO_UNSUPPORTED_OPERATION",
                format!("Unsupported PKCS12 PFX data: {e}"),
            )
        }
        _ => Error::tls(
            "ERR_CRYPTO_OPERATION_FAILED",
            format!("Unable to load PFX certificate: {e}"),
        ),
    }
}

fn bad_decrypt() -> Error {
    Error::tls("ERR_OSSL_BAD_DECRYPT", "bad decrypt")
}

/// Whether a PFX (RFC 7292: `SEQUENCE { version, authSafe, macData OPTIONAL }`) carries its
/// MAC; `None` when its outer structure is not DER that can be read this way (a BER file with
/// indefinite lengths): the reader then decides.
fn has_mac(data: &[u8]) -> Option<bool> {
    let (tag, pfx, _) = der::tlv(data)?;
    if tag != 0x30 {
        return None;
    }
    let (_, _, rest) = der::tlv(pfx)?;
    let (_, _, rest) = der::tlv(rest)?;
    Some(!rest.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mac_is_found_in_the_outer_sequence() {
        // SEQUENCE { INTEGER 3, SEQUENCE {} } and the same with a third element.
        assert_eq!(
            has_mac(&[0x30, 0x05, 0x02, 0x01, 0x03, 0x30, 0x00]),
            Some(false)
        );
        assert_eq!(
            has_mac(&[0x30, 0x07, 0x02, 0x01, 0x03, 0x30, 0x00, 0x30, 0x00]),
            Some(true)
        );
        // A long-form length.
        let mut long = vec![0x30, 0x81, 0x86, 0x02, 0x01, 0x03, 0x30, 0x81, 0x80];
        long.extend([0u8; 0x80]);
        assert_eq!(has_mac(&long), Some(false));
        // BER's indefinite length, truncated data, another outer tag: not decided here.
        assert_eq!(has_mac(&[0x30, 0x80, 0x02, 0x01, 0x03, 0x00, 0x00]), None);
        assert_eq!(has_mac(&[0x30, 0x07, 0x02, 0x01, 0x03]), None);
        assert_eq!(has_mac(&[0x04, 0x00]), None);
        assert_eq!(has_mac(&[]), None);
    }

    #[test]
    fn only_a_failed_decryption_is_a_bad_decrypt() {
        use p12_keystore::error::Error as E;
        // As the pkcs5 crate words its errors.
        let failed = E::Pkcs5Error("PKCS#5 decryption failed".to_owned());
        assert_eq!(load_error(&failed).code(), "ERR_OSSL_BAD_DECRYPT");
        assert_eq!(load_error(&E::UnpadError).code(), "ERR_OSSL_BAD_DECRYPT");
        let unsupported = E::Pkcs5Error("PKCS#5 algorithm 1.2.3 is unsupported".to_owned());
        let err = load_error(&unsupported);
        assert_eq!(err.code(), "ERR_CRYPTO_OPERATION_FAILED");
        assert_eq!(
            err.message(),
            "Unable to load PFX certificate: PKCS#5 algorithm 1.2.3 is unsupported"
        );
    }
}
