//! The window filter on real random data, with an injected clock.

use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use xxhash_rust::xxh3::xxh3_64;

use super::encoding::{decode, decode_header, encode, encode_header, parse_header, HEADER_BYTES};
use super::regions::{region_count, ALL_SLOTS};
use super::*;
use crate::budget::{Budget, Unlimited};
use crate::encoding::{pieces, DecodeError};
use crate::scalable::MAX_CAPACITY;
use crate::sizing::{classic_size, Layout, LINES_MAX_COST};

/// Far from the epoch, like real Unix milliseconds (2026).
const T0: u64 = 1_780_000_000_000;

fn params(error_rate: f64, capacity: u64, window_ms: u64) -> WindowParams {
    WindowParams {
        error_rate,
        capacity,
        window_ms,
        seed: 0x5eed,
    }
}

fn filter(params: WindowParams, now_ms: u64) -> WindowFilter {
    WindowFilter::new(params, now_ms, &mut Unlimited).unwrap()
}

fn random_items(rng: &mut ChaCha8Rng, count: usize) -> Vec<[u8; 16]> {
    (0..count).map(|_| rng.random()).collect()
}

/// Classic bits for N items at ε: N·ln(1/ε)/ln²2.
fn classic_bits(capacity: u64, error_rate: f64) -> f64 {
    capacity as f64 * (1.0 / error_rate).ln() / std::f64::consts::LN_2.powi(2)
}

/// Adds `per_window` random items per window at a steady rate from `start` to `end`, returning
/// each item with the timestamp its write used.
fn steady_load(
    filter: &mut WindowFilter,
    rng: &mut ChaCha8Rng,
    per_window: u64,
    start: u64,
    end: u64,
) -> Vec<([u8; 16], u64)> {
    let window = filter.params().window_ms;
    let count = (end - start) * per_window / window;
    (0..count)
        .map(|i| {
            let now = start + i * window / per_window;
            let item: [u8; 16] = rng.random();
            (item, filter.insert(&item, now).at_ms)
        })
        .collect()
}

/// The measured false-positive rate of `queries` fresh random items at `now_ms`.
fn false_positive_rate(
    filter: &WindowFilter,
    rng: &mut ChaCha8Rng,
    queries: usize,
    now_ms: u64,
) -> f64 {
    let hits = random_items(rng, queries)
        .iter()
        .filter(|item| filter.contains(&item[..], now_ms))
        .count();
    hits as f64 / queries as f64
}

#[test]
fn no_false_negatives_inside_the_window_at_four_times_capacity() {
    for (error_rate, capacity, window) in [(1e-2, 10_000, 60_000), (1e-3, 1_000, 1_000)] {
        let mut filter = filter(params(error_rate, capacity, window), T0);
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let mut added = Vec::new();
        // Load for three windows, stopping at odd moments to check everything still inside.
        let step = window / 7 + 3;
        for start in (T0..T0 + 3 * window).step_by(step as usize) {
            let now = start + step;
            added.extend(steady_load(&mut filter, &mut rng, 4 * capacity, start, now));
            let missing = added
                .iter()
                .filter(|(_, at)| at + window >= now)
                .filter(|(item, _)| !filter.contains(item, now))
                .count();
            assert_eq!(missing, 0, "{error_rate} at {now}");
        }
        // Without further writes, the last items are still there a whole window later.
        let (_, last) = *added.last().unwrap();
        assert!(added
            .iter()
            .filter(|(_, at)| *at == last)
            .all(|(item, _)| filter.contains(item, last + window)));
    }
}

