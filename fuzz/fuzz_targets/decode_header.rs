//! `decode_header` on arbitrary bytes, on arbitrary bytes with a correct checksum, and on mutated
//! real headers with a correct checksum; whatever it accepts must be a usable, self-consistent
//! filter that re-encodes to the same bytes. Then the filter is used like the commands do, and
//! what an add grew must replay identically on a replica (`with_first_layer` + `push_layer` of
//! the shapes the add reported).
#![no_main]

mod common;

use common::{
    budget, check_outcome, chunk_sum, fix_checksum, mutate, real_filter, replay, with_sum, Reader,
    MAX_FILTER_BYTES,
};
use libfuzzer_sys::fuzz_target;
use rustbloom_core::encoding::{
    decode_header, decode_load_header, encode_header, encode_transfer_header, load_chunk,
    scandump_step,
};
use rustbloom_core::{AddOutcome, BloomFilter, StoredFilter, Unlimited};

fuzz_target!(|data: &[u8]| {
    let mut r = Reader::new(data);
    let mode = r.u8();
    let bytes = match mode % 3 {
        0 => r.bytes(usize::MAX).to_vec(),
        1 => {
            // Mostly the length of a header with 0..=3 layers, sometimes any length.
            let layers = usize::from(r.u8() % 4);
            let len = match r.u8() {
                0 => usize::from(r.u8()),
                _ => 56 + 24 * layers,
            };
            let mut b = r.bytes(len).to_vec();
            fix_checksum(&mut b);
            b
        }
        _ => {
            let Some(filter) = real_filter(&mut r) else {
                return;
            };
            // Sometimes the header of a load in progress.
            let stored = match r.u8() % 4 {
                0 if filter.bytes() > 0 => {
                    let loaded = r.u64() % filter.bytes();
                    StoredFilter::Loading { filter, loaded }
                }
                _ => StoredFilter::Ready(filter),
            };
            let mut b = encode_header(&stored);
            mutate(&mut r, &mut b);
            match r.u8() % 4 {
                0 => b.truncate(b.len().saturating_sub(usize::from(r.u8()))),
                1 => b
                    .splice(
                        b.len().saturating_sub(8)..b.len().saturating_sub(8),
                        r.bytes(24).iter().copied(),
                    )
                    .for_each(drop),
                _ => {}
            }
            fix_checksum(&mut b);
            b
        }
    };
    let Ok(mut stored) = decode_header(&bytes, &mut budget()) else {
        return;
    };
    check(&stored, &bytes);
    // Fill the bits from the rest of the input: directly up to what the header says is loaded,
    // then, for a load in progress, the rest by BF.LOADCHUNK chunks, which must complete it.
    let total = stored.filter().bytes();
    let loaded = stored.loaded_bytes();
    let fill = r.bytes(loaded as usize);
    if !fill.is_empty() {
        match &mut stored {
            StoredFilter::Ready(filter) | StoredFilter::Loading { filter, .. } => {
                filter.write_bits(0, fill)
            }
        }
    }
    let mut offset = loaded;
    while offset < total {
        assert!(stored.ready().is_none(), "ready before its last chunk");
        let len = (u64::from(r.u16()) + 1).min(total - offset);
        let mut bits = r.bytes(len as usize).to_vec();
        bits.resize(len as usize, 0);
        let chunk = with_sum(&bits, chunk_sum(stored.filter(), offset, &bits));
        load_chunk(&mut stored, 1 + offset + len, &chunk).expect("next chunk refused");
        offset += len;
        assert_eq!(stored.loaded_bytes(), offset);
    }
    let Some(filter) = stored.ready_mut() else {
        panic!("a filter whose bits all arrived is not ready");
    };
    exercise(filter, &mut r);
});

