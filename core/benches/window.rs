//! Criterion benches of the sliding-window filter against a plain filter of the same
//! capacity and error rate: nanoseconds per item for inserts of new items and for lookups of
//! members and non-members, through the batch APIs (100 items per iteration, as BF.MADD /
//! BF.MEXISTS would call them) and one item at a time.
//!
//! Subjects, for ε in {1e-2, 1e-3}: N = 1M (both filters fit the 32 MB L3 of the machine this
//! was written on) and N = 30M (neither does). The plain filter is non-scaling, sized for N at ε
//! (one layer, classic or blocked as sizing picks). The window filter (W = 60 s) is filled at a
//! steady N per window until all four slots hold N/3 items each; lookups run there, at the last
//! moment of that generation, the worst one. Inserts of new items run on copies kept between half
//! and full capacity (the plain filter between N/2 and N, the window's newest slot between N/6
//! and N/3), re-copied outside the timing.
//!
//! Bench ids are `<group>/<operation>/<filter>/<ε>/<N>`; criterion reports time per iteration
//! and, via `Throughput::Elements`, items per second.
//!
//! Times are the bench thread's CPU time ([`ThreadCpu`]), not wall time: on a shared machine wall
//! time also counts the moments other processes held the core, and the comparison drifts with the
//! load. Caches are shared all the same, so run it on a quiet machine for absolute numbers.
//!
//! Run: `cargo bench -p rustbloom-core --bench window` (about 4 minutes, a third of it filling).

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::measurement::{Measurement, ValueFormatter};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rustbloom_core::{
    AddOutcome, BloomFilter, FilterParams, Growth, Unlimited, WindowFilter, WindowParams,
};

/// CPU time of the calling thread, in nanoseconds.
fn thread_cpu_ns() -> u64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec through a valid pointer.
    let status = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    assert_eq!(status, 0, "CLOCK_THREAD_CPUTIME_ID is unavailable");
    now.tv_sec as u64 * 1_000_000_000 + now.tv_nsec as u64
}

/// Criterion measurement: nanoseconds of the bench thread's CPU time.
struct ThreadCpu;

impl Measurement for ThreadCpu {
    type Intermediate = u64;
    type Value = u64;
    fn start(&self) -> u64 {
        thread_cpu_ns()
    }
    fn end(&self, started: u64) -> u64 {
        thread_cpu_ns() - started
    }
    fn add(&self, a: &u64, b: &u64) -> u64 {
        a + b
    }
    fn zero(&self) -> u64 {
        0
    }
    fn to_f64(&self, value: &u64) -> f64 {
        *value as f64
    }
    fn formatter(&self) -> &dyn ValueFormatter {
        &CpuNanos
    }
}

/// Shows values in CPU ns (µs above 10,000) and throughput in million items per CPU second.
struct CpuNanos;

impl ValueFormatter for CpuNanos {
    fn scale_values(&self, typical: f64, values: &mut [f64]) -> &'static str {
        if typical < 10_000.0 {
            "ns (cpu)"
        } else {
            values.iter_mut().for_each(|v| *v /= 1e3);
            "µs (cpu)"
        }
    }
    fn scale_throughputs(
        &self,
        _: f64,
        throughput: &Throughput,
        values: &mut [f64],
    ) -> &'static str {
        let items = match *throughput {
            Throughput::Elements(n) | Throughput::Bytes(n) | Throughput::BytesDecimal(n) => n,
        };
        values.iter_mut().for_each(|v| *v = items as f64 * 1e3 / *v);
        "Mitems/cpu-s"
    }
    fn scale_for_machines(&self, _: &mut [f64]) -> &'static str {
        "ns"
    }
}

const WINDOW_MS: u64 = 60_000;
const T0: u64 = 1_780_000_020_000;
/// Non-members and new items start here, far from any member.
const FRESH_BASE: u64 = 1 << 62;
const BATCH: u64 = 100;

fn key(i: u64) -> [u8; 8] {
    i.to_le_bytes()
}

fn batch_keys(first: u64) -> [[u8; 8]; BATCH as usize] {
    std::array::from_fn(|j| key(first + j as u64))
}

/// One capacity and error rate, both filters.
struct Subject {
    label: String,
    capacity: u64,
    plain_full: BloomFilter,
    plain_half: BloomFilter,
    window_full: WindowFilter,
    window_half: WindowFilter,
    /// Timestamp of the lookups and inserts: the last moment of the full window's generation.
    now: u64,
}

