//! A valkey-bloom object as valkey-bloom keeps it: one or more plain filters ("layers"),
//! sharing one seed, grown by valkey-bloom's rule ([`super::shape`]).
//!
//! ```text
//!   VbFilter { expansion, fp_rate, tightening, seed_random, seed,
//!              layers: [layer 0 (oldest) | layer 1 | ... | layer n-1 (newest, takes new items)] }
//! ```
//!
//! A lookup answers true when any layer has the item; an add answers false when a layer has
//! it, else sets its bits in the newest layer, first pushing a new one when that one holds its
//! capacity — valkey-bloom's own add, so the same items set the same bits and push the same
//! layers here as there (and on a replica given the same items).

use super::layer::{VbHash, VbLayer};
use super::shape::{
    LayerShape, ObjectParams, ObjectShape, MAX_CAPACITY, MAX_LAYERS, MAX_TOTAL_HASHES,
};
use super::siphash::SipKeys;
use crate::budget::{admitted_parts, allocation_size, LimitError, MemoryBudget};
use crate::encoding::{ChunkError, DecodeError};
use crate::redisbloom::RbAddOutcome;
use crate::relocate::Walk;
use crate::scalable::InsertError;

/// A valkey-bloom object (see the module documentation). Not `Clone`: a copy allocates, after a
/// budget admits it ([`try_clone`](Self::try_clone)).
#[derive(Debug, PartialEq)]
pub struct VbFilter {
    params: ObjectParams,
    /// The SipHash keys of the seed's two halves.
    keys: [SipKeys; 2],
    /// Oldest first; never empty.
    layers: Vec<VbLayer>,
}

fn keys_of(seed: &[u8; 32]) -> [SipKeys; 2] {
    let (first, second) = seed.split_at(16);
    [
        SipKeys::from_bytes(first.try_into().expect("16 bytes")),
        SipKeys::from_bytes(second.try_into().expect("16 bytes")),
    ]
}

impl VbFilter {
    /// Offers the layers' array, then each layer's bitmap, to a defrag walk
    /// ([`crate::relocate`]).
    pub(crate) fn relocate(&mut self, walk: &mut Walk) {
        walk.vec(&mut self.layers);
        for layer in &mut self.layers {
            layer.relocate(walk);
        }
    }

    /// Assembles an object from validated params and layers.
    pub(crate) fn from_parts(params: ObjectParams, layers: Vec<VbLayer>) -> VbFilter {
        debug_assert!(!layers.is_empty());
        VbFilter {
            keys: keys_of(&params.seed),
            params,
            layers,
        }
    }

    /// An object of a validated `shape` with all-zero bitmaps, after `budget` admits them.
    pub(crate) fn zeroed<B: MemoryBudget + ?Sized>(
        shape: &ObjectShape,
        budget: &mut B,
    ) -> Result<VbFilter, DecodeError> {
        let layers = admitted_parts(
            budget,
            shape.allocated_bytes(),
            shape.layers.iter().map(|layer| VbLayer::zeroed(*layer)),
        )
        .map_err(DecodeError::Limit)?;
        Ok(VbFilter::from_parts(shape.params, layers))
    }

    /// A new, empty object as valkey-bloom's BF.RESERVE or first add creates it: one layer of
    /// `capacity` at `params.fp_rate`, after `budget` admits its bitmap. Ok(None) when
    /// valkey-bloom could not create it either (parameters out of its ranges, a capacity past
    /// its counts, a bitmap the crate cannot size).
    pub fn new<B: MemoryBudget + ?Sized>(
        params: ObjectParams,
        capacity: u64,
        budget: &mut B,
    ) -> Result<Option<VbFilter>, LimitError> {
        if params.validate().is_err() || capacity == 0 || capacity > MAX_CAPACITY {
            return Ok(None);
        }
        let Some(layer) = LayerShape::new(capacity, params.fp_rate) else {
            return Ok(None);
        };
        let shape = ObjectShape {
            params,
            layers: vec![layer],
        };
        match VbFilter::zeroed(&shape, budget) {
            Ok(filter) => Ok(Some(filter)),
            Err(DecodeError::Limit(limit)) => Err(limit),
            Err(DecodeError::Corrupt(_)) => Ok(None),
        }
    }

    /// A copy whose bitmaps `budget` admits first (COPY).
    pub fn try_clone<B: MemoryBudget + ?Sized>(
        &self,
        budget: &mut B,
    ) -> Result<VbFilter, LimitError> {
        let layers = admitted_parts(
            budget,
            self.allocated_bytes(),
            self.layers.iter().map(VbLayer::try_clone),
        )?;
        Ok(VbFilter::from_parts(self.params, layers))
    }

    pub fn params(&self) -> &ObjectParams {
        &self.params
    }

