use super::*;

fn limits(max_sockets: usize, max_free: usize, max_total: usize, scheduling: Scheduling) -> Limits {
    Limits {
        max_sockets,
        max_free_sockets: max_free,
        max_total_sockets: max_total,
        scheduling,
    }
}

const KEEP: Option<Duration> = Some(Duration::from_secs(4));

fn checkout(pool: &mut Pool<u32>, key: KeyId) -> Checkout<u32> {
    let mut discard = Vec::new();
    let out = pool.checkout(key, Waiter::DropIn, |_| Fit::Take, &mut discard);
    assert!(discard.is_empty(), "nothing should have been discarded");
    out
}

#[test]
fn reuses_an_idle_connection_and_creates_under_the_limit() {
    let mut pool = Pool::new(Limits::default());
    let key = pool.key("127.0.0.1:80:");
    let now = Instant::now();
    assert_eq!(checkout(&mut pool, key), Checkout::Connect);
    pool.opening(key);
    assert_eq!(pool.release(key, 1, Path::DropIn, KEEP, now), Release::Idle);
    assert_eq!(pool.idle_total(), 1);
    assert_eq!(checkout(&mut pool, key), Checkout::Reuse(1));
    assert_eq!(pool.idle_total(), 0);
    assert_eq!(pool.total(), 1);
    assert_eq!(pool.stats.create_socket_count, 1);
}

#[test]
fn same_name_gives_same_key_and_names_stay_apart() {
    let mut pool: Pool<u32> = Pool::new(Limits::default());
    let a = pool.key("a:80:");
    let b = pool.key("b:80:");
    assert_ne!(a, b);
    assert_eq!(pool.key("a:80:"), a);
    assert_eq!(pool.key_name(b), "b:80:");
}

#[test]
fn a_sweep_forgets_empty_keys_but_the_most_recently_used() {
    let mut pool = Pool::new(Limits::default());
    let now = Instant::now();
    let names: Vec<String> = (0..6).map(|i| format!("h{i}:80:")).collect();
    let keys: Vec<KeyId> = names.iter().map(|n| pool.key(n)).collect();
    // h0 holds an idle connection, h1 a busy one, h2 a waiter (under a limit of one).
    assert_eq!(checkout(&mut pool, keys[0]), Checkout::Connect);
    assert_eq!(
        pool.release(keys[0], 100, Path::DropIn, KEEP, now),
        Release::Idle
    );
    assert_eq!(checkout(&mut pool, keys[1]), Checkout::Connect);
    pool.set_limits(limits(1, 256, usize::MAX, Scheduling::Lifo));
    assert_eq!(checkout(&mut pool, keys[2]), Checkout::Connect);
    let Checkout::Queued(waiter) = checkout(&mut pool, keys[2]) else {
        panic!("expected a waiter");
    };
    // h3, h4 and h5 are empty; h5 was used last, and h4 is still named by something.
    checkout(&mut pool, keys[5]);
    pool.closed(keys[5]);
    let swept = pool.sweep(1, |k| k == keys[4]);
    assert_eq!(swept, vec![keys[3]]);
    assert_eq!(pool.key_count(), 5);
    // The busy one and the waiter's go on as before.
    assert_eq!(
        pool.release(keys[2], 7, Path::DropIn, KEEP, now),
        Release::Handoff(waiter, Waiter::DropIn, 7)
    );
    assert_eq!(checkout(&mut pool, keys[0]), Checkout::Reuse(100));
    // Its name makes a new key in the swept one's slot; the other names keep theirs.
    let again = pool.key(&names[3]);
    assert_eq!(again, keys[3]);
    assert_eq!(pool.key_name(again), names[3]);
    for (name, key) in names.iter().zip(&keys) {
        assert_eq!(pool.key(name), *key);
    }
    let fresh = pool.key("new:80:");
    assert_eq!(fresh, KeyId(6));
    assert_eq!(pool.key_count(), 7);
}

