//! The scalable filter: a stack of layers that grows by RedisBloom's rule.

pub mod encoding;
mod outcome;
mod params;

pub use outcome::{AddOutcome, CreateError, GrownLayer, InsertError, PushError};
pub use params::{
    FilterParams, Growth, MAX_CAPACITY, MAX_EXPANSION, MAX_LAYERS, NON_SCALING_MARGIN,
    TIGHTENING_RATIO,
};

use std::ops::ControlFlow;

use super::bits::{self, AdoptableBlock};
use super::budget::{allocation_size, LimitError, MemoryBudget};
use super::hash::ItemHash;
use super::layer::{layer_allocation_size, Layer};
use super::sizing::LayerSize;

/// Items hashed and prefetched together by the batch operations: enough misses in flight to keep
/// the memory system busy, few enough that the lines are still cached when the items are
/// processed. Measured here per item (blocked layout): 16 → 32 took a 126 MB filter from 38 to 31
/// ns per insert and 36 to 28 ns per lookup, a 12 MB one from 15 to 13 ns; 64 was worse again.
const BATCH: usize = bits::GROUP;
const _: () = assert!(BATCH <= 64, "a group's answers fit one word");

/// Calls `each` with the hashes of `items`, BATCH at a time, from one array filled in place: no
/// zeroed group to start from and no group copied out of an iterator (512 bytes each, which a
/// one-item BF.ADD paid twice). Stops when `each` breaks.
pub(crate) fn for_each_group<'a>(
    items: impl IntoIterator<Item = &'a [u8]>,
    seed: u64,
    mut each: impl FnMut(&[ItemHash]) -> ControlFlow<()>,
) {
    let mut group = [ItemHash::default(); BATCH];
    let mut items = items.into_iter();
    loop {
        let mut len = 0;
        for (slot, item) in group.iter_mut().zip(&mut items) {
            #[cfg(feature = "test-hooks")]
            test_hooks::panic_on(item);
            *slot = ItemHash::new(item, seed);
            len += 1;
        }
        if len == 0 {
            return;
        }
        if each(&group[..len]).is_break() || len < BATCH {
            return;
        }
    }
}

/// Hooks for the module's own tests (feature `test-hooks`, never in a release).
#[cfg(feature = "test-hooks")]
pub(crate) mod test_hooks {
    use crate::sizing::{LayerSize, Layout};

    /// This item panics when a batch operation hashes it.
    pub const PANIC_ITEM: &[u8] = b"rustbloom-test-panic";

    pub fn panic_on(item: &[u8]) {
        assert!(item != PANIC_ITEM, "test hook: panic on {PANIC_ITEM:?}");
    }

    /// A sizing that differs from the real one by one unit of its layout.
    pub fn skewed(size: LayerSize) -> LayerSize {
        let unit = match size.layout {
            Layout::Classic => 64,
            Layout::Blocked | Layout::Lines(_) => 512 * u64::from(size.layout.lines()),
        };
        LayerSize {
            bits: size.bits + unit,
            ..size
        }
    }
}

/// One group of a batch add ([`BloomFilter::insert_many`]), run compiled for the CPU's features
/// ([`bits::with_fast_shifts`]).
struct AddGroup<'a, B: MemoryBudget + ?Sized> {
    filter: &'a mut BloomFilter,
    group: &'a [ItemHash],
    budget: &'a mut B,
    outcome: &'a mut AddOutcome,
}

impl<B: MemoryBudget + ?Sized> bits::ShiftHeavy for AddGroup<'_, B> {
    type Output = ControlFlow<()>;

    #[inline(always)]
    fn run<L: bits::LineOps>(self, lines: L) -> ControlFlow<()> {
        self.filter
            .add_group(lines, self.group, self.budget, self.outcome)
    }
}

/// The first-line test of a group of a batch lookup ([`BloomFilter::contains_many`]) in every
/// layer, run compiled for the CPU's features ([`bits::with_fast_shifts`]): bit i set when item
/// i passed in some layer.
struct FirstLinesPass<'a> {
    layers: &'a [Layer],
    group: &'a [ItemHash],
}

