//! The handful of X.509 fields the verifier needs to classify a failure as OpenSSL would
//! (issuer, subject, validity, basic constraints) and to check a server's name as Node's own
//! check would (the subjectAltName's DNS names), read with a minimal DER walker (which also
//! finds whether a PKCS#12 file has its MAC). Everything users see of a certificate is parsed
//! by Node itself (`crypto.X509Certificate`) from the raw bytes.

/// Fields of a certificate's `TBSCertificate`.
#[derive(Debug, PartialEq, Eq)]
pub struct CertFields<'a> {
    /// The issuer `Name`, as encoded (compared byte for byte).
    pub issuer: &'a [u8],
    /// The subject `Name`, as encoded.
    pub subject: &'a [u8],
    /// `notBefore`, in seconds since the Unix epoch.
    pub not_before: i64,
    /// `notAfter`, in seconds since the Unix epoch.
    pub not_after: i64,
}

impl CertFields<'_> {
    /// Issued by itself (issuer equals subject): a root, or a self-signed leaf.
    pub fn self_issued(&self) -> bool {
        self.issuer == self.subject
    }
}

/// One TLV: its tag, its contents, and what follows it.
pub fn tlv(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (first as usize, rest)
    } else {
        let n = (first & 0x7f) as usize;
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n]
            .iter()
            .fold(0usize, |acc, &b| (acc << 8) | b as usize);
        (len, &rest[n..])
    };
    if rest.len() < len {
        return None;
    }
    Some((tag, &rest[..len], &rest[len..]))
}

/// A certificate's `TBSCertificate` fields from its serial number on, and whether it is of
/// version 1 (its `[0] EXPLICIT` version absent, or 0); `None` if it is not well formed.
fn tbs_fields(der: &[u8]) -> Option<(bool, &[u8])> {
    let (0x30, cert, _) = tlv(der)? else {
        return None;
    };
    let (0x30, tbs, _) = tlv(cert)? else {
        return None;
    };
    if tbs.first() != Some(&0xa0) {
        return Some((true, tbs));
    }
    let (_, version, rest) = tlv(tbs)?;
    Some((version == [0x02, 0x01, 0x00], rest))
}

/// The certificate's `subjectPublicKeyInfo`, whole (its DER); `None` if it is not well formed.
pub fn spki(der: &[u8]) -> Option<&[u8]> {
    let (_, mut rest) = tbs_fields(der)?;
    // serial, signature algorithm, issuer, validity, subject.
    for _ in 0..5 {
        rest = tlv(rest)?.2;
    }
    let (0x30, _, after) = tlv(rest)? else {
        return None;
    };
    Some(&rest[..rest.len() - after.len()])
}

/// What a certificate's issuer signed, and how: the `tbsCertificate` whole (its DER), the
/// contents of the `signatureAlgorithm` (an AlgorithmIdentifier without its SEQUENCE, as
/// webpki names algorithms), and the signature's bytes; `None` if it is not well formed.
pub fn signed(der: &[u8]) -> Option<(&[u8], &[u8], &[u8])> {
    let (0x30, cert, _) = tlv(der)? else {
        return None;
    };
    let (0x30, _, after_tbs) = tlv(cert)? else {
        return None;
    };
    let tbs = &cert[..cert.len() - after_tbs.len()];
    let (0x30, algorithm, rest) = tlv(after_tbs)? else {
        return None;
    };
    let (0x03, signature, _) = tlv(rest)? else {
        return None;
    };
    let (&0, signature) = signature.split_first()? else {
        return None;
    };
    Some((tbs, algorithm, signature))
}

/// The DER of the OID basicConstraints (2.5.29.19), contents only.
const BASIC_CONSTRAINTS: &[u8] = &[0x55, 0x1d, 0x13];

/// Whether a certificate may issue others, as OpenSSL decides for a trusted one: a version 1
/// certificate when it is self-issued (a version 1 root), a later one when its basicConstraints
/// say cA. `false` if it is not well formed.
pub fn may_issue(der: &[u8]) -> bool {
    may_issue_inner(der).unwrap_or(false)
}

fn may_issue_inner(der: &[u8]) -> Option<bool> {
    let (v1, _) = tbs_fields(der)?;
    if v1 {
        return Some(parse(der)?.self_issued());
    }
    let Some(constraints) = extension(der, BASIC_CONSTRAINTS)? else {
        return Some(false);
    };
    let (0x30, constraints, _) = tlv(constraints)? else {
        return None;
    };
    // cA BOOLEAN DEFAULT FALSE.
    Some(matches!(tlv(constraints), Some((0x01, [flag], _)) if *flag != 0))
}

