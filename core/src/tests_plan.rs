//! The command plan's contract with the core: one budget per operation, growth that replays from
//! its recorded shape, and a decoder that bounds what a forged header may claim.

use xxhash_rust::xxh3::xxh3_64;

use super::budget::LimitError;
use super::encoding::DecodeError;
use super::scalable::encoding::encode_header_as;
use super::scalable::PushError;
use super::stored::decode_header;
use super::{AddOutcome, BloomFilter, Budget, FilterParams, Growth, InsertError, Unlimited};

fn params(capacity: u64, expansion: u32) -> FilterParams {
    FilterParams {
        capacity,
        error_rate: 0.01,
        growth: Growth::Scaling { expansion },
        seed: 7,
        tightening: crate::scalable::TIGHTENING_RATIO,
    }
}

fn items(count: u32) -> Vec<[u8; 4]> {
    (0..count).map(u32::to_le_bytes).collect()
}

#[test]
fn one_budget_is_charged_for_every_layer_an_operation_pushes() {
    // Layer sizes 1, 4096 and 16.7M items: one batch of 4,300 crosses two boundaries.
    let mut filter = BloomFilter::new(params(1, 4096), &mut Unlimited).unwrap();
    let third_layer = params(1, 4096).layer_size(2).unwrap().bytes();
    let mut budget = Budget::new(u64::MAX, third_layer / 2);
    let mut outcome = AddOutcome::default();
    let batch = items(4300);
    filter.insert_many(
        batch.iter().map(|item| &item[..]),
        &mut budget,
        &mut outcome,
    );
    assert!(matches!(
        outcome.error,
        Some(InsertError::Limit(LimitError::ServerMemory { .. }))
    ));
    assert_eq!(filter.layers().len(), 2, "the third layer was refused");
    assert_eq!(outcome.added.len(), 1 + 4096);
    assert_eq!(outcome.grown.len(), 1);
    assert_eq!(outcome.grown[0].first_item, 1);
}

#[test]
fn a_replica_that_pushes_the_recorded_shapes_ends_identical() {
    let mut primary = BloomFilter::new(params(10, 2), &mut Unlimited).unwrap();
    let batch = items(500);
    let mut outcome = AddOutcome::default();
    primary.insert_many(
        batch.iter().map(|item| &item[..]),
        &mut Unlimited,
        &mut outcome,
    );
    assert!(outcome.grown.len() >= 4);

    let first = primary.layers()[0].size();
    let mut replica = BloomFilter::with_first_layer(params(10, 2), first, &mut Unlimited).unwrap();
    let mut next_item = 0;
    for grown in &outcome.grown {
        for item in &batch[next_item..grown.first_item] {
            replica.insert(item, &mut Unlimited).unwrap();
        }
        next_item = grown.first_item;
        replica
            .push_layer(grown.index, grown.size, &mut Unlimited)
            .unwrap();
    }
    for item in &batch[next_item..] {
        replica.insert(item, &mut Unlimited).unwrap();
    }
    assert_eq!(replica, primary);
}

#[test]
fn explicit_layers_must_fit_the_filter() {
    let mut filter = BloomFilter::new(params(10, 2), &mut Unlimited).unwrap();
    let next = params(10, 2).layer_size(1).unwrap();
    // The newest layer is not full yet.
    assert!(matches!(
        filter.push_layer(1, next, &mut Unlimited),
        Err(PushError::Shape(_))
    ));
    for item in items(10) {
        filter.insert(&item, &mut Unlimited).unwrap();
    }
    assert!(matches!(
        filter.push_layer(2, next, &mut Unlimited),
        Err(PushError::Shape(_))
    ));
    let starved = super::LayerSize { bits: 64, ..next };
    assert!(matches!(
        filter.push_layer(1, starved, &mut Unlimited),
        Err(PushError::Shape(_))
    ));
    let greedy = super::LayerSize {
        num_hashes: 60,
        ..next
    };
    assert!(matches!(
        filter.push_layer(1, greedy, &mut Unlimited),
        Err(PushError::Shape(_))
    ));
    assert!(matches!(
        filter.push_layer(1, next, &mut Budget::new(u64::MAX, 8)),
        Err(PushError::Limit(_))
    ));
    assert_eq!(filter.push_layer(1, next, &mut Unlimited), Ok(()));
    assert_eq!(filter.layers().len(), 2);
}

#[test]
fn a_refused_clone_allocates_nothing_and_an_admitted_one_is_equal() {
    let mut filter = BloomFilter::new(params(1000, 2), &mut Unlimited).unwrap();
    for item in items(3000) {
        filter.insert(&item, &mut Unlimited).unwrap();
    }
    let mut small = Budget::new(filter.allocated_bytes() - 1, u64::MAX);
    assert!(matches!(
        filter.try_clone(&mut small),
        Err(LimitError::FilterBytes { .. })
    ));
    assert_eq!(filter.try_clone(&mut Unlimited).unwrap(), filter);
}

/// Rewrites the fields of layer `index` of a transfer header and reseals its checksum.
fn forge_layer(header: &mut [u8], index: usize, items: u64, bits: u64, hashes: u32) {
    let at = 48 + 24 * index;
    header[at..at + 8].copy_from_slice(&items.to_le_bytes());
    header[at + 8..at + 16].copy_from_slice(&bits.to_le_bytes());
    header[at + 16..at + 20].copy_from_slice(&hashes.to_le_bytes());
    let body = header.len() - 8;
    let checksum = xxh3_64(&header[..body]);
    header[body..].copy_from_slice(&checksum.to_le_bytes());
}

#[test]
fn forged_headers_cannot_claim_more_than_their_bits_hold() {
    let filter = BloomFilter::new(params(1 << 30, 2), &mut Unlimited).unwrap();
    let honest = encode_header_as(&filter, filter.bytes());
    let size = filter.layers()[0].size();

    // 2^30 items in 64 bits.
    let mut header = honest.clone();
    forge_layer(&mut header, 0, 1 << 30, 64, size.num_hashes);
    assert!(matches!(
        decode_header(&header, &mut Unlimited),
        Err(DecodeError::Corrupt(_))
    ));
    // 255 hashes where 1% implies about 7.
    let mut header = honest.clone();
    forge_layer(&mut header, 0, 0, size.bits, 255);
    assert!(matches!(
        decode_header(&header, &mut Unlimited),
        Err(DecodeError::Corrupt(_))
    ));
}

#[test]
fn forged_counts_that_would_overflow_are_refused() {
    // 35 full layers of expansion 2 from 2^30 would sum past 2^64 items.
    let mut filter = BloomFilter::new(params(1 << 30, 2), &mut Unlimited).unwrap();
    let honest = encode_header_as(&filter, filter.bytes());
    let layers = 35usize;
    let mut header = honest[..48].to_vec();
    header[36..40].copy_from_slice(&(layers as u32).to_le_bytes());
    header.extend(std::iter::repeat_n(0u8, 24 * layers + 8));
    for index in 0..layers {
        let capacity = (1u64 << 30).checked_shl(index as u32).unwrap_or(u64::MAX);
        let at = 48 + 24 * index;
        header[at + 20..at + 24].copy_from_slice(&0u32.to_le_bytes());
        forge_layer(&mut header, index, capacity, 1 << 40, 7);
    }
    assert!(matches!(
        decode_header(&header, &mut Unlimited),
        Err(DecodeError::Corrupt(_))
    ));
    // The honest filter still decodes.
    assert!(decode_header(&honest, &mut Unlimited).is_ok());
    filter.insert(b"x", &mut Unlimited).unwrap();
}
