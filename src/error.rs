//! One error type for the core. Every failure that reaches JavaScript is classified here: the
//! Node error code (`ECONNREFUSED`, `ENOTFOUND`, ...), the negative errno Node reports, the
//! syscall and the message in Node's own format (`connect ECONNREFUSED 127.0.0.1:8080`).
//! JavaScript builds the `Error` object from these fields (`lib/errors.js`) and nowhere else.

use std::fmt;
use std::io;

/// What failed, before it is dressed in Node's vocabulary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A system call failed with this (positive) errno.
    Os(i32),
    /// `getaddrinfo` failed with this `EAI_*` code.
    Dns(i32),
    /// The lookup succeeded but gave no address of the wanted family.
    NoAddress,
    /// A TLS failure: certificate verification or the protocol. Node reports these with
    /// OpenSSL's names (`DEPTH_ZERO_SELF_SIGNED_CERT`, `ERR_SSL_...`) and no errno.
    Tls,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    inner: Box<Inner>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Inner {
    kind: Kind,
    syscall: &'static str,
    address: Option<String>,
    port: Option<u16>,
    hostname: Option<String>,
    /// For [`Kind::Tls`]: the code and message.
    tls: Option<(String, String)>,
    /// Appended to an OS error's message (`write EPROTO <what OpenSSL would say>`).
    detail: Option<String>,
    /// For a request that failed before any response: whether any of it was written (then
    /// the server may have processed it).
    request_sent: Option<bool>,
    /// For a timeout (`ERR_SOCKET_TIMEOUT`): the limit that ran out, in ms.
    timeout_ms: Option<u64>,
    /// The connection itself failed (a reset, a TLS alert), as a socket's 'error' reports:
    /// not a malformed message, a timeout, or the peer closing.
    socket_fault: bool,
    /// For `ERR_PROXY_TUNNEL`: the status the proxy answered with.
    status_code: Option<u16>,
    /// A connect from a given local port: the local end (`localAddress`, `localPort`).
    local: Option<(String, u16)>,
    /// For a server name that Rust found wrong: the name checked and the certificate chain
    /// (DER, the server's own first), from which JavaScript makes Node's error (reason, host,
    /// cert).
    name_check: Option<(String, Vec<Vec<u8>>)>,
}

impl Error {
    fn new(kind: Kind, syscall: &'static str) -> Self {
        Error {
            inner: Box::new(Inner {
                kind,
                syscall,
                address: None,
                port: None,
                hostname: None,
                tls: None,
                detail: None,
                request_sent: None,
                timeout_ms: None,
                socket_fault: false,
                status_code: None,
                local: None,
                name_check: None,
            }),
        }
    }

    /// A failed system call; `err` should carry an OS error (anything else maps to `EIO`).
    pub fn io(err: &io::Error, syscall: &'static str) -> Self {
        Self::new(Kind::Os(errno_of(err)), syscall)
    }

    pub fn os(errno: i32, syscall: &'static str) -> Self {
        Self::new(Kind::Os(errno), syscall)
    }

    /// A failed `getaddrinfo` for `hostname`.
    pub fn dns(eai: i32, hostname: &str) -> Self {
        let mut err = Self::new(Kind::Dns(eai), "getaddrinfo");
        err.inner.hostname = Some(hostname.to_owned());
        err
    }

    pub fn no_address(hostname: &str) -> Self {
        let mut err = Self::new(Kind::NoAddress, "getaddrinfo");
        err.inner.hostname = Some(hostname.to_owned());
        err
    }

    /// A TLS failure with Node's code and message.
    pub fn tls(code: impl Into<String>, message: impl Into<String>) -> Self {
        let mut err = Self::new(Kind::Tls, "");
        err.inner.tls = Some((code.into(), message.into()));
        err
    }

    /// Adds what went wrong, after the `<syscall> <code>` of the message.
    pub fn with_detail(mut self, detail: impl Into<String>) -> Self {
        self.inner.detail = Some(detail.into());
        self
    }

    /// Marks a failure before any response, saying whether the request went out.
    pub fn with_request_sent(mut self, sent: bool) -> Self {
        self.inner.request_sent = Some(sent);
        self
    }

