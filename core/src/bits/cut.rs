//! How a store of a size is cut (one block, or pieces and a tail, and where the table goes),
//! and what the process's allocator hands out for it: the rules [`super::BitStore`] follows and
//! what a budget is charged and MEMORY USAGE counts (see the picture in [`crate::bits`]).

use crate::budget::{allocator, usable_size, Allocator};
use crate::encoding::RDB_PIECE_BYTES;

/// Most bytes, as a fraction of the bits, that the allocator may add to a store of 8 KiB and
/// more (smaller ones pay a table and a tail of a few dozen bytes, within 10% from 1 KB): one
/// block that wastes more is cut into pieces.
pub const MAX_SLACK: f64 = 1.0 / 32.0;

/// Bytes a block of bits of this size and more is aligned to: one cache line, so that each
/// 512-bit line of a layout in lines is exactly one cache line (one miss, one prefetch) whatever
/// the allocator. Redis' jemalloc aligns such blocks anyway; glibc's malloc (tools, benches,
/// tests) returns big blocks 16 bytes past a page, which split every line over two cache lines:
/// measured on a 46 MB layer (3 lines per item, 4M lookups after a prefetch of 32 items), ~2× the
/// time per item. Smaller blocks keep u64's alignment, so that no allocator adds a header to
/// them.
pub(super) const LINE_ALIGN_FROM: usize = 4096;
pub(super) const LINE_ALIGN: usize = 64;

/// The smallest piece: one line of 8 words, so that no line spans two pieces.
const MIN_PIECE_SHIFT: u32 = 3;

/// The largest piece chosen for the slack, 1 MiB: a big store's waste is then at most a quarter
/// of a tail below 1 MiB (a sliver of a big filter), and its pieces are blocks the module's
/// allocator may refuse without aborting. (Stores from [`RDB_PIECES_FROM`] RDB pieces up are
/// cut at those instead.)
pub(super) const MAX_PIECE_SHIFT: u32 = 17;

/// A piece of the RDB encoding ([`RDB_PIECE_BYTES`]) in words, as a piece shift.
pub(super) const RDB_PIECE_SHIFT: u32 = (RDB_PIECE_BYTES / 8).trailing_zeros();

/// Stores of this many RDB pieces and more are cut at the RDB's pieces, so that a load keeps
/// each piece Redis read as a block of the store ([`BitStore::adopt`](super::BitStore::adopt))
/// instead of copying it into a second one. Their waste stays within [`MAX_SLACK`]: jemalloc
/// rounds only the tail (at most a piece, four classes per doubling), by less than 8 MiB in
/// 512 MiB and more.
pub(super) const RDB_PIECES_FROM: u64 = 8;

/// Bytes the allocator of this process hands out for a store of `bytes` bytes of bits (rounded
/// up to whole words): its blocks, its table, their size classes and alignment.
///
/// ```
/// use rustbloom_core::bits::{allocated_bytes, MAX_SLACK};
/// use rustbloom_core::budget::allocation_size;
/// // 132 KB: one block would take the 160 KiB class; in pieces it takes 1.03× at most.
/// assert_eq!(allocation_size(132_000), 160 << 10);
/// assert!(allocated_bytes(132_000) as f64 <= 132_000.0 * (1.0 + MAX_SLACK));
/// // A size class already: one block.
/// assert_eq!(allocated_bytes(1 << 20), 1 << 20);
/// ```
pub fn allocated_bytes(bytes: u64) -> u64 {
    allocated_bytes_by(allocator(), bytes)
}

/// [`allocated_bytes`] on a given allocator (a test or tool predicting a server's figures).
pub fn allocated_bytes_by(allocator: Allocator, bytes: u64) -> u64 {
    let words = bytes.div_ceil(8);
    allocation(allocator, words, piece_shift(allocator, words))
}

/// What `allocator` hands out for one block of `bytes` bytes of bits, as the global allocator
/// asks for it (see [`LINE_ALIGN`]): the module's allocator makes a block aligned to 64 from
/// jemalloc by rounding its size to 64, from the C library's malloc with 64 bytes more.
fn block_allocation(allocator: Allocator, bytes: u64) -> u64 {
    if bytes < LINE_ALIGN_FROM as u64 {
        return usable_size(allocator, bytes);
    }
    match allocator {
        Allocator::Jemalloc => usable_size(allocator, bytes.next_multiple_of(LINE_ALIGN as u64)),
        Allocator::Libc => usable_size(allocator, bytes.saturating_add(LINE_ALIGN as u64)),
    }
}

