//! The one store of filter bits: layers, window filters' slots and RedisBloom links all keep
//! their 64-bit words here, cut so that the allocator rounds up almost nothing.
//!
//! A block of B bytes is handed out rounded up to the allocator's size class
//! ([`crate::budget::allocation_size`]): jemalloc has four classes per doubling, so one block
//! wastes up to 25% (110k items at 1% in one 132 KB block took 160 KB). A store whose one block
//! would waste more than [`MAX_SLACK`] of its bits is cut into pieces of a power of two of bytes
//! (a size class of its own) and one shorter tail, each a block, found through a table of the
//! pieces: only the tail and the table are rounded up. The table lives in the tail's block,
//! after its words, when the tail's size class has room for it (a 1,232-byte store: a
//! 1,024-byte piece and a 224-byte tail holding 208 bytes of bits and the 16-byte table),
//! else in a block of its own. The piece size is chosen per store, the largest up to 1 MiB
//! whose total stays within [`MAX_SLACK`] (the tail is at most a piece, so its rounding at most a
//! quarter piece), so big stores keep big pieces and few table entries. Stores of 8 RDB pieces
//! (512 MiB) and more are cut at the RDB's 64 MiB pieces instead, so that a load keeps the
//! buffers Redis read them into as the store's blocks ([`AdoptableBlock`]) and a save hands
//! Redis the blocks themselves. Nothing of the bits' order changes: the pieces only say where
//! word w lives.
//!
//! ```text
//!   word index:  0 ............................................................ len-1
//!   one block:   | word 0 | word 1 | ...                                | word len-1 |
//!   in pieces of 2^s words (s = piece_shift, chosen per store; whole 64-byte lines):
//!                | piece 0: 0 .. 2^s-1 | piece 1: 2^s .. 2^(s+1)-1 | ... | tail: the rest |
//!   word w:      piece w >> s, at w & (2^s - 1); the table holds each piece's address
//!   tail block:  | the tail's words | the table, when the tail's size class has room |
//!   struct:      { ptr: the block, or the table | len: words | piece_shift: 0 = one block |
//!                  table_in_tail }
//!
//!   blocks of 4 KiB and more are aligned to 64 bytes (smaller pieces are powers of two from
//!   64 bytes, which jemalloc's size classes align anyway), so a 512-bit line is a cache line
//! ```
//!
//! With the C library's malloc a block is its request rounded to 16 bytes (64 more when aligned
//! to 64), so a store there is always one block. [`allocated_bytes`] predicts what a store of a
//! size takes on the process's allocator exactly, pieces, tail, table and alignment included:
//! what a budget is charged and MEMORY USAGE counts. Those rules are in `bits/cut.rs`; this file
//! is the store, the one place in the crate that handles raw memory: its API is safe, and the
//! one unsafe promise a caller makes is [`AdoptableBlock::new`]'s.

// Each a concern of the store apart from its words' and lines' addresses, which stay here with
// the hot path: how a size is cut (`cut`), a line's probes (`lines`), the blocks' allocation and
// pages (`blocks`), and the store as the bytes of its encoding (`bytes`).
mod blocks;
mod bytes;
mod cut;
mod lines;
mod relocate;
mod union;

pub use bytes::AdoptableBlock;
pub use cut::{allocated_bytes, allocated_bytes_by, MAX_SLACK};
pub(crate) use lines::{
    by_line_count, by_probe_count, each_line, GroupLines, ItemLines, LineOps, LineTable, Portable,
    GROUP,
};

use crate::budget::{allocator, LimitError};
use crate::hash::ItemHash;
use blocks::{free_block, zeroed_block};
use cut::{allocated_piece_len, allocation, block_layout, piece_len, piece_shift, table_in_tail};

/// 64-bit words, zeroed at allocation, in one block or in pieces (see the module's picture).
/// Three words, the size of a `Vec<u64>`, so that a layer's record (counted in MEMORY USAGE)
/// stays 56 bytes.
pub(crate) struct BitStore {
    /// The one block, or (in pieces) the table of the pieces' blocks, as `NonNull<u64>`s.
    ptr: std::ptr::NonNull<u64>,
    len: usize,
    /// log2 of a piece's words; 0: one block (or no words).
    piece_shift: u32,
    /// In pieces: the table is the end of the tail's block (see [`table_in_tail`]), not a block
    /// of its own.
    table_in_tail: bool,
}

