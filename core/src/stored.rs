//! What a key holds: a filter that answers, or one still arriving by BF.LOADCHUNK; and the one
//! encoding of each, which RDB, DUMP/RESTORE and the digest share (the AOF rewrite and
//! SCANDUMP/LOADCHUNK move the same header and bits in chunks: [`crate::transfer`]).
//!
//! Each kind of filter has its own header, told apart by its first four bytes: "RBLM" for a
//! scalable filter ([`crate::scalable::encoding`]), "RBLW" for a window filter
//! ([`crate::window::encoding`]), "RBLR" for a RedisBloom filter kept here
//! ([`crate::redisbloom::envelope`]). The encoded bits follow, in the pieces of
//! [`Filter::pieces`]. Every header records how many bytes of bits are valid, so that a key
//! saved in the middle of a BF.LOADCHUNK load is restored in the middle of it.

use crate::bits::AdoptableBlock;
use crate::budget::{allocation_size, MemoryBudget};
use crate::encoding::DecodeError;
use crate::filter::Filter;
use crate::partition::{self, Descriptor, Partition, PartitionError};
use crate::redisbloom::envelope;
use crate::relocate::Walk;
use crate::scalable::encoding as scalable_encoding;
use crate::valkeybloom::envelope as vb_envelope;
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
    pub(crate) filter: Filter,
    /// Some only while loading or for a partition (never `Some` of two `None`s, so that equal
    /// values compare equal).
    rare: Option<Box<RareState>>,
}

/// What only some keys' filters carry.
#[derive(Debug, PartialEq)]
struct RareState {
    /// While being loaded by BF.LOADCHUNK: the first `n` bytes of its bits have arrived, in
    /// order; the rest are zero ([`crate::transfer`] advances it).
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

