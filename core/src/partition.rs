//! Partitioned filters: one logical Bloom filter split by item over P keys, so that it can grow
//! past one key and spread over a cluster's nodes (the specification is `docs/partitions.md`).
//!
//! # The picture
//!
//! ```text
//!   logical filter "clicks" (N items at ε, P = 4, routing seed r)
//!
//!   item ──xxh3_64(item, seed r)──> h ──(h × P) >> 64──> partition j in 0..P
//!
//!   key "clicks"            descriptor: P, r, N, c, ε, growth or window    (no bits)
//!   key "{2470}clicks/0"    partition 0: a filter for c items at ε, filter seed s0 ≠ r
//!   key "{…}clicks/1"       partition 1: …                        s1 ≠ r
//!   …
//! ```
//!
//! An item lives in exactly one partition, so an add or a lookup touches one key, and the union
//! answers at ε: a non-member is tested against one partition only, whose rate is ε. Inside a
//! partition the bit positions come from xxh3-128 under the partition's own filter seed
//! ([`crate::hash`]); the routing seed must differ from it, or the partition's items would all
//! share the top bits the routing chose and use a fraction of its bits.
//!
//! # Keys ([`partition_key`])
//!
//! Partition i of NAME is `{T_i}NAME/i`. The hash tag comes first so that it is the key's tag
//! whatever NAME holds; `T_i` is the smallest decimal number whose CRC16 lands on slot
//! `s_i = (slot(NAME) + ⌊i·16384/P⌋) mod 16384`, so the P partitions sit on evenly spaced slots
//! and a cluster of M masters with equal contiguous ranges holds P/M of them each.
//!
//! Worked example (the fixture's first key vector): `slot("clicks") = 12981`; with P = 16,
//! partition 1 targets slot 12981 + 1024 = 14005, the smallest number whose CRC16 mod 16384 is
//! 14005 is 23179, so its key is `{23179}clicks/1`; partition 4 wraps to slot 693.
//!
//! ```
//! use rustbloom_core::partition::{key_slot, partition_key, Partition};
//! assert_eq!(key_slot(b"clicks"), 12981);
//! assert_eq!(partition_key(b"clicks", 1, 16), b"{23179}clicks/1");
//! assert_eq!(key_slot(&partition_key(b"clicks", 4, 16)), 693);
//! let partition = Partition::new(3, 16, 7).unwrap();
//! assert!(partition.route(b"apple") < 16);
//! ```
//!
//! # Sizing ([`partition_capacity`])
//!
//! Each partition is created at ε for `⌈N/P⌉` items. Items per partition follow Binomial(N, 1/P),
//! so a NONSCALING partition gets six standard deviations more, plus one: loading exactly N
//! random items never fills one.
//!
//! # Encodings
//!
//! A partition is an ordinary filter whose saved header is wrapped in its identity
//! ([`encode_identity`]); the descriptor is a value of the same module type with its own header
//! ([`Descriptor::encode`]). Both pictures are next to their functions. Releases before these
//! headers refuse them as corrupt rather than misread them (they accept only their own magics).

use std::sync::OnceLock;

use xxhash_rust::xxh3::{xxh3_64, xxh3_64_with_seed};

use crate::encoding::DecodeError;
use crate::scalable::MAX_EXPANSION;
use crate::scalable::{Growth, MAX_CAPACITY};
use crate::window::{MAX_WINDOW_MS, MIN_WINDOW_MS};

/// The most partitions a filter may have.
pub const MAX_PARTITIONS: u32 = 4096;
/// Redis Cluster's slot count.
pub const SLOTS: u16 = 16384;

/// A partition's identity: which of how many, under which routing seed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Partition {
    index: u32,
    count: u32,
    routing_seed: u64,
}

/// Why a partition or a descriptor cannot be made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PartitionError {
    /// P outside 1..=MAX_PARTITIONS.
    Count,
    /// i ≥ P.
    Index,
    /// The filter's own seed equals the routing seed.
    SeedReused,
    /// The partition capacity for N items is outside 1..=MAX_CAPACITY.
    Capacity,
    /// An error rate outside (0, 1), an expansion or a window out of range.
    Parameters,
}

