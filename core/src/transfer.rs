//! How a filter moves in chunks: BF.SCANDUMP's steps, BF.LOADCHUNK's load, and the AOF
//! rewrite, which writes a key as the BF.LOADCHUNK commands that recreate it.
//!
//! SCANDUMP and BF.LOADCHUNK move our kinds as the header (of [`crate::stored`], as if
//! complete) followed by data chunks of at most [`CHUNK_BYTES`] of bits, each followed by an
//! xxh3-64 of those bits seeded with the header checksum plus the chunk's offset, so a chunk
//! from another filter or from another place is refused. A RedisBloom filter's SCANDUMP is
//! RedisBloom's own format ([`crate::redisbloom::scandump`]), so that its stream loads back into
//! RedisBloom, and BF.LOADCHUNK recognises that format's header. The AOF rewrite starts a
//! RedisBloom filter with its envelope instead (RedisBloom's header cannot say everything its
//! bits depend on), followed by the same raw chunks.
//!
//! ```text
//!   SCANDUMP iterator 0        -> (1, header)
//!   SCANDUMP iterator 1 + off  -> (1 + off + len, bits[off .. off + len] ++ checksum)
//!   past the end               -> (0, "")
//!   BF.LOADCHUNK iterator 1    : the header: an all-zero filter, loading
//!   BF.LOADCHUNK 1 + off + len : the chunk at `off`, in order; the last completes the load
//! ```

use xxhash_rust::xxh3::xxh3_64_with_seed;

use crate::budget::MemoryBudget;
use crate::encoding::ChunkError;
use crate::encoding::DecodeError;
use crate::filter::Filter;
use crate::partition;
use crate::redisbloom::{envelope, scandump as rb_scandump};
use crate::scalable::encoding as scalable_encoding;
use crate::stored::{decode_header, header_with, with_identity, StoredFilter};
use crate::valkeybloom::envelope as vb_envelope;
use crate::window::encoding as window_encoding;

/// Most bytes of bits in one SCANDUMP chunk.
pub const CHUNK_BYTES: u64 = 16 << 20;
/// Bytes of the checksum that ends a data chunk of our kinds.
const CHECKSUM_BYTES: usize = 8;

impl StoredFilter {
    /// One step of BF.SCANDUMP ([`scandump_step`]), the header carrying the partition identity.
    pub fn scandump_step(&self, iterator: u64) -> (u64, Vec<u8>) {
        let (next, data) = scandump_step(&self.filter, iterator);
        match (iterator, &self.filter) {
            (0, Filter::Scalable(_) | Filter::Window(_)) => {
                (next, with_identity(self.partition(), data))
            }
            _ => (next, data),
        }
    }
}

/// The header BF.LOADCHUNK starts a load of one of our kinds with: the filter's header as if
/// complete. Its checksum names the filter a chunk belongs to, the same before, during and
/// after a load.
fn transfer_header(filter: &Filter) -> Vec<u8> {
    header_with(filter, filter.bytes())
}

fn header_checksum(filter: &Filter) -> u64 {
    let header = transfer_header(filter);
    u64::from_le_bytes(header[header.len() - 8..].try_into().expect("8 bytes"))
}

fn chunk_checksum(header_checksum: u64, offset: u64, bits: &[u8]) -> u64 {
    xxh3_64_with_seed(bits, header_checksum.wrapping_add(offset))
}

/// One step of BF.SCANDUMP: for `iterator` 0 the header with next iterator 1; for iterator
/// `1 + offset` the chunk of bits starting at `offset` with the iterator that follows it (which
/// is also the one BF.LOADCHUNK wants with this chunk); past the end `(0, [])`. A RedisBloom
/// filter answers in RedisBloom's own format.
pub fn scandump_step(filter: &Filter, iterator: u64) -> (u64, Vec<u8>) {
    if let Filter::RedisBloom(filter) = filter {
        return rb_scandump::scandump_step(filter, iterator);
    }
    if iterator == 0 {
        return (1, transfer_header(filter));
    }
    let offset = iterator - 1;
    let total = filter.bytes();
    if offset >= total {
        return (0, Vec::new());
    }
    let len = match filter {
        // A chunk never crosses one of its layers (its bits are not one array).
        Filter::ValkeyBloom(filter) => filter.chunk_len(offset, CHUNK_BYTES),
        _ => CHUNK_BYTES.min(total - offset),
    };
    (iterator + len, data_chunk(filter, offset, len))
}

/// The BF.LOADCHUNK commands that recreate `stored` as it is (AOF rewrite): the header, then
/// the chunks of the bits that have arrived, each with its iterator. A partial load stays
/// partial until its remaining chunks arrive. Every kind loads back to the same bits: a
/// RedisBloom filter's header is its envelope, which keeps what RedisBloom's SCANDUMP header
/// cannot say (the 32-bit arithmetic of RDB encoding 1), and its chunks are RedisBloom's.
pub fn load_commands(stored: &StoredFilter) -> impl Iterator<Item = (u64, Vec<u8>)> + '_ {
    let filter = &stored.filter;
    let loaded = stored.loaded_bytes();
    let header = with_identity(stored.partition(), transfer_header(filter));
    let chunk_bytes = match filter {
        Filter::RedisBloom(_) => rb_scandump::CHUNK_BYTES,
        _ => CHUNK_BYTES,
    };
    let header_checksum = header_checksum(filter);
    std::iter::once((1, header)).chain(filter.pieces(loaded, chunk_bytes).into_iter().map(
        move |(offset, len)| {
            let chunk = match filter {
                Filter::RedisBloom(_) => {
                    let mut bits = vec![0; len as usize];
                    filter.read_bits(offset, &mut bits);
                    bits
                }
                _ => checksummed_chunk(filter, header_checksum, offset, len),
            };
            (1 + offset + len, chunk)
        },
    ))
}