#[test]
fn a_swept_slot_serves_its_new_key_alone() {
    let mut pool = Pool::new(limits(1, 256, usize::MAX, Scheduling::Lifo));
    let now = Instant::now();
    let old = pool.key("old:80:");
    assert_eq!(checkout(&mut pool, old), Checkout::Connect);
    assert_eq!(pool.release(old, 1, Path::DropIn, KEEP, now), Release::Idle);
    let mut out = Vec::new();
    pool.expire(now + Duration::from_secs(5), &mut out);
    assert_eq!(out, vec![1]);
    assert_eq!(pool.sweep(0, |_| false), vec![old]);
    assert!(pool.snapshot().is_empty());
    let new = pool.key("new:80:");
    assert_eq!(new, old);
    assert_eq!(checkout(&mut pool, new), Checkout::Connect);
    assert!(matches!(checkout(&mut pool, new), Checkout::Queued(_)));
    let snap = pool.snapshot();
    assert_eq!(snap.len(), 1);
    assert_eq!(
        (snap[0].name.as_str(), snap[0].busy, snap[0].waiting),
        ("new:80:", 1, 1)
    );
    // The slot is the new key's while it is in use: the old name, back, gets another.
    assert_eq!(pool.sweep(0, |_| false), vec![]);
    assert_ne!(pool.key("old:80:"), new);
}

#[test]
fn max_sockets_queues_and_hands_off_in_arrival_order() {
    let mut pool = Pool::new(limits(2, 256, usize::MAX, Scheduling::Lifo));
    let key = pool.key("k");
    let now = Instant::now();
    assert_eq!(checkout(&mut pool, key), Checkout::Connect);
    assert_eq!(checkout(&mut pool, key), Checkout::Connect);
    let w1 = checkout(&mut pool, key);
    let w2 = checkout(&mut pool, key);
    let (Checkout::Queued(w1), Checkout::Queued(w2)) = (w1, w2) else {
        panic!("expected two waiters");
    };
    assert!(w1 < w2);
    assert_eq!(
        pool.release(key, 10, Path::DropIn, KEEP, now),
        Release::Handoff(w1, Waiter::DropIn, 10)
    );
    assert_eq!(
        pool.release(key, 11, Path::DropIn, KEEP, now),
        Release::Handoff(w2, Waiter::DropIn, 11)
    );
    // Nobody waits any more: the next release goes idle.
    assert_eq!(
        pool.release(key, 10, Path::DropIn, KEEP, now),
        Release::Idle
    );
    assert_eq!(pool.total(), 2);
}

#[test]
fn a_closed_connection_lets_the_first_waiter_connect() {
    let mut pool: Pool<u32> = Pool::new(limits(1, 256, usize::MAX, Scheduling::Lifo));
    let key = pool.key("k");
    assert_eq!(checkout(&mut pool, key), Checkout::Connect);
    let Checkout::Queued(w) = checkout(&mut pool, key) else {
        panic!("expected a waiter")
    };
    assert_eq!(
        pool.closed(key),
        Some(Grant {
            key,
            waiter: w,
            who: Waiter::DropIn
        })
    );
    assert_eq!(pool.total(), 1, "the grant holds the freed slot");
    assert_eq!(pool.closed(key), None);
    assert_eq!(pool.total(), 0);
    assert_eq!(pool.stats.close_socket_count, 2);
}

#[test]
fn a_failed_connect_frees_its_slot_for_a_waiter() {
    let mut pool: Pool<u32> = Pool::new(limits(1, 256, usize::MAX, Scheduling::Lifo));
    let key = pool.key("k");
    assert_eq!(checkout(&mut pool, key), Checkout::Connect);
    let Checkout::Queued(w) = checkout(&mut pool, key) else {
        panic!("expected a waiter")
    };
    pool.opening(key);
    assert_eq!(
        pool.connect_failed(key, false),
        Some(Grant {
            key,
            waiter: w,
            who: Waiter::DropIn
        })
    );
    // As agentkeepalive counts its socket: created, then an error and a close.
    assert_eq!(pool.stats.create_socket_count, 1);
    assert_eq!(pool.stats.error_socket_count, 1);
    assert_eq!(pool.stats.close_socket_count, 1);
    assert_eq!(pool.stats.create_socket_error_count, 0);
    // One that timed out counts a timeout, and the error it is destroyed with.
    pool.opening(key);
    pool.connect_failed(key, true);
    assert_eq!(pool.stats.timeout_socket_count, 1);
    assert_eq!(pool.stats.error_socket_count, 2);
    assert_eq!(pool.stats.close_socket_count, 2);
}

