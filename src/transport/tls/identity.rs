//! Node's check of a server's name (`tls.checkServerIdentity`), where it can be decided within
//! the handshake. Node's `tls.connect` runs that check before its side of the handshake is
//! finished: a server whose certificate does not name the host never sees the client finish
//! (nor, asked for one, its certificate). Where Node's own check applies (no
//! `checkServerIdentity` of the program's), the verifier refuses such a certificate in the
//! handshake too; JavaScript still words the error, with Node's function, from the
//! certificate.
//!
//! Only a refusal that rests on the certificate's DNS names is decided here. Where Node would
//! read the subject's CN instead (a certificate with no DNS name), the name is left to
//! JavaScript after the handshake, as before.

use super::der;

/// Whether Node's `tls.checkServerIdentity(host, cert)` surely refuses `host`, a DNS name, for
/// the certificate `leaf` (DER): its subjectAltName has DNS names, and none matches `host`.
/// `false` whenever the verdict rests on anything else: no DNS name (Node falls back on the
/// CN), a host that reads as an IP address, or a certificate not well formed.
pub fn node_refuses(leaf: &[u8], host: &str) -> bool {
    let Some(names) = der::dns_names(leaf) else {
        return false;
    };
    if names.is_empty() {
        return false;
    }
    // As Node: the trailing dot goes before the check, and again as the host is split.
    let host = unfqdn(unfqdn(host.as_bytes()));
    if std::str::from_utf8(host).is_ok_and(|h| h.parse::<std::net::IpAddr>().is_ok()) {
        return false;
    }
    let host_parts = split_host(host);
    !names.iter().any(|pattern| matches(&host_parts, pattern))
}

/// Without one trailing dot.
fn unfqdn(name: &[u8]) -> &[u8] {
    name.strip_suffix(b".").unwrap_or(name)
}

/// The labels of a name, its trailing dot dropped and A-Z lower-cased (Node lower-cases no other
/// letter).
fn split_host(name: &[u8]) -> Vec<Vec<u8>> {
    unfqdn(name)
        .split(|&b| b == b'.')
        .map(|label| label.to_ascii_lowercase())
        .collect()
}

/// Node's `check(hostParts, pattern, true)`: whether the certificate's name `pattern` matches
/// the host's labels, a wildcard allowed in the first label of a pattern of three labels or
/// more.
fn matches(host: &[Vec<u8>], pattern: &[u8]) -> bool {
    if pattern.is_empty() {
        return false;
    }
    let parts = split_host(pattern);
    if parts.len() != host.len() || parts.iter().any(Vec::is_empty) {
        return false;
    }
    // Blanks, control characters and anything beyond ASCII never match.
    if parts
        .iter()
        .any(|p| p.iter().any(|&b| !(0x21..=0x7f).contains(&b)))
    {
        return false;
    }
    if (1..host.len()).any(|i| host[i] != parts[i]) {
        return false;
    }
    let (host_first, first) = (&host[0], &parts[0]);
    let pieces: Vec<&[u8]> = first.split(|&b| b == b'*').collect();
    // No wildcard, or an A-label (Punycode), which RFC 6125 matches only as it is.
    if pieces.len() == 1 || first.windows(4).any(|w| w == b"xn--") {
        return host_first == first;
    }
    // One wildcard at most, and not over a top-level domain (`*.com`).
    if pieces.len() > 2 || parts.len() <= 2 {
        return false;
    }
    let (prefix, suffix) = (pieces[0], pieces[1]);
    prefix.len() + suffix.len() <= host_first.len()
        && host_first.starts_with(prefix)
        && host_first.ends_with(suffix)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(host: &str) -> Vec<Vec<u8>> {
        split_host(host.as_bytes())
    }

    #[test]
    fn a_pattern_matches_as_nodes_check_matches_it() {
        let yes = [
            ("example.com", "example.com"),
            ("Example.COM", "example.com"),
            ("example.com", "EXAMPLE.com."),
            ("www.example.com", "*.example.com"),
            ("foo.example.com", "f*.example.com"),
            ("foo.example.com", "*o.example.com"),
            ("foo.example.com", "f*o.example.com"),
            ("xn--bcher-kva.example", "xn--bcher-kva.example"),
        ];
        let no = [
            ("example.com", "example.org"),
            ("a.b.example.com", "*.example.com"),
            ("example.com", "*.example.com"),
            ("example.com", "*.com"),
            ("fo.example.com", "f*oo.example.com"),
            ("foo.example.com", "f**.example.com"),
            ("foo.example.com", "*.*.com"),
            ("xn--a.example.com", "xn--*.example.com"),
            ("foo.example.com", "foo..com"),
            ("foo.example.com", ""),
            ("foo.example.com", "f o.example.com"),
            ("b\u{e4}r.example.com", "b\u{e4}r.example.com"),
        ];
        for (host, pattern) in yes {
            assert!(
                matches(&labels(host), pattern.as_bytes()),
                "{host} ~ {pattern}"
            );
        }
        for (host, pattern) in no {
            assert!(
                !matches(&labels(host), pattern.as_bytes()),
                "{host} !~ {pattern}"
            );
        }
    }

    #[test]
    fn only_a_refusal_by_the_certificates_dns_names_is_decided_here() {
        // localhost.pem names localhost (and 127.0.0.1); wrong-host.pem names example.com.
        let localhost = leaf("localhost.pem");
        let wrong_host = leaf("wrong-host.pem");
        assert!(!node_refuses(&localhost, "localhost"));
        assert!(!node_refuses(&localhost, "LOCALHOST."));
        assert!(node_refuses(&localhost, "example.com"));
        assert!(node_refuses(&wrong_host, "localhost"));
        assert!(!node_refuses(&wrong_host, "example.com"));
        // An address is checked against the certificate's IP addresses, by JavaScript.
        assert!(!node_refuses(&wrong_host, "127.0.0.1"));
        // v1-localhost.pem has no extensions: its CN is its name, for JavaScript to check.
        assert!(!node_refuses(&leaf("v1-localhost.pem"), "example.com"));
        assert!(!node_refuses(b"not a certificate", "example.com"));
    }

    fn leaf(name: &str) -> Vec<u8> {
        crate::transport::tls::tests::chain(name)[0].to_vec()
    }
}