/// Invariants of an accepted header.
fn check(stored: &StoredFilter, bytes: &[u8]) {
    let filter = stored.filter();
    assert!(!filter.layers().is_empty());
    assert!(filter.allocated_bytes() <= MAX_FILTER_BYTES);
    assert_eq!(
        encode_header(stored),
        bytes,
        "accepted header does not re-encode to itself"
    );
    match stored {
        StoredFilter::Loading { loaded, .. } => assert!(*loaded < filter.bytes()),
        StoredFilter::Ready(_) => assert_eq!(stored.loaded_bytes(), filter.bytes()),
    }
    // Every layer's shape passed the checks a replica's BF.RESERVE SHAPE / BF.GROW run.
    for (index, layer) in filter.layers().iter().enumerate() {
        assert_eq!(layer.size().check(), Ok(()));
        assert_eq!(filter.params().check_layer(index, layer.size()), Ok(()));
    }
    let first =
        BloomFilter::with_first_layer(*filter.params(), filter.layers()[0].size(), &mut Unlimited)
            .expect("an accepted first layer refused by with_first_layer");
    assert_eq!(first.layers()[0].size(), filter.layers()[0].size());
    let _ = filter.capacity();
    let _ = filter.items();
    let _ = filter.memory_usage();
}

fn exercise(filter: &mut BloomFilter, r: &mut Reader) {
    // Queries and adds (growth included) on whatever shape the header described.
    for i in 0..u32::from(r.u8()) * 8 {
        let item = i.to_le_bytes();
        let was = filter.contains(&item);
        match filter.insert(&item, &mut budget()) {
            Ok(new) => {
                assert_eq!(new, !was);
                assert!(filter.contains(&item), "false negative right after insert");
            }
            Err(_) => break,
        }
    }
    let items: Vec<[u8; 4]> = (0..64u32).map(|i| i.to_le_bytes()).collect();
    filter.contains_many(items.iter().map(|i| i.as_slice()), |_| {});

    // An add that may grow the filter, replayed on a replica holding the same filter (as from
    // an RDB): the same items in BF.MADD batches, its layers by BF.GROW.
    let mut replica = filter.try_clone(&mut Unlimited).expect("clone refused");
    assert_eq!(&replica, &*filter, "try_clone changed the filter");
    let start = u32::from(r.u16());
    let count = u32::from(r.u16() % 4096);
    let items: Vec<[u8; 4]> = (start..start + count).map(|i| i.to_le_bytes()).collect();
    let items: Vec<&[u8]> = items.iter().map(|i| i.as_slice()).collect();
    let (layers_before, items_before) = (filter.layers().len(), filter.items());
    let mut outcome = AddOutcome::default();
    filter.insert_many(items.iter().copied(), &mut budget(), &mut outcome);
    check_outcome(filter, &items, &outcome, layers_before, items_before);
    replay(&mut replica, &items, &outcome);
    assert_eq!(&replica, &*filter, "replica diverged from its primary");

    // The same from creation: a primary created here, a replica created from its first
    // layer's shape (BF.RESERVE ... SHAPE), then grown by the shapes the primary reports.
    if let Ok(mut primary) = BloomFilter::new(*filter.params(), &mut budget()) {
        let mut replica = BloomFilter::with_first_layer(
            *primary.params(),
            primary.layers()[0].size(),
            &mut Unlimited,
        )
        .expect("replica refused its primary's first layer");
        assert_eq!(replica, primary, "with_first_layer gave another filter");
        let mut outcome = AddOutcome::default();
        primary.insert_many(items.iter().copied(), &mut budget(), &mut outcome);
        check_outcome(&primary, &items, &outcome, 1, 0);
        replay(&mut replica, &items, &outcome);
        assert_eq!(
            replica, primary,
            "created replica diverged from its primary"
        );
    }

    // SCANDUMP then LOADCHUNK must give the same filter back.
    let header = encode_transfer_header(filter);
    let mut copy =
        decode_load_header(&header, &mut Unlimited).expect("own transfer header refused");
    let mut iterator = 1;
    loop {
        let (next, chunk) = scandump_step(filter, iterator);
        if next == 0 {
            break;
        }
        load_chunk(&mut copy, next, &chunk).expect("own chunk refused");
        iterator = next;
    }
    assert_eq!(
        copy.ready(),
        Some(&*filter),
        "SCANDUMP/LOADCHUNK round trip changed the filter"
    );
    let encoded = encode_header(&copy);
    let again = decode_header(&encoded, &mut Unlimited).expect("own header refused");
    assert_eq!(again.filter().params(), filter.params());
    assert_eq!(again.loaded_bytes(), filter.bytes());
}
