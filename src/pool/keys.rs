//! The pool's key table: a key for each `getName()` string, the slots of swept keys reused by
//! new ones, and the per-key counts the agent's views show.

use std::collections::VecDeque;
use std::sync::Arc;

use super::{Key, KeyId, Pool};

/// One key's counts, for the `sockets`, `freeSockets` and `requests` views.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeySnapshot {
    pub key: KeyId,
    pub name: String,
    pub busy: usize,
    pub idle: usize,
    pub waiting: usize,
}

impl<C> Pool<C> {
    /// The key for a `getName()` string, created on first use.
    pub fn key(&mut self, name: &str) -> KeyId {
        if let Some(&id) = self.by_name.get(name) {
            return id;
        }
        let name: Arc<str> = Arc::from(name);
        self.ticks += 1;
        let key = Key {
            name: name.clone(),
            idle: VecDeque::new(),
            busy: 0,
            waiters: VecDeque::new(),
            used: self.ticks,
            vacant: false,
        };
        let id = match self.vacant.pop() {
            Some(id) => {
                self.keys[id.0 as usize] = key;
                id
            }
            None => {
                self.keys.push(key);
                KeyId(self.keys.len() as u32 - 1)
            }
        };
        self.by_name.insert(name, id);
        id
    }

    /// Keys in use (swept ones left out).
    pub fn key_count(&self) -> usize {
        self.keys.len() - self.vacant.len()
    }

    /// Forgets empty keys (nothing connected, idle or waiting) but the `keep` most recently
    /// used, and any that `referenced` says something still names; returns them. A process
    /// that reaches many origins over its life would otherwise keep a key, its name and its
    /// configuration for each (Node's agent deletes a name's lists once they are empty). The
    /// caller forgets every id returned: each goes to the next new key.
    pub fn sweep(&mut self, keep: usize, referenced: impl Fn(KeyId) -> bool) -> Vec<KeyId> {
        let mut empty: Vec<(u64, KeyId)> = self
            .keys
            .iter()
            .enumerate()
            .filter(|(_, k)| !k.vacant && k.is_empty())
            .map(|(i, k)| (k.used, KeyId(i as u32)))
            .filter(|&(_, id)| !referenced(id))
            .collect();
        // The most recently used first: those are kept.
        empty.sort_unstable_by_key(|&(used, _)| std::cmp::Reverse(used));
        let swept: Vec<KeyId> = empty.into_iter().skip(keep).map(|(_, id)| id).collect();
        for &id in &swept {
            let k = &mut self.keys[id.0 as usize];
            self.by_name.remove(&k.name);
            k.name = Arc::from("");
            k.idle = VecDeque::new();
            k.waiters = VecDeque::new();
            k.vacant = true;
            self.vacant.push(id);
        }
        swept
    }

    pub fn key_name(&self, key: KeyId) -> &str {
        &self.keys[key.0 as usize].name
    }

    /// Counts per key, keys with nothing in them left out, in key creation order.
    pub fn snapshot(&self) -> Vec<KeySnapshot> {
        self.keys
            .iter()
            .enumerate()
            .filter(|(_, k)| !k.is_empty())
            .map(|(i, k)| KeySnapshot {
                key: KeyId(i as u32),
                name: k.name.to_string(),
                busy: k.busy,
                idle: k.idle.len(),
                waiting: k.waiters.len(),
            })
            .collect()
    }
}
