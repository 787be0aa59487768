//! Name resolution as Node's `dns.lookup` does it: the system resolver (`getaddrinfo`, which
//! reads /etc/hosts and nsswitch; `GetAddrInfoW` on Windows, as libuv calls it there),
//! addresses in the order it returns them, on a blocking thread.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::error::{eai, Error};

/// Which address family a lookup may return: Node's `family` option (0, 4 or 6).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Family {
    #[default]
    Any,
    V4,
    V6,
}

impl Family {
    pub fn from_node(family: u32) -> Family {
        match family {
            4 => Family::V4,
            6 => Family::V6,
            _ => Family::Any,
        }
    }
}

/// An IP literal, with or without the brackets URLs put around IPv6.
pub fn parse_ip(host: &str) -> Option<IpAddr> {
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    bare.parse().ok()
}

/// An IP literal's lookup, answered without the resolver and whatever the family asked for, as
/// Node's `dns.lookup` and `net.connect` answer it; `None` for a name.
pub fn lookup_literal(host: &str) -> Option<Vec<IpAddr>> {
    parse_ip(host).map(|ip| vec![ip])
}

/// Resolves `host` to its addresses, blocking the calling thread.
pub fn lookup_blocking(host: &str, family: Family) -> Result<Vec<IpAddr>, Error> {
    if let Some(ips) = lookup_literal(host) {
        return Ok(ips);
    }
    let out = resolve(host, family)?;
    if out.is_empty() {
        return Err(Error::no_address(host));
    }
    Ok(out)
}

/// The system resolver's addresses for `host` (of `family`), each once, in its order.
#[cfg(unix)]
fn resolve(host: &str, family: Family) -> Result<Vec<IpAddr>, Error> {
    let Ok(name) = std::ffi::CString::new(host) else {
        return Err(Error::dns(eai::NONAME, host));
    };
    // SAFETY: an all-zero addrinfo (null pointers, zero integers) is a valid "no hints" value;
    // we then set the fields we want. Test: `localhost_resolves_through_the_system_resolver`.
    let mut hints: libc::addrinfo = unsafe { std::mem::zeroed() };
    hints.ai_socktype = libc::SOCK_STREAM;
    hints.ai_family = match family {
        Family::Any => libc::AF_UNSPEC,
        Family::V4 => libc::AF_INET,
        Family::V6 => libc::AF_INET6,
    };
    if family == Family::Any {
        // As Node does for an unspecified family: no IPv6 answers on a host without IPv6.
        hints.ai_flags = libc::AI_ADDRCONFIG;
    }
    let mut res: *mut libc::addrinfo = std::ptr::null_mut();
    // SAFETY: a NUL-terminated name and a null service; `hints` and `res` point at locals.
    // On success `res` owns a list freed once below; on failure nothing is allocated. Tests:
    // `transport::dns::tests::localhost_resolves_through_the_system_resolver` and
    // `an_invalid_name_is_enotfound`.
    let rc = unsafe { libc::getaddrinfo(name.as_ptr(), std::ptr::null(), &hints, &mut res) };
    if rc != 0 {
        let eai = if rc == libc::EAI_SYSTEM {
            eai::FAIL
        } else {
            rc
        };
        return Err(Error::dns(eai, host));
    }
    let mut out: Vec<IpAddr> = Vec::new();
    let mut cur = res;
    while !cur.is_null() {
        // SAFETY: `cur` is a non-null node of the list getaddrinfo returned, not freed until
        // the loop ends. Test: `localhost_resolves_through_the_system_resolver`.
        let ai = unsafe { &*cur };
        let ip = match ai.ai_family {
            // SAFETY (both arms): getaddrinfo gives each node an `ai_addr` of its `ai_family`
            // (a sockaddr_in for AF_INET, a sockaddr_in6 for AF_INET6), suitably aligned.
            // Test: `transport::dns::tests::localhost_resolves_through_the_system_resolver`.
            libc::AF_INET => {
                let sa = unsafe { &*(ai.ai_addr as *const libc::sockaddr_in) };
                Some(IpAddr::V4(Ipv4Addr::from(u32::from_be(sa.sin_addr.s_addr))))
            }
            libc::AF_INET6 => {
                let sa = unsafe { &*(ai.ai_addr as *const libc::sockaddr_in6) };
                Some(IpAddr::V6(Ipv6Addr::from(sa.sin6_addr.s6_addr)))
            }
            _ => None,
        };
        if let Some(ip) = ip {
            if !out.contains(&ip) {
                out.push(ip);
            }
        }
        cur = ai.ai_next;
    }
    // SAFETY: `res` came from a successful getaddrinfo, is freed once, and nothing points into
    // it afterwards (the addresses were copied out). Test: `scripts/asan.sh` runs the resolver
    // tests under AddressSanitizer, which reports a double or early free.
    unsafe { libc::freeaddrinfo(res) };
    Ok(out)
}

