//! The cost of the routing check a partition key runs before an item command, against the
//! insert it guards: per batch of 1000 items of 16 bytes, `Partition::first_misrouted` (one
//! xxh3-64 and a multiply per item; P = 1, so every item is checked and passes) and
//! `BloomFilter::insert_many` of fresh items into a 10M-item filter at 1e-2 (1e-3 for the
//! second subject). The ratio check / insert is what a partition adds to a BF.MADD of 1000.
//!
//! Usage: `cargo bench -p rustbloom-core --bench partition`

use criterion::{criterion_group, criterion_main, Criterion, Throughput};

use rustbloom_core::partition::Partition;
use rustbloom_core::{AddOutcome, BloomFilter, FilterParams, Growth, Unlimited};

const BATCH: u64 = 1000;

fn item(i: u64) -> [u8; 16] {
    let mut item = [b'x'; 16];
    item[..8].copy_from_slice(&i.wrapping_mul(0x9e37_79b9_7f4a_7c15).to_le_bytes());
    item
}

fn batch(first: u64) -> Vec<[u8; 16]> {
    (first..first + BATCH).map(item).collect()
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("partition_check");
    group.throughput(Throughput::Elements(BATCH));
    group.sample_size(30);
    let partition = Partition::new(0, 1, 7).expect("one partition");
    let items = batch(0);
    group.bench_function("route_check_1000", |b| {
        b.iter(|| partition.first_misrouted(items.iter().map(|item| item.as_slice())))
    });
    for error_rate in [1e-2, 1e-3] {
        let params = FilterParams {
            capacity: 10_000_000,
            error_rate,
            growth: Growth::Scaling { expansion: 2 },
            seed: 1,
            tightening: rustbloom_core::scalable::TIGHTENING_RATIO,
        };
        let mut filter = BloomFilter::new(params, &mut Unlimited).expect("filter");
        let mut next = 0;
        group.bench_function(format!("insert_many_1000/{error_rate}"), |b| {
            b.iter(|| {
                let items = batch(next);
                next += BATCH;
                let mut outcome = AddOutcome::default();
                filter.insert_many(
                    items.iter().map(|item| item.as_slice()),
                    &mut Unlimited,
                    &mut outcome,
                );
                outcome.added.len()
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