/// The data chunk of `len` bytes of bits at `offset` of one of our kinds.
fn data_chunk(filter: &Filter, offset: u64, len: u64) -> Vec<u8> {
    checksummed_chunk(filter, header_checksum(filter), offset, len)
}

fn checksummed_chunk(filter: &Filter, header_checksum: u64, offset: u64, len: u64) -> Vec<u8> {
    let mut chunk = vec![0u8; len as usize + CHECKSUM_BYTES];
    let (bits, trailer) = chunk.split_at_mut(len as usize);
    filter.read_bits(offset, bits);
    let checksum = chunk_checksum(header_checksum, offset, bits);
    trailer.copy_from_slice(&checksum.to_le_bytes());
    chunk
}

/// Decodes a BF.LOADCHUNK header: one of our kinds' complete headers (a RedisBloom filter's
/// envelope included, as the AOF rewrite writes it), or a RedisBloom SCANDUMP header (recognised
/// when it is not ours), giving an all-zero filter that waits for its chunks.
pub fn decode_load_header<B: MemoryBudget + ?Sized>(
    bytes: &[u8],
    budget: &mut B,
) -> Result<StoredFilter, DecodeError> {
    let ours = bytes.get(..4).is_some_and(|magic| {
        [
            scalable_encoding::MAGIC,
            window_encoding::MAGIC,
            envelope::MAGIC,
            vb_envelope::MAGIC,
            partition::IDENTITY_MAGIC,
        ]
        .iter()
        .any(|ours| ours.as_slice() == magic)
    });
    let (filter, partition) = if ours {
        let stored = decode_header(bytes, budget)?;
        if stored.is_loading() {
            return Err(DecodeError::Corrupt("not the header of a complete filter"));
        }
        let partition = stored.partition().copied();
        (stored.filter, partition)
    } else {
        (
            Filter::RedisBloom(rb_scandump::decode_header(bytes, budget)?),
            None,
        )
    };
    Ok(StoredFilter::loading_from_start(filter, partition))
}

/// Applies a BF.LOADCHUNK data chunk (`iterator` ≥ 2, as SCANDUMP returned it) to a value that
/// is being loaded. Chunks must arrive in order; the last one completes the load.
pub fn load_chunk(
    stored: &mut StoredFilter,
    iterator: u64,
    chunk: &[u8],
) -> Result<(), ChunkError> {
    let Some(loaded) = stored.loading() else {
        return Err(ChunkError::Offset);
    };
    let filter = &mut stored.filter;
    let (bits, trailer) = match filter {
        Filter::RedisBloom(_) => (chunk, None),
        _ => {
            let len = chunk
                .len()
                .checked_sub(CHECKSUM_BYTES)
                .ok_or(ChunkError::BadData)?;
            let (bits, trailer) = chunk.split_at(len);
            (bits, Some(trailer))
        }
    };
    if bits.is_empty() {
        return Err(ChunkError::BadData);
    }
    let len = bits.len() as u64;
    let offset = iterator.checked_sub(1 + len).ok_or(ChunkError::Offset)?;
    if offset != loaded {
        return Err(ChunkError::Offset);
    }
    let end = offset + len;
    if end > filter.bytes() {
        return Err(ChunkError::TooBig);
    }
    match (&mut *filter, trailer) {
        (Filter::RedisBloom(rb), _) => rb.write_bits(offset, bits)?,
        (Filter::ValkeyBloom(vb), _) if vb.chunk_len(offset, len) != len => {
            return Err(ChunkError::TooBig)
        }
        (_, Some(trailer)) => {
            let stored_checksum = u64::from_le_bytes(trailer.try_into().expect("8 bytes"));
            if chunk_checksum(header_checksum(filter), offset, bits) != stored_checksum {
                return Err(ChunkError::BadData);
            }
            filter.write_bits(offset, bits);
            // The last chunk of a window filter: its counts must agree with its bits (see
            // crate::window::encoding); refused, the chunk's bytes are zeroed again, so the
            // filter holds no bits its counts do not account for.
            if let Filter::Window(window) = &mut *filter {
                if end == window.bytes() && !window.counts_match_bits() {
                    filter.write_bits(offset, &vec![0; bits.len()]);
                    return Err(ChunkError::BadData);
                }
            }
        }
        (_, None) => unreachable!("our kinds' chunks carry a checksum"),
    }
    let loading = (end < stored.filter.bytes()).then_some(end);
    stored.set_loading(loading);
    Ok(())
}