    /// Marks the error as the connection's own failure (see `socket_fault`).
    pub fn as_socket_fault(mut self) -> Self {
        self.inner.socket_fault = true;
        self
    }

    pub fn is_socket_fault(&self) -> bool {
        self.inner.socket_fault
    }

    pub fn request_sent(&self) -> Option<bool> {
        self.inner.request_sent
    }

    /// agentkeepalive's error for a socket that timed out with nobody listening
    /// (`ERR_SOCKET_TIMEOUT`, "Socket timeout"), with the limit it had.
    pub fn socket_timeout(limit: std::time::Duration) -> Self {
        Error::tls("ERR_SOCKET_TIMEOUT", "Socket timeout").with_timeout(limit)
    }

    /// Marks the error as a timeout that ran out, with its limit (the JavaScript error's
    /// `timeout`); statistics count it as one.
    pub fn with_timeout(mut self, limit: std::time::Duration) -> Self {
        self.inner.timeout_ms = Some(limit.as_millis() as u64);
        self
    }

    /// A limit ran out (see [`Error::with_timeout`]).
    pub fn timed_out(&self) -> bool {
        self.inner.timeout_ms.is_some()
    }

    /// Node's `ERR_PROXY_TUNNEL`: a proxy's tunnel that did not open (with the status the
    /// proxy answered, when it answered).
    pub fn proxy_tunnel(message: impl Into<String>, status_code: Option<u16>) -> Self {
        let mut err = Error::tls("ERR_PROXY_TUNNEL", message);
        err.inner.status_code = status_code;
        err
    }

    /// Node's `ERR_PROXY_TUNNEL` for a tunnel not open within `limit` (its
    /// `proxyTunnelTimeout`, in ms).
    pub fn proxy_tunnel_timeout(limit: std::time::Duration) -> Self {
        let ms = limit.as_millis();
        Error::proxy_tunnel(
            format!("Connection to establish proxy tunnel timed out after {ms}ms"),
            None,
        )
        .with_timeout(limit)
    }

    pub fn status_code(&self) -> Option<u16> {
        self.inner.status_code
    }

    /// Names the local end the failed connect was made from.
    pub fn with_local(mut self, address: String, port: u16) -> Self {
        self.inner.local = Some((address, port));
        self
    }

    pub fn local(&self) -> Option<(&str, u16)> {
        self.inner.local.as_ref().map(|(a, p)| (a.as_str(), *p))
    }

    /// A failed server-name check: the name, and the chain (DER, the certificate it was
    /// checked against first, then its issuers) that Node's error shows as its `cert`.
    pub fn with_name_check(mut self, host: String, chain: Vec<Vec<u8>>) -> Self {
        self.inner.name_check = Some((host, chain));
        self
    }

    pub fn name_check(&self) -> Option<(&str, &[Vec<u8>])> {
        self.inner
            .name_check
            .as_ref()
            .map(|(h, c)| (h.as_str(), c.as_slice()))
    }

    pub fn timeout_ms(&self) -> Option<u64> {
        self.inner.timeout_ms
    }

    /// Names the peer the failed call was talking to.
    pub fn with_peer(mut self, address: impl Into<String>, port: Option<u16>) -> Self {
        self.inner.address = Some(address.into());
        self.inner.port = port;
        self
    }

    pub fn kind(&self) -> Kind {
        self.inner.kind
    }

