//! Partitioned filters (docs/partitions.md): the specification's test vectors, the accuracy of
//! the union, the NONSCALING margin, and the partition identity in every encoding.

use std::path::Path;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::Value;
use xxhash_rust::xxh3::xxh3_64_with_seed;

use rustbloom_core::partition::{
    self, key_slot, partition_capacity, partition_key, route, slot_tag, Descriptor, Partition,
    PartitionError, PartitionGrowth,
};
use rustbloom_core::stored::{decode_header, decode_value};
use rustbloom_core::transfer::{decode_load_header, load_chunk, load_commands};
use rustbloom_core::{
    BloomFilter, DecodeError, Filter, FilterParams, Growth, InsertError, StoredFilter, StoredValue,
    Unlimited, WindowFilter, WindowParams,
};

fn vectors() -> Value {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/partitioning-vectors.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn unhex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
        .collect()
}

fn number(value: &Value) -> u64 {
    match value {
        Value::String(text) => text.parse().unwrap(),
        other => other.as_u64().unwrap(),
    }
}

#[test]
fn routing_vectors() {
    let vectors = vectors();
    let routing = vectors["routing"].as_array().unwrap();
    assert!(routing.len() >= 200);
    for vector in routing {
        let item = unhex(vector["item_hex"].as_str().unwrap());
        let seed = number(&vector["routing_seed"]);
        let partitions = number(&vector["partitions"]) as u32;
        assert_eq!(
            xxh3_64_with_seed(&item, seed),
            number(&vector["xxh3_64"]),
            "{vector}"
        );
        let expected = number(&vector["partition"]) as u32;
        assert_eq!(route(&item, partitions, seed), expected, "{vector}");
        let home = Partition::new(expected, partitions, seed).unwrap();
        assert_eq!(home.route(&item), expected);
        assert_eq!(home.first_misrouted([item.as_slice()]), None);
    }
}

#[test]
fn key_vectors() {
    let vectors = vectors();
    for vector in vectors["keys"].as_array().unwrap() {
        let name = vector["name"].as_str().unwrap().as_bytes();
        let partitions = number(&vector["partitions"]) as u32;
        assert_eq!(u64::from(key_slot(name)), number(&vector["name_slot"]));
        let keys = vector["keys"].as_array().unwrap();
        let slots = vector["slots"].as_array().unwrap();
        assert_eq!(keys.len(), partitions as usize);
        for (i, (key, slot)) in keys.iter().zip(slots).enumerate() {
            let ours = partition_key(name, i as u32, partitions);
            assert_eq!(ours, key.as_str().unwrap().as_bytes(), "{vector}");
            assert_eq!(u64::from(key_slot(&ours)), number(slot), "{vector}");
        }
    }
    for vector in vectors["slot_tags"].as_array().unwrap() {
        let slot = number(&vector["slot"]) as u16;
        let tag = vector["tag"].as_str().unwrap();
        assert_eq!(slot_tag(slot).to_string(), tag);
        assert_eq!(key_slot(tag.as_bytes()), slot);
    }
    // The Redis documentation's own examples.
    assert_eq!(key_slot(b"somekey"), 11058);
    assert_eq!(key_slot(b"foo{hash_tag}"), 2515);
    // An empty tag is no tag: the whole key is hashed.
    assert_eq!(
        key_slot(b"foo{}{bar}"),
        partition::crc16(b"foo{}{bar}") % 16384
    );
    assert_eq!(key_slot(b"{a}b{c}"), key_slot(b"a"));
}

#[test]
fn every_slot_has_a_tag_below_110000() {
    for slot in 0..partition::SLOTS {
        let tag = slot_tag(slot);
        assert!(tag < 110_000);
        assert_eq!(key_slot(tag.to_string().as_bytes()), slot);
    }
}

#[test]
fn capacity_vectors() {
    for vector in vectors()["capacity"].as_array().unwrap() {
        let capacity = partition_capacity(
            number(&vector["items"]),
            number(&vector["partitions"]) as u32,
            vector["nonscaling"].as_bool().unwrap(),
        );
        assert_eq!(capacity, number(&vector["partition_capacity"]), "{vector}");
    }
}

fn random_items(rng: &mut ChaCha8Rng, count: usize) -> Vec<[u8; 16]> {
    (0..count).map(|_| rng.random()).collect()
}

