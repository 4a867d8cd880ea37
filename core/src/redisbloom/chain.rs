//! A RedisBloom filter as RedisBloom keeps it: a chain of plain Bloom filters ("links").
//!
//! Every link keeps the fields RedisBloom stores for it, so that a migrated filter probes the
//! same bits, grows into the same links and encodes back to the same bytes:
//!
//! ```text
//!   RbFilter { items, options, growth, links: [link 0 (oldest), link 1, ..., link n-1 (newest)] }
//!   Link     { entries, error, hashes, bpe, bits, n2, items, bytes, array }
//!
//!   array (RedisBloom's):  | byte 0 | byte 1 | ... | byte bytes-1 |
//!   bit x of a link is     byte[x >> 3] & (1 << (x & 7))      (least significant bit first)
//!   held here as words:    | word 0 = bytes 0..7, little-endian | word 1 | ... |
//!                          so bit x is bit (x & 63) of word x >> 6, the same bit
//!   probe i of an item:    x_i = ((a + i·b) mod 2^64) mod M,   0 ≤ i < hashes
//!                          M   = 2^n2 when n2 > 0, else bits (bits = 0: 8 · bytes)
//! ```
//!
//! Words rather than bytes so that a link's array is the core's bit store ([`crate::bits`]):
//! allocated zeroed and fallibly (its pages stay untouched until used), and cut into pieces where
//! one block would be rounded up by more than a sliver. A link's `bytes` is
//! not always a multiple of 8 in old files; the padding of its last word stays zero and is never
//! encoded.
//!
//! `(a, b)` are two hashes of the item ([`RbHash`], in [`super::hash`]), computed once and shared
//! by all links.
//! A lookup scans links newest to oldest; an add answers false when any link has the item, else
//! sets its bits in the newest link, first pushing a new link when that one holds `entries` items.
//!
//! A new link is sized as RedisBloom 2.8.2 sizes one (checked against its SCANDUMP headers):
//!
//! ```text
//!   entries = entries_prev · growth          error = error_prev · 0.5
//!   bpe     = −ln(error) / 0.480453013918201   (RedisBloom's decimal constant for ln²2)
//!   hashes  = ⌈ln 2 · bpe⌉
//!   NOROUND:   raw = (u64)(entries · bpe),                  n2 = 0
//!   otherwise: n2 = ⌊log2(entries · bpe)⌋ + 1,  raw = 2^n2, entries = (u64)(2^n2 / bpe)
//!   bytes   = 8 · max(1, ⌈raw / 64⌉)           bits = 8 · bytes
//! ```
//!
//! The recomputed `entries` of a power-of-two link and the one-word minimum are not in the
//! format notes; both were observed on RedisBloom 2.8.2 (a link of n2 = 1 is stored with 8 bytes
//! and bits = 64 but probes modulo 2). `ln` is `f64::ln`, which on Linux calls the C library's
//! `log` — the very function RedisBloom's C calls — so bpe matches RedisBloom's to the bit there
//! (the fixtures compare every stored bpe). The core's portable `ln` (in the private `math` module) would
//! differ in the last bits; exactness with RedisBloom matters more here than sameness across
//! C libraries, which for a replica of a migrated filter only matters if primary and replica
//! run different ones.

use std::borrow::Cow;

use super::hash::{probe, Hashing, RbHash};
use crate::bits::{self, BitStore};
use crate::budget::{allocation_size, LimitError, MemoryBudget};
use crate::encoding::{check, ChunkError, DecodeError};
use crate::scalable::{InsertError, MAX_EXPANSION};

/// Option flag: links are sized by `entries · bpe` rather than rounded up to a power of two.
pub const NOROUND: u32 = 1;
/// Option flag: the capacity given at creation was a number of bits (creation only; kept as is).
pub const ENTS_IS_BITS: u32 = 2;
/// Option flag: items are hashed with MurmurHash64A (else the 32-bit MurmurHash2).
pub const FORCE64: u32 = 4;
/// Option flag: the filter refuses new items once its one link is full.
pub const NO_SCALING: u32 = 8;
/// Every flag RedisBloom defines.
pub const KNOWN_OPTIONS: u32 = NOROUND | ENTS_IS_BITS | FORCE64 | NO_SCALING;

