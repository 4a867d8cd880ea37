//! Behaviour of the core on real random data: accuracy, growth, and the encoding.

use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::encoding::ChunkError;
use super::scalable::encoding::encode_header_as;
use super::sizing::{layer_size, lines_size, Layout};
use super::stored::decode_header;
use super::transfer::{decode_load_header, load_chunk, scandump_step, CHUNK_BYTES};
use super::{
    AddOutcome, BloomFilter, Budget, FilterParams, Growth, InsertError, StoredFilter, Unlimited,
};
use super::{Filter, ItemHash, Layer};

/// The filter of a complete value.
fn ready_filter(stored: StoredFilter) -> Option<Filter> {
    stored.ready()?;
    Some(stored.into_filter())
}

fn random_items(rng: &mut ChaCha8Rng, count: usize) -> Vec<[u8; 16]> {
    (0..count).map(|_| rng.random()).collect()
}

fn filter(capacity: u64, error_rate: f64, growth: Growth) -> BloomFilter {
    let params = FilterParams {
        capacity,
        error_rate,
        growth,
        seed: 0x5eed,
        tightening: crate::scalable::TIGHTENING_RATIO,
    };
    BloomFilter::new(params, &mut Unlimited).unwrap()
}

/// Fills `filter` with `count` random items, checks every one is then present (no false
/// negatives), and returns the measured false-positive rate over `queries` fresh random items.
fn fill_and_measure(filter: &mut BloomFilter, count: usize, queries: usize, seed: u64) -> f64 {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let items = random_items(&mut rng, count);
    for item in &items {
        filter.insert(item, &mut Unlimited).unwrap();
    }
    assert!(
        items.iter().all(|item| filter.contains(item)),
        "false negative"
    );
    // 16 random bytes: a query equal to an inserted item has probability ~2^-100.
    let false_positives = (0..queries)
        .filter(|_| filter.contains(&rng.random::<[u8; 16]>()))
        .count();
    false_positives as f64 / queries as f64
}

#[test]
fn non_scaling_rate_at_capacity_is_at_most_the_requested_one() {
    // Queries chosen so that 10 000+ false positives are expected: the noise is about 1%.
    for (error_rate, queries, layout) in [
        (1e-2, 1_000_000, Layout::Blocked),
        (1e-3, 10_000_000, Layout::Lines(2)),
        (1e-4, 100_000_000, Layout::Lines(2)),
    ] {
        let mut f = filter(500_000, error_rate, Growth::NonScaling);
        assert_eq!(f.layers()[0].size().layout, layout);
        let measured = fill_and_measure(&mut f, 500_000, queries, 1);
        let ratio = measured / error_rate;
        eprintln!(
            "non-scaling ε={error_rate}: {layout:?}, measured {measured:.3e} ({ratio:.3}×), {:.2} bits/item",
            f.bytes() as f64 * 8.0 / 5e5
        );
        assert!(
            (0.8..=1.0).contains(&ratio),
            "ε={error_rate}: measured {measured} ({ratio:.3}×)"
        );
        assert!(f.items() <= 500_000 && f.items() > 499_000);
    }
}

/// Fills a layer of shape `size` with `items` random items and returns the measured rate over
/// `queries` fresh ones.
fn measure_layer(size: super::LayerSize, items: u64, queries: u64, seed: u64) -> f64 {
    let mut layer = Layer::new(size, items, 0.5).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let hash = |rng: &mut ChaCha8Rng| ItemHash::new(&rng.random::<[u8; 16]>(), seed);
    let added: Vec<ItemHash> = (0..items).map(|_| hash(&mut rng)).collect();
    for h in &added {
        layer.set(h);
    }
    assert!(added.iter().all(|h| layer.contains(h)), "false negative");
    let positives = (0..queries)
        .filter(|_| layer.contains(&hash(&mut rng)))
        .count();
    positives as f64 / queries as f64
}

