//! When idle connections expire, in constant time per operation.
//!
//! Almost every idle connection gets one of a few timeouts (`freeSocketTimeout`, a server's
//! keep-alive hint), and connections are released in time order: per timeout, deadlines arrive
//! already sorted. So each timeout value is a FIFO list, linked through a slab: adding at the
//! tail, removing anywhere (a checkout) and finding the earliest deadline (the heads) cost the
//! same with ten idle connections as with a hundred thousand. The rare deadline that fits no
//! list (a `socketActiveTTL` remainder, a ninth distinct timeout, a clock that went backwards)
//! goes to an ordered set instead.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use super::KeyId;

const NIL: u32 = u32::MAX;
/// Distinct timeouts kept as lists; more go to the ordered set.
const MAX_CLASSES: usize = 8;

/// Where an entry lives, for its removal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Handle {
    Listed(u32),
    Sorted(Instant, u64, KeyId),
}

#[derive(Clone, Copy)]
struct Node {
    prev: u32,
    next: u32,
    class: u32,
    deadline: Instant,
    seq: u64,
    key: KeyId,
}

struct Class {
    timeout: Duration,
    head: u32,
    tail: u32,
}

#[derive(Default)]
pub struct Expiry {
    nodes: Vec<Node>,
    free: Vec<u32>,
    classes: Vec<Class>,
    sorted: BTreeSet<(Instant, u64, KeyId)>,
    len: usize,
}

impl Expiry {
    pub fn len(&self) -> usize {
        self.len
    }

    /// Adds an entry that expires at `now + timeout`.
    pub fn insert(
        &mut self,
        now: Instant,
        timeout: Duration,
        seq: u64,
        key: KeyId,
    ) -> (Instant, Handle) {
        let deadline = now + timeout;
        self.len += 1;
        let class = match self.classes.iter().position(|c| c.timeout == timeout) {
            Some(i) => Some(i),
            None if self.classes.len() < MAX_CLASSES => {
                self.classes.push(Class {
                    timeout,
                    head: NIL,
                    tail: NIL,
                });
                Some(self.classes.len() - 1)
            }
            None => None,
        };
        // A list only takes deadlines in order.
        let class = class.filter(|&i| {
            let tail = self.classes[i].tail;
            tail == NIL || self.nodes[tail as usize].deadline <= deadline
        });
        let Some(class) = class else {
            self.sorted.insert((deadline, seq, key));
            return (deadline, Handle::Sorted(deadline, seq, key));
        };
        let node = Node {
            prev: self.classes[class].tail,
            next: NIL,
            class: class as u32,
            deadline,
            seq,
            key,
        };
        let id = match self.free.pop() {
            Some(id) => {
                self.nodes[id as usize] = node;
                id
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        };
        let c = &mut self.classes[class];
        if c.tail == NIL {
            c.head = id;
        } else {
            self.nodes[c.tail as usize].next = id;
        }
        c.tail = id;
        (deadline, Handle::Listed(id))
    }

    pub fn remove(&mut self, handle: Handle) {
        self.len -= 1;
        match handle {
            Handle::Sorted(deadline, seq, key) => {
                self.sorted.remove(&(deadline, seq, key));
            }
            Handle::Listed(id) => {
                let Node {
                    prev, next, class, ..
                } = self.nodes[id as usize];
                let c = &mut self.classes[class as usize];
                if prev == NIL {
                    c.head = next;
                } else {
                    self.nodes[prev as usize].next = next;
                }
                if next == NIL {
                    c.tail = prev;
                } else {
                    self.nodes[next as usize].prev = prev;
                }
                self.free.push(id);
            }
        }
    }

    /// The earliest entry: its deadline, seq, key and handle.
    pub fn first(&self) -> Option<(Instant, u64, KeyId, Handle)> {
        let listed = self
            .classes
            .iter()
            .filter(|c| c.head != NIL)
            .map(|c| {
                let n = &self.nodes[c.head as usize];
                (n.deadline, n.seq, n.key, Handle::Listed(c.head))
            })
            .min_by_key(|e| (e.0, e.1));
        let sorted = self
            .sorted
            .first()
            .map(|&(d, s, k)| (d, s, k, Handle::Sorted(d, s, k)));
        match (listed, sorted) {
            (Some(a), Some(b)) => Some(if (b.0, b.1) < (a.0, a.1) { b } else { a }),
            (a, b) => a.or(b),
        }
    }

    /// The earliest entry whose key is not `key` (to make room for another origin).
    pub fn first_not_of(&self, key: KeyId) -> Option<(u64, KeyId, Handle)> {
        let mut best: Option<(Instant, u64, KeyId, Handle)> = None;
        let mut consider = |e: (Instant, u64, KeyId, Handle)| {
            if best.is_none_or(|b| (e.0, e.1) < (b.0, b.1)) {
                best = Some(e);
            }
        };
        for c in &self.classes {
            let mut id = c.head;
            while id != NIL {
                let n = &self.nodes[id as usize];
                if n.key != key {
                    consider((n.deadline, n.seq, n.key, Handle::Listed(id)));
                    break;
                }
                id = n.next;
            }
        }
        if let Some(&(d, s, k)) = self.sorted.iter().find(|(_, _, k)| *k != key) {
            consider((d, s, k, Handle::Sorted(d, s, k)));
        }
        best.map(|(_, seq, key, handle)| (seq, key, handle))
    }

    pub fn clear(&mut self) {
        *self = Expiry::default();
    }
}

/// One timer for the earliest of several deadlines (a pool's idle connections, its HTTP/2
/// sessions): when to set it, and when it is set early enough already.
#[derive(Debug, Default)]
pub struct Alarm {
    armed: Option<Instant>,
}

impl Alarm {
    /// The timer is to fire for the earliest of `deadlines`, unless it is set for that time or
    /// sooner already: the milliseconds to set it for from `now`, rounded up (firing a
    /// millisecond early would find nothing expired, and set it again). None: leave it.
    pub fn set_for(
        &mut self,
        deadlines: impl IntoIterator<Item = Option<Instant>>,
        now: Instant,
    ) -> Option<u64> {
        let next = deadlines.into_iter().flatten().min()?;
        if self.armed.is_some_and(|armed| armed <= next) {
            return None;
        }
        self.armed = Some(next);
        let wait = next.saturating_duration_since(now);
        Some(wait.as_millis() as u64 + u64::from(wait.subsec_nanos() % 1_000_000 != 0))
    }