/// P partitions for `items` items at `error_rate`, with distinct random filter seeds.
fn partitions(
    rng: &mut ChaCha8Rng,
    items: u64,
    count: u32,
    error_rate: f64,
    growth: Growth,
) -> Vec<BloomFilter> {
    let nonscaling = growth == Growth::NonScaling;
    (0..count)
        .map(|_| {
            let params = FilterParams {
                capacity: partition_capacity(items, count, nonscaling),
                error_rate,
                growth,
                seed: rng.random(),
                tightening: rustbloom_core::scalable::TIGHTENING_RATIO,
            };
            BloomFilter::new(params, &mut Unlimited).unwrap()
        })
        .collect()
}

#[test]
fn the_union_of_routed_partitions_answers_at_its_error_rate() {
    const ITEMS: usize = 100_000;
    const P: u32 = 64;
    for (error_rate, seed) in [(1e-2, 1u64), (1e-3, 2)] {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let routing_seed: u64 = rng.random();
        let mut filters = partitions(
            &mut rng,
            ITEMS as u64,
            P,
            error_rate,
            Growth::Scaling { expansion: 2 },
        );
        let items = random_items(&mut rng, ITEMS);
        for item in &items {
            let home = route(item, P, routing_seed) as usize;
            filters[home].insert(item, &mut Unlimited).unwrap();
        }
        for item in &items {
            assert!(filters[route(item, P, routing_seed) as usize].contains(item));
        }
        let queries = 4 * ITEMS;
        let false_positives = (0..queries)
            .filter(|_| {
                let item: [u8; 16] = rng.random();
                filters[route(&item, P, routing_seed) as usize].contains(&item)
            })
            .count();
        let measured = false_positives as f64 / queries as f64;
        assert!(
            measured <= error_rate,
            "measured {measured} over {queries} non-members, asked for {error_rate}"
        );
    }
}

#[test]
fn nonscaling_partitions_sized_by_the_rule_hold_their_share() {
    const ITEMS: usize = 100_000;
    const P: u32 = 64;
    for seed in [11u64, 12, 13] {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let routing_seed: u64 = rng.random();
        let mut filters = partitions(&mut rng, ITEMS as u64, P, 1e-2, Growth::NonScaling);
        for item in random_items(&mut rng, ITEMS) {
            let home = route(&item, P, routing_seed) as usize;
            assert_ne!(
                filters[home].insert(&item, &mut Unlimited),
                Err(InsertError::NonScalingFull),
                "seed {seed}: partition {home} filled"
            );
        }
        let fullest = filters.iter().map(BloomFilter::items).max().unwrap();
        assert!(fullest < partition_capacity(ITEMS as u64, P, true));
        // Sized at exactly N/P instead, some partition fills: the margin is what prevents it.
        assert!(fullest > partition_capacity(ITEMS as u64, P, false));
    }
}

fn scalable(seed: u64) -> Filter {
    let params = FilterParams {
        capacity: 1000,
        error_rate: 1e-2,
        growth: Growth::Scaling { expansion: 2 },
        seed,
        tightening: rustbloom_core::scalable::TIGHTENING_RATIO,
    };
    Filter::Scalable(BloomFilter::new(params, &mut Unlimited).unwrap())
}

fn window(seed: u64) -> Filter {
    let params = WindowParams {
        error_rate: 1e-2,
        capacity: 300,
        window_ms: 60_000,
        seed,
    };
    Filter::Window(Box::new(
        WindowFilter::new(params, 0, &mut Unlimited).unwrap(),
    ))
}

#[test]
fn a_partition_whose_filter_seed_is_the_routing_seed_is_refused() {
    let partition = Partition::new(1, 4, 99).unwrap();
    for filter in [scalable(99), window(99)] {
        assert_eq!(
            StoredFilter::ready_filter(filter).with_partition(partition),
            Err(PartitionError::SeedReused)
        );
    }
    assert!(StoredFilter::ready_filter(scalable(98))
        .with_partition(partition)
        .is_ok());
    assert_eq!(Partition::new(4, 4, 0), Err(PartitionError::Index));
    assert_eq!(Partition::new(0, 0, 0), Err(PartitionError::Count));
    assert_eq!(Partition::new(0, 4097, 0), Err(PartitionError::Count));
}

fn partition_of(filter: Filter, index: u32, count: u32, routing_seed: u64) -> StoredFilter {
    let partition = Partition::new(index, count, routing_seed).unwrap();
    StoredFilter::ready_filter(filter)
        .with_partition(partition)
        .unwrap()
}

