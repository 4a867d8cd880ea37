//! RedisBloom's RDB value (type `MBbloom--`, encoding versions 0–4), read through [`RdbSource`]
//! and written back through [`RdbSink`] (encoding 4, or 1 for what only encoding 1 can say).
//!
//! The value is a flat sequence of module-API fields; the Redis glue implements [`RdbSource`]
//! over `RedisModule_LoadUnsigned`, `LoadDouble` and `LoadStringBuffer`. In order:
//!
//! ```text
//!  header:    unsigned items          (over all links)
//!             unsigned link count n
//!             unsigned options        encver ≥ 2, else 0 (32-bit hashing, power-of-two links)
//!             unsigned growth         encver ≥ 4, else 2
//!  n × link:  unsigned entries
//!             double   error
//!             unsigned hashes
//!             double   bpe
//!             unsigned bits           encver ≥ 1, else (u64)(entries · bpe)
//!             unsigned n2             encver ≥ 1, else 0
//!             string   bit array      (its length is the link's bytes)
//!             unsigned items          (in this link)
//! ```
//!
//! | encver | written by |
//! |---|---|
//! | 0 | pre-1.0 development builds |
//! | 1 | v1.0.0–v1.1.0 (probe sums in 32 bits, see [`Arithmetic::Wrap32`]) |
//! | 2, 3 | 2018 development commits, v1.1.1–v2.0.3 |
//! | 4 | v2.2.0 to today |
//!
//! Only encoding 4 has a writer we can run (RedisBloom 2.8.2); the tests build 0–3 from this
//! description. Every count is checked before it sizes anything: the link count before the link
//! list is reserved, each link's fields (and the chain's probes so far) before its string is read, each string's length against
//! the fields, and each link's allocation size against the caller's
//! [`MemoryBudget`], charged link by link as the arrays are allocated (one
//! budget for the whole value, so it sees their sum).

use super::chain::RbFilter;
use super::link::Link;
use super::shape::{Arithmetic, ChainHeader, ChainShape, LinkShape, MAX_CHAIN_HASHES, MAX_LINKS};
use crate::budget::MemoryBudget;
use crate::encoding::{check, DecodeError};

/// The encoding version RedisBloom writes; it reads every version up to this one.
pub const ENCODING_VERSION: i32 = 4;
/// The name of RedisBloom's Bloom-filter data type.
pub const TYPE_NAME: &str = "MBbloom--";

/// The fields of an RDB value, one at a time (the Redis glue reads them from the RDB file).
pub trait RdbSource {
    /// How the source reports a failed read.
    type Error;
    /// A string as the source holds it (so that a link of gigabytes is not copied once more).
    type Bytes: AsRef<[u8]>;
    fn unsigned(&mut self) -> Result<u64, Self::Error>;
    fn double(&mut self) -> Result<f64, Self::Error>;
    fn string(&mut self) -> Result<Self::Bytes, Self::Error>;
}

/// Where an RDB value's fields go (the Redis glue writes them with `RedisModule_SaveUnsigned`,
/// `SaveDouble` and `SaveStringBuffer`).
pub trait RdbSink {
    fn unsigned(&mut self, value: u64);
    fn double(&mut self, value: f64);
    fn string(&mut self, bytes: &[u8]);
}

/// Why an RDB value could not be loaded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RdbError<E> {
    /// The source could not read a field.
    Source(E),
    /// The fields do not describe a filter RedisBloom could have written, or break a limit.
    Decode(DecodeError),
}

impl<E> From<DecodeError> for RdbError<E> {
    fn from(error: DecodeError) -> Self {
        RdbError::Decode(error)
    }
}

fn corrupt<E>(what: &'static str) -> RdbError<E> {
    RdbError::Decode(DecodeError::Corrupt(what))
}

