//! The blob of valkey-bloom's `BF.LOAD key blob`, which its AOF rewrite emits for every key:
//! a version byte, then the object as `bincode` 1.3 lays it out by default (little-endian
//! fixed-width integers, a u64 before every sequence's length, one byte per bool).
//!
//! ```text
//!  u8   object version (1)
//!  u32  expansion          f64 fp_rate          f64 tightening ratio      u8 seed is random
//!  u64  number of layers n
//!  n ×  u64 length, then the layer's `bloomfilter` crate bytes (see super::rdb)
//!       i64 items          i64 capacity
//! ```
//!
//! Unlike the RDB value, every layer carries its item count; an older layer must be full all
//! the same (valkey-bloom never writes one that is not). Decoded with the same checks as the
//! RDB value, and nothing may follow the last layer.

use super::layer::VbLayer;
use super::object::VbFilter;
use super::rdb::{crate_bytes_into, parse_crate_bytes, CRATE_HEADER_BYTES};
use super::shape::{LayerShape, ObjectParams, ObjectShape, MAX_LAYERS};
use crate::budget::MemoryBudget;
use crate::encoding::{check, DecodeError};

/// valkey-bloom's object version, the blob's first byte.
const OBJECT_VERSION: u8 = 1;

/// A reader that refuses to read past the end.
struct Cursor<'a> {
    bytes: &'a [u8],
}

impl<'a> Cursor<'a> {
    fn take(&mut self, len: usize) -> Result<&'a [u8], DecodeError> {
        check(len <= self.bytes.len(), "blob too short")?;
        let (head, rest) = self.bytes.split_at(len);
        self.bytes = rest;
        Ok(head)
    }
    fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        Ok(self.take(N)?.try_into().expect("N bytes"))
    }
    fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(self.array()?))
    }
    fn f64(&mut self) -> Result<f64, DecodeError> {
        Ok(f64::from_le_bytes(self.array()?))
    }
}

/// Decodes a BF.LOAD blob into an object, each layer allocated after `budget` admits it.
pub fn decode<B: MemoryBudget + ?Sized>(
    blob: &[u8],
    budget: &mut B,
) -> Result<VbFilter, DecodeError> {
    let mut cursor = Cursor { bytes: blob };
    check(cursor.array::<1>()? == [OBJECT_VERSION], "object version")?;
    let expansion = u32::from_le_bytes(cursor.array()?);
    let fp_rate = cursor.f64()?;
    let tightening = cursor.f64()?;
    let seed_random = match cursor.array::<1>()? {
        [0] => false,
        [1] => true,
        _ => return Err(DecodeError::Corrupt("seed is random")),
    };
    let count = cursor.u64()?;
    let count = usize::try_from(count)
        .ok()
        .filter(|count| (1..=MAX_LAYERS).contains(count))
        .ok_or(DecodeError::Corrupt("layer count"))?;
    let mut params = ObjectParams {
        expansion,
        fp_rate,
        tightening,
        seed_random,
        seed: [0; 32],
    };
    // First every layer's fields, then (all checked) the allocation of all of them at once.
    let mut shapes = Vec::new();
    let mut bitmaps = Vec::new();
    for index in 0..count {
        let len =
            usize::try_from(cursor.u64()?).map_err(|_| DecodeError::Corrupt("blob too short"))?;
        let bytes = cursor.take(len)?;
        let (bitmap_bytes, hashes, seed) = parse_crate_bytes(bytes)?;
        if index == 0 {
            params.seed = seed;
        } else {
            check(seed == params.seed, "layers with different seeds")?;
        }
        let items = cursor.u64()?;
        let capacity = cursor.u64()?;
        shapes.push(LayerShape {
            bytes: bitmap_bytes,
            hashes,
            capacity,
            items,
        });
        bitmaps.push(&bytes[CRATE_HEADER_BYTES..]);
    }
    check(cursor.bytes.is_empty(), "bytes after the last layer")?;
    let shape = ObjectShape {
        params,
        layers: shapes,
    };
    shape.validate()?;
    let allocation = shape.allocated_bytes();
    budget
        .charge(allocation, allocation)
        .map_err(DecodeError::Limit)?;
    let mut layers = Vec::with_capacity(count);
    for (layer_shape, bitmap) in shape.layers.iter().zip(bitmaps) {
        let mut layer = VbLayer::zeroed(*layer_shape).map_err(DecodeError::Limit)?;
        layer.write_bytes(0, bitmap);
        layers.push(layer);
    }
    Ok(VbFilter::from_parts(shape.params, layers))
}

/// The BF.LOAD blob of `filter`, as valkey-bloom's AOF rewrite writes it: [`decode`] and
/// valkey-bloom's own BF.LOAD give the same object back.
pub fn encode(filter: &VbFilter) -> Vec<u8> {
    let params = filter.params();
    let mut out = vec![OBJECT_VERSION];
    out.extend_from_slice(&params.expansion.to_le_bytes());
    out.extend_from_slice(&params.fp_rate.to_le_bytes());
    out.extend_from_slice(&params.tightening.to_le_bytes());
    out.push(u8::from(params.seed_random));
    out.extend_from_slice(&(filter.layers().len() as u64).to_le_bytes());
    let mut bytes = Vec::new();
    for layer in filter.layers() {
        crate_bytes_into(layer, &params.seed, &mut bytes);
        out.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
        out.extend_from_slice(&bytes);
        out.extend_from_slice(&layer.shape().items.to_le_bytes());
        out.extend_from_slice(&layer.shape().capacity.to_le_bytes());
    }
    out
}