/// At rates too low to measure (1e-7, 1e-9), a scaled-down check: the same shapes overfilled
/// until the model predicts ~2e-3, where a million queries measure it to ±3%. Correlated
/// hashing (lines or positions that travel together) would show here as a rate above the model.
#[test]
fn every_layout_follows_its_model_when_overfilled() {
    for (error_rate, lines) in [
        (1e-4, 1),
        (1e-4, 2),
        (1e-7, 3),
        (1e-7, 4),
        (1e-9, 3),
        (1e-9, 4),
        (1e-9, 0),
    ] {
        let capacity = 100_000;
        let size = if lines == 0 {
            super::sizing::classic_size(capacity, error_rate).unwrap()
        } else {
            lines_size(capacity, error_rate, lines).unwrap()
        };
        let mut items = capacity;
        while super::sizing::expected_error_rate(size, items) < 2e-3 {
            items += capacity / 20;
        }
        let expected = super::sizing::expected_error_rate(size, items);
        let measured = measure_layer(size, items, 1_000_000, 7 + u64::from(lines));
        let ratio = measured / expected;
        eprintln!(
            "ε={error_rate} {:?} k={}: {:.2}× capacity, model {expected:.3e}, measured {measured:.3e} ({ratio:.3}×)",
            size.layout, size.num_hashes, items as f64 / capacity as f64
        );
        assert!(
            (0.9..=1.1).contains(&ratio),
            "{error_rate} {lines}: {ratio}"
        );
    }
}

/// Classic against the layout [`layer_size`] picks, as a non-scaling filter sizes them (for
/// 0.9·ε), at capacity, over a million queries or more where that measures the rate (to 1e-4).
#[test]
fn chosen_layouts_keep_the_rate_at_capacity() {
    let capacity = 1_000_000;
    for (error_rate, queries) in [(1e-2, 1_000_000), (1e-3, 4_000_000), (1e-4, 40_000_000)] {
        let sized_for = error_rate * super::scalable::NON_SCALING_MARGIN;
        let chosen = layer_size(capacity, sized_for).unwrap();
        assert_ne!(chosen.layout, Layout::Classic);
        let classic = super::sizing::classic_size(capacity, sized_for).unwrap();
        for size in [classic, chosen] {
            let measured = measure_layer(size, capacity, queries, 21);
            eprintln!(
                "ε={error_rate}: {:?} k={} {:.2} bits/item, measured {measured:.3e} ({:.3}×)",
                size.layout,
                size.num_hashes,
                size.bits as f64 / capacity as f64,
                measured / error_rate
            );
            assert!(measured <= error_rate, "{size:?}: {measured}");
        }
    }
}

#[test]
fn big_blocked_layers_keep_the_rate_too() {
    for (growth, low, high) in [
        (Growth::NonScaling, 0.5, 1.0),
        (Growth::Scaling { expansion: 2 }, 0.4, 0.6),
    ] {
        let mut f = filter(8_000_000, 0.01, growth);
        assert_eq!(f.layers()[0].size().layout, Layout::Blocked);
        let measured = fill_and_measure(&mut f, 8_000_000, 1_000_000, 12);
        let ratio = measured / 0.01;
        eprintln!(
            "blocked {growth:?}: measured {measured:.3e} ({ratio:.3}×), {:.2} bits/item",
            f.bytes() as f64 * 8.0 / 8e6
        );
        assert!((low..=high).contains(&ratio), "{growth:?}: {ratio:.3}×");
    }
}

#[test]
fn scaling_rate_at_first_capacity_is_about_half_the_budget() {
    for (error_rate, queries) in [(1e-2, 200_000), (1e-3, 2_000_000)] {
        let mut f = filter(100_000, error_rate, Growth::Scaling { expansion: 2 });
        let measured = fill_and_measure(&mut f, 100_000, queries, 2);
        assert_eq!(f.layers().len(), 1);
        let ratio = measured / error_rate;
        eprintln!(
            "scaling ε={error_rate}: measured {measured:.3e} ({ratio:.3}×), {:.2} bits/item",
            f.bytes() as f64 * 8.0 / 1e5
        );
        assert!((0.4..=0.6).contains(&ratio), "ε={error_rate}: {ratio:.3}×");
    }
}

#[test]
fn after_tenfold_growth_the_summed_rate_stays_under_the_request() {
    for expansion in [1, 2, 4] {
        let mut f = filter(10_000, 0.01, Growth::Scaling { expansion });
        let measured = fill_and_measure(&mut f, 100_000, 400_000, 3);
        assert!(f.layers().len() >= 2, "expansion {expansion}");
        eprintln!(
            "after 10× growth, expansion {expansion}: {} layers, measured {measured:.4}",
            f.layers().len()
        );
        assert!(measured <= 0.01, "expansion {expansion}: {measured}");
        // The layers follow the growth rule.
        for (i, layer) in f.layers().iter().enumerate() {
            assert_eq!(
                layer.capacity(),
                10_000 * u64::from(expansion).pow(i as u32)
            );
            assert!((layer.error_rate() - 0.01 / 2f64.powi(i as i32 + 1)).abs() < 1e-15);
        }
    }
}

