//! `stored::decode_header` on arbitrary bytes, on arbitrary bytes with a correct checksum, and
//! on mutated real headers with a correct checksum, of every kind: scalable ("RBLM"), window
//! ("RBLW"), RedisBloom envelope ("RBLR") and valkey-bloom envelope ("RBLV"). Whatever it accepts must be a usable,
//! self-consistent filter that re-encodes to the same bytes. Then the filter is used like the
//! commands do: what an add did must replay identically on a replica (a scalable filter's
//! layers by `with_first_layer` + `push_layer` of the shapes the add reported; a window's writes
//! at the timestamp the primary used; RedisBloom's and valkey-bloom's by their own growth
//! rules), and a
//! SCANDUMP / LOADCHUNK round trip must give the filter back.
#![no_main]

mod common;

use common::{
    budget, check_outcome, chunk_sum, fix_checksum, mutate, real_any, replay, transfer_header,
    with_sum, Reader, MAX_FILTER_BYTES,
};
use libfuzzer_sys::fuzz_target;
use rustbloom_core::redisbloom::{Arithmetic, RbAddOutcome, RbFilter};
use rustbloom_core::stored::decode_header;
use rustbloom_core::transfer::{decode_load_header, load_chunk, scandump_step};
use rustbloom_core::valkeybloom::{blob, VbFilter};
use rustbloom_core::window::{encoding::HEADER_BYTES as WINDOW_HEADER_BYTES, WindowFilter};
use rustbloom_core::{
    AddOutcome, BloomFilter, ChunkError, Filter, Outcome, StoredFilter, Unlimited,
};

/// Bytes of a RedisBloom envelope header around a chain header of `links` links: 16 fixed, 20 +
/// 53 per link, 8 of checksum.
fn envelope_len(links: usize) -> usize {
    16 + 20 + 53 * links + 8
}

