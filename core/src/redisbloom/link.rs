//! One link of a RedisBloom chain: its stored fields and its bit array, probed as RedisBloom
//! probes it.
//!
//! ```text
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

use std::borrow::Cow;

use super::hash::{probe, RbHash};
use super::shape::{Arithmetic, LinkShape};
use crate::bits::BitStore;
use crate::budget::LimitError;
use crate::relocate::Walk;

/// One link: its fields and its bit array. Not `Clone`: a copy allocates, fallibly
/// ([`RbFilter::try_clone`](super::RbFilter::try_clone)).
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
    /// Offers the bits' blocks to a defrag walk ([`crate::relocate`]).
    pub(crate) fn relocate(&mut self, walk: &mut Walk) {
        self.words.relocate(walk);
    }

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
    pub(super) fn try_clone(&self) -> Result<Link, LimitError> {
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
        if let Some(bytes) = self.words.bytes_in_one_block(0, len) {
            return Cow::Borrowed(bytes);
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

    pub(super) fn contains(&self, hash: RbHash, arithmetic: Arithmetic) -> bool {
        self.positions(hash, arithmetic)
            .all(|x| self.words.word((x >> 6) as usize) & (1 << (x & 63)) != 0)
    }

    /// Holds as many items as it may ([`LinkShape::item_limit`]): new ones go to a new link.
    pub(super) fn is_full(&self) -> bool {
        self.shape.items >= self.item_limit
    }

    /// Sets the bits of `hash` and counts one more item; only on a link that is not full.
    pub(super) fn add(&mut self, hash: RbHash, arithmetic: Arithmetic) {
        for x in self.positions(hash, arithmetic) {
            *self.words.word_mut((x >> 6) as usize) |= 1 << (x & 63);
        }
        // Below its item limit, so below u64::MAX.
        self.shape.items += 1;
    }
}