#[test]
fn items_are_forgotten_when_their_fourth_generation_begins() {
    let window = 90_000;
    let mut filter = filter(params(1e-2, 10_000, window), T0);
    let shape = *filter.shape();
    let mut rng = ChaCha8Rng::seed_from_u64(2);
    let old = random_items(&mut rng, 5_000);
    let written = T0 + 12_345;
    for item in &old {
        filter.insert(item, written);
    }
    let forgotten = shape.forgotten_at(written);
    assert_eq!(forgotten, (written / 30_000 + 4) * 30_000);
    assert!(forgotten > written + window && forgotten <= written + 2 * window);
    // Other traffic at capacity keeps the filter realistically full meanwhile.
    steady_load(
        &mut filter,
        &mut rng,
        10_000,
        written + 1,
        forgotten + window,
    );
    // Reads before the writes caught up, and after: the same answer.
    let present =
        |filter: &WindowFilter, now| old.iter().filter(|i| filter.contains(&i[..], now)).count();
    let mut reader = WindowFilter::new(*filter.params(), written, &mut Unlimited).unwrap();
    for item in &old {
        reader.insert(item, written);
    }
    assert_eq!(present(&reader, forgotten - 1), old.len());
    assert_eq!(present(&reader, forgotten), 0, "nothing else was added");
    assert_eq!(present(&reader, written + 2 * window), 0);
    // With traffic, only false positives remain, at most about ε.
    let stale = present(&filter, forgotten + window);
    assert!(stale <= old.len() / 50, "{stale}");
    // The bound holds for every window length, ⌈W/3⌉ rounding included.
    for window in [4, 5, 7, 10, 1_000, 59_999, 60_001, MAX_WINDOW_MS] {
        let shape = params(1e-2, 100, window).shape().unwrap();
        for written in [0, 1, 2, window - 1, window, T0, T0 + 1] {
            let gone = shape.forgotten_at(written);
            assert!(gone > written + window, "{window} {written}");
            assert!(gone <= written + 2 * window, "{window} {written}");
        }
    }
}

/// The rate a user can expect: measured on eight filters (different seeds) at the last moment
/// of a generation, when all four slots are full (the worst moment), 400,000 probes in all. One
/// small filter's own rate scatters around it (±15% at 200 items per slot).
#[test]
fn false_positive_rate_at_capacity_stays_under_the_target() {
    for (error_rate, capacity, layout) in [
        (1e-2, 90_000, Layout::Blocked),
        (1e-3, 90_000, Layout::Blocked),
        (1e-2, 600, Layout::Classic),
    ] {
        let window = 60_000;
        let mut rate = 0.0;
        for seed in 0..8 {
            let params = WindowParams {
                seed,
                ..params(error_rate, capacity, window)
            };
            let mut filter = filter(params, T0);
            assert_eq!(filter.shape().slot.layout, layout);
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let end = T0 + 2 * window;
            let end = end - end % filter.shape().generation_ms - 1;
            steady_load(&mut filter, &mut rng, capacity, T0, end);
            rate += false_positive_rate(&filter, &mut rng, 50_000, end) / 8.0;
        }
        assert!(rate <= error_rate, "{error_rate} {layout:?}: {rate}");
        assert!(rate > error_rate / 2.0, "{error_rate} {layout:?}: {rate}");
    }
}

#[test]
fn memory_is_known_before_allocating_and_within_budget() {
    for error_rate in [5e-2, 3e-2, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6] {
        let params = params(error_rate, 10_000_000, 60_000);
        let needed = bytes_needed(&params).unwrap();
        // The 2.1× of the contract is in bits; the allocator's size class comes on top.
        let bits = params.shape().unwrap().bytes() * 8;
        let ratio = bits as f64 / classic_bits(10_000_000, error_rate);
        assert!(ratio <= 2.1, "{error_rate}: {ratio}");
        let mut budget = Budget::new(needed - 1, u64::MAX);
        assert!(matches!(
            WindowFilter::new(params, T0, &mut budget),
            Err(WindowError::Limit(LimitError::FilterBytes { .. }))
        ));
    }
    let small = params(1e-2, 1000, 60_000);
    assert_eq!(
        filter(small, T0).allocated_bytes(),
        bytes_needed(&small).unwrap()
    );
    for (bad, error) in [
        (params(0.0, 10, 1000), WindowError::ErrorRate),
        (params(f64::NAN, 10, 1000), WindowError::ErrorRate),
        (params(1e-300, 10, 1000), WindowError::ErrorRate),
        (params(0.01, 0, 1000), WindowError::Capacity),
        (params(0.01, MAX_CAPACITY + 1, 1000), WindowError::Capacity),
        (params(0.01, 10, 3), WindowError::Window),
        (params(0.01, 10, MAX_WINDOW_MS + 1), WindowError::Window),
    ] {
        assert_eq!(bytes_needed(&bad), Err(error), "{bad:?}");
    }
}

