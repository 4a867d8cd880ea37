//! One fixed-size Bloom filter layer.

use super::budget::{allocation_size, LimitError};
use super::hash::ItemHash;
use super::sizing::{LayerSize, Layout};

/// A plain Bloom filter of fixed size: the unit a scalable filter stacks.
#[derive(Debug, PartialEq)]
pub struct Layer {
    /// The bit array: bit b is bit b % 64 of word b / 64 (see the layout in [`crate`]).
    bits: LineWords,
    num_hashes: u32,
    layout: Layout,
    /// Probes in each of an item's lines (`num_hashes / lines` ≤ 16), 0 when classic; kept to
    /// spare the division on every operation, in a byte so that a layer's bookkeeping stays 56
    /// bytes (BF.INFO's Size counts it; see the test).
    per_line: u8,
    /// Items this layer was sized for; the scalable filter stops adding to it once reached.
    capacity: u64,
    /// The false-positive rate this layer was sized for.
    error_rate: f64,
    /// Items added to this layer (only those that changed at least one bit).
    items: u64,
}

impl Layer {
    /// An empty layer of an exact shape, for tools and benches that compare layouts (filters size
    /// their layers themselves). An allocation the system refuses is an error, not an abort.
    ///
    /// # Panics
    /// When the shape fails [`LayerSize::check`].
    pub fn new(size: LayerSize, capacity: u64, error_rate: f64) -> Result<Layer, LimitError> {
        if let Err(what) = size.check() {
            panic!("invalid layer shape ({what}): {size:?}");
        }
        Layer::with_size(size, capacity, error_rate, 0)
    }

    /// An all-zero layer of an exact shape, which the caller has checked ([`LayerSize::check`])
    /// and admitted under its limits (see [`crate::budget`]); an allocation the system
    /// refuses is an error, not an abort.
    pub(crate) fn with_size(
        size: LayerSize,
        capacity: u64,
        error_rate: f64,
        items: u64,
    ) -> Result<Layer, LimitError> {
        Ok(Layer {
            bits: LineWords::zeroed(size.bits / 64)?,
            num_hashes: size.num_hashes,
            layout: size.layout,
            // check() bounds it by MAX_BLOCKED_HASHES = 16.
            per_line: size.hashes_per_line() as u8,
            capacity,
            error_rate,
            items,
        })
    }

    /// A copy of this layer, its bits allocated fallibly (a refusal is an error, not an abort).
    pub fn try_clone(&self) -> Result<Layer, LimitError> {
        let mut bits = LineWords::zeroed(self.bits.len() as u64)?;
        for (copy, block) in bits.blocks_mut().zip(self.bits.blocks()) {
            copy.copy_from_slice(block);
        }
        Ok(Layer { bits, ..*self })
    }

    /// True when every probe of `hash` is set.
    #[inline]
    pub fn contains(&self, hash: &ItemHash) -> bool {
        let words = &self.bits;
        match self.layout {
            Layout::Classic => hash
                .positions(self.bits.len() as u64 * 64, self.num_hashes)
                .all(|p| words.word((p / 64) as usize) & (1u64 << (p % 64)) != 0),
            Layout::Blocked | Layout::Lines(_) => {
                let lines = words.len() as u64 / 8;
                // Probe by probe, line by line: a non-member usually fails at its first probes.
                (0..self.layout.lines() as usize).all(|j| {
                    let line = words.line(hash.line(j, lines) as usize);
                    hash.line_probes(j, u32::from(self.per_line))
                        .all(|p| line[(p / 64) as usize] & (1 << (p % 64)) != 0)
                })
            }
        }
    }

