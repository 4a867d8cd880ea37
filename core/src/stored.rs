//! What a key holds: a filter that answers, or one still arriving by BF.LOADCHUNK; and the one
//! encoding of each, which RDB, DUMP/RESTORE, AOF rewrite, SCANDUMP/LOADCHUNK and the digest
//! share.
//!
//! Each kind of filter has its own header, told apart by its first four bytes: "RBLM" for a
//! scalable filter ([`crate::encoding`]), "RBLW" for a window filter
//! ([`crate::window::encoding`]), "RBLR" for a RedisBloom filter kept here
//! ([`crate::redisbloom::envelope`]). The encoded bits follow, in the pieces of
//! [`Filter::pieces`]. Every header records how many bytes of bits are valid, so that a key
//! saved in the middle of a BF.LOADCHUNK load is restored in the middle of it.
//!
//! SCANDUMP and BF.LOADCHUNK move our kinds as the header followed by checksummed chunks (see
//! [`crate::encoding`]); a RedisBloom filter's SCANDUMP is RedisBloom's own format, so that its
//! stream loads back into RedisBloom, and BF.LOADCHUNK recognises that format's header. The AOF
//! rewrite starts a RedisBloom filter with its envelope instead (RedisBloom's header cannot say
//! everything its bits depend on), followed by the same raw chunks.

use xxhash_rust::xxh3::xxh3_64_with_seed;

use crate::budget::{allocation_size, MemoryBudget};
use crate::encoding::{self, ChunkError, DecodeError, CHUNK_BYTES};
use crate::filter::Filter;
use crate::partition::{self, Descriptor, Partition, PartitionError};
use crate::redisbloom::{envelope, scandump as rb_scandump};
use crate::window::encoding as window_encoding;

/// The value stored at a key. A filter whose bits are still arriving is marked as such, so no
/// command can forget that it must not answer from it: only [`ready`](Self::ready) gives a
/// filter to query or add to.
///
/// ```text
///   StoredFilter: | filter (inline) | rare: None, or a pointer to { loading, partition } |
/// ```
///
/// A plain filter pays one pointer for the states few keys are in; the value a key holds stays
/// in one small block (see [`StoredValue::memory_usage`]).
#[derive(Debug, PartialEq)]
pub struct StoredFilter {
    filter: Filter,
    /// Some only while loading or for a partition (never `Some` of two `None`s, so that equal
    /// values compare equal).
    rare: Option<Box<RareState>>,
}

/// What only some keys' filters carry.
#[derive(Debug, PartialEq)]
struct RareState {
    /// While being loaded by BF.LOADCHUNK: the first `n` bytes of its bits have arrived, in
    /// order; the rest are zero.
    loading: Option<u64>,
    /// Which partition of a partitioned filter this is, if it is one ([`crate::partition`]).
    partition: Option<Partition>,
}

impl RareState {
    /// The state's block, when there is anything to hold.
    fn boxed(loading: Option<u64>, partition: Option<Partition>) -> Option<Box<RareState>> {
        (loading.is_some() || partition.is_some())
            .then(|| Box::new(RareState { loading, partition }))
    }
}

/// What a key of the module's type holds: a filter, or the descriptor of a partitioned filter.
#[derive(Debug, PartialEq)]
pub enum StoredValue {
    Filter(StoredFilter),
    Descriptor(Descriptor),
}

impl StoredValue {
    /// The saved header: a filter's ([`StoredFilter::encode_header`]) or the descriptor's whole
    /// encoding.
    pub fn encode_header(&self) -> Vec<u8> {
        match self {
            StoredValue::Filter(stored) => stored.encode_header(),
            StoredValue::Descriptor(descriptor) => descriptor.encode(),
        }
    }

    /// Bytes the allocator hands out for this value (MEMORY USAGE): its own block, which holds
    /// a scalable filter's record inline, and every block it owns (layers, bits, a window's
    /// record, the rare state). The server's own blocks for the key (its entry, name and object
    /// headers) are not counted here.
    pub fn memory_usage(&self) -> u64 {
        let own = allocation_size(std::mem::size_of::<StoredValue>() as u64);
        match self {
            StoredValue::Filter(stored) => {
                let rare = stored.rare.as_ref().map_or(0, |_| {
                    allocation_size(std::mem::size_of::<RareState>() as u64)
                });
                own + rare + stored.filter.heap_bytes()
            }
            StoredValue::Descriptor(_) => own,
        }
    }

    /// The byte ranges of bits to save after the header (none for a descriptor).
    pub fn pieces(&self, piece: u64) -> Vec<(u64, u64)> {
        match self {
            StoredValue::Filter(stored) => stored.pieces(piece),
            StoredValue::Descriptor(_) => Vec::new(),
        }
    }

