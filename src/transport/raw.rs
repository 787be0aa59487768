//! The plain non-blocking socket calls of a connection driven on the JavaScript thread's loop
//! (see `binding/conn/plain.rs` for why): reads, vectored sends with what the kernel refuses kept in
//! an [`Outbox`], the write half's shutdown, the pending error and the options `net.Socket`
//! sets. Errors are errnos, as JavaScript reports them (`-errno` in libuv's style).

use std::net::SocketAddr;
use std::os::fd::{BorrowedFd, OwnedFd, RawFd};
use std::time::Duration;

use crate::error::errno_of;

/// What a read found.
#[derive(Debug, PartialEq, Eq)]
pub enum Read {
    /// This many bytes, at the start of the buffer.
    Data(usize),
    /// The peer closed its sending side.
    Eof,
    /// Nothing to read now.
    WouldBlock,
    /// The socket failed (its errno).
    Failed(i32),
}

/// The most iovecs one `sendmsg` takes: `UIO_MAXIOV` on Linux, `IOV_MAX` (1024, from
/// `<sys/uio.h>`, which the libc crate does not export there) on macOS and the BSDs.
#[cfg(any(target_os = "linux", target_os = "android"))]
const MAX_IOV: usize = libc::UIO_MAXIOV as usize;
#[cfg(not(any(target_os = "linux", target_os = "android")))]
const MAX_IOV: usize = 1024;

fn last_errno() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// Reads what the socket has, up to `buf.len()` bytes; retried on EINTR.
pub fn read(fd: RawFd, buf: &mut [u8]) -> Read {
    if fd < 0 {
        return Read::Failed(libc::EBADF);
    }
    loop {
        // SAFETY: the kernel writes at most `buf.len()` bytes into `buf`, borrowed mutably for
        // the call; a stale descriptor is an error, not undefined behaviour. Test:
        // `reads_report_data_then_would_block_then_eof` below.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n > 0 {
            return Read::Data(n as usize);
        }
        if n == 0 {
            return Read::Eof;
        }
        match last_errno() {
            libc::EINTR => continue,
            libc::EAGAIN => return Read::WouldBlock,
            errno => return Read::Failed(errno),
        }
    }
}

/// `sendmsg` of every chunk, retried on EINTR; returns how much the kernel took (0 when it
/// would block) or the errno. MSG_NOSIGNAL: a closed peer is an EPIPE error, not a signal.
pub fn send(fd: RawFd, chunks: &[&[u8]]) -> Result<usize, i32> {
    if fd < 0 {
        return Err(libc::EBADF);
    }
    let iovs: Vec<libc::iovec> = chunks
        .iter()
        .filter(|c| !c.is_empty())
        .take(MAX_IOV)
        .map(|c| libc::iovec {
            iov_base: c.as_ptr() as *mut _,
            iov_len: c.len(),
        })
        .collect();
    if iovs.is_empty() {
        return Ok(0);
    }
    loop {
        // SAFETY: an all-zero msghdr is a valid one (no address, no control data); the iovecs
        // are set below. Test: `an_outbox_keeps_what_the_kernel_refuses_and_sends_it_in_order`.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = iovs.as_ptr() as *mut _;
        msg.msg_iovlen = iovs.len() as _;
        // SAFETY: the kernel only reads the iovecs, which point into `chunks`, borrowed for
        // this call, at most MAX_IOV of them. Tests: `an_outbox_keeps_what_the_kernel_
        // refuses_and_sends_it_in_order` below; __test__/backpressure.test.js "a large request
        // body is written in full, with back-pressure from the socket".
        let n = unsafe { libc::sendmsg(fd, &msg, libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT) };
        if n >= 0 {
            return Ok(n as usize);
        }
        match last_errno() {
            libc::EINTR => continue,
            libc::EAGAIN => return Ok(0),
            errno => return Err(errno),
        }
    }
}

/// A connect that failed as it started: the errno, the call that failed and, for the connect
/// itself, the local end the socket had then (Node's message names it).
#[derive(Debug, PartialEq, Eq)]
pub struct StartFailed {
    pub errno: i32,
    pub syscall: &'static str,
    pub local: Option<SocketAddr>,
}

