//! One fixed-size Bloom filter layer.

use super::bits::{
    self, by_line_count, by_probe_count, AdoptableBlock, BitStore, GroupLines, ItemLines, LineOps,
    LineTable, Portable,
};
use super::budget::LimitError;
use super::hash::ItemHash;
use super::math;
use super::relocate::Walk;
use super::sizing::{LayerSize, Layout};

/// What a group's line table holds before its items' lines are found.
static EMPTY_LINE: [u64; 8] = [0; 8];

/// A plain Bloom filter of fixed size: the unit a scalable filter stacks.
#[derive(Debug, PartialEq)]
pub struct Layer {
    /// The bit array: bit b is bit b % 64 of word b / 64 (see the layout in [`crate`]).
    bits: BitStore,
    num_hashes: u32,
    layout: Layout,
    /// Probes in each of an item's lines (`num_hashes / lines` ≤ 16), 0 when classic; kept to
    /// spare the division on every operation, in a byte so that a layer's record stays 56 bytes
    /// (MEMORY USAGE counts it; see the test).
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
            bits: BitStore::zeroed(size.bits / 64)?,
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
        Ok(Layer {
            bits: self.bits.try_clone()?,
            ..*self
        })
    }

    /// True when every probe of `hash` is set.
    #[inline]
    pub fn contains(&self, hash: &ItemHash) -> bool {
        self.contains_with(Portable::new(), hash)
    }

    /// [`contains`](Self::contains), lines tested through `lines`; always inlined: a single
    /// lookup pays no call for its newest layer.
    #[inline(always)]
    pub(crate) fn contains_with(&self, lines: Portable, hash: &ItemHash) -> bool {
        let words = &self.bits;
        match self.layout {
            Layout::Classic => hash
                .positions(self.bits.len() as u64 * 64, self.num_hashes)
                .all(|p| words.word((p / 64) as usize) & (1u64 << (p % 64)) != 0),
            Layout::Blocked | Layout::Lines(_) => {
                let (count, per_line) = (words.len() as u64 / 8, u32::from(self.per_line));
                let test = |j: usize| {
                    lines.test(
                        words.line(hash.line(j, count) as usize),
                        hash.line_seed(j),
                        per_line,
                    )
                };
                // The first line on its own, before anything of the others is computed: a
                // non-member usually fails at its first probes. Its test written out, not
                // through `test`, which the compiler may keep out of line for the loop's sake.
                lines.test(
                    words.line(hash.line(0, count) as usize),
                    hash.line_seed(0),
                    per_line,
                ) && (1..self.layout.lines() as usize).all(test)
            }
        }
    }

    /// Asks the CPU to start loading the cache lines of `hash`'s probes (k lines when classic,
    /// all h lines otherwise), so that a later [`contains`](Self::contains) or [`set`](Self::set)
    /// of a batch does not wait for each miss in turn: on a layer larger than the cache this
    /// overlaps the misses of many items.
    #[inline]
    pub fn prefetch(&self, hash: &ItemHash) {
        self.prefetch_lines(hash, 0..self.layout.lines() as usize);
    }

    /// [`prefetch`](Self::prefetch) of the item's first line only (every probe's line when
    /// classic): what a lookup tests first, and all that most absent items need.
    #[inline]
    pub fn prefetch_first_line(&self, hash: &ItemHash) {
        self.prefetch_lines(hash, 0..1);
    }

    /// [`prefetch`](Self::prefetch) of the lines after the first (none when classic).
    #[inline]
    pub fn prefetch_other_lines(&self, hash: &ItemHash) {
        if self.layout != Layout::Classic {
            self.prefetch_lines(hash, 1..self.layout.lines() as usize);
        }
    }

    /// Bit i set when item i of `group` (at most [`bits::GROUP`] items) passes its first line in
    /// this layer (every probe when classic): clear means certainly absent from it; set needs
    /// [`contains`](Self::contains) for the answer. Finds every item's first line (and starts
    /// loading it) before testing any, through `ops`.
    #[inline(always)]
    pub(crate) fn first_lines_pass<L: LineOps>(&self, ops: L, group: &[ItemHash]) -> u64 {
        if self.layout == Layout::Classic {
            if group.len() >= 2 {
                group.iter().for_each(|hash| self.prefetch_first_line(hash));
            }
            return group.iter().enumerate().fold(0, |passed, (i, hash)| {
                passed | u64::from(self.contains(hash)) << i
            });
        }
        assert!(
            group.len() <= bits::GROUP,
            "a group of {} items",
            group.len()
        );
        let (total, per_line) = (self.bits.len() as u64 / 8, u32::from(self.per_line));
        let mut lines = [&EMPTY_LINE; bits::GROUP];
        for (line, hash) in lines.iter_mut().zip(group) {
            *line = self.bits.line(hash.line(0, total) as usize);
            bits::prefetch_line(line);
        }
        lines
            .iter()
            .zip(group)
            .enumerate()
            .fold(0, |passed, (i, (line, hash))| {
                passed | u64::from(ops.test(line, hash.line_seed(0), per_line)) << i
            })
    }

    /// Where items' first lines are in this layer, for a batch that finds many
    /// ([`bits::LineFinder`]), and the probes in each line; None when classic.
    #[inline(always)]
    pub(crate) fn line_finder(&self) -> Option<(bits::LineFinder<'_>, u32)> {
        if self.layout == Layout::Classic {
            return None;
        }
        Some((self.bits.line_finder()?, u32::from(self.per_line)))
    }

    /// Starts loading lines `lines` of `hash` (every probe's word when classic, whatever the
    /// range's start).
    #[inline(always)]
    fn prefetch_lines(&self, hash: &ItemHash, lines: std::ops::Range<usize>) {
        #[cfg(target_arch = "x86_64")]
        {
            let words = &self.bits;
            let fetch = |word: u64| words.prefetch(word as usize);
            match self.layout {
                Layout::Classic => hash
                    .positions(self.bits.len() as u64 * 64, self.num_hashes)
                    .for_each(|p| fetch(p / 64)),
                Layout::Blocked | Layout::Lines(_) => {
                    let count = words.len() as u64 / 8;
                    for j in lines {
                        fetch(hash.line(j, count) * 8);
                    }
                }
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (hash, lines);
    }

    /// Sets every probe of `hash`; returns true when at least one bit changed. Does not count.
    /// Always inlined, so that a caller compiled for the CPU's features (the batch add into a
    /// classic layer) sets bits with its shifts.
    #[inline(always)]
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
                // Read once: the stores below might alias the layer's fields, as far as the
                // compiler knows, which would reload it for every line.
                let per_line = u32::from(self.per_line);
                let portable = Portable::new();
                for j in 0..self.layout.lines() as usize {
                    let (line, seed) = (
                        words.line_mut(hash.line(j, lines) as usize),
                        hash.line_seed(j),
                    );
                    if changed != 0 {
                        portable.or_in(line, seed, per_line);
                    } else {
                        changed = u64::from(portable.set(line, seed, per_line));
                    }
                }
            }
        }
        changed != 0
    }

    /// Adds the items of `group` (at most [`bits::GROUP`]) in order while this layer, the
    /// newest of its filter, has room: an item an `older` layer holds is present; any other is
    /// set here, and new (and counted) when a bit of this layer changed. Pushes each answer to
    /// `added` and returns how many items it took: all, or up to the one that filled the layer.
    /// Each item's lines are found (and their loading started) in a first pass and tested and
    /// set through `ops` in a second.
    #[inline(always)]
    pub(crate) fn add_while_room<L: LineOps>(
        &mut self,
        ops: L,
        older: &[Layer],
        group: &[ItemHash],
        added: &mut Vec<bool>,
    ) -> usize {
        let held_before = |hash: &ItemHash| older.iter().rev().any(|layer| layer.contains(hash));
        if self.layout == Layout::Classic {
            if group.len() >= 2 {
                group.iter().for_each(|hash| self.prefetch(hash));
            }
            for (taken, hash) in group.iter().enumerate() {
                if self.is_full() {
                    return taken;
                }
                let new = !held_before(hash) && self.set(hash);
                self.items += u64::from(new);
                added.push(new);
            }
            return group.len();
        }
        let per_line = u32::from(self.per_line);
        let pass = ResolvedPass {
            older,
            room: self.capacity.saturating_sub(self.items),
        };
        let bits = &mut self.bits;
        let (taken, counted) = by_line_count!(self.layout.lines(), C => {
            let mut table = LineTable::<C>::new();
            let mut lines = GroupLines::resolve(&mut table, bits, group);
            by_probe_count!(
                per_line,
                N => pass.add::<L, C, N>(ops, &mut lines, per_line, added),
                _ => pass.add::<L, C, 0>(ops, &mut lines, per_line, added)
            )
        });
        self.items += counted;
        taken
    }

    /// ORs the bits of `sources` (layers of this one's shape) into this layer and sets its item
    /// count to what the union's bits imply ([`estimated_items`](Self::estimated_items)), held
    /// between the largest count of the inputs (a union holds each) and their sum (it holds no
    /// more); a merge's counts are estimates, as items present in several inputs count once.
    /// A union past the layer's capacity counts as full, at its capacity: a layer never counts
    /// more than it was sized for (what its encoding checks, and what tells a scalable filter to
    /// grow), so the next add goes to a new layer and the count under-states such a union.
    pub(crate) fn union_with(&mut self, sources: &[&Layer]) {
        debug_assert!(sources.iter().all(|source| source.size() == self.size()));
        let stores: Vec<&BitStore> = sources.iter().map(|source| &source.bits).collect();
        let ones = self.bits.union_with(&stores);
        let inputs = sources.iter().map(|source| source.items);
        let most = inputs.clone().fold(self.items, u64::max);
        let sum = inputs.fold(self.items, u64::saturating_add);
        // Every input counts at most its capacity, so `most` stays under the cap.
        self.items = self
            .estimated_items(ones)
            .clamp(most, sum)
            .min(self.capacity.max(most));
    }

    /// Items that leave `ones` of this layer's bits set, in expectation ([`estimated_items`]).
    pub(crate) fn estimated_items(&self, ones: u64) -> u64 {
        estimated_items(self.size(), ones)
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
    /// Offers the bits' blocks to a defrag walk ([`crate::relocate`]).
    pub(crate) fn relocate(&mut self, walk: &mut Walk) {
        self.bits.relocate(walk);
    }

    pub fn bytes(&self) -> u64 {
        self.bits.len() as u64 * 8
    }

    /// Copies `out.len()` bytes of the little-endian encoding of the bits, starting at byte
    /// `offset`. Panics if the range is outside the layer (callers compute ranges from `bytes()`).
    pub fn read_bytes(&self, offset: u64, out: &mut [u8]) {
        self.bits.read_bytes(offset as usize, out);
    }

    /// Overwrites bytes of the little-endian encoding starting at byte `offset`. Panics if the
    /// range is outside the layer.
    pub fn write_bytes(&mut self, offset: u64, data: &[u8]) {
        self.bits.write_bytes(offset as usize, data);
    }

    /// Bytes `offset .. offset + len` of the little-endian encoding without a copy, when they
    /// lie in one block of the store. Panics if the range is outside the layer.
    pub(crate) fn bytes_in_one_block(&self, offset: u64, len: usize) -> Option<&[u8]> {
        self.bits
            .bytes_in_one_block(usize::try_from(offset).ok()?, len)
    }

    /// Keeps `block` as bytes `offset .. offset + block.len()` of the bits when they are one
    /// block of the store ([`BitStore::adopt`]); false leaves it with its owner.
    pub(crate) fn adopt_bytes(&mut self, offset: u64, block: AdoptableBlock) -> bool {
        usize::try_from(offset).is_ok_and(|offset| self.bits.adopt(offset, block))
    }
}