#[test]
fn items_are_counted_once_and_only_when_new() {
    let mut f = filter(1000, 0.01, Growth::Scaling { expansion: 2 });
    assert_eq!(f.insert(b"", &mut Unlimited), Ok(true));
    assert_eq!(f.insert(b"", &mut Unlimited), Ok(false));
    assert_eq!(f.insert(b"x\0y", &mut Unlimited), Ok(true));
    assert!(f.contains(b"") && f.contains(b"x\0y") && !f.contains(b"x"));
    assert_eq!(f.items(), 2);
}

#[test]
fn a_full_non_scaling_filter_refuses_new_items_and_keeps_old_ones() {
    let mut f = filter(10, 0.01, Growth::NonScaling);
    let mut added = 0;
    let mut i = 0u32;
    while added < 10 {
        if f.insert(&i.to_le_bytes(), &mut Unlimited) == Ok(true) {
            added += 1;
        }
        i += 1;
    }
    let before = f.try_clone(&mut Unlimited).unwrap();
    let mut j = 1_000_000u32;
    let refused = loop {
        match f.insert(&j.to_le_bytes(), &mut Unlimited) {
            Ok(false) => j += 1,
            other => break other,
        }
    };
    assert_eq!(refused, Err(InsertError::NonScalingFull));
    assert_eq!(f, before);
}

#[test]
fn growth_respects_the_byte_limits() {
    let mut f = filter(100, 0.01, Growth::Scaling { expansion: 2 });
    let mut budget = Budget::new(f.allocated_bytes() + 10, u64::MAX);
    let mut refused = None;
    for i in 0..1000u32 {
        if let Err(e) = f.insert(&i.to_le_bytes(), &mut budget) {
            refused = Some(e);
            break;
        }
    }
    assert!(
        matches!(refused, Some(InsertError::Limit(_))),
        "{refused:?}"
    );
    assert_eq!(f.layers().len(), 1);
    assert!(BloomFilter::new(*f.params(), &mut Budget::new(8, 8)).is_err());
}

fn grown_filter(seed: u64) -> BloomFilter {
    let mut f = filter(50, 0.02, Growth::Scaling { expansion: 3 });
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    for item in random_items(&mut rng, 500) {
        f.insert(&item, &mut Unlimited).unwrap();
    }
    f
}

/// The header of a complete filter, as SCANDUMP sends it.
fn encode_transfer_header(f: &BloomFilter) -> Vec<u8> {
    encode_header_as(f, f.bytes())
}

fn encode_whole(f: &BloomFilter) -> Vec<u8> {
    let mut bytes = encode_transfer_header(f);
    let mut bits = vec![0; f.bytes() as usize];
    f.read_bits(0, &mut bits);
    bytes.extend(bits);
    bytes
}

fn decode_whole(bytes: &[u8]) -> Option<BloomFilter> {
    // The header length follows from the layer count at offset 36, and the flags at offset 5
    // (bit 1: an 8-byte tightening ratio after the fixed fields).
    let layers = u32::from_le_bytes(bytes.get(36..40)?.try_into().ok()?) as usize;
    let tightening = if bytes.get(5)? & 2 != 0 { 8 } else { 0 };
    let header_len = 48 + tightening + 24 * layers.min(1000) + 8;
    let Filter::Scalable(mut f) =
        ready_filter(decode_header(bytes.get(..header_len)?, &mut Unlimited).ok()?)?
    else {
        return None;
    };
    let bits = bytes.get(header_len..)?;
    if bits.len() as u64 != f.bytes() {
        return None;
    }
    f.write_bits(0, bits);
    Some(f)
}

#[test]
fn encode_then_decode_is_the_identity() {
    let f = grown_filter(4);
    assert!(f.layers().len() >= 3);
    assert_eq!(
        decode_whole(&encode_whole(&f)),
        Some(f.try_clone(&mut Unlimited).unwrap())
    );
    let nonscaling = filter(77, 0.001, Growth::NonScaling);
    assert_eq!(decode_whole(&encode_whole(&nonscaling)), Some(nonscaling));
}

/// A scaling filter of tightening ratio `r` grown past its first layers.
fn tightened(r: f64, seed: u64) -> BloomFilter {
    let params = FilterParams {
        capacity: 1000,
        error_rate: 0.01,
        growth: Growth::Scaling { expansion: 2 },
        seed,
        tightening: r,
    };
    BloomFilter::new(params, &mut Unlimited).unwrap()
}