    /// A copy (COPY) whose bits `budget` admits first.
    pub fn try_clone<B: MemoryBudget + ?Sized>(
        &self,
        budget: &mut B,
    ) -> Result<StoredValue, crate::budget::LimitError> {
        Ok(match self {
            StoredValue::Filter(stored) => StoredValue::Filter(stored.try_clone(budget)?),
            StoredValue::Descriptor(descriptor) => StoredValue::Descriptor(*descriptor),
        })
    }

    /// Bytes of bits to read after the header ([`pieces`](Self::pieces)); zero for a descriptor.
    pub fn read_bits(&self, offset: u64, out: &mut [u8]) {
        if let StoredValue::Filter(stored) = self {
            stored.filter.read_bits(offset, out);
        }
    }

    /// Fills bits right after [`decode_value`]; see [`StoredFilter::write_bits`].
    pub fn write_bits(&mut self, offset: u64, data: &[u8]) {
        if let StoredValue::Filter(stored) = self {
            stored.write_bits(offset, data);
        }
    }
}

/// The seed of a filter's item hash (RedisBloom's filters have none of their own).
fn filter_seed(filter: &Filter) -> Option<u64> {
    match filter {
        Filter::Scalable(filter) => Some(filter.params().seed),
        Filter::Window(filter) => Some(filter.params().seed),
        Filter::RedisBloom(_) => None,
    }
}

/// Bytes of the checksum that ends a data chunk of our kinds.
const CHECKSUM_BYTES: usize = 8;

impl StoredFilter {
    /// A complete filter.
    pub fn ready_filter(filter: Filter) -> StoredFilter {
        StoredFilter { filter, rare: None }
    }

    /// This filter as partition `partition` of a partitioned filter: refused when its item hash
    /// uses the routing seed (its items would share the routing's bits) or it is RedisBloom's.
    pub fn with_partition(self, partition: Partition) -> Result<StoredFilter, PartitionError> {
        match filter_seed(&self.filter) {
            Some(seed) if seed != partition.routing_seed() => Ok(StoredFilter {
                rare: RareState::boxed(self.loading(), Some(partition)),
                filter: self.filter,
            }),
            _ => Err(PartitionError::SeedReused),
        }
    }

    /// Which partition this is, when it is one.
    pub fn partition(&self) -> Option<&Partition> {
        self.rare.as_ref().and_then(|rare| rare.partition.as_ref())
    }

    /// Bytes of bits arrived, while loading.
    fn loading(&self) -> Option<u64> {
        self.rare.as_ref().and_then(|rare| rare.loading)
    }

    fn set_loading(&mut self, loading: Option<u64>) {
        self.rare = RareState::boxed(loading, self.partition().copied());
    }

    /// A filter whose first `loaded` bytes of bits are valid: ready when that is all of them.
    pub fn partly_loaded(filter: Filter, loaded: u64) -> StoredFilter {
        let loading = (loaded < filter.bytes()).then_some(loaded);
        StoredFilter {
            filter,
            rare: RareState::boxed(loading, None),
        }
    }

    /// The filter, complete or not: for what is about its shape and bytes (saving, digest,
    /// memory usage), never for answers.
    pub fn filter(&self) -> &Filter {
        &self.filter
    }

    /// The filter, complete or not, moved out.
    pub fn into_filter(self) -> Filter {
        self.filter
    }

    /// The filter when it is complete.
    pub fn ready(&self) -> Option<&Filter> {
        self.loading().is_none().then_some(&self.filter)
    }

    pub fn ready_mut(&mut self) -> Option<&mut Filter> {
        self.loading().is_none().then_some(&mut self.filter)
    }

    /// True while BF.LOADCHUNK chunks are still expected.
    pub fn is_loading(&self) -> bool {
        self.loading().is_some()
    }

    /// Bytes of bits that are valid: all of them once complete.
    pub fn loaded_bytes(&self) -> u64 {
        self.loading().unwrap_or_else(|| self.filter.bytes())
    }

    /// A copy whose bits `budget` admits first (COPY), in the same loading state.
    pub fn try_clone<B: MemoryBudget + ?Sized>(
        &self,
        budget: &mut B,
    ) -> Result<StoredFilter, crate::budget::LimitError> {
        Ok(StoredFilter {
            filter: self.filter.try_clone(budget)?,
            rare: RareState::boxed(self.loading(), self.partition().copied()),
        })
    }

