//! Happy Eyeballs (RFC 8305): a name's addresses tried in turn, each attempt bound first where
//! Node's `localAddress` or `localPort` asks, the first to connect winning.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use tokio::net::{TcpSocket, TcpStream};
use tokio::task::JoinSet;

use crate::error::Error;

/// Alternates address families, starting with the resolver's first choice (RFC 8305 §4).
pub(super) fn interleave(addrs: Vec<SocketAddr>) -> Vec<SocketAddr> {
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
pub(super) struct Local {
    pub(super) ip: Option<IpAddr>,
    pub(super) port: Option<u16>,
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
        return Err(Error::os(libc::EINVAL, "bind").with_peer(local_ip.to_string(), local.port));
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
pub(super) async fn connect_any(
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