    /// Asks the CPU to start loading the cache lines of `hash`'s probes (k lines when classic,
    /// all h lines otherwise), so that a later [`contains`](Self::contains) or [`set`](Self::set)
    /// of a batch does not wait for each miss in turn: on a layer larger than the cache this
    /// overlaps the misses of many items.
    #[inline]
    pub fn prefetch(&self, hash: &ItemHash) {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            let words = &self.bits;
            let fetch = |word: u64| {
                let word = words.word_ptr(word as usize);
                // SAFETY: prefetching is a hint on an address inside the bits; it never faults.
                unsafe { _mm_prefetch(word.cast::<i8>(), _MM_HINT_T0) };
            };
            match self.layout {
                Layout::Classic => hash
                    .positions(self.bits.len() as u64 * 64, self.num_hashes)
                    .for_each(|p| fetch(p / 64)),
                Layout::Blocked | Layout::Lines(_) => {
                    let lines = words.len() as u64 / 8;
                    for j in 0..self.layout.lines() as usize {
                        fetch(hash.line(j, lines) * 8);
                    }
                }
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = hash;
    }

    /// Sets every probe of `hash`; returns true when at least one bit changed. Does not count.
    #[inline]
    pub fn set(&mut self, hash: &ItemHash) -> bool {
        let bits = self.bits.len() as u64 * 64;
        let words = &mut self.bits;
        let mut changed = 0u64;
        match self.layout {
            Layout::Classic => {
                for p in hash.positions(bits, self.num_hashes) {
                    let word = words.word_mut((p / 64) as usize);
                    let mask = 1u64 << (p % 64);
                    changed |= !*word & mask;
                    *word |= mask;
                }
            }
            Layout::Blocked | Layout::Lines(_) => {
                let lines = words.len() as u64 / 8;
                for j in 0..self.layout.lines() as usize {
                    let line = words.line_mut(hash.line(j, lines) as usize);
                    for p in hash.line_probes(j, u32::from(self.per_line)) {
                        let word = &mut line[(p / 64) as usize];
                        let bit = 1 << (p % 64);
                        changed |= !*word & bit;
                        *word |= bit;
                    }
                }
            }
        }
        changed != 0
    }

    pub(crate) fn count_item(&mut self) {
        self.items += 1;
    }

    /// True once the layer holds as many items as it was sized for.
    pub fn is_full(&self) -> bool {
        self.items >= self.capacity
    }

    pub fn size(&self) -> LayerSize {
        LayerSize {
            bits: self.bits.len() as u64 * 64,
            num_hashes: self.num_hashes,
            layout: self.layout,
        }
    }

    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    pub fn error_rate(&self) -> f64 {
        self.error_rate
    }

    pub fn items(&self) -> u64 {
        self.items
    }

    /// Bytes of bit storage.
    pub fn bytes(&self) -> u64 {
        self.bits.len() as u64 * 8
    }

    /// Copies `out.len()` bytes of the little-endian encoding of the bits, starting at byte
    /// `offset`. Panics if the range is outside the layer (callers compute ranges from `bytes()`).
    pub fn read_bytes(&self, offset: u64, out: &mut [u8]) {
        let words = &self.bits;
        let mut at = offset as usize;
        let mut rest = out;
        while !rest.is_empty() {
            let (word, within) = (at / 8, at % 8);
            let take = (8 - within).min(rest.len());
            let (head, tail) = rest.split_at_mut(take);
            head.copy_from_slice(&words.word(word).to_le_bytes()[within..within + take]);
            at += take;
            rest = tail;
        }
    }

    /// Overwrites bytes of the little-endian encoding starting at byte `offset`. Panics if the
    /// range is outside the layer.
    pub fn write_bytes(&mut self, offset: u64, data: &[u8]) {
        let words = &mut self.bits;
        let mut at = offset as usize;
        let mut rest = data;
        while !rest.is_empty() {
            let (word, within) = (at / 8, at % 8);
            let take = (8 - within).min(rest.len());
            let word = words.word_mut(word);
            let mut le = word.to_le_bytes();
            le[within..within + take].copy_from_slice(&rest[..take]);
            *word = u64::from_le_bytes(le);
            at += take;
            rest = &rest[take..];
        }
    }
}

/// `words` zeroed 64-bit words, or the allocation failure as a value. `vec![0; n]` would abort the
/// whole server when the allocator refuses, and `Vec::try_reserve` cannot ask for zeroed memory
/// (which keeps a fresh filter's pages untouched until used).
pub(crate) fn zeroed_words(words: u64) -> Result<Vec<u64>, LimitError> {
    let refused = LimitError::Allocation {
        needed: words.saturating_mul(8),
    };
    let words = usize::try_from(words).map_err(|_| refused)?;
    let layout = std::alloc::Layout::array::<u64>(words).map_err(|_| refused)?;
    if layout.size() == 0 {
        return Ok(Vec::new());
    }
    // SAFETY: the layout has a non-zero size; a non-null result is a zeroed block of `words`
    // u64s allocated by the global allocator with exactly the layout Vec<u64> uses, so Vec may
    // own and free it.
    unsafe {
        let ptr = std::alloc::alloc_zeroed(layout).cast::<u64>();
        if ptr.is_null() {
            return Err(refused);
        }
        Ok(Vec::from_raw_parts(ptr, words, words))
    }
}

/// Bytes a layer's bits of a page or more are aligned to: one cache line, so that each 512-bit
/// line of a layout in lines is exactly one cache line (one miss, one prefetch) whatever the
/// allocator. Redis' jemalloc aligns such blocks to pages anyway; glibc's malloc (tools, benches,
/// tests) returns big blocks 16 bytes past a page, which split every line over two cache lines:
/// measured on a 46 MB layer (3 lines per item, 4M lookups after a prefetch of 32 items), ~2× the
/// time per item.
const LINE_ALIGN: usize = 64;

/// Bytes of one piece of a big layer's bits. A layer of more than this takes its bits in whole
/// pieces plus one shorter tail, each a block of its own: 1 MiB is a size class of jemalloc (as
/// every power of two is), so the allocator rounds up only the tail (by at most 128 KiB), where
/// one block would be rounded up to the next of its four size classes per doubling (up to 25%
/// of the layer: 12,680,000 bytes of bits took 14,680,064 in one block, 1.16×, and take
/// 12,681,328 in pieces). A probe finds its piece in the
/// pieces' table (a few hundred bytes, in cache) at the cost of one more load.
pub const PIECE_BYTES: u64 = 1 << 20;
const PIECE_WORDS: usize = (PIECE_BYTES / 8) as usize;
const PIECE_WORD_BITS: u32 = PIECE_WORDS.trailing_zeros();

/// Bytes the allocator hands out for a layer of `bytes` bytes of bits (see [`PIECE_BYTES`] and
/// [`allocation_size`]): what its creation charges the budget and what it is counted for.
///
/// ```
/// use rustbloom_core::budget::{allocation_size, usable_size, Allocator};
/// use rustbloom_core::layer::{layer_allocation_size, PIECE_BYTES};
/// // One block up to a piece: the allocator's size class.
/// assert_eq!(layer_allocation_size(300_000), allocation_size(300_000));
/// // 12.7 MB: twelve pieces of 1 MiB, a tail, and the table of 13 pointers.
/// let bytes = 12_680_000;
/// let tail = bytes - 12 * PIECE_BYTES;
/// assert_eq!(
///     layer_allocation_size(bytes),
///     12 * PIECE_BYTES + allocation_size(tail) + allocation_size(13 * 8)
/// );
/// assert!(layer_allocation_size(bytes) < bytes + bytes / 50);
/// ```
pub fn layer_allocation_size(bytes: u64) -> u64 {
    if bytes <= PIECE_BYTES {
        return allocation_size(bytes);
    }
    let (whole, tail) = (bytes / PIECE_BYTES, bytes % PIECE_BYTES);
    let pieces = whole + u64::from(tail > 0);
    let tail_allocation = if tail > 0 { allocation_size(tail) } else { 0 };
    whole * allocation_size(PIECE_BYTES) + tail_allocation + allocation_size(pieces * 8)
}

/// A layer's words, zeroed at allocation: up to [`PIECE_BYTES`], one block; above, pieces of
/// [`PIECE_BYTES`] and a tail, found through a table. Blocks of a page and more are aligned to
/// [`LINE_ALIGN`] (pieces are whole lines, so no line spans two). Three words, so that a layer's bookkeeping (counted in BF.INFO's Size and MEMORY USAGE) stays
/// 56 bytes.
pub(crate) struct LineWords {
    /// The one block, or (in pieces) the table of the pieces' blocks, as `NonNull<u64>`s.
    ptr: std::ptr::NonNull<u64>,
    len: usize,
    /// Blocks: 0 (no words), 1, or the number of pieces (2 and more).
    blocks: usize,
}

// SAFETY: LineWords owns its blocks exclusively, like a Vec<u64>.
unsafe impl Send for LineWords {}
// SAFETY: shared access only reads the words; writes need `&mut LineWords`.
unsafe impl Sync for LineWords {}

impl LineWords {
    /// Blocks of a page and more are aligned to a line; smaller ones (classic layers of a few
    /// hundred items) keep u64's alignment, so that no allocator rounds them up to a bigger size
    /// class than the one the budget charged ([`crate::budget::allocation_size`]).
    fn layout(len: usize) -> Option<std::alloc::Layout> {
        let bytes = len.checked_mul(8)?;
        let align = if bytes >= 4096 { LINE_ALIGN } else { 8 };
        std::alloc::Layout::from_size_align(bytes, align).ok()
    }

