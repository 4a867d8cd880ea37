//! One fixed-size Bloom filter layer.

use super::hash::ItemHash;
use super::scalable::LimitError;
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
        bits.copy_from_slice(&self.bits);
        Ok(Layer { bits, ..*self })
    }

    /// The 8 words of line `line`.
    #[inline]
    fn line(words: &[u64], line: u64) -> &[u64; 8] {
        let start = line as usize * 8;
        words[start..start + 8].try_into().expect("8 words")
    }

    /// True when every probe of `hash` is set.
    #[inline]
    pub fn contains(&self, hash: &ItemHash) -> bool {
        let words = &self.bits;
        match self.layout {
            Layout::Classic => hash
                .positions(self.bits.len() as u64 * 64, self.num_hashes)
                .all(|p| words[(p / 64) as usize] & (1u64 << (p % 64)) != 0),
            Layout::Blocked | Layout::Lines(_) => {
                let lines = words.len() as u64 / 8;
                // Probe by probe, line by line: a non-member usually fails at its first probes.
                (0..self.layout.lines() as usize).all(|j| {
                    let line = Self::line(words, hash.line(j, lines));
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
                let word: *const u64 = &words[word as usize];
                // SAFETY: prefetching is a hint on an address inside the slice; it never faults.
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
                    let word = &mut words[(p / 64) as usize];
                    let mask = 1u64 << (p % 64);
                    changed |= !*word & mask;
                    *word |= mask;
                }
            }
            Layout::Blocked | Layout::Lines(_) => {
                let lines = words.len() as u64 / 8;
                for j in 0..self.layout.lines() as usize {
                    let start = hash.line(j, lines) as usize * 8;
                    let line: &mut [u64; 8] =
                        (&mut words[start..start + 8]).try_into().expect("8 words");
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
            head.copy_from_slice(&words[word].to_le_bytes()[within..within + take]);
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
            let mut le = words[word].to_le_bytes();
            le[within..within + take].copy_from_slice(&rest[..take]);
            words[word] = u64::from_le_bytes(le);
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

/// A layer's words: one zeroed allocation aligned to [`LINE_ALIGN`] (from a page up), freed
/// with the same layout. Three words, as the bit vector it replaced, so that a layer's bookkeeping
/// (counted in BF.INFO's Size and MEMORY USAGE) stays 56 bytes.
pub(crate) struct LineWords {
    ptr: std::ptr::NonNull<u64>,
    len: usize,
    /// The alignment it was allocated with.
    align: usize,
}

// SAFETY: LineWords owns its block exclusively, like a Vec<u64>.
unsafe impl Send for LineWords {}
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

    fn layout_of(&self) -> std::alloc::Layout {
        std::alloc::Layout::from_size_align(self.len * 8, self.align)
            .expect("the layout it was allocated with")
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
                align: layout.align(),
            });
        }
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) }.cast::<u64>();
        let ptr = std::ptr::NonNull::new(ptr).ok_or(refused)?;
        Ok(LineWords {
            ptr,
            len,
            align: layout.align(),
        })
    }
}

impl Drop for LineWords {
    fn drop(&mut self) {
        if self.len > 0 {
            // SAFETY: allocated by `zeroed` with exactly this layout.
            unsafe { std::alloc::dealloc(self.ptr.as_ptr().cast(), self.layout_of()) };
        }
    }
}

impl std::ops::Deref for LineWords {
    type Target = [u64];

    #[inline]
    fn deref(&self) -> &[u64] {
        // SAFETY: `len` initialised (zeroed) words owned by self.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl std::ops::DerefMut for LineWords {
    #[inline]
    fn deref_mut(&mut self) -> &mut [u64] {
        // SAFETY: as in deref, and &mut self is exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl std::fmt::Debug for LineWords {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LineWords({} words)", self.len)
    }
}

impl PartialEq for LineWords {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sizing::layer_size;

    #[test]
    fn big_layers_sit_on_cache_lines_and_small_ones_keep_their_size() {
        let big = Layer::new(layer_size(1_000_000, 1e-4).unwrap(), 1_000_000, 1e-4).unwrap();
        assert_eq!(big.bits.as_ptr() as usize % LINE_ALIGN, 0);
        assert_eq!(big.bits.layout_of().align(), LINE_ALIGN);
        let small = Layer::new(layer_size(100, 0.01).unwrap(), 100, 0.01).unwrap();
        assert_eq!(small.bits.layout_of().align(), 8);
        let copy = big.try_clone().unwrap();
        assert_eq!(copy, big);
        assert_eq!(copy.bits.as_ptr() as usize % LINE_ALIGN, 0);
    }
}
