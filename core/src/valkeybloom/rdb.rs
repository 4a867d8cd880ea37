//! valkey-bloom 1.0's RDB value (type `bloomfltr`, encoding version 1), read through
//! [`RdbSource`] and written back through [`RdbSink`] exactly as valkey-bloom writes it, so
//! that valkey-bloom can load what we save.
//!
//! ```text
//!  unsigned  number of layers n
//!  unsigned  expansion (0: non-scaling)
//!  double    fp_rate (layer 0's error rate)
//!  double    tightening ratio
//!  unsigned  seed is random (0 or 1)
//!  n ×       string    the layer's `bloomfilter` crate bytes: 45-byte header + bitmap
//!            unsigned  the layer's capacity
//!  unsigned  items of the newest layer (older layers are full: items = capacity)
//!
//!  crate bytes: u8 version (1) | u64 LE bitmap bytes | u32 LE hashes | 32-byte seed | bitmap
//! ```
//!
//! Every field is checked before it sizes anything: the layer count before the loop (nothing
//! is reserved from it), each layer's header, capacity and items against valkey-bloom's sizing
//! rule ([`super::shape`]) before its bitmap is copied into an allocation the caller's
//! [`MemoryBudget`] admitted, one budget for the whole value.

use super::layer::VbLayer;
use super::object::VbFilter;
use super::shape::{LayerShape, ObjectParams, ObjectShape, MAX_LAYERS, MAX_TOTAL_HASHES};
use crate::budget::MemoryBudget;
use crate::encoding::{check, DecodeError};
use crate::redisbloom::{RdbError, RdbSink, RdbSource};

/// The name of valkey-bloom's data type.
pub const TYPE_NAME: &str = "bloomfltr";
/// The encoding version valkey-bloom 1.0 writes; it refuses any higher one.
pub const ENCODING_VERSION: i32 = 1;
/// Bytes of the `bloomfilter` crate's header before a bitmap.
pub const CRATE_HEADER_BYTES: usize = 1 + 8 + 4 + 32;
/// The crate's format version.
const CRATE_VERSION: u8 = 1;

fn corrupt<E>(what: &'static str) -> RdbError<E> {
    RdbError::Decode(DecodeError::Corrupt(what))
}

/// A layer's crate header as the crate writes it.
pub(super) fn crate_header(shape: &LayerShape, seed: &[u8; 32]) -> [u8; CRATE_HEADER_BYTES] {
    let mut header = [0u8; CRATE_HEADER_BYTES];
    header[0] = CRATE_VERSION;
    header[1..9].copy_from_slice(&shape.bytes.to_le_bytes());
    header[9..13].copy_from_slice(&shape.hashes.to_le_bytes());
    header[13..].copy_from_slice(seed);
    header
}

/// The fields of one layer's crate bytes: (bitmap bytes, hashes, seed), the bitmap being the
/// rest of `bytes` (its length checked against the header's).
pub(super) fn parse_crate_bytes(bytes: &[u8]) -> Result<(u64, u32, [u8; 32]), DecodeError> {
    check(bytes.len() > CRATE_HEADER_BYTES, "layer bytes too short")?;
    check(bytes[0] == CRATE_VERSION, "layer format version")?;
    let len = u64::from_le_bytes(bytes[1..9].try_into().expect("8 bytes"));
    check(
        len == (bytes.len() - CRATE_HEADER_BYTES) as u64,
        "layer bitmap length differs from its header's",
    )?;
    let hashes = u32::from_le_bytes(bytes[9..13].try_into().expect("4 bytes"));
    let seed = bytes[13..CRATE_HEADER_BYTES].try_into().expect("32 bytes");
    Ok((len, hashes, seed))
}

