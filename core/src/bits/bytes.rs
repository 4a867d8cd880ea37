//! The store as the little-endian bytes of its words, the form RDB, AOF rewrites, DUMP and
//! BF.SCANDUMP/BF.LOADCHUNK carry: read and written across blocks, viewed in place within one, and
//! a block Redis loaded taken over as one of the store's own ([`AdoptableBlock`]).

use super::blocks::free_block;
use super::cut::block_layout;
use super::BitStore;

/// A block of bytes a store may take over as one of its own blocks instead of copying it
/// ([`StoredValue::adopt_bits`](crate::StoredValue::adopt_bits)): a buffer Redis loaded a piece
/// of an RDB value into. Taken by value
/// through the layers that route it to its store; a store that takes it frees it when dropped,
/// one that does not leaves the bytes with their owner (dropping this value frees nothing).
#[derive(Debug)]
pub struct AdoptableBlock {
    ptr: std::ptr::NonNull<u8>,
    len: usize,
}

impl AdoptableBlock {
    /// The `len` bytes at `ptr`, offered to a store.
    ///
    /// # Safety
    /// `ptr` points to `len` initialised bytes that the caller owns and neither reads, writes nor
    /// frees once a store has taken them (an adopting call returned true); the global
    /// allocator's `dealloc` frees them whatever layout of at most 64-byte alignment and at
    /// most `len` bytes it is given (a block of the underlying allocator that `dealloc` frees by
    /// its address alone).
    pub unsafe fn new(ptr: std::ptr::NonNull<u8>, len: usize) -> AdoptableBlock {
        AdoptableBlock { ptr, len }
    }

    /// Bytes offered.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl BitStore {
    /// Takes `block` as the store's block holding bytes `offset .. offset + block.len()` of the
    /// little-endian encoding, in place of the block there (freed), when those bytes are exactly
    /// one of its blocks and `block` is aligned as that block's layout asks. Returns false
    /// otherwise (and on big-endian targets, where the bytes are not the words), leaving the
    /// bytes with the owner that made `block`.
    pub(crate) fn adopt(&mut self, offset: usize, block: AdoptableBlock) -> bool {
        let AdoptableBlock { ptr: block, len } = block;
        if cfg!(target_endian = "big") || len == 0 || !offset.is_multiple_of(8) {
            return false;
        }
        let Some(index) = (0..self.block_count()).find(|&index| {
            self.block_start(index) * 8 == offset && self.block_len(index) * 8 == len
        }) else {
            return false;
        };
        // A tail that holds the table after its words is kept: the given block has no room
        // for the table.
        if self.allocated_len(index) != self.block_len(index) {
            return false;
        }
        let aligned = block_layout(self.block_len(index))
            .is_some_and(|layout| (block.as_ptr() as usize).is_multiple_of(layout.align()));
        if !aligned {
            return false;
        }
        free_block(self.block_ptr(index), self.block_len(index));
        let block = block.cast::<u64>();
        if self.in_pieces() {
            self.table_mut()[index] = block;
        } else {
            self.ptr = block;
        }
        true
    }

    /// Bytes `offset .. offset + len` of the little-endian encoding as they lie in memory, when
    /// they are inside one block (None across blocks, and on big-endian targets). Panics past
    /// the end.
    pub(crate) fn bytes_in_one_block(&self, offset: usize, len: usize) -> Option<&[u8]> {
        self.check_bytes(offset, len);
        if cfg!(target_endian = "big") || len == 0 {
            return None;
        }
        let (block, within, room) = self.block_bytes_at(offset);
        // SAFETY: `len` <= `room` bytes of the block from `within`, initialised words owned by
        // self, borrowed with it.
        (len <= room).then(|| unsafe {
            std::slice::from_raw_parts(block.as_ptr().cast::<u8>().add(within), len)
        })
    }

    /// Copies `out.len()` bytes of the little-endian encoding of the words (word w is bytes
    /// 8w .. 8w+7), starting at byte `offset`. Panics past the end.
    pub(crate) fn read_bytes(&self, offset: usize, out: &mut [u8]) {
        self.check_bytes(offset, out.len());
        let mut at = offset;
        let mut rest = out;
        while !rest.is_empty() {
            let (block, within, room) = self.block_bytes_at(at);
            let take = room.min(rest.len());
            let (head, tail) = rest.split_at_mut(take);
            if cfg!(target_endian = "little") {
                // SAFETY: `take` bytes of the block from `within`, initialised words owned by
                // self; `head` is a distinct buffer of `take` bytes.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        block.as_ptr().cast::<u8>().add(within),
                        head.as_mut_ptr(),
                        take,
                    )
                };
            } else {
                read_words_le(self, at, head);
            }
            at += take;
            rest = tail;
        }
    }

    /// Overwrites bytes of the little-endian encoding from byte `offset`. Panics past the end.
    pub(crate) fn write_bytes(&mut self, offset: usize, data: &[u8]) {
        self.check_bytes(offset, data.len());
        let mut at = offset;
        let mut rest = data;
        while !rest.is_empty() {
            let (block, within, room) = self.block_bytes_at(at);
            let take = room.min(rest.len());
            if cfg!(target_endian = "little") {
                // SAFETY: `take` bytes of the block from `within`, owned by self and borrowed
                // exclusively with it; `rest` is a distinct buffer of at least `take` bytes.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        rest.as_ptr(),
                        block.as_ptr().cast::<u8>().add(within),
                        take,
                    )
                };
            } else {
                write_words_le(self, at, &rest[..take]);
            }
            at += take;
            rest = &rest[take..];
        }
    }

    /// Panics unless bytes `offset .. offset + len` are inside the store.
    fn check_bytes(&self, offset: usize, len: usize) {
        assert!(
            offset
                .checked_add(len)
                .is_some_and(|end| end <= self.len * 8),
            "bytes {offset}+{len} of {}",
            self.len * 8
        );
    }

    /// The block holding byte `at` (inside the store), the byte's offset in it, and the bytes
    /// from there to the block's end.
    fn block_bytes_at(&self, at: usize) -> (std::ptr::NonNull<u64>, usize, usize) {
        let index = if self.in_pieces() {
            at >> (self.piece_shift + 3)
        } else {
            0
        };
        let within = at - self.block_start(index) * 8;
        (
            self.block_ptr(index),
            within,
            self.block_len(index) * 8 - within,
        )
    }
}

/// The little-endian bytes of the words from byte `at`, word by word (big-endian targets).
fn read_words_le(store: &BitStore, at: usize, out: &mut [u8]) {
    let mut at = at;
    let mut rest = out;
    while !rest.is_empty() {
        let (word, within) = (at / 8, at % 8);
        let take = (8 - within).min(rest.len());
        let (head, tail) = rest.split_at_mut(take);
        head.copy_from_slice(&store.word(word).to_le_bytes()[within..within + take]);
        at += take;
        rest = tail;
    }
}

/// Overwrites the words from byte `at` with little-endian bytes, word by word (big-endian
/// targets).
fn write_words_le(store: &mut BitStore, at: usize, data: &[u8]) {
    let mut at = at;
    let mut rest = data;
    while !rest.is_empty() {
        let (word, within) = (at / 8, at % 8);
        let take = (8 - within).min(rest.len());
        let word = store.word_mut(word);
        let mut le = word.to_le_bytes();
        le[within..within + take].copy_from_slice(&rest[..take]);
        *word = u64::from_le_bytes(le);
        at += take;
        rest = &rest[take..];
    }
}