// SAFETY: BitStore owns its blocks exclusively, like a Vec<u64>.
unsafe impl Send for BitStore {}
// SAFETY: shared access only reads the words; writes need `&mut BitStore`.
unsafe impl Sync for BitStore {}

/// The lines of a store, for finding many ([`BitStore::line_finder`]): line l is line
/// `l & mask` of block `table[l >> shift]`, a store in one block being a table of one.
#[derive(Clone, Copy)]
pub(crate) struct LineFinder<'a> {
    table: *const std::ptr::NonNull<u64>,
    shift: u32,
    mask: usize,
    /// Lines in the store, at least one.
    lines: u64,
    store: std::marker::PhantomData<&'a BitStore>,
}

impl<'a> LineFinder<'a> {
    /// The first line of `hash` ([`ItemHash::line`] 0).
    #[inline(always)]
    pub(crate) fn first_line(self, hash: &ItemHash) -> &'a [u64; 8] {
        let line = hash.line(0, self.lines) as usize;
        // SAFETY: line < lines, as (x · lines) >> 64 < lines for any 64-bit x; so line >> shift
        // is a block of the table (0 for one block: a line index is below 2^(BITS - 1)), and
        // its 8 words are in that block (pieces are whole lines), initialised and borrowed
        // with the store for 'a.
        unsafe {
            let block = self.table.add(line >> self.shift).read();
            &*block
                .as_ptr()
                .add((line & self.mask) * 8)
                .cast::<[u64; 8]>()
        }
    }
}

/// The pieces of a store in pieces ([`BitStore::pieces`]), valid while the store is unchanged.
#[derive(Clone, Copy)]
struct Pieces {
    /// The table of the pieces' blocks.
    table: *const std::ptr::NonNull<u64>,
    /// log2 of a piece's words.
    shift: u32,
}

impl Pieces {
    /// Where word `index` is.
    ///
    /// # Safety
    /// `index` is below the store's length, and the store is unchanged since `self` was read.
    #[inline(always)]
    unsafe fn word_ptr(self, index: usize) -> *mut u64 {
        // SAFETY: the table has a block for every piece, and index < len.
        let piece = unsafe { *self.table.add(index >> self.shift) };
        // SAFETY: within its piece, since index < len.
        unsafe { piece.as_ptr().add(index & ((1 << self.shift) - 1)) }
    }
}

impl BitStore {
    fn in_pieces(&self) -> bool {
        self.piece_shift != 0
    }

    /// Blocks holding the words: 0, 1, or the pieces.
    fn block_count(&self) -> usize {
        if self.len == 0 {
            0
        } else if self.in_pieces() {
            self.len.div_ceil(1 << self.piece_shift)
        } else {
            1
        }
    }

    /// Words of block `index`.
    fn block_len(&self, index: usize) -> usize {
        if self.in_pieces() {
            piece_len(self.len, self.piece_shift, index)
        } else {
            self.len
        }
    }

    /// Words block `index` was allocated with.
    fn allocated_len(&self, index: usize) -> usize {
        if self.in_pieces() {
            allocated_piece_len(self.len, self.piece_shift, self.table_in_tail, index)
        } else {
            self.len
        }
    }

    /// The pieces' blocks (in pieces).
    fn table(&self) -> &[std::ptr::NonNull<u64>] {
        // SAFETY: in pieces, `ptr` is the boxed table of `block_count` blocks that `zeroed` made.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().cast(), self.block_count()) }
    }

    /// The pieces' blocks (in pieces), to change where one is.
    fn table_mut(&mut self) -> &mut [std::ptr::NonNull<u64>] {
        // SAFETY: in pieces, `ptr` is the table of `block_count` blocks, owned by self and
        // borrowed exclusively with it.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr().cast(), self.block_count()) }
    }

    /// The address of block `index`.
    fn block_ptr(&self, index: usize) -> std::ptr::NonNull<u64> {
        if self.in_pieces() {
            self.table()[index]
        } else {
            self.ptr
        }
    }