/// The second pass of [`Layer::add_while_room`], over lines the first found.
struct ResolvedPass<'a> {
    older: &'a [Layer],
    /// Items the layer may still count.
    room: u64,
}

impl ResolvedPass<'_> {
    /// Tests and sets the group's lines through `ops`, compiled for `C` lines an item and `N`
    /// probes a line (0: any count, `per_line`); returns the items taken and how many were new.
    #[inline(always)]
    fn add<L: LineOps, const C: usize, const N: usize>(
        &self,
        ops: L,
        lines: &mut GroupLines<'_, '_, C>,
        per_line: u32,
        added: &mut Vec<bool>,
    ) -> (usize, u64) {
        // Answers gathered here and appended once: a push per item would check the vector's
        // capacity and store its length each time.
        let mut answers = [false; bits::GROUP];
        let len = lines.len();
        let (mut counted, mut taken) = (0, 0);
        // The layer takes items while it has room: a run of no more items than it has room
        // for needs no check per item.
        while taken < len && counted < self.room {
            let run = usize::try_from(self.room - counted).unwrap_or(usize::MAX);
            let end = len.min(taken.saturating_add(run));
            // Indexed: an iterator over the answers here left a bounds check (and ~19 more
            // instructions) an item.
            #[allow(clippy::needless_range_loop)]
            for i in taken..end {
                let (hash, mut item) = lines.item(i);
                let new =
                    !self.held_before(hash) && set_item::<L, C, N>(ops, &mut item, hash, per_line);
                counted += u64::from(new);
                answers[i] = new;
            }
            taken = end;
        }
        added.extend_from_slice(&answers[..taken]);
        (taken, counted)
    }

    /// True when an older layer holds `hash`: none, unless the filter grew.
    #[inline(always)]
    fn held_before(&self, hash: &ItemHash) -> bool {
        !self.older.is_empty() && self.older.iter().rev().any(|layer| layer.contains(hash))
    }
}