    pub fn syscall(&self) -> &'static str {
        self.inner.syscall
    }

    pub fn address(&self) -> Option<&str> {
        self.inner.address.as_deref()
    }

    pub fn port(&self) -> Option<u16> {
        self.inner.port
    }

    pub fn hostname(&self) -> Option<&str> {
        self.inner.hostname.as_deref()
    }

    /// Node's `err.code`.
    pub fn code(&self) -> &str {
        match self.inner.kind {
            Kind::Os(errno) => errno_name(errno),
            Kind::Dns(eai) => eai_name(eai),
            Kind::NoAddress => "ENOTFOUND",
            Kind::Tls => self
                .inner
                .tls
                .as_ref()
                .map_or("ERR_SSL_INTERNAL_ERROR", |t| t.0.as_str()),
        }
    }

    /// Node's `err.errno`: libuv's negative error number (none for TLS failures).
    pub fn errno(&self) -> Option<i32> {
        match self.inner.kind {
            Kind::Os(errno) => Some(uv_errno(errno)),
            Kind::Dns(eai) => Some(uv_eai_errno(eai)),
            Kind::NoAddress => Some(UV_EAI_NONAME),
            Kind::Tls => None,
        }
    }

    /// Node's `err.message`: `<syscall> <code>` and the peer, as `net` and `dns` write it;
    /// for TLS failures, OpenSSL's text.
    pub fn message(&self) -> String {
        if let Some((_, message)) = &self.inner.tls {
            return message.clone();
        }
        let mut msg = format!("{} {}", self.inner.syscall, self.code());
        if let Some(host) = &self.inner.hostname {
            msg.push(' ');
            msg.push_str(host);
        } else if let Some(address) = &self.inner.address {
            msg.push(' ');
            msg.push_str(address);
            if let Some(port) = self.inner.port {
                msg.push_str(&format!(":{port}"));
            }
        }
        if let Some(detail) = &self.inner.detail {
            msg.push(' ');
            msg.push_str(detail);
        }
        msg
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message())
    }
}

impl std::error::Error for Error {}

/// The errno inside an `io::Error`, or `EIO` for errors that did not come from the OS.
pub fn errno_of(err: &io::Error) -> i32 {
    os_errno(err).unwrap_or(match err.kind() {
        io::ErrorKind::TimedOut => libc::ETIMEDOUT,
        io::ErrorKind::ConnectionRefused => libc::ECONNREFUSED,
        io::ErrorKind::ConnectionReset => libc::ECONNRESET,
        io::ErrorKind::UnexpectedEof => libc::ECONNRESET,
        io::ErrorKind::BrokenPipe => libc::EPIPE,
        io::ErrorKind::InvalidInput => libc::EINVAL,
        _ => libc::EIO,
    })
}

/// The OS's own error number of an `io::Error`: an errno on Unix.
#[cfg(unix)]
fn os_errno(err: &io::Error) -> Option<i32> {
    err.raw_os_error()
}

/// The OS's own error number of an `io::Error`, as the errno it stands for: on Windows a
/// Winsock or Win32 code, mapped as libuv maps it; one without a name here falls back on the
/// error's kind.
#[cfg(windows)]
fn os_errno(err: &io::Error) -> Option<i32> {
    err.raw_os_error().and_then(windows::errno)
}

/// Node's `err.errno` (libuv's number, negative) for an errno: the negated errno on Unix,
/// libuv's own numbering on Windows. What a socket call made from JavaScript returns on
/// failure, and what JavaScript names with `util.getSystemErrorName`.
#[cfg(unix)]
pub fn uv_errno(errno: i32) -> i32 {
    -errno
}

#[cfg(windows)]
pub use windows::uv_errno;

#[cfg(windows)]
mod windows;

/// libuv's name for an errno, which is the code Node reports.
pub fn errno_name(errno: i32) -> &'static str {
    match errno {
        libc::ECONNREFUSED => "ECONNREFUSED",
        libc::ECONNRESET => "ECONNRESET",
        libc::ECONNABORTED => "ECONNABORTED",
        libc::ETIMEDOUT => "ETIMEDOUT",
        libc::EPIPE => "EPIPE",
        libc::EHOSTUNREACH => "EHOSTUNREACH",
        libc::ENETUNREACH => "ENETUNREACH",
        libc::ENETDOWN => "ENETDOWN",
        libc::EADDRINUSE => "EADDRINUSE",
        libc::EADDRNOTAVAIL => "EADDRNOTAVAIL",
        libc::EAFNOSUPPORT => "EAFNOSUPPORT",
        libc::EACCES => "EACCES",
        libc::EPERM => "EPERM",
        libc::ENOENT => "ENOENT",
        libc::ENOTSOCK => "ENOTSOCK",
        libc::ENOTCONN => "ENOTCONN",
        libc::EINVAL => "EINVAL",
        libc::EMFILE => "EMFILE",
        libc::ENFILE => "ENFILE",
        libc::ENOBUFS => "ENOBUFS",
        libc::ENOMEM => "ENOMEM",
        libc::EAGAIN => "EAGAIN",
        libc::EBADF => "EBADF",
        libc::ECANCELED => "ECANCELED",
        libc::EPROTO => "EPROTO",
        libc::ENAMETOOLONG => "ENAMETOOLONG",
        libc::ENOTDIR => "ENOTDIR",
        libc::EISCONN => "EISCONN",
        libc::EALREADY => "EALREADY",
        libc::EINPROGRESS => "EINPROGRESS",
        _ => "EIO",
    }
}