    /// The header of this value as saved (RDB, DUMP, digest); its bits follow in the pieces
    /// [`Filter::pieces`] gives up to [`loaded_bytes`](Self::loaded_bytes) (zero beyond).
    pub fn encode_header(&self) -> Vec<u8> {
        with_identity(
            self.partition(),
            header_with(&self.filter, self.loaded_bytes()),
        )
    }

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

    /// The byte ranges of bits to save after the header: all of them (a partial load's missing
    /// bytes are zero, and saved as such, so the pieces are those of a complete filter).
    pub fn pieces(&self, piece: u64) -> Vec<(u64, u64)> {
        self.filter.pieces(self.filter.bytes(), piece)
    }
}

/// The saved header of `filter` with a loaded-bytes count.
fn header_with(filter: &Filter, loaded: u64) -> Vec<u8> {
    match filter {
        Filter::Scalable(filter) => encoding::encode_header_as(filter, loaded),
        Filter::Window(filter) => window_encoding::encode_header_as(filter, loaded),
        Filter::RedisBloom(filter) => envelope::encode_header(filter, loaded),
    }
}

/// A filter's header, wrapped in its partition identity when it has one.
fn with_identity(partition: Option<&Partition>, header: Vec<u8>) -> Vec<u8> {
    match partition {
        Some(partition) => partition::encode_identity(partition, &header),
        None => header,
    }
}

/// Decodes a saved header of any value: a descriptor (complete), or a filter as
/// [`decode_header`].
pub fn decode_value<B: MemoryBudget + ?Sized>(
    bytes: &[u8],
    budget: &mut B,
) -> Result<StoredValue, DecodeError> {
    if bytes.get(..4) == Some(partition::DESCRIPTOR_MAGIC.as_slice()) {
        return Descriptor::decode(bytes).map(StoredValue::Descriptor);
    }
    decode_header(bytes, budget).map(StoredValue::Filter)
}

/// Decodes a saved filter header (any kind, a partition's included) into a value whose bits
/// are all zero, validating everything first and allocating only what `budget` admits; the
/// caller then fills the bits in the pieces of [`StoredFilter::pieces`]
/// ([`StoredFilter::write_bits`]).
pub fn decode_header<B: MemoryBudget + ?Sized>(
    bytes: &[u8],
    budget: &mut B,
) -> Result<StoredFilter, DecodeError> {
    if bytes.get(..4) == Some(partition::IDENTITY_MAGIC.as_slice()) {
        let (partition, inner) = partition::decode_identity(bytes)?;
        let ours = inner.get(..4).is_some_and(|magic| {
            magic == encoding::MAGIC.as_slice() || magic == window_encoding::MAGIC.as_slice()
        });
        if !ours {
            return Err(DecodeError::Corrupt("a partition of another kind"));
        }
        return decode_header(inner, budget)?
            .with_partition(partition)
            .map_err(|_| DecodeError::Corrupt("partition's filter seed is its routing seed"));
    }
    let (filter, loaded) = match bytes.get(..4) {
        Some(magic) if magic == window_encoding::MAGIC.as_slice() => {
            let header = window_encoding::parse_header(bytes)?;
            let loaded = header.loaded_bytes;
            (
                Filter::Window(Box::new(window_encoding::allocate(header, budget)?)),
                loaded,
            )
        }
        Some(magic) if magic == envelope::MAGIC.as_slice() => {
            let (filter, loaded) = envelope::decode_header(bytes, budget)?;
            (Filter::RedisBloom(filter), loaded)
        }
        _ => {
            let (filter, loaded) = encoding::decode_scalable_header(bytes, budget)?;
            (Filter::Scalable(filter), loaded)
        }
    };
    Ok(StoredFilter::partly_loaded(filter, loaded))
}

impl StoredFilter {
    /// Fills bits right after [`decode_header`] (RDB, RESTORE): `offset` and `data` one of the
    /// ranges of [`pieces`](Self::pieces). Panics outside the bits.
    pub fn write_bits(&mut self, offset: u64, data: &[u8]) {
        self.filter.write_bits(offset, data);
        // A complete window filter's last bits: its counts are bounded by what the bits allow
        // (a load cannot be refused this late; see crate::window::encoding).
        if let (None, Filter::Window(window)) = (self.loading(), &mut self.filter) {
            if offset + data.len() as u64 == window.bytes() {
                window.recount_from_bits();
            }
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
    let len = CHUNK_BYTES.min(total - offset);
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
            encoding::MAGIC,
            window_encoding::MAGIC,
            envelope::MAGIC,
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
    Ok(StoredFilter {
        filter,
        rare: RareState::boxed(Some(0), partition),
    })
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