#[test]
fn a_release_without_keep_alive_still_serves_a_waiter_then_closes() {
    let mut pool = Pool::new(limits(1, 256, usize::MAX, Scheduling::Lifo));
    let key = pool.key("k");
    let now = Instant::now();
    assert_eq!(checkout(&mut pool, key), Checkout::Connect);
    let Checkout::Queued(w) = checkout(&mut pool, key) else {
        panic!("expected a waiter")
    };
    // As Node's agent: a queued request takes the connection even when it may not idle.
    assert_eq!(
        pool.release(key, 7, Path::DropIn, None, now),
        Release::Handoff(w, Waiter::DropIn, 7)
    );
    assert_eq!(
        pool.release(key, 7, Path::DropIn, None, now),
        Release::Close(7, None)
    );
    assert_eq!(pool.total(), 0);
}

#[test]
fn lifo_takes_the_most_recent_and_fifo_the_oldest() {
    for (scheduling, expect) in [(Scheduling::Lifo, [3, 2, 1]), (Scheduling::Fifo, [1, 2, 3])] {
        let mut pool = Pool::new(limits(10, 256, usize::MAX, scheduling));
        let key = pool.key("k");
        let now = Instant::now();
        for _ in 0..3 {
            assert_eq!(checkout(&mut pool, key), Checkout::Connect);
        }
        for conn in 1..=3 {
            assert_eq!(
                pool.release(key, conn, Path::DropIn, KEEP, now),
                Release::Idle
            );
        }
        let got: Vec<u32> = (0..3)
            .map(|_| match checkout(&mut pool, key) {
                Checkout::Reuse(c) => c,
                other => panic!("expected reuse, got {other:?}"),
            })
            .collect();
        assert_eq!(got, expect, "{scheduling:?}");
    }
}

#[test]
fn max_free_sockets_closes_the_surplus() {
    let mut pool = Pool::new(limits(10, 1, usize::MAX, Scheduling::Lifo));
    let key = pool.key("k");
    let now = Instant::now();
    assert_eq!(checkout(&mut pool, key), Checkout::Connect);
    assert_eq!(checkout(&mut pool, key), Checkout::Connect);
    assert_eq!(pool.release(key, 1, Path::DropIn, KEEP, now), Release::Idle);
    assert_eq!(
        pool.release(key, 2, Path::DropIn, KEEP, now),
        Release::Close(2, None)
    );
    assert_eq!(pool.total(), 1);
}

#[test]
fn max_total_sockets_holds_across_keys_and_serves_the_oldest_waiter() {
    let mut pool: Pool<u32> = Pool::new(limits(10, 256, 2, Scheduling::Lifo));
    let a = pool.key("a");
    let b = pool.key("b");
    let c = pool.key("c");
    assert_eq!(checkout(&mut pool, a), Checkout::Connect);
    assert_eq!(checkout(&mut pool, a), Checkout::Connect);
    let Checkout::Queued(wb) = checkout(&mut pool, b) else {
        panic!("b must wait")
    };
    let Checkout::Queued(wc) = checkout(&mut pool, c) else {
        panic!("c must wait")
    };
    assert_eq!(
        pool.closed(a),
        Some(Grant {
            key: b,
            waiter: wb,
            who: Waiter::DropIn
        })
    );
    assert_eq!(
        pool.closed(a),
        Some(Grant {
            key: c,
            waiter: wc,
            who: Waiter::DropIn
        })
    );
    assert_eq!(pool.total(), 2);
}

