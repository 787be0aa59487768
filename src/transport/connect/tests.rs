//! Connects on loopback: names and IP literals, several addresses, local binds, Unix sockets,
//! and tunnels through a stand-in proxy.

use super::*;

fn tcp(host: &str, port: u16) -> Target {
    Target::tcp(host, port)
}

fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

#[test]
fn keepalive_time_is_whole_seconds_within_what_the_kernel_takes() {
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
    // What the kernel takes at most (keepAliveMsecs of Infinity arrives as the longest Duration).
    assert_eq!(
        keepalive_time(Duration::from_secs(32768)),
        Duration::from_secs(32767)
    );
    assert_eq!(keepalive_time(Duration::MAX), Duration::from_secs(32767));
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
    #[cfg(unix)]
    {
        use std::os::fd::AsRawFd;
        let fd = conn.socket.into_fd().unwrap();
        // SAFETY: F_GETFL reads the flags of a descriptor this test owns; no memory is passed.
        let flags = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) };
        assert_ne!(flags & libc::O_NONBLOCK, 0);
        assert!(socket2::SockRef::from(&fd).tcp_nodelay().unwrap());
    }
    // It stays on tokio, with TCP_NODELAY set.
    #[cfg(windows)]
    {
        let Socket::Tcp(stream) = conn.socket else {
            panic!("a TCP socket");
        };
        assert!(stream.nodelay().unwrap());
    }
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

#[cfg(unix)]
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

#[cfg(windows)]
#[tokio::test]
async fn connects_to_a_named_pipe_or_names_its_path() {
    use tokio::net::windows::named_pipe::ServerOptions;
    let path = format!(r"\\.\pipe\hyperagent-test-{}", std::process::id());
    let server = ServerOptions::new()
        .first_pipe_instance(true)
        .create(&path)
        .unwrap();
    let conn = connect(
        Target::Unix { path: path.clone() },
        ConnectOptions::default(),
    )
    .await
    .unwrap();
    server.connect().await.unwrap();
    assert_eq!(conn.remote, Peer::Unix(path.clone()));
    assert!(matches!(conn.socket, Socket::Unix(_)));
    drop(server);
    let err = connect(
        Target::Unix { path: path.clone() },
        ConnectOptions::default(),
    )
    .await
    .unwrap_err();
    assert_eq!(err.code(), "ENOENT");
    assert_eq!(err.message(), format!("connect ENOENT {path}"));
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

/// `tcp(host, port)` with `edit` applied to its fields.
fn tcp_with(host: &str, port: u16, edit: impl FnOnce(&mut Target)) -> Target {
    let mut target = tcp(host, port);
    edit(&mut target);
    target
}

#[test]
fn a_socket_path_or_a_bare_tcp_connect_to_one_address_is_direct() {
    let sock = |ip: &str, port| Some(SocketAddr::new(ip.parse().unwrap(), port));
    let at = |ip: &str, port| sock(ip, port).map(Direct::Tcp);
    let ip = |s: &str| s.parse::<IpAddr>().unwrap();
    assert_eq!(tcp("127.0.0.1", 80).direct(), at("127.0.0.1", 80));
    assert_eq!(tcp("[::1]", 8080).direct(), at("::1", 8080));
    assert_eq!(tcp("::1", 8080).direct(), at("::1", 8080));
    // A name needs the resolver; 'localhost' too (it may have two addresses).
    assert_eq!(tcp("localhost", 80).direct(), None);
    assert_eq!(tcp("example.com", 80).direct(), None);
    // Something to bind first, or a proxy's tunnel: not direct.
    let bound = tcp_with("10.0.0.1", 443, |t| {
        if let Target::Tcp { local_address, .. } = t {
            *local_address = Some(ip("127.0.0.1"));
        }
    });
    assert_eq!(bound.direct(), None);
    let port_bound = tcp_with("10.0.0.1", 443, |t| {
        if let Target::Tcp { local_port, .. } = t {
            *local_port = Some(5000);
        }
    });
    assert_eq!(port_bound.direct(), None);
    let tunnelled = tcp_with("10.0.0.1", 443, |t| {
        if let Target::Tcp { tunnel, .. } = t {
            *tunnel = Some(Tunnel {
                request: "CONNECT a:1 HTTP/1.1\r\n\r\n".into(),
                refused: String::new(),
            });
        }
    });
    assert_eq!(tunnelled.direct(), None);
    // A program's lookup: its one address; several, Happy Eyeballs (not direct) unless only
    // the first would be tried.
    let looked_up = |ips: Vec<IpAddr>, delay: bool| {
        let target = tcp_with("name.test", 443, |t| {
            if let Target::Tcp {
                addresses, choice, ..
            } = t
            {
                *addresses = Some(ips);
                if !delay {
                    choice.attempt_delay = None;
                }
            }
        });
        target.direct().map(|to| match to {
            Direct::Tcp(addr) => addr,
            Direct::Path(_) => unreachable!("a TCP target"),
        })
    };
    assert_eq!(looked_up(vec![ip("10.0.0.9")], true), sock("10.0.0.9", 443));
    assert_eq!(looked_up(vec![ip("::1"), ip("10.0.0.9")], true), None);
    assert_eq!(
        looked_up(vec![ip("::1"), ip("10.0.0.9")], false),
        sock("::1", 443)
    );
    assert_eq!(looked_up(vec![], true), None);
    let path = Target::Unix {
        path: "/tmp/x.sock".into(),
    };
    assert_eq!(path.direct(), Some(Direct::Path("/tmp/x.sock")));
}