#[test]
fn the_clock_going_backwards_is_treated_as_standing_still() {
    let mut filter = filter(params(1e-2, 1000, 60_000), T0);
    let later = T0 + 100_000;
    assert_eq!(filter.insert(b"a", later).at_ms, later);
    let before = filter.try_clone(&mut Unlimited).unwrap();
    // A write from the past uses the last timestamp and moves nothing back.
    let inserted = filter.insert(b"b", T0);
    assert_eq!(
        inserted,
        Inserted {
            new: true,
            at_ms: later
        }
    );
    assert_eq!(filter.advance(0), later);
    assert_eq!(filter.last_ms(), later);
    // Reads from the past answer as of the last write.
    assert!(filter.contains(b"a", 0) && filter.contains(b"b", T0));
    assert_eq!(before.contains(b"a", 0), before.contains(b"a", later));
    // Extreme timestamps neither panic nor keep anything.
    assert!(!filter.contains(b"a", u64::MAX));
    assert_eq!(filter.insert(b"c", u64::MAX).at_ms, u64::MAX);
    assert!(filter.contains(b"c", u64::MAX) && !filter.contains(b"a", u64::MAX));
    assert_eq!(filter.shape().forgotten_at(u64::MAX), u64::MAX);
    let mut early = WindowFilter::new(params(1e-2, 1000, 4), 0, &mut Unlimited).unwrap();
    assert!(early.insert(b"x", 0).new && early.contains(b"x", 4) && !early.contains(b"x", 8));
}

#[test]
fn writes_replayed_with_their_timestamps_give_identical_bits() {
    let mut rng = ChaCha8Rng::seed_from_u64(4);
    let mut primary = filter(params(1e-2, 5_000, 10_000), T0);
    let mut replica = primary.try_clone(&mut Unlimited).unwrap();
    let mut now = T0;
    for _ in 0..2_000 {
        now += rng.random_range(0..40);
        // The primary's clock jitters backwards at times; the replica uses what the write used.
        let item: [u8; 8] = rng.random();
        let jitter = rng.random_range(0..100);
        let used = primary.insert(&item, now - jitter).at_ms;
        let replayed = replica.insert(&item, used);
        assert_eq!(replayed.at_ms, used);
    }
    assert_eq!(primary, replica);
    assert_eq!(encode(&primary), encode(&replica));
}

#[test]
fn batches_answer_like_single_items() {
    for capacity in [900, 90_000] {
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let items = random_items(&mut rng, 3_000);
        let mut single = filter(params(1e-2, capacity, 60_000), T0);
        let mut batch = single.try_clone(&mut Unlimited).unwrap();
        let mut answers = Vec::new();
        for (round, chunk) in items.chunks(1_000).enumerate() {
            let now = T0 + round as u64 * 25_000;
            let expected: Vec<bool> = chunk.iter().map(|i| single.insert(i, now).new).collect();
            let mut got = Vec::new();
            let at = batch.insert_many(chunk.iter().map(|i| &i[..]), now, |new| got.push(new));
            assert_eq!((got, at), (expected, now));
            answers.clear();
            batch.contains_many(items.iter().map(|i| &i[..]), now + 50_000, |f| {
                answers.push(f)
            });
            let expected: Vec<bool> = items
                .iter()
                .map(|i| single.contains(i, now + 50_000))
                .collect();
            assert_eq!(answers, expected);
        }
        assert_eq!(single, batch);
        // Re-adding an item is not new; the batch counted each item once per slot.
        assert!(!batch.insert(&items[2_999], T0 + 50_000).new);
    }
}

