//! Names in Node's vocabulary: cipher suites as OpenSSL and IANA call them, key exchange
//! groups as `getEphemeralKeyInfo()` gives them, TLS alerts as OpenSSL reports them
//! (`ERR_SSL_SSLV3_ALERT_HANDSHAKE_FAILURE`, ...).

use rustls::{AlertDescription, CipherSuite, NamedGroup};

use crate::error::Error;

/// (OpenSSL name, IANA name) of each suite rustls offers.
pub(super) const SUITES: &[(CipherSuite, &str, &str)] = &[
    (
        CipherSuite::TLS13_AES_256_GCM_SHA384,
        "TLS_AES_256_GCM_SHA384",
        "TLS_AES_256_GCM_SHA384",
    ),
    (
        CipherSuite::TLS13_AES_128_GCM_SHA256,
        "TLS_AES_128_GCM_SHA256",
        "TLS_AES_128_GCM_SHA256",
    ),
    (
        CipherSuite::TLS13_CHACHA20_POLY1305_SHA256,
        "TLS_CHACHA20_POLY1305_SHA256",
        "TLS_CHACHA20_POLY1305_SHA256",
    ),
    (
        CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
        "ECDHE-ECDSA-AES256-GCM-SHA384",
        "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
    ),
    (
        CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
        "ECDHE-ECDSA-AES128-GCM-SHA256",
        "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
    ),
    (
        CipherSuite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
        "ECDHE-ECDSA-CHACHA20-POLY1305",
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
    ),
    (
        CipherSuite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
        "ECDHE-RSA-AES256-GCM-SHA384",
        "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
    ),
    (
        CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
        "ECDHE-RSA-AES128-GCM-SHA256",
        "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
    ),
    (
        CipherSuite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
        "ECDHE-RSA-CHACHA20-POLY1305",
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
    ),
];

/// (OpenSSL name, IANA name) of a negotiated suite.
pub fn cipher_names(suite: CipherSuite) -> (&'static str, &'static str) {
    SUITES
        .iter()
        .find(|(s, _, _)| *s == suite)
        .map_or(("unknown", "unknown"), |&(_, openssl, iana)| {
            (openssl, iana)
        })
}

/// A key exchange group as Node's `getEphemeralKeyInfo()` describes it: its type, OpenSSL's
/// name and its size in bits. None for a group Node has no such words for (it gives `{}`).
pub fn ephemeral_key(group: NamedGroup) -> Option<(&'static str, &'static str, u32)> {
    Some(match group {
        NamedGroup::X25519 => ("ECDH", "X25519", 253),
        NamedGroup::X448 => ("ECDH", "X448", 448),
        NamedGroup::secp256r1 => ("ECDH", "prime256v1", 256),
        NamedGroup::secp384r1 => ("ECDH", "secp384r1", 384),
        NamedGroup::secp521r1 => ("ECDH", "secp521r1", 521),
        _ => return None,
    })
}

/// A fatal alert from the server on an established connection, as Node reports it: OpenSSL's
/// reason as the code (`ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED`), the alert in the message.
pub fn alert_error(alert: AlertDescription) -> Error {
    let (reason, text, number) = alert_names(alert);
    Error::tls(
        format!("ERR_SSL_{reason}"),
        format!("{text} (SSL alert number {number})"),
    )
}

/// A fatal alert during the handshake, as Node reports it there: `EPROTO` on the write that
/// met it, with OpenSSL's text (`write EPROTO ... tlsv1 alert protocol version ...`).
pub fn handshake_alert_error(alert: AlertDescription) -> Error {
    let (_, text, number) = alert_names(alert);
    Error::os(libc::EPROTO, "write").with_detail(format!("{text}: SSL alert number {number}"))
}

