//! Moving a value's heap blocks to new addresses, for a server's active defragmentation: the
//! server's allocator says which blocks sit in nearly empty pages and copies those elsewhere, so
//! that the pages can go back to the system; every pointer to a moved block must then change.
//!
//! The core knows where its pointers are, the server knows which blocks to move: a value walks
//! its blocks in a fixed order ([`StoredValue::relocate`]) and offers each to a [`Relocator`]
//! (the module's, around the server's defrag call), replacing its pointer when the block moved.
//! A walk may stop when the relocator says time is up and resume later from the position it
//! returned, so a value of many blocks never holds the server for long.
//!
//! ```text
//!   a value:      | the value | its rare state, if any | its filter's blocks
//!   scalable:     | the layer list | the next layer's shape, if any | layer 0's bits | layer 1's
//!   window:       | the record | its region table | its bits
//!   RedisBloom:   | the link list | link 0's bits | link 1's bits | ...
//!   bits:         | block 0 (the one block, or piece 0) | piece 1 | ... | the tail | the table,
//!                   when it has a block of its own
//! ```
//!
//! A value changed between two steps (a layer pushed, the key overwritten) only shifts what the
//! positions name: each step moves whole blocks and leaves the value consistent, so a resumed
//! walk may offer some blocks twice or not at all until the next cycle, never a stale pointer.

use std::alloc::Layout;
use std::ptr::NonNull;

use crate::StoredValue;

/// Moves heap blocks when its allocator says moving them helps (the module's, around the
/// server's defrag call).
///
/// # Safety
/// [`relocate`](Self::relocate) either returns None and leaves the block as it was, or returns
/// the address of a new block holding the old one's first `layout.size()` bytes, aligned to
/// `layout.align()`, that the global allocator frees when given that address and `layout`;
/// the old block has then been freed, and nothing reads or writes it again. The walk trusts this
/// to keep every `Box`, `Vec` and bit store valid.
pub unsafe trait Relocator {
    /// Offers the block at `block`, allocated by the global allocator with `layout`: its new
    /// address when it moved.
    fn relocate(&mut self, block: NonNull<u8>, layout: Layout) -> Option<NonNull<u8>>;

    /// True when the walk should stop now and resume later (its time is up).
    fn should_stop(&mut self) -> bool;
}

/// Where a walk is: the position of the next block, and where it began.
pub(crate) struct Walk<'a> {
    relocator: &'a mut dyn Relocator,
    /// Position of the next block offered.
    position: u64,
    /// Blocks before this position were moved by earlier steps: skipped.
    from: u64,
    /// The position to resume from once the relocator asked to stop.
    stopped_at: Option<u64>,
    /// A block was offered in this step: stopping now still makes progress.
    offered: bool,
}

impl<'a> Walk<'a> {
    pub(crate) fn new(relocator: &'a mut dyn Relocator, from: u64) -> Walk<'a> {
        Walk {
            relocator,
            position: 0,
            from,
            stopped_at: None,
            offered: false,
        }
    }

    /// Offers the block at `block` of `layout`, when its turn is in this step: its new address
    /// when it moved. A block of no bytes was never allocated and is not offered.
    pub(crate) fn block(&mut self, block: NonNull<u8>, layout: Layout) -> Option<NonNull<u8>> {
        let position = self.position;
        self.position += 1;
        if position < self.from || self.stopped_at.is_some() || layout.size() == 0 {
            return None;
        }
        // At least one block per step, so a walk always ends.
        if self.offered && self.relocator.should_stop() {
            self.stopped_at = Some(position);
            return None;
        }
        self.offered = true;
        self.relocator.relocate(block, layout)
    }

    /// Offers a boxed value's block.
    pub(crate) fn boxed<T>(&mut self, boxed: &mut Box<T>) {
        let block = NonNull::from(&mut **boxed);
        if let Some(moved) = self.block(block.cast(), Layout::new::<T>()) {
            // SAFETY: the relocator freed the old block and holds the value's bytes at `moved`,
            // allocated for T's layout (its contract); the old Box is overwritten, not dropped.
            unsafe { std::ptr::write(boxed, Box::from_raw(moved.cast::<T>().as_ptr())) };
        }
    }

    /// Offers a boxed slice's block.
    pub(crate) fn boxed_slice<T>(&mut self, boxed: &mut Box<[T]>) {
        let len = boxed.len();
        let layout = Layout::for_value(&**boxed);
        let block = NonNull::from(&mut **boxed).cast::<u8>();
        if let Some(moved) = self.block(block, layout) {
            let slice = std::ptr::slice_from_raw_parts_mut(moved.cast::<T>().as_ptr(), len);
            // SAFETY: as in `boxed`, for the slice's layout: `len` elements at `moved`.
            unsafe { std::ptr::write(boxed, Box::from_raw(slice)) };
        }
    }

    /// Offers a vector's buffer.
    pub(crate) fn vec<T>(&mut self, vec: &mut Vec<T>) {
        let (len, capacity) = (vec.len(), vec.capacity());
        let Ok(layout) = Layout::array::<T>(capacity) else {
            return;
        };
        let Some(block) = NonNull::new(vec.as_mut_ptr().cast::<u8>()) else {
            return;
        };
        if let Some(moved) = self.block(block, layout) {
            // SAFETY: as in `boxed`: the buffer of `capacity` elements, its first `len`
            // initialised, now at `moved`, allocated with the layout a Vec of that capacity has.
            unsafe {
                std::ptr::write(
                    vec,
                    Vec::from_raw_parts(moved.cast().as_ptr(), len, capacity),
                )
            };
        }
    }
}

impl StoredValue {
    /// Offers every block of `value`, the box included, to `relocator`, from position `from`
    /// (0 for a new walk) in the order the module's picture shows. Returns None when the walk is
    /// done, else the position to resume from (the relocator asked to stop).
    pub fn relocate(
        value: &mut Box<StoredValue>,
        relocator: &mut dyn Relocator,
        from: u64,
    ) -> Option<u64> {
        let mut walk = Walk::new(relocator, from);
        walk.boxed(value);
        if let StoredValue::Filter(stored) = &mut **value {
            stored.relocate(&mut walk);
        }
        walk.stopped_at
    }
}

#[cfg(test)]
mod tests;
