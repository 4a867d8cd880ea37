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
    /// use rustbloom_core::ItemHash;
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

/// Odd multipliers for the in-block positions of a blocked layer: position i is the top 9 bits
/// of `h2 · M[i]` (Dietzfelbinger's multiply-shift hashing), so one 64-bit hash yields up to 16
/// nearly independent positions in a 512-bit block with one multiplication each.
const BLOCK_MULTIPLIERS: [u64; 16] = [
    0x9e37_79b9_7f4a_7c15,
    0xbf58_476d_1ce4_e5b9,
    0x94d0_49bb_1331_11eb,
    0xd6e8_feb8_6659_fd93,
    0xa076_1d64_78bd_642f,
    0xe703_7ed1_a0b4_28db,
    0x8ebc_6af0_9c88_c6e3,
    0x5899_65cc_7537_4cc3,
    0x1d8e_4e27_c47d_124f,
    0xff51_afd7_ed55_8ccd,
    0xc4ce_b9fe_1a85_ec53,
    0x87c3_7b91_1142_53d5,
    0x4cf5_ad43_2745_937f,
    0xc2b2_ae3d_27d4_eb4f,
    0x1656_67b1_9e37_79f9,
    0x27d4_eb2f_1656_67c5,
];

impl ItemHash {
    /// For a blocked layer of `bits` bits (a multiple of 512): the index of the item's 512-bit
    /// block, chosen from h1 by multiply-shift, and its `num_hashes` (≤ 16) bit positions inside
    /// the block, from h2.
    #[inline]
    pub fn block_positions(&self, bits: u64, num_hashes: u32) -> (u64, impl Iterator<Item = u64>) {
        let blocks = bits / 512;
        let block = ((u128::from(self.h1) * u128::from(blocks)) >> 64) as u64;
        let h2 = self.h2;
        let positions = BLOCK_MULTIPLIERS[..num_hashes as usize]
            .iter()
            .map(move |&m| h2.wrapping_mul(m) >> 55);
        (block, positions)
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
    fn block_positions_stay_in_their_block_and_spread() {
        let bits = 512 * 1000u64;
        let mut per_bit = [0u32; 512];
        let mut per_block = vec![0u32; 1000];
        for i in 0..50_000u32 {
            let (block, positions) = ItemHash::new(&i.to_le_bytes(), 3).block_positions(bits, 8);
            per_block[block as usize] += 1;
            for p in positions {
                per_bit[p as usize] += 1;
            }
        }
        // 50 items per block and 781 probes per bit position on average.
        assert!(
            per_block.iter().all(|&n| (15..=95).contains(&n)),
            "{per_block:?}"
        );
        assert!(
            per_bit.iter().all(|&n| (600..=980).contains(&n)),
            "{per_bit:?}"
        );
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