    /// `words` zeroed words, cut as [`allocated_bytes`] predicts on this process's allocator, or
    /// the allocation failure as a value (`vec![0; n]` would abort the whole server when the
    /// allocator refuses). Zeroed blocks keep a fresh filter's pages untouched until used.
    pub(crate) fn zeroed(words: u64) -> Result<BitStore, LimitError> {
        let refused = LimitError::Allocation {
            needed: words.saturating_mul(8),
        };
        let len = usize::try_from(words).map_err(|_| refused)?;
        block_layout(len).ok_or(refused)?;
        if len == 0 {
            return Ok(BitStore {
                ptr: std::ptr::NonNull::dangling(),
                len,
                piece_shift: 0,
                table_in_tail: false,
            });
        }
        let piece_shift = piece_shift(allocator(), words);
        if piece_shift == 0 {
            let block = block_layout(len).and_then(zeroed_block).ok_or(refused)?;
            return Ok(BitStore {
                ptr: block,
                len,
                piece_shift,
                table_in_tail: false,
            });
        }
        let pieces = len.div_ceil(1 << piece_shift);
        let in_tail = table_in_tail(allocator(), words, piece_shift);
        let allocated_len = |index| allocated_piece_len(len, piece_shift, in_tail, index);
        let mut table: Vec<std::ptr::NonNull<u64>> = Vec::new();
        table.try_reserve_exact(pieces).map_err(|_| refused)?;
        for index in 0..pieces {
            match block_layout(allocated_len(index)).and_then(zeroed_block) {
                Some(block) => table.push(block),
                None => {
                    for (index, block) in table.iter().enumerate() {
                        free_block(*block, allocated_len(index));
                    }
                    return Err(refused);
                }
            }
        }
        let ptr = if in_tail {
            let tail = table[pieces - 1];
            // SAFETY: the tail's block has room for `pieces` words after its own.
            let at = unsafe { tail.as_ptr().add(piece_len(len, piece_shift, pieces - 1)) };
            // SAFETY: `pieces` zeroed words of the tail's block, aligned as u64 (as a pointer),
            // not overlapping the Vec.
            unsafe { std::ptr::copy_nonoverlapping(table.as_ptr(), at.cast(), pieces) };
            // SAFETY: inside a block, never null.
            unsafe { std::ptr::NonNull::new_unchecked(at) }
        } else {
            let table = Box::into_raw(table.into_boxed_slice());
            // SAFETY: from a box, never null.
            unsafe { std::ptr::NonNull::new_unchecked(table.cast::<u64>()) }
        };
        Ok(BitStore {
            ptr,
            len,
            piece_shift,
            table_in_tail: in_tail,
        })
    }

    /// The first word of block `index`.
    fn block_start(&self, index: usize) -> usize {
        index << self.piece_shift
    }

    /// Words held.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Bytes the allocator handed out for this store (see [`allocated_bytes`]).
    pub(crate) fn allocated_bytes(&self) -> u64 {
        allocation(allocator(), self.len as u64, self.piece_shift)
    }

    /// Where word `index` is. Panics past the end, as slice indexing does.
    #[inline]
    fn word_ptr(&self, index: usize) -> *mut u64 {
        assert!(index < self.len, "word {index} of {}", self.len);
        // SAFETY: index < len, just checked.
        unsafe { self.word_ptr_within(index) }
    }

    /// Starts loading word `index` into the CPU's caches, a hint that never faults. Panics past
    /// the end, as slice indexing does. (Its callers prefetch on x86-64 only.)
    #[inline]
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    pub(crate) fn prefetch(&self, index: usize) {
        let word = self.word_ptr(index);
        #[cfg(target_arch = "x86_64")]
        // SAFETY: prefetching is a hint on an address inside the store; it never faults.
        unsafe {
            std::arch::x86_64::_mm_prefetch(word.cast::<i8>(), std::arch::x86_64::_MM_HINT_T0)
        };
        #[cfg(not(target_arch = "x86_64"))]
        let _ = word;
    }

    /// [`word_ptr`](Self::word_ptr) of an index the caller has checked.
    ///
    /// # Safety
    /// `index < self.len`.
    #[inline]
    unsafe fn word_ptr_within(&self, index: usize) -> *mut u64 {
        match self.pieces() {
            // SAFETY: index < len (the caller's contract).
            Some(pieces) => unsafe { pieces.word_ptr(index) },
            // SAFETY: within the one block, since index < len.
            None => unsafe { self.ptr.as_ptr().add(index) },
        }
    }

    /// In pieces, where they are: read once for the many words a group's lines are found in
    /// (the store's fields read again for each, as writes elsewhere might change them for all
    /// the optimiser knows, cost ~10 instructions a line).
    #[inline(always)]
    fn pieces(&self) -> Option<Pieces> {
        self.in_pieces().then(|| Pieces {
            table: self.ptr.as_ptr().cast::<std::ptr::NonNull<u64>>(),
            shift: self.piece_shift,
        })
    }

