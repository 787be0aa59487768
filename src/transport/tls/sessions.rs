//! Sessions kept for resumption, bounded across an agent as Node's `https.Agent` bounds them:
//! at most `maxCachedSessions` servers hold sessions over all of the agent's TLS configurations
//! (one per pool key), and past that the server whose sessions were cached first loses them.
//! Each configuration has a [`Store`] of its own (rustls resumes a session only with the
//! configuration that made it); they share one [`Ledger`], the order in which their servers
//! were first cached.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use rustls::client::{
    ClientSessionMemoryCache, ClientSessionStore, Tls12ClientSessionValue, Tls13ClientSessionValue,
};
use rustls::pki_types::ServerName;
use rustls::NamedGroup;

/// The servers holding sessions over an agent's stores, in the order they were first cached.
pub struct Ledger {
    state: Mutex<LedgerState>,
}

#[derive(Default)]
struct LedgerState {
    limit: usize,
    /// (store, server), first cached first; a server counts once while it holds sessions.
    order: VecDeque<(u64, ServerName<'static>)>,
    stores: HashMap<u64, Weak<Store>>,
    next: u64,
}

impl fmt::Debug for Ledger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.lock();
        f.debug_struct("Ledger")
            .field("limit", &state.limit)
            .field("servers", &state.order.len())
            .finish()
    }
}

impl Ledger {
    /// A ledger that lets `limit` servers hold sessions.
    pub fn new(limit: usize) -> Arc<Ledger> {
        Arc::new(Ledger {
            state: Mutex::new(LedgerState {
                limit,
                ..LedgerState::default()
            }),
        })
    }

    fn lock(&self) -> MutexGuard<'_, LedgerState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How many servers may hold sessions from now on (`maxCachedSessions` as last read): a
    /// lower limit evicts at the next session cached.
    pub fn set_limit(&self, limit: usize) {
        self.lock().limit = limit;
    }

    /// How many servers hold sessions.
    pub fn servers(&self) -> usize {
        self.lock().order.len()
    }

    /// A new store for one configuration, its sessions counted here; rustls keeps up to
    /// `size` of them (see [`ClientSessionMemoryCache::new`]).
    pub fn store(self: &Arc<Self>, size: usize) -> Arc<Store> {
        let mut state = self.lock();
        let id = state.next;
        state.next += 1;
        let store = Arc::new(Store {
            id,
            size,
            cache: ClientSessionMemoryCache::new(size),
            ledger: self.clone(),
        });
        state.stores.insert(id, Arc::downgrade(&store));
        store
    }

    /// Store `id` cached a session for `server`: counted if it is new, and the servers first
    /// cached past the limit lose theirs (outside the ledger's lock: a store's cache has a lock
    /// of its own, never held while this one is taken).
    fn cached(&self, id: u64, server: &ServerName<'static>) {
        let evicted = {
            let mut state = self.lock();
            if state
                .order
                .iter()
                .any(|(s, name)| *s == id && name == server)
            {
                return;
            }
            state.order.push_back((id, server.clone()));
            let mut evicted = Vec::new();
            while state.order.len() > state.limit {
                let Some((s, name)) = state.order.pop_front() else {
                    break;
                };
                if let Some(store) = state.stores.get(&s).and_then(Weak::upgrade) {
                    evicted.push((store, name));
                }
            }
            evicted
        };
        for (store, name) in evicted {
            store.drop_sessions(&name);
        }
    }

    /// `server` of store `id` holds no sessions any more.
    fn forgot(&self, id: u64, server: &ServerName<'static>) {
        self.lock()
            .order
            .retain(|(s, name)| !(*s == id && name == server));
    }

    /// Store `id` is gone, and its sessions with it.
    fn closed(&self, id: u64) {
        let mut state = self.lock();
        state.stores.remove(&id);
        state.order.retain(|(s, _)| *s != id);
    }
}

/// One configuration's sessions, counted in its agent's [`Ledger`].
pub struct Store {
    id: u64,
    /// The `size` it was made with (see [`Ledger::store`]).
    size: usize,
    cache: ClientSessionMemoryCache,
    ledger: Arc<Ledger>,
}

impl fmt::Debug for Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Store").field("id", &self.id).finish()
    }
}

impl Store {
    /// How many TLS 1.3 tickets it was made to hold (8 per server), which rustls makes room for
    /// at once.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Drops the sessions cached for `server`, and its place in the ledger.
    pub fn forget(&self, server: &ServerName<'static>) {
        self.drop_sessions(server);
        self.ledger.forgot(self.id, server);
    }

    fn drop_sessions(&self, server: &ServerName<'static>) {
        self.cache.remove_tls12_session(server);
        // TLS 1.3 tickets are single-use: take them all (rustls keeps 8 per server).
        for _ in 0..64 {
            if self.cache.take_tls13_ticket(server).is_none() {
                break;
            }
        }
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        self.ledger.closed(self.id);
    }
}

impl ClientSessionStore for Store {
    fn set_kx_hint(&self, server_name: ServerName<'static>, group: NamedGroup) {
        self.cache.set_kx_hint(server_name, group);
    }

    fn kx_hint(&self, server_name: &ServerName<'_>) -> Option<NamedGroup> {
        self.cache.kx_hint(server_name)
    }

    fn set_tls12_session(&self, server_name: ServerName<'static>, value: Tls12ClientSessionValue) {
        self.cache.set_tls12_session(server_name.clone(), value);
        self.ledger.cached(self.id, &server_name);
    }

    fn tls12_session(&self, server_name: &ServerName<'_>) -> Option<Tls12ClientSessionValue> {
        self.cache.tls12_session(server_name)
    }

    fn remove_tls12_session(&self, server_name: &ServerName<'static>) {
        self.cache.remove_tls12_session(server_name);
    }

    fn insert_tls13_ticket(
        &self,
        server_name: ServerName<'static>,
        value: Tls13ClientSessionValue,
    ) {
        self.cache.insert_tls13_ticket(server_name.clone(), value);
        self.ledger.cached(self.id, &server_name);
    }

    fn take_tls13_ticket(
        &self,
        server_name: &ServerName<'static>,
    ) -> Option<Tls13ClientSessionValue> {
        self.cache.take_tls13_ticket(server_name)
    }
}