/// Sets the probes of `hash` in its lines `item` through `ops`, compiled as
/// [`ResolvedPass::add`]; true when a bit changed. Once a bit changed the other lines need no
/// test.
#[inline(always)]
fn set_item<L: LineOps, const C: usize, const N: usize>(
    ops: L,
    item: &mut ItemLines<'_, C>,
    hash: &ItemHash,
    per_line: u32,
) -> bool {
    let mut new = false;
    bits::each_line!(C, j => {
        let (line, seed) = (item.line_mut(j), hash.line_seed(j));
        new = match (new, N) {
            (true, 0) => {
                ops.or_in(line, seed, per_line);
                true
            }
            (true, _) => {
                ops.or_in_n::<N>(line, seed);
                true
            }
            (false, 0) => ops.set(line, seed, per_line),
            (false, _) => ops.set_n::<N>(line, seed),
        };
    });
    new
}

/// Items that leave `ones` of the bits of a layer (or a window's slot) of shape `size` set, in
/// expectation: for a classic layer, each item sets k uniform bits of m, leaving a bit clear with probability (1 − 1/m)^k, so
/// n = ln(1 − X/m) / (k·ln(1 − 1/m)) ≈ −m/k·ln(1 − X/m). In lines, an item sets j = k/h bits
/// in each of h lines of 512, the lines uniform: a line gets a Poisson number of visits of
/// mean μ = n·h/L, and a bit stays clear with probability e^(−μ(1 − q)), q = (1 − 1/512)^j,
/// so n = −ln(1 − X/m)·L / (h·(1 − q)) (the classic formula would undercount there, the
/// lines filling unevenly). A full layer counts as if one bit were clear. The crate's own
/// ln and exp: a replica replaying the merge computes the same count.
pub(crate) fn estimated_items(size: LayerSize, ones: u64) -> u64 {
    let bits = size.bits as f64;
    if bits == 0.0 {
        return 0;
    }
    let clear = ((bits - ones as f64) / bits).max(0.5 / bits);
    let lines = size.layout.lines();
    let estimate = if lines == 0 {
        math::ln(clear) / (f64::from(size.num_hashes) * math::ln(1.0 - 1.0 / bits))
    } else {
        let line_bits = 512.0;
        let unset = math::powi(1.0 - 1.0 / line_bits, size.hashes_per_line());
        -math::ln(clear) * (bits / line_bits) / (f64::from(lines) * (1.0 - unset))
    };
    // Rounded to the nearest; `as` saturates (and takes NaN to 0).
    (estimate + 0.5) as u64
}

