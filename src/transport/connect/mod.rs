//! Opening a connection on tokio: resolve, then connect (Happy Eyeballs over several
//! addresses), then set the socket options Node's agent sets. On Unix the connected socket
//! leaves tokio as a plain non-blocking descriptor, for whichever loop will drive its bytes; on
//! Windows it stays on tokio (see `transport::carry`).

mod happy_eyeballs;
mod proxy;

use std::net::{IpAddr, SocketAddr};
#[cfg(unix)]
use std::os::fd::OwnedFd;
use std::time::Duration;

use tokio::net::TcpStream;

use crate::error::{eai, Error};

use super::dns::{self, Family};
use super::tls::ClientStream;
use happy_eyeballs::{connect_any, interleave, Local};
use proxy::{open_tunnel, open_tunnel_within, proxy_session};

pub use proxy::{ProxyTls, Tunnel};

/// Where to connect.
#[derive(Clone, Debug, PartialEq)]
pub enum Target {
    Tcp {
        host: String,
        port: u16,
        family: Family,
        /// Node's `localAddress`: the local IP to bind before connecting.
        local_address: Option<IpAddr>,
        /// Node's `localPort`: the local port to bind before connecting.
        local_port: Option<u16>,
        /// Addresses already resolved (by a user's `lookup` function); skips DNS.
        addresses: Option<Vec<IpAddr>>,
        /// For a proxy reached over TLS (an `https:` proxy URL): the session to it, first.
        proxy_tls: Option<ProxyTls>,
        /// An HTTP proxy (`host`, `port`) to open a tunnel through to the origin, first.
        tunnel: Option<Tunnel>,
        /// How the addresses of a name are tried.
        choice: AddressChoice,
    },
    /// Node's `socketPath`: a Unix domain socket, or on Windows a named pipe
    /// (`\\.\pipe\name`), which is what the option names there.
    Unix { path: String },
}

/// Where a connect that needs nothing but the connect call itself goes (see
/// [`Target::direct`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direct<'a> {
    Tcp(SocketAddr),
    /// A Unix domain socket's path (`socketPath`).
    Path(&'a str),
}

impl Target {
    /// Where a connection to this target goes, when reaching it takes nothing but a connect
    /// call: a Unix domain socket's path, or an IP address (or the single address a program's
    /// `lookup` gave, or the first, where no other would be tried), with no proxy, and no
    /// local address or port to bind. Such a connect needs no resolver and no tokio task: it
    /// can start and end on the thread that drives the connection's bytes.
    pub fn direct(&self) -> Option<Direct<'_>> {
        match self {
            Target::Unix { path } => Some(Direct::Path(path)),
            Target::Tcp {
                host,
                port,
                local_address: None,
                local_port: None,
                addresses,
                proxy_tls: None,
                tunnel: None,
                choice,
                ..
            } => {
                let ip = match addresses {
                    Some(ips) if ips.len() == 1 || choice.attempt_delay.is_none() => {
                        *ips.first()?
                    }
                    Some(_) => return None,
                    None => dns::parse_ip(host)?,
                };
                Some(Direct::Tcp(SocketAddr::new(ip, *port)))
            }
            Target::Tcp { .. } => None,
        }
    }
}

/// The stream of a `socketPath` connection: a Unix domain socket.
#[cfg(unix)]
pub type PathStream = tokio::net::UnixStream;

/// The stream of a `socketPath` connection: on Windows, a named pipe's client end.
#[cfg(windows)]
pub type PathStream = tokio::net::windows::named_pipe::NamedPipeClient;

/// How net.connect picks among a name's addresses, as Node's options and defaults say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AddressChoice {
    /// Happy Eyeballs (`autoSelectFamily`): how long an attempt runs alone before the next
    /// address is tried beside it (`autoSelectFamilyAttemptTimeout`, RFC 8305). `None`: the
    /// first address only, as Node connects with `autoSelectFamily: false`.
    pub attempt_delay: Option<Duration>,
    /// The order of the resolver's answers (`dns.setDefaultResultOrder()`).
    pub order: Order,
}