impl std::fmt::Display for PartitionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PartitionError::Count => {
                write!(f, "partitions must be in the range [1, {MAX_PARTITIONS}]")
            }
            PartitionError::Index => {
                f.write_str("partition index must be below the number of partitions")
            }
            PartitionError::SeedReused => {
                f.write_str("a partition's SEED must differ from its routing seed")
            }
            PartitionError::Capacity => f.write_str("capacity too large for this many partitions"),
            PartitionError::Parameters => {
                f.write_str("error rate, expansion or window out of range")
            }
        }
    }
}

impl Partition {
    pub fn new(index: u32, count: u32, routing_seed: u64) -> Result<Partition, PartitionError> {
        if !(1..=MAX_PARTITIONS).contains(&count) {
            return Err(PartitionError::Count);
        }
        if index >= count {
            return Err(PartitionError::Index);
        }
        Ok(Partition {
            index,
            count,
            routing_seed,
        })
    }

    pub fn index(&self) -> u32 {
        self.index
    }

    pub fn count(&self) -> u32 {
        self.count
    }

    pub fn routing_seed(&self) -> u64 {
        self.routing_seed
    }

    /// The partition `item` belongs to.
    #[inline]
    pub fn route(&self, item: &[u8]) -> u32 {
        route(item, self.count, self.routing_seed)
    }

    /// The first item of `items` that belongs elsewhere, with its partition.
    pub fn first_misrouted<'a>(
        &self,
        items: impl IntoIterator<Item = &'a [u8]>,
    ) -> Option<(usize, u32)> {
        items
            .into_iter()
            .map(|item| self.route(item))
            .enumerate()
            .find(|&(_, routed)| routed != self.index)
    }
}

/// `(xxh3_64(item, routing_seed) × partitions) >> 64`: the partition of `item` among
/// `partitions` (multiply-shift, as the layers reduce hashes to bit positions).
#[inline]
pub fn route(item: &[u8], partitions: u32, routing_seed: u64) -> u32 {
    let hash = xxh3_64_with_seed(item, routing_seed);
    ((u128::from(hash) * u128::from(partitions)) >> 64) as u32
}