#[test]
fn a_release_under_max_total_closes_for_another_keys_waiter() {
    let mut pool = Pool::new(limits(10, 256, 1, Scheduling::Lifo));
    let a = pool.key("a");
    let b = pool.key("b");
    assert_eq!(checkout(&mut pool, a), Checkout::Connect);
    let Checkout::Queued(wb) = checkout(&mut pool, b) else {
        panic!("b must wait")
    };
    assert_eq!(
        pool.release(a, 1, Path::DropIn, KEEP, Instant::now()),
        Release::Close(
            1,
            Some(Grant {
                key: b,
                waiter: wb,
                who: Waiter::DropIn
            })
        )
    );
}

#[test]
fn idle_connections_of_other_keys_make_room_under_max_total() {
    let mut pool = Pool::new(limits(10, 256, 1, Scheduling::Lifo));
    let a = pool.key("a");
    let b = pool.key("b");
    assert_eq!(checkout(&mut pool, a), Checkout::Connect);
    assert_eq!(
        pool.release(a, 1, Path::DropIn, KEEP, Instant::now()),
        Release::Idle
    );
    let mut discard = Vec::new();
    assert_eq!(
        pool.checkout(b, Waiter::DropIn, |_| Fit::Take, &mut discard),
        Checkout::Connect
    );
    assert_eq!(discard, vec![(1, Eviction::Room)]);
    assert_eq!(pool.total(), 1);
    assert_eq!(pool.idle_total(), 0);
}

#[test]
fn a_stale_idle_connection_is_discarded_at_checkout() {
    let mut pool = Pool::new(Limits::default());
    let key = pool.key("k");
    let now = Instant::now();
    assert_eq!(checkout(&mut pool, key), Checkout::Connect);
    assert_eq!(checkout(&mut pool, key), Checkout::Connect);
    assert_eq!(pool.release(key, 1, Path::DropIn, KEEP, now), Release::Idle);
    assert_eq!(pool.release(key, 2, Path::DropIn, KEEP, now), Release::Idle);
    let mut discard = Vec::new();
    // 2 (the most recent) is dead: the checkout skips it and takes 1.
    assert_eq!(
        pool.checkout(
            key,
            Waiter::DropIn,
            |&c| if c == 2 { Fit::Dead } else { Fit::Take },
            &mut discard
        ),
        Checkout::Reuse(1)
    );
    assert_eq!(discard, vec![(2, Eviction::Dead)]);
    assert_eq!(pool.total(), 1);
    assert_eq!(pool.stats.close_socket_count, 1);
}

#[test]
fn idle_connections_expire_at_their_deadline_only() {
    let mut pool = Pool::new(Limits::default());
    let key = pool.key("k");
    let t0 = Instant::now();
    for _ in 0..3 {
        assert_eq!(checkout(&mut pool, key), Checkout::Connect);
    }
    assert_eq!(
        pool.release(key, 1, Path::DropIn, Some(Duration::from_millis(100)), t0),
        Release::Idle
    );
    assert_eq!(
        pool.release(key, 2, Path::DropIn, Some(Duration::from_millis(300)), t0),
        Release::Idle
    );
    assert_eq!(
        pool.release(key, 3, Path::DropIn, Some(Duration::MAX), t0),
        Release::Idle
    );
    assert_eq!(pool.next_deadline(), Some(t0 + Duration::from_millis(100)));

    let mut out = Vec::new();
    pool.expire(t0 + Duration::from_millis(99), &mut out);
    assert!(out.is_empty());
    pool.expire(t0 + Duration::from_millis(100), &mut out);
    assert_eq!(out, vec![1]);
    pool.expire(t0 + Duration::from_secs(3600), &mut out);
    assert_eq!(out, vec![1, 2], "Duration::MAX never expires");
    assert_eq!(pool.stats.timeout_socket_count, 2);
    assert_eq!(pool.idle_total(), 1);
    assert_eq!(checkout(&mut pool, key), Checkout::Reuse(3));
}

