//! The three kinds of filter a key can hold, behind one interface for the commands, the
//! encodings and the accounting.
//!
//! - [`BloomFilter`]: rustbloom's scalable filter, what BF.RESERVE and BF.ADD create;
//! - [`WindowFilter`]: a sliding-window filter (BF.RESERVE ... WINDOW ms), whose operations
//!   take the time;
//! - [`RbFilter`]: a filter migrated from RedisBloom, kept in RedisBloom's layout and rules so
//!   that it answers and grows exactly as it did there;
//! - [`VbFilter`]: an object migrated from valkey-bloom, likewise kept in valkey-bloom's.
//!
//! Only the commands that create filters differ by kind; everything else goes through
//! [`Filter`], and what an add must replicate is computed from its [`Outcome`] by
//! [`crate::replication`].

use crate::bits::AdoptableBlock;
use crate::budget::LimitError;
use crate::budget::MemoryBudget;
use crate::redisbloom::{Hashing, RbAddOutcome, RbFilter};
use crate::relocate::Walk;
use crate::scalable::{AddOutcome, BloomFilter, Growth, InsertError};
use crate::valkeybloom::VbFilter;
use crate::window::{WindowFilter, WindowOutcome};

/// RedisBloom's BF.INFO Size counts its chain's structure (32 bytes on 64-bit builds) ...
pub const INFO_SIZE_PER_FILTER: u64 = 32;
/// ... and each link's (64 bytes) besides the bits: measured on RedisBloom 2.8.2 for every
/// fixture (`core/tests/redisbloom.rs` checks it).
pub const INFO_SIZE_PER_LAYER: u64 = 64;

/// What BF.DEBUG reports of one layer, link or window slot.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LayerReport {
    /// Bytes of its bits.
    pub bytes: u64,
    pub bits: u64,
    pub hashes: u32,
    /// Bits of hash each probe is derived from: 64 for ours; 32 or 64 for RedisBloom's.
    pub hash_width: u32,
    /// Items it was sized for.
    pub capacity: u64,
    /// Items it counts.
    pub items: u64,
    /// The false-positive rate it was sized for.
    pub error_rate: f64,
}

/// A filter of any kind. A window filter's record (its clock, counts and region table) is
/// boxed so that the enum stays the size of a scalable filter's, which a key holds inline.
#[derive(Debug, PartialEq)]
pub enum Filter {
    Scalable(BloomFilter),
    Window(Box<WindowFilter>),
    RedisBloom(RbFilter),
    /// Boxed, as a window's record: its seed and parameters would make the enum bigger.
    ValkeyBloom(Box<VbFilter>),
}

/// What one add operation did, by kind; filled as the operation goes, so that a caller that
/// catches a panic half-way still knows exactly what changed.
#[derive(Debug)]
pub enum Outcome {
    Scalable(AddOutcome),
    Window(WindowOutcome),
    RedisBloom(RbAddOutcome),
    /// The same record: valkey-bloom's growth, too, follows from the items by its own rule.
    ValkeyBloom(RbAddOutcome),
}

impl Outcome {
    /// One entry per processed item, in order: true when it was new (and counted).
    pub fn added(&self) -> &[bool] {
        match self {
            Outcome::Scalable(outcome) => &outcome.added,
            Outcome::Window(outcome) => &outcome.added,
            Outcome::RedisBloom(outcome) | Outcome::ValkeyBloom(outcome) => &outcome.added,
        }
    }

    /// Makes room for `items` answers at once, so that an add records them without growing
    /// its vector step by step from empty (bounded by the batch the caller already holds). A
    /// refusal is no error: the vector then grows as it goes.
    pub fn reserve(&mut self, items: usize) {
        let added = match self {
            Outcome::Scalable(outcome) => &mut outcome.added,
            Outcome::Window(outcome) => &mut outcome.added,
            Outcome::RedisBloom(outcome) | Outcome::ValkeyBloom(outcome) => &mut outcome.added,
        };
        let _ = added.try_reserve_exact(items);
    }

    /// What stopped the operation, if anything did (a window filter never refuses an item).
    pub fn error(&self) -> Option<InsertError> {
        match self {
            Outcome::Scalable(outcome) => outcome.error,
            Outcome::Window(_) => None,
            Outcome::RedisBloom(outcome) | Outcome::ValkeyBloom(outcome) => outcome.error,
        }
    }
}

