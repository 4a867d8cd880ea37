//! Sliding-window Bloom filters: items are forgotten a bounded time after they were added.
//!
//! # The idea
//!
//! Split time into *generations* of G = ⌈W/3⌉ ms (W is the window) and keep one small Bloom filter
//! ("slot") per generation in a ring of four: the three generations a window may reach back into,
//! plus the current one. An add sets the item's bits in the current generation's slot only; a
//! lookup asks every slot still inside the window. When time enters a new generation the oldest
//! slot is cleared and reused for it. This is the rotating ("double-buffered") Bloom filter of
//! Chang, Feng and Li ("Approximate Caches for Packet Classification", INFOCOM 2004) with three
//! generations per window instead of one, plus two things that make it cheap: every slot has the
//! same shape, and the four slots' blocks of one item sit next to each other in memory.
//!
//! Generations are numbered by absolute time: generation(t) = ⌊t / G⌋ for t in Unix ms. The filter
//! never reads a clock; every operation takes `now_ms` from the caller.
//!
//! # Guarantees (G = ⌈W/3⌉, an item written at time t, generation e = ⌊t/G⌋)
//!
//! - *Present through t + W*, whatever the load: a slot is cleared only when the generation
//!   e + 4 begins, at (e + 4)·G > t + 3G ≥ t + W. Bits are never cleared early, so an overloaded
//!   filter only gets more false positives, never false negatives.
//! - *Forgotten from (e + 4)·G on* ([`WindowShape::forgotten_at`]), which is at most t + 4G =
//!   t + 4⌈W/3⌉ ≤ t + 2W for every allowed window (W ≥ [`MIN_WINDOW_MS`]); for W a multiple of 3
//!   that is t + W + W/3. After it the item answers "present" only as a false positive.
//! - *False-positive rate ≤ ε* while each generation receives at most ⌈N/3⌉ new items, i.e. at a
//!   steady rate of N items per window: a lookup consults at most four slots, each sized for
//!   ⌈N/3⌉ items at 0.9·ε/4, and the union bound gives 0.9·ε. A burst that puts the whole window's
//!   N items into one generation overloads that slot threefold and raises the rate until the slot
//!   expires (four generations later). Measured at the worst moment (all four slots full), over
//!   eight filters: 0.90% at ε = 1% and 0.090% at 0.1% with 30,000 items per slot. Tiny slots
//!   measure above the model, as any Bloom filter that small does (Bose et al., "On the
//!   false-positive rate of Bloom filters", IPL 2008): 0.119% at 0.1% with 67 items per slot.
//!
//! # Why not an Age-Partitioned Bloom Filter
//!
//! The APBF (Shtul, Baquero, Almeida, "Age-Partitioned Bloom Filters", arXiv 2001.03147) keeps
//! k + l one-hash slices, sets a bit in the k newest and answers present when k consecutive slices
//! have the item's bit. It shines when the window must be cut finely (large l), which our contract
//! does not need: forgetting by 2W allows l = 3 whole-filter generations. Computed here, with the
//! exact fill 1 − e^(−j/c) of a slice that received j generations at c bits per generation item
//! (the linear fill (i+1)/2k sometimes used understates it: (k, l) = (10, 25) then gives 1.03% at
//! ε = 1%, (11, 9) 0.105% at 0.1%), and the best (k, l, c) its FPR recurrence allows:
//!
//! ```text
//!                   APBF, best found (no       this ring (blocked, with the 0.9·ε
//!                   margin)                    margin)
//!   ε = 1e-2   19.6 bits/item (2.05×), k=10    17.9 bits/item (1.87×), k=8
//!              l=48: 10 scattered lines/add,   4 adjacent lines per lookup;
//!              ~12 probes per absent item      an add is a lookup + k bits in 1 line
//!   ε = 1e-3   26.1 bits/item (1.82×), k=13    26.0 bits/item (1.81×), k=11
//!              l=64: 77 slices per lookup      4 adjacent lines per lookup
//! ```
//!
//! An absent item must show a zero in every k consecutive APBF slices, which costs about
//! 2·(l/k + 1) probes on scattered cache lines; here it costs one zero per slot in four adjacent
//! cache lines. The price of the ring is a coarser expiry (from t + W to t + 4⌈W/3⌉ instead of
//! t + W + W/l).
//!
//! # Layout
//!
//! A slot is sized like one layer (see [`crate::sizing`]) for ⌈N/3⌉ items at 0.9·ε/4, in one of
//! three layouts, the first that qualifies:
//!
//! 1. *blocked* (all k bits of an item in one 512-bit block), when the four slots take at most
//!    [`MAX_MEMORY_FACTOR`] × a classic filter of N items at ε and a slot at most
//!    [`BLOCKED_MAX_COST`] × a classic slot: ε from about 3e-2 down to 1e-4 on big windows;
//! 2. *in h lines* (k/h bits in each of h blocks, h = 2..=4, as a layer in lines), for the fewest
//!    h within [`LINES_MAX_COST`](crate::sizing::LINES_MAX_COST) of a classic slot, when a
//!    classic slot is at least [`LINES_MIN_BYTES`](crate::sizing::LINES_MIN_BYTES) (as for
//!    layers: smaller ones are in cache): below 1e-4, 3 lines down to 1e-6 and 4 from 1e-7;
//! 3. *classic* otherwise (small windows at high rates), unless double hashing's floor would take
//!    more than the slot's rate ([`crate::sizing::past_classic_floor`]): then in the lines
//!    with the fewest bits within the memory bound.
//!
//! [`crate::sizing::slot_size`] applies these rules; this module supplies the budget and costs.
//!
//! Memory stays within 2.1× a classic filter for ε ≤ 5% (2.0× classic slots at 5%, 1.5× in
//! lines from 1e-5 to 1e-9); above, the four slots' share ε/4 is relatively dear and no layout
//! fits: 2.2× at 10%, 2.6× at 20%. Slot s holds the generations ≡ s (mod 4). Blocked or in lines,
//! the four slots' copies of block b are consecutive, so an item's whole state in one of its
//! blocks is 256 contiguous bytes that one prefetch stream fetches:
//!
//! ```text
//!   word:   0 ..... 7 | 8 .... 15 | 16 ... 23 | 24 ... 31 | 32 ... 39 | ...
//!           block 0     block 0     block 0     block 0     block 1
//!           slot 0      slot 1      slot 2      slot 3      slot 0      ...
//!   bit p of block b in slot s: word (4b + s)·8 + p/64, bit p % 64
//!   an item in h lines: blocks line(j) for j < h (ItemHash::line), k/h bits in each
//!
//!   classic:  | slot 0: bits/64 words | slot 1 | slot 2 | slot 3 |
//!   bit p of slot s: word s·bits/64 + p/64, bit p % 64
//!
//!   regions (the unit of clearing): region r is words r·2048 .. (r+1)·2048 of every slot
//!   blocked, in lines: blocks 256r .. 256(r+1) (64 KiB, the four slots' copies together)
//!   classic:           | slot 0: r's 16 KiB | ... | slot 1: r's 16 KiB | ... (4 runs)
//!   per region: the generation it was last brought to (8 bytes), the slots holding bits (1)
//! ```
//!
//! Words are little-endian when encoded (see [`encoding`]), as in the scalable filter. An item is
//! hashed once ([`ItemHash`]); its positions are the same in every slot (blocks from h1 and bits
//! from h2, or k double-hashing positions). The slots' contents are independent, so the union
//! bound still holds.
//!
//! # Cost
//!
//! One hash per item; its block index and k in-block bits become a 512-bit mask once, and each
//! slot is tested with eight branch-free AND/compare steps (no early exit to mispredict). A
//! lookup tests the live slots newest first; an add tests and sets the newest slot, then tests
//! the older ones only to say whether the item was new. Batches prefetch the four adjacent blocks
//! of 32 items before touching any. Per item, thread CPU time, batches of 100, against a
//! non-scaling plain filter of the same N and ε (`cargo bench -p rustbloom-core --bench window`,
//! a shared 2-core EPYC, so ±20%):
//!
//! ```text
//!                         ε = 1e-2                       ε = 1e-3
//!                   N = 1M         N = 30M          N = 1M         N = 30M
//!   plain           classic k=7    blocked k=7      classic k=10   classic k=10
//!   lookup, member  21.7 → 38.0    53.9 → 97.8      35.6 → 41.0    121.8 → 101.9 ns
//!   lookup, absent  26.6 → 39.5    59.7 → 189.2     29.7 → 42.2    105.7 →  85.3 ns
//!   add, new item   41.4 → 43.7    70.2 → 140.3     47.0 → 49.1    151.7 →  82.5 ns
//! ```
//!
//! Adds stay within 1.5× of a plain filter except against a big blocked one (one cache line per
//! item where the window touches four); lookups cost 1.4–1.8× in cache and up to 3× against a
//! big blocked plain filter at 1%.
//!
//! # Worked example
//!
//! N = 1,000,000 items per window, ε = 1%, W = 60,000 ms: G = 20,000 ms; each slot holds
//! 333,334 items at 0.225%, blocked with k = 8: 8,749 blocks of 512 bits = 4,479,488 bits; four
//! slots are 17,917,952 bits (2.24 MB; in one block jemalloc would hand out its 2.62 MB size
//! class, in pieces [`crate::bits`] takes 2.25 MB), 17.9 bits per windowed item, 1.87× the 9.59 of a classic
//! filter. An item added at t = 1,000,000,005 ms lies in generation 50,000; it answers present at
//! least through t + W = 1,000,060,005 and is forgotten when generation 50,004 begins, at
//! 1,000,080,000 = t + 79,995.
//!
//! ```
//! use rustbloom_core::bits::allocated_bytes;
//! use rustbloom_core::window::{bytes_needed, WindowFilter, WindowParams};
//! use rustbloom_core::Unlimited;
//!
//! let params = WindowParams { error_rate: 0.01, capacity: 1_000_000, window_ms: 60_000, seed: 7 };
//! assert_eq!(bytes_needed(&params), Ok(allocated_bytes(17_917_952 / 8)));
//! assert!(allocated_bytes(17_917_952 / 8) < 17_917_952 / 8 * 33 / 32);
//! let t = 1_000_000_005;
//! let mut filter = WindowFilter::new(params, t, &mut Unlimited).unwrap();
//! let added = filter.insert(b"alice", t);
//! assert!(added.new && added.at_ms == t);
//! assert!(filter.contains(b"alice", t + 60_000));
//! assert_eq!(filter.shape().forgotten_at(t), 1_000_080_000);
//! assert!(!filter.contains(b"alice", 1_000_080_000));
//! ```
//!
//! # Time, replicas and restarts
//!
//! A write at `now_ms` first advances the ring to its generation, then, in each region its probes
//! touch (a region is [`REGION_SLOT_WORDS`] words of every slot: 64 KiB of bits), clears the
//! slots of the generations that began since that region was last written (four at most), then
//! sets bits. So a write's cost never depends on the filter's size: at most 16 KiB cleared per
//! slot per probed line (per probed word when classic), where clearing a whole slot of an 800 MB
//! filter took 48 ms on the event loop. A region no write touched keeps its old bits; reads skip
//! the slots of any region whose generation has left the window (each region records the
//! generation it was last brought to), and the encoding writes them as zeros, so a filter holds
//! and saves what it would had every slot been cleared at once. The filter remembers the
//! latest timestamp a write used ([`WindowFilter::last_ms`]) and every write returns the timestamp
//! it used, so a replica applying the same write with that timestamp reaches identical bits.
//! A timestamp older than the last one (a replica, an NTP step back) is treated as the last one:
//! the ring never moves backwards and an item written then lives at least as long as asked. Reads
//! are `&self`: they answer as if the ring had advanced to `max(now_ms, last_ms)`, skipping slots
//! that would have been cleared. Because generations are absolute, a filter loaded after a restart
//! still holds what is inside the window and answers nothing older.