impl bits::ShiftHeavy for FirstLinesPass<'_> {
    type Output = u64;

    #[inline(always)]
    fn run<L: bits::LineOps>(self, lines: L) -> u64 {
        self.layers.iter().fold(0, |passed, layer| {
            passed | layer.first_lines_pass(lines, self.group)
        })
    }
}

/// What adding one hashed item did.
enum Added {
    /// The filter already reported it: nothing changed.
    Present,
    /// Its bits were set, after pushing the layer at this index with this shape, if the newest
    /// was full.
    New(Option<(usize, LayerSize)>),
}

/// The shape of the layer a filter would push next (at index `layers.len()`), computed at most
/// once: sizing a blocked layer takes milliseconds, and a filter whose growth a limit refuses is
/// asked again on every add of a new item. Forgotten when a layer is pushed. Boxed: only a
/// filter that grows needs it, and a pointer keeps the filter's record in a smaller size class.
/// Not part of the filter's value (equality ignores it).
#[derive(Clone, Debug, Default)]
struct NextShape(Option<Box<LayerSize>>);

impl PartialEq for NextShape {
    fn eq(&self, _other: &Self) -> bool {
        true
    }
}

/// A scalable Bloom filter (see [`crate`] for the design).
///
/// ```
/// use rustbloom_core::{budget::Unlimited, BloomFilter, FilterParams, Growth};
/// let params = FilterParams { capacity: 100, error_rate: 0.01, growth: Growth::Scaling { expansion: 2 }, seed: 42 };
/// let mut filter = BloomFilter::new(params, &mut Unlimited).unwrap();
/// assert_eq!(filter.insert(b"alice", &mut Unlimited), Ok(true));
/// assert_eq!(filter.insert(b"alice", &mut Unlimited), Ok(false));
/// assert!(filter.contains(b"alice"));
/// assert_eq!(filter.items(), 1);
/// ```
///
/// ```text
///   BloomFilter (56 bytes, inline in the key's value):
///     | params (32) | layers: pointer, length (16) | next shape: None or a pointer (8) |
///   layers' block: | Layer 0 (56) | Layer 1 | ... |   exactly as many as the filter has
/// ```
#[derive(Debug, PartialEq)]
pub struct BloomFilter {
    params: FilterParams,
    /// Oldest first; never empty. A boxed slice, not a Vec: no capacity beyond the layers, so
    /// that its block is what [`memory_usage`](Self::memory_usage) counts.
    layers: Box<[Layer]>,
    next_shape: NextShape,
}

impl BloomFilter {
    /// An empty filter with one layer, refused when sizing fails or the budget refuses its bytes.
    pub fn new<B: MemoryBudget + ?Sized>(
        params: FilterParams,
        budget: &mut B,
    ) -> Result<BloomFilter, CreateError> {
        let size = params.layer_size(0).map_err(CreateError::Sizing)?;
        Self::create(params, size, budget)
    }

    /// An empty filter whose first layer has an explicit shape, as the primary that created it
    /// sized it (BF.RESERVE ... SHAPE, which replication and the AOF carry).
    pub fn with_first_layer<B: MemoryBudget + ?Sized>(
        params: FilterParams,
        size: LayerSize,
        budget: &mut B,
    ) -> Result<BloomFilter, CreateError> {
        size.check().map_err(CreateError::Shape)?;
        params.check_layer(0, size).map_err(CreateError::Shape)?;
        Self::create(params, size, budget)
    }

    fn create<B: MemoryBudget + ?Sized>(
        params: FilterParams,
        size: LayerSize,
        budget: &mut B,
    ) -> Result<BloomFilter, CreateError> {
        let allocation = layer_allocation_size(size.bytes());
        budget
            .charge(allocation, allocation)
            .map_err(CreateError::Limit)?;
        let first = Layer::with_size(size, params.capacity, params.layer_error_rate(0), 0)
            .map_err(CreateError::Limit)?;
        Ok(BloomFilter {
            params,
            layers: Box::new([first]),
            next_shape: NextShape::default(),
        })
    }

    /// Reassembles a filter from decoded parts; see [`encoding`], which validates.
    pub(crate) fn from_parts(params: FilterParams, layers: Vec<Layer>) -> BloomFilter {
        debug_assert!(!layers.is_empty());
        BloomFilter {
            params,
            layers: layers.into_boxed_slice(),
            next_shape: NextShape::default(),
        }
    }