impl Filter {
    /// A copy whose bits `budget` admits first, allocated fallibly (COPY).
    pub fn try_clone<B: MemoryBudget + ?Sized>(
        &self,
        budget: &mut B,
    ) -> Result<Filter, LimitError> {
        Ok(match self {
            Filter::Scalable(filter) => Filter::Scalable(filter.try_clone(budget)?),
            Filter::Window(filter) => Filter::Window(Box::new(filter.try_clone(budget)?)),
            Filter::RedisBloom(filter) => Filter::RedisBloom(filter.try_clone(budget)?),
            Filter::ValkeyBloom(filter) => Filter::ValkeyBloom(Box::new(filter.try_clone(budget)?)),
        })
    }

    /// True when `item` may have been added (within the window at `now_ms()`, for a window).
    ///
    /// The clock is a function because only window filters read it: in the server it is a
    /// `gettimeofday`, which cost 5–8% of a whole BF.EXISTS or BF.ADD call in a VM. Always
    /// inlined: a lookup in a scalable filter then runs in its caller's frame, without the calls
    /// (and saved registers) of the dispatch and of the newest layer's test.
    #[inline(always)]
    pub fn contains(&self, item: &[u8], now_ms: impl FnOnce() -> u64) -> bool {
        match self {
            Filter::Scalable(filter) => filter.contains(item),
            _ => self.contains_in_other_kind(item, now_ms),
        }
    }

    /// [`contains`](Self::contains) of a window, RedisBloom or valkey-bloom filter, out of line: the inlined
    /// part then tests only whether the filter is scalable.
    #[inline(never)]
    fn contains_in_other_kind(&self, item: &[u8], now_ms: impl FnOnce() -> u64) -> bool {
        match self {
            Filter::Scalable(filter) => filter.contains(item),
            Filter::Window(filter) => filter.contains(item, now_ms()),
            Filter::RedisBloom(filter) => filter.contains(item),
            Filter::ValkeyBloom(filter) => filter.contains(item),
        }
    }