mod bytes;
pub mod encoding;
mod merge;
mod params;
mod probes;
mod regions;
#[cfg(test)]
mod tests;

pub use params::{
    bytes_needed, WindowError, WindowParams, WindowShape, BLOCKED_MAX_COST, GENERATIONS_PER_WINDOW,
    MAX_MEMORY_FACTOR, MAX_WINDOW_MS, MIN_WINDOW_MS, SLOTS, SLOT_MARGIN,
};
pub use regions::REGION_SLOT_WORDS;

use crate::bits::{self, BitStore};
use crate::budget::{allocation_size, LimitError, MemoryBudget};
use crate::hash::ItemHash;
use crate::relocate::Walk;
use crate::sizing::LayerSize;
use regions::{region_count, region_table_words};

/// What an insert did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Inserted {
    /// The item was absent before (false also when it was a false positive).
    pub new: bool,
    /// The timestamp the write used: `max(now_ms, last_ms)`. Replicate the write with it.
    pub at_ms: u64,
}

/// A byte range outside the filter's bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutOfRange;

/// What an add to a window filter did, as [`AddOutcome`](crate::AddOutcome) for a scalable
/// filter.
#[derive(Debug)]
pub struct WindowOutcome {
    /// One entry per processed item: true when it was absent from the window before.
    pub added: Vec<bool>,
    /// The timestamp the write used (what replication and the AOF must carry).
    pub at_ms: u64,
}