/// Bytes the allocator hands out for a layer of `bytes` bytes of bits: its store's blocks,
/// cut as [`crate::bits`] cuts them so that the allocator rounds up at most
/// [`crate::bits::MAX_SLACK`] of them. What its creation charges the budget and what it is
/// counted for.
///
/// ```
/// use rustbloom_core::layer::layer_allocation_size;
/// // 12.7 MB in one block would take jemalloc's 14.68 MB class.
/// let bytes = 12_680_000;
/// assert!(layer_allocation_size(bytes) < bytes + bytes / 32);
/// ```
pub fn layer_allocation_size(bytes: u64) -> u64 {
    bits::allocated_bytes(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sizing::layer_size;

    /// A layer's bits, in one block or in pieces, answer as one block would; a copy equals it.
    #[test]
    fn layers_in_pieces_answer_as_one_block() {
        // 2.5 MB and 600 KB at 1e-4, 110k items at 1% (in pieces: its one block would take
        // jemalloc's 160 KiB class for 132 KB).
        for (capacity, error) in [(1_000_000, 1e-4), (240_000, 1e-4), (110_000, 0.009)] {
            let size = layer_size(capacity, error).unwrap();
            let mut layer = Layer::new(size, capacity, error).unwrap();
            assert!(
                layer.bits.allocated_bytes() as f64
                    <= layer.bytes() as f64 * (1.0 + bits::MAX_SLACK),
                "{capacity}"
            );
            let hashes: Vec<ItemHash> = (0..capacity / 4)
                .map(|i| ItemHash::new(&i.to_le_bytes(), 9))
                .collect();
            for hash in &hashes {
                layer.set(hash);
            }
            assert!(hashes.iter().all(|hash| layer.contains(hash)));
            let copy = layer.try_clone().unwrap();
            assert_eq!(copy, layer);
            // The encoding is the words in order, as one block holds them.
            let mut encoded = vec![0u8; layer.bytes() as usize];
            layer.read_bytes(0, &mut encoded);
            let words: Vec<u8> = layer
                .bits
                .blocks()
                .flatten()
                .flat_map(|word| word.to_le_bytes())
                .collect();
            assert_eq!(encoded, words);
        }
    }
}