/// Saves as RDB does (header, then the bits) and loads it back.
fn rdb_round_trip(stored: &StoredFilter) -> StoredFilter {
    let mut copy = decode_header(&stored.encode_header(), &mut Unlimited).unwrap();
    for (offset, len) in stored.pieces(1 << 20) {
        let mut bits = vec![0; len as usize];
        stored.filter().read_bits(offset, &mut bits);
        copy.write_bits(offset, &bits);
    }
    copy
}

/// Moves as SCANDUMP / BF.LOADCHUNK do.
fn scandump_round_trip(stored: &StoredFilter) -> StoredFilter {
    let (mut iterator, header) = stored.scandump_step(0);
    let mut copy = decode_load_header(&header, &mut Unlimited).unwrap();
    loop {
        let (next, chunk) = stored.scandump_step(iterator);
        if next == 0 {
            break;
        }
        load_chunk(&mut copy, next, &chunk).unwrap();
        iterator = next;
    }
    copy
}

/// Replays the AOF rewrite's BF.LOADCHUNK commands.
fn aof_round_trip(stored: &StoredFilter) -> StoredFilter {
    let mut commands = load_commands(stored);
    let (_, header) = commands.next().unwrap();
    let mut copy = decode_load_header(&header, &mut Unlimited).unwrap();
    for (iterator, chunk) in commands {
        load_chunk(&mut copy, iterator, &chunk).unwrap();
    }
    copy
}

#[test]
fn every_encoding_keeps_the_identity() {
    for filter in [scalable(5), window(5)] {
        let mut stored = partition_of(filter, 2, 3, 77);
        let partition = *stored.partition().unwrap();
        if let Some(Filter::Scalable(filter)) = stored.ready_mut() {
            for item in (0..200u32).map(u32::to_le_bytes) {
                if partition.route(&item) == 2 {
                    filter.insert(&item, &mut Unlimited).unwrap();
                }
            }
        }
        for copy in [
            rdb_round_trip(&stored),
            scandump_round_trip(&stored),
            aof_round_trip(&stored),
            stored.try_clone(&mut Unlimited).unwrap(),
        ] {
            assert_eq!(copy, stored);
            assert_eq!(copy.partition(), Some(&partition));
        }
        // A plain filter's header is unchanged by this: the identity is a wrapper in front.
        let plain = StoredFilter::ready_filter(stored.filter().try_clone(&mut Unlimited).unwrap());
        let wrapped = stored.encode_header();
        assert_eq!(&wrapped[..4], b"RBLP");
        assert!(wrapped.ends_with(&plain.encode_header()));
        assert_eq!(rdb_round_trip(&plain).partition(), None);
    }
}

#[test]
fn a_damaged_or_inconsistent_identity_is_refused() {
    let stored = partition_of(scalable(5), 2, 3, 77);
    let header = stored.encode_header();
    for at in [4, 8, 12, 16, 24, 40] {
        let mut bad = header.clone();
        bad[at] ^= 1;
        assert!(matches!(
            decode_header(&bad, &mut Unlimited),
            Err(DecodeError::Corrupt(_))
        ));
    }
    for cut in [0, 10, 31, 32, 40] {
        assert!(decode_header(&header[..cut], &mut Unlimited).is_err());
    }
    // An identity whose routing seed is the filter's own seed: refused on load too.
    let inner = StoredFilter::ready_filter(scalable(77)).encode_header();
    let reused = partition::encode_identity(&Partition::new(0, 3, 77).unwrap(), &inner);
    assert!(matches!(
        decode_header(&reused, &mut Unlimited),
        Err(DecodeError::Corrupt(_))
    ));
    // A partition wrapped twice.
    let twice = partition::encode_identity(&Partition::new(0, 3, 1).unwrap(), &header);
    assert!(decode_header(&twice, &mut Unlimited).is_err());
}