/// A sliding-window Bloom filter (see [`crate::window`] for the design and its guarantees).
/// Not `Clone`, like [`crate::BloomFilter`]: a copy allocates its bits, so it goes through a
/// budget ([`WindowFilter::try_clone`]).
#[derive(Debug)]
pub struct WindowFilter {
    params: WindowParams,
    shape: WindowShape,
    /// The latest timestamp a write used; the ring is advanced to its generation.
    last_ms: u64,
    /// The generation of `last_ms` and the moment the next one begins (saturated), kept so that
    /// operations within the current generation need no division.
    generation: u64,
    generation_end_ms: u64,
    /// Per slot: adds that changed at least one of its bits since it was last cleared.
    items: [u64; SLOTS],
    /// All slots' bits, laid out as the module documentation shows, in a bit store (its
    /// pieces are whole lines, so a slot's block never spans two).
    words: BitStore,
    /// The region table, one block (so that the record stays in jemalloc's 160-byte class, with
    /// `region_count`):
    ///
    /// ```text
    ///   | generation of region 0 | ... | of region n-1 | dirty marks of regions 0..7 | 8..15 | ...
    ///     one u64 each, n = region_count(shape)          one byte each, 8 to a word, region r
    ///                                                    in bits 8·(r % 8) .. of word n + r / 8
    /// ```
    ///
    /// A region's generation (see [`REGION_SLOT_WORDS`]) is the one its slots were last brought
    /// to. A write brings the regions it touches to its own generation first, clearing there the
    /// slots of the generations that began since; a read treats a region's slot as empty when the
    /// generation it holds is no longer inside the window. A region's dirty mark holds the slots
    /// that may hold bits (set since that slot was last cleared there), so that bringing a region
    /// forward clears only those.
    regions: Box<[u64]>,
    /// Regions: where the dirty marks begin in `regions`, kept to spare writes its computation.
    region_count: usize,
}