    /// A copy of this filter, its bits allocated after `budget` admits them (COPY).
    pub fn try_clone<B: MemoryBudget + ?Sized>(
        &self,
        budget: &mut B,
    ) -> Result<BloomFilter, LimitError> {
        let allocation = self.allocated_bytes();
        budget.charge(allocation, allocation)?;
        let layers = self
            .layers
            .iter()
            .map(Layer::try_clone)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(BloomFilter::from_parts(self.params, layers))
    }

    pub fn params(&self) -> &FilterParams {
        &self.params
    }

    pub fn layers(&self) -> &[Layer] {
        &self.layers
    }

    /// Hashes `item` under this filter's seed.
    #[inline]
    pub fn hash(&self, item: &[u8]) -> ItemHash {
        ItemHash::new(item, self.params.seed)
    }

    /// True when `item` may have been added; false means it certainly was not.
    #[inline]
    pub fn contains(&self, item: &[u8]) -> bool {
        self.contains_hash(&self.hash(item))
    }

    /// [`contains`](Self::contains) for an already hashed item.
    #[inline]
    pub fn contains_hash(&self, hash: &ItemHash) -> bool {
        // The newest layer outside the loop over the older ones: what the loop would compute
        // once for every layer (each line's seed) stays uncomputed when the first line answers.
        let (newest, older) = self
            .layers
            .split_last()
            .expect("a filter always has a layer");
        newest.contains_with(bits::Portable::unhidden(), hash)
            || older.iter().rev().any(|layer| layer.contains(hash))
    }

    /// Adds `item`. Ok(true) when it was new (it is then counted), Ok(false) when the filter
    /// already reported it present. On error nothing changed.
    pub fn insert<B: MemoryBudget + ?Sized>(
        &mut self,
        item: &[u8],
        budget: &mut B,
    ) -> Result<bool, InsertError> {
        self.insert_one(item, budget).map(|(added, _)| added)
    }

    /// Adds one item, as BF.ADD does: Ok((added, grown)) with `added` true when it was new and
    /// `grown` the layer it had to push first, if any (`first_item` 0); Err when it stopped at a
    /// limit (nothing changed then). What [`insert_many`](Self::insert_many) does for a batch of
    /// one, without its batch machinery.
    ///
    /// ```
    /// use rustbloom_core::{budget::Unlimited, BloomFilter, FilterParams, Growth};
    /// let params = FilterParams { capacity: 1, error_rate: 0.01, growth: Growth::Scaling { expansion: 2 }, seed: 1 };
    /// let mut filter = BloomFilter::new(params, &mut Unlimited).unwrap();
    /// assert_eq!(filter.insert_one(b"a", &mut Unlimited), Ok((true, None)));
    /// assert_eq!(filter.insert_one(b"a", &mut Unlimited), Ok((false, None)));
    /// let (added, grown) = filter.insert_one(b"b", &mut Unlimited).unwrap();
    /// assert!(added && grown.unwrap().index == 1);
    /// ```
    pub fn insert_one<B: MemoryBudget + ?Sized>(
        &mut self,
        item: &[u8],
        budget: &mut B,
    ) -> Result<(bool, Option<GrownLayer>), InsertError> {
        #[cfg(feature = "test-hooks")]
        test_hooks::panic_on(item);
        let hash = self.hash(item);
        // The common case here, without insert_hash's call and result: room in the newest layer.
        if !self.newest().is_full() {
            return Ok((self.add_if_new(&hash), None));
        }
        match self.insert_hash(&hash, budget)? {
            Added::New(grown) => Ok((
                true,
                grown.map(|(index, size)| GrownLayer {
                    index,
                    size,
                    first_item: 0,
                }),
            )),
            Added::Present => Ok((false, None)),
        }
    }

    /// Adds an already hashed item: new, with the layer it had to push first, if any; or
    /// present, unchanged. On error nothing changed.
    fn insert_hash<B: MemoryBudget + ?Sized>(
        &mut self,
        hash: &ItemHash,
        budget: &mut B,
    ) -> Result<Added, InsertError> {
        if !self.newest().is_full() {
            return Ok(if self.add_if_new(hash) {
                Added::New(None)
            } else {
                Added::Present
            });
        }
        if self.contains_hash(hash) {
            return Ok(Added::Present);
        }
        let grown = self.grow(budget)?;
        self.add_to_newest(hash);
        Ok(Added::New(Some(grown)))
    }