/// Most links a filter may have. RedisBloom has no limit of its own: with EXPANSION 1 and
/// capacity 1 each link takes one item at half the previous error, so links pile up until the
/// error underflows to zero after about 1075 halvings (measured on 2.8.2: 1067 usable links from
/// 0.01, then a broken zero-sized one). This bound admits every filter with a usable last link.
pub const MAX_LINKS: usize = 1100;
/// Most hashes per link: RedisBloom gives ⌈ln 2 · bpe⌉ = 1075 to the smallest positive error
/// rate (2^−1074), and a stored count may be one above RedisBloom's (see
/// [`LinkShape::hash_range`]).
pub const MAX_HASHES: u32 = 1076;
/// Most probes one lookup may make over all links: the sum of the links' hashes. A chain that
/// RedisBloom grew halves the error from link to link (since v2.2; faster before), so each link
/// needs at least one hash more than the one before it, and none more than 1075: the sum is at
/// most 1 + 2 + ... + 1075. The longest real chain (EXPANSION 1, capacity 1, from an error near
/// 1, about 1074 links) comes close; a forged chain of [`MAX_LINKS`] links at the smallest error
/// (1.2 million probes, and every one a cache miss) does not pass.
pub const MAX_CHAIN_HASHES: u64 = 1075 * 1076 / 2;
/// How far a stored bits-per-entry may be from the one RedisBloom derives from the error rate
/// (relative): C libraries' `log` differ in the last bits, never by this much.
const BPE_TOLERANCE: f64 = 1e-6;

/// RedisBloom's decimal approximation of ln²2, which its bits-per-entry formula divides by.
/// Using the exact value would make some links one bit different.
const LN2_SQUARED: f64 = 0.480453013918201;
/// How the probe sum `a + i·b` is reduced before the modulo.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arithmetic {
    /// Modulo 2^64 (every RedisBloom since v1.1.1).
    Wide,
    /// RedisBloom v1.0 (RDB encoding version 1) summed in 32 bits: in links of more than 2^31
    /// bits (n2 > 31) the sum wraps at 2^32 first, so those links only ever use their first 2^32
    /// bits. Positions change only from n2 = 33 on (2^32 is a multiple of any smaller
    /// power-of-two modulus).
    ///
    /// RedisBloom 2.8.2 itself does not do this when it loads encoding 1: asked with a 2^33-bit
    /// link (`core/tests/fixtures/redisbloom/check_wrap32.py`), it set the 64-bit positions. So
    /// for such a link — 1 GiB or more, written by v1.0 — 2.8.2 misses items v1.0 added; we
    /// answer as the v1.0 that wrote the bits.
    Wrap32,
}

/// The stored fields of one link, without its bit array.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinkShape {
    /// Items the link was sized for (RedisBloom's `entries`).
    pub entries: u64,
    pub error: f64,
    pub hashes: u32,
    /// Bits per entry.
    pub bpe: f64,
    /// The stored bit count (0 in some links written before v2.2).
    pub bits: u64,
    /// log2 of the modulus of a power-of-two link; 0 when the modulus is `bits`.
    pub n2: u8,
    /// Length of the bit array.
    pub bytes: u64,
    /// Items added to this link (RedisBloom's per-link `size`).
    pub items: u64,
}

impl LinkShape {
    /// The modulus M of the probe positions.
    pub fn modulus(&self) -> u64 {
        if self.n2 > 0 {
            1 << self.n2
        } else if self.bits == 0 {
            self.bytes * 8
        } else {
            self.bits
        }
    }

    /// Bytes the allocator hands out for this link's array: ⌈bytes / 8⌉ words in a bit store
    /// ([`bits::allocated_bytes`]). What a [`MemoryBudget`] is charged.
    pub fn allocated_bytes(&self) -> u64 {
        bits::allocated_bytes(self.bytes)
    }

    /// The hash counts a link at this error rate may store: RedisBloom's ⌈ln 2 · bpe⌉, give or
    /// take one for the rounding of other versions' arithmetic (never below 1).
    pub fn hash_range(&self) -> std::ops::RangeInclusive<u32> {
        let exact = (std::f64::consts::LN_2 * bits_per_entry(self.error)).ceil();
        // error is in (0, 1): exact is in [1, 1075].
        let exact = exact as u32;
        exact.saturating_sub(1).max(1)..=exact.saturating_add(1).min(MAX_HASHES)
    }

