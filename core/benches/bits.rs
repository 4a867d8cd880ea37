//! What a probe into a layer's bit store costs, one block or in pieces: BF.MADD of 1000 new
//! items and BF.EXISTS of one item, on non-scaling filters whose one layer is about 100 KB, 1 MB
//! and 12 MB, at ε = 1e-2 (classic / one line) and 1e-7 (classic / three lines).
//!
//! Thread CPU time per item, median over rounds; every round runs each shape once, so a busy
//! neighbour on the shared machine skews all shapes alike. For an A/B comparison build this
//! bench on both branches and run the two binaries in turn, several times each:
//!
//! `cargo bench -p rustbloom-core --bench bits` (about a minute).

use rustbloom_core::{AddOutcome, BloomFilter, FilterParams, Growth, Unlimited};

/// Rounds per shape; inserts take 1000 fresh items per round, lookups 1000 single calls.
const ROUNDS: u64 = 201;
const BATCH: u64 = 1000;
/// Items for new inserts and non-member lookups start here, far from any member.
const FRESH_BASE: u64 = 1 << 62;

/// This thread's CPU time in nanoseconds (Linux `CLOCK_THREAD_CPUTIME_ID`).
fn thread_cpu_ns() -> u64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec to a valid pointer.
    let status = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    assert_eq!(status, 0, "clock_gettime");
    now.tv_sec as u64 * 1_000_000_000 + now.tv_nsec as u64
}

struct Subject {
    label: String,
    /// Half full; `filter` is a copy of it, taken again before inserts would fill it.
    half: BloomFilter,
    filter: BloomFilter,
    capacity: u64,
    next_fresh: u64,
}

impl Subject {
    /// A non-scaling filter of about `bytes` of bits at `error_rate`, half full.
    fn new(bytes: u64, error_rate: f64, bits_per_item: f64) -> Subject {
        let capacity = (bytes as f64 * 8.0 / bits_per_item) as u64;
        let params = FilterParams {
            capacity,
            error_rate,
            growth: Growth::NonScaling,
            seed: 7,
            tightening: rustbloom_core::scalable::TIGHTENING_RATIO,
        };
        let mut filter = BloomFilter::new(params, &mut Unlimited).expect("filter");
        let members: Vec<[u8; 8]> = (0..capacity / 2).map(u64::to_le_bytes).collect();
        let mut outcome = AddOutcome::default();
        filter.insert_many(members.iter().map(|m| &m[..]), &mut Unlimited, &mut outcome);
        let size = filter.layers()[0].size();
        let copy = filter.try_clone(&mut Unlimited).expect("copy");
        Subject {
            label: format!(
                "{error_rate:e}_{}KB_{:?}",
                filter.bytes() / 1000,
                size.layout
            ),
            half: filter,
            filter: copy,
            capacity,
            next_fresh: FRESH_BASE,
        }
    }

    /// ns per item of one BF.MADD of 1000 new items.
    fn madd(&mut self) -> f64 {
        if self.filter.layers()[0].items() + 2 * BATCH > self.capacity {
            self.filter = self.half.try_clone(&mut Unlimited).expect("copy");
        }
        let items: Vec<[u8; 8]> = (self.next_fresh..self.next_fresh + BATCH)
            .map(u64::to_le_bytes)
            .collect();
        self.next_fresh += BATCH;
        let mut outcome = AddOutcome::default();
        let started = thread_cpu_ns();
        self.filter
            .insert_many(items.iter().map(|m| &m[..]), &mut Unlimited, &mut outcome);
        let spent = thread_cpu_ns() - started;
        assert!(outcome.error.is_none());
        spent as f64 / BATCH as f64
    }

    /// ns per call of 1000 BF.EXISTS, half members, half not.
    fn exists(&self, round: u64) -> f64 {
        let items: Vec<[u8; 8]> = (0..BATCH)
            .map(|i| {
                let member = (round * BATCH + i) * 7919 % (self.capacity / 2);
                if i % 2 == 0 {
                    member
                } else {
                    FRESH_BASE - 1 - member
                }
                .to_le_bytes()
            })
            .collect();
        let started = thread_cpu_ns();
        let found = items
            .iter()
            .filter(|item| self.half.contains(&item[..]))
            .count();
        let spent = thread_cpu_ns() - started;
        assert!(found as u64 >= BATCH / 2);
        spent as f64 / BATCH as f64
    }
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() {
    // Bits per item of the layer each rate gets, to aim at the byte sizes.
    let mut subjects: Vec<Subject> = [(1e-2, 9.8), (1e-7, 35.0)]
        .into_iter()
        .flat_map(|(error_rate, bits)| {
            [100_000u64, 1_000_000, 12_000_000].map(|bytes| Subject::new(bytes, error_rate, bits))
        })
        .collect();
    let mut madd = vec![Vec::new(); subjects.len()];
    let mut exists = vec![Vec::new(); subjects.len()];
    for round in 0..ROUNDS {
        for (index, subject) in subjects.iter_mut().enumerate() {
            madd[index].push(subject.madd());
            exists[index].push(subject.exists(round));
        }
    }
    for (index, subject) in subjects.iter().enumerate() {
        println!(
            "{:<28} madd1000 {:6.1} ns/item   exists {:6.1} ns/call",
            subject.label,
            median(madd[index].clone()),
            median(exists[index].clone())
        );
    }
}