    /// Looks up a batch, calling `found` with each answer in order.
    pub fn contains_many<'a>(
        &self,
        items: impl IntoIterator<Item = &'a [u8]>,
        now_ms: impl FnOnce() -> u64,
        found: impl FnMut(bool),
    ) {
        match self {
            Filter::Scalable(filter) => filter.contains_many(items, found),
            Filter::Window(filter) => filter.contains_many(items, now_ms(), found),
            Filter::RedisBloom(filter) => filter.contains_many(items, found),
            Filter::ValkeyBloom(filter) => filter.contains_many(items, found),
        }
    }

    /// An empty outcome for an add at `now_ms()` (read by window filters only, see
    /// [`contains`](Self::contains)).
    pub fn new_outcome(&self, now_ms: impl FnOnce() -> u64) -> Outcome {
        match self {
            Filter::Scalable(_) => Outcome::Scalable(AddOutcome::default()),
            Filter::Window(filter) => Outcome::Window(WindowOutcome {
                added: Vec::new(),
                at_ms: filter.write_time(now_ms()),
            }),
            Filter::RedisBloom(_) => Outcome::RedisBloom(RbAddOutcome::default()),
            Filter::ValkeyBloom(_) => Outcome::ValkeyBloom(RbAddOutcome::default()),
        }
    }

    /// Adds a batch in order, recording each result in `outcome` (from
    /// [`new_outcome`](Self::new_outcome) of this filter) as it goes; stops at the first error.
    /// Layers or links pushed are charged to `budget`.
    pub fn insert_many<'a, B: MemoryBudget + ?Sized>(
        &mut self,
        items: impl IntoIterator<Item = &'a [u8]>,
        budget: &mut B,
        outcome: &mut Outcome,
    ) {
        match (self, outcome) {
            (Filter::Scalable(filter), Outcome::Scalable(outcome)) => {
                filter.insert_many(items, budget, outcome)
            }
            (Filter::Window(filter), Outcome::Window(outcome)) => {
                let added = &mut outcome.added;
                filter.insert_many(items, outcome.at_ms, |new| added.push(new));
            }
            (Filter::RedisBloom(filter), Outcome::RedisBloom(outcome)) => {
                filter.insert_many(items, budget, outcome)
            }
            (Filter::ValkeyBloom(filter), Outcome::ValkeyBloom(outcome)) => {
                filter.insert_many(items, budget, outcome)
            }
            _ => panic!("an add outcome of another kind of filter"),
        }
    }

    /// Items counted (BF.CARD): for a window, those of the generations inside it at `now_ms`.
    pub fn items(&self, now_ms: u64) -> u64 {
        match self {
            Filter::Scalable(filter) => filter.items(),
            Filter::Window(filter) => filter.items(now_ms),
            Filter::RedisBloom(filter) => filter.items(),
            Filter::ValkeyBloom(filter) => filter.items(),
        }
    }

    /// Items counted in all of the filter's bits, for gauges that must not change without a
    /// write: for a window, including generations that expired but are not cleared yet.
    pub fn counted_items(&self) -> u64 {
        match self {
            Filter::Window(filter) => filter
                .slot_items()
                .iter()
                .fold(0u64, |sum, &items| sum.saturating_add(items)),
            _ => self.items(0),
        }
    }

    /// BF.INFO "Capacity": items the filter holds at its error rate before it grows (for a
    /// window, per window).
    pub fn capacity(&self) -> u64 {
        match self {
            Filter::Scalable(filter) => filter.capacity(),
            Filter::Window(filter) => filter.params().capacity,
            Filter::RedisBloom(filter) => filter.capacity(),
            Filter::ValkeyBloom(filter) => filter.capacity(),
        }
    }

    /// BF.INFO "Number of filters": layers, links, or the window's slots.
    pub fn layer_count(&self) -> u64 {
        match self {
            Filter::Scalable(filter) => filter.layers().len() as u64,
            Filter::Window(_) => crate::window::SLOTS as u64,
            Filter::RedisBloom(filter) => filter.links().len() as u64,
            Filter::ValkeyBloom(filter) => filter.layers().len() as u64,
        }
    }

    /// BF.INFO "Expansion rate": None for a filter that does not grow.
    pub fn expansion(&self) -> Option<u32> {
        match self {
            Filter::Scalable(filter) => match filter.params().growth {
                Growth::Scaling { expansion } => Some(expansion),
                Growth::NonScaling => None,
            },
            Filter::Window(_) => None,
            Filter::RedisBloom(filter) => filter.is_scaling().then_some(filter.header().growth),
            Filter::ValkeyBloom(filter) => filter.is_scaling().then_some(filter.params().expansion),
        }
    }

    /// The false-positive rate the filter was created for (valkey-bloom's BF.INFO ERROR): a
    /// RedisBloom filter's is its first link's, before RedisBloom halved it for scaling.
    pub fn error_rate(&self) -> f64 {
        match self {
            Filter::Scalable(filter) => filter.params().error_rate,
            Filter::Window(filter) => filter.params().error_rate,
            Filter::RedisBloom(filter) => {
                let first = filter.links()[0].shape().error;
                if filter.is_scaling() {
                    first * 2.0
                } else {
                    first
                }
            }
            Filter::ValkeyBloom(filter) => filter.params().fp_rate,
        }
    }

    /// How each new layer's error rate relates to the previous one's (valkey-bloom's BF.INFO
    /// TIGHTENING): ours as created (0.5 unless `TIGHTENING r`), RedisBloom's 0.5; None for a
    /// window, whose slots all have one.
    pub fn tightening(&self) -> Option<f64> {
        match self {
            Filter::Scalable(filter) => Some(filter.params().tightening),
            Filter::RedisBloom(_) => Some(crate::scalable::TIGHTENING_RATIO),
            Filter::Window(_) => None,
            Filter::ValkeyBloom(filter) => Some(filter.params().tightening),
        }
    }

    /// The capacity the filter holds or could reach by growing before its bits would need more
    /// than `max_bytes` allocated, or its growth rule stops it (valkey-bloom's BF.INFO
    /// MAXSCALEDCAPACITY); a filter that does not grow answers its capacity.
    pub fn max_scaled_capacity(&self, max_bytes: u64) -> u64 {
        match self {
            Filter::Scalable(filter) => filter.max_scaled_capacity(max_bytes),
            Filter::Window(filter) => filter.params().capacity,
            Filter::RedisBloom(filter) => filter.max_scaled_capacity(max_bytes),
            Filter::ValkeyBloom(filter) => filter.max_scaled_capacity(max_bytes),
        }
    }

    /// BF.INFO "Size": the filter's own bytes, as RedisBloom counts them: the bits of every
    /// layer, link or slot, plus RedisBloom's bookkeeping of 32 bytes per filter and 64 per layer
    /// ([`INFO_SIZE_PER_FILTER`], [`INFO_SIZE_PER_LAYER`]). So the same filter ranks the same in
    /// both modules (a NONSCALING filter, sized at ε, is smaller than a scaling one whose first
    /// layer is at ε/2), and a migrated filter answers as it did before. What the allocator hands
    /// out is MEMORY USAGE's figure ([`heap_bytes`](Self::heap_bytes) and the key's value).
    pub fn info_size(&self) -> u64 {
        self.layer_reports()
            .iter()
            .fold(INFO_SIZE_PER_FILTER, |size, layer| {
                size.saturating_add(INFO_SIZE_PER_LAYER)
                    .saturating_add(layer.bytes)
            })
    }

    /// One report per layer, link or window slot, oldest first (BF.DEBUG).
    pub fn layer_reports(&self) -> Vec<LayerReport> {
        match self {
            Filter::Scalable(filter) => filter
                .layers()
                .iter()
                .map(|layer| LayerReport {
                    bytes: layer.size().bytes(),
                    bits: layer.size().bits,
                    hashes: layer.size().num_hashes,
                    hash_width: 64,
                    capacity: layer.capacity(),
                    items: layer.items(),
                    error_rate: layer.error_rate(),
                })
                .collect(),
            Filter::Window(filter) => {
                let slot = filter.shape().slot;
                let params = filter.params();
                filter
                    .slot_items()
                    .iter()
                    .map(|&items| LayerReport {
                        bytes: slot.bytes(),
                        bits: slot.bits,
                        hashes: slot.num_hashes,
                        hash_width: 64,
                        capacity: params.slot_capacity(),
                        items,
                        error_rate: params.slot_error_rate(),
                    })
                    .collect()
            }
            Filter::RedisBloom(filter) => {
                let hash_width = match filter.hashing() {
                    Hashing::Murmur64 => 64,
                    Hashing::Murmur32 => 32,
                };
                filter
                    .links()
                    .iter()
                    .map(|link| {
                        let shape = link.shape();
                        LayerReport {
                            bytes: shape.bytes,
                            bits: shape.modulus(),
                            hashes: shape.hashes,
                            hash_width,
                            capacity: shape.entries,
                            items: shape.items,
                            error_rate: shape.error,
                        }
                    })
                    .collect()
            }
            Filter::ValkeyBloom(filter) => {
                let params = filter.params();
                filter
                    .layers()
                    .iter()
                    .enumerate()
                    .map(|(index, layer)| {
                        let shape = layer.shape();
                        LayerReport {
                            bytes: shape.bytes,
                            bits: shape.bits(),
                            hashes: shape.hashes,
                            hash_width: 64,
                            capacity: shape.capacity,
                            items: shape.items,
                            // Every stored layer passed the decoders' check that its rate is
                            // above zero.
                            error_rate: params.layer_error(index).unwrap_or(0.0),
                        }
                    })
                    .collect()
            }
        }
    }

    /// Offers the filter's blocks to a defrag walk ([`crate::relocate`]).
    pub(crate) fn relocate(&mut self, walk: &mut Walk) {
        match self {
            Filter::Scalable(filter) => filter.relocate(walk),
            Filter::Window(filter) => {
                walk.boxed(filter);
                filter.relocate(walk);
            }
            Filter::RedisBloom(filter) => filter.relocate(walk),
            Filter::ValkeyBloom(filter) => filter.relocate(walk),
        }
    }

    /// Bytes the allocator hands out for this filter's own blocks, bits and bookkeeping, beyond
    /// the enum itself (inline in the key's value, which
    /// [`StoredValue::memory_usage`](crate::stored::StoredValue::memory_usage) counts).
    pub fn heap_bytes(&self) -> u64 {
        match self {
            Filter::Scalable(filter) => filter.heap_bytes(),
            Filter::Window(filter) => filter.heap_bytes(),
            Filter::RedisBloom(filter) => filter.heap_bytes(),
            Filter::ValkeyBloom(filter) => filter.heap_bytes(),
        }
    }

    /// Bytes of bits, as encoded (all layers, slots or links end to end).
    pub fn bytes(&self) -> u64 {
        match self {
            Filter::Scalable(filter) => filter.bytes(),
            Filter::Window(filter) => filter.bytes(),
            Filter::RedisBloom(filter) => filter.bytes(),
            Filter::ValkeyBloom(filter) => filter.bytes(),
        }
    }

    /// Bytes the allocator hands out for the bits.
    pub fn allocated_bytes(&self) -> u64 {
        match self {
            Filter::Scalable(filter) => filter.allocated_bytes(),
            Filter::Window(filter) => filter.allocated_bytes(),
            Filter::RedisBloom(filter) => filter.allocated_bytes(),
            Filter::ValkeyBloom(filter) => filter.allocated_bytes(),
        }
    }

    /// [`allocated_bytes`](Self::allocated_bytes) of the layers or links from index `first` on
    /// (a window's slots are allocated at once, as one block: index 0).
    pub fn allocated_bytes_from(&self, first: u64) -> u64 {
        let first = usize::try_from(first).unwrap_or(usize::MAX);
        match self {
            Filter::Scalable(filter) => filter.allocated_bytes_from(first),
            Filter::Window(filter) if first == 0 => filter.allocated_bytes(),
            Filter::Window(_) => 0,
            Filter::RedisBloom(filter) => filter.allocated_bytes_from(first),
            Filter::ValkeyBloom(filter) => filter.allocated_bytes_from(first),
        }
    }

    /// The byte ranges `(offset, len)` of the encoded bits up to `end`, in pieces of at most
    /// `piece` bytes that [`read_bits`](Self::read_bits) and [`write_bits`](Self::write_bits)
    /// accept (a RedisBloom filter's never cross a link, a valkey-bloom object's a layer).
    pub fn pieces(&self, end: u64, piece: u64) -> Vec<(u64, u64)> {
        match self {
            Filter::RedisBloom(filter) => filter
                .pieces(piece)
                .into_iter()
                .filter(|&(offset, _)| offset < end)
                .map(|(offset, len)| (offset, len.min(end - offset)))
                .collect(),
            Filter::ValkeyBloom(filter) => filter
                .pieces(piece)
                .into_iter()
                .filter(|&(offset, _)| offset < end)
                .map(|(offset, len)| (offset, len.min(end - offset)))
                .collect(),
            _ => crate::encoding::pieces(end, piece).collect(),
        }
    }

    /// Copies bytes of the encoded bits from `offset`, a range from [`pieces`](Self::pieces).
    /// Panics outside the bits.
    pub fn read_bits(&self, offset: u64, out: &mut [u8]) {
        match self {
            Filter::Scalable(filter) => filter.read_bits(offset, out),
            Filter::Window(filter) => filter.read_bits(offset, out).expect("a range of the bits"),
            Filter::RedisBloom(filter) => {
                filter.read_bits(offset, out).expect("a range of one link")
            }
            Filter::ValkeyBloom(filter) => {
                filter.read_bits(offset, out).expect("a range of one layer")
            }
        }
    }

    /// Bytes `offset .. offset + len` of the encoded bits without a copy, when they lie in one
    /// block of a store (layers of our scalable filters and of valkey-bloom objects).
    pub(crate) fn bits_in_one_block(&self, offset: u64, len: usize) -> Option<&[u8]> {
        match self {
            Filter::Scalable(filter) => filter.bits_in_one_block(offset, len),
            Filter::ValkeyBloom(filter) => filter.bits_in_one_block(offset, len),
            Filter::Window(_) | Filter::RedisBloom(_) => None,
        }
    }

    /// Keeps `block` as bytes `offset .. offset + block.len()` of the encoded bits when they are
    /// one block of a store (layers of our scalable filters only); false leaves it with its owner.
    pub(crate) fn adopt_bits(&mut self, offset: u64, block: AdoptableBlock) -> bool {
        match self {
            Filter::Scalable(filter) => filter.adopt_bits(offset, block),
            Filter::Window(_) | Filter::RedisBloom(_) | Filter::ValkeyBloom(_) => false,
        }
    }

    /// Overwrites bytes of the encoded bits from `offset`, a range from
    /// [`pieces`](Self::pieces). Panics outside the bits.
    pub fn write_bits(&mut self, offset: u64, data: &[u8]) {
        match self {
            Filter::Scalable(filter) => filter.write_bits(offset, data),
            Filter::Window(filter) => filter
                .write_bits(offset, data)
                .expect("a range of the bits"),
            Filter::RedisBloom(filter) => filter
                .write_bits(offset, data)
                .expect("a range of one link"),
            Filter::ValkeyBloom(filter) => filter
                .write_bits(offset, data)
                .expect("a range of one layer"),
        }
    }
}