    fn in_pieces(&self) -> bool {
        self.blocks > 1
    }

    /// Words of piece `index` (in pieces).
    fn piece_len(&self, index: usize) -> usize {
        piece_len(self.len, index)
    }

    /// The pieces' blocks (in pieces).
    fn table(&self) -> &[std::ptr::NonNull<u64>] {
        // SAFETY: in pieces, `ptr` is the boxed table of `blocks` blocks that `zeroed` made.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().cast(), self.blocks) }
    }

    /// `words` zeroed words, or the allocation failure as a value (see [`zeroed_words`]).
    pub(crate) fn zeroed(words: u64) -> Result<LineWords, LimitError> {
        let refused = LimitError::Allocation {
            needed: words.saturating_mul(8),
        };
        let len = usize::try_from(words).map_err(|_| refused)?;
        let layout = Self::layout(len).ok_or(refused)?;
        if len == 0 {
            return Ok(LineWords {
                ptr: std::ptr::NonNull::dangling(),
                len,
                blocks: 0,
            });
        }
        if len <= PIECE_WORDS {
            return Ok(LineWords {
                ptr: zeroed_block(layout).ok_or(refused)?,
                len,
                blocks: 1,
            });
        }
        let pieces = len.div_ceil(PIECE_WORDS);
        let mut table: Vec<std::ptr::NonNull<u64>> = Vec::new();
        table.try_reserve_exact(pieces).map_err(|_| refused)?;
        for index in 0..pieces {
            match Self::layout(piece_len(len, index)).and_then(zeroed_block) {
                Some(block) => table.push(block),
                None => {
                    for (index, block) in table.iter().enumerate() {
                        free_block(*block, piece_len(len, index));
                    }
                    return Err(refused);
                }
            }
        }
        let table = Box::into_raw(table.into_boxed_slice());
        Ok(LineWords {
            // SAFETY: from a box, never null.
            ptr: unsafe { std::ptr::NonNull::new_unchecked(table.cast::<u64>()) },
            len,
            blocks: pieces,
        })
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Where word `index` is. Panics past the end, as slice indexing does.
    #[inline]
    pub(crate) fn word_ptr(&self, index: usize) -> *mut u64 {
        assert!(index < self.len, "word {index} of {}", self.len);
        let base = if self.in_pieces() {
            // SAFETY: the table has a block for every piece, and index < len.
            unsafe {
                *self
                    .ptr
                    .as_ptr()
                    .cast::<std::ptr::NonNull<u64>>()
                    .add(index >> PIECE_WORD_BITS)
            }
        } else {
            self.ptr
        };
        // SAFETY: within its block (the piece's offset is below its length since index < len).
        unsafe { base.as_ptr().add(index & (PIECE_WORDS - 1)) }
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

    /// The 8 words of line `line` (a piece is whole lines: a line never spans two).
    #[inline]
    pub(crate) fn line(&self, line: usize) -> &[u64; 8] {
        assert!(line < self.len / 8, "line {line} of {}", self.len / 8);
        // SAFETY: 8 initialised words of one block, owned by self.
        unsafe { &*self.word_ptr(line * 8).cast::<[u64; 8]>() }
    }

    #[inline]
    pub(crate) fn line_mut(&mut self, line: usize) -> &mut [u64; 8] {
        assert!(line < self.len / 8, "line {line} of {}", self.len / 8);
        // SAFETY: as in `line`, borrowed exclusively with self.
        unsafe { &mut *self.word_ptr(line * 8).cast::<[u64; 8]>() }
    }

    /// The words block by block, in order.
    pub(crate) fn blocks(&self) -> impl Iterator<Item = &[u64]> {
        (0..self.blocks).map(move |index| {
            let (block, len) = if self.in_pieces() {
                (self.table()[index], self.piece_len(index))
            } else {
                (self.ptr, self.len)
            };
            // SAFETY: `len` initialised words of a block owned by self.
            unsafe { std::slice::from_raw_parts(block.as_ptr(), len) }
        })
    }

    pub(crate) fn blocks_mut(&mut self) -> impl Iterator<Item = &mut [u64]> {
        let blocks: Vec<(std::ptr::NonNull<u64>, usize)> = if self.in_pieces() {
            (0..self.blocks)
                .map(|index| (self.table()[index], self.piece_len(index)))
                .collect()
        } else {
            (0..self.blocks).map(|_| (self.ptr, self.len)).collect()
        };
        // SAFETY: distinct blocks owned by self, borrowed exclusively with it.
        blocks
            .into_iter()
            .map(|(block, len)| unsafe { std::slice::from_raw_parts_mut(block.as_ptr(), len) })
    }
}

/// Words of piece `index` of a layer of `len` words in pieces: whole pieces, then the tail.
fn piece_len(len: usize, index: usize) -> usize {
    (len - index * PIECE_WORDS).min(PIECE_WORDS)
}

/// A zeroed block of `layout` (non-zero size) from the global allocator, None when refused.
fn zeroed_block(layout: std::alloc::Layout) -> Option<std::ptr::NonNull<u64>> {
    // SAFETY: callers pass a layout of non-zero size.
    std::ptr::NonNull::new(unsafe { std::alloc::alloc_zeroed(layout) }.cast::<u64>())
}

/// Frees a block of `len` words that [`zeroed_block`] allocated with `LineWords::layout(len)`.
fn free_block(block: std::ptr::NonNull<u64>, len: usize) {
    let layout = LineWords::layout(len).expect("the layout it was allocated with");
    // SAFETY: allocated by `zeroed_block` with exactly this layout.
    unsafe { std::alloc::dealloc(block.as_ptr().cast(), layout) };
}

impl Drop for LineWords {
    fn drop(&mut self) {
        if self.blocks == 0 {
            return;
        }
        if !self.in_pieces() {
            free_block(self.ptr, self.len);
            return;
        }
        for (index, block) in self.table().iter().enumerate() {
            free_block(*block, self.piece_len(index));
        }
        // SAFETY: the table was boxed by `zeroed` with exactly this length.
        drop(unsafe {
            Box::from_raw(std::ptr::slice_from_raw_parts_mut(
                self.ptr.as_ptr().cast::<std::ptr::NonNull<u64>>(),
                self.blocks,
            ))
        });
    }
}

impl std::fmt::Debug for LineWords {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LineWords({} words)", self.len)
    }
}

impl PartialEq for LineWords {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len && self.blocks().eq(other.blocks())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sizing::layer_size;

