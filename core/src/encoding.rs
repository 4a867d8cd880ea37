//! What the encodings of every kind share: the decode error, the refusal of a BF.LOADCHUNK
//! chunk, the reader of little-endian header fields and its checks, and the cutting of bits into
//! pieces.
//!
//! Each kind has its own header, next to its type: the scalable filter's
//! ([`crate::scalable::encoding`]), the window filter's ([`crate::window::encoding`]),
//! RedisBloom's ([`crate::redisbloom::envelope`], [`crate::redisbloom::scandump`],
//! [`crate::redisbloom::rdb`]), a partition's and a descriptor's ([`crate::partition`]).
//! [`crate::stored`] tells them apart and [`crate::transfer`] moves them in chunks. RDB writes the
//! bits in pieces of at most [`RDB_PIECE_BYTES`] (RDB has its own CRC).

use crate::budget::LimitError;

/// Most bytes of bits in one RDB string, so that saving and loading never hold a second copy of
/// a big filter.
pub const RDB_PIECE_BYTES: u64 = 64 << 20;

/// Why bytes could not be decoded into a filter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// Wrong length, magic, version, checksum or a field out of range: not a filter we wrote.
    Corrupt(&'static str),
    /// Well-formed, but its bits would break a memory limit.
    Limit(LimitError),
}

/// Why a BF.LOADCHUNK data chunk was refused, by any kind's bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChunkError {
    /// The filter is not being loaded, or the chunk is not the next one.
    Offset,
    /// The chunk reaches past the end of the filter.
    TooBig,
    /// Too short or its checksum does not match.
    BadData,
}

/// RedisBloom's words for each refusal of BF.LOADCHUNK.
impl std::fmt::Display for ChunkError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ChunkError::Offset => "invalid offset - no link found",
            ChunkError::TooBig => "invalid chunk - Too big for current filter",
            ChunkError::BadData => "received bad data",
        })
    }
}

/// Little-endian reader over a header that was already checked for length (shared by the
/// decoders of every header format in the crate).
pub(crate) struct Fields<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Fields<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Fields<'a> {
        Fields { bytes, at: 0 }
    }
    pub(crate) fn take<const N: usize>(&mut self) -> [u8; N] {
        let mut out = [0; N];
        out.copy_from_slice(&self.bytes[self.at..self.at + N]);
        self.at += N;
        out
    }
    pub(crate) fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.take())
    }
    pub(crate) fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.take())
    }
    pub(crate) fn f64(&mut self) -> f64 {
        f64::from_le_bytes(self.take())
    }
}

/// Ok when `ok`, else the decode error naming `what`.
pub(crate) fn check(ok: bool, what: &'static str) -> Result<(), DecodeError> {
    if ok {
        Ok(())
    } else {
        Err(DecodeError::Corrupt(what))
    }
}

/// The byte ranges `(offset, length)` that cover `total` bytes in pieces of at most `piece`.
pub fn pieces(total: u64, piece: u64) -> impl Iterator<Item = (u64, u64)> {
    (0..total.div_ceil(piece)).map(move |i| {
        let offset = i * piece;
        (offset, piece.min(total - offset))
    })
}
