//! What a pool knows of each key's origin besides its connections: its TLS configuration (an
//! HTTPS key's), and where its `agent.request()` connections connect (the target, the TLS
//! server name, and whether the user's `lookup` resolves its host, in JavaScript). Set with a
//! key's first request, they go when the pool sweeps the key (its id may name another origin
//! next).

use std::collections::HashMap;
use std::sync::Arc;

use super::KeyId;
use crate::error::Error;
use crate::transport::establish::Identity;
use crate::transport::tls::{Ledger, TlsConfig, TlsOptions};
use crate::transport::Target;

/// Where a key's `agent.request()` connections connect.
#[derive(Clone, Debug)]
pub struct Destination {
    pub target: Target,
    /// The TLS server name (when it is not the target's host), and how it is checked.
    pub identity: Identity,
    /// The user's `lookup` resolves the host, in JavaScript, as on the drop-in path.
    pub js_lookup: bool,
}

/// The pool's keys' origins.
#[derive(Default)]
pub struct Origins {
    tls: HashMap<KeyId, Arc<TlsConfig>>,
    destinations: HashMap<KeyId, Destination>,
    /// The TLS sessions of all the keys, bounded together (`maxCachedSessions`, as Node's
    /// https.Agent bounds its cache); made with the first HTTPS key.
    sessions: Option<Arc<Ledger>>,
}

impl Origins {
    /// Sets the TLS configuration of `key` from its options; an error names the bad option.
    pub fn set_tls(&mut self, key: KeyId, opts: &TlsOptions) -> Result<(), Error> {
        let ledger = self
            .sessions
            .get_or_insert_with(|| Ledger::new(opts.max_cached_sessions));
        // The agent's maxCachedSessions as it is now (a program may have changed it).
        ledger.set_limit(opts.max_cached_sessions);
        let config = TlsConfig::sharing(opts, ledger)?;
        self.tls.insert(key, Arc::new(config));
        Ok(())
    }

    pub fn tls(&self, key: KeyId) -> Option<Arc<TlsConfig>> {
        self.tls.get(&key).cloned()
    }

    pub fn set_destination(&mut self, key: KeyId, destination: Destination) {
        self.destinations.insert(key, destination);
    }

    pub fn destination(&self, key: KeyId) -> Option<&Destination> {
        self.destinations.get(&key)
    }

    /// Forgets what it knew of swept keys.
    pub fn forget(&mut self, keys: &[KeyId]) {
        for key in keys {
            self.tls.remove(key);
            self.destinations.remove(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_swept_keys_origin_is_forgotten() {
        let mut origins = Origins::default();
        let (a, b) = (KeyId(1), KeyId(2));
        origins.set_tls(a, &TlsOptions::default()).unwrap();
        for key in [a, b] {
            origins.set_destination(
                key,
                Destination {
                    target: Target::tcp("localhost", 443),
                    identity: Identity {
                        servername: Some("example.com".into()),
                        node_check: true,
                    },
                    js_lookup: key == b,
                },
            );
        }
        assert!(origins.tls(a).is_some() && origins.tls(b).is_none());
        assert!(origins.destination(b).unwrap().js_lookup);
        origins.forget(&[a]);
        assert!(origins.tls(a).is_none() && origins.destination(a).is_none());
        assert_eq!(
            origins
                .destination(b)
                .unwrap()
                .identity
                .servername
                .as_deref(),
            Some("example.com")
        );
    }

    #[test]
    fn bad_tls_options_leave_the_key_without_a_configuration() {
        let mut origins = Origins::default();
        let opts = TlsOptions {
            min_version: Some("TLSv9".into()),
            ..TlsOptions::default()
        };
        assert!(origins.set_tls(KeyId(1), &opts).is_err());
        assert!(origins.tls(KeyId(1)).is_none());
    }
}