#[test]
fn expiry_frees_slots_for_waiters_of_other_keys() {
    let mut pool = Pool::new(limits(10, 256, 1, Scheduling::Lifo));
    let a = pool.key("a");
    let b = pool.key("b");
    let t0 = Instant::now();
    assert_eq!(checkout(&mut pool, a), Checkout::Connect);
    let Checkout::Queued(wb) = checkout(&mut pool, b) else {
        panic!("b must wait")
    };
    // With a waiter blocked by maxTotalSockets, the release closes rather than idles.
    assert!(
        matches!(pool.release(a, 1, Path::DropIn, KEEP, t0), Release::Close(1, Some(g)) if g.waiter == wb)
    );
    let mut out = Vec::new();
    assert!(pool
        .expire(t0 + Duration::from_secs(60), &mut out)
        .is_empty());
}

#[test]
fn an_evicted_idle_connection_leaves_the_pool() {
    let mut pool = Pool::new(Limits::default());
    let key = pool.key("k");
    let now = Instant::now();
    assert_eq!(checkout(&mut pool, key), Checkout::Connect);
    assert_eq!(checkout(&mut pool, key), Checkout::Connect);
    assert_eq!(pool.release(key, 1, Path::DropIn, KEEP, now), Release::Idle);
    assert_eq!(pool.release(key, 2, Path::DropIn, KEEP, now), Release::Idle);
    assert_eq!(pool.evict(key, |&c| c == 1), Some((1, None)));
    assert_eq!(pool.evict(key, |&c| c == 1), None);
    assert_eq!(pool.idle_total(), 1);
    assert_eq!(pool.next_deadline(), Some(now + Duration::from_secs(4)));
    assert_eq!(checkout(&mut pool, key), Checkout::Reuse(2));
}

#[test]
fn a_cancelled_waiter_is_skipped() {
    let mut pool: Pool<u32> = Pool::new(limits(1, 256, usize::MAX, Scheduling::Lifo));
    let key = pool.key("k");
    assert_eq!(checkout(&mut pool, key), Checkout::Connect);
    let Checkout::Queued(w1) = checkout(&mut pool, key) else {
        panic!()
    };
    let Checkout::Queued(w2) = checkout(&mut pool, key) else {
        panic!()
    };
    assert!(pool.cancel(w1));
    assert!(!pool.cancel(w1));
    assert_eq!(
        pool.closed(key),
        Some(Grant {
            key,
            waiter: w2,
            who: Waiter::DropIn
        })
    );
}

#[test]
fn raising_a_limit_lets_waiters_connect() {
    let mut pool: Pool<u32> = Pool::new(limits(1, 256, usize::MAX, Scheduling::Lifo));
    let key = pool.key("k");
    assert_eq!(checkout(&mut pool, key), Checkout::Connect);
    let Checkout::Queued(w1) = checkout(&mut pool, key) else {
        panic!()
    };
    let Checkout::Queued(w2) = checkout(&mut pool, key) else {
        panic!()
    };
    let grants = pool.set_limits(limits(3, 256, usize::MAX, Scheduling::Lifo));
    assert_eq!(
        grants,
        vec![
            Grant {
                key,
                waiter: w1,
                who: Waiter::DropIn
            },
            Grant {
                key,
                waiter: w2,
                who: Waiter::DropIn
            }
        ]
    );
    assert_eq!(pool.total(), 3);
}

#[test]
fn drain_returns_idle_connections_and_waiters() {
    let mut pool = Pool::new(limits(1, 256, usize::MAX, Scheduling::Lifo));
    let a = pool.key("a");
    let b = pool.key("b");
    let now = Instant::now();
    assert_eq!(checkout(&mut pool, a), Checkout::Connect);
    assert_eq!(pool.release(a, 1, Path::DropIn, KEEP, now), Release::Idle);
    assert_eq!(checkout(&mut pool, b), Checkout::Connect);
    let Checkout::Queued(w) = checkout(&mut pool, b) else {
        panic!()
    };
    let (idle, waiters) = pool.drain();
    assert_eq!(idle, vec![1]);
    assert_eq!(waiters, vec![w]);
    assert_eq!(pool.total(), 1, "the busy connection of b is still counted");
    assert_eq!(pool.next_deadline(), None);
}

