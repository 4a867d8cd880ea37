//! A valkey-bloom object in rustbloom's own header format, for the paths every kind shares:
//! BF.SCANDUMP and BF.LOADCHUNK (so `bfctl migrate` moves it between rustbloom servers), and
//! the header of a value saved under our own type (an object that arrived by BF.LOADCHUNK).
//! Keys of valkey-bloom's type `bloomfltr` are saved in valkey-bloom's own encoding instead
//! ([`super::rdb`]). All integers little-endian:
//!
//! ```text
//!  offset  size  field
//!  0       4     magic "RBLV" (no other kind's)
//!  4       1     format version (1)
//!  5       1     seed is random (0 or 1)
//!  6       2     reserved, zero
//!  8       8     loaded bytes: how many bytes of the bitmaps are valid
//!  16      4     expansion (0: non-scaling)
//!  20      4     layer count n
//!  24      8     fp_rate (f64)
//!  32      8     tightening ratio (f64)
//!  40      32    seed
//!  72      24·n  per layer: u64 bitmap bytes, u32 hashes, u32 reserved (0), u64 capacity,
//!                then (in a second table, 8·n) u64 items
//!  end−8   8     xxh3-64 of every byte before it
//! ```
//!
//! The bitmaps follow, end to end, oldest layer first.

use xxhash_rust::xxh3::xxh3_64;

use super::object::VbFilter;
use super::shape::{LayerShape, ObjectParams, ObjectShape, MAX_LAYERS};
use crate::budget::MemoryBudget;
use crate::encoding::{check, DecodeError, Fields};

pub(crate) const MAGIC: &[u8; 4] = b"RBLV";
const FORMAT_VERSION: u8 = 1;
const FIXED_BYTES: usize = 72;
const LAYER_BYTES: usize = 24 + 8;
const CHECKSUM_BYTES: usize = 8;

/// The envelope header of `filter` with a given loaded-bytes count.
pub fn encode_header(filter: &VbFilter, loaded: u64) -> Vec<u8> {
    let params = filter.params();
    let layers = filter.layers();
    let mut out = Vec::with_capacity(FIXED_BYTES + LAYER_BYTES * layers.len() + CHECKSUM_BYTES);
    out.extend_from_slice(MAGIC);
    out.push(FORMAT_VERSION);
    out.push(u8::from(params.seed_random));
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&loaded.to_le_bytes());
    out.extend_from_slice(&params.expansion.to_le_bytes());
    out.extend_from_slice(&(layers.len() as u32).to_le_bytes());
    out.extend_from_slice(&params.fp_rate.to_le_bytes());
    out.extend_from_slice(&params.tightening.to_le_bytes());
    out.extend_from_slice(&params.seed);
    for layer in layers {
        let shape = layer.shape();
        out.extend_from_slice(&shape.bytes.to_le_bytes());
        out.extend_from_slice(&shape.hashes.to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&shape.capacity.to_le_bytes());
    }
    for layer in layers {
        out.extend_from_slice(&layer.shape().items.to_le_bytes());
    }
    let checksum = xxh3_64(&out);
    out.extend_from_slice(&checksum.to_le_bytes());
    out
}

/// Decodes an envelope header into an object whose bitmaps are all zero (after `budget`
/// admits them), and the loaded-bytes count; the bitmaps follow ([`VbFilter::write_bits`]).
pub fn decode_header<B: MemoryBudget + ?Sized>(
    bytes: &[u8],
    budget: &mut B,
) -> Result<(VbFilter, u64), DecodeError> {
    check(
        bytes.len() >= FIXED_BYTES + CHECKSUM_BYTES,
        "header too short",
    )?;
    let body = bytes.len() - CHECKSUM_BYTES;
    let stored = u64::from_le_bytes(bytes[body..].try_into().expect("8 bytes"));
    check(xxh3_64(&bytes[..body]) == stored, "checksum")?;
    check(&bytes[..4] == MAGIC, "magic")?;
    check(bytes[4] == FORMAT_VERSION, "format version")?;
    let seed_random = match bytes[5] {
        0 => false,
        1 => true,
        _ => return Err(DecodeError::Corrupt("seed is random")),
    };
    check(bytes[6..8] == [0, 0], "reserved")?;
    let mut fields = Fields::new(&bytes[8..body]);
    let loaded = fields.u64();
    let expansion = fields.u32();
    let count = fields.u32() as usize;
    check((1..=MAX_LAYERS).contains(&count), "layer count")?;
    check(
        body == FIXED_BYTES + LAYER_BYTES * count,
        "header length differs from its layer count",
    )?;
    let params = ObjectParams {
        expansion,
        fp_rate: fields.f64(),
        tightening: fields.f64(),
        seed_random,
        seed: fields.take(),
    };
    let mut layers = Vec::with_capacity(count);
    for _ in 0..count {
        let bytes = fields.u64();
        let hashes = fields.u32();
        check(fields.u32() == 0, "reserved")?;
        layers.push(LayerShape {
            bytes,
            hashes,
            capacity: fields.u64(),
            items: 0,
        });
    }
    for layer in &mut layers {
        layer.items = fields.u64();
    }
    let shape = ObjectShape { params, layers };
    shape.validate()?;
    check(
        shape.total_bytes().is_some_and(|total| loaded <= total),
        "loaded bytes",
    )?;
    Ok((VbFilter::zeroed(&shape, budget)?, loaded))
}