    /// Adds an item to the newest layer, which has room, unless an older layer holds it: true,
    /// and counted, when it was new. One pass over the newest layer's probes both sets them and
    /// learns whether the item was there: it was iff no bit changed, which is what testing
    /// first would have answered.
    #[inline(always)]
    fn add_if_new(&mut self, hash: &ItemHash) -> bool {
        let (newest, older) = self
            .layers
            .split_last_mut()
            .expect("a filter always has a layer");
        // A loop rather than `any`, which stays a call even when there is no older layer.
        for layer in older.iter().rev() {
            if layer.contains(hash) {
                return false;
            }
        }
        let new = newest.set(hash);
        if new {
            newest.count_item();
        }
        new
    }

    /// Sets an item absent from every layer in the newest one, and counts it there.
    #[inline]
    fn add_to_newest(&mut self, hash: &ItemHash) {
        let newest = self.layers.last_mut().expect("a filter always has a layer");
        // The item is absent from the newest layer, so setting its probes changes a bit.
        newest.set(hash);
        newest.count_item();
    }

    #[inline]
    fn newest(&self) -> &Layer {
        self.layers.last().expect("a filter always has a layer")
    }

    /// The shape of the layer this filter pushes next (memoised per shape).
    fn next_layer_size(&mut self) -> Result<LayerSize, InsertError> {
        if let NextShape(Some(size)) = &self.next_shape {
            return Ok(**size);
        }
        let size = self
            .params
            .layer_size(self.layers.len())
            .map_err(|_| InsertError::CannotGrow)?;
        self.next_shape = NextShape(Some(Box::new(size)));
        Ok(size)
    }

    /// Pushes the next layer, sized by the growth rule; returns its index and shape.
    fn grow<B: MemoryBudget + ?Sized>(
        &mut self,
        budget: &mut B,
    ) -> Result<(usize, LayerSize), InsertError> {
        if self.params.growth == Growth::NonScaling {
            return Err(InsertError::NonScalingFull);
        }
        let index = self.layers.len();
        if index >= MAX_LAYERS {
            return Err(InsertError::CannotGrow);
        }
        let size = self.next_layer_size()?;
        self.push_checked_layer(index, size, budget)?;
        Ok((index, size))
    }

    /// Pushes layer `index` with an explicit shape, as the primary that grew the filter sized it
    /// (BF.GROW, which replication and the AOF carry). The shape must be one a layer at that
    /// index could have (see [`FilterParams::check_layer`]), the newest layer must be full, and
    /// the budget must admit it.
    pub fn push_layer<B: MemoryBudget + ?Sized>(
        &mut self,
        index: usize,
        size: LayerSize,
        budget: &mut B,
    ) -> Result<(), PushError> {
        if self.params.growth == Growth::NonScaling {
            return Err(PushError::Shape("a non-scaling filter has one layer"));
        }
        if index != self.layers.len() || index >= MAX_LAYERS {
            return Err(PushError::Shape("not the next layer"));
        }
        if !self.newest().is_full() {
            return Err(PushError::Shape("the newest layer is not full"));
        }
        size.check().map_err(PushError::Shape)?;
        self.params
            .check_layer(index, size)
            .map_err(PushError::Shape)?;
        self.push_checked_layer(index, size, budget)
            .map_err(|error| match error {
                InsertError::Limit(limit) => PushError::Limit(limit),
                _ => PushError::Shape("capacity"),
            })
    }