#[test]
fn snapshot_reports_each_key_with_something_in_it() {
    let mut pool = Pool::new(limits(1, 256, usize::MAX, Scheduling::Lifo));
    let a = pool.key("a");
    let b = pool.key("b");
    let _unused = pool.key("c");
    let now = Instant::now();
    assert_eq!(checkout(&mut pool, a), Checkout::Connect);
    assert_eq!(pool.release(a, 1, Path::DropIn, KEEP, now), Release::Idle);
    assert_eq!(checkout(&mut pool, b), Checkout::Connect);
    assert!(matches!(checkout(&mut pool, b), Checkout::Queued(_)));
    let snap = pool.snapshot();
    assert_eq!(snap.len(), 2);
    assert_eq!(
        (
            snap[0].name.as_str(),
            snap[0].busy,
            snap[0].idle,
            snap[0].waiting
        ),
        ("a", 0, 1, 0)
    );
    assert_eq!(
        (
            snap[1].name.as_str(),
            snap[1].busy,
            snap[1].idle,
            snap[1].waiting
        ),
        ("b", 1, 0, 1)
    );
}

/// Odd connection ids serve `agent.request()`, even ones `http.request`.
fn path_of(conn: u32) -> Path {
    match conn % 2 {
        1 => Path::Promise,
        _ => Path::DropIn,
    }
}

/// A new connection's id, for `who`'s path.
fn new_conn(next: &mut u32, who: Waiter) -> u32 {
    *next += 2;
    *next + u32::from(who.path() == Path::Promise)
}

/// Random operations, by waiters of both request paths, against the invariants in the module
/// header; a connection only ever serves its own path.
#[test]
fn limits_hold_under_any_interleaving() {
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut next = move |n: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % n
    };
    for round in 0..200 {
        let max_sockets = 1 + next(4) as usize;
        let max_total = 1 + next(6) as usize;
        let mut pool = Pool::new(limits(
            max_sockets,
            1 + next(3) as usize,
            max_total,
            Scheduling::Lifo,
        ));
        let keys: Vec<KeyId> = (0..3).map(|i| pool.key(&format!("k{i}"))).collect();
        let mut busy: Vec<(KeyId, u32)> = Vec::new();
        let mut waiting: Vec<(KeyId, WaiterId, Waiter)> = Vec::new();
        let mut next_conn = 0u32;
        let now = Instant::now();
        for _ in 0..300 {
            let key = keys[next(3) as usize];
            match next(4) {
                0 | 1 => {
                    let who = match next(3) {
                        0 => Waiter::Promise(next(1000) as u32),
                        _ => Waiter::DropIn,
                    };
                    let mut discard = Vec::new();
                    let fit = |&c: &u32| match path_of(c) == who.path() {
                        true => [Fit::Take, Fit::Take, Fit::Dead][next(3) as usize],
                        false => Fit::Other,
                    };
                    match pool.checkout(key, who, fit, &mut discard) {
                        Checkout::Reuse(c) => {
                            assert_eq!(path_of(c), who.path(), "reuse on the other path");
                            busy.push((key, c));
                        }
                        Checkout::Connect => busy.push((key, new_conn(&mut next_conn, who))),
                        Checkout::Queued(w) => waiting.push((key, w, who)),
                    }
                }
                2 if !busy.is_empty() => {
                    let (key, conn) = busy.swap_remove(next(busy.len() as u64) as usize);
                    let keep = if next(4) == 0 { None } else { KEEP };
                    match pool.release(key, conn, path_of(conn), keep, now) {
                        Release::Handoff(w, who, c) => {
                            let pos = waiting
                                .iter()
                                .position(|&(_, x, _)| x == w)
                                .expect("known waiter");
                            let (wkey, _, was) = waiting.remove(pos);
                            assert_eq!(wkey, key, "handoff stays within the key");
                            assert_eq!(who, was, "the waiter keeps who it is");
                            assert_eq!(path_of(c), who.path(), "handoff to the other path");
                            busy.push((key, c));
                        }
                        Release::Idle => {}
                        Release::Close(_, grant) => {
                            if let Some(g) = grant {
                                let pos = waiting
                                    .iter()
                                    .position(|&(_, x, _)| x == g.waiter)
                                    .expect("known waiter");
                                let (_, _, was) = waiting.remove(pos);
                                assert_eq!(g.who, was, "the waiter keeps who it is");
                                busy.push((g.key, new_conn(&mut next_conn, g.who)));
                            }
                        }
                    }
                }
                3 if !busy.is_empty() => {
                    let (key, _) = busy.swap_remove(next(busy.len() as u64) as usize);
                    if let Some(g) = pool.closed(key) {
                        let pos = waiting
                            .iter()
                            .position(|&(_, x, _)| x == g.waiter)
                            .expect("known waiter");
                        waiting.remove(pos);
                        busy.push((g.key, new_conn(&mut next_conn, g.who)));
                    }
                }
                _ => {}
            }
            assert!(
                pool.total() <= max_total,
                "round {round}: total over the limit"
            );
            for snap in pool.snapshot() {
                assert!(
                    snap.busy + snap.idle <= max_sockets,
                    "round {round}: key over maxSockets"
                );
                assert!(
                    snap.idle == 0 || snap.waiting == 0,
                    "round {round}: idle and waiting at once"
                );
            }
            assert_eq!(pool.total(), busy.len() + pool.idle_total());
        }
    }
}

