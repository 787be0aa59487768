//! Is an idle socket still good to send a request on?
//!
//! A server may close a keep-alive connection at any moment; the FIN (or RST) sits in the
//! socket's receive queue before anything notices it. Peeking at the queue without blocking
//! tells the three cases apart at the cost of one syscall: nothing queued (healthy), end of
//! stream or an error (closed), and bytes nobody asked for (a confused or hostile peer: the next
//! response would be mis-framed, so the connection is as good as dead).

use std::os::fd::RawFd;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Liveness {
    /// Nothing to read: the connection can carry a request.
    Open,
    /// The peer sent a FIN.
    Closed,
    /// The socket holds an error (typically `ECONNRESET`).
    Failed(i32),
    /// Unsolicited bytes are waiting.
    Data,
}

impl Liveness {
    pub fn is_open(self) -> bool {
        self == Liveness::Open
    }
}

/// Peeks at `fd` without blocking or consuming anything.
pub fn peek(fd: RawFd) -> Liveness {
    let mut byte = 0u8;
    loop {
        // SAFETY: the kernel writes at most 1 byte into `byte`, a local; MSG_PEEK leaves the
        // queue as it is. A stale descriptor is an error, not UB. Tests: the `liveness::tests`
        // (e.g. `stray_bytes_read_as_data_and_stay_queued`).
        let n = unsafe {
            libc::recv(
                fd,
                (&mut byte as *mut u8).cast(),
                1,
                libc::MSG_PEEK | libc::MSG_DONTWAIT,
            )
        };
        if n > 0 {
            return Liveness::Data;
        }
        if n == 0 {
            return Liveness::Closed;
        }
        let errno = std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO);
        match errno {
            libc::EINTR => continue,
            libc::EAGAIN => return Liveness::Open,
            _ => return Liveness::Failed(errno),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsRawFd;

    fn pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        (client, server)
    }

    /// Waits (bounded) until the peek sees something other than `Open`.
    fn settle(fd: RawFd) -> Liveness {
        for _ in 0..1000 {
            let state = peek(fd);
            if state != Liveness::Open {
                return state;
            }
            let mut pfd = libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one pollfd on the stack, of which the kernel writes `revents` (a test's
            // wait for the peer's FIN or RST: `a_fin_from_the_peer_reads_as_closed`).
            unsafe { libc::poll(&mut pfd, 1, 10) };
        }
        Liveness::Open
    }

    #[test]
    fn an_untouched_connection_is_open() {
        let (client, _server) = pair();
        assert_eq!(peek(client.as_raw_fd()), Liveness::Open);
    }

    #[test]
    fn a_fin_from_the_peer_reads_as_closed() {
        let (client, server) = pair();
        drop(server);
        assert_eq!(settle(client.as_raw_fd()), Liveness::Closed);
    }

    #[test]
    fn an_rst_from_the_peer_reads_as_failed() {
        let (client, server) = pair();
        // SO_LINGER with a zero timeout turns close() into an RST.
        socket2::SockRef::from(&server)
            .set_linger(Some(std::time::Duration::ZERO))
            .unwrap();
        drop(server);
        assert_eq!(
            settle(client.as_raw_fd()),
            Liveness::Failed(libc::ECONNRESET)
        );
    }

    #[test]
    fn stray_bytes_read_as_data_and_stay_queued() {
        let (client, mut server) = pair();
        server.write_all(b"HTTP/1.1 200 OK\r\n").unwrap();
        assert_eq!(settle(client.as_raw_fd()), Liveness::Data);
        assert_eq!(peek(client.as_raw_fd()), Liveness::Data);
    }
}