    /// The most items a link of this modulus and error rate can be sized for: what its bits
    /// hold at RedisBloom's bits per entry, −ln ε / ln²2 (RedisBloom sizes a link of `entries`
    /// with ⌊entries · bpe⌋ bits or more, so entries ≤ (M + 1) / bpe; a hair of slack for the
    /// last bits of `log`). The decoders refuse a link that claims more entries, and an add treats
    /// a link holding this many items as full, so no count can outgrow the bits.
    pub fn max_entries(&self) -> u64 {
        let bound = (self.modulus() as f64 + 1.0) / bits_per_entry(self.error) * (1.0 + 1e-9);
        // Saturates at u64::MAX (and NaN, impossible for a validated error rate, gives 0).
        bound.floor() as u64
    }

    /// Items after which an add must not set bits in this link any more (it pushes a link, or
    /// a non-scaling filter is full): its entries, or everything its bits can hold.
    pub fn item_limit(&self) -> u64 {
        self.entries.min(self.max_entries())
    }

    /// Checks every field but `bytes` against what RedisBloom can produce (an RDB value gives
    /// the array's length last).
    pub(crate) fn validate_fields(&self) -> Result<(), DecodeError> {
        check(self.entries >= 1, "link entries")?;
        check(self.error > 0.0 && self.error < 1.0, "link error rate")?;
        check(self.hash_range().contains(&self.hashes), "link hashes")?;
        let bpe = bits_per_entry(self.error);
        check(
            self.bpe.is_finite() && (self.bpe - bpe).abs() <= bpe * BPE_TOLERANCE,
            "link bits per entry",
        )?;
        check(self.items <= self.entries, "link items over entries")?;
        check(self.n2 < 64, "link n2")
    }

    /// Checks every field, that the array covers the modulus with at most the one word of
    /// slack RedisBloom's rounding leaves (so a small filter cannot claim a huge array), and that
    /// the bits can hold the entries.
    pub(crate) fn validate(&self) -> Result<(), DecodeError> {
        self.validate_fields()?;
        check(self.bytes > 0, "empty link")?;
        let array_bits = self.bytes.checked_mul(8).ok_or(corrupt("link bytes"))?;
        if self.n2 == 0 {
            check(self.bits <= array_bits, "link bits over its bytes")?;
        }
        let modulus = self.modulus();
        check(modulus <= array_bits, "link modulus over its bytes")?;
        check(
            self.bytes <= modulus.div_ceil(64).max(1) * 8,
            "link bytes over its modulus",
        )?;
        check(
            self.entries <= self.max_entries(),
            "link entries over its bits",
        )
    }
}

/// RedisBloom's bits per entry for an error rate: −ln ε / ln²2, with its decimal ln²2.
fn bits_per_entry(error: f64) -> f64 {
    -(error.ln() / LN2_SQUARED)
}

fn corrupt(what: &'static str) -> DecodeError {
    DecodeError::Corrupt(what)
}

/// The filter-wide fields, as RedisBloom's chain stores them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChainHeader {
    /// Items over all links (RedisBloom's chain `size`).
    pub items: u64,
    pub options: u32,
    /// Expansion: each new link has `growth` times the entries of the previous one.
    pub growth: u32,
    pub arithmetic: Arithmetic,
}

/// Everything a decoder learned about a filter before it allocates the bit arrays.
#[derive(Clone, Debug, PartialEq)]
pub struct ChainShape {
    pub header: ChainHeader,
    /// Oldest first.
    pub links: Vec<LinkShape>,
}

impl ChainShape {
    /// Bytes of all bit arrays (validation checked the sum fits).
    pub fn total_bytes(&self) -> u64 {
        self.links.iter().map(|link| link.bytes).sum()
    }

    /// Bytes the allocator hands out for all bit arrays ([`LinkShape::allocated_bytes`]).
    pub fn allocated_bytes(&self) -> u64 {
        self.links
            .iter()
            .fold(0u64, |sum, link| sum.saturating_add(link.allocated_bytes()))
    }