impl Default for AddressChoice {
    fn default() -> Self {
        AddressChoice {
            attempt_delay: Some(Duration::from_millis(250)),
            order: Order::Verbatim,
        }
    }
}

/// `dns.getDefaultResultOrder()`: as the resolver answered, or one family first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    Verbatim,
    Ipv4First,
    Ipv6First,
}

impl Order {
    /// Node's names; anything else is the resolver's own order.
    pub fn from_node(name: Option<&str>) -> Order {
        match name {
            Some("ipv4first") => Order::Ipv4First,
            Some("ipv6first") => Order::Ipv6First,
            _ => Order::Verbatim,
        }
    }

    fn apply(self, ips: &mut [IpAddr]) {
        match self {
            Order::Verbatim => {}
            // Stable: each family keeps the resolver's order.
            Order::Ipv4First => ips.sort_by_key(|ip| !ip.is_ipv4()),
            Order::Ipv6First => ips.sort_by_key(|ip| ip.is_ipv4()),
        }
    }
}

#[derive(Clone, Copy, Debug)]
pub struct ConnectOptions {
    /// TCP_NODELAY; Node's agent sets it unless `noDelay: false`.
    pub no_delay: bool,
    /// SO_KEEPALIVE with this initial delay (`keepAliveMsecs`).
    pub keep_alive: Option<Duration>,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        ConnectOptions {
            no_delay: true,
            keep_alive: None,
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
pub enum Socket {
    Tcp(TcpStream),
    /// A `socketPath` connection (a named pipe on Windows).
    Unix(PathStream),
    /// Through a proxy reached over TLS: the session to the proxy (and, for HTTPS, the tunnel
    /// inside it), which tokio must keep driving.
    Proxied(Box<ClientStream<TcpStream>>),
}

impl std::fmt::Debug for Socket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Socket::Tcp(_) => "Socket::Tcp",
            Socket::Unix(_) => "Socket::Unix",
            Socket::Proxied(_) => "Socket::Proxied",
        })
    }
}