impl WindowFilter {
    /// An empty filter whose ring starts at `now_ms`, refused when the parameters are invalid or
    /// `budget` (or the system) refuses its bytes.
    pub fn new<B: MemoryBudget + ?Sized>(
        params: WindowParams,
        now_ms: u64,
        budget: &mut B,
    ) -> Result<WindowFilter, WindowError> {
        let shape = params.shape()?;
        WindowFilter::zeroed(params, shape, now_ms, [0; SLOTS], 0, budget)
            .map_err(WindowError::Limit)
    }

    /// An empty filter whose slots have exactly the shape `slot` (as a primary sized them: a
    /// replica or an AOF replay creates the primary's filter without sizing it), refused when
    /// [`WindowParams::check_slot`] refuses it or `budget` refuses its bytes.
    pub fn with_slot_shape<B: MemoryBudget + ?Sized>(
        params: WindowParams,
        slot: LayerSize,
        now_ms: u64,
        budget: &mut B,
    ) -> Result<WindowFilter, WindowError> {
        params.check_slot(slot)?;
        WindowFilter::zeroed(
            params,
            params.shape_with(slot),
            now_ms,
            [0; SLOTS],
            0,
            budget,
        )
        .map_err(WindowError::Limit)
    }

    /// An all-zero filter of an exact shape, its bits charged to `budget` first at their
    /// allocation size, which is also the filter's total; every region at `last_ms`'s
    /// generation with the slots of `dirty` marked as possibly holding bits.
    fn zeroed<B: MemoryBudget + ?Sized>(
        params: WindowParams,
        shape: WindowShape,
        last_ms: u64,
        items: [u64; SLOTS],
        dirty: u8,
        budget: &mut B,
    ) -> Result<WindowFilter, LimitError> {
        let allocation = bits::allocated_bytes(shape.bytes());
        budget.charge(allocation, allocation)?;
        let generation = shape.generation(last_ms);
        let regions = region_count(&shape);
        let mut table = filled(region_table_words(regions), 0)?;
        table[..regions as usize].fill(generation);
        let mut filter = WindowFilter {
            params,
            shape,
            last_ms,
            generation,
            generation_end_ms: shape.generation_end(generation),
            items,
            words: BitStore::zeroed(shape.bytes() / 8)?,
            regions: table.into_boxed_slice(),
            region_count: regions as usize,
        };
        for region in 0..regions as usize {
            filter.mark_dirty(region, dirty);
        }
        Ok(filter)
    }

    /// A copy of this filter, its bits allocated after `budget` admits them (COPY); an
    /// allocation the system refuses is an error, not an abort.
    pub fn try_clone<B: MemoryBudget + ?Sized>(
        &self,
        budget: &mut B,
    ) -> Result<WindowFilter, LimitError> {
        let mut copy =
            WindowFilter::zeroed(self.params, self.shape, self.last_ms, self.items, 0, budget)?;
        // Same length, same allocator: cut alike.
        for (copy, block) in copy.words.blocks_mut().zip(self.words.blocks()) {
            copy.copy_from_slice(block);
        }
        copy.regions.copy_from_slice(&self.regions);
        Ok(copy)
    }

