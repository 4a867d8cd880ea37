//! A RedisBloom filter in rustbloom's own encoding, for RDB (so DUMP/RESTORE and full sync) and
//! the digest once the filter lives here.
//!
//! RedisBloom's SCANDUMP header describes the chain exactly but has no checksum, no loaded-bytes
//! count (a key can be saved in the middle of a BF.LOADCHUNK load) and cannot say that a filter
//! came from RDB encoding 1 ([`Arithmetic::Wrap32`]). The envelope adds those three, all
//! integers little-endian:
//!
//! ```text
//!  offset  size  field
//!  0       4     magic "RBLR" (neither "RBLM" nor "RBLW": it decodes as nothing else)
//!  4       1     format version (1)
//!  5       1     arithmetic: 0 wide, 1 the 32-bit sums of RedisBloom v1.0
//!  6       2     reserved, zero
//!  8       8     loaded bytes: how many bytes of the arrays are valid
//!  16      20+53n RedisBloom's SCANDUMP header (see [`super::scandump`])
//!  end−8   8     xxh3-64 of every byte before it
//! ```
//!
//! The arrays follow, end to end, oldest link first, as SCANDUMP sends them.

use xxhash_rust::xxh3::xxh3_64;

use super::chain::RbFilter;
use super::scandump;
use super::shape::{Arithmetic, ChainShape};
use crate::budget::MemoryBudget;
use crate::encoding::{check, DecodeError};

pub(crate) const MAGIC: &[u8; 4] = b"RBLR";
const FORMAT_VERSION: u8 = 1;
const FIXED_BYTES: usize = 16;
const CHECKSUM_BYTES: usize = 8;

/// The envelope header of `filter` with a given loaded-bytes count.
pub fn encode_header(filter: &RbFilter, loaded: u64) -> Vec<u8> {
    let chain = scandump::encode_header(filter);
    let mut out = Vec::with_capacity(FIXED_BYTES + chain.len() + CHECKSUM_BYTES);
    out.extend_from_slice(MAGIC);
    out.push(FORMAT_VERSION);
    out.push(match filter.header().arithmetic {
        Arithmetic::Wide => 0,
        Arithmetic::Wrap32 => 1,
    });
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&loaded.to_le_bytes());
    out.extend_from_slice(&chain);
    let checksum = xxh3_64(&out);
    out.extend_from_slice(&checksum.to_le_bytes());
    out
}

/// A validated envelope: the chain's shape and how many bytes of its arrays are valid.
pub struct Envelope {
    pub shape: ChainShape,
    pub loaded_bytes: u64,
}

/// Reads and validates an envelope header without allocating.
pub fn parse_header(bytes: &[u8]) -> Result<Envelope, DecodeError> {
    check(
        bytes.len() >= FIXED_BYTES + scandump::HEADER_BYTES + CHECKSUM_BYTES,
        "header too short",
    )?;
    let body = bytes.len() - CHECKSUM_BYTES;
    let stored = u64::from_le_bytes(bytes[body..].try_into().expect("8 bytes"));
    check(xxh3_64(&bytes[..body]) == stored, "checksum")?;
    check(&bytes[..4] == MAGIC, "magic")?;
    check(bytes[4] == FORMAT_VERSION, "format version")?;
    let arithmetic = match bytes[5] {
        0 => Arithmetic::Wide,
        1 => Arithmetic::Wrap32,
        _ => return Err(DecodeError::Corrupt("arithmetic")),
    };
    check(bytes[6..8] == [0, 0], "reserved")?;
    let loaded_bytes = u64::from_le_bytes(bytes[8..16].try_into().expect("8 bytes"));
    let mut shape = scandump::parse_header(&bytes[FIXED_BYTES..body])?;
    shape.header.arithmetic = arithmetic;
    shape.validate()?;
    check(loaded_bytes <= shape.total_bytes(), "loaded bytes")?;
    Ok(Envelope {
        shape,
        loaded_bytes,
    })
}

/// Decodes an envelope header into a filter whose arrays are all zero (after `budget` admits
/// them), and the loaded-bytes count; the arrays follow ([`RbFilter::write_bits`]).
pub fn decode_header<B: MemoryBudget + ?Sized>(
    bytes: &[u8],
    budget: &mut B,
) -> Result<(RbFilter, u64), DecodeError> {
    let envelope = parse_header(bytes)?;
    Ok((
        RbFilter::zeroed(&envelope.shape, budget)?,
        envelope.loaded_bytes,
    ))
}
