//! Where a connection goes, from JavaScript (`lib/connect.js`): a host and port (with its
//! lookup's addresses, local bind, address order, proxy and tunnel), or a Unix socket path.

use std::time::Duration;

use napi::bindgen_prelude::*;
use napi_derive::napi;

use super::tls::proxy_tls_config;
use crate::transport::dns::{parse_ip, Family};
use crate::transport::establish::Identity;
use crate::transport::{AddressChoice, Order, ProxyTls, Target, Tunnel};

#[napi(object)]
pub struct ConnectTarget {
    pub host: Option<String>,
    pub port: Option<u32>,
    pub family: Option<u32>,
    pub local_address: Option<String>,
    pub local_port: Option<u32>,
    /// A Unix socket path (`socketPath`).
    pub path: Option<String>,
    /// Addresses from a user's `lookup`, in order.
    pub addresses: Option<Vec<String>>,
    /// For TLS: the SNI name (empty or absent for none).
    pub servername: Option<String>,
    /// For TLS: Node's own `checkServerIdentity` applies (the program gave none of its own).
    pub node_name_check: Option<bool>,
    /// The promise path resolves the host through the user's `lookup` function (in
    /// JavaScript) before each connection.
    pub js_lookup: Option<bool>,
    /// Through an HTTP proxy (`host` and `port` name it): the `CONNECT` request that opens the
    /// tunnel to the origin, and what a refusal's message starts with.
    pub tunnel_request: Option<String>,
    pub tunnel_refused: Option<String>,
    /// The proxy (`host`, `port`) is reached over TLS; `rejectUnauthorized` for its session
    /// (Node's default for `tls.connect`: the environment may turn it off).
    pub proxy_tls: Option<bool>,
    pub proxy_reject_unauthorized: Option<bool>,
    /// How a name's addresses are tried, as net.connect tries them: Happy Eyeballs with this
    /// attempt timeout (`autoSelectFamilyAttemptTimeout`), or 0 for the first address only
    /// (`autoSelectFamily: false`); absent: Node's defaults.
    pub attempt_delay_ms: Option<u32>,
    /// `dns.getDefaultResultOrder()` for the resolver's answers.
    pub order: Option<String>,
}

/// Whom a TLS connection to `target` is for.
pub fn identity_of(target: &ConnectTarget) -> Identity {
    Identity {
        servername: target.servername.clone(),
        node_check: target.node_name_check == Some(true),
    }
}

pub fn connect_target(target: ConnectTarget) -> Result<Target> {
    if let Some(path) = target.path {
        return Ok(Target::Unix { path });
    }
    let local_address =
        match target.local_address {
            Some(s) => Some(parse_ip(&s).ok_or_else(|| {
                Error::new(Status::InvalidArg, format!("invalid localAddress: {s}"))
            })?),
            None => None,
        };
    let addresses = match target.addresses {
        Some(list) => Some(
            list.iter()
                .map(|s| {
                    parse_ip(s).ok_or_else(|| {
                        Error::new(Status::InvalidArg, format!("invalid address: {s}"))
                    })
                })
                .collect::<Result<Vec<_>>>()?,
        ),
        None => None,
    };
    let host = target.host.unwrap_or_else(|| "localhost".into());
    let proxy_tls = match target.proxy_tls {
        Some(true) => Some(ProxyTls {
            config: proxy_tls_config(target.proxy_reject_unauthorized != Some(false))?,
            host: host.clone(),
        }),
        _ => None,
    };
    Ok(Target::Tcp {
        host,
        port: target.port.unwrap_or(80) as u16,
        family: Family::from_node(target.family.unwrap_or(0)),
        local_address,
        local_port: target.local_port.map(|p| p as u16),
        addresses,
        proxy_tls,
        tunnel: target.tunnel_request.map(|request| Tunnel {
            request,
            refused: target.tunnel_refused.unwrap_or_default(),
        }),
        choice: match target.attempt_delay_ms {
            None => AddressChoice::default(),
            Some(ms) => AddressChoice {
                attempt_delay: (ms > 0).then(|| Duration::from_millis(ms as u64)),
                order: Order::from_node(target.order.as_deref()),
            },
        },
    })
}
