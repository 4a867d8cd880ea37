//! The two item hashes of RedisBloom: MurmurHash64A and MurmurHash2 (32-bit).
//!
//! Both are Austin Appleby's public-domain MurmurHash2 family (2008), as RedisBloom vendors it
//! under `deps/murmur2`. A filter with the FORCE64 option (every filter since v1.1.1) hashes an
//! item twice with the 64-bit variant, the second time seeded with the first result; older
//! filters do the same with the 32-bit variant (see [`super::hash::RbHash`]).
//!
//! Both read the input in little-endian words (RedisBloom reads native words and only ever ran on
//! little-endian machines), then fold the 0–7 trailing bytes in, then mix the result:
//!
//! ```text
//!   item bytes:  | word 0 | word 1 | ... | word n-1 | tail (len mod w bytes) |
//!                  w = 8 bytes (64A) or 4 bytes (MurmurHash2), each read little-endian
//! ```

/// MurmurHash64A's multiplier (also its default seed in RedisBloom).
pub const M64: u64 = 0xc6a4_a793_5bd1_e995;
const R64: u32 = 47;
const M32: u32 = 0x5bd1_e995;
const R32: u32 = 24;

/// MurmurHash64A of `data` under `seed`.
pub fn murmur64a(data: &[u8], seed: u64) -> u64 {
    let mut h = seed ^ (data.len() as u64).wrapping_mul(M64);
    let mut words = data.chunks_exact(8);
    for word in &mut words {
        let mut k = u64::from_le_bytes(word.try_into().expect("chunks of 8"));
        k = k.wrapping_mul(M64);
        k ^= k >> R64;
        k = k.wrapping_mul(M64);
        h ^= k;
        h = h.wrapping_mul(M64);
    }
    let tail = words.remainder();
    if !tail.is_empty() {
        // The tail's bytes, little-endian, as the reference's fall-through switch folds them.
        h ^= tail
            .iter()
            .rev()
            .fold(0u64, |acc, &byte| (acc << 8) | u64::from(byte));
        h = h.wrapping_mul(M64);
    }
    h ^= h >> R64;
    h = h.wrapping_mul(M64);
    h ^ (h >> R64)
}

/// MurmurHash2 (32-bit) of `data` under `seed`.
pub fn murmur2(data: &[u8], seed: u32) -> u32 {
    // The reference mixes the length in as a C `int`: its low 32 bits.
    let mut h = seed ^ data.len() as u32;
    let mut words = data.chunks_exact(4);
    for word in &mut words {
        let mut k = u32::from_le_bytes(word.try_into().expect("chunks of 4"));
        k = k.wrapping_mul(M32);
        k ^= k >> R32;
        k = k.wrapping_mul(M32);
        h = h.wrapping_mul(M32);
        h ^= k;
    }
    let tail = words.remainder();
    if !tail.is_empty() {
        h ^= tail
            .iter()
            .rev()
            .fold(0u32, |acc, &byte| (acc << 8) | u32::from(byte));
        h = h.wrapping_mul(M32);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M32);
    h ^ (h >> 15)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Known answers read back from the bits RedisBloom 2.8.2 set for these items
    // (core/tests/fixtures/redisbloom/kat.txt): every length class of the tail is covered.
    #[test]
    fn murmur64a_known_answers() {
        let cases: [(&[u8], u64, u64); 6] = [
            (b"", 1923352212695860590, 13537199645396948295),
            (b"a", 4797124023827371274, 9122976111997029393),
            (b"hello", 6603887449968207513, 12093380876958745252),
            (b"hello world", 13468290891533438433, 11944398893268354102),
            (
                b"0123456789abcdef",
                8302806268764335087,
                3854526630241921152,
            ),
            (
                b"\xff\xff\xff\xff\xff\xff\xff\xff\xff",
                18313623290114924839,
                16163977870011252593,
            ),
        ];
        for (item, a, b) in cases {
            assert_eq!(murmur64a(item, M64), a, "{item:?}");
            assert_eq!(murmur64a(item, a), b, "{item:?}");
        }
        assert_eq!(murmur64a(b"", 0), 0);
    }

    #[test]
    fn murmur2_known_answers() {
        let cases: [(&[u8], u32, u32); 6] = [
            (b"", 275646681, 1164808327),
            (b"a", 2731586172, 775350452),
            (b"ab", 316155434, 2276358282),
            (b"abc", 479470107, 149075221),
            (b"abcd", 2971317748, 2006379164),
            (b"hello world", 1221641059, 1991179706),
        ];
        for (item, a, b) in cases {
            assert_eq!(murmur2(item, 0x9747_b28c), a, "{item:?}");
            assert_eq!(murmur2(item, a), b, "{item:?}");
        }
        assert_eq!(murmur2(b"", 0), 0);
    }
}