/// `getaddrinfo`'s failure codes ([`Kind::Dns`]), as the system numbers them.
#[cfg(unix)]
pub mod eai {
    pub use libc::{
        EAI_AGAIN as AGAIN, EAI_BADFLAGS as BADFLAGS, EAI_FAIL as FAIL, EAI_FAMILY as FAMILY,
        EAI_MEMORY as MEMORY, EAI_NODATA as NODATA, EAI_NONAME as NONAME, EAI_SERVICE as SERVICE,
    };
    /// glibc's `EAI_ADDRFAMILY` (a GNU extension the libc crate leaves out).
    pub const ADDRFAMILY: i32 = -9;
}

/// `getaddrinfo`'s failure codes ([`Kind::Dns`]) on Windows: the resolver (`GetAddrInfoW`)
/// fails with Winsock codes, which ws2tcpip.h names `EAI_*` too, and libuv reads as such
/// (src/win/getaddrinfo.c).
#[cfg(windows)]
pub mod eai {
    use windows_sys::Win32::Networking::WinSock as wsa;

    pub const AGAIN: i32 = wsa::WSATRY_AGAIN;
    pub const BADFLAGS: i32 = wsa::WSAEINVAL;
    pub const FAIL: i32 = wsa::WSANO_RECOVERY;
    pub const FAMILY: i32 = wsa::WSAEAFNOSUPPORT;
    pub const MEMORY: i32 = wsa::WSA_NOT_ENOUGH_MEMORY;
    pub const NONAME: i32 = wsa::WSAHOST_NOT_FOUND;
    /// A name with no address record: `WSANO_DATA`. (ws2tcpip.h makes `EAI_NODATA` another
    /// name of `EAI_NONAME`, and libuv reports `WSANO_DATA` as `ENOENT`; here it is what
    /// `EAI_NODATA` is on Linux, `ENOTFOUND`.)
    pub const NODATA: i32 = wsa::WSANO_DATA;
    pub const SERVICE: i32 = wsa::WSATYPE_NOT_FOUND;
    /// No Windows failure is this one: a number no Winsock code takes.
    pub const ADDRFAMILY: i32 = -9;
}

const UV_EAI_ADDRFAMILY: i32 = -3000;
const UV_EAI_AGAIN: i32 = -3001;
const UV_EAI_BADFLAGS: i32 = -3002;
const UV_EAI_FAIL: i32 = -3004;
const UV_EAI_FAMILY: i32 = -3005;
const UV_EAI_MEMORY: i32 = -3006;
const UV_EAI_NODATA: i32 = -3007;
const UV_EAI_NONAME: i32 = -3008;
const UV_EAI_SERVICE: i32 = -3010;

/// Node's code for a `getaddrinfo` failure: `dns.lookup` reports "no such name" and "no data"
/// both as `ENOTFOUND`.
fn eai_name(eai: i32) -> &'static str {
    match eai {
        eai::NONAME | eai::NODATA => "ENOTFOUND",
        eai::AGAIN => "EAI_AGAIN",
        eai::FAIL => "EAI_FAIL",
        eai::FAMILY => "EAI_FAMILY",
        eai::ADDRFAMILY => "EAI_ADDRFAMILY",
        eai::MEMORY => "EAI_MEMORY",
        eai::SERVICE => "EAI_SERVICE",
        eai::BADFLAGS => "EAI_BADFLAGS",
        _ => "EAI_FAIL",
    }
}