    #[test]
    fn big_layers_sit_on_cache_lines_and_small_ones_keep_their_size() {
        // 2.5 MB: three pieces (1 MiB, 1 MiB and a tail); 600 KB: one block.
        for (capacity, blocks) in [(1_000_000, 3), (240_000, 1)] {
            let big = Layer::new(layer_size(capacity, 1e-4).unwrap(), capacity, 1e-4).unwrap();
            assert_eq!(big.bits.blocks().count(), blocks, "{capacity}");
            let copy = big.try_clone().unwrap();
            assert_eq!(copy, big);
            for layer in [&big, &copy] {
                assert!(layer
                    .bits
                    .blocks()
                    .all(|block| (block.as_ptr() as usize).is_multiple_of(LINE_ALIGN)));
            }
        }
        let small = Layer::new(layer_size(100, 0.01).unwrap(), 100, 0.01).unwrap();
        assert_eq!(LineWords::layout(small.bits.len()).unwrap().align(), 8);
    }

    /// A layer in pieces answers, reads and writes its bits as one block would, across the
    /// pieces' boundaries too; its last line is the last of the tail.
    #[test]
    fn pieces_hold_the_bits_as_one_block() {
        let size = layer_size(1_000_000, 1e-4).unwrap();
        let mut layer = Layer::new(size, 1_000_000, 1e-4).unwrap();
        let bytes = layer.bytes();
        assert!(bytes > 2 * PIECE_BYTES && !bytes.is_multiple_of(PIECE_BYTES));
        let hashes: Vec<ItemHash> = (0..200_000u64)
            .map(|i| ItemHash::new(&i.to_le_bytes(), 9))
            .collect();
        for hash in &hashes {
            layer.set(hash);
        }
        assert!(hashes.iter().all(|hash| layer.contains(hash)));
        // Bytes written across each boundary read back, and only they changed.
        let pattern: Vec<u8> = (0..40).collect();
        for boundary in [PIECE_BYTES, 2 * PIECE_BYTES] {
            let at = boundary - 17;
            let mut before = vec![0u8; 80];
            layer.read_bytes(at - 20, &mut before);
            layer.write_bytes(at, &pattern);
            let mut after = vec![0u8; 80];
            layer.read_bytes(at - 20, &mut after);
            assert_eq!(after[20..60], pattern[..]);
            assert_eq!((&after[..20], &after[60..]), (&before[..20], &before[60..]));
        }
        let mut last = [0u8; 64];
        layer.read_bytes(bytes - 64, &mut last);
        let words = &layer.bits;
        let last_words: Vec<u8> = words
            .line(words.len() / 8 - 1)
            .iter()
            .flat_map(|word| word.to_le_bytes())
            .collect();
        assert_eq!(last_words, last);
    }

    #[test]
    fn a_layer_is_charged_its_pieces_and_their_table() {
        assert_eq!(layer_allocation_size(PIECE_BYTES), PIECE_BYTES);
        assert_eq!(
            layer_allocation_size(PIECE_BYTES + 64),
            PIECE_BYTES + allocation_size(64) + allocation_size(16)
        );
        assert_eq!(
            layer_allocation_size(3 * PIECE_BYTES),
            3 * PIECE_BYTES + allocation_size(24)
        );
        // At most one size class of the tail and the table over the bits, for any layer.
        for bytes in [1_500_000u64, 12_680_000, 143_800_000, 1_150_000_000] {
            let allocated = layer_allocation_size(bytes);
            assert!(
                allocated >= bytes && allocated < bytes + (1 << 17) + 16_384,
                "{bytes}"
            );
        }
    }
}