#[cfg(unix)]
impl Socket {
    /// Leaves tokio: the plain non-blocking descriptor, for another loop to drive (a proxied
    /// one has none: its bytes go through TLS on tokio).
    pub fn into_fd(self) -> Result<OwnedFd, Error> {
        match self {
            Socket::Tcp(s) => s.into_std().map(OwnedFd::from),
            Socket::Unix(s) => s.into_std().map(OwnedFd::from),
            Socket::Proxied(_) => return Err(Error::os(libc::EINVAL, "connect")),
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
    connect_telling(target, opts, |_, _| {}).await
}

/// Resolves and connects, telling `resolved` the name and the addresses it will try when it
/// resolved the name itself (not for an IP address, nor for addresses it was given), in the
/// resolver's order, before it connects to them: a `net.Socket` emits `'lookup'` for each then.
pub async fn connect_telling(
    target: Target,
    opts: ConnectOptions,
    resolved: impl FnOnce(&str, &[IpAddr]),
) -> Result<Connected, Error> {
    match target {
        Target::Unix { path } => {
            let stream = connect_path(&path)
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
            local_port,
            addresses,
            proxy_tls,
            tunnel,
            choice,
        } => {
            // An IP literal needs no resolver, nor the trip to a blocking thread; as in
            // net.connect, it is tried whatever `localAddress` (a bind of the other family then
            // fails with EINVAL), where a name's addresses are those of the local one's family.
            // `looked_up`: resolved here.
            let (ips, named, looked_up) = match (addresses, dns::lookup_literal(&host)) {
                (Some(ips), _) => (ips, true, false),
                (None, Some(ips)) => (ips, false, false),
                (None, None) => {
                    let lookup_host = host.clone();
                    let mut ips = tokio::task::spawn_blocking(move || {
                        dns::lookup_blocking(&lookup_host, family)
                    })
                    .await
                    .map_err(|_| Error::dns(eai::FAIL, &host))??;
                    choice.order.apply(&mut ips);
                    (ips, true, true)
                }
            };
            let mut ips: Vec<IpAddr> = ips
                .into_iter()
                .filter(|ip| {
                    !named || local_address.is_none_or(|local| local.is_ipv4() == ip.is_ipv4())
                })
                .collect();
            if ips.is_empty() {
                return Err(Error::no_address(&host));
            }
            if choice.attempt_delay.is_none() {
                ips.truncate(1);
            }
            if looked_up {
                resolved(&host, &ips);
            }
            let addrs = interleave(
                ips.into_iter()
                    .map(|ip| SocketAddr::new(ip, port))
                    .collect(),
            );
            let local = Local {
                ip: local_address,
                port: local_port,
            };
            let delay = choice.attempt_delay.unwrap_or_default();
            let mut stream = connect_any(addrs, local, delay).await?;
            let peer = stream.peer_addr().ok();
            stream
                .set_nodelay(opts.no_delay)
                .map_err(|e| Error::io(&e, "setsockopt"))?;
            // As Node's `setKeepAlive`, whose failure no connection hears of.
            if let Some(delay) = opts.keep_alive {
                let keepalive = socket2::TcpKeepalive::new().with_time(keepalive_time(delay));
                let _ = socket2::SockRef::from(&stream).set_tcp_keepalive(&keepalive);
            }
            let local = stream.local_addr().ok();
            let remote = peer.unwrap_or(SocketAddr::new(IpAddr::from([0, 0, 0, 0]), port));
            let socket = match proxy_tls {
                None => {
                    if let Some(tunnel) = &tunnel {
                        open_tunnel(&mut stream, tunnel).await?;
                    }
                    Socket::Tcp(stream)
                }
                Some(proxy) => {
                    let mut secure = proxy_session(stream, &proxy, remote.ip()).await?;
                    if let Some(tunnel) = &tunnel {
                        open_tunnel_within(&mut secure, tunnel).await?;
                    }
                    Socket::Proxied(Box::new(secure))
                }
            };
            Ok(Connected {
                socket,
                local,
                remote: Peer::Tcp(remote),
            })
        }
    }
}

/// Connects to a Unix domain socket.
#[cfg(unix)]
async fn connect_path(path: &str) -> std::io::Result<PathStream> {
    PathStream::connect(path).await
}

/// Opens a named pipe's client end. As libuv connects a pipe on Windows: while every instance
/// of the pipe is busy (`ERROR_PIPE_BUSY`), the open is tried again, for up to 30 seconds,
/// after which it fails as libuv's wait does (`ERROR_SEM_TIMEOUT`: ETIMEDOUT). Any deadline of
/// the caller's bounds the wait too.
#[cfg(windows)]
async fn connect_path(path: &str) -> std::io::Result<PathStream> {
    use tokio::net::windows::named_pipe::ClientOptions;
    use windows_sys::Win32::Foundation::{ERROR_PIPE_BUSY, ERROR_SEM_TIMEOUT};

    let until = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        match ClientOptions::new().open(path) {
            Err(e) if e.raw_os_error() == Some(ERROR_PIPE_BUSY as i32) => {
                if tokio::time::Instant::now() >= until {
                    return Err(std::io::Error::from_raw_os_error(ERROR_SEM_TIMEOUT as i32));
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            opened => return opened,
        }
    }
}

/// The idle time before TCP keep-alive probes, as Node sets it (`socket.setKeepAlive`): whole
/// seconds, rounded down, at least one and at most [`MAX_KEEPALIVE_SECS`]; the kernel refuses
/// zero and more (`EINVAL`), and Node never fails a connection over `keepAliveMsecs`.
pub fn keepalive_time(delay: Duration) -> Duration {
    Duration::from_secs(delay.as_secs().clamp(1, MAX_KEEPALIVE_SECS))
}

/// The longest idle time before keep-alive probes Linux takes (its `MAX_TCP_KEEPIDLE`).
const MAX_KEEPALIVE_SECS: u64 = 32767;

#[cfg(test)]
impl Target {
    /// `host`:`port`, with every other choice at its default (for tests).
    pub(crate) fn tcp(host: &str, port: u16) -> Target {
        Target::Tcp {
            host: host.into(),
            port,
            family: Family::Any,
            local_address: None,
            local_port: None,
            addresses: None,
            proxy_tls: None,
            tunnel: None,
            choice: AddressChoice::default(),
        }
    }
}

#[cfg(test)]
mod tests;
