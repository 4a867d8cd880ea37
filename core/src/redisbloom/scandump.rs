//! RedisBloom's BF.SCANDUMP / BF.LOADCHUNK stream: a header chunk, then the bit arrays in chunks.
//!
//! Iterator 0 answers `(1, header)`. The header is packed, every integer little-endian:
//!
//! ```text
//!  offset      size  field
//!  0           8     items over all links
//!  8           4     link count n
//!  12          4     options (NOROUND 1, ENTS_IS_BITS 2, FORCE64 4, NO_SCALING 8)
//!  16          4     growth (expansion)
//!  20 + 53·j   53    link j, oldest first:
//!                      +0 u64 bytes   +8 u64 bits    +16 u64 items   +24 f64 error
//!                      +32 f64 bpe    +40 u32 hashes +44 u64 entries +52 u8 n2
//!  20 + 53·n         end
//! ```
//!
//! Data: iterator c ≥ 1 addresses byte c − 1 of all links' bit arrays laid end to end. The reply
//! is `(c + len, chunk)`, the chunk being at most [`CHUNK_BYTES`] and never crossing a link; past
//! the end the reply is `(0, "")`. BF.LOADCHUNK gets back each chunk with the iterator that came
//! with it, and writes it at byte `iterator − len − 1`. This layout is RedisBloom 2.4 and later
//! (v2.2.0 had a u32 `entries`, v2.0 and older no growth); RedisBloom 2.8.2 writes it as above.

use super::chain::RbFilter;
use super::shape::{Arithmetic, ChainHeader, ChainShape, LinkShape, MAX_LINKS};
use crate::budget::MemoryBudget;
use crate::encoding::{check, ChunkError, DecodeError, Fields};

/// Bytes of the fixed part of the header.
pub const HEADER_BYTES: usize = 20;
/// Bytes of one link's record in the header.
pub const LINK_BYTES: usize = 53;
/// Most bytes of bits in one data chunk (RedisBloom's bound).
pub const CHUNK_BYTES: u64 = 16 << 20;

/// Reads and validates a header without allocating the bit arrays.
pub fn parse_header(bytes: &[u8]) -> Result<ChainShape, DecodeError> {
    check(bytes.len() >= HEADER_BYTES, "header too short")?;
    let mut fields = Fields::new(bytes);
    let items = fields.u64();
    let count = fields.u32() as usize;
    let options = fields.u32();
    let growth = fields.u32();
    check((1..=MAX_LINKS).contains(&count), "link count")?;
    check(
        bytes.len() == HEADER_BYTES + LINK_BYTES * count,
        "header length",
    )?;
    let mut links = Vec::with_capacity(count);
    for _ in 0..count {
        let bytes = fields.u64();
        let bits = fields.u64();
        let link_items = fields.u64();
        let error = fields.f64();
        let bpe = fields.f64();
        let hashes = fields.u32();
        let entries = fields.u64();
        let [n2] = fields.take::<1>();
        let link = LinkShape {
            entries,
            error,
            hashes,
            bpe,
            bits,
            n2,
            bytes,
            items: link_items,
        };
        link.validate()?;
        links.push(link);
    }
    let shape = ChainShape {
        header: ChainHeader {
            items,
            options,
            growth,
            arithmetic: Arithmetic::Wide,
        },
        links,
    };
    shape.validate()?;
    Ok(shape)
}

/// Decodes a header into a filter whose bit arrays are all zero, after validating everything
/// and charging `budget` the arrays' allocation sizes; the data chunks then fill it
/// ([`load_chunk`]).
pub fn decode_header<B: MemoryBudget + ?Sized>(
    bytes: &[u8],
    budget: &mut B,
) -> Result<RbFilter, DecodeError> {
    RbFilter::zeroed(&parse_header(bytes)?, budget)
}

/// Applies a BF.LOADCHUNK data chunk, `iterator` being the one SCANDUMP returned with it.
pub fn load_chunk(filter: &mut RbFilter, iterator: u64, data: &[u8]) -> Result<(), ChunkError> {
    if data.is_empty() {
        return Err(ChunkError::BadData);
    }
    let offset = iterator
        .checked_sub(data.len() as u64)
        .and_then(|rest| rest.checked_sub(1))
        .ok_or(ChunkError::Offset)?;
    filter.write_bits(offset, data)
}

/// The header chunk of `filter`.
pub fn encode_header(filter: &RbFilter) -> Vec<u8> {
    let header = filter.header();
    let links = filter.links();
    let mut out = Vec::with_capacity(HEADER_BYTES + LINK_BYTES * links.len());
    out.extend_from_slice(&header.items.to_le_bytes());
    out.extend_from_slice(&(links.len() as u32).to_le_bytes());
    out.extend_from_slice(&header.options.to_le_bytes());
    out.extend_from_slice(&header.growth.to_le_bytes());
    for link in links {
        let shape = link.shape();
        out.extend_from_slice(&shape.bytes.to_le_bytes());
        out.extend_from_slice(&shape.bits.to_le_bytes());
        out.extend_from_slice(&shape.items.to_le_bytes());
        out.extend_from_slice(&shape.error.to_le_bytes());
        out.extend_from_slice(&shape.bpe.to_le_bytes());
        out.extend_from_slice(&shape.hashes.to_le_bytes());
        out.extend_from_slice(&shape.entries.to_le_bytes());
        out.push(shape.n2);
    }
    out
}

/// One step of BF.SCANDUMP as RedisBloom answers it: the next iterator and the chunk.
pub fn scandump_step(filter: &RbFilter, iterator: u64) -> (u64, Vec<u8>) {
    if iterator == 0 {
        return (1, encode_header(filter));
    }
    let Some((link, start)) = filter.locate(iterator - 1) else {
        return (0, Vec::new());
    };
    let link = &filter.links()[link];
    let len = (link.shape().bytes as usize - start).min(CHUNK_BYTES as usize);
    let mut chunk = vec![0; len];
    link.read_bytes(start, &mut chunk);
    (iterator + len as u64, chunk)
}