#[test]
fn tightening_one_half_sizes_layers_as_redisbloom_bit_for_bit() {
    for error_rate in [0.1, 0.01, 1e-3, 1e-9, 0.3333] {
        let params = FilterParams {
            capacity: 100,
            error_rate,
            growth: Growth::Scaling { expansion: 2 },
            seed: 1,
            tightening: crate::scalable::TIGHTENING_RATIO,
        };
        for index in 0..crate::scalable::MAX_LAYERS {
            // RedisBloom's series: ε·½^(i+1).
            let redisbloom = error_rate * crate::math::powi(0.5, index as u32 + 1);
            assert_eq!(
                params.layer_error_rate(index).to_bits(),
                redisbloom.to_bits(),
                "ε {error_rate}, layer {index}"
            );
        }
    }
}

#[test]
fn a_filter_of_another_tightening_meets_its_rate_and_keeps_its_ratio_through_the_encoding() {
    for r in [0.2, 0.8, 0.95] {
        let mut f = tightened(r, 77);
        // 15 000 items: layers of 1 000, 2 000, 4 000, 8 000 → four layers.
        let rate = fill_and_measure(&mut f, 15_000, 200_000, 5);
        assert_eq!(f.layers().len(), 4, "r {r}");
        // The layers' rates sum to ε·(1 − r⁴) < ε whatever r is.
        assert!(rate < 0.01, "r {r}: measured {rate}");
        let encoded = encode_whole(&f);
        assert_eq!(encoded[4], 3, "r {r}: format version");
        let decoded = decode_whole(&encoded).expect("decodes");
        assert_eq!(decoded.params().tightening, r);
        assert_eq!(decoded, f.try_clone(&mut Unlimited).unwrap());
    }
    // ½ stays at the version older releases read.
    assert_eq!(encode_whole(&tightened(0.5, 1))[4], 1);
}

#[test]
fn a_stored_tightening_ratio_must_be_one_the_encoder_writes() {
    let header = encode_transfer_header(&tightened(0.8, 3));
    let reseal = |patch: &dyn Fn(&mut Vec<u8>)| {
        let mut bytes = header.clone();
        patch(&mut bytes);
        let body = bytes.len() - 8;
        let checksum = xxhash_rust::xxh3::xxh3_64(&bytes[..body]);
        bytes[body..].copy_from_slice(&checksum.to_le_bytes());
        decode_header(&bytes, &mut Unlimited)
    };
    assert!(reseal(&|_| {}).is_ok());
    for ratio in [0.5, 0.0, 1.0, -0.5, f64::NAN, 2.0] {
        let refused = reseal(&|bytes| bytes[48..56].copy_from_slice(&f64::to_le_bytes(ratio)));
        assert!(refused.is_err(), "ratio {ratio}");
    }
    // Flag without version 3, version 3 without the flag.
    assert!(reseal(&|bytes| bytes[4] = 2).is_err());
    assert!(reseal(&|bytes| bytes[5] &= !2).is_err());
}

#[test]
fn scandump_then_loadchunk_rebuilds_the_filter() {
    let f = Filter::Scalable(grown_filter(5));
    let (mut iterator, header) = scandump_step(&f, 0);
    let mut copy = decode_load_header(&header, &mut Unlimited).unwrap();
    assert!(copy.ready().is_none());
    loop {
        let (next, chunk) = scandump_step(&f, iterator);
        if next == 0 {
            break;
        }
        load_chunk(&mut copy, next, &chunk).unwrap();
        iterator = next;
    }
    assert_eq!(copy.ready(), Some(&f));
    // A chunk for a complete filter, or out of order, is refused.
    let (next, chunk) = scandump_step(&f, 1);
    assert_eq!(load_chunk(&mut copy, next, &chunk), Err(ChunkError::Offset));
}

#[test]
fn chunks_are_tied_to_their_place_and_filter() {
    let f = Filter::Scalable(grown_filter(6));
    let other = Filter::Scalable(grown_filter(7));
    let (_, header) = scandump_step(&f, 0);
    let (next, chunk) = scandump_step(&f, 1);
    let (other_next, other_chunk) = scandump_step(&other, 1);
    assert_eq!(next, other_next);
    let mut copy = decode_load_header(&header, &mut Unlimited).unwrap();
    assert_eq!(
        load_chunk(&mut copy, next, &other_chunk),
        Err(ChunkError::BadData)
    );
    let mut flipped = chunk.clone();
    flipped[3] ^= 1;
    assert_eq!(
        load_chunk(&mut copy, next, &flipped),
        Err(ChunkError::BadData)
    );
    assert_eq!(
        load_chunk(&mut copy, next + 1, &chunk),
        Err(ChunkError::Offset)
    );
    assert_eq!(
        load_chunk(&mut copy, next, &chunk[..4]),
        Err(ChunkError::BadData)
    );
    assert_eq!(load_chunk(&mut copy, next, &chunk), Ok(()));
    assert!(CHUNK_BYTES >= f.bytes());
    assert!(copy.ready().is_some());
}