    /// Checks the header against the links. Each link must already have passed
    /// [`LinkShape::validate`].
    pub(crate) fn validate(&self) -> Result<(), DecodeError> {
        let header = &self.header;
        check(header.options & !KNOWN_OPTIONS == 0, "options")?;
        check((1..=MAX_LINKS).contains(&self.links.len()), "link count")?;
        if header.options & NO_SCALING != 0 {
            check(
                self.links.len() == 1,
                "non-scaling filter with several links",
            )?;
        } else {
            check((1..=MAX_EXPANSION).contains(&header.growth), "growth")?;
        }
        if header.arithmetic == Arithmetic::Wrap32 {
            // Only RDB encoding 1 says Wrap32, and it implies these (see rdb::save).
            check(
                header.options == 0 && header.growth == 2,
                "options of a version 1 filter",
            )?;
        }
        let mut items = 0u64;
        let mut bytes = 0u64;
        for link in &self.links {
            items = items.checked_add(link.items).ok_or(corrupt("items"))?;
            bytes = bytes
                .checked_add(link.bytes)
                .ok_or(corrupt("total bytes"))?;
        }
        check(
            self.total_hashes() <= MAX_CHAIN_HASHES,
            "hashes over the chain",
        )?;
        check(items == header.items, "items differ from the links' sum")
    }

    /// Probes of one lookup that misses nowhere: the sum of the links' hashes.
    pub fn total_hashes(&self) -> u64 {
        self.links.iter().map(|link| u64::from(link.hashes)).sum()
    }
}

/// One link: its fields and its bit array. Not `Clone`: a copy allocates, fallibly
/// ([`RbFilter::try_clone`]).
#[derive(Debug, PartialEq)]
pub struct Link {
    shape: LinkShape,
    /// Cached [`LinkShape::modulus`].
    modulus: u64,
    /// Cached [`LinkShape::item_limit`].
    item_limit: u64,
    /// ⌈bytes / 8⌉ words holding the array (see the module documentation).
    words: BitStore,
}

impl Link {
    /// An all-zero link of a validated shape, or the allocation failure as a value.
    pub(crate) fn zeroed(shape: LinkShape) -> Result<Link, LimitError> {
        Ok(Link {
            modulus: shape.modulus(),
            item_limit: shape.item_limit(),
            words: BitStore::zeroed(shape.bytes.div_ceil(8))?,
            shape,
        })
    }

    /// A copy of this link, its array allocated fallibly (a refusal is an error, not an abort).
    fn try_clone(&self) -> Result<Link, LimitError> {
        Ok(Link {
            shape: self.shape,
            modulus: self.modulus,
            item_limit: self.item_limit,
            words: self.words.try_clone()?,
        })
    }

    pub fn shape(&self) -> &LinkShape {
        &self.shape
    }

    /// The whole array as RedisBloom lays it out. On little-endian machines, when the words are
    /// one block, that is their own memory, borrowed; a link in pieces is copied (only
    /// RedisBloom's own RDB value, which tools write, needs the array in one string).
    pub fn array(&self) -> Cow<'_, [u8]> {
        let len = self.shape.bytes as usize;
        #[cfg(target_endian = "little")]
        if let Some(words) = self.words.as_slice() {
            // SAFETY: the words own at least `len` initialised bytes (⌈len / 8⌉ words); u8 has
            // alignment 1 and every bit pattern is a valid u8; the borrow of `self` keeps the
            // words alive and unchanged for the slice's lifetime.
            return Cow::Borrowed(unsafe {
                std::slice::from_raw_parts(words.as_ptr().cast(), len)
            });
        }
        let mut out = vec![0; len];
        self.read_bytes(0, &mut out);
        Cow::Owned(out)
    }

    /// Copies `out.len()` bytes of the array from byte `offset`. Panics outside the array.
    pub fn read_bytes(&self, offset: usize, out: &mut [u8]) {
        assert!(
            offset + out.len() <= self.shape.bytes as usize,
            "read past the link"
        );
        self.words.read_bytes(offset, out);
    }

    /// Overwrites bytes of the array from byte `offset`. Panics outside the array.
    pub(crate) fn write_bytes(&mut self, offset: usize, data: &[u8]) {
        assert!(
            offset + data.len() <= self.shape.bytes as usize,
            "write past the link"
        );
        self.words.write_bytes(offset, data);
    }

    /// The probe positions of `hash` in this link.
    fn positions(&self, hash: RbHash, arithmetic: Arithmetic) -> impl Iterator<Item = u64> {
        let modulus = self.modulus;
        let wrap = arithmetic == Arithmetic::Wrap32 && self.shape.n2 > 31;
        (0..u64::from(self.shape.hashes)).map(move |i| probe(hash, i, modulus, wrap))
    }

    fn contains(&self, hash: RbHash, arithmetic: Arithmetic) -> bool {
        self.positions(hash, arithmetic)
            .all(|x| self.words.word((x >> 6) as usize) & (1 << (x & 63)) != 0)
    }

    fn set(&mut self, hash: RbHash, arithmetic: Arithmetic) {
        for x in self.positions(hash, arithmetic) {
            *self.words.word_mut((x >> 6) as usize) |= 1 << (x & 63);
        }
    }
}