    pub fn layers(&self) -> &[VbLayer] {
        &self.layers
    }

    /// The stored fields without the bits.
    pub fn shape(&self) -> ObjectShape {
        ObjectShape {
            params: self.params,
            layers: self.layers.iter().map(|layer| *layer.shape()).collect(),
        }
    }

    pub fn is_scaling(&self) -> bool {
        self.params.is_scaling()
    }

    /// Items over all layers (BF.CARD).
    pub fn items(&self) -> u64 {
        self.layers
            .iter()
            .fold(0u64, |sum, layer| sum.saturating_add(layer.shape().items))
    }

    /// Sum of the layers' capacities (BF.INFO Capacity, as valkey-bloom answers it).
    pub fn capacity(&self) -> u64 {
        self.layers.iter().fold(0u64, |sum, layer| {
            sum.saturating_add(layer.shape().capacity)
        })
    }

    /// Bytes of all bitmaps.
    pub fn bytes(&self) -> u64 {
        self.layers.iter().map(|layer| layer.shape().bytes).sum()
    }

    /// Bytes the allocator hands out for all bitmaps.
    pub fn allocated_bytes(&self) -> u64 {
        self.allocated_bytes_from(0)
    }

    /// [`allocated_bytes`](Self::allocated_bytes) of the layers from index `first` on.
    pub fn allocated_bytes_from(&self, first: usize) -> u64 {
        self.layers.iter().skip(first).fold(0u64, |sum, layer| {
            sum.saturating_add(crate::bits::allocated_bytes(layer.shape().bytes))
        })
    }

    /// Bytes the allocator hands out for this object's own blocks: its layer array and bits.
    pub fn heap_bytes(&self) -> u64 {
        allocation_size(std::mem::size_of_val(self.layers()) as u64) + self.allocated_bytes()
    }

    pub fn hash(&self, item: &[u8]) -> VbHash {
        VbHash::new(&self.keys, item)
    }

    /// True when `item` may have been added.
    pub fn contains(&self, item: &[u8]) -> bool {
        self.contains_hash(self.hash(item))
    }

    fn contains_hash(&self, hash: VbHash) -> bool {
        self.layers.iter().rev().any(|layer| layer.contains(hash))
    }