#[test]
fn encode_decode_is_the_identity_and_a_late_restart_forgets_everything() {
    for capacity in [900, 90_000] {
        let mut rng = ChaCha8Rng::seed_from_u64(6);
        let mut original = filter(params(1e-2, capacity, 60_000), T0);
        let added = steady_load(&mut original, &mut rng, capacity, T0, T0 + 100_000);
        let bytes = encode(&original);
        assert_eq!(bytes.len(), HEADER_BYTES + original.bytes() as usize);
        let copy = decode(&bytes, &mut Unlimited).unwrap();
        assert_eq!(copy, original);
        // In pieces, as RDB and SCANDUMP move it.
        let mut pieced = decode_header(&encode_header(&original), &mut Unlimited).unwrap();
        for (offset, len) in pieces(original.bytes(), 4_099) {
            let mut piece = vec![0; len as usize];
            original.read_bits(offset, &mut piece).unwrap();
            pieced.write_bits(offset, &piece).unwrap();
        }
        assert_eq!(pieced, original);
        assert_eq!(
            pieced.write_bits(original.bytes() - 1, &[0, 0]),
            Err(OutOfRange)
        );
        assert_eq!(pieced.read_bits(u64::MAX, &mut [0]), Err(OutOfRange));
        // Restarted much later: nothing answers, and the first write clears the old bits.
        let much_later = T0 + 1_000_000_000;
        let mut restarted = decode(&bytes, &mut Unlimited).unwrap();
        assert!(added
            .iter()
            .all(|(item, _)| !restarted.contains(item, much_later)));
        restarted.advance(much_later);
        assert_eq!(restarted.items(much_later), 0);
        let empty = WindowFilter::new(*original.params(), much_later, &mut Unlimited).unwrap();
        assert_eq!(
            encode(&restarted)[HEADER_BYTES..],
            encode(&empty)[HEADER_BYTES..]
        );
        // Restarted within the window: still there.
        let soon = T0 + 100_000;
        let within = added.iter().filter(|(_, at)| at + 60_000 >= soon);
        assert!(within.clone().count() > 0);
        assert!(within
            .into_iter()
            .all(|(item, _)| copy.contains(item, soon)));
    }
}

fn reseal(header: &mut [u8]) {
    let body = HEADER_BYTES - 8;
    let checksum = xxh3_64(&header[..body]);
    header[body..].copy_from_slice(&checksum.to_le_bytes());
}

#[test]
fn the_decoder_refuses_forged_fields() {
    let mut original = filter(params(1e-2, 90_000, 60_000), T0);
    original.insert(b"x", T0);
    let header = encode_header(&original);
    let forge = |at: usize, value: &[u8]| {
        let mut forged = header.clone();
        forged[at..at + value.len()].copy_from_slice(value);
        reseal(&mut forged);
        parse_header(&forged)
    };
    let corrupt = |what| Err(DecodeError::Corrupt(what));
    assert_eq!(forge(0, b"RBLM"), corrupt("magic"));
    assert_eq!(forge(4, &[3]), corrupt("format version"));
    assert_eq!(forge(4, &[2]), corrupt("layout"), "version 2 is for lines");
    assert_eq!(
        forge(5, &[2]),
        corrupt("layout"),
        "version 1 is for one line"
    );
    assert_eq!(forge(5, &[5]), corrupt("layout"));
    assert_eq!(forge(6, &[5]), corrupt("slots"));
    assert_eq!(forge(7, &[0]), corrupt("hash count"));
    assert_eq!(forge(7, &[17]), corrupt("hash count"), "blocked allows 16");
    assert_eq!(forge(16, &f64::NAN.to_le_bytes()), corrupt("error rate"));
    assert_eq!(forge(16, &1.0f64.to_le_bytes()), corrupt("error rate"));
    assert_eq!(forge(24, &0u64.to_le_bytes()), corrupt("capacity"));
    assert_eq!(forge(32, &3u64.to_le_bytes()), corrupt("window"));
    assert_eq!(forge(48, &0u64.to_le_bytes()), corrupt("bit count"));
    assert_eq!(
        forge(48, &576u64.to_le_bytes()),
        corrupt("bit count"),
        "not whole blocks"
    );
    assert_eq!(forge(48, &(1u64 << 61).to_le_bytes()), corrupt("bit count"));
    assert_eq!(
        forge(56, &u64::MAX.to_le_bytes()),
        corrupt("items over the slot's bits")
    );
    // A well-formed header with huge bits is refused by the limits, before allocating.
    let mut huge = header.clone();
    huge[48..56].copy_from_slice(&(1u64 << 60).to_le_bytes());
    reseal(&mut huge);
    assert!(matches!(
        decode_header(&huge, &mut Budget::new(1 << 30, u64::MAX)),
        Err(DecodeError::Limit(LimitError::FilterBytes { .. }))
    ));
    // Bits that do not match the header's size.
    let bytes = encode(&original);
    assert_eq!(
        decode(&bytes[..bytes.len() - 1], &mut Unlimited).err(),
        Some(DecodeError::Corrupt("bits length"))
    );
    let mut longer = bytes.clone();
    longer.push(0);
    assert_eq!(
        decode(&longer, &mut Unlimited).err(),
        Some(DecodeError::Corrupt("bits length"))
    );
    assert_eq!(
        decode(&bytes[..10], &mut Unlimited).err(),
        Some(DecodeError::Corrupt("header length"))
    );
    let mut flipped = bytes;
    flipped[20] ^= 1;
    assert_eq!(
        decode(&flipped, &mut Unlimited).err(),
        Some(DecodeError::Corrupt("checksum"))
    );
}