/// What one add operation on a RedisBloom filter did, item by item, as
/// [`AddOutcome`](crate::scalable::AddOutcome) for our filters; filled as the operation goes.
/// The links it pushed are not recorded: they follow from the items by RedisBloom's own
/// deterministic rule, so a replica given the same items pushes the same links
/// ([`crate::replication`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RbAddOutcome {
    /// One entry per processed item, in order: true when it was new (and counted).
    pub added: Vec<bool>,
    /// What stopped the operation at item `added.len()`, if anything did. Never
    /// [`InsertError::Present`], which is recorded as `false` in `added`.
    pub error: Option<InsertError>,
}

impl RbAddOutcome {
    /// Positions (in the batch) of the items that changed the filter.
    pub fn added_positions(&self) -> impl Iterator<Item = usize> + '_ {
        self.added
            .iter()
            .enumerate()
            .filter_map(|(position, &new)| new.then_some(position))
    }
}

/// A RedisBloom filter (see the module documentation for the layout and rules). Not `Clone`:
/// a copy allocates, after a budget admits it ([`try_clone`](Self::try_clone)).
#[derive(Debug, PartialEq)]
pub struct RbFilter {
    header: ChainHeader,
    /// Oldest first; never empty.
    links: Vec<Link>,
}

impl RbFilter {
    /// Assembles a filter from a validated shape and one array per link.
    pub(crate) fn from_parts(header: ChainHeader, links: Vec<Link>) -> RbFilter {
        debug_assert!(!links.is_empty());
        RbFilter { header, links }
    }

    /// A new, empty filter as RedisBloom 2.8.2 creates one (BF.RESERVE, BF.INSERT, or an add to
    /// a missing key): options NOROUND and FORCE64 (and NO_SCALING when `growth` is None), one
    /// link of `capacity` entries at `error_rate`, halved when the filter scales (RedisBloom
    /// tightens every link's error, the first included, so that the sum over links stays under
    /// the rate), after `budget` admits its array. None when RedisBloom could not size it
    /// either.
    pub fn new<B: MemoryBudget + ?Sized>(
        capacity: u64,
        error_rate: f64,
        growth: Option<u32>,
        budget: &mut B,
    ) -> Result<Option<RbFilter>, LimitError> {
        let options = NOROUND | FORCE64 | if growth.is_none() { NO_SCALING } else { 0 };
        let tightening = if growth.is_some() { 0.5 } else { 1.0 };
        let Some(link) = link_shape(capacity, error_rate * tightening, true) else {
            return Ok(None);
        };
        let shape = ChainShape {
            header: ChainHeader {
                items: 0,
                options,
                growth: growth.unwrap_or(2),
                arithmetic: Arithmetic::Wide,
            },
            links: vec![link],
        };
        if link.validate().is_err() || shape.validate().is_err() {
            return Ok(None);
        }
        match RbFilter::zeroed(&shape, budget) {
            Ok(filter) => Ok(Some(filter)),
            Err(DecodeError::Limit(limit)) => Err(limit),
            Err(DecodeError::Corrupt(_)) => Ok(None),
        }
    }

    /// A filter of a validated `shape` with all-zero bit arrays, after `budget` admits their
    /// allocation sizes (charged once, for all links).
    pub(crate) fn zeroed<B: MemoryBudget + ?Sized>(
        shape: &ChainShape,
        budget: &mut B,
    ) -> Result<RbFilter, DecodeError> {
        let allocation = shape.allocated_bytes();
        budget
            .charge(allocation, allocation)
            .map_err(DecodeError::Limit)?;
        let links = shape
            .links
            .iter()
            .map(|link| Link::zeroed(*link))
            .collect::<Result<Vec<_>, LimitError>>()
            .map_err(DecodeError::Limit)?;
        Ok(RbFilter::from_parts(shape.header, links))
    }