fn uv_eai_errno(eai: i32) -> i32 {
    match eai {
        eai::NONAME => UV_EAI_NONAME,
        eai::NODATA => UV_EAI_NODATA,
        eai::AGAIN => UV_EAI_AGAIN,
        eai::FAMILY => UV_EAI_FAMILY,
        eai::ADDRFAMILY => UV_EAI_ADDRFAMILY,
        eai::MEMORY => UV_EAI_MEMORY,
        eai::SERVICE => UV_EAI_SERVICE,
        eai::BADFLAGS => UV_EAI_BADFLAGS,
        _ => UV_EAI_FAIL,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_connect_reads_as_node_writes_it() {
        let err = Error::os(libc::ECONNREFUSED, "connect").with_peer("127.0.0.1", Some(8080));
        assert_eq!(err.code(), "ECONNREFUSED");
        #[cfg(unix)]
        assert_eq!(err.errno(), Some(-111));
        #[cfg(windows)]
        assert_eq!(err.errno(), Some(-4078));
        assert_eq!(err.syscall(), "connect");
        assert_eq!(err.message(), "connect ECONNREFUSED 127.0.0.1:8080");
    }

    #[test]
    fn an_unknown_host_is_enotfound_with_libuv_errno() {
        let err = Error::dns(eai::NONAME, "nope.invalid");
        assert_eq!(err.code(), "ENOTFOUND");
        assert_eq!(err.errno(), Some(-3008));
        assert_eq!(err.message(), "getaddrinfo ENOTFOUND nope.invalid");
        assert_eq!(err.hostname(), Some("nope.invalid"));
        assert_eq!(Error::dns(eai::AGAIN, "x").code(), "EAI_AGAIN");
        let err = Error::dns(eai::NODATA, "nope.invalid");
        assert_eq!((err.code(), err.errno()), ("ENOTFOUND", Some(-3007)));
    }

    #[test]
    fn io_errors_keep_their_errno_and_others_get_a_fitting_one() {
        #[cfg(unix)]
        {
            let err = Error::io(&io::Error::from_raw_os_error(libc::ECONNRESET), "read");
            assert_eq!((err.code(), err.errno()), ("ECONNRESET", Some(-104)));
        }
        let err = Error::io(&io::Error::new(io::ErrorKind::TimedOut, "slow"), "connect");
        assert_eq!(err.code(), "ETIMEDOUT");
        let err = Error::io(&io::Error::other("strange"), "write");
        assert_eq!(err.code(), "EIO");
    }

    #[cfg(windows)]
    #[test]
    fn windows_error_numbers_read_as_node_reports_them_there() {
        use windows_sys::Win32::Foundation::ERROR_FILE_NOT_FOUND;
        use windows_sys::Win32::Networking::WinSock as wsa;
        let cases = [
            (wsa::WSAECONNREFUSED, "ECONNREFUSED", -4078),
            (wsa::WSAECONNRESET, "ECONNRESET", -4077),
            (wsa::WSAETIMEDOUT, "ETIMEDOUT", -4039),
            (wsa::WSAEADDRINUSE, "EADDRINUSE", -4091),
            (ERROR_FILE_NOT_FOUND as i32, "ENOENT", -4058),
        ];
        for (code, name, errno) in cases {
            let err = Error::io(&io::Error::from_raw_os_error(code), "connect");
            assert_eq!((err.code(), err.errno()), (name, Some(errno)), "{code}");
        }
        assert_eq!(uv_errno(libc::EPIPE), -4047);
        let err = Error::dns(wsa::WSAHOST_NOT_FOUND, "nope.invalid");
        assert_eq!((err.code(), err.errno()), ("ENOTFOUND", Some(-3008)));
        assert_eq!(Error::dns(wsa::WSATRY_AGAIN, "x").code(), "EAI_AGAIN");
    }

    #[test]
    fn tls_failures_carry_openssl_names_and_no_errno() {
        let err = Error::tls("DEPTH_ZERO_SELF_SIGNED_CERT", "self-signed certificate");
        assert_eq!(err.code(), "DEPTH_ZERO_SELF_SIGNED_CERT");
        assert_eq!(err.errno(), None);
        assert_eq!(err.message(), "self-signed certificate");
    }

    #[test]
    fn a_unix_socket_path_is_the_address() {
        let err = Error::os(libc::ENOENT, "connect").with_peer("/tmp/none.sock", None);
        assert_eq!(err.message(), "connect ENOENT /tmp/none.sock");
    }
}