/// What `allocator` hands out for a store of `words` words cut at `shift` (0: one block).
pub(super) fn allocation(allocator: Allocator, words: u64, shift: u32) -> u64 {
    if words == 0 {
        return 0;
    }
    let bytes = words.saturating_mul(8);
    if shift == 0 {
        return block_allocation(allocator, bytes);
    }
    let piece = 8u64 << shift;
    let (whole, tail) = (bytes / piece, bytes % piece);
    let pieces = whole + u64::from(tail > 0);
    let tail = if tail > 0 {
        block_allocation(allocator, tail)
    } else {
        0
    };
    let table = if table_in_tail(allocator, words, shift) {
        0
    } else {
        usable_size(allocator, pieces * 8)
    };
    whole
        .saturating_mul(block_allocation(allocator, piece))
        .saturating_add(tail)
        .saturating_add(table)
}

/// True when a store of `words` words cut at `shift` (non-zero) keeps its table at the end of
/// its tail's block: there is a tail, and its size class holds the table too. Never for a store
/// cut at RDB pieces: a load keeps the buffer Redis read its tail into as the tail's block
/// ([`BitStore::adopt`](super::BitStore::adopt)), which has no room for the table (a few
/// hundred bytes against a block of megabytes).
pub(super) fn table_in_tail(allocator: Allocator, words: u64, shift: u32) -> bool {
    if shift == RDB_PIECE_SHIFT {
        return false;
    }
    let tail = words % (1 << shift);
    let pieces = words.div_ceil(1 << shift);
    tail > 0
        && block_allocation(allocator, (tail + pieces) * 8) == block_allocation(allocator, tail * 8)
}

/// How a store of `words` words is cut on `allocator`: a store of [`RDB_PIECES_FROM`] RDB pieces
/// and more in RDB pieces; else 0 (one block) when that block is within [`MAX_SLACK`] of the
/// bits, else the largest piece that keeps the whole store within it, else whichever cut takes
/// least.
pub(super) fn piece_shift(allocator: Allocator, words: u64) -> u32 {
    let bytes = words.saturating_mul(8);
    let within = |allocated: u64| (allocated - bytes) as f64 <= bytes as f64 * MAX_SLACK;
    if allocator == Allocator::Libc || words <= 1 << MIN_PIECE_SHIFT {
        return 0;
    }
    if bytes >= RDB_PIECES_FROM * RDB_PIECE_BYTES {
        return RDB_PIECE_SHIFT;
    }
    let mut best = (allocation(allocator, words, 0), 0);
    if within(best.0) {
        return 0;
    }
    // Pieces shorter than the store, largest first.
    let largest = (63 - (words - 1).leading_zeros()).min(MAX_PIECE_SHIFT);
    for shift in (MIN_PIECE_SHIFT..=largest).rev() {
        let allocated = allocation(allocator, words, shift);
        if within(allocated) {
            return shift;
        }
        best = best.min((allocated, shift));
    }
    best.1
}

/// Words of piece `index` of a store of `len` words in pieces of 2^`shift`: whole pieces, then
/// the tail.
pub(super) fn piece_len(len: usize, shift: u32, index: usize) -> usize {
    (len - (index << shift)).min(1 << shift)
}

/// Words block `index` of a store of `len` words in pieces of 2^`shift` was allocated with: its
/// own, and the table's after the tail's when [`table_in_tail`].
pub(super) fn allocated_piece_len(
    len: usize,
    shift: u32,
    table_in_tail: bool,
    index: usize,
) -> usize {
    let pieces = len.div_ceil(1 << shift);
    let table = if table_in_tail && index + 1 == pieces {
        pieces
    } else {
        0
    };
    piece_len(len, shift, index) + table
}

