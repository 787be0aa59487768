//! Opening a connection on tokio: resolve, then connect (Happy Eyeballs over several
//! addresses), then set the socket options Node's agent sets. The connected socket leaves tokio
//! as a plain non-blocking descriptor, for whichever loop will drive its bytes.

use std::net::{IpAddr, SocketAddr};
use std::os::fd::OwnedFd;
use std::time::Duration;

use tokio::net::{TcpSocket, TcpStream, UnixStream};
use tokio::task::JoinSet;

use super::dns::{self, Family};
use crate::error::Error;

/// Where to connect.
#[derive(Clone, Debug)]
pub enum Target {
    Tcp {
        host: String,
        port: u16,
        family: Family,
        /// Node's `localAddress`: the local IP to bind before connecting.
        local_address: Option<IpAddr>,
        /// Addresses already resolved (by a user's `lookup` function); skips DNS.
        addresses: Option<Vec<IpAddr>>,
    },
    /// Node's `socketPath`.
    Unix { path: String },
}

#[derive(Clone, Copy, Debug)]
pub struct ConnectOptions {
    /// TCP_NODELAY; Node's agent sets it unless `noDelay: false`.
    pub no_delay: bool,
    /// SO_KEEPALIVE with this initial delay (`keepAliveMsecs`).
    pub keep_alive: Option<Duration>,
    /// How long an attempt runs alone before the next address is tried beside it
    /// (RFC 8305; Node's `autoSelectFamilyAttemptTimeout` is 250 ms).
    pub attempt_delay: Duration,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        ConnectOptions {
            no_delay: true,
            keep_alive: None,
            attempt_delay: Duration::from_millis(250),
        }
    }
}

/// The far end of a connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Peer {
    Tcp(SocketAddr),
    Unix(String),
}