/// Starts a non-blocking TCP connect to `addr` on the calling thread, with TCP_NODELAY and
/// TCP keep-alive as Node's agent sets them: the socket, whose writability tells that the
/// connect ended, and [`pending_error`] how.
pub fn connect_start(
    addr: SocketAddr,
    no_delay: bool,
    keep_alive: Option<Duration>,
) -> Result<OwnedFd, StartFailed> {
    let socket = stream(
        socket2::Domain::for_address(addr),
        Some(socket2::Protocol::TCP),
    )?;
    socket
        .set_tcp_nodelay(no_delay)
        .map_err(failed("setsockopt"))?;
    // As Node's `setKeepAlive`, whose failure no connection hears of.
    if let Some(delay) = keep_alive {
        let keepalive = socket2::TcpKeepalive::new().with_time(super::keepalive_time(delay));
        let _ = socket.set_tcp_keepalive(&keepalive);
    }
    start(socket, &addr.into())
}

/// Starts a non-blocking connect to the Unix domain socket at `path` on the calling thread,
/// as [`connect_start`] does over TCP.
pub fn connect_path_start(path: &str) -> Result<OwnedFd, StartFailed> {
    let address = socket2::SockAddr::unix(path).map_err(failed("connect"))?;
    start(stream(socket2::Domain::UNIX, None)?, &address)
}

/// A new non-blocking stream socket (non-blocking from the start where the system takes the
/// flag with the call).
fn stream(
    domain: socket2::Domain,
    protocol: Option<socket2::Protocol>,
) -> Result<socket2::Socket, StartFailed> {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    let kind = socket2::Type::STREAM.nonblocking();
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    let kind = socket2::Type::STREAM;
    let socket = socket2::Socket::new(domain, kind, protocol).map_err(failed("socket"))?;
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    socket.set_nonblocking(true).map_err(failed("socket"))?;
    Ok(socket)
}

/// Connects `socket` to `address` without waiting: done, under way, or failed at once (with
/// the local end the socket had then). A connect a signal interrupted goes on by itself
/// (POSIX), as one under way does.
fn start(socket: socket2::Socket, address: &socket2::SockAddr) -> Result<OwnedFd, StartFailed> {
    match socket.connect(address) {
        Ok(()) => Ok(socket.into()),
        Err(e) if matches!(e.raw_os_error(), Some(libc::EINPROGRESS | libc::EINTR)) => {
            Ok(socket.into())
        }
        Err(e) => Err(StartFailed {
            local: socket.local_addr().ok().and_then(|a| a.as_socket()),
            ..failed("connect")(e)
        }),
    }
}

/// How a call of a connect's start failed.
fn failed(syscall: &'static str) -> impl Fn(std::io::Error) -> StartFailed {
    move |e| StartFailed {
        errno: errno_of(&e),
        syscall,
        local: None,
    }
}

/// The local address of a connected socket.
pub fn local_addr(fd: BorrowedFd<'_>) -> Option<SocketAddr> {
    socket2::SockRef::from(&fd).local_addr().ok()?.as_socket()
}

