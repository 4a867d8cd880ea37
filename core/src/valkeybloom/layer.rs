//! One filter of a valkey-bloom object: a `bloomfilter` crate bitmap, probed as that crate
//! probes it.
//!
//! ```text
//!   bitmap (the crate's):  | byte 0 | byte 1 | ... | byte bytes-1 |
//!   bit x is               byte[x / 8] & (1 << (x % 8))         (least significant bit first)
//!   held here as words:    word w = bytes 8w .. 8w+7, little-endian: bit x is bit x % 64 of
//!                          word x / 64, the same bit (as a RedisBloom link, see
//!                          crate::redisbloom::link)
//!   probe i of an item:    g_0 = h0,  g_1 = h1,  g_i = (h0 + i·h1 mod 2^64) mod P  (i ≥ 2)
//!                          x_i = g_i mod (8 · bytes)
//!   P = 2^64 − 59, the largest prime below 2^64 (the crate's constant)
//! ```
//!
//! `(h0, h1)` are the SipHash-1-3 of the item under the two halves of the seed
//! ([`VbHash`]), computed once per item and shared by all layers (they share the seed).

use super::shape::LayerShape;
use super::siphash::{hash_item, SipKeys};
use crate::bits::BitStore;
use crate::budget::LimitError;
use crate::relocate::Walk;

/// The largest prime below 2^64, by which the crate reduces every probe from the third on.
const LARGEST_U64_PRIME: u64 = 0xFFFF_FFFF_FFFF_FFC5;

/// The two hashes of an item from which every probe follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VbHash {
    pub h0: u64,
    pub h1: u64,
}

impl VbHash {
    /// Hashes `item` under the keys of a seed.
    pub fn new(keys: &[SipKeys; 2], item: &[u8]) -> VbHash {
        VbHash {
            h0: hash_item(keys[0], item),
            h1: hash_item(keys[1], item),
        }
    }

    /// Probe `i` before its reduction to the bitmap.
    fn probe(&self, i: u32) -> u64 {
        match i {
            0 => self.h0,
            1 => self.h1,
            _ => self.h0.wrapping_add(u64::from(i).wrapping_mul(self.h1)) % LARGEST_U64_PRIME,
        }
    }
}

/// One layer: its fields and its bitmap. Not `Clone`: a copy allocates, fallibly.
#[derive(Debug, PartialEq)]
pub struct VbLayer {
    shape: LayerShape,
    /// ⌈bytes / 8⌉ words (the padding of the last word stays zero and is never encoded).
    words: BitStore,
}

impl VbLayer {
    /// Offers the bitmap's blocks to a defrag walk ([`crate::relocate`]).
    pub(crate) fn relocate(&mut self, walk: &mut Walk) {
        self.words.relocate(walk);
    }

    /// An all-zero layer of a validated shape, or the allocation failure as a value.
    pub(crate) fn zeroed(shape: LayerShape) -> Result<VbLayer, LimitError> {
        Ok(VbLayer {
            words: BitStore::zeroed(shape.bytes.div_ceil(8))?,
            shape,
        })
    }

    pub(super) fn try_clone(&self) -> Result<VbLayer, LimitError> {
        Ok(VbLayer {
            shape: self.shape,
            words: self.words.try_clone()?,
        })
    }

    pub fn shape(&self) -> &LayerShape {
        &self.shape
    }

    /// The positions of `hash` in this layer.
    fn positions(&self, hash: VbHash) -> impl Iterator<Item = u64> {
        let bits = self.shape.bits();
        (0..self.shape.hashes).map(move |i| hash.probe(i) % bits)
    }

    pub(super) fn contains(&self, hash: VbHash) -> bool {
        self.positions(hash)
            .all(|x| self.words.word((x >> 6) as usize) & (1 << (x & 63)) != 0)
    }

    /// Sets the bits of `hash` and counts one more item; only on a layer below its capacity.
    pub(super) fn add(&mut self, hash: VbHash) {
        for x in self.positions(hash) {
            *self.words.word_mut((x >> 6) as usize) |= 1 << (x & 63);
        }
        // Below its capacity, so below u64::MAX.
        self.shape.items += 1;
    }

    pub(super) fn is_full(&self) -> bool {
        self.shape.items >= self.shape.capacity
    }

    /// Copies `out.len()` bytes of the bitmap from byte `offset`. Panics outside it.
    pub fn read_bytes(&self, offset: usize, out: &mut [u8]) {
        assert!(
            offset + out.len() <= self.shape.bytes as usize,
            "read past the layer"
        );
        self.words.read_bytes(offset, out);
    }

    /// Overwrites bytes of the bitmap from byte `offset`. Panics outside it.
    pub(crate) fn write_bytes(&mut self, offset: usize, data: &[u8]) {
        assert!(
            offset + data.len() <= self.shape.bytes as usize,
            "write past the layer"
        );
        self.words.write_bytes(offset, data);
    }

    /// The bitmap's bytes `offset .. offset + len` without a copy, when they lie in one block.
    pub(crate) fn bytes_in_one_block(&self, offset: usize, len: usize) -> Option<&[u8]> {
        self.words.bytes_in_one_block(offset, len)
    }
}