fn alert_names(alert: AlertDescription) -> (&'static str, &'static str, u8) {
    let (reason, text) = match alert {
        AlertDescription::HandshakeFailure => (
            "SSLV3_ALERT_HANDSHAKE_FAILURE",
            "sslv3 alert handshake failure",
        ),
        AlertDescription::BadCertificate => {
            ("SSLV3_ALERT_BAD_CERTIFICATE", "sslv3 alert bad certificate")
        }
        AlertDescription::UnsupportedCertificate => (
            "SSLV3_ALERT_UNSUPPORTED_CERTIFICATE",
            "sslv3 alert unsupported certificate",
        ),
        AlertDescription::CertificateRevoked => (
            "SSLV3_ALERT_CERTIFICATE_REVOKED",
            "sslv3 alert certificate revoked",
        ),
        AlertDescription::CertificateExpired => (
            "SSLV3_ALERT_CERTIFICATE_EXPIRED",
            "sslv3 alert certificate expired",
        ),
        AlertDescription::CertificateUnknown => (
            "SSLV3_ALERT_CERTIFICATE_UNKNOWN",
            "sslv3 alert certificate unknown",
        ),
        AlertDescription::IllegalParameter => (
            "SSLV3_ALERT_ILLEGAL_PARAMETER",
            "sslv3 alert illegal parameter",
        ),
        AlertDescription::UnexpectedMessage => (
            "SSLV3_ALERT_UNEXPECTED_MESSAGE",
            "sslv3 alert unexpected message",
        ),
        AlertDescription::BadRecordMac => {
            ("SSLV3_ALERT_BAD_RECORD_MAC", "sslv3 alert bad record mac")
        }
        AlertDescription::UnknownCA => ("TLSV1_ALERT_UNKNOWN_CA", "tlsv1 alert unknown ca"),
        AlertDescription::AccessDenied => {
            ("TLSV1_ALERT_ACCESS_DENIED", "tlsv1 alert access denied")
        }
        AlertDescription::DecodeError => ("TLSV1_ALERT_DECODE_ERROR", "tlsv1 alert decode error"),
        AlertDescription::DecryptError => {
            ("TLSV1_ALERT_DECRYPT_ERROR", "tlsv1 alert decrypt error")
        }
        AlertDescription::ProtocolVersion => (
            "TLSV1_ALERT_PROTOCOL_VERSION",
            "tlsv1 alert protocol version",
        ),
        AlertDescription::InsufficientSecurity => (
            "TLSV1_ALERT_INSUFFICIENT_SECURITY",
            "tlsv1 alert insufficient security",
        ),
        AlertDescription::InternalError => {
            ("TLSV1_ALERT_INTERNAL_ERROR", "tlsv1 alert internal error")
        }
        AlertDescription::UnrecognisedName => {
            ("TLSV1_UNRECOGNIZED_NAME", "tlsv1 unrecognized name")
        }
        AlertDescription::UnsupportedExtension => (
            "TLSV1_ALERT_UNSUPPORTED_EXTENSION",
            "tlsv1 alert unsupported extension",
        ),
        AlertDescription::CertificateRequired => (
            "TLSV13_ALERT_CERTIFICATE_REQUIRED",
            "tlsv13 alert certificate required",
        ),
        AlertDescription::NoApplicationProtocol => (
            "TLSV1_ALERT_NO_APPLICATION_PROTOCOL",
            "tlsv1 alert no application protocol",
        ),
        _ => ("TLSV1_ALERT_UNKNOWN", "tlsv1 alert unknown"),
    };
    (reason, text, u8::from(alert))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_exchange_groups_have_node_s_words() {
        assert_eq!(
            ephemeral_key(NamedGroup::X25519),
            Some(("ECDH", "X25519", 253))
        );
        assert_eq!(
            ephemeral_key(NamedGroup::secp256r1),
            Some(("ECDH", "prime256v1", 256))
        );
        assert_eq!(ephemeral_key(NamedGroup::FFDHE2048), None);
    }

    #[test]
    fn suites_have_both_names() {
        assert_eq!(
            cipher_names(CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256),
            (
                "ECDHE-RSA-AES128-GCM-SHA256",
                "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"
            )
        );
    }

    #[test]
    fn alerts_read_as_openssl_reports_them() {
        let err = alert_error(AlertDescription::HandshakeFailure);
        assert_eq!(err.code(), "ERR_SSL_SSLV3_ALERT_HANDSHAKE_FAILURE");
        assert_eq!(
            err.message(),
            "sslv3 alert handshake failure (SSL alert number 40)"
        );
        assert_eq!(
            alert_error(AlertDescription::CertificateRequired).code(),
            "ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED"
        );
    }
}
