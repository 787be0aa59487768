//! Node's `ciphers` option, read as Node and OpenSSL read it, into the suites rustls offers.
//!
//! Node splits the list at `:`: names that start with `TLS_` are the TLS 1.3 suites (all of
//! them when none is named), the rest is an OpenSSL cipher list for TLS 1.2 and earlier
//! (`SSL_CTX_set_cipher_list`), with its grammar: items separated by `:`, `,` or spaces; an
//! item is a suite's name or a keyword (`HIGH`, `ECDHE`, `aRSA`, `AESGCM`, `DEFAULT`, ...),
//! or several joined by `+` (suites that match all of them); `!` removes for good, `-`
//! removes, `+` moves to the end, nothing adds; `@STRENGTH` sorts by key length, `@SECLEVEL=n`
//! sets a level every suite here meets. A list whose TLS 1.2 part selects no suite fails as
//! OpenSSL fails it ("no cipher match"); a list of TLS 1.3 names only turns TLS 1.2 off.

use rustls::CipherSuite;

use super::names::SUITES;
use crate::error::Error;

/// What a `ciphers` string selects.
#[derive(Debug, PartialEq, Eq)]
pub struct Selection {
    /// The suites, in order of preference: TLS 1.3's first, as OpenSSL offers them.
    pub suites: Vec<CipherSuite>,
    /// Only TLS 1.3 suites were named: TLS 1.2 is off (Node raises the minimum version).
    pub tls13_only: bool,
}

/// The OpenSSL keywords a TLS 1.2 suite answers to, and its key length for `@STRENGTH`.
fn attributes(suite: CipherSuite) -> (&'static [&'static str], &'static [&'static str], u16) {
    use CipherSuite as S;
    let ecdsa: &[&str] = &["aECDSA", "ECDSA"];
    let rsa: &[&str] = &["aRSA"];
    match suite {
        S::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384 => {
            (ecdsa, &["AES", "AESGCM", "AES256", "SHA384"], 256)
        }
        S::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256 => {
            (ecdsa, &["AES", "AESGCM", "AES128", "SHA256"], 128)
        }
        S::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256 => (ecdsa, &["CHACHA20", "SHA256"], 256),
        S::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384 => {
            (rsa, &["AES", "AESGCM", "AES256", "SHA384"], 256)
        }
        S::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 => {
            (rsa, &["AES", "AESGCM", "AES128", "SHA256"], 128)
        }
        S::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256 => (rsa, &["CHACHA20", "SHA256"], 256),
        _ => (&[], &[], 0),
    }
}

/// Keywords every TLS 1.2 suite here answers to: all are ECDHE, AEAD, high strength, in the
/// default list and allowed at any security level.
const COMMON: &[&str] = &[
    "ALL", "DEFAULT", "HIGH", "kECDHE", "ECDHE", "EECDH", "kEECDH", "ECDH", "AEAD", "TLSv1.2",
];

fn matches(suite: CipherSuite, openssl: &str, iana: &str, word: &str) -> bool {
    let (auth, enc, _) = attributes(suite);
    word == openssl
        || word == iana
        || COMMON.contains(&word)
        || auth.contains(&word)
        || enc.contains(&word)
}

