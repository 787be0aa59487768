//! Micro-benchmark of the pool's hot path: take an idle connection (`checkout`) and give it
//! back (`release`), with few and with many origins and idle connections. Its cost must not
//! grow with either.
//!
//! Not part of the test suite: `npm run bench` runs it as
//! `cargo test --release --lib pool::scale_bench -- --ignored --nocapture`
//! and reads the `scale_bench ...` lines it prints.

use super::*;
use std::hint::black_box;

/// Operations (one checkout plus one release) per sample, and samples per configuration; the
/// median sample is reported.
const OPS: usize = 1_000_000;
const SAMPLES: usize = 5;
/// The clock is read once per this many operations, as a busy pool sees time move.
const CLOCK_EVERY: usize = 1024;
const KEEP: Option<Duration> = Some(Duration::from_secs(60));

/// A pool with `origins` keys of `idle` idle connections each, and its keys.
fn filled(origins: usize, idle: usize) -> (Pool<u64>, Vec<KeyId>) {
    let mut pool = Pool::new(Limits {
        max_sockets: idle,
        max_free_sockets: idle,
        max_total_sockets: usize::MAX,
        scheduling: Scheduling::Lifo,
    });
    let now = Instant::now();
    let mut discard = Vec::new();
    let mut keys = Vec::with_capacity(origins);
    let mut next_conn = 0u64;
    for o in 0..origins {
        let key = pool.key(&format!("origin-{o}.example:80:"));
        for _ in 0..idle {
            assert_eq!(
                pool.checkout(key, Waiter::DropIn, |_| Fit::Take, &mut discard),
                Checkout::Connect
            );
            pool.opening(key);
        }
        for _ in 0..idle {
            assert_eq!(
                pool.release(key, next_conn, Path::DropIn, KEEP, now),
                Release::Idle
            );
            next_conn += 1;
        }
        keys.push(key);
    }
    assert_eq!(pool.idle_total(), origins * idle);
    (pool, keys)
}

/// Nanoseconds per checkout + release, the keys visited in a scattered order.
fn measure(origins: usize, idle: usize) -> f64 {
    let (mut pool, keys) = filled(origins, idle);
    // A stride coprime with the key count visits every key, not in memory order.
    let stride = if origins > 1 { 7919 % origins } else { 0 };
    let stride = if stride == 0 { 1 } else { stride };
    let mut discard = Vec::new();
    let mut samples = Vec::with_capacity(SAMPLES);
    let mut at = 0usize;
    for _ in 0..=SAMPLES {
        let start = Instant::now();
        let mut now = start;
        for op in 0..OPS {
            if op % CLOCK_EVERY == 0 {
                now = Instant::now();
            }
            let key = keys[at];
            at = (at + stride) % keys.len();
            let Checkout::Reuse(conn) =
                pool.checkout(key, Waiter::DropIn, |_| Fit::Take, &mut discard)
            else {
                panic!("an idle connection was expected");
            };
            let released = pool.release(key, black_box(conn), Path::DropIn, KEEP, now);
            debug_assert_eq!(released, Release::Idle);
            black_box(released);
        }
        samples.push(start.elapsed().as_nanos() as f64 / OPS as f64);
    }
    assert!(discard.is_empty());
    assert_eq!(pool.idle_total(), origins * idle);
    // The first sample warms caches and the allocator; the median of the rest is reported.
    samples.remove(0);
    samples.sort_by(|a, b| a.total_cmp(b));
    samples[SAMPLES / 2]
}

#[test]
#[ignore = "a benchmark: run by `npm run bench`"]
fn checkout_and_release_cost_is_flat_in_origins_and_idle_connections() {
    for (origins, idle) in [(1, 10), (1000, 10), (1, 10_000)] {
        let ns = measure(origins, idle);
        println!(
            "scale_bench origins={origins} idle_per_origin={idle} idle_total={} ns_per_op={ns:.1}",
            origins * idle
        );
    }
}