/// A slot's count must agree with its bits (each counted add set one to k of them): a header
/// that counts nothing over set bits, or more adds than bits are set, is refused whole; loaded
/// in pieces, its counts are brought into what its bits allow.
#[test]
fn slot_counts_that_their_bits_contradict_are_refused_or_recounted() {
    for capacity in [900, 90_000] {
        let mut original = filter(params(1e-2, capacity, 60_000), T0);
        for i in 0..200u32 {
            original.insert(&i.to_le_bytes(), T0);
        }
        let k = u64::from(original.shape().slot.num_hashes);
        let set = original.slot_bits_set();
        assert!(original.counts_match_bits());
        let newest = original.newest_slot();
        assert!(set[newest] >= 200 && set[newest] <= 200 * k, "{set:?}");
        for forged_count in [0, set[newest] + 1, original.shape().slot.bits] {
            let mut bytes = encode(&original);
            let at = 56 + 8 * newest;
            bytes[at..at + 8].copy_from_slice(&forged_count.to_le_bytes());
            reseal(&mut bytes[..HEADER_BYTES]);
            assert_eq!(
                decode(&bytes, &mut Unlimited).err(),
                Some(DecodeError::Corrupt("slot counts against their bits")),
                "count {forged_count}"
            );
            let (header, bits) = bytes.split_at(HEADER_BYTES);
            let mut pieced = decode_header(header, &mut Unlimited).unwrap();
            pieced.write_bits(0, bits).unwrap();
            assert!(!pieced.counts_match_bits());
            pieced.recount_from_bits();
            assert!(pieced.counts_match_bits());
            let items = pieced.slot_items()[newest];
            assert!(items >= set[newest].div_ceil(k) && items <= set[newest]);
            let again = decode(&encode(&pieced), &mut Unlimited).unwrap();
            assert_eq!(again, pieced);
        }
    }
}