/// The pending error of a socket (SO_ERROR), if any.
pub fn pending_error(fd: RawFd) -> Option<i32> {
    if fd < 0 {
        return None;
    }
    let mut err: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes, the size of the local int it points at.
    // Test: `a_reset_socket_reports_its_pending_error` below.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_ERROR,
            (&mut err as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    (rc == 0 && err != 0).then_some(err)
}

/// Half-closes the sending side. A socket no longer connected has nothing to close: not an
/// error.
pub fn shutdown_write(fd: RawFd) -> Result<(), i32> {
    if fd < 0 {
        return Err(libc::EBADF);
    }
    // SAFETY: a plain syscall on a descriptor number, touching no memory of ours; a stale
    // descriptor is an error. Test: `a_shut_down_write_half_is_the_peers_eof`.
    if unsafe { libc::shutdown(fd, libc::SHUT_WR) } == 0 {
        return Ok(());
    }
    match last_errno() {
        libc::ENOTCONN => Ok(()),
        errno => Err(errno),
    }
}

/// A socket option's result, where a socket without the option (a Unix socket has no Nagle
/// and no TCP keep-alive) takes the call as `net.Socket` does: as done.
fn option(result: std::io::Result<()>) -> Result<(), i32> {
    match result {
        Ok(()) => Ok(()),
        Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => Ok(()),
        Err(e) => Err(errno_of(&e)),
    }
}

/// `socket.setNoDelay(on)`.
pub fn set_no_delay(fd: BorrowedFd<'_>, on: bool) -> Result<(), i32> {
    option(socket2::SockRef::from(&fd).set_tcp_nodelay(on))
}

/// `socket.resetAndDestroy()`: a zero linger, so that closing the socket resets the connection
/// (RST) rather than ending it (FIN).
pub fn set_reset_on_close(fd: BorrowedFd<'_>) -> Result<(), i32> {
    option(socket2::SockRef::from(&fd).set_linger(Some(Duration::ZERO)))
}

/// `socket.setKeepAlive(on, initialDelay)`: a delay of zero keeps the system's.
pub fn set_keep_alive(fd: BorrowedFd<'_>, on: bool, initial_delay: Duration) -> Result<(), i32> {
    let sock = socket2::SockRef::from(&fd);
    option(if on && !initial_delay.is_zero() {
        let time = super::keepalive_time(initial_delay);
        sock.set_tcp_keepalive(&socket2::TcpKeepalive::new().with_time(time))
    } else {
        sock.set_keepalive(on)
    })
}

/// `socket.setTypeOfService(tos)`: the IP header's TOS byte (its traffic class over IPv6).
/// A socket without one (a Unix socket) takes the call as done, as [`option`] does: the value
/// is the socket's alone, as `net.Socket` keeps it for a pipe.
pub fn set_type_of_service(fd: BorrowedFd<'_>, tos: u8) -> Result<(), i32> {
    let sock = socket2::SockRef::from(&fd);
    let set = match ip_version(&sock)? {
        Some(4) => sock.set_tos_v4(tos.into()),
        Some(_) => sock.set_tclass_v6(tos.into()),
        None => return Ok(()),
    };
    set.map_err(|e| errno_of(&e))
}

/// `socket.getTypeOfService()`: the TOS byte (traffic class) the kernel has for the socket;
/// None for a socket without one (see [`set_type_of_service`]).
pub fn type_of_service(fd: BorrowedFd<'_>) -> Result<Option<u8>, i32> {
    let sock = socket2::SockRef::from(&fd);
    let got = match ip_version(&sock)? {
        Some(4) => sock.tos_v4(),
        Some(_) => sock.tclass_v6(),
        None => return Ok(None),
    };
    got.map(|tos| Some(tos as u8)).map_err(|e| errno_of(&e))
}

/// The IP version of a socket's local address; None for one that is not IP.
fn ip_version(sock: &socket2::SockRef<'_>) -> Result<Option<u8>, i32> {
    let local = sock.local_addr().map_err(|e| errno_of(&e))?;
    Ok(match local.as_socket() {
        Some(std::net::SocketAddr::V4(_)) => Some(4),
        Some(std::net::SocketAddr::V6(v6)) if v6.ip().to_ipv4_mapped().is_some() => Some(4),
        Some(std::net::SocketAddr::V6(_)) => Some(6),
        None => None,
    })
}

/// The bytes a non-blocking socket has not taken yet, sent before anything written after them.
#[derive(Debug, Default)]
pub struct Outbox {
    buf: Vec<u8>,
    /// Sent already, from the start of `buf`.
    off: usize,
}

/// What a write did.
#[derive(Debug, PartialEq, Eq)]
pub struct Sent {
    /// The kernel took this many bytes now.
    pub written: usize,
    /// The rest waits in the outbox for the socket to be writable.
    pub queued: bool,
}

impl Outbox {
    /// Whether bytes wait.
    pub fn is_empty(&self) -> bool {
        self.off == self.buf.len()
    }

    /// Writes `chunks`: to the socket when nothing waits, keeping whatever the kernel did not
    /// take; behind the waiting bytes otherwise. On an error nothing is kept.
    pub fn write(&mut self, fd: RawFd, chunks: &[&[u8]]) -> Result<Sent, i32> {
        if !self.is_empty() {
            for chunk in chunks {
                self.buf.extend_from_slice(chunk);
            }
            return Ok(Sent {
                written: 0,
                queued: true,
            });
        }
        let written = send(fd, chunks)?;
        self.clear();
        let mut skip = written;
        for chunk in chunks {
            if skip >= chunk.len() {
                skip -= chunk.len();
                continue;
            }
            self.buf.extend_from_slice(&chunk[skip..]);
            skip = 0;
        }
        Ok(Sent {
            written,
            queued: !self.is_empty(),
        })
    }

    /// Sends what waits, as far as the kernel takes it. On an error the bytes are dropped (the
    /// connection is failing).
    pub fn flush(&mut self, fd: RawFd) -> Result<Sent, i32> {
        match send(fd, &[&self.buf[self.off..]]) {
            Ok(n) => {
                self.off += n;
                if self.is_empty() {
                    self.clear();
                }
                Ok(Sent {
                    written: n,
                    queued: !self.is_empty(),
                })
            }
            Err(errno) => {
                self.clear();
                Err(errno)
            }
        }
    }

    /// Forgets what waits.
    pub fn clear(&mut self) {
        self.buf.clear();
        self.off = 0;
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read as _, Write as _};
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsFd;
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;

    use super::*;

    fn pair() -> (UnixStream, UnixStream) {
        let (a, b) = UnixStream::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        b.set_nonblocking(true).unwrap();
        (a, b)
    }

    /// Reads what `peer` has until it would block (bounded).
    fn drain(peer: &mut UnixStream, into: &mut Vec<u8>) {
        let mut buf = [0u8; 64 * 1024];
        for _ in 0..10_000 {
            match peer.read(&mut buf) {
                Ok(0) => return,
                Ok(n) => into.extend_from_slice(&buf[..n]),
                Err(_) => return,
            }
        }
    }

    #[test]
    fn reads_report_data_then_would_block_then_eof() {
        let (a, mut b) = pair();
        let mut buf = [0u8; 16];
        assert_eq!(read(a.as_raw_fd(), &mut buf), Read::WouldBlock);
        b.write_all(b"hello").unwrap();
        assert_eq!(read(a.as_raw_fd(), &mut buf), Read::Data(5));
        assert_eq!(&buf[..5], b"hello");
        drop(b);
        assert_eq!(read(a.as_raw_fd(), &mut buf), Read::Eof);
        assert_eq!(read(-1, &mut buf), Read::Failed(libc::EBADF));
    }

    #[test]
    fn an_outbox_keeps_what_the_kernel_refuses_and_sends_it_in_order() {
        let (a, mut b) = pair();
        let fd = a.as_raw_fd();
        let mut outbox = Outbox::default();
        let sent = outbox.write(fd, &[b"ab", b"", b"cd"]).unwrap();
        assert_eq!(
            sent,
            Sent {
                written: 4,
                queued: false
            }
        );
        // Fill the socket's buffer: the first write the kernel refuses in part is kept.
        let block = vec![7u8; 256 * 1024];
        let mut expected = b"abcd".to_vec();
        let mut queued = false;
        for i in 0..64u8 {
            let chunk = [i; 1000];
            let sent = outbox.write(fd, &[&block[..], &chunk[..]]).unwrap();
            expected.extend_from_slice(&block);
            expected.extend_from_slice(&chunk);
            if sent.queued {
                queued = true;
                break;
            }
        }
        assert!(queued, "the socket's buffer never filled");
        // Bytes written while others wait go behind them, not to the socket.
        let later = outbox.write(fd, &[b"tail"]).unwrap();
        assert_eq!(
            later,
            Sent {
                written: 0,
                queued: true
            }
        );
        expected.extend_from_slice(b"tail");
        let mut got = Vec::new();
        for _ in 0..10_000 {
            drain(&mut b, &mut got);
            if outbox.is_empty() {
                break;
            }
            outbox.flush(fd).unwrap();
        }
        drain(&mut b, &mut got);
        assert!(outbox.is_empty());
        assert_eq!(got.len(), expected.len());
        assert!(got == expected, "bytes out of order");
    }

    #[test]
    fn a_send_to_a_closed_peer_is_epipe_and_drops_what_waits() {
        let (a, b) = pair();
        drop(b);
        assert_eq!(send(a.as_raw_fd(), &[b"x"]), Err(libc::EPIPE));
        let mut outbox = Outbox {
            buf: b"left".to_vec(),
            off: 1,
        };
        assert_eq!(outbox.flush(a.as_raw_fd()), Err(libc::EPIPE));
        assert!(outbox.is_empty());
        assert_eq!(send(-1, &[b"x"]), Err(libc::EBADF));
        assert_eq!(send(a.as_raw_fd(), &[b""]), Ok(0));
    }

    #[test]
    fn a_shut_down_write_half_is_the_peers_eof() {
        let (a, mut b) = pair();
        shutdown_write(a.as_raw_fd()).unwrap();
        let mut buf = [0u8; 4];
        b.set_nonblocking(false).unwrap();
        assert_eq!(b.read(&mut buf).unwrap(), 0);
        // The other half still carries bytes.
        b.write_all(b"ok").unwrap();
        assert_eq!(read(a.as_raw_fd(), &mut buf), Read::Data(2));
        assert_eq!(shutdown_write(-1), Err(libc::EBADF));
    }

    #[test]
    fn a_reset_socket_reports_its_pending_error() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        assert_eq!(pending_error(client.as_raw_fd()), None);
        // Closing with a zero linger (what `resetAndDestroy()` sets) resets the connection.
        set_reset_on_close(server.as_fd()).unwrap();
        drop(server);
        // Wait for the reset to arrive (an event, bounded by poll's timeout).
        let mut pfd = libc::pollfd {
            fd: client.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd, a local the kernel writes `revents` of (this test's own wait).
        let ready = unsafe { libc::poll(&mut pfd, 1, 10_000) };
        assert_eq!(ready, 1, "no reset arrived");
        assert_eq!(pending_error(client.as_raw_fd()), Some(libc::ECONNRESET));
        // Reported once: the socket's error is taken by the call.
        assert_eq!(pending_error(client.as_raw_fd()), None);
        assert_eq!(pending_error(-1), None);
    }

    #[test]
    fn options_apply_to_tcp_and_are_taken_as_done_on_unix_sockets() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let sock = socket2::SockRef::from(&client);
        set_no_delay(client.as_fd(), true).unwrap();
        assert!(sock.tcp_nodelay().unwrap());
        set_no_delay(client.as_fd(), false).unwrap();
        assert!(!sock.tcp_nodelay().unwrap());
        set_keep_alive(client.as_fd(), true, Duration::from_millis(2500)).unwrap();
        assert!(sock.keepalive().unwrap());
        assert_eq!(sock.tcp_keepalive_time().unwrap(), Duration::from_secs(2));
        // A delay past what the kernel takes is set to the most it takes.
        set_keep_alive(client.as_fd(), true, Duration::from_secs(1 << 40)).unwrap();
        assert_eq!(
            sock.tcp_keepalive_time().unwrap(),
            Duration::from_secs(32767)
        );
        set_keep_alive(client.as_fd(), false, Duration::ZERO).unwrap();
        assert!(!sock.keepalive().unwrap());
        assert_eq!(type_of_service(client.as_fd()), Ok(Some(0)));
        assert_eq!(set_type_of_service(client.as_fd(), 0x10), Ok(()));
        assert_eq!(sock.tos_v4().unwrap(), 0x10);
        assert_eq!(type_of_service(client.as_fd()), Ok(Some(0x10)));
        let (a, _b) = pair();
        assert_eq!(set_no_delay(a.as_fd(), true), Ok(()));
        assert_eq!(
            set_keep_alive(a.as_fd(), true, Duration::from_secs(1)),
            Ok(())
        );
        assert_eq!(set_type_of_service(a.as_fd(), 0x10), Ok(()));
        assert_eq!(type_of_service(a.as_fd()), Ok(None));
    }

    #[test]
    fn the_type_of_service_of_an_ipv6_socket_is_its_traffic_class() {
        let Ok(listener) = TcpListener::bind("[::1]:0") else {
            return; // no IPv6 on this machine
        };
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        assert_eq!(set_type_of_service(client.as_fd(), 0x20), Ok(()));
        assert_eq!(socket2::SockRef::from(&client).tclass_v6().unwrap(), 0x20);
        assert_eq!(type_of_service(client.as_fd()), Ok(Some(0x20)));
    }

    /// Waits (bounded) until `fd` is writable, as the loop that drives a connect does.
    fn wait_writable(fd: RawFd) {
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLOUT,
            revents: 0,
        };
        // SAFETY: poll reads and writes the one pollfd it is given, a local.
        let n = unsafe { libc::poll(&mut pfd, 1, 10_000) };
        assert_eq!(n, 1, "the socket became writable");
    }

    #[test]
    fn a_connect_started_here_ends_connected_with_the_options_set() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let fd = connect_start(addr, true, Some(Duration::from_millis(1500))).unwrap();
        assert!(socket2::SockRef::from(&fd).nonblocking().unwrap());
        wait_writable(fd.as_raw_fd());
        assert_eq!(pending_error(fd.as_raw_fd()), None);
        let (accepted, peer) = listener.accept().unwrap();
        assert_eq!(local_addr(fd.as_fd()), Some(peer));
        let sock = socket2::SockRef::from(&fd);
        assert!(sock.tcp_nodelay().unwrap());
        assert!(sock.keepalive().unwrap());
        assert_eq!(sock.tcp_keepalive_time().unwrap(), Duration::from_secs(1));
        assert_eq!(send(fd.as_raw_fd(), &[b"ping"]), Ok(4));
        let mut got = [0u8; 4];
        (&accepted).read_exact(&mut got).unwrap();
        assert_eq!(&got, b"ping");
        let plain = connect_start(addr, false, None).unwrap();
        assert!(!socket2::SockRef::from(&plain).tcp_nodelay().unwrap());
        assert!(!socket2::SockRef::from(&plain).keepalive().unwrap());
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn a_connect_the_kernel_refuses_at_once_names_the_local_end() {
        // Linux routes no TCP connection to the broadcast address: refused in the call.
        let addr = SocketAddr::from(([255, 255, 255, 255], 80));
        let failed = connect_start(addr, true, None).unwrap_err();
        assert_eq!(failed.errno, libc::ENETUNREACH);
        assert_eq!(failed.syscall, "connect");
        assert_eq!(failed.local, Some(SocketAddr::from(([0, 0, 0, 0], 0))));
    }

    #[test]
    fn a_connect_to_a_socket_path_started_here_connects_or_fails_as_the_path_says() {
        let dir = std::env::temp_dir().join(format!("hyperagent-raw-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.sock");
        let _ = std::fs::remove_file(&path);
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let fd = connect_path_start(path.to_str().unwrap()).unwrap();
        assert!(socket2::SockRef::from(&fd).nonblocking().unwrap());
        wait_writable(fd.as_raw_fd());
        assert_eq!(pending_error(fd.as_raw_fd()), None);
        let (mut accepted, _) = listener.accept().unwrap();
        assert_eq!(send(fd.as_raw_fd(), &[b"ping"]), Ok(4));
        let mut got = [0u8; 4];
        accepted.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"ping");
        drop(listener);
        std::fs::remove_file(&path).unwrap();
        let missing = connect_path_start(path.to_str().unwrap()).unwrap_err();
        assert_eq!((missing.errno, missing.syscall), (libc::ENOENT, "connect"));
        let long = "/tmp/".to_owned() + &"x".repeat(200);
        assert_eq!(connect_path_start(&long).unwrap_err().syscall, "connect");
        let _ = std::fs::remove_dir(&dir);
    }

    #[test]
    fn a_refused_connect_started_here_fails_at_once_or_by_its_pending_error() {
        // A port nobody listens on: bound, then let go.
        let addr = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        match connect_start(addr, true, None) {
            Err(failed) => {
                assert_eq!(failed.errno, libc::ECONNREFUSED);
                assert_eq!(failed.syscall, "connect");
            }
            Ok(fd) => {
                wait_writable(fd.as_raw_fd());
                assert_eq!(pending_error(fd.as_raw_fd()), Some(libc::ECONNREFUSED));
            }
        }
    }
}