    /// The timer fired: nothing is set any more.
    pub fn fired(&mut self) {
        self.armed = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_earliest_deadline_comes_first_across_lists_and_the_set() {
        let mut e = Expiry::default();
        let t0 = Instant::now();
        let k = KeyId(0);
        let (_, a) = e.insert(t0, Duration::from_secs(4), 1, k);
        let (_, b) = e.insert(t0, Duration::from_secs(1), 2, k);
        let (_, c) = e.insert(t0 + Duration::from_millis(1), Duration::from_secs(4), 3, k);
        // Out of order for its list: goes to the set.
        let (_, d) = e.insert(t0, Duration::from_millis(3500), 4, k);
        assert_eq!(e.len(), 4);
        assert_eq!(e.first().map(|f| f.1), Some(2));
        e.remove(b);
        assert_eq!(e.first().map(|f| f.1), Some(4));
        e.remove(d);
        assert_eq!(e.first().map(|f| f.1), Some(1));
        e.remove(a);
        assert_eq!(e.first().map(|f| f.1), Some(3));
        e.remove(c);
        assert_eq!(e.first(), None);
        assert_eq!(e.len(), 0);
    }

    #[test]
    fn a_ninth_timeout_and_a_backwards_clock_use_the_set() {
        let mut e = Expiry::default();
        let t0 = Instant::now() + Duration::from_secs(10);
        for i in 0..9u64 {
            let (_, h) = e.insert(t0, Duration::from_millis(100 + i), i, KeyId(0));
            assert_eq!(matches!(h, Handle::Sorted(..)), i == 8);
        }
        let (_, h) = e.insert(
            t0 - Duration::from_secs(5),
            Duration::from_millis(100),
            99,
            KeyId(0),
        );
        assert!(matches!(h, Handle::Sorted(..)));
        assert_eq!(e.first().map(|f| f.1), Some(99));
    }

    #[test]
    fn another_keys_earliest_entry_is_found() {
        let mut e = Expiry::default();
        let t0 = Instant::now();
        e.insert(t0, Duration::from_secs(1), 1, KeyId(0));
        e.insert(t0, Duration::from_secs(1), 2, KeyId(1));
        e.insert(t0, Duration::from_secs(2), 3, KeyId(2));
        assert_eq!(e.first_not_of(KeyId(0)).map(|f| f.0), Some(2));
        assert_eq!(e.first_not_of(KeyId(1)).map(|f| f.0), Some(1));
    }

    #[test]
    fn an_alarm_is_set_for_the_earliest_deadline_rounded_up_and_only_when_sooner() {
        let now = Instant::now();
        let mut alarm = Alarm::default();
        assert_eq!(alarm.set_for([None, None], now), None);
        let soon = now + Duration::from_micros(2_500);
        let later = now + Duration::from_secs(3);
        // The earliest of them, rounded up to the next millisecond.
        assert_eq!(alarm.set_for([Some(later), Some(soon)], now), Some(3));
        // Set for that or sooner already: left as it is.
        assert_eq!(alarm.set_for([Some(later)], now), None);
        assert_eq!(alarm.set_for([Some(soon)], now), None);
        // Something sooner: set again; an exact millisecond is not rounded.
        assert_eq!(
            alarm.set_for([Some(now + Duration::from_millis(1))], now),
            Some(1)
        );
        // A deadline passed already: at once.
        assert_eq!(
            alarm.set_for([Some(now)], now + Duration::from_secs(1)),
            Some(0)
        );
        // Fired: the next deadline sets it again, however late.
        alarm.fired();
        assert_eq!(alarm.set_for([Some(later)], now), Some(3000));
    }
}