/// The system resolver's addresses for `host` (of `family`), each once, in its order: on
/// Windows, `GetAddrInfoW` with the hints of the Unix call (libuv resolves with it there, from
/// the name's UTF-16). It fails with a Winsock code, which [`eai`] names.
#[cfg(windows)]
fn resolve(host: &str, family: Family) -> Result<Vec<IpAddr>, Error> {
    use windows_sys::Win32::Networking::WinSock as wsa;

    if host.contains('\0') {
        return Err(Error::dns(eai::NONAME, host));
    }
    winsock_started();
    let name: Vec<u16> = host.encode_utf16().chain(std::iter::once(0)).collect();
    let mut hints = wsa::ADDRINFOW {
        ai_socktype: wsa::SOCK_STREAM,
        ai_family: i32::from(match family {
            Family::Any => wsa::AF_UNSPEC,
            Family::V4 => wsa::AF_INET,
            Family::V6 => wsa::AF_INET6,
        }),
        ..Default::default()
    };
    if family == Family::Any {
        // As Node does for an unspecified family: no IPv6 answers on a host without IPv6.
        hints.ai_flags = wsa::AI_ADDRCONFIG as i32;
    }
    let mut res: *mut wsa::ADDRINFOW = std::ptr::null_mut();
    // SAFETY: a NUL-terminated UTF-16 name and a null service; `hints` and `res` point at
    // locals. On success `res` owns a list freed once below; on failure nothing is allocated.
    // Tests: the resolver tests below, on Windows (`scripts/win-smoke-wine.sh` runs them).
    let rc = unsafe { wsa::GetAddrInfoW(name.as_ptr(), std::ptr::null(), &hints, &mut res) };
    if rc != 0 {
        return Err(Error::dns(rc, host));
    }
    let mut out: Vec<IpAddr> = Vec::new();
    let mut cur = res;
    while !cur.is_null() {
        // SAFETY: `cur` is a non-null node of the list GetAddrInfoW returned, not freed until
        // the loop ends. Test: `localhost_resolves_through_the_system_resolver`, on Windows.
        let ai = unsafe { &*cur };
        let ip = match u16::try_from(ai.ai_family) {
            // SAFETY (both arms): GetAddrInfoW gives each node an `ai_addr` of its `ai_family`
            // (a SOCKADDR_IN for AF_INET, a SOCKADDR_IN6 for AF_INET6), suitably aligned; the
            // address fields are plain bytes whichever view of the union is read.
            Ok(wsa::AF_INET) => {
                let sa = unsafe { &*(ai.ai_addr as *const wsa::SOCKADDR_IN) };
                let raw = unsafe { sa.sin_addr.S_un.S_addr };
                Some(IpAddr::V4(Ipv4Addr::from(u32::from_be(raw))))
            }
            Ok(wsa::AF_INET6) => {
                let sa = unsafe { &*(ai.ai_addr as *const wsa::SOCKADDR_IN6) };
                Some(IpAddr::V6(Ipv6Addr::from(unsafe { sa.sin6_addr.u.Byte })))
            }
            _ => None,
        };
        if let Some(ip) = ip {
            if !out.contains(&ip) {
                out.push(ip);
            }
        }
        cur = ai.ai_next;
    }
    // SAFETY: `res` came from a successful GetAddrInfoW, is freed once, and nothing points
    // into it afterwards (the addresses were copied out). Test: as for the call above.
    unsafe { wsa::FreeAddrInfoW(res) };
    Ok(out)
}

/// Winsock is started for the process (`WSAStartup`) before the resolver is asked. Node's libuv
/// and the standard library's sockets start it too; a count more is harmless, and it is never
/// stopped (it lives as long as the process).
#[cfg(windows)]
fn winsock_started() {
    use windows_sys::Win32::Networking::WinSock as wsa;
    static STARTED: std::sync::Once = std::sync::Once::new();
    STARTED.call_once(|| {
        let mut data = std::mem::MaybeUninit::<wsa::WSADATA>::uninit();
        // SAFETY: WSAStartup fills the WSADATA it is given; version 2.2. A failure shows in
        // the lookup that follows (WSANOTINITIALISED, as EAI_FAIL). Test: the resolver tests
        // on Windows, whose first lookup starts it.
        unsafe { wsa::WSAStartup(0x0202, data.as_mut_ptr()) };
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ip_literals_skip_the_resolver() {
        assert_eq!(
            lookup_blocking("127.0.0.1", Family::Any).unwrap(),
            vec![IpAddr::from([127, 0, 0, 1])]
        );
        assert_eq!(
            lookup_blocking("[::1]", Family::V6).unwrap(),
            vec![IpAddr::from(Ipv6Addr::LOCALHOST)]
        );
        // As Node: a literal is its own answer, whatever the family asked for.
        assert_eq!(
            lookup_blocking("::1", Family::V4).unwrap(),
            vec![IpAddr::from(Ipv6Addr::LOCALHOST)]
        );
        assert_eq!(lookup_literal("localhost"), None);
    }

    #[test]
    fn localhost_resolves_through_the_system_resolver() {
        let addrs = lookup_blocking("localhost", Family::V4).unwrap();
        assert!(addrs.contains(&IpAddr::from([127, 0, 0, 1])), "{addrs:?}");
    }

    #[test]
    fn an_invalid_name_is_enotfound() {
        let err = lookup_blocking("no-such-host.invalid", Family::Any).unwrap_err();
        assert_eq!(err.code(), "ENOTFOUND");
        assert_eq!(err.syscall(), "getaddrinfo");
        assert_eq!(err.hostname(), Some("no-such-host.invalid"));
    }
}
