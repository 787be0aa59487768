//! Node's `ecdhCurve` option (`SSL_CTX_set1_groups_list`), read into the key exchange groups
//! rustls offers: a `:`-separated list of group names in order of preference, or `auto` for
//! the default. The client sends its key share for the first group and lists them all, as
//! OpenSSL's client does.
//!
//! A name OpenSSL does not know fails as Node fails it (`ERR_CRYPTO_OPERATION_FAILED`,
//! "Failed to set ECDH curve"). One it knows that rustls does not offer (P-521, X448, the
//! finite-field and post-quantum groups) is passed over; a list of only such names fails at
//! once, where Node would connect with them.

use rustls::crypto::SupportedKxGroup;
use rustls::NamedGroup;

use crate::error::Error;

/// The groups rustls's provider here offers, by every name OpenSSL reads for them (as Node 22
/// and later, whose OpenSSL reads them in any case).
const OFFERED: &[(&str, NamedGroup)] = &[
    ("x25519", NamedGroup::X25519),
    ("p-256", NamedGroup::secp256r1),
    ("prime256v1", NamedGroup::secp256r1),
    ("secp256r1", NamedGroup::secp256r1),
    ("p-384", NamedGroup::secp384r1),
    ("secp384r1", NamedGroup::secp384r1),
];

/// Group names OpenSSL takes that rustls does not offer.
const KNOWN: &[&str] = &[
    "p-521",
    "secp521r1",
    "p-224",
    "secp224r1",
    "p-192",
    "prime192v1",
    "secp192r1",
    "secp256k1",
    "secp160k1",
    "secp160r1",
    "secp160r2",
    "secp192k1",
    "secp224k1",
    "sect163k1",
    "sect163r1",
    "sect163r2",
    "sect193r1",
    "sect193r2",
    "sect233k1",
    "sect233r1",
    "sect239k1",
    "sect283k1",
    "sect283r1",
    "sect409k1",
    "sect409r1",
    "sect571k1",
    "sect571r1",
    "x448",
    "ffdhe2048",
    "ffdhe3072",
    "ffdhe4096",
    "ffdhe6144",
    "ffdhe8192",
    "brainpoolp256r1",
    "brainpoolp384r1",
    "brainpoolp512r1",
    "brainpoolp256r1tls13",
    "brainpoolp384r1tls13",
    "brainpoolp512r1tls13",
    "mlkem512",
    "mlkem768",
    "mlkem1024",
    "x25519mlkem768",
    "x448mlkem1024",
    "secp256r1mlkem768",
    "secp384r1mlkem1024",
];

fn failed() -> Error {
    Error::tls("ERR_CRYPTO_OPERATION_FAILED", "Failed to set ECDH curve")
}

/// The groups of `offered` that `list` names, in its order; `offered` itself for `auto` (and
/// for an empty list, which OpenSSL 3.2 and later take as its default).
pub fn select(
    list: &str,
    offered: &[&'static dyn SupportedKxGroup],
) -> Result<Vec<&'static dyn SupportedKxGroup>, Error> {
    if list.is_empty() || list == "auto" {
        return Ok(offered.to_vec());
    }
    let mut groups: Vec<&'static dyn SupportedKxGroup> = Vec::new();
    for name in list.split(':') {
        let lower = name.to_ascii_lowercase();
        match OFFERED.iter().find(|(n, _)| *n == lower) {
            Some((_, group)) => {
                if let Some(g) = offered.iter().find(|g| g.name() == *group) {
                    if !groups.iter().any(|h| h.name() == *group) {
                        groups.push(*g);
                    }
                }
            }
            None if KNOWN.contains(&lower.as_str()) => {}
            None => return Err(failed()),
        }
    }
    if groups.is_empty() {
        return Err(Error::tls(
            "ERR_HYPERAGENT_UNSUPPORTED",
            format!(
                "ecdhCurve '{list}' names no key exchange group rustls offers (X25519, P-256, P-384)"
            ),
        ));
    }
    Ok(groups)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &str) -> Result<Vec<NamedGroup>, String> {
        let provider = rustls::crypto::ring::default_provider();
        select(list, &provider.kx_groups)
            .map(|gs| gs.iter().map(|g| g.name()).collect())
            .map_err(|e| e.code().to_owned())
    }

    #[test]
    fn auto_and_empty_keep_the_default() {
        let all = vec![
            NamedGroup::X25519,
            NamedGroup::secp256r1,
            NamedGroup::secp384r1,
        ];
        assert_eq!(names("auto"), Ok(all.clone()));
        assert_eq!(names(""), Ok(all));
    }

    #[test]
    fn a_list_orders_the_groups_by_every_name_openssl_reads() {
        assert_eq!(
            names("P-384:prime256v1"),
            Ok(vec![NamedGroup::secp384r1, NamedGroup::secp256r1])
        );
        assert_eq!(names("secp256r1"), Ok(vec![NamedGroup::secp256r1]));
        assert_eq!(
            names("x25519:X25519:p-256"),
            Ok(vec![NamedGroup::X25519, NamedGroup::secp256r1])
        );
    }

    #[test]
    fn groups_rustls_lacks_are_passed_over_and_alone_fail() {
        assert_eq!(
            names("P-521:X448:ffdhe2048:P-256:sect571r1"),
            Ok(vec![NamedGroup::secp256r1])
        );
        for list in ["P-521", "X448:secp521r1", "X25519MLKEM768"] {
            assert_eq!(
                names(list),
                Err("ERR_HYPERAGENT_UNSUPPORTED".into()),
                "{list}"
            );
        }
    }

    #[test]
    fn unknown_names_and_empty_items_fail_as_in_node() {
        for list in ["foo", "X25519:foo", "P-256:", ":P-256", "P256", "sect"] {
            assert_eq!(
                names(list),
                Err("ERR_CRYPTO_OPERATION_FAILED".into()),
                "{list}"
            );
        }
    }
}