#[test]
fn decode_refuses_what_the_limits_forbid() {
    let f = grown_filter(8);
    let header = encode_transfer_header(&f);
    let mut budget = Budget::new(f.allocated_bytes() - 1, u64::MAX);
    assert!(matches!(
        decode_header(&header, &mut budget),
        Err(super::DecodeError::Limit(_))
    ));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn truncated_headers_are_refused(cut in 0usize..200) {
        let header = encode_transfer_header(&grown_filter(9));
        let cut = cut.min(header.len() - 1);
        prop_assert!(decode_header(&header[..cut], &mut Unlimited).is_err());
    }

    #[test]
    fn mutated_headers_are_refused(at in 0usize..400, mask in 1u8..=255) {
        let mut header = encode_transfer_header(&grown_filter(10));
        let at = at % header.len();
        header[at] ^= mask;
        prop_assert!(decode_header(&header, &mut Unlimited).is_err());
    }

    #[test]
    fn arbitrary_bytes_never_panic_the_decoder(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let _ = decode_header(&bytes, &mut Unlimited);
        let _ = decode_whole(&bytes);
    }

    /// Headers with a valid checksum but arbitrary fields: the decoder must check every field,
    /// not lean on the checksum.
    #[test]
    fn resealed_mutations_decode_only_to_consistent_filters(at in 0usize..200, value in any::<u8>()) {
        let mut header = encode_transfer_header(&grown_filter(11));
        let body = header.len() - 8;
        header[at % body] = value;
        let checksum = xxhash_rust::xxh3::xxh3_64(&header[..body]);
        header[body..].copy_from_slice(&checksum.to_le_bytes());
        if let Ok(stored) = decode_header(&header, &mut Budget::new(1 << 24, 1 << 24)) {
            let Filter::Scalable(f) = stored.filter() else { panic!("an RBLM header decoded as another kind") };
            prop_assert!(f.bytes() <= 1 << 24);
            prop_assert!(f.items() <= f.capacity());
            for (index, layer) in f.layers().iter().enumerate() {
                prop_assert!(f.params().check_layer(index, layer.size()).is_ok());
            }
            let re = stored.encode_header();
            prop_assert_eq!(re, header);
        }
    }

    #[test]
    fn no_false_negatives_for_any_items(items in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 1..300)) {
        let mut f = filter(16, 0.05, Growth::Scaling { expansion: 2 });
        for item in &items {
            f.insert(item, &mut Unlimited).unwrap();
        }
        for item in &items {
            prop_assert!(f.contains(item));
        }
    }
}

#[test]
fn batch_operations_match_one_at_a_time() {
    let mut rng = ChaCha8Rng::seed_from_u64(13);
    let mut items = random_items(&mut rng, 200);
    // Repeats inside one batch and across batches.
    items.extend_from_within(10..60);
    let slices: Vec<&[u8]> = items.iter().map(|item| item.as_slice()).collect();
    for growth in [Growth::Scaling { expansion: 2 }, Growth::NonScaling] {
        let mut one_by_one = filter(120, 0.01, growth);
        let mut expected = Vec::new();
        for item in &slices {
            let result = one_by_one.insert(item, &mut Unlimited);
            expected.push(result);
            if result.is_err() {
                break;
            }
        }
        let mut batched = filter(120, 0.01, growth);
        let mut outcome = AddOutcome::default();
        batched.insert_many(slices.iter().copied(), &mut Unlimited, &mut outcome);
        let mut got: Vec<Result<bool, InsertError>> =
            outcome.added.iter().map(|&new| Ok(new)).collect();
        got.extend(outcome.error.map(Err));
        assert_eq!(got, expected, "{growth:?}");
        assert_eq!(batched, one_by_one, "{growth:?}");
        let mut found = Vec::new();
        batched.contains_many(slices.iter().copied(), |f| found.push(f));
        let single: Vec<bool> = slices.iter().map(|item| batched.contains(item)).collect();
        assert_eq!(found, single);
    }
}

/// Reseals a header after editing it.
fn reseal(header: &mut [u8]) {
    let body = header.len() - 8;
    let checksum = xxhash_rust::xxh3::xxh3_64(&header[..body]);
    header[body..].copy_from_slice(&checksum.to_le_bytes());
}