/// A value whose bits are all set answers "present" to everything only while its generations
/// are inside the window: its slots are cleared as a real filter's are, whatever its counts
/// said.
#[test]
fn a_filter_restored_full_forgets_as_its_generations_end() {
    let original = filter(params(1e-2, 90_000, 60_000), T0);
    let mut bytes = encode(&original);
    bytes[HEADER_BYTES..].fill(0xff);
    let (header, bits) = bytes.split_at(HEADER_BYTES);
    let mut full = decode_header(header, &mut Unlimited).unwrap();
    full.write_bits(0, bits).unwrap();
    full.recount_from_bits();
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let probes = random_items(&mut rng, 2000);
    let present = |f: &WindowFilter, now| probes.iter().filter(|p| f.contains(&p[..], now)).count();
    assert_eq!(present(&full, T0), probes.len());
    // Reads after the window see none of it, writes or not.
    let later = T0 + 2 * 60_000;
    assert_eq!(present(&full, later), 0);
    // Writes in every generation since clear the old slots where they land; the full bits
    // left elsewhere are never answered from.
    let generation = full.shape().generation_ms;
    for step in 1..=8u64 {
        let now = T0 + step * generation;
        for item in random_items(&mut rng, 500) {
            full.insert(&item, now);
        }
    }
    let end = T0 + 8 * generation;
    assert!(
        present(&full, end) < probes.len() / 50,
        "{}",
        present(&full, end)
    );
    let fresh = decode(&encode(&full), &mut Unlimited).unwrap();
    assert_eq!(present(&fresh, end), present(&full, end));
}

