//! Item hashing: one xxh3-128 per item, k probe positions by double hashing.

use xxhash_rust::xxh3::xxh3_128_with_seed;

/// The two 64-bit halves of an item's xxh3-128 hash under a filter's seed.
///
/// Computed once per item and shared by every layer of a filter (layers differ only in their
/// size and number of hashes, so the probe sequence is re-derived cheaply per layer).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ItemHash {
    h1: u64,
    h2: u64,
}

impl ItemHash {
    /// Hashes `item` (any bytes, including none) under `seed`.
    ///
    /// ```
    /// use rustbloom::bloom::ItemHash;
    /// assert_eq!(ItemHash::new(b"apple", 7), ItemHash::new(b"apple", 7));
    /// assert_ne!(ItemHash::new(b"apple", 7), ItemHash::new(b"apple", 8));
    /// ```
    #[inline]
    pub fn new(item: &[u8], seed: u64) -> Self {
        let h = xxh3_128_with_seed(item, seed);
        // h2 is forced odd so that the sequence h1 + i·h2 never stalls on one value even if the
        // upper half of the hash happened to be zero.
        ItemHash {
            h1: h as u64,
            h2: ((h >> 64) as u64) | 1,
        }
    }

    /// The `num_hashes` bit positions of this item in a layer of `bits` bits, each in `[0, bits)`.
    ///
    /// Kirsch–Mitzenmacher double hashing, `g_i = h1 + i·h2 (mod 2^64)`, reduced to the layer by
    /// Lemire's multiply-shift `(g_i · bits) >> 64`, which is unbiased enough for any `bits` far
    /// below 2^64 and costs one multiplication instead of a division.
    #[inline]
    pub fn positions(&self, bits: u64, num_hashes: u32) -> impl Iterator<Item = u64> {
        let (h1, h2) = (self.h1, self.h2);
        (0..u64::from(num_hashes)).map(move |i| {
            let g = h1.wrapping_add(i.wrapping_mul(h2));
            ((u128::from(g) * u128::from(bits)) >> 64) as u64
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_stay_in_range_for_odd_sizes() {
        for bits in [64u64, 65, 1000, 1 << 33, u64::MAX / 3] {
            for seed in 0..50u64 {
                let h = ItemHash::new(&seed.to_le_bytes(), seed);
                assert!(h.positions(bits, 30).all(|p| p < bits));
            }
        }
    }

    #[test]
    fn positions_spread_over_the_whole_range() {
        // Every eighth of a layer should receive about an eighth of the probes.
        let bits = 1_000_003u64;
        let mut buckets = [0u32; 8];
        for i in 0..20_000u32 {
            for p in ItemHash::new(&i.to_le_bytes(), 1).positions(bits, 7) {
                buckets[(p * 8 / bits) as usize] += 1;
            }
        }
        let expected = 20_000.0 * 7.0 / 8.0;
        for b in buckets {
            assert!(
                (f64::from(b) - expected).abs() < expected * 0.05,
                "{buckets:?}"
            );
        }
    }
}