    pub fn params(&self) -> &WindowParams {
        &self.params
    }

    /// The shape of the filter: its slots' shape ([`WindowShape::slot`]: bits, hashes and
    /// layout, what recreating the same slots takes) and its generation length.
    pub fn shape(&self) -> &WindowShape {
        &self.shape
    }

    /// The shape shared by the four slots (bits, hashes, layout), what a creation replicates.
    pub fn slot_shape(&self) -> LayerSize {
        self.shape.slot
    }

    /// The latest timestamp a write used.
    pub fn last_ms(&self) -> u64 {
        self.last_ms
    }

    /// True when the filter's time is more than one window ahead of `now_ms`: the bound a
    /// client's BF.ADDAT is held to, and what a filter restored from outside must not exceed
    /// (its time never goes back, so until the clock caught up nothing written would be
    /// forgotten).
    pub fn is_ahead_of(&self, now_ms: u64) -> bool {
        self.last_ms > now_ms.saturating_add(self.params.window_ms)
    }

    /// Per slot (slot s holds the generations ≡ s mod 4), the adds that changed its bits.
    pub fn slot_items(&self) -> [u64; SLOTS] {
        self.items
    }

    /// Adds counted in the slots still inside the window at `now_ms`: about the distinct items
    /// of the last 3 to 4 generations (an item refreshed in several generations counts in each).
    pub fn items(&self, now_ms: u64) -> u64 {
        let current = self.generation;
        let oldest = self.seen(now_ms).saturating_sub(GENERATIONS_PER_WINDOW);
        (oldest..=current)
            .map(|generation| self.items[(generation % SLOTS as u64) as usize])
            .sum()
    }

    /// Bytes of bits.
    pub fn bytes(&self) -> u64 {
        self.words.len() as u64 * 8
    }

    /// Bytes the allocator hands out for the bits (see [`bits::allocated_bytes`]).
    pub fn allocated_bytes(&self) -> u64 {
        self.words.allocated_bytes()
    }

    /// Offers the region table's and the bits' blocks to a defrag walk ([`crate::relocate`]);
    /// the record is its owner's to offer.
    pub(crate) fn relocate(&mut self, walk: &mut Walk) {
        walk.boxed_slice(&mut self.regions);
        self.words.relocate(walk);
    }

    /// Bytes the allocator hands out for this filter's own blocks: its record (boxed in
    /// [`crate::Filter`]), the regions' generations and marks (about 0.02% of the bits) and the
    /// bits.
    pub fn heap_bytes(&self) -> u64 {
        allocation_size(std::mem::size_of::<Self>() as u64)
            + allocation_size(size_of_val(&*self.regions) as u64)
            + self.allocated_bytes()
    }

    /// Hashes `item` under this filter's seed.
    #[inline]
    pub fn hash(&self, item: &[u8]) -> ItemHash {
        ItemHash::new(item, self.params.seed)
    }

    /// The timestamp a write at `now_ms` uses: the clock never goes back.
    pub fn write_time(&self, now_ms: u64) -> u64 {
        now_ms.max(self.last_ms)
    }

    /// Advances the ring to `now_ms` (a write without an item): the generations begun since the
    /// last write start with no items counted; their slots' bits are cleared region by region by
    /// the writes that touch them (see [`REGION_SLOT_WORDS`]), so this costs O(1). Returns the
    /// timestamp used.
    pub fn advance(&mut self, now_ms: u64) -> u64 {
        let at = self.write_time(now_ms);
        self.last_ms = at;
        if at < self.generation_end_ms {
            return at;
        }
        let (current, target) = (self.generation, self.shape.generation(at));
        // Generation x reuses slot x mod 4; past four new generations every slot starts over.
        for generation in current + 1..=target.min(current + SLOTS as u64) {
            self.items[(generation % SLOTS as u64) as usize] = 0;
        }
        self.generation = target;
        self.generation_end_ms = self.shape.generation_end(target);
        at
    }
}

/// `len` copies of `value`, or the allocation failure as a value.
fn filled<T: Copy>(len: u64, value: T) -> Result<Vec<T>, LimitError> {
    let refused = LimitError::Allocation {
        needed: len.saturating_mul(std::mem::size_of::<T>() as u64),
    };
    let len = usize::try_from(len).map_err(|_| refused)?;
    let mut out = Vec::new();
    out.try_reserve_exact(len).map_err(|_| refused)?;
    out.resize(len, value);
    Ok(out)
}