/// The value (the contents of its `extnValue` OCTET STRING) of the certificate's extension
/// `oid`: `Some(None)` when it has none, `None` if it is not well formed or has the extension
/// twice (which OpenSSL refuses to read).
fn extension<'a>(der: &'a [u8], oid: &[u8]) -> Option<Option<&'a [u8]>> {
    let (_, mut rest) = tbs_fields(der)?;
    // serial, signature algorithm, issuer, validity, subject, subjectPublicKeyInfo.
    for _ in 0..6 {
        rest = tlv(rest)?.2;
    }
    // [1] issuerUniqueID and [2] subjectUniqueID may come before [3] extensions.
    while let Some((tag, contents, after)) = tlv(rest) {
        rest = after;
        if tag != 0xa3 {
            continue;
        }
        let (0x30, mut extensions, _) = tlv(contents)? else {
            return None;
        };
        let mut found = None;
        while !extensions.is_empty() {
            let (0x30, extension, after) = tlv(extensions)? else {
                return None;
            };
            extensions = after;
            let (0x06, id, mut value) = tlv(extension)? else {
                return None;
            };
            if id != oid {
                continue;
            }
            // critical BOOLEAN DEFAULT FALSE, then extnValue OCTET STRING.
            if value.first() == Some(&0x01) {
                value = tlv(value)?.2;
            }
            let (0x04, value, _) = tlv(value)? else {
                return None;
            };
            if found.replace(value).is_some() {
                return None;
            }
        }
        return Some(found);
    }
    Some(None)
}

/// The DER of the OID subjectAltName (2.5.29.17), contents only.
const SUBJECT_ALT_NAME: &[u8] = &[0x55, 0x1d, 0x11];

/// The `dNSName` entries of the certificate's subjectAltName, as their bytes, in order (none
/// when it has no such extension); `None` if the certificate or the extension is not well
/// formed: not DER (a length not in its shortest form), a tag that is no GeneralName's, or
/// bytes after the names. OpenSSL reads no names from such an extension, so Node's check reads
/// none either.
pub fn dns_names(der: &[u8]) -> Option<Vec<&[u8]>> {
    match extension(der, SUBJECT_ALT_NAME)? {
        Some(value) => general_dns_names(value),
        None => Some(Vec::new()),
    }
}

/// The `dNSName` entries of a subjectAltName's value (its `GeneralNames`); see [`dns_names`].
fn general_dns_names(value: &[u8]) -> Option<Vec<&[u8]>> {
    let (0x30, mut names, []) = strict_tlv(value)? else {
        return None;
    };
    let mut dns = Vec::new();
    while !names.is_empty() {
        let (tag, name, after) = strict_tlv(names)?;
        names = after;
        match tag {
            // dNSName: [2] IMPLICIT IA5String.
            0x82 => dns.push(name),
            // otherName, x400Address, directoryName, ediPartyName (constructed); rfc822Name,
            // uniformResourceIdentifier, iPAddress, registeredID.
            0xa0 | 0xa3 | 0xa4 | 0xa5 | 0x81 | 0x86 | 0x87 | 0x88 => {}
            _ => return None,
        }
    }
    Some(dns)
}

/// [`tlv`], its length in DER's shortest form only.
fn strict_tlv(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (tag, contents, rest) = tlv(input)?;
    let header = input.len() - contents.len() - rest.len();
    let len = contents.len();
    let shortest = if len < 0x80 {
        2
    } else {
        2 + (usize::BITS - len.leading_zeros()).div_ceil(8) as usize
    };
    (header == shortest).then_some((tag, contents, rest))
}

/// The contents of one TLV (a Name's value, without its SEQUENCE); `None` if not well formed.
pub fn contents(der: &[u8]) -> Option<&[u8]> {
    tlv(der).map(|(_, contents, _)| contents)
}

/// `contents` as a DER SEQUENCE (a trust anchor's subjectPublicKeyInfo value made whole again).
pub fn sequence(contents: &[u8]) -> Vec<u8> {
    let len = contents.len();
    let mut out = vec![0x30];
    if len < 0x80 {
        out.push(len as u8);
    } else {
        let bytes = len.to_be_bytes();
        let skip = bytes.iter().take_while(|&&b| b == 0).count();
        out.push(0x80 | (bytes.len() - skip) as u8);
        out.extend_from_slice(&bytes[skip..]);
    }
    out.extend_from_slice(contents);
    out
}

/// The DER of the OID rsaEncryption (1.2.840.113549.1.1.1), contents only.
const RSA_ENCRYPTION: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01];

/// The size in bits of the modulus of an RSA public key given as a `subjectPublicKeyInfo`
/// (see [`spki`]); `None` for a key of another kind, or one not well formed.
pub fn rsa_bits(spki: &[u8]) -> Option<usize> {
    let (0x30, info, _) = tlv(spki)? else {
        return None;
    };
    let (0x30, algorithm, rest) = tlv(info)? else {
        return None;
    };
    let (0x06, oid, _) = tlv(algorithm)? else {
        return None;
    };
    if oid != RSA_ENCRYPTION {
        return None;
    }
    // BIT STRING: a count of unused bits (0), then RSAPublicKey { modulus, publicExponent }.
    let (0x03, key, _) = tlv(rest)? else {
        return None;
    };
    let (&0, key) = key.split_first()? else {
        return None;
    };
    let (0x30, key, _) = tlv(key)? else {
        return None;
    };
    let (0x02, modulus, _) = tlv(key)? else {
        return None;
    };
    // A positive INTEGER: leading zero bytes are not part of its size.
    let first = modulus.iter().position(|&b| b != 0)?;
    let modulus = &modulus[first..];
    Some(modulus.len() * 8 - modulus[0].leading_zeros() as usize)
}