    #[inline]
    pub(crate) fn word(&self, index: usize) -> u64 {
        // SAFETY: an initialised word owned by self.
        unsafe { *self.word_ptr(index) }
    }

    #[inline]
    pub(crate) fn word_mut(&mut self, index: usize) -> &mut u64 {
        // SAFETY: an initialised word owned by self, borrowed exclusively with it.
        unsafe { &mut *self.word_ptr(index) }
    }

    /// The 8 words of line `line`, words 8·line to 8·line + 7 (a piece is whole lines: a line
    /// never spans two). Always inlined: a single lookup's first line is a few instructions.
    #[inline(always)]
    pub(crate) fn line(&self, line: usize) -> &[u64; 8] {
        if line >= self.len / 8 {
            line_out_of_range(line, self.len / 8);
        }
        // SAFETY: 8 initialised words of one block (line * 8 + 7 < len), owned by self.
        unsafe { &*self.word_ptr_within(line * 8).cast::<[u64; 8]>() }
    }

    #[inline]
    pub(crate) fn line_mut(&mut self, line: usize) -> &mut [u64; 8] {
        if line >= self.len / 8 {
            line_out_of_range(line, self.len / 8);
        }
        // SAFETY: as in `line`, borrowed exclusively with self.
        unsafe { &mut *self.word_ptr_within(line * 8).cast::<[u64; 8]>() }
    }

    /// Where the store's lines are, by one formula whether it is one block or in pieces (a
    /// batch then finds each line without branching on the cut); None for a store of no line.
    #[inline(always)]
    pub(crate) fn line_finder(&self) -> Option<LineFinder<'_>> {
        let lines = self.len / 8;
        if lines == 0 {
            return None;
        }
        let (table, shift) = match self.pieces() {
            // Pieces are whole lines: 2^(shift - 3) lines each.
            Some(pieces) => (pieces.table, pieces.shift - 3),
            // The one block is a table of one piece, which every line is in.
            None => (&raw const self.ptr, usize::BITS - 1),
        };
        Some(LineFinder {
            table,
            shift,
            mask: (1usize << shift) - 1,
            lines: lines as u64,
            store: std::marker::PhantomData,
        })
    }

    /// The words block by block, in order.
    pub(crate) fn blocks(&self) -> impl Iterator<Item = &[u64]> {
        (0..self.block_count()).map(move |index| {
            // SAFETY: `block_len` initialised words of a block owned by self.
            unsafe {
                std::slice::from_raw_parts(self.block_ptr(index).as_ptr(), self.block_len(index))
            }
        })
    }

    pub(crate) fn blocks_mut(&mut self) -> impl Iterator<Item = &mut [u64]> {
        let blocks: Vec<(std::ptr::NonNull<u64>, usize)> = (0..self.block_count())
            .map(|index| (self.block_ptr(index), self.block_len(index)))
            .collect();
        // SAFETY: distinct blocks owned by self, borrowed exclusively with it.
        blocks
            .into_iter()
            .map(|(block, len)| unsafe { std::slice::from_raw_parts_mut(block.as_ptr(), len) })
    }

    /// Zeroes words `start..end`. Panics past the end.
    pub(crate) fn zero_words(&mut self, start: usize, end: usize) {
        assert!(
            start <= end && end <= self.len,
            "words {start}..{end} of {}",
            self.len
        );
        let mut at = 0;
        for block in self.blocks_mut() {
            let (from, to) = (start.max(at), end.min(at + block.len()));
            if from < to {
                block[from - at..to - at].fill(0);
            }
            at += block.len();
        }
    }
}

/// The panic of a line index past the store (a bug), out of line: the check that calls it is
/// inlined into every lookup, and its message's arguments would otherwise be set up there.
#[cold]
#[inline(never)]
fn line_out_of_range(line: usize, lines: usize) -> ! {
    panic!("line {line} of {lines}")
}

/// Starts loading `line` into the CPU's caches, a hint that never faults.
#[inline(always)]
pub(crate) fn prefetch_line(line: &[u64; 8]) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetching is a hint on the address of a live line; it never faults.
    unsafe {
        std::arch::x86_64::_mm_prefetch(line.as_ptr().cast::<i8>(), std::arch::x86_64::_MM_HINT_T0)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = line;
}

