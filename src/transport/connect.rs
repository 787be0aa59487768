//! Opening a connection on tokio: resolve, then connect (Happy Eyeballs over several
//! addresses), then set the socket options Node's agent sets. The connected socket leaves tokio
//! as a plain non-blocking descriptor, for whichever loop will drive its bytes.

use std::net::{IpAddr, SocketAddr};
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpSocket, TcpStream, UnixStream};
use tokio::task::JoinSet;

use super::dns::{self, Family};
use super::tls::{self, ClientStream, TlsConfig};
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
    /// Node's `socketPath`.
    Unix { path: String },
}

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

/// A tunnel through an HTTP proxy (`CONNECT`), as Node's https.Agent opens one for an agent
/// with a proxy: the request goes out as JavaScript wrote it, and the connection is the
/// origin's once the proxy answers 200.
#[derive(Clone, Debug)]
pub struct Tunnel {
    /// The whole `CONNECT` request.
    pub request: String,
    /// What a refusal's message starts with (`Failed to establish tunnel to <origin> via
    /// <proxy>: `); the proxy's status line follows.
    pub refused: String,
}

/// The TLS session to a proxy reached over TLS, as Node's agent opens it: the default trust,
/// the proxy's own name checked as `tls.checkServerIdentity` checks it.
#[derive(Clone)]
pub struct ProxyTls {
    pub config: Arc<TlsConfig>,
    /// The proxy's host: its SNI when it is a name, and the name its certificate must hold.
    pub host: String,
}

impl std::fmt::Debug for ProxyTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProxyTls")
            .field("host", &self.host)
            .finish()
    }
}