    fn push_checked_layer<B: MemoryBudget + ?Sized>(
        &mut self,
        index: usize,
        size: LayerSize,
        budget: &mut B,
    ) -> Result<(), InsertError> {
        let capacity = self
            .params
            .layer_capacity(index)
            .ok_or(InsertError::CannotGrow)?;
        let allocation = layer_allocation_size(size.bytes());
        budget
            .charge(
                self.allocated_bytes().saturating_add(allocation),
                allocation,
            )
            .map_err(InsertError::Limit)?;
        let layer = Layer::with_size(size, capacity, self.params.layer_error_rate(index), 0)
            .map_err(InsertError::Limit)?;
        let mut layers = std::mem::take(&mut self.layers).into_vec();
        if layers.try_reserve_exact(1).is_err() {
            self.layers = layers.into_boxed_slice();
            return Err(InsertError::Limit(LimitError::Allocation {
                needed: allocation_size(((self.layers.len() + 1) * size_of::<Layer>()) as u64),
            }));
        }
        layers.push(layer);
        self.layers = layers.into_boxed_slice();
        self.next_shape = NextShape::default();
        Ok(())
    }

    /// Looks up a batch of items, calling `found` with each answer in order. Hashes a group of
    /// items and prefetches their first lines before testing any, which hides memory latency on
    /// big filters; then tests each first line, and fetches the other lines of only the items
    /// whose first line passed (in some layer), before their whole test. An absent item, which
    /// nearly always fails in its first line, costs one line's fetch and test, however many
    /// lines its items have.
    pub fn contains_many<'a>(
        &self,
        items: impl IntoIterator<Item = &'a [u8]>,
        mut found: impl FnMut(bool),
    ) {
        for_each_group(items, self.params.seed, |group| {
            // Bit i: item i's first line passed in some layer (BATCH ≤ 64 items a group).
            let passed = bits::with_fast_shifts(FirstLinesPass {
                layers: &self.layers,
                group,
            });
            // Only the items that passed (few, for absent items) are visited.
            let mut pending = passed;
            while pending != 0 {
                let hash = &group[pending.trailing_zeros() as usize];
                pending &= pending - 1;
                self.layers
                    .iter()
                    .for_each(|layer| layer.prefetch_other_lines(hash));
            }
            for (i, hash) in group.iter().enumerate() {
                found(passed & (1 << i) != 0 && self.contains_hash(hash));
            }
            ControlFlow::Continue(())
        });
    }

    /// Adds a batch of items in order, recording each result (and each layer pushed) in
    /// `outcome` as it goes; stops at the first error. Prefetches like
    /// [`contains_many`](Self::contains_many).
    pub fn insert_many<'a, B: MemoryBudget + ?Sized>(
        &mut self,
        items: impl IntoIterator<Item = &'a [u8]>,
        budget: &mut B,
        outcome: &mut AddOutcome,
    ) {
        let mut items = items.into_iter();
        if items.size_hint() == (1, Some(1)) {
            // BF.ADD: one item, without the batch machinery.
            if let Some(item) = items.next() {
                match self.insert_one(item, budget) {
                    Ok((added, grown)) => {
                        outcome.grown.extend(grown);
                        outcome.added.push(added);
                    }
                    Err(error) => outcome.error = Some(error),
                }
            }
            return;
        }
        for_each_group(items, self.params.seed, |group| {
            self.prefetch(group);
            bits::with_fast_shifts(AddGroup {
                filter: self,
                group,
                budget,
                outcome,
            })
        });
    }

    /// Adds a group of hashed items of [`insert_many`](Self::insert_many), recording each result;
    /// breaks at the first error. Lines are tested and set through `lines`.
    #[inline(always)]
    fn add_group<L: bits::LineOps, B: MemoryBudget + ?Sized>(
        &mut self,
        lines: L,
        group: &[ItemHash],
        budget: &mut B,
        outcome: &mut AddOutcome,
    ) -> ControlFlow<()> {
        let mut rest = group;
        while let Some((hash, after)) = rest.split_first() {
            // The common case without insert_hash's call and result: room in the newest layer.
            if !self.newest().is_full() {
                let (newest, older) = self
                    .layers
                    .split_last_mut()
                    .expect("a filter always has a layer");
                let taken = newest.add_while_room(lines, older, rest, &mut outcome.added);
                rest = &rest[taken..];
                continue;
            }
            match self.insert_hash(hash, budget) {
                Ok(Added::New(grown)) => {
                    if let Some((index, size)) = grown {
                        outcome.grown.push(GrownLayer {
                            index,
                            size,
                            first_item: outcome.added.len(),
                        });
                    }
                    outcome.added.push(true);
                }
                Ok(Added::Present) => outcome.added.push(false),
                Err(error) => {
                    outcome.error = Some(error);
                    return ControlFlow::Break(());
                }
            }
            rest = after;
        }
        ControlFlow::Continue(())
    }

    /// Starts loading the cache lines a group of items will touch in the layers the group's
    /// add finds them in itself: every layer but the newest, when that has room (the add
    /// finds the newest's lines and starts loading them as it goes). Not for a lone item
    /// (BF.ADD, BF.MADD of one), which would wait for its lines at once anyway.
    fn prefetch(&self, group: &[ItemHash]) {
        if group.len() < 2 {
            return;
        }
        let layers = if self.newest().is_full() {
            &self.layers[..]
        } else {
            &self.layers[..self.layers.len() - 1]
        };
        for hash in group {
            for layer in layers {
                layer.prefetch(hash);
            }
        }
    }

    /// Items counted over all layers.
    pub fn items(&self) -> u64 {
        self.layers
            .iter()
            .fold(0u64, |sum, layer| sum.saturating_add(layer.items()))
    }

    /// Sum of all layers' capacities.
    pub fn capacity(&self) -> u64 {
        self.layers
            .iter()
            .fold(0u64, |sum, layer| sum.saturating_add(layer.capacity()))
    }

    /// Bytes of bits over all layers.
    pub fn bytes(&self) -> u64 {
        self.layers.iter().map(Layer::bytes).sum()
    }

    /// Copies bytes of the encoded bits, all layers in order, starting at `offset`.
    /// Panics when the range passes the end (see [`bytes`](Self::bytes)).
    pub fn read_bits(&self, mut offset: u64, mut out: &mut [u8]) {
        for layer in &self.layers {
            if out.is_empty() {
                break;
            }
            if offset >= layer.bytes() {
                offset -= layer.bytes();
                continue;
            }
            let take = (layer.bytes() - offset).min(out.len() as u64) as usize;
            let (here, rest) = out.split_at_mut(take);
            layer.read_bytes(offset, here);
            out = rest;
            offset = 0;
        }
        assert!(out.is_empty(), "read past the end of the filter");
    }

    /// Overwrites bytes of the encoded bits, all layers in order, starting at `offset`.
    /// Panics when the range passes the end.
    pub fn write_bits(&mut self, mut offset: u64, mut data: &[u8]) {
        for layer in &mut self.layers {
            if data.is_empty() {
                break;
            }
            if offset >= layer.bytes() {
                offset -= layer.bytes();
                continue;
            }
            let take = (layer.bytes() - offset).min(data.len() as u64) as usize;
            layer.write_bytes(offset, &data[..take]);
            data = &data[take..];
            offset = 0;
        }
        assert!(data.is_empty(), "write past the end of the filter");
    }

    /// Bytes `offset .. offset + len` of the encoded bits without a copy, when they lie in one
    /// block of one layer's store.
    pub(crate) fn bits_in_one_block(&self, mut offset: u64, len: usize) -> Option<&[u8]> {
        for layer in &self.layers {
            if offset < layer.bytes() {
                let fits = offset.checked_add(len as u64)? <= layer.bytes();
                return fits
                    .then(|| layer.bytes_in_one_block(offset, len))
                    .flatten();
            }
            offset -= layer.bytes();
        }
        None
    }

    /// Keeps `block` as bytes `offset .. offset + block.len()` of the encoded bits when they are
    /// one block of one layer's store; false leaves it with its owner.
    pub(crate) fn adopt_bits(&mut self, mut offset: u64, block: AdoptableBlock) -> bool {
        for layer in &mut self.layers {
            if offset < layer.bytes() {
                return layer.adopt_bytes(offset, block);
            }
            offset -= layer.bytes();
        }
        false
    }

    /// Bytes the allocator hands out for the bits of all layers (see
    /// [`crate::budget::allocation_size`]).
    pub fn allocated_bytes(&self) -> u64 {
        self.allocated_bytes_from(0)
    }

    /// [`allocated_bytes`](Self::allocated_bytes) of the layers from index `first` on (those an
    /// add pushed, for the module's gauges).
    pub fn allocated_bytes_from(&self, first: usize) -> u64 {
        self.layers
            .iter()
            .skip(first)
            .map(|layer| layer_allocation_size(layer.bytes()))
            .sum()
    }

    /// Bytes the allocator hands out for this filter's blocks: the layers' records and their
    /// bits, and the next layer's shape once computed (the filter's own struct is inline in
    /// whatever holds it).
    pub fn heap_bytes(&self) -> u64 {
        let next_shape = self
            .next_shape
            .0
            .as_ref()
            .map_or(0, |_| allocation_size(size_of::<LayerSize>() as u64));
        allocation_size(size_of_val(&*self.layers) as u64) + next_shape + self.allocated_bytes()
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;
    use crate::budget::Unlimited;
    use crate::sizing::Layout;

    /// Adds `items` group by group through `add` into a fresh filter of `size`.
    fn added_by(
        size: LayerSize,
        items: &[[u8; 8]],
        add: impl Fn(&mut BloomFilter, &[ItemHash], &mut AddOutcome) -> ControlFlow<()>,
    ) -> (BloomFilter, AddOutcome) {
        let num_hashes = size.num_hashes as i32;
        let params = FilterParams {
            capacity: 2_000,
            error_rate: (0.5f64.powi(num_hashes) / 0.9).min(0.5),
            growth: Growth::NonScaling,
            seed: 77,
        };
        let mut filter = BloomFilter::with_first_layer(params, size, &mut Unlimited).unwrap();
        let mut outcome = AddOutcome::default();
        for_each_group(items.iter().map(|i| i.as_slice()), params.seed, |group| {
            add(&mut filter, group, &mut outcome)
        });
        (filter, outcome)
    }

    #[test]
    fn a_batch_into_a_grown_filter_answers_as_testing_every_layer_before_setting() {
        let item = |i: u64| i.wrapping_mul(0x9e37_79b9_7f4a_7c15).to_le_bytes();
        // Three layers of the layout (0: the sizing's own, classic at this size), the newest
        // with room, holding items 0..400.
        for (error_rate, lines) in [(0.02, 0), (0.02, 1), (1e-9, 4)] {
            let params = FilterParams {
                capacity: 50,
                error_rate,
                growth: Growth::Scaling { expansion: 3 },
                seed: 5,
            };
            let shape = |index: usize| match lines {
                0 => params.layer_size(index).unwrap(),
                lines => crate::sizing::lines_size(
                    params.layer_capacity(index).unwrap(),
                    params.layer_error_rate(index),
                    lines,
                )
                .unwrap(),
            };
            let mut filter =
                BloomFilter::with_first_layer(params, shape(0), &mut Unlimited).unwrap();
            for i in 0..400 {
                if filter.newest().is_full() {
                    let index = filter.layers().len();
                    filter
                        .push_layer(index, shape(index), &mut Unlimited)
                        .unwrap();
                }
                filter.insert(&item(i), &mut Unlimited).unwrap();
            }
            assert_eq!(filter.layers().len(), 3);
            assert_eq!(filter.layers()[2].size().layout.lines(), lines);
            // Items of every layer (some only in the older ones), new items, each new one
            // again at once (present in the newest layer), and enough to grow twice.
            let batch: Vec<[u8; 8]> = (0..4_500u64)
                .map(|i| match i % 3 {
                    0 => item(i / 3 % 400),
                    _ => item(1_000 + i / 3),
                })
                .collect();
            let mut reference = filter.try_clone(&mut Unlimited).unwrap();
            let mut grown = Vec::new();
            let expected: Vec<bool> = batch
                .iter()
                .enumerate()
                .map(|(at, item)| {
                    let hash = reference.hash(item);
                    if reference.layers.iter().any(|layer| layer.contains(&hash)) {
                        return false;
                    }
                    if reference.newest().is_full() {
                        let (index, size) = reference.grow(&mut Unlimited).unwrap();
                        grown.push(GrownLayer {
                            index,
                            size,
                            first_item: at,
                        });
                    }
                    let newest = reference.layers.last_mut().unwrap();
                    newest.set(&hash);
                    newest.count_item();
                    true
                })
                .collect();
            let mut one_by_one = filter.try_clone(&mut Unlimited).unwrap();
            let singly: Vec<bool> = batch
                .iter()
                .map(|item| one_by_one.insert(item, &mut Unlimited).unwrap())
                .collect();
            let mut outcome = AddOutcome::default();
            filter.insert_many(
                batch.iter().map(|item| item.as_slice()),
                &mut Unlimited,
                &mut outcome,
            );
            assert_eq!(outcome.error, None);
            let first_difference = |answers: &[bool]| {
                (0..expected.len()).find(|&at| answers.get(at) != Some(&expected[at]))
            };
            assert_eq!(first_difference(&outcome.added), None, "{lines} lines");
            assert_eq!(first_difference(&singly), None, "{lines} lines");
            assert_eq!(outcome.grown, grown);
            assert!(!grown.is_empty(), "the batch grows the filter");
            assert_eq!(filter, reference);
            assert_eq!(one_by_one, reference);
            let present = expected.iter().filter(|&&new| !new).count();
            assert!(
                present >= 3_000 && batch.len() - present > 1_000,
                "{present}"
            );
        }
    }

    #[test]
    fn first_lines_pass_alike_on_every_path_and_only_where_an_item_may_be() {
        let item = |i: u64| i.wrapping_mul(0xd1b5_4a32_d192_ed03).to_le_bytes();
        for (layout, per_line) in [
            (Layout::Classic, 7),
            (Layout::Blocked, 7),
            (Layout::Blocked, 12),
            (Layout::Lines(4), 7),
        ] {
            let size = LayerSize {
                bits: 2_000 * 64,
                num_hashes: per_line * layout.lines().max(1),
                layout,
            };
            let items: Vec<[u8; 8]> = (0..1_500).map(item).collect();
            let (filter, _) = added_by(size, &items, |f, group, outcome| {
                f.add_group(bits::Portable::new(), group, &mut Unlimited, outcome)
            });
            // Groups of items added (even i) and never added (odd i).
            let hashes: Vec<ItemHash> = (0..3_000)
                .map(|i| filter.hash(&item(if i % 2 == 0 { i / 2 } else { 10_000 + i })))
                .collect();
            let mut failed = 0;
            for group in hashes.chunks(BATCH) {
                let pass = || FirstLinesPass {
                    layers: &filter.layers,
                    group,
                };
                let portable = bits::ShiftHeavy::run(pass(), bits::Portable::new());
                assert_eq!(bits::with_fast_shifts(pass()), portable, "{layout:?}");
                for (i, hash) in group.iter().enumerate() {
                    let passed = portable & (1 << i) != 0;
                    assert!(passed || !filter.contains_hash(hash), "{layout:?}");
                    failed += usize::from(!passed);
                }
            }
            assert!(failed > 1_000, "{layout:?}: {failed} absent items failed");
        }
    }

    #[test]
    fn the_batch_add_compiled_for_the_cpu_sets_the_bits_of_the_portable_one() {
        // Repeats (items 0..300 twice) answer "not new" the second time.
        let items: Vec<[u8; 8]> = (0..1_800u64)
            .map(|i| {
                (i % 1_500)
                    .wrapping_mul(0x9e37_79b9_7f4a_7c15)
                    .to_le_bytes()
            })
            .collect();
        let shapes = [
            (Layout::Classic, 7),
            (Layout::Blocked, 6),
            (Layout::Blocked, 16),
            (Layout::Lines(2), 5),
            (Layout::Lines(3), 7),
            (Layout::Lines(4), 7),
            (Layout::Lines(4), 8),
        ];
        for (layout, per_line) in shapes {
            let size = LayerSize {
                bits: 2_000 * 64,
                num_hashes: per_line * layout.lines().max(1),
                layout,
            };
            let portable = added_by(size, &items, |f, group, outcome| {
                f.add_group(bits::Portable::new(), group, &mut Unlimited, outcome)
            });
            let compiled = added_by(size, &items, |f, group, outcome| {
                bits::with_fast_shifts(AddGroup {
                    filter: f,
                    group,
                    budget: &mut Unlimited,
                    outcome,
                })
            });
            assert_eq!(compiled, portable, "{layout:?} × {per_line}");
            assert_eq!(portable.1.added.iter().filter(|&&new| !new).count(), 300);
        }
    }
}