/// Loads a RedisBloom filter written with encoding version `encver`, allocating each link's
/// array after `budget` admits it (its filter total being the links allocated so far).
pub fn load<S: RdbSource, B: MemoryBudget + ?Sized>(
    source: &mut S,
    encver: i32,
    budget: &mut B,
) -> Result<RbFilter, RdbError<S::Error>> {
    if !(0..=ENCODING_VERSION).contains(&encver) {
        return Err(corrupt("encoding version"));
    }
    let items = source.unsigned().map_err(RdbError::Source)?;
    let count = source.unsigned().map_err(RdbError::Source)?;
    let count = usize::try_from(count)
        .ok()
        .filter(|count| (1..=MAX_LINKS).contains(count))
        .ok_or(corrupt("link count"))?;
    let options = if encver >= 2 {
        u32::try_from(source.unsigned().map_err(RdbError::Source)?)
            .map_err(|_| corrupt("options"))?
    } else {
        0
    };
    let growth = if encver >= 4 {
        u32::try_from(source.unsigned().map_err(RdbError::Source)?)
            .map_err(|_| corrupt("growth"))?
    } else {
        2
    };
    let header = ChainHeader {
        items,
        options,
        growth,
        arithmetic: if encver == 1 {
            Arithmetic::Wrap32
        } else {
            Arithmetic::Wide
        },
    };
    let mut links = Vec::with_capacity(count);
    let mut total = 0u64;
    let mut allocated = 0u64;
    let mut hashes_total = 0u64;
    for _ in 0..count {
        let entries = source.unsigned().map_err(RdbError::Source)?;
        let error = source.double().map_err(RdbError::Source)?;
        let hashes = u32::try_from(source.unsigned().map_err(RdbError::Source)?)
            .map_err(|_| corrupt("link hashes"))?;
        let bpe = source.double().map_err(RdbError::Source)?;
        let (bits, n2) = if encver >= 1 {
            let bits = source.unsigned().map_err(RdbError::Source)?;
            let n2 = u8::try_from(source.unsigned().map_err(RdbError::Source)?)
                .map_err(|_| corrupt("link n2"))?;
            (bits, n2)
        } else {
            check(bpe.is_finite() && bpe > 0.0, "link bits per entry")?;
            // C's (uint64_t)(entries * bpe); Rust's cast saturates where C's is undefined, and
            // a saturated count fails validation below.
            ((entries as f64 * bpe) as u64, 0)
        };
        // Everything but the array's length is known: check it before the string is read.
        let mut shape = LinkShape {
            entries,
            error,
            hashes,
            bpe,
            bits,
            n2,
            bytes: 0,
            items: 0,
        };
        shape.validate_fields()?;
        // The chain's probes, checked before this link's array is read (ChainShape::validate
        // checks the same sum at the end).
        hashes_total += u64::from(hashes);
        check(hashes_total <= MAX_CHAIN_HASHES, "hashes over the chain")?;
        let array = source.string().map_err(RdbError::Source)?;
        let array = array.as_ref();
        shape.bytes = array.len() as u64;
        shape.items = source.unsigned().map_err(RdbError::Source)?;
        shape.validate()?;
        total = total
            .checked_add(shape.bytes)
            .ok_or(corrupt("total bytes"))?;
        let allocation = shape.allocated_bytes();
        allocated = allocated.saturating_add(allocation);
        budget
            .charge(allocated, allocation)
            .map_err(DecodeError::Limit)?;
        // The string moves into words one link at a time: at most one link is held twice.
        let mut link = Link::zeroed(shape).map_err(DecodeError::Limit)?;
        link.write_bytes(0, array);
        links.push(link);
    }
    ChainShape {
        header,
        links: links.iter().map(|link| *link.shape()).collect(),
    }
    .validate()?;
    Ok(RbFilter::from_parts(header, links))
}

/// The encoding that keeps everything about `filter`: 1 for a filter read from encoding 1 (its
/// 32-bit probe sums have no other encoding; such a filter has options 0 and growth 2, which
/// encoding 1 implies), else 4, the encoding RedisBloom itself writes today.
pub fn encoding_for(filter: &RbFilter) -> i32 {
    match filter.header().arithmetic {
        Arithmetic::Wrap32 => 1,
        Arithmetic::Wide => ENCODING_VERSION,
    }
}

/// Writes `filter` as RedisBloom's RDB value in [`encoding_for`] it, and returns that version:
/// [`load`] with it gives the same filter back. In encoding 4 the fields are exactly those
/// RedisBloom 2.8.2 writes (the tests compare them with a real DUMP payload).
pub fn save<S: RdbSink>(filter: &RbFilter, sink: &mut S) -> i32 {
    let encver = encoding_for(filter);
    let header = filter.header();
    sink.unsigned(header.items);
    sink.unsigned(filter.links().len() as u64);
    if encver >= 2 {
        sink.unsigned(u64::from(header.options));
    }
    if encver >= 4 {
        sink.unsigned(u64::from(header.growth));
    }
    for link in filter.links() {
        let shape = link.shape();
        sink.unsigned(shape.entries);
        sink.double(shape.error);
        sink.unsigned(u64::from(shape.hashes));
        sink.double(shape.bpe);
        sink.unsigned(shape.bits);
        sink.unsigned(u64::from(shape.n2));
        sink.string(&link.array());
        sink.unsigned(shape.items);
    }
    encver
}