/// Work on the bits of many lines ([`with_fast_shifts`]). `run` must be `#[inline(always)]`, so
/// that it is compiled into the caller built for the CPU's features (a closure would stay a call,
/// compiled without them), and test and set lines through `lines`.
pub(crate) trait ShiftHeavy {
    type Output;
    fn run<L: LineOps>(self, lines: L) -> Self::Output;
}

/// Runs `work` compiled for the best the CPU has: AVX-512 lines (eight probes of a line at a
/// time, [`lines`]) and BMI2, else BMI2 alone (`shlx`/`shrx` shift by a register in one
/// instruction instead of three, and [`lines::Bmi2`] multiplies from memory in one: two fewer
/// per probe), else as it is. The runtime check keeps
/// the module loadable on any x86-64.
#[inline(always)]
pub(crate) fn with_fast_shifts<W: ShiftHeavy>(work: W) -> W::Output {
    #[cfg(target_arch = "x86_64")]
    if let Some(bmi2) = lines::Bmi2::detect() {
        if let Some(avx512) = lines::Avx512::detect() {
            // SAFETY: the CPU has BMI2 and AVX-512 F and DQ, as the tokens say.
            return unsafe { compiled_for_avx512(work, avx512) };
        }
        // SAFETY: the CPU has BMI2, as the token says.
        return unsafe { compiled_for_bmi2(work, bmi2) };
    }
    work.run(Portable::new())
}

/// # Safety
/// The CPU must have BMI2 (the token says so).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "bmi2")]
unsafe fn compiled_for_bmi2<W: ShiftHeavy>(work: W, lines: lines::Bmi2) -> W::Output {
    work.run(lines)
}

/// # Safety
/// The CPU must have BMI2, AVX-512 F and DQ (the tokens say so).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "bmi2,avx512f,avx512dq")]
unsafe fn compiled_for_avx512<W: ShiftHeavy>(work: W, lines: lines::Avx512) -> W::Output {
    work.run(lines)
}

impl Drop for BitStore {
    fn drop(&mut self) {
        let blocks = self.block_count();
        // The tail's block, which may hold the table, is freed last.
        for index in 0..blocks {
            free_block(self.block_ptr(index), self.allocated_len(index));
        }
        if self.in_pieces() && !self.table_in_tail {
            // SAFETY: the table was boxed by `zeroed` with exactly this length.
            drop(unsafe {
                Box::from_raw(std::ptr::slice_from_raw_parts_mut(
                    self.ptr.as_ptr().cast::<std::ptr::NonNull<u64>>(),
                    blocks,
                ))
            });
        }
    }
}

impl std::fmt::Debug for BitStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "BitStore({} words)", self.len)
    }
}

/// Equal when the words are, however they are cut.
impl PartialEq for BitStore {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len
            && self
                .blocks()
                .flatten()
                .zip(other.blocks().flatten())
                .all(|(a, b)| a == b)
    }
}

#[cfg(test)]
mod tests {
    use super::blocks::HELPED_COPY_FROM;
    use super::cut::{LINE_ALIGN, LINE_ALIGN_FROM};
    use super::*;
    use crate::budget::Allocator;
    use crate::encoding::RDB_PIECE_BYTES;