#[test]
fn headers_are_version_2_exactly_when_a_layer_uses_several_lines() {
    // Layer 0 (offset 48): items, bits, hashes at 64, layout at 68.
    let lines = filter(500_000, 1e-4, Growth::NonScaling);
    assert_eq!(lines.layers()[0].size().layout, Layout::Lines(2));
    let header = encode_transfer_header(&lines);
    assert_eq!((header[4], header[68]), (2, 2));
    assert_eq!(
        decode_whole(&encode_whole(&lines)),
        Some(lines.try_clone(&mut Unlimited).unwrap())
    );
    let blocked = filter(500_000, 1e-2, Growth::NonScaling);
    assert_eq!(blocked.layers()[0].size().layout, Layout::Blocked);
    assert_eq!(
        (
            encode_transfer_header(&blocked)[4],
            encode_transfer_header(&blocked)[68]
        ),
        (1, 1)
    );
    let classic = filter(10_000, 1e-4, Growth::NonScaling);
    assert_eq!(
        (
            encode_transfer_header(&classic)[4],
            encode_transfer_header(&classic)[68]
        ),
        (1, 0)
    );

    // Version 1 cannot hold 2 lines, version 2 is only written for them.
    let mut old = header.clone();
    old[4] = 1;
    reseal(&mut old);
    assert_eq!(
        decode_header(&old, &mut Unlimited),
        Err(super::DecodeError::Corrupt("format version"))
    );
    let mut new = encode_transfer_header(&classic);
    new[4] = 2;
    reseal(&mut new);
    assert_eq!(
        decode_header(&new, &mut Unlimited),
        Err(super::DecodeError::Corrupt("format version"))
    );
    // Lines past 4, a hash count that does not divide among the lines, more than 16 per line,
    // and bits that are not whole lines are refused.
    for (at, value, what) in [
        (68, 5u32, "layout"),
        (64, 13, "hash count"),
        (64, 34, "hash count"),
        (56, 500_000 * 20 + 64, "bit count"),
    ] {
        let mut bad = header.clone();
        let width = if at == 56 { 8 } else { 4 };
        bad[at..at + width].copy_from_slice(&u64::from(value).to_le_bytes()[..width]);
        reseal(&mut bad);
        assert_eq!(
            decode_header(&bad, &mut Unlimited),
            Err(super::DecodeError::Corrupt(what)),
            "{what}"
        );
    }
}

/// A scaling filter whose layers change layout as they tighten: every layer keeps answering
/// through growth and an encode/decode round trip.
#[test]
fn scaling_filters_mix_layouts() {
    let mut f = filter(200_000, 2e-2, Growth::Scaling { expansion: 2 });
    let mut rng = ChaCha8Rng::seed_from_u64(30);
    let items = random_items(&mut rng, 200_000 * 8);
    for item in &items {
        f.insert(item, &mut Unlimited).unwrap();
    }
    let layouts: Vec<Layout> = f.layers().iter().map(|l| l.size().layout).collect();
    assert!(
        layouts.contains(&Layout::Blocked) && layouts.contains(&Layout::Lines(2)),
        "{layouts:?}"
    );
    assert!(items.iter().all(|item| f.contains(item)));
    assert_eq!(
        decode_whole(&encode_whole(&f)),
        Some(f.try_clone(&mut Unlimited).unwrap())
    );
}

/// MEMORY USAGE counts a filter's bookkeeping (see `StoredValue::memory_usage`, allocation
/// sizes): a key's value, a scalable filter's record inline, is one block of jemalloc's
/// 80-byte class (64 until filters kept their tightening ratio), each layer's record 56 bytes
/// of the layers' block.
#[test]
fn bookkeeping_sizes_stay_as_released() {
    assert_eq!(std::mem::size_of::<Layer>(), 56);
    assert_eq!(std::mem::size_of::<BloomFilter>(), 64);
    assert_eq!(std::mem::size_of::<crate::stored::StoredValue>(), 72);
    // A window filter's record, boxed: jemalloc's 160-byte class.
    assert_eq!(std::mem::size_of::<crate::window::WindowFilter>(), 160);
}