    /// Looks up items in order, calling `found` with each answer.
    pub fn contains_many<'a>(
        &self,
        items: impl IntoIterator<Item = &'a [u8]>,
        mut found: impl FnMut(bool),
    ) {
        for item in items {
            found(self.contains(item));
        }
    }

    /// Adds `item`: Ok(false) when a layer has it, Ok(true) when its bits were set in the
    /// newest layer (pushing one first if that one was full, after `budget` admits it). On
    /// error nothing changed.
    pub fn insert<B: MemoryBudget + ?Sized>(
        &mut self,
        item: &[u8],
        budget: &mut B,
    ) -> Result<bool, InsertError> {
        let hash = self.hash(item);
        if self.contains_hash(hash) {
            return Ok(false);
        }
        if self.newest().is_full() {
            self.grow(budget)?;
        }
        self.layers
            .last_mut()
            .expect("an object always has a layer")
            .add(hash);
        Ok(true)
    }

    /// Adds items in order, recording each result in `outcome`; stops at the first error. One
    /// operation: `budget` is charged for the sum of the layers it pushes.
    pub fn insert_many<'a, B: MemoryBudget + ?Sized>(
        &mut self,
        items: impl IntoIterator<Item = &'a [u8]>,
        budget: &mut B,
        outcome: &mut RbAddOutcome,
    ) {
        for item in items {
            match self.insert(item, budget) {
                Ok(added) => outcome.added.push(added),
                Err(error) => {
                    outcome.error = Some(error);
                    return;
                }
            }
        }
    }

    fn newest(&self) -> &VbLayer {
        self.layers.last().expect("an object always has a layer")
    }

    /// The shape of the layer this object would push next, by valkey-bloom 1.0's rule, or why
    /// it cannot grow (valkey-bloom refuses the same cases: a non-scaling object, an error
    /// rate that would reach zero, a capacity past its counts).
    pub fn next_layer(&self) -> Result<LayerShape, InsertError> {
        if !self.is_scaling() {
            return Err(InsertError::NonScalingFull);
        }
        let index = self.layers.len();
        if index >= MAX_LAYERS {
            return Err(InsertError::CannotGrow);
        }
        let error = self
            .params
            .layer_error(index)
            .ok_or(InsertError::CannotGrow)?;
        let capacity = self
            .newest()
            .shape()
            .capacity
            .checked_mul(u64::from(self.params.expansion))
            .filter(|&capacity| capacity <= MAX_CAPACITY)
            .ok_or(InsertError::CannotGrow)?;
        let layer = LayerShape::new(capacity, error).ok_or(InsertError::CannotGrow)?;
        let hashes = self
            .layers
            .iter()
            .map(|layer| u64::from(layer.shape().hashes))
            .sum::<u64>()
            + u64::from(layer.hashes);
        if hashes > MAX_TOTAL_HASHES {
            return Err(InsertError::CannotGrow);
        }
        Ok(layer)
    }

    /// valkey-bloom's BF.INFO MAXSCALEDCAPACITY under a limit on the bitmaps' allocation: the
    /// capacity of every layer this object holds or could push, by its rule, before the bitmaps
    /// would need more than `max_bytes` (or it could not grow at all).
    pub fn max_scaled_capacity(&self, max_bytes: u64) -> u64 {
        let mut capacity = self.capacity();
        let mut bytes = self.allocated_bytes();
        let mut shape = self.shape();
        while self.is_scaling() && shape.layers.len() < MAX_LAYERS {
            let index = shape.layers.len();
            let last = shape.layers[index - 1].capacity;
            let Some(next) = self.params.layer_error(index).and_then(|error| {
                let capacity = last.checked_mul(u64::from(self.params.expansion))?;
                (capacity <= MAX_CAPACITY).then(|| LayerShape::new(capacity, error))?
            }) else {
                break;
            };
            bytes = bytes.saturating_add(crate::bits::allocated_bytes(next.bytes));
            if bytes > max_bytes {
                break;
            }
            capacity = capacity.saturating_add(next.capacity);
            shape.layers.push(next);
        }
        capacity
    }

    /// Pushes the next layer, if `budget` admits it and the system gives the memory.
    fn grow<B: MemoryBudget + ?Sized>(&mut self, budget: &mut B) -> Result<(), InsertError> {
        let shape = self.next_layer()?;
        let allocation = crate::bits::allocated_bytes(shape.bytes);
        budget
            .charge(
                self.allocated_bytes().saturating_add(allocation),
                allocation,
            )
            .map_err(InsertError::Limit)?;
        self.layers
            .push(VbLayer::zeroed(shape).map_err(InsertError::Limit)?);
        Ok(())
    }

    /// The byte ranges `(offset, length)` of all bitmaps end to end, each within one layer and
    /// at most `piece` long.
    pub fn pieces(&self, piece: u64) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        let mut start = 0;
        for layer in &self.layers {
            out.extend(
                crate::encoding::pieces(layer.shape().bytes, piece)
                    .map(|(offset, len)| (start + offset, len)),
            );
            start += layer.shape().bytes;
        }
        out
    }

    /// The layer holding byte `offset` of all bitmaps end to end, and the offset within it.
    fn locate(&self, mut offset: u64) -> Option<(usize, usize)> {
        for (index, layer) in self.layers.iter().enumerate() {
            if offset < layer.shape().bytes {
                return Some((index, offset as usize));
            }
            offset -= layer.shape().bytes;
        }
        None
    }

    /// Copies bytes of the bitmaps end to end from `offset`; the range must lie within one
    /// layer (see [`pieces`](Self::pieces)).
    pub fn read_bits(&self, offset: u64, out: &mut [u8]) -> Result<(), ChunkError> {
        let (index, start) = self.locate(offset).ok_or(ChunkError::Offset)?;
        let layer = &self.layers[index];
        if out.len() > layer.shape().bytes as usize - start {
            return Err(ChunkError::TooBig);
        }
        layer.read_bytes(start, out);
        Ok(())
    }

    /// Writes bytes of the bitmaps end to end at `offset`, within one layer.
    pub fn write_bits(&mut self, offset: u64, data: &[u8]) -> Result<(), ChunkError> {
        let (index, start) = self.locate(offset).ok_or(ChunkError::Offset)?;
        let layer = &mut self.layers[index];
        if data.len() > layer.shape().bytes as usize - start {
            return Err(ChunkError::TooBig);
        }
        layer.write_bytes(start, data);
        Ok(())
    }

    /// Bytes of a chunk from `offset` of the bitmaps end to end: at most `max`, never past the
    /// end of the layer holding `offset` (0 past the last layer).
    pub fn chunk_len(&self, offset: u64, max: u64) -> u64 {
        self.locate(offset).map_or(0, |(index, start)| {
            max.min(self.layers[index].shape().bytes - start as u64)
        })
    }

    /// Bytes of the bitmaps end to end without a copy, when they lie in one block of one layer.
    pub fn bits_in_one_block(&self, offset: u64, len: usize) -> Option<&[u8]> {
        let (index, start) = self.locate(offset)?;
        let layer = &self.layers[index];
        if len > layer.shape().bytes as usize - start {
            return None;
        }
        layer.bytes_in_one_block(start, len)
    }
}