/// A connected socket, still registered with tokio.
#[derive(Debug)]
pub enum Socket {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Socket {
    /// Leaves tokio: the plain non-blocking descriptor, for another loop to drive.
    pub fn into_fd(self) -> Result<OwnedFd, Error> {
        match self {
            Socket::Tcp(s) => s.into_std().map(OwnedFd::from),
            Socket::Unix(s) => s.into_std().map(OwnedFd::from),
        }
        .map_err(|e| Error::io(&e, "connect"))
    }
}

#[derive(Debug)]
pub struct Connected {
    pub socket: Socket,
    /// The local address of a TCP connection.
    pub local: Option<SocketAddr>,
    pub remote: Peer,
}

/// Resolves and connects.
pub async fn connect(target: Target, opts: ConnectOptions) -> Result<Connected, Error> {
    match target {
        Target::Unix { path } => {
            let stream = UnixStream::connect(&path)
                .await
                .map_err(|e| Error::io(&e, "connect").with_peer(path.clone(), None))?;
            Ok(Connected {
                socket: Socket::Unix(stream),
                local: None,
                remote: Peer::Unix(path),
            })
        }
        Target::Tcp {
            host,
            port,
            family,
            local_address,
            addresses,
        } => {
            // An IP literal needs no resolver, nor the trip to a blocking thread; as in
            // net.connect, it is tried whatever `localAddress` (a bind of the other family then
            // fails with EINVAL), where a name's addresses are those of the local one's family.
            let (ips, named) = match (addresses, dns::lookup_literal(&host)) {
                (Some(ips), _) => (ips, true),
                (None, Some(ips)) => (ips, false),
                (None, None) => {
                    let lookup_host = host.clone();
                    let ips = tokio::task::spawn_blocking(move || {
                        dns::lookup_blocking(&lookup_host, family)
                    })
                    .await
                    .map_err(|_| Error::dns(libc::EAI_FAIL, &host))??;
                    (ips, true)
                }
            };
            let ips: Vec<IpAddr> = ips
                .into_iter()
                .filter(|ip| {
                    !named || local_address.is_none_or(|local| local.is_ipv4() == ip.is_ipv4())
                })
                .collect();
            if ips.is_empty() {
                return Err(Error::no_address(&host));
            }
            let addrs = interleave(
                ips.into_iter()
                    .map(|ip| SocketAddr::new(ip, port))
                    .collect(),
            );
            let stream = connect_any(addrs, local_address, opts.attempt_delay).await?;
            let peer = stream.peer_addr().ok();
            stream
                .set_nodelay(opts.no_delay)
                .map_err(|e| Error::io(&e, "setsockopt"))?;
            if let Some(delay) = opts.keep_alive {
                let keepalive = socket2::TcpKeepalive::new().with_time(delay);
                socket2::SockRef::from(&stream)
                    .set_tcp_keepalive(&keepalive)
                    .map_err(|e| Error::io(&e, "setsockopt"))?;
            }
            let local = stream.local_addr().ok();
            let remote = peer.unwrap_or(SocketAddr::new(IpAddr::from([0, 0, 0, 0]), port));
            Ok(Connected {
                socket: Socket::Tcp(stream),
                local,
                remote: Peer::Tcp(remote),
            })
        }
    }
}

/// Alternates address families, starting with the resolver's first choice (RFC 8305 §4).
fn interleave(addrs: Vec<SocketAddr>) -> Vec<SocketAddr> {
    let Some(first) = addrs.first() else {
        return addrs;
    };
    let first_v4 = first.is_ipv4();
    let (mut same, mut other): (Vec<_>, Vec<_>) =
        addrs.into_iter().partition(|a| a.is_ipv4() == first_v4);
    same.reverse();
    other.reverse();
    let mut out = Vec::with_capacity(same.len() + other.len());
    loop {
        match (same.pop(), other.pop()) {
            (None, None) => return out,
            (a, b) => out.extend(a.into_iter().chain(b)),
        }
    }
}

async fn attempt(addr: SocketAddr, local: Option<IpAddr>) -> Result<TcpStream, Error> {
    let ip = addr.ip().to_string();
    let fail = |e: std::io::Error, syscall| {
        Error::io(&e, syscall).with_peer(ip.clone(), Some(addr.port()))
    };
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()
    } else {
        TcpSocket::new_v6()
    }
    .map_err(|e| fail(e, "socket"))?;
    if let Some(local) = local {
        let bind_error =
            |e: std::io::Error| Error::io(&e, "bind").with_peer(local.to_string(), None);
        // As net.connect, which reads a `localAddress` of the other family as one of the
        // target's, and fails: EINVAL.
        if local.is_ipv4() != addr.is_ipv4() {
            return Err(bind_error(std::io::Error::from_raw_os_error(libc::EINVAL)));
        }
        socket.bind(SocketAddr::new(local, 0)).map_err(bind_error)?;
    }
    socket.connect(addr).await.map_err(|e| fail(e, "connect"))
}