/// A batch lookup, which tests every item's first line before fetching the others of those that
/// pass, answers as looking each item up whole does: layouts of one, two and four lines after a
/// classic layer, present and absent items mixed.
#[test]
fn batch_lookups_in_lines_match_one_at_a_time() {
    let mut rng = ChaCha8Rng::seed_from_u64(29);
    // Capacities whose second layer is big enough for lines (the first is classic).
    for (error_rate, capacity) in [(1e-2, 220_000), (1e-4, 110_000), (1e-9, 50_000)] {
        let mut f = filter(capacity, error_rate, Growth::Scaling { expansion: 2 });
        let members = random_items(&mut rng, capacity as usize + 20_000);
        for item in &members {
            f.insert(item, &mut Unlimited).unwrap();
        }
        let layouts: Vec<Layout> = f.layers().iter().map(|layer| layer.size().layout).collect();
        assert!(
            layouts.len() == 2 && layouts[1] != Layout::Classic,
            "{layouts:?}"
        );
        let mut queries = random_items(&mut rng, 5_000);
        queries.extend_from_slice(&members[..5_000]);
        queries.extend_from_slice(&members[members.len() - 5_000..]);
        queries.rotate_left(2_500);
        let mut found = Vec::new();
        f.contains_many(queries.iter().map(|item| item.as_slice()), |answer| {
            found.push(answer)
        });
        let whole: Vec<bool> = queries.iter().map(|item| f.contains(item)).collect();
        assert_eq!(found, whole, "{error_rate}");
        assert!(whole[2_500..12_500].iter().all(|&answer| answer));
    }
}

/// The bit positions of `hash` in a layer of `size`, straight from the hash's definitions: k
/// double-hashed positions when classic, else per line j its line's 512 bits offset by each probe.
fn reference_positions(hash: &ItemHash, size: super::LayerSize) -> Vec<u64> {
    match size.layout {
        Layout::Classic => hash.positions(size.bits, size.num_hashes).collect(),
        Layout::Blocked | Layout::Lines(_) => (0..size.layout.lines() as usize)
            .flat_map(|j| {
                let line = hash.line(j, size.bits / 512);
                hash.line_probes(j, size.hashes_per_line())
                    .map(move |p| line * 512 + u64::from(p))
            })
            .collect(),
    }
}

#[test]
fn batch_adds_set_the_reference_bits_in_every_layout() {
    let mut rng = ChaCha8Rng::seed_from_u64(31);
    let shapes = [
        (Layout::Classic, 7),
        (Layout::Classic, 20),
        (Layout::Blocked, 1),
        (Layout::Blocked, 5),
        (Layout::Blocked, 6),
        (Layout::Blocked, 7),
        (Layout::Blocked, 8),
        (Layout::Blocked, 16),
        (Layout::Lines(2), 5),
        (Layout::Lines(2), 6),
        (Layout::Lines(2), 13),
        (Layout::Lines(3), 5),
        (Layout::Lines(3), 7),
        (Layout::Lines(4), 6),
        (Layout::Lines(4), 7),
        (Layout::Lines(4), 8),
    ];
    let capacity = 2_000u64;
    for (layout, per_line) in shapes {
        let num_hashes = per_line * layout.lines().max(1);
        let size = super::LayerSize {
            bits: capacity * 64 / 512 * 512,
            num_hashes,
            layout,
        };
        // A rate whose optimal hash count is about num_hashes, so that the shape is admitted.
        let params = FilterParams {
            capacity,
            error_rate: (0.5f64.powi(num_hashes as i32) / 0.9).min(0.5),
            growth: Growth::NonScaling,
            seed: rng.random(),
            tightening: crate::scalable::TIGHTENING_RATIO,
        };
        let mut f = BloomFilter::with_first_layer(params, size, &mut Unlimited).unwrap();
        let mut words = vec![0u64; (size.bits / 64) as usize];
        let mut items = random_items(&mut rng, 1_500);
        items.extend_from_within(100..400);
        for batch in items.chunks(700) {
            let mut outcome = AddOutcome::default();
            f.insert_many(
                batch.iter().map(|i| i.as_slice()),
                &mut Unlimited,
                &mut outcome,
            );
            let expected: Vec<bool> = batch
                .iter()
                .map(|item| {
                    let positions = reference_positions(&f.hash(item), size);
                    let new = positions
                        .iter()
                        .any(|&p| words[(p / 64) as usize] & (1 << (p % 64)) == 0);
                    for p in positions {
                        words[(p / 64) as usize] |= 1 << (p % 64);
                    }
                    new
                })
                .collect();
            assert_eq!(outcome.added, expected, "{layout:?} × {per_line}");
            assert_eq!(outcome.error, None);
        }
        let mut bytes = vec![0u8; size.bytes() as usize];
        f.read_bits(0, &mut bytes);
        let reference: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        assert!(bytes == reference, "{layout:?} × {per_line}: bits differ");
        let queries = random_items(&mut rng, 2_000);
        let mut found = Vec::new();
        f.contains_many(
            queries.iter().chain(&items).map(|i| i.as_slice()),
            |answer| found.push(answer),
        );
        let expected: Vec<bool> = queries
            .iter()
            .chain(&items)
            .map(|item| {
                reference_positions(&f.hash(item), size)
                    .iter()
                    .all(|&p| words[(p / 64) as usize] & (1 << (p % 64)) != 0)
            })
            .collect();
        assert_eq!(found, expected, "{layout:?} × {per_line}");
        assert!(found[2_000..].iter().all(|&answer| answer));
    }
}

