//! How RedisBloom hashes an item and derives its probe positions in a link.
//!
//! An item is hashed twice with one of RedisBloom's MurmurHash variants ([`super::murmur`]), the
//! second time seeded with the first result, into the pair `(a, b)` ([`RbHash`]). Probe i of a
//! link is `x_i = ((a + i·b) mod 2^64) mod M` (M: the link's modulus, see
//! [`LinkShape::modulus`](super::shape::LinkShape::modulus)); the pair is computed once per item
//! and shared by all links. Unrelated to the core's own [`crate::hash::ItemHash`] (xxh3): a
//! migrated filter keeps the positions RedisBloom set.

use super::murmur::{murmur2, murmur64a, M64};

/// Seed of the first 32-bit hash of an item (the second is seeded with the first).
const SEED32: u32 = 0x9747_b28c;

/// How a filter derives probe positions from an item.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hashing {
    /// MurmurHash64A twice (the FORCE64 option).
    Murmur64,
    /// MurmurHash2 (32-bit) twice.
    Murmur32,
}

/// RedisBloom's two hashes of an item, from which every probe position follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RbHash {
    pub a: u64,
    pub b: u64,
}

impl RbHash {
    /// Hashes `item` as RedisBloom does under `hashing`.
    pub fn new(item: &[u8], hashing: Hashing) -> RbHash {
        match hashing {
            Hashing::Murmur64 => {
                let a = murmur64a(item, M64);
                RbHash {
                    a,
                    b: murmur64a(item, a),
                }
            }
            Hashing::Murmur32 => {
                let a = murmur2(item, SEED32);
                RbHash {
                    a: u64::from(a),
                    b: u64::from(murmur2(item, a)),
                }
            }
        }
    }
}

/// Probe `i` of `hash` in a link of modulus `modulus`; `wrap` sums in 32 bits (see
/// [`Arithmetic::Wrap32`](super::shape::Arithmetic::Wrap32)).
pub(super) fn probe(hash: RbHash, i: u64, modulus: u64, wrap: bool) -> u64 {
    let sum = hash.a.wrapping_add(i.wrapping_mul(hash.b));
    let sum = if wrap { sum & 0xffff_ffff } else { sum };
    sum % modulus
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_1_sums_wrap_at_2_32_in_big_links_only() {
        let hash = RbHash {
            a: 0xffff_fff0,
            b: 0x20,
        };
        assert_eq!(probe(hash, 1, 1 << 40, false), 0x1_0000_0010);
        assert_eq!(probe(hash, 1, 1 << 40, true), 0x10);
        assert_eq!(probe(hash, 3, 1000, false), (0xffff_fff0u64 + 0x60) % 1000);
        // The 64-bit sum wraps at 2^64 in every version.
        let hash = RbHash { a: u64::MAX, b: 2 };
        assert_eq!(probe(hash, 1, 1 << 40, false), 1);
    }
}