/// The layout of a block of `len` words (see [`LINE_ALIGN`]).
pub(super) fn block_layout(len: usize) -> Option<std::alloc::Layout> {
    let bytes = len.checked_mul(8)?;
    let align = if bytes >= LINE_ALIGN_FROM {
        LINE_ALIGN
    } else {
        8
    };
    std::alloc::Layout::from_size_align(bytes, align).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bits::BitStore;
    use crate::budget::allocation_size;

    /// jemalloc's allocation of `bytes` in one block and as cut here.
    fn jemalloc(bytes: u64) -> (u64, u64) {
        let words = bytes / 8;
        let shift = piece_shift(Allocator::Jemalloc, words);
        (
            block_allocation(Allocator::Jemalloc, bytes),
            allocation(Allocator::Jemalloc, words, shift),
        )
    }

    #[test]
    fn no_store_from_a_kilobyte_up_wastes_more_than_its_slack() {
        // Every size class boundary's neighbours and a spread of sizes, 1 KB to 2 GB.
        let mut sizes: Vec<u64> = (10..31u32)
            .flat_map(|lg| (4..8u64).map(move |q| q << (lg - 2)))
            .flat_map(|class| [class - 8, class, class + 8])
            .collect();
        sizes.extend((0..400u64).map(|i| 1024 + i * i * i * 37 / 8 * 8));
        for bytes in sizes.into_iter().filter(|&b| b >= 1024) {
            let (one, cut) = jemalloc(bytes);
            // Stores cut at RDB pieces pay a table of a few words even when one block would
            // have been its size class.
            let table = if bytes >= RDB_PIECES_FROM * RDB_PIECE_BYTES {
                1024
            } else {
                0
            };
            assert!(cut <= one + table, "{bytes}: {cut} over one block's {one}");
            // Small stores pay a table and a tail of a few dozen bytes.
            let slack = if bytes >= 8192 { MAX_SLACK } else { 0.1 };
            assert!(cut as f64 <= bytes as f64 * (1.0 + slack), "{bytes}: {cut}");
        }
        // Below, the cut never takes more than one block.
        for bytes in (8..1024u64).step_by(8) {
            let (one, cut) = jemalloc(bytes);
            assert!(cut <= one, "{bytes}");
        }
        // The C library's malloc: one block, 64 bytes more when aligned to a line.
        assert_eq!(piece_shift(Allocator::Libc, 20_000), 0);
        assert_eq!(allocation(Allocator::Libc, 20_000, 0), 160_064);
        assert_eq!(allocation(Allocator::Libc, 100, 0), 800);
    }

    #[test]
    fn big_stores_keep_big_pieces_and_classes_stay_one_block() {
        // 12.68 MB and 143.8 MB: pieces of 1 MiB, so the tail's rounding is a sliver.
        for bytes in [12_680_000u64, 143_807_968] {
            assert_eq!(piece_shift(Allocator::Jemalloc, bytes / 8), MAX_PIECE_SHIFT);
            assert!(jemalloc(bytes).1 - bytes < 1 << 18, "{bytes}");
        }
        // Sizes that are a size class already are one block.
        for bytes in [1u64 << 20, 5 << 18, 3 << 26, 1024, 1280] {
            assert_eq!(piece_shift(Allocator::Jemalloc, bytes / 8), 0, "{bytes}");
        }
        // The store's own figure is the prediction, and jemalloc's is what this process's
        // allocator is told it is (the default).
        for bytes in [132_000u64, 12_680_000, 1_048_576 + 64] {
            let store = BitStore::zeroed(bytes / 8).unwrap();
            assert_eq!(store.allocated_bytes(), allocated_bytes(bytes));
            assert_eq!(allocated_bytes(bytes), jemalloc(bytes).1);
        }
        assert_eq!(allocated_bytes(0), 0);
        assert_eq!(allocated_bytes(100), allocation_size(104));
    }

    #[test]
    fn stores_of_many_rdb_pieces_are_cut_at_them_within_the_slack() {
        let piece = RDB_PIECE_BYTES;
        // From 8 RDB pieces up: the RDB's pieces, whatever the tail, and only the tail rounded.
        for bytes in [
            8 * piece,
            8 * piece + 8,
            1_128_474_816,
            12 * piece - 8,
            5_600_000_000,
        ] {
            assert_eq!(
                piece_shift(Allocator::Jemalloc, bytes / 8),
                RDB_PIECE_SHIFT,
                "{bytes}"
            );
            let (_, cut) = jemalloc(bytes);
            assert!(
                cut as f64 <= bytes as f64 * (1.0 + MAX_SLACK),
                "{bytes}: {cut}"
            );
            assert!(cut - bytes < 8 << 20, "{bytes}: {cut}");
        }
        // Below, as before; the C library's malloc keeps one block.
        assert_eq!(piece_shift(Allocator::Jemalloc, 7 * piece / 8), 0);
        assert_eq!(piece_shift(Allocator::Libc, 8 * piece / 8), 0);
    }
}
