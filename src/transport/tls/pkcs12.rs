//! `pfx`: a PKCS#12 file's private key and certificate chain, for client authentication, as
//! Node's `tls.createSecureContext` takes them: the file's integrity (MAC) and its encrypted
//! parts are checked and opened with the passphrase (an absent one is the empty one).

use p12_keystore::{KeyStore, Pkcs12ImportPolicy};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

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

/// Node's errors where it has them: a wrong passphrase fails the MAC check, and a scheme it
/// cannot decrypt is unsupported data.
fn load_error(e: &p12_keystore::error::Error) -> Error {
    use p12_keystore::error::Error as E;
    match e {
        E::MacError(_) => Error::tls("ERR_OSSL_PKCS12_MAC_VERIFY_FAILURE", "mac verify failure"),
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