impl Subject {
    fn new(error_rate: f64, capacity: u64) -> Subject {
        let started = Instant::now();
        let plain_params = FilterParams {
            capacity,
            error_rate,
            growth: Growth::NonScaling,
            seed: 1,
            tightening: rustbloom_core::scalable::TIGHTENING_RATIO,
        };
        let mut plain_half = BloomFilter::new(plain_params, &mut Unlimited).unwrap();
        let insert_plain = |filter: &mut BloomFilter, range: std::ops::Range<u64>| {
            let keys: Vec<[u8; 8]> = range.map(key).collect();
            let mut outcome = AddOutcome::default();
            filter.insert_many(keys.iter().map(|k| &k[..]), &mut Unlimited, &mut outcome);
            assert_eq!(outcome.error, None);
        };
        insert_plain(&mut plain_half, 0..capacity / 2);
        let mut plain_full = plain_half.copy();
        insert_plain(&mut plain_full, capacity / 2..capacity);

        let window_params = WindowParams {
            error_rate,
            capacity,
            window_ms: WINDOW_MS,
            seed: 1,
        };
        let mut window = WindowFilter::new(window_params, T0, &mut Unlimited).unwrap();
        let generation = window.shape().generation_ms;
        let per_generation = capacity.div_ceil(3);
        let insert_window = |filter: &mut WindowFilter, range: std::ops::Range<u64>, now| {
            let keys: Vec<[u8; 8]> = range.map(key).collect();
            filter.insert_many(keys.iter().map(|k| &k[..]), now, |_| {});
        };
        // Generations 0..3 full; the fourth (the ring's newest) filled to half, then full.
        let start = T0 - T0 % generation;
        for g in 0..3 {
            let first = g * per_generation;
            insert_window(
                &mut window,
                first..first + per_generation,
                start + g * generation,
            );
        }
        let now = start + 4 * generation - 1;
        let first = 3 * per_generation;
        insert_window(&mut window, first..first + per_generation / 2, now);
        let window_half = window.copy();
        insert_window(
            &mut window,
            first + per_generation / 2..first + per_generation,
            now,
        );
        let label = format!("{error_rate:e}/{capacity}");
        eprintln!(
            "# {label}: plain {:.1} MB ({:?}, k = {}), window {:.1} MB ({:?}, k = {}); filled in \
             {:.1} s",
            plain_full.bytes() as f64 / 1e6,
            plain_full.layers()[0].size().layout,
            plain_full.layers()[0].size().num_hashes,
            window.bytes() as f64 / 1e6,
            window.shape().slot.layout,
            window.shape().slot.num_hashes,
            started.elapsed().as_secs_f64()
        );
        Subject {
            label,
            capacity,
            plain_full,
            plain_half,
            window_full: window,
            window_half,
            now,
        }
    }
}

/// A filter the bench copies (filters are not `Clone`: a copy goes through a budget).
trait Copied {
    fn copy(&self) -> Self;
}

impl Copied for BloomFilter {
    fn copy(&self) -> Self {
        self.try_clone(&mut Unlimited).unwrap()
    }
}

impl Copied for WindowFilter {
    fn copy(&self) -> Self {
        self.try_clone(&mut Unlimited).unwrap()
    }
}

/// A working copy of `template` that new items are inserted into, re-copied (outside the timing)
/// before `room` items have been added to it. Kept across criterion's calls, so that a copy's
/// first touches (page faults, cold TLB) are not charged to a few timed inserts.
struct FreshInserts<'a, F: Copied> {
    template: &'a F,
    room: u64,
    work: F,
    left: u64,
    next: u64,
}

impl<'a, F: Copied> FreshInserts<'a, F> {
    fn new(template: &'a F, room: u64) -> Self {
        FreshInserts {
            template,
            room,
            work: template.copy(),
            left: room,
            next: FRESH_BASE,
        }
    }

    /// Times `iters` calls of `work(filter, first_key)`, each adding `per_iter` new items.
    fn run(&mut self, iters: u64, per_iter: u64, mut work: impl FnMut(&mut F, u64)) -> u64 {
        let mut total = 0;
        let mut todo = iters;
        while todo > 0 {
            if self.left < per_iter {
                self.work = self.template.copy();
                self.left = self.room;
            }
            let now = todo.min(self.left / per_iter);
            let started = thread_cpu_ns();
            for _ in 0..now {
                work(&mut self.work, self.next);
                self.next += per_iter;
            }
            total += thread_cpu_ns() - started;
            self.left -= now * per_iter;
            todo -= now;
        }
        total
    }
}

