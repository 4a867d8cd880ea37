//! `decode_header` on arbitrary bytes, on arbitrary bytes with a correct checksum, and on mutated
//! real headers with a correct checksum; whatever it accepts must be a usable, self-consistent
//! filter that re-encodes to the same bytes.
#![no_main]

mod common;

use common::{fix_checksum, mutate, real_filter, Reader, LIMITS};
use libfuzzer_sys::fuzz_target;
use rustbloom_core::encoding::{
    decode_header, decode_load_header, encode_header, encode_transfer_header, load_chunk,
    scandump_step,
};
use rustbloom_core::BloomFilter;

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
            let mut b = encode_header(&filter);
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
    let Ok(mut filter) = decode_header(&bytes, LIMITS) else {
        return;
    };
    check(&filter, &bytes);
    // Fill the bits from the rest of the input, then use the filter like the commands do.
    let total = filter.bytes();
    let fill = r.bytes(total as usize);
    if !fill.is_empty() {
        filter.write_bits(0, fill);
    }
    if filter.loading().is_none() {
        exercise(&mut filter, &mut r);
    }
});

/// Invariants of an accepted header.
fn check(filter: &BloomFilter, bytes: &[u8]) {
    assert!(!filter.layers().is_empty());
    assert!(filter.bytes() <= LIMITS.max_filter_bytes);
    assert_eq!(
        encode_header(filter),
        bytes,
        "accepted header does not re-encode to itself"
    );
    if let Some(loaded) = filter.loading() {
        assert!(loaded < filter.bytes());
    }
    let _ = filter.capacity();
    let _ = filter.items();
    let _ = filter.memory_usage();
    let _ = filter.next_layer_bytes();
}

fn exercise(filter: &mut BloomFilter, r: &mut Reader) {
    // Queries and adds (growth included) on whatever shape the header described.
    for i in 0..u32::from(r.u8()) * 8 {
        let item = i.to_le_bytes();
        let was = filter.contains(&item);
        match filter.insert(&item, LIMITS) {
            Ok(new) => {
                assert_eq!(new, !was);
                assert!(filter.contains(&item), "false negative right after insert");
            }
            Err(_) => break,
        }
    }
    let items: Vec<[u8; 4]> = (0..64u32).map(|i| i.to_le_bytes()).collect();
    filter.contains_many(items.iter().map(|i| i.as_slice()), |_| {});
    filter.insert_many(items.iter().map(|i| i.as_slice()), LIMITS, |_| {});
    // SCANDUMP then LOADCHUNK must give the same filter back.
    let header = encode_transfer_header(filter);
    let mut copy = decode_load_header(&header, LIMITS).expect("own transfer header refused");
    let mut iterator = 1;
    loop {
        let (next, chunk) = scandump_step(filter, iterator);
        if next == 0 {
            break;
        }
        load_chunk(&mut copy, next, &chunk).expect("own chunk refused");
        iterator = next;
    }
    assert_eq!(copy.loading(), None);
    assert_eq!(
        &copy, filter,
        "SCANDUMP/LOADCHUNK round trip changed the filter"
    );
    let encoded = encode_header(filter);
    let again = decode_header(&encoded, LIMITS).expect("own header refused");
    assert_eq!(again.params(), filter.params());
}