    /// A copy of this filter, its arrays allocated after `budget` admits them (COPY).
    pub fn try_clone<B: MemoryBudget + ?Sized>(
        &self,
        budget: &mut B,
    ) -> Result<RbFilter, LimitError> {
        let allocation = self.allocated_bytes();
        budget.charge(allocation, allocation)?;
        let links = self
            .links
            .iter()
            .map(Link::try_clone)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(RbFilter::from_parts(self.header, links))
    }

    pub fn header(&self) -> &ChainHeader {
        &self.header
    }

    pub fn links(&self) -> &[Link] {
        &self.links
    }

    /// The hash function the options select.
    pub fn hashing(&self) -> Hashing {
        if self.header.options & FORCE64 != 0 {
            Hashing::Murmur64
        } else {
            Hashing::Murmur32
        }
    }

    /// Items counted over all links (BF.CARD, "Number of items inserted").
    pub fn items(&self) -> u64 {
        self.header.items
    }

    /// Sum of the links' entries (BF.INFO "Capacity").
    pub fn capacity(&self) -> u64 {
        self.links
            .iter()
            .fold(0u64, |sum, link| sum.saturating_add(link.shape.entries))
    }

    /// Bytes of all bit arrays.
    pub fn bytes(&self) -> u64 {
        self.links.iter().map(|link| link.shape.bytes).sum()
    }

    /// Bytes the allocator hands out for all bit arrays (see [`LinkShape::allocated_bytes`]).
    pub fn allocated_bytes(&self) -> u64 {
        self.allocated_bytes_from(0)
    }

    /// [`allocated_bytes`](Self::allocated_bytes) of the links from index `first` on.
    pub fn allocated_bytes_from(&self, first: usize) -> u64 {
        self.links.iter().skip(first).fold(0u64, |sum, link| {
            sum.saturating_add(link.shape.allocated_bytes())
        })
    }

    /// Bytes the allocator hands out for this filter's own blocks: its links' array and their
    /// bits (the chain's record itself is inline in the key's value).
    pub fn heap_bytes(&self) -> u64 {
        allocation_size(std::mem::size_of_val(self.links()) as u64) + self.allocated_bytes()
    }

    pub fn is_scaling(&self) -> bool {
        self.header.options & NO_SCALING == 0
    }

    /// Hashes `item` under this filter's options.
    pub fn hash(&self, item: &[u8]) -> RbHash {
        RbHash::new(item, self.hashing())
    }

    /// True when `item` may have been added.
    pub fn contains(&self, item: &[u8]) -> bool {
        self.contains_hash(self.hash(item))
    }

    /// [`contains`](Self::contains) for a hashed item: links newest to oldest, as RedisBloom.
    pub fn contains_hash(&self, hash: RbHash) -> bool {
        let arithmetic = self.header.arithmetic;
        self.links
            .iter()
            .rev()
            .any(|link| link.contains(hash, arithmetic))
    }

    /// Adds `item`: Ok(false) when a link already has it, Ok(true) when its bits were set in the
    /// newest link (pushing a link first if that one was full, after `budget` admits it). On
    /// error nothing changed.
    pub fn insert<B: MemoryBudget + ?Sized>(
        &mut self,
        item: &[u8],
        budget: &mut B,
    ) -> Result<bool, InsertError> {
        match self.insert_hash(self.hash(item), budget) {
            Ok(()) => Ok(true),
            Err(InsertError::Present) => Ok(false),
            Err(error) => Err(error),
        }
    }

    /// Adds a hashed item, pushing a link first if the newest is full; Err(Present) when a link
    /// already has it. On error nothing changed.
    fn insert_hash<B: MemoryBudget + ?Sized>(
        &mut self,
        hash: RbHash,
        budget: &mut B,
    ) -> Result<(), InsertError> {
        if self.contains_hash(hash) {
            return Err(InsertError::Present);
        }
        // The chain's count is the links' sum, and the decoders refuse a sum past u64: a chain
        // holding u64::MAX items takes no more, whatever its links could hold (a non-scaling
        // one's only link then holds them all, so it is full).
        let Some(items) = self.header.items.checked_add(1) else {
            return Err(if self.is_scaling() {
                InsertError::CannotGrow
            } else {
                InsertError::NonScalingFull
            });
        };
        let newest = self.links.last().expect("a filter always has a link");
        if newest.shape.items >= newest.item_limit {
            self.grow(budget)?;
        }
        let arithmetic = self.header.arithmetic;
        let newest = self.links.last_mut().expect("a filter always has a link");
        // Below its item limit, so below u64::MAX.
        newest.shape.items += 1;
        newest.set(hash, arithmetic);
        self.header.items = items;
        Ok(())
    }