fn bench_subject(c: &mut Criterion<ThreadCpu>, subject: &Subject) {
    let (label, cap, now) = (&subject.label, subject.capacity, subject.now);
    let mut group = c.benchmark_group("window_vs_plain");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_millis(1200))
        .throughput(Throughput::Elements(BATCH));

    // A stride coprime with the capacity walks the members in a scattered order.
    let member = |i: u64| (i * 7_919) % cap;
    let mut i = 0u64;
    group.bench_function(
        BenchmarkId::new("batch_contains_member/plain", label),
        |b| {
            b.iter(|| {
                let keys: [[u8; 8]; BATCH as usize] = std::array::from_fn(|_| {
                    i += 1;
                    key(member(i))
                });
                let mut hits = 0u32;
                subject
                    .plain_full
                    .contains_many(keys.iter().map(|k| &k[..]), |f| hits += f as u32);
                black_box(hits)
            })
        },
    );
    let mut i = 0u64;
    group.bench_function(
        BenchmarkId::new("batch_contains_member/window", label),
        |b| {
            b.iter(|| {
                let keys: [[u8; 8]; BATCH as usize] = std::array::from_fn(|_| {
                    i += 1;
                    key(member(i))
                });
                let mut hits = 0u32;
                subject
                    .window_full
                    .contains_many(keys.iter().map(|k| &k[..]), now, |f| hits += f as u32);
                black_box(hits)
            })
        },
    );
    let mut next = FRESH_BASE;
    group.bench_function(
        BenchmarkId::new("batch_contains_absent/plain", label),
        |b| {
            b.iter(|| {
                let keys = batch_keys(next);
                next += BATCH;
                let mut hits = 0u32;
                subject
                    .plain_full
                    .contains_many(keys.iter().map(|k| &k[..]), |f| hits += f as u32);
                black_box(hits)
            })
        },
    );
    let mut next = FRESH_BASE;
    group.bench_function(
        BenchmarkId::new("batch_contains_absent/window", label),
        |b| {
            b.iter(|| {
                let keys = batch_keys(next);
                next += BATCH;
                let mut hits = 0u32;
                subject
                    .window_full
                    .contains_many(keys.iter().map(|k| &k[..]), now, |f| hits += f as u32);
                black_box(hits)
            })
        },
    );
    let mut plain_inserts = FreshInserts::new(&subject.plain_half, cap / 2);
    let mut window_inserts = FreshInserts::new(&subject.window_half, cap / 6);
    group.bench_function(BenchmarkId::new("batch_insert/plain", label), |b| {
        b.iter_custom(|iters| {
            plain_inserts.run(iters, BATCH, |f, first| {
                let keys = batch_keys(first);
                let mut outcome = AddOutcome::default();
                f.insert_many(keys.iter().map(|k| &k[..]), &mut Unlimited, &mut outcome);
                assert_eq!(outcome.error, None);
                black_box(outcome.added_positions().count());
            })
        })
    });
    group.bench_function(BenchmarkId::new("batch_insert/window", label), |b| {
        b.iter_custom(|iters| {
            window_inserts.run(iters, BATCH, |f, first| {
                let keys = batch_keys(first);
                let mut added = 0u32;
                f.insert_many(keys.iter().map(|k| &k[..]), now, |new| added += new as u32);
                black_box(added);
            })
        })
    });
    group.throughput(Throughput::Elements(1));
    group.bench_function(BenchmarkId::new("insert/plain", label), |b| {
        b.iter_custom(|iters| {
            plain_inserts.run(iters, 1, |f, first| {
                black_box(f.insert(&key(first), &mut Unlimited).unwrap());
            })
        })
    });
    group.bench_function(BenchmarkId::new("insert/window", label), |b| {
        b.iter_custom(|iters| {
            window_inserts.run(iters, 1, |f, first| {
                black_box(f.insert(&key(first), now));
            })
        })
    });
    group.finish();
}

fn benches(c: &mut Criterion<ThreadCpu>) {
    for error_rate in [1e-2, 1e-3] {
        for capacity in [1_000_000, 30_000_000] {
            let subject = Subject::new(error_rate, capacity);
            bench_subject(c, &subject);
        }
    }
}

criterion_group! {
    name = window;
    config = Criterion::default().with_measurement(ThreadCpu);
    targets = benches
}
criterion_main!(window);
