//! Accuracy and memory table (issue 6, item 3).
//!
//! For error rates 1e-2 .. 1e-6, scaling (expansion 2, as BF.RESERVE creates) and non-scaling
//! filters of capacity C (default 1,000,000): fill with C distinct items, then count false
//! positives over Q never-added items, with Q ≥ 200/ε (at least 200 expected false positives;
//! 1000/ε where that stays under 3e8 queries). Prints a markdown table: bits per item, the classic
//! Bloom size 1.44·log2(1/ε) and the ratio, the measured rate with a 95% upper bound (Poisson).
//!
//! Run: `cargo run --release --example accuracy [-- CAPACITY]`   (~20 s on 2 cores)

use std::time::Instant;

use rustbloom_core::{BloomFilter, FilterParams, Growth, Unlimited};

/// Bits per item of RedisBloom's scaling filter at 1%: its first layer is sized for ε/2 with
/// bits = ln(1/(ε/2)) / ln²2 per item.
const REDISBLOOM_BITS_AT_1PCT: f64 = 11.03;
const MAX_QUERIES: u64 = 300_000_000;
const NON_MEMBER_BASE: u64 = 1 << 62;

fn key(i: u64) -> [u8; 8] {
    i.to_le_bytes()
}

/// Counts the false positives among `count` non-members, split over the available cores.
fn false_positives(filter: &BloomFilter, count: u64) -> u64 {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;
    let per = count.div_ceil(threads);
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let start = NON_MEMBER_BASE + t * per;
                let end = (start + per).min(NON_MEMBER_BASE + count);
                scope.spawn(move || (start..end).filter(|&i| filter.contains(&key(i))).count())
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap() as u64).sum()
    })
}

/// A one-sided 95% upper confidence bound on a Poisson mean given `k` observed events
/// (Wilson–Hilferty approximation of the chi-square quantile; exact enough for k ≥ 1).
fn poisson_upper_95(k: u64) -> f64 {
    let n = (k + 1) as f64;
    let z = 1.6449;
    n * (1.0 - 1.0 / (9.0 * n) + z / (3.0 * n.sqrt())).powi(3)
}

fn main() {
    let capacity: u64 = std::env::args()
        .nth(1)
        .map(|s| s.parse().expect("CAPACITY must be an integer"))
        .unwrap_or(1_000_000);
    let started = Instant::now();
    println!("Capacity {capacity} items per filter, filled to capacity; 8-byte distinct items.\n");
    println!(
        "| growth | ε requested | k | layers | bits/item | classic 1.44·log2(1/ε) | ratio | \
         queries | false pos. | measured FPR | 95% upper | FPR ≤ ε | size target |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for growth in [Growth::NonScaling, Growth::Scaling { expansion: 2 }] {
        for exp in 2..=6 {
            let error_rate = 10f64.powi(-exp);
            let params = FilterParams {
                capacity,
                error_rate,
                growth,
                seed: 0xacc0_u64 + exp as u64,
            };
            let mut filter = BloomFilter::new(params, &mut Unlimited).expect("create");
            for i in 0..capacity {
                filter.insert(&key(i), &mut Unlimited).expect("insert");
            }
            // No false negatives, on a sample.
            for i in (0..capacity).step_by(97) {
                assert!(filter.contains(&key(i)), "false negative for item {i}");
            }
            let queries = ((1000.0 / error_rate) as u64).min(MAX_QUERIES);
            assert!(queries as f64 * error_rate >= 200.0, "too few queries");
            let fp = false_positives(&filter, queries);
            let measured = fp as f64 / queries as f64;
            let upper = poisson_upper_95(fp) / queries as f64;
            let bits_per_item = filter.bytes() as f64 * 8.0 / capacity as f64;
            let classic = std::f64::consts::LOG2_E * (1.0 / error_rate).log2();
            let ratio = bits_per_item / classic;
            let (name, size_target) = match growth {
                Growth::NonScaling => (
                    "non-scaling",
                    format!("≤ 1.1×: {}", if ratio <= 1.1 { "met" } else { "NOT met" }),
                ),
                Growth::Scaling { .. } => {
                    // RedisBloom's scaling filter at this ε: first layer sized for ε/2.
                    let redisbloom = (2.0 / error_rate).ln() / std::f64::consts::LN_2.powi(2);
                    let verdict = if exp == 2 {
                        if bits_per_item < REDISBLOOM_BITS_AT_1PCT {
                            "met"
                        } else {
                            "NOT met"
                        }
                    } else if bits_per_item < redisbloom {
                        "below"
                    } else {
                        "not below"
                    };
                    (
                        "scaling ×2",
                        format!("RedisBloom {redisbloom:.3}: {verdict}"),
                    )
                }
            };
            println!(
                "| {name} | {error_rate:.0e} | {k} | {layers} | {bits_per_item:.3} | {classic:.3} | \
                 {ratio:.3} | {queries:.1e} | {fp} | {measured:.3e} | {upper:.3e} | {ok} | {size_target} |",
                k = filter.layers()[0].size().num_hashes,
                layers = filter.layers().len(),
                queries = queries as f64,
                ok = if measured <= error_rate { "yes" } else { "NO" },
            );
        }
    }
    println!(
        "\nScaling filters size their first layer for ε/2 (the series ε/2 + ε/4 + … < ε), so their \
         measured rate at the first layer's capacity is about ε/2 and their size is compared with \
         RedisBloom's ln(2/ε)/ln²2 bits per item (11.03 at 1%).\nTotal {:.1} s.",
        started.elapsed().as_secs_f64()
    );
}