fuzz_target!(|data: &[u8]| {
    let mut r = Reader::new(data);
    let mode = r.u8();
    let bytes = match mode % 3 {
        0 => r.bytes(usize::MAX).to_vec(),
        1 => {
            // Input bytes with a correct checksum, mostly at the length (and with the magic) of
            // one kind's header, sometimes any length.
            let kind = r.u8() % 3;
            let len = match (r.u8(), kind) {
                (0, _) => usize::from(r.u8()),
                (_, 0) => 56 + 24 * usize::from(r.u8() % 4),
                (_, 1) => WINDOW_HEADER_BYTES,
                _ => envelope_len(usize::from(r.u8() % 3) + 1),
            };
            let mut b = r.bytes(len).to_vec();
            let magic: &[u8; 4] = match kind {
                0 => b"RBLM",
                1 => b"RBLW",
                _ => b"RBLR",
            };
            if b.len() >= 12 && !r.u8().is_multiple_of(4) {
                b[..4].copy_from_slice(magic);
            }
            fix_checksum(&mut b);
            b
        }
        _ => {
            let Some(filter) = real_any(&mut r) else {
                return;
            };
            // Sometimes the header of a load in progress.
            let stored = match r.u8() % 4 {
                0 if filter.bytes() > 0 => {
                    let loaded = r.u64() % filter.bytes();
                    StoredFilter::partly_loaded(filter, loaded)
                }
                _ => StoredFilter::ready_filter(filter),
            };
            let mut b = stored.encode_header();
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
    // Fill the bits from the rest of the input: directly up to what the header says is loaded
    // (in the pieces RDB uses, which never cross a RedisBloom link), then, for a load in
    // progress of one of our kinds, the rest by BF.LOADCHUNK chunks, which must complete it.
    let total = stored.filter().bytes();
    let loaded = stored.loaded_bytes();
    for (offset, len) in stored.filter().pieces(loaded, 4096) {
        let mut piece = r.bytes(len as usize).to_vec();
        piece.resize(len as usize, 0);
        stored.write_bits(offset, &piece);
    }
    if matches!(stored.filter(), Filter::RedisBloom(_)) {
        // Its BF.LOADCHUNK stream is RedisBloom's own, from a RedisBloom header: a saved partial
        // load is left as it is, and answers nothing.
        if stored.is_loading() {
            assert!(stored.ready().is_none());
            return;
        }
    }
    let mut offset = loaded;
    while offset < total {
        assert!(stored.ready().is_none(), "ready before its last chunk");
        // Input-chosen lengths while the input lasts, then the rest in one chunk.
        let len = match r.is_empty() {
            true => total - offset,
            false => (u64::from(r.u16()) + 1).min(total - offset),
        };
        // A valkey-bloom object's chunks never cross one of its layers.
        let len = match stored.filter() {
            Filter::ValkeyBloom(object) => object.chunk_len(offset, len),
            _ => len,
        };
        let mut bits = r.bytes(len as usize).to_vec();
        bits.resize(len as usize, 0);
        let chunk = with_sum(&bits, chunk_sum(stored.filter(), offset, &bits));
        match load_chunk(&mut stored, 1 + offset + len, &chunk) {
            Ok(()) => {}
            // A window filter's last chunk is refused when its slots' counts contradict the bits
            // (input bits here): the load stays where it was, answering nothing.
            Err(ChunkError::BadData)
                if matches!(stored.filter(), Filter::Window(_)) && offset + len == total =>
            {
                assert_eq!(stored.loaded_bytes(), offset);
                assert!(stored.ready().is_none());
                return;
            }
            Err(error) => panic!("next chunk refused: {error:?}"),
        }
        offset += len;
        assert_eq!(stored.loaded_bytes(), offset);
    }
    let Some(filter) = stored.ready_mut() else {
        panic!("a filter whose bits all arrived is not ready");
    };
    match filter {
        Filter::Scalable(filter) => exercise_scalable(filter, &mut r),
        Filter::Window(filter) => exercise_window(filter, &mut r),
        Filter::RedisBloom(filter) => exercise_redisbloom(filter, &mut r),
        Filter::ValkeyBloom(filter) => exercise_valkeybloom(filter, &mut r),
    }
    round_trip(filter);
});

/// Invariants of an accepted header, whatever its kind.
fn check(stored: &StoredFilter, bytes: &[u8]) {
    let filter = stored.filter();
    assert!(filter.allocated_bytes() <= MAX_FILTER_BYTES);
    assert_eq!(
        stored.encode_header(),
        bytes,
        "accepted header does not re-encode to itself"
    );
    assert!(stored.loaded_bytes() <= filter.bytes());
    assert_eq!(
        stored.is_loading(),
        stored.loaded_bytes() < filter.bytes(),
        "loading state and loaded bytes disagree"
    );
    assert_eq!(stored.ready().is_some(), !stored.is_loading());
    let _ = filter.capacity();
    let _ = filter.counted_items();
    let _ = filter.layer_count();
    let _ = filter.expansion();
    let _ = filter.info_size();
    assert!(filter.heap_bytes() >= filter.allocated_bytes());
    assert!(filter.allocated_bytes() >= filter.bytes());
    match filter {
        Filter::Scalable(filter) => check_scalable(filter),
        Filter::Window(filter) => check_window(filter),
        Filter::RedisBloom(filter) => check_redisbloom(filter),
        Filter::ValkeyBloom(filter) => check_valkeybloom(filter),
    }
}

fn check_valkeybloom(filter: &VbFilter) {
    let layers = filter.layers();
    assert!(!layers.is_empty());
    for (index, layer) in layers.iter().enumerate() {
        let shape = layer.shape();
        assert!(shape.items <= shape.capacity);
        assert!(shape.bytes > 0 && shape.hashes > 0);
        if index + 1 < layers.len() {
            assert_eq!(shape.items, shape.capacity, "an older layer not full");
        }
        assert!(filter.params().layer_error(index).is_some());
    }
    // Its BF.LOAD blob gives it back.
    let decoded = blob::decode(&blob::encode(filter), &mut Unlimited).expect("own blob refused");
    assert_eq!(&decoded, filter);
}

fn exercise_valkeybloom(filter: &mut VbFilter, r: &mut Reader) {
    // Adds that may grow it, replayed on a replica holding the same object: the items that were
    // new, in order, grow it the same way by valkey-bloom's rule.
    let mut replica = filter.try_clone(&mut Unlimited).expect("clone refused");
    let start = u32::from(r.u16());
    let count = u32::from(r.u16() % 4096);
    let items: Vec<[u8; 4]> = (start..start + count).map(|i| i.to_le_bytes()).collect();
    let items: Vec<&[u8]> = items.iter().map(|i| i.as_slice()).collect();
    let mut outcome = RbAddOutcome::default();
    filter.insert_many(items.iter().copied(), &mut budget(), &mut outcome);
    for (item, &new) in items.iter().zip(&outcome.added) {
        assert!(filter.contains(item), "false negative after an add");
        if new {
            assert_eq!(replica.insert(item, &mut Unlimited), Ok(true));
        }
    }
    assert_eq!(&replica, &*filter, "replica diverged from its primary");
}

fn check_scalable(filter: &BloomFilter) {
    assert!(!filter.layers().is_empty());
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
    let _ = filter.heap_bytes();
}

fn check_window(filter: &WindowFilter) {
    let (params, shape) = (filter.params(), filter.shape());
    assert_eq!(shape.slot.check(), Ok(()));
    assert!(params.error_rate > 0.0 && params.error_rate < 1.0);
    assert_eq!(shape.generation_ms, params.window_ms.div_ceil(3));
    assert_eq!(filter.bytes(), shape.bytes());
    for items in filter.slot_items() {
        assert!(items <= shape.slot.bits);
    }
    // The contract's arithmetic holds for whatever time the header says.
    let last = filter.last_ms();
    let gone = shape.forgotten_at(last);
    if gone < u64::MAX {
        // Not saturated, so gone > last + W cannot overflow; last + 2W may.
        assert!(
            gone > last + params.window_ms,
            "forgotten inside the window"
        );
        assert!(
            gone <= last.saturating_add(2 * params.window_ms),
            "remembered past 2W"
        );
    }
    let _ = filter.items(last);
    let _ = filter.items(u64::MAX);
}

fn check_redisbloom(filter: &RbFilter) {
    assert!(!filter.links().is_empty());
    let items: u64 = filter.links().iter().map(|l| l.shape().items).sum();
    assert_eq!(items, filter.items());
    assert_eq!(
        filter.bytes(),
        filter.links().iter().map(|l| l.shape().bytes).sum::<u64>()
    );
    let _ = filter.capacity();
}

fn exercise_scalable(filter: &mut BloomFilter, r: &mut Reader) {
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
}

/// Writes at input-chosen times (sometimes going back, as a replica's or a stepped clock),
/// checked against the contract; then an add replayed on a replica at the timestamp the primary
/// used, which must reach the same bits.
fn exercise_window(filter: &mut WindowFilter, r: &mut Reader) {
    let window = filter.params().window_ms;
    let mut now = filter.last_ms();
    for i in 0..u32::from(r.u8()) * 8 {
        match r.u8() % 8 {
            0 => now = now.saturating_sub(u64::from(r.u16())),
            1 => now = now.saturating_add(r.u64() >> 24),
            _ => now = now.saturating_add(u64::from(r.u8())),
        }
        let item = i.to_le_bytes();
        let was = filter.contains(&item, now);
        let before = filter.last_ms();
        let inserted = filter.insert(&item, now);
        assert_eq!(
            inserted.at_ms,
            now.max(before),
            "the filter's time went back"
        );
        assert_eq!(filter.last_ms(), inserted.at_ms);
        if was && inserted.at_ms == now {
            assert!(!inserted.new, "an item present before was counted new");
        }
        let at = inserted.at_ms;
        assert!(
            filter.contains(&item, at),
            "false negative right after insert"
        );
        assert!(
            filter.contains(&item, at.saturating_add(window)),
            "false negative inside the window"
        );
    }
    let items: Vec<[u8; 4]> = (0..64u32).map(|i| i.to_le_bytes()).collect();
    filter.contains_many(items.iter().map(|i| i.as_slice()), now, |_| {});

    // One add operation through the Filter interface, as BF.MADD runs it, and its replay on a
    // replica at the timestamp the outcome says (BF.ADDAT key at_ms ...).
    let mut replica = filter.try_clone(&mut Unlimited).expect("clone refused");
    assert_eq!(&replica, &*filter, "try_clone changed the filter");
    let start = u32::from(r.u16());
    let count = u32::from(r.u16() % 2048);
    let items: Vec<[u8; 4]> = (start..start + count).map(|i| i.to_le_bytes()).collect();
    let items: Vec<&[u8]> = items.iter().map(|i| i.as_slice()).collect();
    let when = match r.u8() % 4 {
        0 => 0,
        1 => u64::MAX,
        _ => now.saturating_add(u64::from(r.u16())),
    };
    let mut primary = Filter::Window(Box::new(
        filter.try_clone(&mut Unlimited).expect("clone refused"),
    ));
    let mut outcome = primary.new_outcome(|| when);
    primary.insert_many(items.iter().copied(), &mut budget(), &mut outcome);
    let Outcome::Window(window_outcome) = &outcome else {
        panic!("a window filter gave another kind of outcome");
    };
    assert_eq!(outcome.error(), None, "a window filter refused an item");
    assert_eq!(outcome.added().len(), items.len());
    let at = window_outcome.at_ms;
    replica.insert_many(items.iter().copied(), at, |_| {});
    let Filter::Window(primary) = primary else {
        unreachable!()
    };
    assert_eq!(replica, *primary, "replica diverged from its primary");
    for item in &items {
        assert!(
            primary.contains(item, at),
            "false negative after insert_many"
        );
    }
    // Once the fourth generation after the write begins, a filter written nothing since holds
    // none of it.
    let gone = primary.shape().forgotten_at(at);
    if gone < u64::MAX {
        for item in &items {
            assert!(
                !primary.contains(item, gone),
                "remembered past its forgetting moment"
            );
        }
    }
    *filter = *primary;
}

/// Adds by RedisBloom's rules (growth included), and the same new items on a replica holding the
/// same filter, which must grow alike.
fn exercise_redisbloom(filter: &mut RbFilter, r: &mut Reader) {
    let mut replica = filter.try_clone(&mut Unlimited).expect("clone refused");
    assert_eq!(&replica, &*filter, "try_clone changed the filter");
    let start = u32::from(r.u16());
    let count = u32::from(r.u16() % 2048);
    let items: Vec<[u8; 4]> = (start..start + count).map(|i| i.to_le_bytes()).collect();
    let items: Vec<&[u8]> = items.iter().map(|i| i.as_slice()).collect();
    let items_before = filter.items();
    let mut outcome = RbAddOutcome::default();
    filter.insert_many(items.iter().copied(), &mut budget(), &mut outcome);
    let added: Vec<&[u8]> = outcome.added_positions().map(|p| items[p]).collect();
    assert_eq!(filter.items(), items_before + added.len() as u64);
    for (&item, _) in items.iter().zip(&outcome.added) {
        assert!(filter.contains(item), "false negative after insert_many");
    }
    let mut replayed = RbAddOutcome::default();
    replica.insert_many(added.iter().copied(), &mut Unlimited, &mut replayed);
    assert_eq!(replayed.error, None, "replica refused an add");
    assert_eq!(replica, *filter, "replica diverged from its primary");
}

/// SCANDUMP then LOADCHUNK must give the same filter back (a RedisBloom filter through
/// RedisBloom's own stream, which cannot carry the 32-bit arithmetic of RedisBloom v1.0), and
/// the saved header must decode to the same shape.
fn round_trip(filter: &Filter) {
    let header = transfer_header(filter);
    let mut copy =
        decode_load_header(&header, &mut Unlimited).expect("own transfer header refused");
    assert!(copy.is_loading() || filter.bytes() == 0);
    let mut iterator = 1;
    loop {
        let (next, chunk) = scandump_step(filter, iterator);
        if next == 0 {
            break;
        }
        load_chunk(&mut copy, next, &chunk).expect("own chunk refused");
        iterator = next;
    }
    let wrap32 =
        matches!(filter, Filter::RedisBloom(rb) if rb.header().arithmetic == Arithmetic::Wrap32);
    if !wrap32 {
        assert_eq!(
            copy.ready(),
            Some(filter),
            "SCANDUMP/LOADCHUNK round trip changed the filter"
        );
    }
    let saved = StoredFilter::ready_filter(filter.try_clone(&mut Unlimited).expect("clone"));
    let encoded = saved.encode_header();
    let mut again = decode_header(&encoded, &mut Unlimited).expect("own header refused");
    assert_eq!(again.loaded_bytes(), filter.bytes());
    for (offset, len) in filter.pieces(filter.bytes(), 4096) {
        let mut piece = vec![0; len as usize];
        filter.read_bits(offset, &mut piece);
        again.write_bits(offset, &piece);
    }
    assert_eq!(
        again.ready(),
        Some(filter),
        "header and bits gave another filter"
    );
}