/// Loads an object written with encoding version `encver` (only 1 exists), allocating each
/// layer after `budget` admits it.
pub fn load<S: RdbSource, B: MemoryBudget + ?Sized>(
    source: &mut S,
    encver: i32,
    budget: &mut B,
) -> Result<VbFilter, RdbError<S::Error>> {
    if encver != ENCODING_VERSION {
        return Err(corrupt("encoding version"));
    }
    let count = source.unsigned().map_err(RdbError::Source)?;
    let count = usize::try_from(count)
        .ok()
        .filter(|count| (1..=MAX_LAYERS).contains(count))
        .ok_or(corrupt("layer count"))?;
    let expansion = u32::try_from(source.unsigned().map_err(RdbError::Source)?)
        .map_err(|_| corrupt("expansion"))?;
    let fp_rate = source.double().map_err(RdbError::Source)?;
    let tightening = source.double().map_err(RdbError::Source)?;
    let seed_random = match source.unsigned().map_err(RdbError::Source)? {
        0 => false,
        1 => true,
        _ => return Err(corrupt("seed is random")),
    };
    let mut params = ObjectParams {
        expansion,
        fp_rate,
        tightening,
        seed_random,
        seed: [0; 32],
    };
    let mut layers: Vec<VbLayer> = Vec::new();
    let mut allocated = 0u64;
    let mut hashes = 0u64;
    for index in 0..count {
        let bytes = source.string().map_err(RdbError::Source)?;
        let bytes = bytes.as_ref();
        let (len, layer_hashes, seed) = parse_crate_bytes(bytes)?;
        if index == 0 {
            params.seed = seed;
            params.validate()?;
        } else {
            check(seed == params.seed, "layers with different seeds")?;
        }
        let capacity = source.unsigned().map_err(RdbError::Source)?;
        let items = if index + 1 == count {
            source.unsigned().map_err(RdbError::Source)?
        } else {
            capacity
        };
        let shape = LayerShape {
            bytes: len,
            hashes: layer_hashes,
            capacity,
            items,
        };
        let previous = layers.last().map(|layer| layer.shape().capacity);
        shape.validate(&params, index, previous)?;
        hashes += u64::from(layer_hashes);
        check(hashes <= MAX_TOTAL_HASHES, "hashes over the layers")?;
        let allocation = crate::bits::allocated_bytes(len);
        allocated = allocated.saturating_add(allocation);
        budget
            .charge(allocated, allocation)
            .map_err(DecodeError::Limit)?;
        let mut layer = VbLayer::zeroed(shape).map_err(DecodeError::Limit)?;
        layer.write_bytes(0, &bytes[CRATE_HEADER_BYTES..]);
        layers.push(layer);
    }
    let filter = VbFilter::from_parts(params, layers);
    ObjectShape::validate(&filter.shape())?;
    Ok(filter)
}

/// Writes `filter` as valkey-bloom 1.0's RDB value (encoding [`ENCODING_VERSION`]): [`load`]
/// gives the same object back, and so does valkey-bloom's own loader.
pub fn save<S: RdbSink>(filter: &VbFilter, sink: &mut S) {
    let params = filter.params();
    let layers = filter.layers();
    sink.unsigned(layers.len() as u64);
    sink.unsigned(u64::from(params.expansion));
    sink.double(params.fp_rate);
    sink.double(params.tightening);
    sink.unsigned(u64::from(params.seed_random));
    let mut bytes = Vec::new();
    for (index, layer) in layers.iter().enumerate() {
        crate_bytes_into(layer, &params.seed, &mut bytes);
        sink.string(&bytes);
        sink.unsigned(layer.shape().capacity);
        if index + 1 == layers.len() {
            sink.unsigned(layer.shape().items);
        }
    }
}

/// Replaces `out` with a layer's crate bytes (header and bitmap), reusing its allocation.
pub(super) fn crate_bytes_into(layer: &VbLayer, seed: &[u8; 32], out: &mut Vec<u8>) {
    let shape = layer.shape();
    out.clear();
    out.extend_from_slice(&crate_header(shape, seed));
    out.resize(CRATE_HEADER_BYTES + shape.bytes as usize, 0);
    layer.read_bytes(0, &mut out[CRATE_HEADER_BYTES..]);
}