#[test]
fn idle_connections_of_the_other_path_stay_unless_their_slot_is_needed() {
    // Odd ids belong to the other path.
    let fit = |c: &u32| if c % 2 == 1 { Fit::Other } else { Fit::Take };
    let mut pool = Pool::new(limits(2, 256, usize::MAX, Scheduling::Lifo));
    let key = pool.key("k");
    let now = Instant::now();
    assert_eq!(checkout(&mut pool, key), Checkout::Connect);
    assert_eq!(pool.release(key, 1, Path::DropIn, KEEP, now), Release::Idle);
    let mut discard = Vec::new();
    // Under maxSockets: a new connection, the other path's idle one stays.
    assert_eq!(
        pool.checkout(key, Waiter::DropIn, fit, &mut discard),
        Checkout::Connect
    );
    assert!(discard.is_empty());
    assert_eq!(pool.idle_total(), 1);
    // At maxSockets: the other path's idle connection gives its slot up.
    assert_eq!(
        pool.checkout(key, Waiter::DropIn, fit, &mut discard),
        Checkout::Connect
    );
    assert_eq!(discard, vec![(1, Eviction::Room)]);
    assert_eq!(pool.total(), 2);
    assert_eq!(pool.idle_total(), 0);
}

#[test]
fn a_connection_closed_before_it_opened_counts_as_closed_and_an_upgrade_uncounted() {
    let mut pool = Pool::new(limits(1, 1, usize::MAX, Scheduling::Lifo));
    let key = pool.key("a");
    assert_eq!(checkout(&mut pool, key), Checkout::Connect);
    pool.opening(key);
    let Checkout::Queued(waiting) = checkout(&mut pool, key) else {
        panic!("expected a place in the queue");
    };
    // Its request aborted while it opened: counted as created and as closed, as
    // agentkeepalive counts its socket; the waiter gets the slot.
    let grant = pool.closed(key).expect("the waiter gets the slot");
    assert_eq!(grant.waiter, waiting);
    assert_eq!(pool.stats.create_socket_count, 1);
    assert_eq!(pool.stats.close_socket_count, 1);
    // An upgrade takes its socket out of the counts: no close.
    pool.opening(key);
    assert_eq!(pool.detached(key), None);
    assert_eq!(pool.stats.create_socket_count, 2);
    assert_eq!(pool.stats.close_socket_count, 1);
    assert_eq!(pool.stats.create_socket_error_count, 0);
}