    /// The saved header: a filter's ([`StoredFilter::encode_header`]) or the descriptor's whole
    /// encoding.
    pub fn encode_header(&self) -> Vec<u8> {
        match self {
            StoredValue::Filter(stored) => stored.encode_header(),
            StoredValue::Descriptor(descriptor) => descriptor.encode(),
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

    /// Bytes `offset .. offset + len` of the bits as [`read_bits`](Self::read_bits) would copy
    /// them, without the copy, when they lie in one block of a store (a big filter's RDB pieces).
    pub fn bits_in_one_block(&self, offset: u64, len: usize) -> Option<&[u8]> {
        match self {
            StoredValue::Filter(stored) => stored.filter.bits_in_one_block(offset, len),
            StoredValue::Descriptor(_) => None,
        }
    }

    /// Fills bits right after [`decode_value`]; see [`StoredFilter::write_bits`].
    pub fn write_bits(&mut self, offset: u64, data: &[u8]) {
        if let StoredValue::Filter(stored) = self {
            stored.write_bits(offset, data);
        }
    }

    /// As [`write_bits`](Self::write_bits) with the bytes of `block`, but keeping the block
    /// itself as those bits, not a copy, when they are exactly one block of a store (a layer of
    /// a big filter loaded from RDB: Redis read each piece into a buffer of its own). Returns
    /// false when they are not, leaving the bytes with their owner, who writes the bits instead.
    pub fn adopt_bits(&mut self, offset: u64, block: AdoptableBlock) -> bool {
        match self {
            // Only complete filters of kinds without bookkeeping derived from their bits.
            StoredValue::Filter(stored) if stored.loading().is_none() => {
                stored.filter.adopt_bits(offset, block)
            }
            _ => false,
        }
    }
}

/// The seed of a filter's item hash (RedisBloom's filters have none of their own).
fn filter_seed(filter: &Filter) -> Option<u64> {
    match filter {
        Filter::Scalable(filter) => Some(filter.params().seed),
        Filter::Window(filter) => Some(filter.params().seed),
        Filter::RedisBloom(_) | Filter::ValkeyBloom(_) => None,
    }
}

impl StoredFilter {
    /// A complete filter.
    pub fn ready_filter(filter: Filter) -> StoredFilter {
        StoredFilter { filter, rare: None }
    }

    /// This filter as partition `partition` of a partitioned filter: refused when its item hash
    /// uses the routing seed (its items would share the routing's bits) or it is RedisBloom's or
    /// valkey-bloom's.
    pub fn with_partition(self, partition: Partition) -> Result<StoredFilter, PartitionError> {
        match filter_seed(&self.filter) {
            Some(seed) if seed != partition.routing_seed() => Ok(StoredFilter {
                rare: RareState::boxed(self.loading(), Some(partition)),
                filter: self.filter,
            }),
            _ => Err(PartitionError::SeedReused),
        }
    }

    /// The filter when it is complete and not a partition, as most are: both read with one test
    /// (the rare state exists exactly while loading or for a partition).
    #[inline]
    pub fn plain_ready(&self) -> Option<&Filter> {
        self.rare.is_none().then_some(&self.filter)
    }

    /// Which partition this is, when it is one.
    pub fn partition(&self) -> Option<&Partition> {
        self.rare.as_ref().and_then(|rare| rare.partition.as_ref())
    }

    /// Bytes of bits arrived, while loading.
    pub(crate) fn loading(&self) -> Option<u64> {
        self.rare.as_ref().and_then(|rare| rare.loading)
    }

    /// Marks how many bytes of bits have arrived (None: all of them).
    pub(crate) fn set_loading(&mut self, loading: Option<u64>) {
        self.rare = RareState::boxed(loading, self.partition().copied());
    }

    /// A filter whose bits start arriving, as partition `partition` if it is one.
    pub(crate) fn loading_from_start(filter: Filter, partition: Option<Partition>) -> StoredFilter {
        StoredFilter {
            filter,
            rare: RareState::boxed(Some(0), partition),
        }
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

    /// Offers the filter's blocks to a defrag walk ([`crate::relocate`]): the rare state, then
    /// the filter's.
    pub(crate) fn relocate(&mut self, walk: &mut Walk) {
        if let Some(rare) = &mut self.rare {
            walk.boxed(rare);
        }
        self.filter.relocate(walk);
    }

    /// The header of this value as saved (RDB, DUMP, digest); its bits follow in the pieces
    /// [`Filter::pieces`] gives up to [`loaded_bytes`](Self::loaded_bytes) (zero beyond).
    pub fn encode_header(&self) -> Vec<u8> {
        with_identity(
            self.partition(),
            header_with(&self.filter, self.loaded_bytes()),
        )
    }

    /// The byte ranges of bits to save after the header: all of them (a partial load's missing
    /// bytes are zero, and saved as such, so the pieces are those of a complete filter).
    pub fn pieces(&self, piece: u64) -> Vec<(u64, u64)> {
        self.filter.pieces(self.filter.bytes(), piece)
    }
}

/// The saved header of `filter` with a loaded-bytes count.
pub(crate) fn header_with(filter: &Filter, loaded: u64) -> Vec<u8> {
    match filter {
        Filter::Scalable(filter) => scalable_encoding::encode_header_as(filter, loaded),
        Filter::Window(filter) => window_encoding::encode_header_as(filter, loaded),
        Filter::RedisBloom(filter) => envelope::encode_header(filter, loaded),
        Filter::ValkeyBloom(filter) => vb_envelope::encode_header(filter, loaded),
    }
}

/// A filter's header, wrapped in its partition identity when it has one.
pub(crate) fn with_identity(partition: Option<&Partition>, header: Vec<u8>) -> Vec<u8> {
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
            magic == scalable_encoding::MAGIC.as_slice()
                || magic == window_encoding::MAGIC.as_slice()
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
        Some(magic) if magic == vb_envelope::MAGIC.as_slice() => {
            let (filter, loaded) = vb_envelope::decode_header(bytes, budget)?;
            (Filter::ValkeyBloom(Box::new(filter)), loaded)
        }
        _ => {
            let (filter, loaded) = scalable_encoding::decode_scalable_header(bytes, budget)?;
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