    /// Looks up items in order, calling `found` with each answer.
    pub fn contains_many<'a>(
        &self,
        items: impl IntoIterator<Item = &'a [u8]>,
        mut found: impl FnMut(bool),
    ) {
        for item in items {
            found(self.contains(item));
        }
    }

    /// Adds items in order, recording each result in `outcome` as it goes; stops at the first
    /// error (as RedisBloom's BF.MADD stops at a full non-scaling filter). One operation:
    /// `budget` is charged for the sum of the links it pushes.
    pub fn insert_many<'a, B: MemoryBudget + ?Sized>(
        &mut self,
        items: impl IntoIterator<Item = &'a [u8]>,
        budget: &mut B,
        outcome: &mut RbAddOutcome,
    ) {
        for item in items {
            match self.insert_hash(self.hash(item), budget) {
                Ok(()) => outcome.added.push(true),
                Err(InsertError::Present) => outcome.added.push(false),
                Err(error) => {
                    outcome.error = Some(error);
                    return;
                }
            }
        }
    }

    fn newest(&self) -> &LinkShape {
        &self.links.last().expect("a filter always has a link").shape
    }

    /// The shape of the link this filter would push next, by RedisBloom 2.8.2's rule.
    pub fn next_link(&self) -> Result<LinkShape, InsertError> {
        if !self.is_scaling() {
            return Err(InsertError::NonScalingFull);
        }
        if self.links.len() >= MAX_LINKS {
            return Err(InsertError::CannotGrow);
        }
        let newest = self.newest();
        let entries = newest
            .entries
            .checked_mul(u64::from(self.header.growth))
            .ok_or(InsertError::CannotGrow)?;
        let link = link_shape(
            entries,
            newest.error * 0.5,
            self.header.options & NOROUND != 0,
        )
        .ok_or(InsertError::CannotGrow)?;
        // What growth makes, the decoders must take back: the new link passes their checks, and
        // so does the chain with it (its probes included).
        link.validate().map_err(|_| InsertError::CannotGrow)?;
        let hashes = self
            .links
            .iter()
            .map(|link| u64::from(link.shape.hashes))
            .sum::<u64>()
            + u64::from(link.hashes);
        if hashes > MAX_CHAIN_HASHES {
            return Err(InsertError::CannotGrow);
        }
        Ok(link)
    }

    /// Bytes of the array of the link this filter would push next; None when it cannot grow.
    /// A budget is charged its allocation size ([`LinkShape::allocated_bytes`]).
    pub fn next_link_bytes(&self) -> Option<u64> {
        self.next_link().ok().map(|link| link.bytes)
    }

    /// Pushes the next link, if `budget` admits its allocation size and the system gives the
    /// memory.
    fn grow<B: MemoryBudget + ?Sized>(&mut self, budget: &mut B) -> Result<(), InsertError> {
        let shape = self.next_link()?;
        let allocation = shape.allocated_bytes();
        budget
            .charge(
                self.allocated_bytes().saturating_add(allocation),
                allocation,
            )
            .map_err(InsertError::Limit)?;
        let link = Link::zeroed(shape).map_err(InsertError::Limit)?;
        self.links.push(link);
        Ok(())
    }

    /// Writes a SCANDUMP data chunk at byte `offset` of all arrays laid end to end. RedisBloom
    /// refuses a chunk that does not lie within one link, and so does this.
    pub fn write_bits(&mut self, offset: u64, data: &[u8]) -> Result<(), ChunkError> {
        let (link, start) = self.locate(offset).ok_or(ChunkError::Offset)?;
        let link = &mut self.links[link];
        if data.len() > link.shape.bytes as usize - start {
            return Err(ChunkError::TooBig);
        }
        link.write_bytes(start, data);
        Ok(())
    }

    /// The byte ranges `(offset, length)` of all arrays end to end, each within one link and at
    /// most `piece` long: how the arrays are saved and sent.
    pub fn pieces(&self, piece: u64) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        let mut start = 0;
        for link in &self.links {
            out.extend(
                crate::encoding::pieces(link.shape.bytes, piece)
                    .map(|(offset, len)| (start + offset, len)),
            );
            start += link.shape.bytes;
        }
        out
    }

    /// Copies `out.len()` bytes of the arrays end to end from byte `offset`; the range must lie
    /// within one link (see [`pieces`](Self::pieces)).
    pub fn read_bits(&self, offset: u64, out: &mut [u8]) -> Result<(), ChunkError> {
        let (link, start) = self.locate(offset).ok_or(ChunkError::Offset)?;
        let link = &self.links[link];
        if out.len() > link.shape.bytes as usize - start {
            return Err(ChunkError::TooBig);
        }
        link.read_bytes(start, out);
        Ok(())
    }

    /// The link holding byte `offset` of all arrays end to end, and the offset within it.
    pub(crate) fn locate(&self, mut offset: u64) -> Option<(usize, usize)> {
        for (index, link) in self.links.iter().enumerate() {
            if offset < link.shape.bytes {
                return Some((index, offset as usize));
            }
            offset -= link.shape.bytes;
        }
        None
    }
}