#[test]
fn a_release_hands_a_connection_to_its_own_path_and_only_its_slot_to_the_other() {
    let mut pool = Pool::new(limits(1, 256, usize::MAX, Scheduling::Lifo));
    let key = pool.key("k");
    let now = Instant::now();
    let mut discard = Vec::new();
    let promise = Waiter::Promise(7);
    assert_eq!(
        pool.checkout(key, promise, |_| Fit::Take, &mut discard),
        Checkout::Connect
    );
    // Waiting behind the one connection: an agent.request(), then an http.request.
    let Checkout::Queued(first) =
        pool.checkout(key, Waiter::Promise(8), |_| Fit::Take, &mut discard)
    else {
        panic!("queued");
    };
    let Checkout::Queued(second) = checkout(&mut pool, key) else {
        panic!("queued");
    };
    // The promise-path connection goes on to the agent.request() that waits.
    assert_eq!(
        pool.release(key, 1, Path::Promise, KEEP, now),
        Release::Handoff(first, Waiter::Promise(8), 1)
    );
    // Then the http.request cannot use it: it closes, and its slot, still counted, is the
    // waiter's to open its own connection in.
    let closed = pool.stats.close_socket_count;
    assert_eq!(
        pool.release(key, 1, Path::Promise, KEEP, now),
        Release::Close(
            1,
            Some(Grant {
                key,
                waiter: second,
                who: Waiter::DropIn
            })
        )
    );
    assert_eq!(pool.stats.close_socket_count, closed + 1);
    assert_eq!(pool.total(), 1);
    assert_eq!(pool.snapshot()[0].busy, 1);
    assert_eq!(pool.snapshot()[0].waiting, 0);
}

#[test]
fn a_freed_slot_tells_whose_it_is() {
    let mut pool = Pool::new(limits(1, 256, usize::MAX, Scheduling::Lifo));
    let key = pool.key("k");
    assert_eq!(checkout(&mut pool, key), Checkout::Connect);
    let mut discard = Vec::new();
    let Checkout::Queued(w) = pool.checkout(key, Waiter::Promise(3), |_| Fit::Take, &mut discard)
    else {
        panic!("queued");
    };
    assert_eq!(
        pool.closed(key),
        Some(Grant {
            key,
            waiter: w,
            who: Waiter::Promise(3)
        })
    );
}

#[test]
fn a_freed_slot_is_wanted_by_a_waiter_its_key_or_the_total_holds_back() {
    let mut pool: Pool<u32> = Pool::new(limits(1, 256, usize::MAX, Scheduling::Lifo));
    let a = pool.key("a:80:");
    let b = pool.key("b:80:");
    assert_eq!(checkout(&mut pool, a), Checkout::Connect);
    assert!(!pool.wants_slot_of(a), "nobody waits");
    assert!(matches!(checkout(&mut pool, a), Checkout::Queued(_)));
    assert_eq!(pool.waiting(), 1);
    assert!(pool.key_full(a) && !pool.key_full(b));
    assert!(pool.wants_slot_of(a), "the waiter of a takes a's slot");
    assert!(
        !pool.wants_slot_of(b),
        "a slot of b leaves a at its maxSockets"
    );

    // Under maxTotalSockets, a slot of any key serves a waiter of another.
    let mut pool: Pool<u32> = Pool::new(limits(5, 256, 1, Scheduling::Lifo));
    let a = pool.key("a:80:");
    let b = pool.key("b:80:");
    assert_eq!(checkout(&mut pool, a), Checkout::Connect);
    assert!(matches!(checkout(&mut pool, b), Checkout::Queued(_)));
    assert!(!pool.key_full(b));
    assert!(pool.wants_slot_of(a));
}
