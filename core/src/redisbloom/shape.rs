//! The stored fields of a RedisBloom filter before its bit arrays are allocated: the options,
//! the limits a decoder holds them to, one link's shape ([`LinkShape`]) and the chain's
//! ([`ChainShape`]), and how RedisBloom sizes a new link.
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
//! (the fixtures compare every stored bpe). The core's portable `ln` (in the private `math`
//! module) would differ in the last bits; exactness with RedisBloom matters more here than sameness across
//! C libraries, which for a replica of a migrated filter only matters if primary and replica
//! run different ones.

use crate::bits;
use crate::encoding::{check, DecodeError};
use crate::scalable::MAX_EXPANSION;

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
    /// ([`bits::allocated_bytes`]). What a [`MemoryBudget`](crate::MemoryBudget) is charged.
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

/// A fresh link for `entries` items at `error` (RedisBloom's rule, in the module documentation),, or None when the sizes cannot be represented.
pub(crate) fn link_shape(entries: u64, error: f64, noround: bool) -> Option<LinkShape> {
    if !(error > 0.0 && error < 1.0) {
        return None;
    }
    let bpe = bits_per_entry(error);
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
