//! SipHash-1-3 (Aumasson and Bernstein, "SipHash: a fast short-input PRF", 2012, with one
//! compression and three finalisation rounds) of an item as the `bloomfilter` crate hashes it.
//!
//! That crate hashes a `[u8]` item through Rust's `Hash` for slices: the length as a `usize`
//! (8 bytes, little-endian on every platform valkey-bloom runs on), then the bytes. The length
//! prefix is exactly one SipHash block, so the message is `len ‖ item` processed block by
//! block with no buffering. Written here rather than taken from a crate because it is 40 lines,
//! this exact message shape is all we need, and the tests check it against the crate itself.

/// The two 64-bit keys of one hasher: the little-endian halves of a 16-byte key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SipKeys {
    pub k0: u64,
    pub k1: u64,
}

impl SipKeys {
    /// Keys from 16 key bytes, as the crate reads them.
    pub fn from_bytes(key: &[u8; 16]) -> SipKeys {
        let (k0, k1) = key.split_at(8);
        SipKeys {
            k0: u64::from_le_bytes(k0.try_into().expect("8 bytes")),
            k1: u64::from_le_bytes(k1.try_into().expect("8 bytes")),
        }
    }
}

struct State {
    v0: u64,
    v1: u64,
    v2: u64,
    v3: u64,
}

impl State {
    fn new(keys: SipKeys) -> State {
        State {
            v0: keys.k0 ^ 0x736f_6d65_7073_6575,
            v1: keys.k1 ^ 0x646f_7261_6e64_6f6d,
            v2: keys.k0 ^ 0x6c79_6765_6e65_7261,
            v3: keys.k1 ^ 0x7465_6462_7974_6573,
        }
    }

    #[inline(always)]
    fn round(&mut self) {
        self.v0 = self.v0.wrapping_add(self.v1);
        self.v1 = self.v1.rotate_left(13) ^ self.v0;
        self.v0 = self.v0.rotate_left(32);
        self.v2 = self.v2.wrapping_add(self.v3);
        self.v3 = self.v3.rotate_left(16) ^ self.v2;
        self.v0 = self.v0.wrapping_add(self.v3);
        self.v3 = self.v3.rotate_left(21) ^ self.v0;
        self.v2 = self.v2.wrapping_add(self.v1);
        self.v1 = self.v1.rotate_left(17) ^ self.v2;
        self.v2 = self.v2.rotate_left(32);
    }

    #[inline(always)]
    fn compress(&mut self, block: u64) {
        self.v3 ^= block;
        self.round();
        self.v0 ^= block;
    }
}

/// SipHash-1-3 under `keys` of `item.len()` as 8 little-endian bytes followed by `item`.
pub fn hash_item(keys: SipKeys, item: &[u8]) -> u64 {
    let mut state = State::new(keys);
    state.compress(item.len() as u64);
    let mut blocks = item.chunks_exact(8);
    for block in &mut blocks {
        state.compress(u64::from_le_bytes(block.try_into().expect("8 bytes")));
    }
    let tail = blocks
        .remainder()
        .iter()
        .rev()
        .fold(0u64, |tail, &byte| (tail << 8) | u64::from(byte));
    // The message's length in bytes (the 8-byte prefix included), modulo 256, tops the last block.
    let total = (item.len() as u64).wrapping_add(8);
    state.compress(((total & 0xff) << 56) | tail);
    state.v2 ^= 0xff;
    state.round();
    state.round();
    state.round();
    state.v0 ^ state.v1 ^ state.v2 ^ state.v3
}

#[cfg(test)]
mod tests {
    use super::*;
    use bloomfilter::reexports::siphasher::sip::SipHasher13;
    use std::hash::{Hash, Hasher};

    /// What the `bloomfilter` crate computes: its hasher, fed through `Hash` for `[u8]`.
    fn crate_hash(key: &[u8; 16], item: &[u8]) -> u64 {
        let mut hasher = SipHasher13::new_with_key(key);
        item.hash(&mut hasher);
        hasher.finish()
    }

    #[test]
    fn equals_the_crates_hash_for_every_length_and_key() {
        let keys: [[u8; 16]; 3] = [
            [0; 16],
            core::array::from_fn(|i| i as u8),
            core::array::from_fn(|i| 0xf0 ^ (i as u8).wrapping_mul(37)),
        ];
        let data: Vec<u8> = (0..300u32).map(|i| (i * 131 % 251) as u8).collect();
        for key in &keys {
            for len in 0..data.len() {
                let item = &data[..len];
                assert_eq!(
                    hash_item(SipKeys::from_bytes(key), item),
                    crate_hash(key, item),
                    "length {len}"
                );
            }
        }
    }
}