/// CRC16-XMODEM (polynomial 0x1021, initial value 0), the CRC of Redis Cluster's key slots.
pub fn crc16(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &byte in bytes {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// The cluster slot of `key`: CRC16 of its hash tag (the bytes between the first `{` and the
/// next `}`, when there is at least one) or of the whole key, mod 16384.
pub fn key_slot(key: &[u8]) -> u16 {
    let tagged = key.iter().position(|&b| b == b'{').and_then(|open| {
        let rest = &key[open + 1..];
        rest.iter()
            .position(|&b| b == b'}')
            .filter(|&close| close > 0)
            .map(|close| &rest[..close])
    });
    crc16(tagged.unwrap_or(key)) % SLOTS
}

/// The smallest n ≥ 0 whose decimal string hashes to `slot` (each slot has one below 110,000);
/// the table is built on first use, once.
pub fn slot_tag(slot: u16) -> u32 {
    static TAGS: OnceLock<Vec<u32>> = OnceLock::new();
    let tags = TAGS.get_or_init(|| {
        let mut tags = vec![u32::MAX; usize::from(SLOTS)];
        let mut missing = tags.len();
        let mut n = 0u32;
        while missing > 0 {
            let slot = usize::from(crc16(n.to_string().as_bytes()) % SLOTS);
            if tags[slot] == u32::MAX {
                tags[slot] = n;
                missing -= 1;
            }
            n += 1;
        }
        tags
    });
    tags[usize::from(slot % SLOTS)]
}

/// The slot partition `index` of `count` targets, for a logical name in slot `base`.
pub fn partition_slot(base: u16, index: u32, count: u32) -> u16 {
    let step = u64::from(index) * u64::from(SLOTS) / u64::from(count.max(1));
    ((u64::from(base) + step) % u64::from(SLOTS)) as u16
}

/// The key of partition `index` of `count` of the logical filter `name`: `{T_i}name/index`.
pub fn partition_key(name: &[u8], index: u32, count: u32) -> Vec<u8> {
    let tag = slot_tag(partition_slot(key_slot(name), index, count));
    let mut key = Vec::with_capacity(name.len() + 16);
    key.push(b'{');
    key.extend_from_slice(tag.to_string().as_bytes());
    key.push(b'}');
    key.extend_from_slice(name);
    key.push(b'/');
    key.extend_from_slice(index.to_string().as_bytes());
    key
}

/// The capacity each of `partitions` partitions is created with for `items` items in all:
/// `⌈N/P⌉`, or for NONSCALING partitions `⌈N/P + 6·√(N·(1/P)·(1 − 1/P))⌉ + 1` (six standard
/// deviations of the binomial spread, in IEEE double precision as the specification computes it).
/// Where that passes [`MAX_CAPACITY`], N itself when N is less: no partition can receive more
/// than all N items (so one NONSCALING partition of 2^30 items is as a plain filter of 2^30);
/// capacities within the cap are the formula's, which saved descriptors are checked against.
pub fn partition_capacity(items: u64, partitions: u32, nonscaling: bool) -> u64 {
    let p = u64::from(partitions.max(1));
    if !nonscaling {
        return items.div_ceil(p);
    }
    let n = items as f64;
    let share = 1.0 / p as f64;
    let spread = 6.0 * (n * share * (1.0 - share)).sqrt();
    let capacity = ((n / p as f64 + spread).ceil() as u64).saturating_add(1);
    if capacity > MAX_CAPACITY {
        capacity.min(items)
    } else {
        capacity
    }
}

/// The most bytes of partition key names a descriptor may imply: its name's length times P.
/// BF.INFO of a descriptor lists every partition key, each holding the name, so this bounds
/// that reply (to about 1.1 MiB with P's own bytes); BF.RESERVE ... PARTITIONS refuses a longer
/// name for its P (with 4096 partitions, names of up to 256 bytes).
pub const MAX_PARTITION_NAME_BYTES: u64 = 1 << 20;

/// Whether a descriptor named by `name_len` bytes over `partitions` partitions stays within
/// [`MAX_PARTITION_NAME_BYTES`].
pub fn partition_names_fit(name_len: usize, partitions: u32) -> bool {
    (name_len as u64).saturating_mul(u64::from(partitions)) <= MAX_PARTITION_NAME_BYTES
}

/// What every partition of a descriptor is: a scalable filter that grows by `expansion`, a
/// non-scaling one, or a sliding window. Wider than a scalable filter's own
/// [`Growth`], which [`growth`](Self::growth) gives for the first two.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PartitionGrowth {
    Scaling { expansion: u32 },
    NonScaling,
    Window { window_ms: u64 },
}

impl PartitionGrowth {
    /// The scalable growth, None for a window.
    pub fn growth(self) -> Option<Growth> {
        match self {
            PartitionGrowth::Scaling { expansion } => Some(Growth::Scaling { expansion }),
            PartitionGrowth::NonScaling => Some(Growth::NonScaling),
            PartitionGrowth::Window { .. } => None,
        }
    }
}

/// What the logical name of a partitioned filter holds: everything a client needs to route
/// items and name the partitions' keys.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Descriptor {
    partitions: u32,
    routing_seed: u64,
    /// N, the capacity of the whole.
    capacity: u64,
    /// c, each partition's capacity, fixed at creation.
    partition_capacity: u64,
    error_rate: f64,
    growth: PartitionGrowth,
}

impl Descriptor {
    /// The descriptor of `capacity` items at `error_rate` over `partitions` partitions.
    pub fn new(
        partitions: u32,
        routing_seed: u64,
        capacity: u64,
        error_rate: f64,
        growth: PartitionGrowth,
    ) -> Result<Descriptor, PartitionError> {
        if !(1..=MAX_PARTITIONS).contains(&partitions) {
            return Err(PartitionError::Count);
        }
        let nonscaling = growth == PartitionGrowth::NonScaling;
        let descriptor = Descriptor {
            partitions,
            routing_seed,
            capacity,
            partition_capacity: partition_capacity(capacity, partitions, nonscaling),
            error_rate,
            growth,
        };
        descriptor.check()?;
        Ok(descriptor)
    }