/// A fresh link for `entries` items at `error`, or None when the sizes cannot be represented.
fn link_shape(entries: u64, error: f64, noround: bool) -> Option<LinkShape> {
    if !(error > 0.0 && error < 1.0) {
        return None;
    }
    let bpe = -(error.ln() / LN2_SQUARED);
    let hashes = (std::f64::consts::LN_2 * bpe).ceil();
    if !(1.0..=f64::from(MAX_HASHES)).contains(&hashes) {
        return None;
    }
    let wanted = entries as f64 * bpe;
    // Finite and positive (error is in (0, 1), entries ≥ 1 as u64). 2^64 as a double: anything
    // at or past it has no u64 bit count.
    if wanted >= 18_446_744_073_709_551_616.0 {
        return None;
    }
    let (raw_bits, n2, entries) = if noround {
        (wanted as u64, 0, entries)
    } else {
        // ⌊log2 wanted⌋ + 1 (C's logb + 1) for wanted ≥ 1, from the exponent field.
        if wanted < 1.0 {
            return None;
        }
        let n2 = ((wanted.to_bits() >> 52) & 0x7ff) as u32 - 1023 + 1;
        if n2 >= 64 {
            return None;
        }
        let modulus = 1u64 << n2;
        (modulus, n2 as u8, (modulus as f64 / bpe) as u64)
    };
    let words = raw_bits.div_ceil(64).max(1);
    let bytes = words.checked_mul(8)?;
    Some(LinkShape {
        entries,
        error,
        hashes: hashes as u32,
        bpe,
        bits: bytes.checked_mul(8)?,
        n2,
        bytes,
        items: 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_links_as_redisbloom_2_8_2() {
        // Fields read from RedisBloom 2.8.2's SCANDUMP headers.
        let link = link_shape(100, 0.005, true).unwrap();
        assert_eq!((link.bytes, link.bits, link.hashes), (144, 1152, 8));
        assert_eq!(link.bpe, 11.027753418256411);
        let link = link_shape(1, 0.99, true).unwrap();
        assert_eq!((link.bytes, link.bits, link.hashes), (8, 64, 1));
        let link = link_shape(167, 0.01, true).unwrap();
        assert_eq!((link.bytes, link.bits), (200, 1600));
        let link = link_shape(40, 0.00125, false).unwrap();
        assert_eq!(
            (link.bytes, link.bits, link.n2, link.entries),
            (128, 1024, 10, 73)
        );
        let link = link_shape(1, 0.45, false).unwrap();
        assert_eq!(
            (link.bytes, link.bits, link.n2, link.entries),
            (8, 64, 1, 1)
        );
        assert_eq!(link.modulus(), 2);
    }

    #[test]
    fn modulus_is_the_power_of_two_or_the_bits() {
        let mut link = link_shape(100, 0.01, true).unwrap();
        assert_eq!(link.modulus(), link.bits);
        link.bits = 0;
        assert_eq!(link.modulus(), link.bytes * 8);
        link.n2 = 5;
        assert_eq!(link.modulus(), 32);
    }

    #[test]
    fn refuses_unrepresentable_links() {
        assert_eq!(link_shape(1, 0.0, true), None);
        assert_eq!(link_shape(u64::MAX, 1e-300, true), None);
        assert_eq!(link_shape(u64::MAX / 2, 1e-10, false), None);
    }
}