#[test]
fn descriptors_round_trip_and_are_not_filters() {
    let growths = [
        PartitionGrowth::Scaling { expansion: 4 },
        PartitionGrowth::NonScaling,
        PartitionGrowth::Window { window_ms: 60_000 },
    ];
    for growth in growths {
        let descriptor = Descriptor::new(16, u64::MAX, 1_000_000_000, 1e-3, growth).unwrap();
        let nonscaling = growth == PartitionGrowth::NonScaling;
        assert_eq!(
            descriptor.partition_capacity(),
            partition_capacity(1_000_000_000, 16, nonscaling)
        );
        let bytes = descriptor.encode();
        assert_eq!(
            decode_value(&bytes, &mut Unlimited),
            Ok(StoredValue::Descriptor(descriptor))
        );
        assert!(decode_header(&bytes, &mut Unlimited).is_err());
        for at in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[at] ^= 0x10;
            assert!(Descriptor::decode(&bad).is_err(), "byte {at}");
        }
        assert_eq!(descriptor.partition(15), Partition::new(15, 16, u64::MAX));
    }
    assert_eq!(
        Descriptor::new(0, 1, 10, 0.01, PartitionGrowth::NonScaling),
        Err(PartitionError::Count)
    );
    assert_eq!(
        Descriptor::new(2, 1, 4 << 30, 0.01, PartitionGrowth::NonScaling),
        Err(PartitionError::Capacity)
    );
    assert_eq!(
        Descriptor::new(2, 1, 10, 1.0, PartitionGrowth::NonScaling),
        Err(PartitionError::Parameters)
    );
}

/// `descriptor`'s saved bytes with its partition capacity replaced by `c`, checksum correct.
fn with_partition_capacity(descriptor: &Descriptor, c: u64) -> Vec<u8> {
    let mut bytes = descriptor.encode();
    bytes[28..36].copy_from_slice(&c.to_le_bytes());
    let sum = xxhash_rust::xxh3::xxh3_64(&bytes[..52]);
    bytes[52..].copy_from_slice(&sum.to_le_bytes());
    bytes
}

#[test]
fn a_descriptor_whose_partition_capacity_is_not_the_rules_is_refused() {
    // N = 2^40 over one partition holds c = 2^40 by the rule, past the cap: whatever c it
    // claims, BF.RESERVE ... PARTITIONS (its AOF rewrite) could not create it.
    let small =
        Descriptor::new(1, 1, 1000, 0.01, PartitionGrowth::Scaling { expansion: 2 }).unwrap();
    let mut huge = with_partition_capacity(&small, 1);
    huge[20..28].copy_from_slice(&(1u64 << 40).to_le_bytes());
    let sum = xxhash_rust::xxh3::xxh3_64(&huge[..52]);
    huge[52..].copy_from_slice(&sum.to_le_bytes());
    assert!(matches!(
        Descriptor::decode(&huge),
        Err(DecodeError::Corrupt(_))
    ));
    // A NONSCALING descriptor of 1000 items over 4 holds c = 334: c = 1 is refused, not
    // silently recomputed.
    let nonscaling = Descriptor::new(4, 1, 1000, 0.01, PartitionGrowth::NonScaling).unwrap();
    assert_eq!(nonscaling.partition_capacity(), 334);
    assert!(Descriptor::decode(&with_partition_capacity(&nonscaling, 1)).is_err());
    assert_eq!(
        Descriptor::decode(&with_partition_capacity(&nonscaling, 334)),
        Ok(nonscaling)
    );
    // N = 2^64 - 1 cannot be spread over at most 4096 partitions of at most 2^30.
    for p in [1, 4096] {
        let mut max = with_partition_capacity(&nonscaling, 1 << 30);
        max[8..12].copy_from_slice(&u32::to_le_bytes(p));
        max[20..28].copy_from_slice(&u64::MAX.to_le_bytes());
        let sum = xxhash_rust::xxh3::xxh3_64(&max[..52]);
        max[52..].copy_from_slice(&sum.to_le_bytes());
        assert!(Descriptor::decode(&max).is_err(), "P = {p}");
    }
}

#[test]
fn one_nonscaling_partition_holds_what_a_plain_nonscaling_filter_may() {
    let max = 1u64 << 30;
    assert_eq!(partition_capacity(max, 1, true), max);
    let descriptor = Descriptor::new(1, 1, max, 0.01, PartitionGrowth::NonScaling).unwrap();
    assert_eq!(descriptor.partition_capacity(), max);
    assert_eq!(Descriptor::decode(&descriptor.encode()), Ok(descriptor));
    // Below the cap the rule keeps its one extra item; above it with two partitions, c is
    // still more than the cap (their spread is not all N).
    assert_eq!(partition_capacity(max - 1, 1, true), max);
    assert_eq!(partition_capacity(5, 1, true), 6);
    assert!(partition_capacity(2 * max, 2, true) > max);
}