    fn check(&self) -> Result<(), PartitionError> {
        if !(1..=MAX_PARTITIONS).contains(&self.partitions) {
            return Err(PartitionError::Count);
        }
        if self.capacity == 0 || !(1..=MAX_CAPACITY).contains(&self.partition_capacity) {
            return Err(PartitionError::Capacity);
        }
        let growth_ok = match self.growth {
            PartitionGrowth::Scaling { expansion } => (1..=MAX_EXPANSION).contains(&expansion),
            PartitionGrowth::NonScaling => true,
            PartitionGrowth::Window { window_ms } => {
                (MIN_WINDOW_MS..=MAX_WINDOW_MS).contains(&window_ms)
            }
        };
        if !(self.error_rate > 0.0 && self.error_rate < 1.0 && growth_ok) {
            return Err(PartitionError::Parameters);
        }
        Ok(())
    }

    pub fn partitions(&self) -> u32 {
        self.partitions
    }

    pub fn routing_seed(&self) -> u64 {
        self.routing_seed
    }

    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    pub fn partition_capacity(&self) -> u64 {
        self.partition_capacity
    }

    pub fn error_rate(&self) -> f64 {
        self.error_rate
    }

    pub fn growth(&self) -> PartitionGrowth {
        self.growth
    }

    /// The identity of partition `index`.
    pub fn partition(&self, index: u32) -> Result<Partition, PartitionError> {
        Partition::new(index, self.partitions, self.routing_seed)
    }

    /// The saved form of a descriptor, all integers little-endian:
    ///
    /// ```text
    ///  offset  size  field
    ///  0       4     magic "RBLD"
    ///  4       1     version 1
    ///  5       1     growth: 0 scaling, 1 non-scaling, 2 window
    ///  6       2     reserved, zero
    ///  8       4     partitions P, 1..=4096
    ///  12      8     routing seed
    ///  20      8     capacity N
    ///  28      8     partition capacity c, 1..=2^30
    ///  36      8     error rate (IEEE-754 f64), in (0, 1)
    ///  44      8     expansion (scaling), window in ms (window), else 0
    ///  52      8     xxh3-64 of every byte before it
    /// ```
    pub fn encode(&self) -> Vec<u8> {
        let (code, value) = match self.growth {
            PartitionGrowth::Scaling { expansion } => (0u8, u64::from(expansion)),
            PartitionGrowth::NonScaling => (1, 0),
            PartitionGrowth::Window { window_ms } => (2, window_ms),
        };
        let mut out = Vec::with_capacity(DESCRIPTOR_BYTES);
        out.extend_from_slice(DESCRIPTOR_MAGIC);
        out.extend_from_slice(&[IDENTITY_VERSION, code, 0, 0]);
        out.extend_from_slice(&self.partitions.to_le_bytes());
        out.extend_from_slice(&self.routing_seed.to_le_bytes());
        out.extend_from_slice(&self.capacity.to_le_bytes());
        out.extend_from_slice(&self.partition_capacity.to_le_bytes());
        out.extend_from_slice(&self.error_rate.to_le_bytes());
        out.extend_from_slice(&value.to_le_bytes());
        let checksum = xxh3_64(&out);
        out.extend_from_slice(&checksum.to_le_bytes());
        out
    }

