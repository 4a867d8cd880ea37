//! Item hashing: one xxh3-128 per item; k probe positions by double hashing (classic layout), or
//! h lines and k/h positions in each by multiply-shift (layouts in lines, see [`crate`]).

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

/// Odd multipliers for the positions inside a line: probe i is the top 9 bits of `h · M[i]`
/// (Dietzfelbinger's multiply-shift hashing), so one 64-bit value yields up to 16 nearly
/// independent positions in a 512-bit line with one multiplication each.
pub(crate) const BLOCK_MULTIPLIERS: [u64; 16] = [
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

/// Per line j of an item, the odd multiplier applied to h1 before the line is picked from it by
/// multiply-shift, and the odd multiplier applied to h2 before the in-line positions are: a
/// different multiply-shift hash per line, so two items that share one line are no likelier to
/// share another. Line 0 uses 1 and 1, which makes a one-line layout exactly the blocked layout
/// of format version 1 (block `(h1·B) >> 64`, positions `(h2·M[i]) >> 55`).
const LINE_MULTIPLIERS: [(u64, u64); 4] = [
    (1, 1),
    (0xd1b5_4a32_d192_ed03, 0xaef1_7502_108e_f2d9),
    (0xdb4f_0b91_75ae_2165, 0x8cb9_2ba7_2f3d_8dd7),
    (0x9fb2_1c65_1e98_df25, 0xf135_7aea_2e62_a9c5),
];

impl ItemHash {
    /// For a layout in lines: the index of the item's line `j` (< 4) among `lines` 512-bit lines.
    #[inline]
    pub fn line(&self, j: usize, lines: u64) -> u64 {
        let x = self.h1.wrapping_mul(LINE_MULTIPLIERS[j].0);
        ((u128::from(x) * u128::from(lines)) >> 64) as u64
    }

    /// For a layout in lines: the bit positions (< 512) of the item's `per_line` (≤ 16) probes in
    /// its line `j` (< 4), the bits [`line_mask`](Self::line_mask) sets. Testing and setting them
    /// one by one on the line costs a multiplication, a shift and one word access each, with no
    /// mask to build in memory first.
    #[inline]
    pub fn line_probes(&self, j: usize, per_line: u32) -> impl Iterator<Item = u32> {
        let h = self.line_seed(j);
        BLOCK_MULTIPLIERS[..per_line as usize]
            .iter()
            .map(move |&m| (h.wrapping_mul(m) >> 55) as u32)
    }

    /// For a layout in lines: the value whose products with [`BLOCK_MULTIPLIERS`] place the
    /// item's probes in its line `j` (< 4), probe i at the top 9 bits of `seed · M[i]`.
    #[inline(always)]
    pub(crate) fn line_seed(&self, j: usize) -> u64 {
        self.h2.wrapping_mul(LINE_MULTIPLIERS[j].1)
    }

    /// For a layout in lines: the item's `per_line` (≤ 16) probes in its line `j` (< 4), as a
    /// 512-bit mask of 8 words (bit p of the line is bit p % 64 of word p / 64). Testing or
    /// setting a line is then 8 word operations without branches.
    #[inline]
    pub fn line_mask(&self, j: usize, per_line: u32) -> [u64; 8] {
        let h = self.line_seed(j);
        let mut mask = [0u64; 8];
        for &m in &BLOCK_MULTIPLIERS[..per_line as usize] {
            let p = h.wrapping_mul(m) >> 55;
            mask[(p / 64) as usize] |= 1 << (p % 64);
        }
        mask
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
    fn lines_and_their_bits_spread() {
        for j in 0..4 {
            let mut per_bit = [0u32; 512];
            let mut per_line = vec![0u32; 1000];
            for i in 0..50_000u32 {
                let hash = ItemHash::new(&i.to_le_bytes(), 3);
                per_line[hash.line(j, 1000) as usize] += 1;
                let mask = hash.line_mask(j, 8);
                let set: u32 = mask.iter().map(|w| w.count_ones()).sum();
                assert!((6..=8).contains(&set), "{set}");
                for p in 0..512 {
                    per_bit[p] += (mask[p / 64] >> (p % 64)) as u32 & 1;
                }
            }
            // 50 items per line and ~780 probes per bit position on average.
            assert!(
                per_line.iter().all(|&n| (15..=95).contains(&n)),
                "{per_line:?}"
            );
            assert!(
                per_bit.iter().all(|&n| (600..=980).contains(&n)),
                "{per_bit:?}"
            );
        }
    }

    #[test]
    fn line_probes_are_the_mask_bits() {
        for i in 0..2000u32 {
            let hash = ItemHash::new(&i.to_le_bytes(), 11);
            for j in 0..4 {
                for per_line in [1, 7, 8, 16] {
                    let mut mask = [0u64; 8];
                    for p in hash.line_probes(j, per_line) {
                        assert!(p < 512);
                        mask[(p / 64) as usize] |= 1 << (p % 64);
                    }
                    assert_eq!(mask, hash.line_mask(j, per_line));
                }
            }
        }
    }

    #[test]
    fn lines_of_one_item_are_independent() {
        // Items that share line 0 land anywhere for line 1: among 1000 lines, items whose line 0
        // is line 7 have their line 1 spread like everyone's.
        let mut shared = 0;
        let mut same_second = 0;
        for i in 0..400_000u32 {
            let hash = ItemHash::new(&i.to_le_bytes(), 5);
            if hash.line(0, 1000) == 7 {
                shared += 1;
                same_second += (hash.line(1, 1000) == 7) as u32 + (hash.line(2, 1000) == 8) as u32;
            }
        }
        assert!(shared > 300, "{shared}");
        assert!(same_second <= 5, "{same_second} of {shared}");
    }

    #[test]
    fn line_zero_is_the_version_1_block() {
        // The blocked layout of format version 1: block (h1·B) >> 64, positions (h2·M[i]) >> 55.
        let hash = ItemHash::new(b"golden", 99);
        let blocks = 19_661u64;
        let block = ((u128::from(hash.h1) * u128::from(blocks)) >> 64) as u64;
        assert_eq!(hash.line(0, blocks), block);
        let mut mask = [0u64; 8];
        for m in &BLOCK_MULTIPLIERS[..7] {
            let p = hash.h2.wrapping_mul(*m) >> 55;
            mask[(p / 64) as usize] |= 1 << (p % 64);
        }
        assert_eq!(hash.line_mask(0, 7), mask);
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