    /// A store of `words` words with word w = w · an odd constant, written word by word.
    fn numbered(words: u64) -> BitStore {
        let mut store = BitStore::zeroed(words).unwrap();
        for w in 0..words as usize {
            *store.word_mut(w) = (w as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
        store
    }

    #[test]
    fn pieces_hold_the_words_in_order_on_aligned_lines() {
        // 132 KB in pieces, 1 MiB in one block, 2.5 MB in pieces.
        for (words, pieced) in [(16_500u64, true), (1 << 17, false), (312_500, true)] {
            let store = numbered(words);
            assert_eq!(store.in_pieces(), pieced, "{words}");
            assert_eq!(
                store.blocks().map(<[u64]>::len).sum::<usize>(),
                words as usize
            );
            assert!(store
                .blocks()
                .flatten()
                .enumerate()
                .all(|(w, &word)| word == (w as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)));
            let blocks = store.blocks().count();
            for (index, block) in store.blocks().enumerate() {
                assert!(index + 1 == blocks || block.len() % 8 == 0, "whole lines");
                if block.len() * 8 >= LINE_ALIGN_FROM {
                    assert!((block.as_ptr() as usize).is_multiple_of(LINE_ALIGN));
                }
            }
            let last = store.len() / 8 - 1;
            assert_eq!(store.line(last)[7], store.word(last * 8 + 7));
        }
    }

    #[test]
    fn a_table_with_room_in_the_tails_size_class_takes_no_block_of_its_own() {
        // 1,232 bytes (1,000 items at 0.9%): a 1,024-byte piece and a 208-byte tail, in the
        // 224-byte class with the 16-byte table after it.
        assert_eq!(allocated_bytes_by(Allocator::Jemalloc, 1232), 1024 + 224);
        // 1,384 bytes: the 360-byte tail and the table in the 384-byte class.
        assert_eq!(allocated_bytes_by(Allocator::Jemalloc, 1384), 1024 + 384);
        // 2,304 bytes: a 256-byte tail fills its class; the table takes a block of 16.
        assert_eq!(
            allocated_bytes_by(Allocator::Jemalloc, 2304),
            2048 + 256 + 16
        );
        for (words, in_tail) in [(154u64, true), (173, true), (288, false)] {
            let store = numbered(words);
            assert!(store.in_pieces());
            assert_eq!(store.table_in_tail, in_tail, "{words}");
            assert_eq!(store.allocated_bytes(), allocated_bytes(words * 8));
            assert!((0..words as usize)
                .all(|w| store.word(w) == (w as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)));
            // The tail's words stop before the table.
            assert_eq!(
                store.blocks().map(<[u64]>::len).sum::<usize>(),
                words as usize
            );
            let copy = store.try_clone().unwrap();
            assert_eq!(copy, store);
        }
    }

    #[test]
    fn bytes_written_across_a_piece_edge_read_back_and_nothing_else_changes() {
        let mut store = numbered(16_500);
        assert!(store.in_pieces());
        let edges: Vec<usize> = store
            .blocks()
            .scan(0, |at, block| {
                *at += block.len() * 8;
                Some(*at)
            })
            .collect();
        let pattern: Vec<u8> = (1..=40).collect();
        for &edge in &edges[..edges.len() - 1] {
            let at = edge - 17;
            let mut before = vec![0u8; 80];
            store.read_bytes(at - 20, &mut before);
            store.write_bytes(at, &pattern);
            let mut after = vec![0u8; 80];
            store.read_bytes(at - 20, &mut after);
            assert_eq!(after[20..60], pattern[..]);
            assert_eq!((&after[..20], &after[60..]), (&before[..20], &before[60..]));
        }
        // Zeroing a range across an edge clears exactly it.
        let (start, end) = (edges[0] / 8 - 3, edges[0] / 8 + 5);
        store.zero_words(start, end);
        assert!((start..end).all(|w| store.word(w) == 0));
        assert!(store.word(start - 1) != 0 && store.word(end) != 0);
    }

    /// A block of `bytes` bytes as a store's block of that size is allocated, every byte `fill`.
    fn filled_block(bytes: usize, fill: u8) -> std::ptr::NonNull<u8> {
        let layout = block_layout(bytes / 8).unwrap();
        // SAFETY: a layout of non-zero size.
        let block = std::ptr::NonNull::new(unsafe { std::alloc::alloc(layout) }).unwrap();
        // SAFETY: the block holds `bytes` bytes.
        unsafe { block.as_ptr().write_bytes(fill, bytes) };
        block
    }

    #[test]
    fn a_block_that_is_one_of_the_stores_becomes_it_and_any_other_is_left() {
        // 8 RDB pieces and a tail of 4 KiB: the pieces' pages are never touched but those adopted.
        let piece = RDB_PIECE_BYTES as usize;
        let bytes = 8 * piece + 4096;
        let mut store = BitStore::zeroed(bytes as u64 / 8).unwrap();
        assert_eq!(store.block_count(), 9);
        let allocated = store.allocated_bytes();

        let second = filled_block(piece, 0xa5);
        // SAFETY: a block of the global allocator with the layout the store frees it with.
        assert!(store.adopt(piece, unsafe { AdoptableBlock::new(second, piece) }));
        let tail = filled_block(4096, 0x3c);
        // SAFETY: as above.
        assert!(store.adopt(8 * piece, unsafe { AdoptableBlock::new(tail, 4096) }));
        let mut edge = [0u8; 16];
        store.read_bytes(piece - 8, &mut edge);
        assert_eq!(edge, [[0u8; 8], [0xa5; 8]].concat()[..]);
        store.read_bytes(8 * piece - 8, &mut edge);
        assert_eq!(edge, [[0u8; 8], [0x3c; 8]].concat()[..]);
        assert_eq!(store.word(bytes / 8 - 1), 0x3c3c_3c3c_3c3c_3c3c);
        // Read in place within a block, not across two.
        let whole = store.bytes_in_one_block(piece, piece).unwrap();
        assert_eq!(whole.as_ptr(), second.as_ptr().cast_const());
        assert!(whole.iter().all(|&b| b == 0xa5));
        assert_eq!(store.bytes_in_one_block(piece + 3, 5), Some(&[0xa5; 5][..]));
        assert_eq!(store.bytes_in_one_block(piece - 8, 16), None);
        assert_eq!(store.allocated_bytes(), allocated);

        // Not one block, or misaligned: left with the caller.
        let spare = filled_block(piece, 1);
        for (offset, len) in [(piece / 2, piece), (piece, piece - 64), (8 * piece, piece)] {
            // SAFETY: as above; refused, so the block stays ours.
            let adopted = store.adopt(offset, unsafe { AdoptableBlock::new(spare, len) });
            assert!(!adopted, "{offset}+{len}");
        }
        // SAFETY: allocated by filled_block with this layout, and never adopted.
        unsafe { std::alloc::dealloc(spare.as_ptr(), block_layout(piece / 8).unwrap()) };
        // The tail's bytes, 8 bytes past a line: refused (a line would span two cache lines).
        let spare = filled_block(4096 + 64, 2);
        // SAFETY: 8 bytes into a block of 4160 bytes.
        let shifted = unsafe { spare.add(8) };
        // SAFETY: as above; refused, so the block stays ours.
        assert!(!store.adopt(8 * piece, unsafe { AdoptableBlock::new(shifted, 4096) }));
        // SAFETY: allocated by filled_block with this layout, and never adopted.
        unsafe { std::alloc::dealloc(spare.as_ptr(), block_layout(520).unwrap()) };

        // A store in one block takes a block of its whole size.
        let mut small = BitStore::zeroed(128).unwrap();
        assert!(!small.in_pieces());
        let block = filled_block(1024, 0xff);
        // SAFETY: as above.
        assert!(small.adopt(0, unsafe { AdoptableBlock::new(block, 1024) }));
        assert!(small.blocks().flatten().all(|&word| word == u64::MAX));
        // Dropping both frees the adopted blocks as their own.
    }

    #[test]
    fn a_store_cut_at_rdb_pieces_keeps_its_table_apart_so_its_tail_can_be_adopted() {
        // 8 RDB pieces and a tail of 4,000 bytes, whose 4 KiB class would have room for the
        // 72-byte table: the table still takes a block of its own.
        let piece = RDB_PIECE_BYTES as usize;
        let bytes = 8 * piece + 4000;
        let mut store = BitStore::zeroed(bytes as u64 / 8).unwrap();
        if !store.in_pieces() {
            return; // the C library's malloc: one block, no table
        }
        assert!(!store.table_in_tail);
        let tail = filled_block(4000, 0x3c);
        // SAFETY: a block of the global allocator with the layout the store frees it with.
        assert!(store.adopt(8 * piece, unsafe { AdoptableBlock::new(tail, 4000) }));
        assert_eq!(store.word(bytes / 8 - 1), 0x3c3c_3c3c_3c3c_3c3c);
        assert_eq!(store.bytes_in_one_block(piece, 8), Some(&[0u8; 8][..]));
    }

    #[test]
    fn a_clone_holds_the_same_words_in_blocks_of_its_own() {
        // The last one is copied with the helper thread (64 MiB and more, in 1 MiB pieces).
        let helped = (HELPED_COPY_FROM as u64 + 8192) / 8;
        for words in [0u64, 3, 16_500, 312_500, helped] {
            let store = numbered(words);
            let mut copy = store.try_clone().unwrap();
            assert_eq!(copy, store);
            if words > 0 {
                *copy.word_mut(words as usize - 1) ^= 1;
                assert_ne!(copy, store);
                assert!(store
                    .blocks()
                    .zip(copy.blocks())
                    .all(|(a, b)| a.as_ptr() != b.as_ptr()));
            }
        }
    }
}