    /// Decodes [`encode`](Self::encode)'s bytes, checking every field.
    pub fn decode(bytes: &[u8]) -> Result<Descriptor, DecodeError> {
        let corrupt = |what| DecodeError::Corrupt(what);
        if bytes.len() != DESCRIPTOR_BYTES {
            return Err(corrupt("descriptor length"));
        }
        let (body, checksum) = bytes.split_at(DESCRIPTOR_BYTES - 8);
        if xxh3_64(body) != le_u64(checksum) {
            return Err(corrupt("descriptor checksum"));
        }
        if &body[..4] != DESCRIPTOR_MAGIC || body[4] != IDENTITY_VERSION {
            return Err(corrupt("descriptor magic or version"));
        }
        if body[6..8] != [0, 0] {
            return Err(corrupt("descriptor reserved bytes"));
        }
        let value = le_u64(&body[44..52]);
        let growth = match body[5] {
            0 => PartitionGrowth::Scaling {
                expansion: u32::try_from(value).map_err(|_| corrupt("descriptor expansion"))?,
            },
            1 if value == 0 => PartitionGrowth::NonScaling,
            2 => PartitionGrowth::Window { window_ms: value },
            _ => return Err(corrupt("descriptor growth")),
        };
        // Rebuilt as BF.RESERVE ... PARTITIONS builds it, so that what loads is exactly what its
        // AOF rewrite (that command) creates again: a partition capacity of its own is refused.
        let descriptor = Descriptor::new(
            le_u32(&body[8..12]),
            le_u64(&body[12..20]),
            le_u64(&body[20..28]),
            f64::from_le_bytes(body[36..44].try_into().unwrap_or_default()),
            growth,
        )
        .map_err(|_| corrupt("descriptor field out of range"))?;
        if descriptor.partition_capacity != le_u64(&body[28..36]) {
            return Err(corrupt(
                "descriptor partition capacity is not the one its capacity and partitions give",
            ));
        }
        Ok(descriptor)
    }
}

pub(crate) const DESCRIPTOR_MAGIC: &[u8; 4] = b"RBLD";
pub(crate) const IDENTITY_MAGIC: &[u8; 4] = b"RBLP";
const IDENTITY_VERSION: u8 = 1;
const DESCRIPTOR_BYTES: usize = 60;
const IDENTITY_BYTES: usize = 32;

fn le_u64(bytes: &[u8]) -> u64 {
    u64::from_le_bytes(bytes.try_into().unwrap_or_default())
}

fn le_u32(bytes: &[u8]) -> u32 {
    u32::from_le_bytes(bytes.try_into().unwrap_or_default())
}

/// A partition's saved header: its identity, then the header of its filter (any of our kinds'
/// headers, [`crate::stored`]), all integers little-endian:
///
/// ```text
///  offset  size  field
///  0       4     magic "RBLP"
///  4       1     version 1
///  5       3     reserved, zero
///  8       4     partition index i, < P
///  12      4     partitions P, 1..=4096
///  16      8     routing seed
///  24      8     xxh3-64 of every byte before it
///  32      …     the filter's own header ("RBLM" or "RBLW"), unchanged
/// ```
///
/// The filter's header keeps its own checksum, which also seeds the checksums of SCANDUMP data
/// chunks, so chunks are the same whether or not the filter is a partition.
pub fn encode_identity(partition: &Partition, inner: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(IDENTITY_BYTES + inner.len());
    out.extend_from_slice(IDENTITY_MAGIC);
    out.extend_from_slice(&[IDENTITY_VERSION, 0, 0, 0]);
    out.extend_from_slice(&partition.index.to_le_bytes());
    out.extend_from_slice(&partition.count.to_le_bytes());
    out.extend_from_slice(&partition.routing_seed.to_le_bytes());
    let checksum = xxh3_64(&out);
    out.extend_from_slice(&checksum.to_le_bytes());
    out.extend_from_slice(inner);
    out
}

/// Splits [`encode_identity`]'s bytes into the identity and the filter's header.
pub fn decode_identity(bytes: &[u8]) -> Result<(Partition, &[u8]), DecodeError> {
    let corrupt = |what| DecodeError::Corrupt(what);
    if bytes.len() < IDENTITY_BYTES {
        return Err(corrupt("partition header length"));
    }
    let (identity, inner) = bytes.split_at(IDENTITY_BYTES);
    let (body, checksum) = identity.split_at(IDENTITY_BYTES - 8);
    if xxh3_64(body) != le_u64(checksum) {
        return Err(corrupt("partition header checksum"));
    }
    if &body[..4] != IDENTITY_MAGIC || body[4] != IDENTITY_VERSION || body[5..8] != [0, 0, 0] {
        return Err(corrupt("partition header magic or version"));
    }
    let partition = Partition::new(
        le_u32(&body[8..12]),
        le_u32(&body[12..16]),
        le_u64(&body[16..24]),
    )
    .map_err(|_| corrupt("partition index or count"))?;
    Ok((partition, inner))
}