/// Reads `ciphers` (see the module's header).
pub fn select(ciphers: &str) -> Result<Selection, Error> {
    // Node's split: a `TLS_` name is a TLS 1.3 suite's, whatever else the list holds.
    let (tls13_names, rest): (Vec<&str>, Vec<&str>) = ciphers
        .split(':')
        .filter(|s| !s.is_empty())
        .partition(|s| s.starts_with("TLS_"));
    if tls13_names.is_empty() && rest.is_empty() {
        return Err(Error::tls(
            "ERR_INVALID_ARG_VALUE",
            format!("The argument 'options.ciphers' is invalid. Received '{ciphers}'"),
        ));
    }
    let tls13: Vec<(CipherSuite, &str, &str)> = SUITES
        .iter()
        .copied()
        .filter(|(s, _, _)| is_tls13(*s))
        .collect();
    let mut suites: Vec<CipherSuite> = if tls13_names.is_empty() {
        tls13.iter().map(|(s, _, _)| *s).collect()
    } else {
        let named: Vec<CipherSuite> = tls13_names
            .iter()
            .filter_map(|name| tls13.iter().find(|(_, o, _)| o == name).map(|(s, _, _)| *s))
            .collect();
        if named.is_empty() {
            return Err(no_match());
        }
        named
    };
    if rest.is_empty() {
        return Ok(Selection {
            suites,
            tls13_only: true,
        });
    }
    let tls12 = cipher_list(&rest.join(":"));
    if tls12.is_empty() {
        return Err(no_match());
    }
    suites.extend(tls12);
    Ok(Selection {
        suites,
        tls13_only: false,
    })
}

fn is_tls13(suite: CipherSuite) -> bool {
    matches!(
        suite,
        CipherSuite::TLS13_AES_256_GCM_SHA384
            | CipherSuite::TLS13_AES_128_GCM_SHA256
            | CipherSuite::TLS13_CHACHA20_POLY1305_SHA256
    )
}

/// OpenSSL's error for a list that selects nothing, as Node reports it.
fn no_match() -> Error {
    Error::tls(
        "ERR_SSL_NO_CIPHER_MATCH",
        "error:0A0000B9:SSL routines::no cipher match",
    )
}