/// The longest response head a proxy may answer a `CONNECT` with.
const MAX_TUNNEL_HEAD: usize = 16 * 1024;

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
    Unix(UnixStream),
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
            local_port,
            addresses,
            proxy_tls,
            tunnel,
            choice,
        } => {
            // An IP literal needs no resolver, nor the trip to a blocking thread; as in
            // net.connect, it is tried whatever `localAddress` (a bind of the other family then
            // fails with EINVAL), where a name's addresses are those of the local one's family.
            let (ips, named) = match (addresses, dns::lookup_literal(&host)) {
                (Some(ips), _) => (ips, true),
                (None, Some(ips)) => (ips, false),
                (None, None) => {
                    let lookup_host = host.clone();
                    let mut ips = tokio::task::spawn_blocking(move || {
                        dns::lookup_blocking(&lookup_host, family)
                    })
                    .await
                    .map_err(|_| Error::dns(libc::EAI_FAIL, &host))??;
                    choice.order.apply(&mut ips);
                    (ips, true)
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
            if let Some(delay) = opts.keep_alive {
                let keepalive = socket2::TcpKeepalive::new().with_time(keepalive_time(delay));
                socket2::SockRef::from(&stream)
                    .set_tcp_keepalive(&keepalive)
                    .map_err(|e| Error::io(&e, "setsockopt"))?;
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

/// The TLS session to a proxy reached over TLS; its certificate must name the proxy, unless
/// `rejectUnauthorized` is off (then, as Node, the failure is only reported, and not here).
async fn proxy_session(
    stream: TcpStream,
    proxy: &ProxyTls,
    ip: IpAddr,
) -> Result<ClientStream<TcpStream>, Error> {
    let server = tls::server_name(Some(&proxy.host), ip);
    let (secure, info) = tls::handshake(stream, &proxy.config, server.clone()).await?;
    if proxy.config.rejects_unauthorized() {
        tls::check_name(&info, &server)?;
    }
    Ok(secure)
}

fn tunnel_ended() -> Error {
    Error::proxy_tunnel(
        "Connection to establish proxy tunnel ended unexpectedly",
        None,
    )
}

/// The proxy's answer to `CONNECT`, from its head: through on 200, otherwise Node's
/// `ERR_PROXY_TUNNEL` with the status.
fn tunnel_answer(head: &[u8], tunnel: &Tunnel) -> Result<(), Error> {
    let line_end = head
        .windows(2)
        .position(|w| w == b"\r\n")
        .unwrap_or(head.len());
    let status_line = String::from_utf8_lossy(&head[..line_end]);
    let status = status_line.split(' ').nth(1).unwrap_or("");
    if status == "200" {
        return Ok(());
    }
    Err(Error::proxy_tunnel(
        format!("{}{status_line}", tunnel.refused),
        Some(status.parse().unwrap_or(0)),
    ))
}

fn tunnel_head_too_long() -> Error {
    Error::proxy_tunnel(
        format!("Proxy response headers exceeded {MAX_TUNNEL_HEAD} bytes"),
        None,
    )
}

/// [`open_tunnel`] inside a TLS session to the proxy: the answer is read a byte at a time (from
/// the session's buffer, not the socket), so that nothing of the origin's is taken with it.
async fn open_tunnel_within<S>(stream: &mut S, tunnel: &Tunnel) -> Result<(), Error>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    stream
        .write_all(tunnel.request.as_bytes())
        .await
        .map_err(|e| Error::io(&e, "write"))?;
    stream.flush().await.map_err(|e| Error::io(&e, "write"))?;
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        if head.len() > MAX_TUNNEL_HEAD {
            return Err(tunnel_head_too_long());
        }
        let mut byte = [0u8; 1];
        match stream.read(&mut byte).await {
            Ok(0) => return Err(tunnel_ended()),
            Ok(_) => head.push(byte[0]),
            Err(e) => return Err(Error::io(&e, "read")),
        }
    }
    tunnel_answer(&head, tunnel)
}

/// Sends the `CONNECT` request and reads the proxy's answer, to the end of its head and not a
/// byte further (what follows is the origin's). Fails as Node fails: `ERR_PROXY_TUNNEL`, with
/// the `statusCode` of an answer other than 200.
async fn open_tunnel(stream: &mut TcpStream, tunnel: &Tunnel) -> Result<(), Error> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    stream
        .write_all(tunnel.request.as_bytes())
        .await
        .map_err(|e| Error::io(&e, "write"))?;
    let mut head = Vec::new();
    let mut buf = [0u8; 2048];
    loop {
        // Peeked first: the head's end may come with nothing after it, or with the start of
        // what the origin sends, which must stay in the socket.
        let n = match stream.peek(&mut buf).await {
            Ok(0) => return Err(tunnel_ended()),
            Ok(n) => n,
            Err(e) => return Err(Error::io(&e, "read")),
        };
        let from = head.len().saturating_sub(3);
        head.extend_from_slice(&buf[..n]);
        let end = head[from..]
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .map(|at| from + at + 4);
        let take = match end {
            Some(end) => n - (head.len() - end),
            None => n,
        };
        stream
            .read_exact(&mut buf[..take])
            .await
            .map_err(|e| Error::io(&e, "read"))?;
        if let Some(end) = end {
            head.truncate(end);
            break;
        }
        if head.len() > MAX_TUNNEL_HEAD {
            return Err(tunnel_head_too_long());
        }
    }
    tunnel_answer(&head, tunnel)
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

/// Where a connection is bound before it connects: Node's `localAddress` and `localPort`.
#[derive(Clone, Copy, Debug)]
struct Local {
    ip: Option<IpAddr>,
    port: Option<u16>,
}

async fn attempt(addr: SocketAddr, local: Local) -> Result<TcpStream, Error> {
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
    if local.ip.is_none() && local.port.is_none() {
        return socket.connect(addr).await.map_err(|e| fail(e, "connect"));
    }
    // A port alone binds the family's any-address, as net.connect does.
    let local_ip = local.ip.unwrap_or(match addr {
        SocketAddr::V4(_) => IpAddr::from(std::net::Ipv4Addr::UNSPECIFIED),
        SocketAddr::V6(_) => IpAddr::from(std::net::Ipv6Addr::UNSPECIFIED),
    });
    let bind_error =
        |e: std::io::Error| Error::io(&e, "bind").with_peer(local_ip.to_string(), local.port);
    // As net.connect, which reads a `localAddress` of the other family as one of the
    // target's, and fails: EINVAL.
    if local_ip.is_ipv4() != addr.is_ipv4() {
        return Err(bind_error(std::io::Error::from_raw_os_error(libc::EINVAL)));
    }
    if local.port.is_some() {
        // As libuv binds a TCP socket.
        socket.set_reuseaddr(true).map_err(bind_error)?;
    }
    socket
        .bind(SocketAddr::new(local_ip, local.port.unwrap_or(0)))
        .map_err(bind_error)?;
    socket.connect(addr).await.map_err(|e| {
        let err = fail(e, "connect");
        // With a local port, Node's error names the local end too.
        match local.port {
            Some(port) => err
                .with_detail(format!("- Local ({local_ip}:{port})"))
                .with_local(local_ip.to_string(), port),
            None => err,
        }
    })
}

/// Tries `addrs` in order, starting the next attempt when the previous one has run alone for
/// `delay` or has failed; the first to connect wins and the others are dropped.
async fn connect_any(
    addrs: Vec<SocketAddr>,
    local: Local,
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

/// The idle time before TCP keep-alive probes, as Node sets it (`socket.setKeepAlive`): whole
/// seconds, rounded down, and at least one; the kernel refuses zero (`EINVAL`), and Node never
/// fails a connection over `keepAliveMsecs`.
pub fn keepalive_time(delay: Duration) -> Duration {
    Duration::from_secs(delay.as_secs().max(1))
}

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
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    fn tcp(host: &str, port: u16) -> Target {
        Target::tcp(host, port)
    }

    fn closed_port() -> u16 {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    }

    #[test]
    fn keepalive_time_is_whole_seconds_at_least_one() {
        assert_eq!(
            keepalive_time(Duration::from_millis(1)),
            Duration::from_secs(1)
        );
        assert_eq!(
            keepalive_time(Duration::from_millis(999)),
            Duration::from_secs(1)
        );
        assert_eq!(keepalive_time(Duration::ZERO), Duration::from_secs(1));
        assert_eq!(
            keepalive_time(Duration::from_millis(2999)),
            Duration::from_secs(2)
        );
        assert_eq!(
            keepalive_time(Duration::from_secs(60)),
            Duration::from_secs(60)
        );
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
            local_port: None,
            addresses: Some(vec![
                IpAddr::from(std::net::Ipv6Addr::LOCALHOST),
                IpAddr::from([127, 0, 0, 1]),
            ]),
            proxy_tls: None,
            tunnel: None,
            choice: AddressChoice::default(),
        };
        let conn = connect(target.clone(), ConnectOptions::default())
            .await
            .unwrap();
        assert_eq!(
            conn.remote,
            Peer::Tcp(SocketAddr::from(([127, 0, 0, 1], port)))
        );
        // `autoSelectFamily: false`: the first address only, as net.connect.
        let mut single = target;
        if let Target::Tcp { choice, .. } = &mut single {
            choice.attempt_delay = None;
        }
        let Err(err) = connect(single, ConnectOptions::default()).await else {
            panic!("the first address has no listener");
        };
        assert_eq!(err.address(), Some("::1"), "{}", err.message());
    }

    #[test]
    fn the_result_order_puts_a_family_first_and_keeps_each_familys_order() {
        let ips: Vec<IpAddr> = ["::1", "10.0.0.1", "::2", "10.0.0.2"]
            .iter()
            .map(|s| s.parse().unwrap())
            .collect();
        let ordered = |order: Order| {
            let mut v = ips.clone();
            order.apply(&mut v);
            v.iter().map(|ip| ip.to_string()).collect::<Vec<_>>()
        };
        assert_eq!(
            ordered(Order::Verbatim),
            ["::1", "10.0.0.1", "::2", "10.0.0.2"]
        );
        assert_eq!(
            ordered(Order::Ipv4First),
            ["10.0.0.1", "10.0.0.2", "::1", "::2"]
        );
        assert_eq!(
            ordered(Order::Ipv6First),
            ["::1", "::2", "10.0.0.1", "10.0.0.2"]
        );
        assert_eq!(Order::from_node(Some("ipv4first")), Order::Ipv4First);
        assert_eq!(Order::from_node(Some("ipv6first")), Order::Ipv6First);
        assert_eq!(Order::from_node(Some("verbatim")), Order::Verbatim);
        assert_eq!(Order::from_node(None), Order::Verbatim);
    }

    #[tokio::test]
    async fn binds_the_local_address() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let mut target = tcp("127.0.0.1", port);
        if let Target::Tcp { local_address, .. } = &mut target {
            *local_address = Some(IpAddr::from([127, 0, 0, 2]));
        }
        let conn = connect(target, ConnectOptions::default()).await.unwrap();
        assert_eq!(conn.local.unwrap().ip(), IpAddr::from([127, 0, 0, 2]));
        // A port alone: the family's any-address, that port.
        let free = closed_port();
        let mut target = tcp("127.0.0.1", port);
        if let Target::Tcp { local_port, .. } = &mut target {
            *local_port = Some(free);
        }
        let conn = connect(target, ConnectOptions::default()).await.unwrap();
        assert_eq!(conn.local.unwrap().port(), free);
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

    /// A proxy on loopback that reads the CONNECT request, then writes `answer` in the pieces
    /// given, a few milliseconds apart (pacing only, so that they tend to arrive in separate
    /// reads: the tests hold as well when they arrive together); returns the request it read.
    async fn proxy(answer: Vec<&'static [u8]>) -> (u16, tokio::task::JoinHandle<Vec<u8>>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let task = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut request = Vec::new();
            while !request.ends_with(b"\r\n\r\n") {
                let mut byte = [0u8; 1];
                socket.read_exact(&mut byte).await.unwrap();
                request.push(byte[0]);
            }
            for piece in answer {
                socket.write_all(piece).await.unwrap();
                socket.flush().await.unwrap();
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            request
        });
        (port, task)
    }

    fn through(port: u16) -> Target {
        let mut target = tcp("127.0.0.1", port);
        if let Target::Tcp { tunnel, .. } = &mut target {
            *tunnel = Some(Tunnel {
                request: "CONNECT origin:443 HTTP/1.1\r\nhost: origin:443\r\n\r\n".into(),
                refused: "Failed to establish tunnel to origin:443 via http://proxy: ".into(),
            });
        }
        target
    }

    #[tokio::test]
    async fn a_tunnel_opens_and_leaves_the_origins_bytes_in_the_socket() {
        use tokio::io::AsyncReadExt;
        // The head's end split across writes, and the origin's first bytes in the same write.
        let answer: Vec<&'static [u8]> = vec![
            b"HTTP/1.1 200 Connection Established\r\n\r",
            b"\nfrom origin",
        ];
        let (port, proxy) = proxy(answer).await;
        let conn = connect(through(port), ConnectOptions::default())
            .await
            .unwrap();
        assert_eq!(
            proxy.await.unwrap(),
            b"CONNECT origin:443 HTTP/1.1\r\nhost: origin:443\r\n\r\n"
        );
        let Socket::Tcp(mut stream) = conn.socket else {
            panic!("not TCP")
        };
        let mut rest = [0u8; 11];
        stream.read_exact(&mut rest).await.unwrap();
        assert_eq!(&rest, b"from origin");
    }

    #[tokio::test]
    async fn a_refused_or_unanswered_tunnel_fails_as_node_fails() {
        let (port, _) = proxy(vec![b"HTTP/1.1 407 Proxy Authentication Required\r\n\r\n"]).await;
        let err = connect(through(port), ConnectOptions::default())
            .await
            .unwrap_err();
        assert_eq!(err.code(), "ERR_PROXY_TUNNEL");
        assert_eq!(err.status_code(), Some(407));
        assert_eq!(
            err.message(),
            "Failed to establish tunnel to origin:443 via http://proxy: HTTP/1.1 407 Proxy Authentication Required"
        );
        let (port, _) = proxy(vec![b"HTTP/1.1 200 OK\r\n"]).await;
        let err = connect(through(port), ConnectOptions::default())
            .await
            .unwrap_err();
        assert_eq!(
            (err.code(), err.status_code(), err.message().as_str()),
            (
                "ERR_PROXY_TUNNEL",
                None,
                "Connection to establish proxy tunnel ended unexpectedly"
            )
        );
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
