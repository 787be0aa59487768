//! A thread's table of one kind of thing it hands out by id (pools, connections, requests):
//! JavaScript names them by number alone, and each layer keeps its own table in a
//! thread-local of its module, so that nothing below it names its type. One JavaScript thread
//! has one env (see `env`), so a thread's table is its env's; the env's teardown empties them.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Maps keyed by the ids this thread hands out: sequential numbers of its own, so a
/// multiplicative hash spreads them and nothing adversarial reaches it.
type IdMap<V> = HashMap<u32, V, BuildHasherDefault<IdHasher>>;

#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_u32(&mut self, n: u32) {
        self.0 = u64::from(n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// Things of one kind by id; ids are never 0 (JavaScript's "none") and never two live at once.
pub struct Registry<T> {
    map: RefCell<IdMap<T>>,
    next: Cell<u32>,
}

impl<T: Clone> Registry<T> {
    pub const fn new() -> Registry<T> {
        Registry {
            map: RefCell::new(HashMap::with_hasher(BuildHasherDefault::new())),
            next: Cell::new(1),
        }
    }

    pub fn get(&self, id: u32) -> Option<T> {
        self.map.borrow().get(&id).cloned()
    }

    /// A fresh id: not 0, not in use. Room for it is made now, so that its `insert` does not
    /// grow the table.
    pub fn next_id(&self) -> u32 {
        let mut map = self.map.borrow_mut();
        loop {
            let id = self.next.get();
            self.next.set(id.wrapping_add(1).max(1));
            if !map.contains_key(&id) {
                map.reserve(1);
                return id;
            }
        }
    }

    pub fn insert(&self, id: u32, value: T) {
        self.map.borrow_mut().insert(id, value);
    }

    pub fn remove(&self, id: u32) -> Option<T> {
        self.map.borrow_mut().remove(&id)
    }

    /// Every one, in no order.
    pub fn values(&self) -> Vec<T> {
        self.map.borrow().values().cloned().collect()
    }

    /// Removes and returns those `f` picks.
    pub fn take_where(&self, f: impl Fn(&T) -> bool) -> Vec<T> {
        let mut map = self.map.borrow_mut();
        let ids: Vec<u32> = map
            .iter()
            .filter(|(_, v)| f(v))
            .map(|(id, _)| *id)
            .collect();
        ids.iter().filter_map(|id| map.remove(id)).collect()
    }
}