/// An OpenSSL cipher list (`SSL_CTX_set_cipher_list`) over the TLS 1.2 suites rustls offers.
fn cipher_list(list: &str) -> Vec<CipherSuite> {
    // Every suite in OpenSSL's starting order, with whether it is in the list and whether
    // `!` took it out for good.
    let mut order: Vec<(CipherSuite, &str, &str, bool, bool)> = SUITES
        .iter()
        .filter(|(s, _, _)| !is_tls13(*s))
        .map(|&(s, o, i)| (s, o, i, false, false))
        .collect();
    // `ALL@SECLEVEL=0` is `ALL` and `@SECLEVEL=0`.
    let items = list
        .split([':', ',', ' '])
        .flat_map(|item| {
            let (word, command) = item
                .split_once('@')
                .map_or((item, None), |(w, c)| (w, Some(c)));
            [Some(word), command.map(|_| &item[word.len()..])]
        })
        .flatten()
        .filter(|item| !item.is_empty());
    for item in items {
        if let Some(command) = item.strip_prefix('@') {
            if command == "STRENGTH" {
                // Stable: suites of one strength keep their order.
                order.sort_by_key(|(s, ..)| std::cmp::Reverse(attributes(*s).2));
            }
            // `@SECLEVEL=n`: every suite here is allowed at every level.
            continue;
        }
        let (op, words) = match item.as_bytes()[0] {
            b'!' | b'-' | b'+' => (item.as_bytes()[0], &item[1..]),
            _ => (b' ', item),
        };
        let words: Vec<&str> = words.split('+').collect();
        let hit = |(s, o, i, ..): &(CipherSuite, &str, &str, bool, bool)| {
            words.iter().all(|w| matches(*s, o, i, w))
        };
        match op {
            b'!' => order.iter_mut().filter(|e| hit(e)).for_each(|e| {
                e.3 = false;
                e.4 = true;
            }),
            b'-' => order
                .iter_mut()
                .filter(|e| hit(e))
                .for_each(|e| e.3 = false),
            // Moves the matching suites in the list to its end, in their order.
            b'+' => {
                let (moved, kept): (Vec<_>, Vec<_>) = order.drain(..).partition(|e| e.3 && hit(e));
                order = kept;
                order.extend(moved);
            }
            // Adds the matching suites not in the list yet at its end.
            _ => {
                let (added, kept): (Vec<_>, Vec<_>) =
                    order.drain(..).partition(|e| !e.3 && !e.4 && hit(e));
                order = kept;
                order.extend(added.into_iter().map(|mut e| {
                    e.3 = true;
                    e
                }));
            }
        }
    }
    // The list's order is that of the suites in it (the others keep their place, unused).
    order.into_iter().filter(|e| e.3).map(|e| e.0).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use CipherSuite as S;

    const ALL12: [CipherSuite; 6] = [
        S::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
        S::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
        S::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
        S::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
        S::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
        S::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
    ];
    const ALL13: [CipherSuite; 3] = [
        S::TLS13_AES_256_GCM_SHA384,
        S::TLS13_AES_128_GCM_SHA256,
        S::TLS13_CHACHA20_POLY1305_SHA256,
    ];

    fn tls12(list: &str) -> Vec<CipherSuite> {
        let sel = select(list).unwrap_or_else(|e| panic!("{list}: {e}"));
        assert!(!sel.tls13_only);
        assert_eq!(
            sel.suites[..3],
            ALL13,
            "{list}: TLS 1.3 suites stay when none is named"
        );
        sel.suites[3..].to_vec()
    }

    #[test]
    fn strings_node_accepts_select_what_openssl_would_among_ours() {
        for list in [
            "DEFAULT",
            "HIGH:!aNULL:!MD5",
            "ALL@SECLEVEL=0",
            "ALL",
            "ECDHE",
            "HIGH:@SECLEVEL=2",
        ] {
            assert_eq!(tls12(list), ALL12, "{list}");
        }
        let gcm = tls12("ECDHE+AESGCM");
        assert_eq!(gcm.len(), 4);
        assert!(gcm.iter().all(|s| format!("{s:?}").contains("GCM")));
        assert_eq!(tls12("aRSA"), &ALL12[3..], "RSA-authenticated suites only");
        assert_eq!(
            tls12("ECDHE-RSA-AES128-GCM-SHA256,ECDHE-RSA-AES256-GCM-SHA384"),
            [
                S::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
                S::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384
            ]
        );
    }

    #[test]
    fn the_operators_remove_kill_move_and_sort() {
        // `-` removes, a later item adds back; `!` removes for good.
        assert_eq!(
            tls12("AES256:-ECDSA"),
            [S::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384]
        );
        assert_eq!(tls12("ALL:-ECDSA:AES256").len(), 4);
        assert_eq!(tls12("ALL:!ECDSA:AES256").len(), 3);
        // `+` moves to the end.
        let moved = tls12("ALL:+AES128");
        assert_eq!(
            moved[4..],
            [
                S::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
                S::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256
            ]
        );
        // @STRENGTH puts the 128-bit suites last.
        let strong = tls12("AES128:CHACHA20:@STRENGTH");
        assert_eq!(
            strong[..2],
            [
                S::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
                S::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256
            ]
        );
        assert_eq!(strong.len(), 4);
    }

    #[test]
    fn tls13_names_pick_tls13_suites_and_alone_turn_tls12_off() {
        let sel = select("TLS_AES_128_GCM_SHA256").unwrap();
        assert_eq!(
            sel,
            Selection {
                suites: vec![S::TLS13_AES_128_GCM_SHA256],
                tls13_only: true
            }
        );
        let sel = select("ECDHE-RSA-AES128-GCM-SHA256:TLS_AES_256_GCM_SHA384").unwrap();
        assert_eq!(
            sel.suites,
            [
                S::TLS13_AES_256_GCM_SHA384,
                S::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256
            ]
        );
        assert!(!sel.tls13_only);
    }

    #[test]
    fn a_list_that_selects_nothing_fails_as_openssl_does() {
        for list in [
            "RC4-MD5",
            "!ALL",
            "DES-CBC3-SHA:RC4-MD5",
            "RC4-MD5:TLS_AES_128_GCM_SHA256",
            "TLS_NOT_A_SUITE",
            "eNULL",
        ] {
            let err = select(list).expect_err(list);
            assert_eq!(err.code(), "ERR_SSL_NO_CIPHER_MATCH", "{list}");
        }
        assert_eq!(select(":").unwrap_err().code(), "ERR_INVALID_ARG_VALUE");
    }
}
