//! The scalable filter: a stack of layers that grows by RedisBloom's rule.

pub(crate) mod batch;
pub mod encoding;
pub(crate) mod merge;
mod outcome;
mod params;

pub use outcome::{AddOutcome, CreateError, GrownLayer, InsertError, PushError};
pub use params::{
    is_tightening_ratio, FilterParams, Growth, MAX_CAPACITY, MAX_EXPANSION, MAX_LAYERS,
    NON_SCALING_MARGIN, TIGHTENING_RATIO,
};

use super::bits::{self, AdoptableBlock};
use super::budget::{admitted_parts, allocation_size, LimitError, MemoryBudget};
use super::hash::ItemHash;
use super::layer::{layer_allocation_size, Layer};
use super::relocate::Walk;
use super::sizing::LayerSize;

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
/// let params = FilterParams { capacity: 100, error_rate: 0.01, growth: Growth::Scaling { expansion: 2 }, seed: 42, tightening: 0.5 };
/// let mut filter = BloomFilter::new(params, &mut Unlimited).unwrap();
/// assert_eq!(filter.insert(b"alice", &mut Unlimited), Ok(true));
/// assert_eq!(filter.insert(b"alice", &mut Unlimited), Ok(false));
/// assert!(filter.contains(b"alice"));
/// assert_eq!(filter.items(), 1);
/// ```
///
/// ```text
///   BloomFilter (64 bytes, inline in the key's value):
///     | params (40) | layers: pointer, length (16) | next shape: None or a pointer (8) |
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
        let layers = admitted_parts(
            budget,
            self.allocated_bytes(),
            self.layers.iter().map(Layer::try_clone),
        )?;
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

    /// True when `item` may have been added; false means it certainly was not. Always inlined,
    /// as is [`contains_hash`](Self::contains_hash): a single lookup (BF.EXISTS) pays no call
    /// for hashing and testing its newest layer, only for older layers.
    #[inline(always)]
    pub fn contains(&self, item: &[u8]) -> bool {
        self.contains_hash(&self.hash(item))
    }

    /// [`contains`](Self::contains) for an already hashed item.
    #[inline(always)]
    pub fn contains_hash(&self, hash: &ItemHash) -> bool {
        // The newest layer outside the loop over the older ones: what the loop would compute
        // once for every layer (each line's seed) stays uncomputed when the first line answers.
        let (newest, older) = self
            .layers
            .split_last()
            .expect("a filter always has a layer");
        newest.contains_with(bits::Portable::unhidden(), hash)
            || (!older.is_empty() && Self::contains_in(older, hash))
    }

    /// [`contains_hash`](Self::contains_hash) in the older layers, newest first: out of line,
    /// as most filters have one layer.
    #[inline(never)]
    fn contains_in(older: &[Layer], hash: &ItemHash) -> bool {
        older.iter().rev().any(|layer| layer.contains(hash))
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
    /// let params = FilterParams { capacity: 1, error_rate: 0.01, growth: Growth::Scaling { expansion: 2 }, seed: 1, tightening: 0.5 };
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

    /// The capacity of every layer this filter holds or could push by its growth rule before
    /// its bits would need more than `max_bytes` allocated (BF.INFO MAXSCALEDCAPACITY).
    pub fn max_scaled_capacity(&self, max_bytes: u64) -> u64 {
        self.params.scaled_capacity_from(
            self.layers.len(),
            self.capacity(),
            self.allocated_bytes(),
            max_bytes,
        )
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

    /// Offers the filter's blocks to a defrag walk ([`crate::relocate`]): the layers' records,
    /// the next layer's shape, then each layer's bits.
    pub(crate) fn relocate(&mut self, walk: &mut Walk) {
        walk.boxed_slice(&mut self.layers);
        if let Some(shape) = &mut self.next_shape.0 {
            walk.boxed(shape);
        }
        for layer in self.layers.iter_mut() {
            layer.relocate(walk);
        }
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
mod tests;