/// Reads the fields from a DER certificate; `None` if it is not well formed.
pub fn parse(der: &[u8]) -> Option<CertFields<'_>> {
    let (_, rest) = tbs_fields(der)?;
    let (_serial_tag, _, r) = tlv(rest)?;
    let (_sig_alg, _, r) = tlv(r)?;
    let (0x30, _, after_issuer) = tlv(r)? else {
        return None;
    };
    let issuer = &r[..r.len() - after_issuer.len()];
    let (0x30, validity, r) = tlv(after_issuer)? else {
        return None;
    };
    let (0x30, _, after_subject) = tlv(r)? else {
        return None;
    };
    let subject = &r[..r.len() - after_subject.len()];
    let (t1, nb, v) = tlv(validity)?;
    let (t2, na, _) = tlv(v)?;
    Some(CertFields {
        issuer,
        subject,
        not_before: time(t1, nb)?,
        not_after: time(t2, na)?,
    })
}

/// UTCTime (`YYMMDDHHMMSSZ`, years 1950-2049) or GeneralizedTime (`YYYYMMDDHHMMSSZ`).
fn time(tag: u8, s: &[u8]) -> Option<i64> {
    let digits = |b: &[u8]| -> Option<i64> {
        b.iter().try_fold(0i64, |acc, &c| {
            c.is_ascii_digit().then(|| acc * 10 + (c - b'0') as i64)
        })
    };
    let (year, rest) = match tag {
        0x17 if s.len() >= 12 => {
            let yy = digits(&s[..2])?;
            (if yy >= 50 { 1900 + yy } else { 2000 + yy }, &s[2..])
        }
        0x18 if s.len() >= 14 => (digits(&s[..4])?, &s[4..]),
        _ => return None,
    };
    let month = digits(&rest[..2])?;
    let day = digits(&rest[2..4])?;
    let hour = digits(&rest[4..6])?;
    let min = digits(&rest[6..8])?;
    let sec = digits(&rest[8..10])?;
    Some(days_from_civil(year, month, day) * 86400 + hour * 3600 + min * 60 + sec)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146097 + doe - 719468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_convert_to_unix_seconds() {
        assert_eq!(time(0x17, b"700101000000Z"), Some(0));
        assert_eq!(time(0x17, b"200101000000Z"), Some(1_577_836_800));
        assert_eq!(time(0x18, b"20700101000000Z"), Some(3_155_760_000));
        assert_eq!(time(0x17, b"49123123595 9Z"), None);
    }

    #[test]
    fn a_subject_alt_names_dns_names_are_read_from_der_only() {
        let dns = |name: &[u8]| [&[0x82, name.len() as u8][..], name].concat();
        let names = |entries: &[Vec<u8>]| {
            let body = entries.concat();
            [&[0x30, body.len() as u8][..], &body].concat()
        };
        let ip = vec![0x87, 4, 127, 0, 0, 1];
        let good = names(&[dns(b"a.test"), ip.clone(), dns(b"*.b.test")]);
        assert_eq!(
            general_dns_names(&good),
            Some(vec![&b"a.test"[..], &b"*.b.test"[..]])
        );
        assert_eq!(
            general_dns_names(&names(std::slice::from_ref(&ip))),
            Some(vec![])
        );
        // A tag that is no GeneralName's.
        assert_eq!(
            general_dns_names(&names(&[dns(b"a.test"), vec![0x89, 0]])),
            None
        );
        // A length in long form where the short one fits.
        let long = [&[0x30, 0x81, 8][..], &dns(b"a.test")].concat();
        assert_eq!(general_dns_names(&long), None);
        let inner_long = names(&[[&[0x82, 0x81, 6][..], b"a.test"].concat()]);
        assert_eq!(general_dns_names(&inner_long), None);
        // Indefinite length (BER), or bytes after the names.
        assert_eq!(general_dns_names(&[0x30, 0x80, 0x82, 0, 0, 0]), None);
        assert_eq!(general_dns_names(&[good.as_slice(), &[0]].concat()), None);
        // A length of 128 bytes or more, in its shortest long form.
        let mut body = vec![0x82, 0x81, 200];
        body.extend(std::iter::repeat_n(b'a', 200));
        let sequence = [&[0x30, 0x81, body.len() as u8][..], &body].concat();
        assert_eq!(general_dns_names(&sequence).map(|n| n[0].len()), Some(200));
    }

    #[test]
    fn malformed_input_is_rejected() {
        assert_eq!(parse(b""), None);
        assert_eq!(parse(&[0x30, 0x05, 0x30]), None);
        assert_eq!(parse(&[0x30, 0x82, 0xff, 0xff]), None);
    }
}
