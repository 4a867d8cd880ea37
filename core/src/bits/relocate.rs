//! A store's blocks offered to a defrag walk ([`crate::relocate`]): the one block, or each
//! piece, the tail and a table of its own; a table kept at the end of the tail moves with it.

use std::alloc::Layout;
use std::ptr::NonNull;

use super::cut::{block_layout, piece_len};
use super::BitStore;
use crate::relocate::Walk;

impl BitStore {
    /// Offers each block to `walk`, in order, and points the store at those that moved.
    pub(crate) fn relocate(&mut self, walk: &mut Walk) {
        let blocks = self.block_count();
        if !self.in_pieces() {
            if let (1, Some(layout)) = (blocks, block_layout(self.len)) {
                if let Some(moved) = walk.block(self.ptr.cast(), layout) {
                    self.ptr = moved.cast();
                }
            }
            return;
        }
        for index in 0..blocks {
            let Some(layout) = block_layout(self.allocated_len(index)) else {
                continue;
            };
            let Some(moved) = walk.block(self.block_ptr(index).cast(), layout) else {
                continue;
            };
            let moved = moved.cast::<u64>();
            if self.table_in_tail && index + 1 == blocks {
                // The table came along, after the tail's words: the old one is gone.
                let words = piece_len(self.len, self.piece_shift, index);
                // SAFETY: the tail's block holds its words and then the table (allocated_len);
                // inside the block, never null.
                self.ptr = unsafe { NonNull::new_unchecked(moved.as_ptr().add(words)) };
            }
            self.table_mut()[index] = moved;
        }
        if !self.table_in_tail {
            let Ok(layout) = Layout::array::<NonNull<u64>>(blocks) else {
                return;
            };
            if let Some(moved) = walk.block(self.ptr.cast(), layout) {
                self.ptr = moved.cast();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::alloc::Layout;
    use std::ptr::NonNull;

    use super::BitStore;
    use crate::relocate::{Relocator, Walk};

    /// Moves every block, counting them.
    struct MoveAll(usize);

    // SAFETY: a new block of the same layout with the old one's bytes; the old one freed.
    unsafe impl Relocator for MoveAll {
        fn relocate(&mut self, block: NonNull<u8>, layout: Layout) -> Option<NonNull<u8>> {
            self.0 += 1;
            // SAFETY: a non-empty layout; the old block holds `layout.size()` bytes, is the
            // walk's to give up and was allocated with `layout`.
            unsafe {
                let moved = NonNull::new(std::alloc::alloc(layout))?;
                std::ptr::copy_nonoverlapping(block.as_ptr(), moved.as_ptr(), layout.size());
                std::alloc::dealloc(block.as_ptr(), layout);
                Some(moved)
            }
        }
        fn should_stop(&mut self) -> bool {
            false
        }
    }

    #[test]
    fn stores_of_every_cut_move_whole() {
        // One block; pieces with the table in the tail (1,232 bytes); pieces with a table of
        // its own (9 MiB: nine 1 MiB pieces and no tail).
        for (words, in_tail, blocks) in [
            (1_000usize, None, 1),
            (154, Some(true), 2),
            (9 << 17, Some(false), 10),
        ] {
            let mut store = BitStore::zeroed(words as u64).unwrap();
            for w in 0..words {
                *store.word_mut(w) = (w as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            }
            assert_eq!(store.in_pieces().then_some(store.table_in_tail), in_tail);
            let mut mover = MoveAll(0);
            let mut walk = Walk::new(&mut mover, 0);
            store.relocate(&mut walk);
            assert_eq!(mover.0, blocks, "{words}");
            assert!(
                (0..words).all(|w| store.word(w) == (w as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15))
            );
        }
    }
}