/// A write that starts a generation clears the new generation's slot only in the regions its
/// own probes touch: on a filter of dozens of regions, one insert changes at most a
/// region's slot per probed line, not the whole slot; every other old bit reads as cleared.
#[test]
fn a_write_clears_only_the_regions_it_touches() {
    for error_rate in [1e-2, 1e-7] {
        let mut filter = filter(params(error_rate, 900_000, 60_000), T0);
        let lines = filter.shape().slot.layout.lines().max(1) as usize;
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let generation = filter.shape().generation_ms;
        for step in 0..4 {
            for item in random_items(&mut rng, 30_000) {
                filter.insert(&item, T0 + step * generation);
            }
        }
        let regions = region_count(&filter.shape);
        assert!(regions > 20, "{regions}");
        let before: Vec<u64> = filter.words.blocks().flatten().copied().collect();
        let next = T0 + 4 * generation;
        filter.insert(b"one item", next);
        let changed = before
            .iter()
            .zip(filter.words.blocks().flatten())
            .filter(|(a, b)| a != b)
            .count();
        assert!(
            changed > 0 && changed <= lines * REGION_SLOT_WORDS as usize,
            "{changed}"
        );
        // The slot reused holds nothing but the new item, as if cleared whole.
        let newest = filter.newest_slot();
        assert_eq!(filter.slot_items()[newest], 1);
        let k = u64::from(filter.shape().slot.num_hashes);
        assert!(filter.slot_bits_set()[newest] <= k);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Any header byte changed and resealed is refused, or decodes into a filter that works.
    #[test]
    fn forged_headers_are_refused_or_safe(
        at in 0..HEADER_BYTES - 8,
        value: u8,
        item: [u8; 4],
        now in any::<u64>(),
    ) {
        let mut original = filter(params(1e-3, 900, 60_000), T0);
        original.insert(b"x", T0);
        let mut bytes = encode(&original);
        bytes[at] = value;
        reseal(&mut bytes[..HEADER_BYTES]);
        // A fresh budget per operation: a budget is charged cumulatively.
        let limits = Budget::new(1 << 24, 1 << 24);
        if let Ok(mut forged) = decode(&bytes, &mut { limits }) {
            forged.contains(&item, now);
            forged.insert(&item, now);
            prop_assert!(forged.contains(&item, now));
            let again = decode(&encode(&forged), &mut { limits }).unwrap();
            prop_assert_eq!(again, forged);
        }
    }

    /// Whatever the window (⌈W/3⌉ rounding included) and the moment of the write, a burst of four
    /// times the capacity written at t answers at every moment from t through t + W, and not
    /// from the start of the fourth generation after t's on, which is at most t + 2W.
    #[test]
    fn every_moment_of_the_window_answers_and_none_after(
        window in prop_oneof![4u64..100, 100u64..10_000_000, Just(MAX_WINDOW_MS)],
        written in prop_oneof![0u64..1_000, T0..T0 + 10_000_000],
        moments in proptest::collection::vec(0.0f64..=1.0, 16),
        seed: u64,
    ) {
        let params = WindowParams { seed, ..params(1e-2, 100, window) };
        let mut filter = WindowFilter::new(params, 0, &mut Unlimited).unwrap();
        let burst: Vec<[u8; 8]> = (0..400u64).map(|i| (i ^ seed).to_le_bytes()).collect();
        let at = filter.insert_many(burst.iter().map(|i| &i[..]), written, |_| {});
        prop_assert_eq!(at, written);
        let present = |now: u64| burst.iter().filter(|i| filter.contains(&i[..], now)).count();
        for moment in moments.iter().chain([&0.0, &1.0]) {
            let now = written + (moment * window as f64) as u64;
            prop_assert_eq!(present(now.min(written + window)), burst.len(), "at {}", now);
        }
        let gone = filter.shape().forgotten_at(written);
        prop_assert!(gone > written + window && gone <= written + 2 * window);
        prop_assert_eq!(present(gone - 1), burst.len());
        // Nothing else was written: nothing answers, not even a false positive.
        prop_assert_eq!(present(gone), 0);
        prop_assert_eq!(present(written + 2 * window), 0);
        prop_assert_eq!(filter.items(gone), 0);
    }

    /// Random operation sequences survive encoding, and the copy keeps behaving identically.
    #[test]
    fn encoding_round_trips_any_history(
        steps in proptest::collection::vec((0u64..50_000, any::<u16>()), 1..200),
        error_rate in prop_oneof![Just(1e-2), Just(1e-4), Just(0.3)],
    ) {
        let mut filter = filter(params(error_rate, 500, 30_000), T0);
        let mut now = T0;
        for (step, item) in &steps {
            now += step;
            filter.insert(&item.to_le_bytes(), now);
        }
        let mut copy = decode(&encode(&filter), &mut Unlimited).unwrap();
        prop_assert_eq!(&copy, &filter);
        copy.insert(b"after", now + 1);
        filter.insert(b"after", now + 1);
        prop_assert_eq!(copy, filter);
    }
}

/// Below about 1e-5, blocked slots would cost over [`BLOCKED_MAX_COST`] (and k scattered words
/// per slot, classic, cost k misses): big slots go in 2 to 4 lines within 5% of classic slots,
/// fewer lines for higher rates, and the window's memory then shrinks as the rate rises.
#[test]
fn low_rates_put_big_slots_in_lines_within_five_percent_of_classic() {
    let mut last_bits = 0;
    for (error_rate, lines) in [(1e-5, 3), (1e-6, 3), (1e-7, 4), (1e-8, 4), (1e-9, 4)] {
        let params = params(error_rate, 3_000_000, 60_000);
        let slot = params.shape().unwrap().slot;
        assert_eq!(slot.layout, Layout::Lines(lines), "{error_rate}");
        let slot_error = SLOT_MARGIN * error_rate / SLOTS as f64;
        let classic = classic_size(1_000_000, slot_error).unwrap();
        assert!(
            slot.bits as f64 <= classic.bits as f64 * LINES_MAX_COST,
            "{error_rate}"
        );
        assert!(
            slot.bits > last_bits,
            "memory grows as ε falls: {error_rate}"
        );
        last_bits = slot.bits;
    }
    // A small slot stays classic, as a small layer does, while double hashing's floor
    // (0.3/m) stays under its rate: 2.7·10⁶ bits at 2.25·10⁻⁶ ...
    let small = params(1e-5, 300_000, 60_000).shape().unwrap().slot;
    assert_eq!(small.layout, Layout::Classic);
    // ... but not 3.7·10⁵ bits at 2.25·10⁻⁸: there it goes in the lines with the fewest bits.
    let smaller = params(1e-7, 30_000, 60_000).shape().unwrap().slot;
    assert!(smaller.layout.lines() > 0, "{smaller:?}");
    let classic = classic_size(10_000, SLOT_MARGIN * 1e-7 / SLOTS as f64).unwrap();
    assert!(
        smaller.bits as f64 <= classic.bits as f64 * 1.05,
        "{smaller:?}"
    );
}

/// A window in lines keeps the contract: every item present through its window at twice the
/// load, the rate at capacity under ε at the worst moment, everything forgotten on time, and its
/// encoding (version 2) decodes to the same filter.
#[test]
fn a_window_in_lines_keeps_the_contract() {
    let (error_rate, capacity, window) = (1e-5, 480_000, 60_000);
    let mut filter = filter(params(error_rate, capacity, window), T0);
    assert_eq!(filter.shape().slot.layout, Layout::Lines(3));
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let end = T0 + 2 * window;
    let end = end - end % filter.shape().generation_ms - 1;
    let added = steady_load(&mut filter, &mut rng, capacity, T0, end);
    let rate = false_positive_rate(&filter, &mut rng, 5_000_000, end);
    assert!(rate <= error_rate, "{rate}");
    let inside: Vec<_> = added.iter().filter(|(_, at)| at + window >= end).collect();
    assert!(inside.iter().all(|(item, _)| filter.contains(item, end)));

    let copy = decode(&encode(&filter), &mut Unlimited).unwrap();
    assert_eq!(copy, filter);
    assert_eq!(encode_header(&filter)[4..6], [2, 3], "version 2, 3 lines");

    // Twice the load in the last generation: still no false negative.
    let burst = random_items(&mut rng, 2 * capacity as usize);
    for item in &burst {
        filter.insert(item, end);
    }
    assert!(burst.iter().all(|item| filter.contains(item, end)));
    // From the forgetting moment on, the burst is gone but for false positives.
    let gone = filter.shape().forgotten_at(end);
    let remembered = burst
        .iter()
        .filter(|item| filter.contains(&item[..], gone))
        .count();
    assert!(
        remembered < 10,
        "{remembered} of {} remembered",
        burst.len()
    );
    // Blocked windows are still written as version 1.
    let blocked = super::WindowFilter::new(params(1e-2, 90_000, 60_000), T0, &mut Unlimited);
    assert_eq!(encode_header(&blocked.unwrap())[4..6], [1, 1]);
}

/// Adds and lookups skip the slots a region's dirty marks say hold no bits: they answer as a
/// filter whose every slot is marked (where the marks skip nothing), on random data from a
/// young filter through several generations, blocked and in lines, with the same bits.
#[test]
fn slots_without_bits_skipped_answer_as_every_slot_tested() {
    for (error_rate, capacity, layout) in [
        (1e-2, 20_000, Layout::Blocked),
        (1e-5, 480_000, Layout::Lines(3)),
    ] {
        let window = 60_000;
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        let mut skipping = filter(params(error_rate, capacity, window), T0);
        assert_eq!(skipping.shape().slot.layout, layout);
        let mut marked = skipping.try_clone(&mut Unlimited).unwrap();
        let mark_all = |filter: &mut WindowFilter| {
            for region in 0..filter.region_count {
                filter.mark_dirty(region, ALL_SLOTS);
            }
        };
        mark_all(&mut marked);
        let mut now = T0;
        let mut seen = Vec::new();
        for _ in 0..12 {
            // Fresh items and some seen before (refreshed, or new again once forgotten).
            let mut batch = random_items(&mut rng, 2_000);
            for _ in 0..500 {
                if !seen.is_empty() {
                    batch.push(seen[rng.random_range(0..seen.len())]);
                }
            }
            let (mut got, mut expected) = (Vec::new(), Vec::new());
            skipping.insert_many(batch.iter().map(|i| &i[..]), now, |new| got.push(new));
            marked.insert_many(batch.iter().map(|i| &i[..]), now, |new| expected.push(new));
            assert_eq!(got, expected);
            mark_all(&mut marked);
            let queries: Vec<_> = seen
                .iter()
                .chain(&random_items(&mut rng, 2_000))
                .copied()
                .collect();
            for item in &queries {
                assert_eq!(skipping.contains(item, now), marked.contains(item, now));
            }
            assert_eq!(encode(&skipping), encode(&marked));
            seen.extend(batch);
            now += rng.random_range(0..window / 2);
            // Bringing regions forward clears marks; the reference stays marked everywhere.
            mark_all(&mut marked);
        }
    }
}