/// Test-then-set of one item over reference bits, one vector of words per layer: present (and
/// nothing changes) when every probe of some layer is set; else its probes are set in the newest
/// layer.
fn reference_insert(layers: &mut [Vec<u64>], sizes: &[super::LayerSize], hash: &ItemHash) -> bool {
    let set_in = |words: &[u64], size| {
        reference_positions(hash, size)
            .iter()
            .all(|&p| words[(p / 64) as usize] & (1 << (p % 64)) != 0)
    };
    if layers
        .iter()
        .zip(sizes)
        .any(|(words, &size)| set_in(words, size))
    {
        return false;
    }
    let (newest, size) = (layers.last_mut().unwrap(), *sizes.last().unwrap());
    for p in reference_positions(hash, size) {
        newest[(p / 64) as usize] |= 1 << (p % 64);
    }
    true
}

#[test]
fn single_adds_answer_and_set_as_test_then_set_in_every_layout() {
    let mut rng = ChaCha8Rng::seed_from_u64(37);
    let shapes = [
        (Layout::Classic, 7),
        (Layout::Blocked, 1),
        (Layout::Blocked, 7),
        (Layout::Blocked, 16),
        (Layout::Lines(2), 5),
        (Layout::Lines(2), 13),
        (Layout::Lines(3), 7),
        (Layout::Lines(4), 6),
        (Layout::Lines(4), 8),
    ];
    let capacity = 300u64;
    for (layout, per_line) in shapes {
        let num_hashes = per_line * layout.lines().max(1);
        let first = super::LayerSize {
            bits: capacity * 64 / 512 * 512,
            num_hashes,
            layout,
        };
        let params = FilterParams {
            capacity,
            error_rate: (0.5f64.powi(num_hashes as i32) / 0.9).min(0.5),
            growth: Growth::Scaling { expansion: 2 },
            seed: rng.random(),
            tightening: crate::scalable::TIGHTENING_RATIO,
        };
        let context = format!("{layout:?} × {per_line}");
        let mut f = BloomFilter::with_first_layer(params, first, &mut Unlimited)
            .unwrap_or_else(|error| panic!("{context}: {error:?}"));
        let (mut layers, mut sizes) = (vec![vec![0u64; (first.bits / 64) as usize]], vec![first]);
        // Fresh items past the first layer's capacity (the filter grows), then items again.
        let mut items = random_items(&mut rng, 1_000);
        items.extend_from_within(200..500);
        let (mut new, mut present) = (0, 0);
        for item in &items {
            let full = f.layers().last().unwrap().is_full();
            let hash = f.hash(item);
            let (added, grown) = f.insert_one(item, &mut Unlimited).unwrap();
            if let Some(grown) = grown {
                assert!(full, "{context}: grew with room");
                assert_eq!(grown.index, layers.len(), "{context}");
                layers.push(vec![0u64; (grown.size.bits / 64) as usize]);
                sizes.push(grown.size);
            }
            let expected = reference_insert(&mut layers, &sizes, &hash);
            assert_eq!(added, expected, "{context}: the answer for {item:x?}");
            assert_eq!(grown.is_some(), full && expected, "{context}");
            new += usize::from(added);
            present += usize::from(!added);
        }
        assert!(
            layers.len() >= 3 && new > 900 && present >= 300,
            "{context}: {new} {present}"
        );
        for (i, (layer, words)) in f.layers().iter().zip(&layers).enumerate() {
            let mut bytes = vec![0u8; layer.bytes() as usize];
            layer.read_bytes(0, &mut bytes);
            let reference: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
            assert!(
                bytes == reference,
                "{context}: the bits of layer {i} differ"
            );
        }
        for item in random_items(&mut rng, 2_000).iter().chain(&items) {
            let hash = f.hash(item);
            let expected = layers.iter().zip(&sizes).any(|(words, &size)| {
                reference_positions(&hash, size)
                    .iter()
                    .all(|&p| words[(p / 64) as usize] & (1 << (p % 64)) != 0)
            });
            assert_eq!(
                f.contains(item),
                expected,
                "{context}: the lookup of {item:x?}"
            );
        }
    }
}