/// Tries `addrs` in order, starting the next attempt when the previous one has run alone for
/// `delay` or has failed; the first to connect wins and the others are dropped.
async fn connect_any(
    addrs: Vec<SocketAddr>,
    local: Option<IpAddr>,
    delay: Duration,
) -> Result<TcpStream, Error> {
    if addrs.len() == 1 {
        return attempt(addrs[0], local).await;
    }
    let mut queue = addrs.into_iter();
    let mut running = JoinSet::new();
    let mut last_err = None;
    if let Some(addr) = queue.next() {
        running.spawn(attempt(addr, local));
    }
    loop {
        let more = queue.len() > 0;
        tokio::select! {
            done = running.join_next(), if !running.is_empty() => {
                match done {
                    Some(Ok(Ok(stream))) => return Ok(stream),
                    Some(Ok(Err(err))) => {
                        last_err = Some(err);
                        match queue.next() {
                            Some(addr) => { running.spawn(attempt(addr, local)); }
                            None if running.is_empty() => break,
                            None => {}
                        }
                    }
                    Some(Err(_)) | None => {
                        if running.is_empty() && !more {
                            break;
                        }
                    }
                }
            }
            _ = tokio::time::sleep(delay), if more => {
                if let Some(addr) = queue.next() {
                    running.spawn(attempt(addr, local));
                }
            }
        }
    }
    Err(last_err.unwrap_or_else(|| Error::os(libc::ECONNREFUSED, "connect")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    fn tcp(host: &str, port: u16) -> Target {
        Target::Tcp {
            host: host.into(),
            port,
            family: Family::Any,
            local_address: None,
            addresses: None,
        }
    }

    fn closed_port() -> u16 {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    }

    #[tokio::test]
    async fn connects_by_name_and_reports_both_ends() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let conn = connect(tcp("localhost", port), ConnectOptions::default())
            .await
            .unwrap();
        let (_server, client_addr) = listener.accept().await.unwrap();
        assert_eq!(
            conn.remote,
            Peer::Tcp(SocketAddr::from(([127, 0, 0, 1], port)))
        );
        assert_eq!(conn.local, Some(client_addr));
        // It leaves tokio non-blocking, with TCP_NODELAY set.
        let fd = conn.socket.into_fd().unwrap();
        let flags = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) };
        assert_ne!(flags & libc::O_NONBLOCK, 0);
        assert!(socket2::SockRef::from(&fd).tcp_nodelay().unwrap());
    }

    #[tokio::test]
    async fn a_refused_connect_is_econnrefused_with_the_peer() {
        let port = closed_port();
        let err = connect(tcp("127.0.0.1", port), ConnectOptions::default())
            .await
            .unwrap_err();
        assert_eq!(err.code(), "ECONNREFUSED");
        assert_eq!(err.syscall(), "connect");
        assert_eq!(err.address(), Some("127.0.0.1"));
        assert_eq!(err.port(), Some(port));
    }

    #[tokio::test]
    async fn an_unknown_host_is_enotfound() {
        let err = connect(tcp("no-such-host.invalid", 80), ConnectOptions::default())
            .await
            .unwrap_err();
        assert_eq!(err.code(), "ENOTFOUND");
    }

    #[tokio::test]
    async fn later_addresses_are_tried_when_earlier_ones_fail() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        // ::1 has no listener on this port (or no IPv6 at all): the IPv4 address must win.
        let target = Target::Tcp {
            host: "localhost".into(),
            port,
            family: Family::Any,
            local_address: None,
            addresses: Some(vec![
                IpAddr::from(std::net::Ipv6Addr::LOCALHOST),
                IpAddr::from([127, 0, 0, 1]),
            ]),
        };
        let conn = connect(target, ConnectOptions::default()).await.unwrap();
        assert_eq!(
            conn.remote,
            Peer::Tcp(SocketAddr::from(([127, 0, 0, 1], port)))
        );
    }

    #[tokio::test]
    async fn binds_the_local_address() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let target = Target::Tcp {
            host: "127.0.0.1".into(),
            port,
            family: Family::Any,
            local_address: Some(IpAddr::from([127, 0, 0, 2])),
            addresses: None,
        };
        let conn = connect(target, ConnectOptions::default()).await.unwrap();
        assert_eq!(conn.local.unwrap().ip(), IpAddr::from([127, 0, 0, 2]));
    }

    #[tokio::test]
    async fn connects_to_a_unix_socket_or_names_its_path() {
        let dir = std::env::temp_dir().join(format!("hyperagent-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.sock");
        let _ = std::fs::remove_file(&path);
        let listener = tokio::net::UnixListener::bind(&path).unwrap();
        let path_str = path.to_str().unwrap().to_owned();
        let conn = connect(
            Target::Unix {
                path: path_str.clone(),
            },
            ConnectOptions::default(),
        )
        .await
        .unwrap();
        assert_eq!(conn.remote, Peer::Unix(path_str.clone()));
        drop(listener);
        std::fs::remove_file(&path).unwrap();
        let err = connect(
            Target::Unix {
                path: path_str.clone(),
            },
            ConnectOptions::default(),
        )
        .await
        .unwrap_err();
        assert_eq!(err.code(), "ENOENT");
        assert_eq!(err.message(), format!("connect ENOENT {path_str}"));
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn families_alternate_starting_with_the_first() {
        let v6 = |p| SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, p));
        let v4 = |p| SocketAddr::from(([127, 0, 0, 1], p));
        assert_eq!(
            interleave(vec![v6(1), v6(2), v4(3), v4(4)]),
            vec![v6(1), v4(3), v6(2), v4(4)]
        );
        assert_eq!(interleave(vec![v4(1), v4(2)]), vec![v4(1), v4(2)]);
    }
}
