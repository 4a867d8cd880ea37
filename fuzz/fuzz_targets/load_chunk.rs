//! The BF.LOADCHUNK path of our own kinds (scalable and window filters): `decode_load_header`,
//! then a sequence of `load_chunk` calls with correct, forged (correct checksum, wrong place) and
//! corrupted chunks. A refused chunk must leave the filter unchanged; an accepted one must
//! advance the load by exactly its length; a load completed from a real filter's chunks must
//! give that filter back.
#![no_main]

mod common;

use common::{
    budget, chunk_sum, clone_stored, fix_checksum, mutate, real_filter, real_window,
    transfer_header, with_sum, Reader,
};
use libfuzzer_sys::fuzz_target;
use rustbloom_core::transfer::{decode_load_header, load_chunk, scandump_step, CHUNK_BYTES};
use rustbloom_core::window::encoding::HEADER_BYTES as WINDOW_HEADER_BYTES;
use rustbloom_core::{ChunkError, Filter};

fuzz_target!(|data: &[u8]| {
    let mut r = Reader::new(data);
    // The header: a real filter's, possibly mutated (checksum fixed), or input bytes.
    let source = match r.u8() % 4 {
        0 => None,
        1 => real_window(&mut r).map(|window| Filter::Window(Box::new(window))),
        _ => real_filter(&mut r).map(Filter::Scalable),
    };
    let header = match &source {
        Some(filter) => {
            let mut h = transfer_header(filter);
            if r.u8().is_multiple_of(4) {
                mutate(&mut r, &mut h);
                fix_checksum(&mut h);
            }
            h
        }
        None => {
            let len = match r.u8() % 4 {
                0 => WINDOW_HEADER_BYTES,
                layers => 56 + 24 * usize::from(layers - 1),
            };
            let mut h = r.bytes(len).to_vec();
            fix_checksum(&mut h);
            h
        }
    };
    let Ok(mut stored) = decode_load_header(&header, &mut budget()) else {
        return;
    };
    assert!(stored.is_loading() && stored.loaded_bytes() == 0);
    let total = stored.filter().bytes();
    // Only chunks taken unchanged from `source` went in: the result must equal it.
    let mut faithful = source
        .as_ref()
        .is_some_and(|s| transfer_header(s) == header);

    while !r.is_empty() {
        let expected = stored.loaded_bytes();
        let (iterator, chunk, proper) = match r.u8() % 6 {
            // The next chunk, as SCANDUMP would give it (from the source when there is one).
            0 | 1 => {
                let len = (u64::from(r.u16()) % (total - expected.min(total)).max(1)).max(1);
                let len = len.min(CHUNK_BYTES);
                let bits = match (&source, faithful) {
                    (Some(s), true) if expected + len <= total => {
                        let (_, c) = scandump_step_at(s, expected, len);
                        c[..len as usize].to_vec()
                    }
                    _ => {
                        faithful = false;
                        let mut b = r.bytes(len as usize).to_vec();
                        b.resize(len as usize, 0);
                        b
                    }
                };
                let sum = chunk_sum(stored.filter(), expected, &bits);
                (1 + expected + len, with_sum(&bits, sum), true)
            }
            // A forged chunk: correct checksum for the offset its iterator claims, any place.
            2 => {
                let len = usize::from(r.u16() % 512);
                let bits = r.bytes(len).to_vec();
                let iterator = match r.u8() % 4 {
                    0 => r.u64(),
                    1 => 1 + expected + bits.len() as u64 + u64::from(r.u8()),
                    2 => (1 + expected + bits.len() as u64).wrapping_sub(u64::from(r.u8())),
                    _ => 1 + total + u64::from(r.u8()),
                };
                let offset = iterator.wrapping_sub(1 + bits.len() as u64);
                let sum = chunk_sum(stored.filter(), offset, &bits);
                (iterator, with_sum(&bits, sum), false)
            }
            // Raw bytes.
            3 => {
                let iterator = r.u64();
                let len = usize::from(r.u16() % 600);
                (iterator, r.bytes(len).to_vec(), false)
            }
            // A correct next chunk with flipped bytes (checksum not fixed), or truncated.
            _ => {
                let len = (u64::from(r.u8()) % (total - expected.min(total)).max(1)).max(1);
                let bits = r.bytes(len as usize).to_vec();
                let sum = chunk_sum(stored.filter(), expected, &bits);
                let mut chunk = with_sum(&bits, sum);
                let n = chunk.len();
                match r.u8() % 3 {
                    0 => chunk[usize::from(r.u16()) % n] ^= r.u8() | 1,
                    1 => chunk.truncate(usize::from(r.u16()) % n),
                    _ => chunk.push(r.u8()),
                }
                (1 + expected + bits.len() as u64, chunk, false)
            }
        };
        let snapshot = clone_stored(&stored);
        match load_chunk(&mut stored, iterator, &chunk) {
            Ok(()) => {
                let len = chunk.len() as u64 - 8;
                let end = iterator - 1;
                assert_eq!(end - len, expected, "chunk accepted at the wrong offset");
                assert!(end <= total);
                assert_eq!(stored.loaded_bytes(), end);
                assert_eq!(
                    stored.ready().is_some(),
                    end == total,
                    "ready at the wrong time"
                );
                let mut back = vec![0u8; len as usize];
                stored.filter().read_bits(expected, &mut back);
                if let Filter::Window(_) = stored.filter() {
                    // A window reads the bytes of slots its clock says have expired as zero (a
                    // real filter's SCANDUMP carries zeros there; input bits may not).
                    let kept = back.iter().zip(&chunk).all(|(&b, &c)| b == c || b == 0);
                    assert!(kept, "a window read back bytes it was not given");
                } else {
                    assert_eq!(&back[..], &chunk[..len as usize]);
                }
            }
            Err(error) => {
                assert_eq!(stored, snapshot, "a refused chunk changed the filter");
                // Forged chunks are refused, and so is a window's last chunk of input bits when
                // its slots' counts contradict them; a correct chunk of the source's never.
                let counts_contradicted = matches!(error, ChunkError::BadData)
                    && matches!(stored.filter(), Filter::Window(_))
                    && iterator.checked_sub(1) == Some(total)
                    && !faithful;
                if proper && !counts_contradicted {
                    panic!("a correct next chunk was refused: {error:?}");
                }
            }
        }
        if !proper {
            // Forged chunks that were accepted must have been at the right place (checked above);
            // the data may differ from the source's.
            if stored != snapshot {
                faithful = false;
            }
        }
        if stored.ready().is_some() {
            break;
        }
    }
    if let Some(filter) = stored.ready() {
        if let (Some(s), true) = (&source, faithful) {
            assert_eq!(
                filter, s,
                "loading a real filter's chunks gave another filter"
            );
        }
        // A completed filter answers queries.
        let _ = filter.contains(b"x", || 0);
        // And takes no more chunks, whatever they are.
        let snapshot = clone_stored(&stored);
        let len = usize::from(r.u8()) + 1;
        let bits = r.bytes(len).to_vec();
        let chunk = with_sum(&bits, chunk_sum(stored.filter(), total, &bits));
        let iterator = 1 + total + bits.len() as u64;
        assert_eq!(
            load_chunk(&mut stored, iterator, &chunk),
            Err(ChunkError::Offset),
            "a complete filter took a chunk"
        );
        assert_eq!(stored, snapshot);
    }
});

/// `len` bytes of `filter`'s bits at `offset`, with their chunk checksum (like SCANDUMP, whose own
/// chunks are always 16 MiB or the rest: where this is one of them, it must be the same).
fn scandump_step_at(filter: &Filter, offset: u64, len: u64) -> (u64, Vec<u8>) {
    let mut bits = vec![0u8; len as usize];
    filter.read_bits(offset, &mut bits);
    let sum = chunk_sum(filter, offset, &bits);
    let chunk = with_sum(&bits, sum);
    if offset.is_multiple_of(CHUNK_BYTES) && len == CHUNK_BYTES.min(filter.bytes() - offset) {
        assert_eq!(
            scandump_step(filter, 1 + offset),
            (1 + offset + len, chunk.clone()),
            "SCANDUMP's chunk differs"
        );
    }
    (1 + offset + len, chunk)
}
