//! A store's blocks as the allocator and the kernel see them: allocated zeroed, freed with the
//! layout they were allocated with, their pages made resident in one call, and the store's copy,
//! which does that before it writes.

use super::cut::block_layout;
use super::BitStore;
use crate::budget::LimitError;

/// Stores of this many bytes and more are copied with a helper thread making pages resident
/// ([`BitStore::try_clone`]); below, starting the thread costs more than it saves.
pub(super) const HELPED_COPY_FROM: usize = 64 << 20;

impl BitStore {
    /// A copy, allocated fallibly (a refusal is an error, not an abort). Each block's pages are
    /// made resident in one call before it is copied ([`populate`]): a fault per 4 KiB page
    /// (Redis turns transparent huge pages off) took most of a big filter's COPY. From
    /// [`HELPED_COPY_FROM`] on, a helper thread makes every other block resident meanwhile: the
    /// kernel clearing fresh pages is most of what remains, and it runs on two cores at once.
    pub(crate) fn try_clone(&self) -> Result<BitStore, LimitError> {
        let mut copy = BitStore::zeroed(self.len as u64)?;
        // The odd blocks' addresses and sizes, for the helper's madvise calls only.
        let odd: Vec<(usize, usize)> = (1..copy.block_count())
            .step_by(2)
            .map(|index| {
                (
                    copy.block_ptr(index).as_ptr() as usize,
                    copy.block_len(index) * 8,
                )
            })
            .collect();
        std::thread::scope(|scope| {
            let helped = self.len * 8 >= HELPED_COPY_FROM
                && !odd.is_empty()
                && std::thread::Builder::new()
                    .name("bf-copy-pages".into())
                    .spawn_scoped(scope, || {
                        for &(start, bytes) in &odd {
                            // SAFETY: a block of `copy`, which outlives this scope and whose
                            // contents this thread never reads or writes.
                            unsafe { populate_range(start, bytes) };
                        }
                    })
                    .is_ok();
            for (index, (copy, block)) in copy.blocks_mut().zip(self.blocks()).enumerate() {
                if !helped || index % 2 == 0 {
                    populate(copy);
                }
                copy.copy_from_slice(block);
            }
        });
        Ok(copy)
    }
}

/// Makes the pages of `block` resident and writable in one call (MADV_POPULATE_WRITE, Linux
/// 5.14+) rather than one fault per page as they are first written; a hint: where the kernel
/// refuses (older kernels, other systems) the pages fault in as they are written.
fn populate(block: &mut [u64]) {
    // SAFETY: the bytes of `block`, borrowed exclusively.
    unsafe { populate_range(block.as_mut_ptr() as usize, block.len() * 8) }
}

/// [`populate`] of the `bytes` bytes from address `start`.
///
/// # Safety
/// The range lies inside one live block of the global allocator. Other threads may read and
/// write it meanwhile: populating changes no byte (a page keeps its contents).
unsafe fn populate_range(start: usize, bytes: usize) {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        let Ok(page) = usize::try_from(page) else {
            return;
        };
        if !page.is_power_of_two() || bytes < page {
            return;
        }
        let (first, end) = (start.next_multiple_of(page), (start + bytes) & !(page - 1));
        if first < end {
            // SAFETY: whole pages inside the caller's block, private anonymous memory of the
            // allocator; populating writes nothing the program sees.
            unsafe {
                libc::madvise(
                    first as *mut libc::c_void,
                    end - first,
                    libc::MADV_POPULATE_WRITE,
                )
            };
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (start, bytes);
}

/// A zeroed block of `layout` (non-zero size) from the global allocator, None when refused.
pub(super) fn zeroed_block(layout: std::alloc::Layout) -> Option<std::ptr::NonNull<u64>> {
    // SAFETY: callers pass a layout of non-zero size.
    std::ptr::NonNull::new(unsafe { std::alloc::alloc_zeroed(layout) }.cast::<u64>())
}

/// Frees a block of `len` words that [`zeroed_block`] allocated with `block_layout(len)`.
pub(super) fn free_block(block: std::ptr::NonNull<u64>, len: usize) {
    let layout = block_layout(len).expect("the layout it was allocated with");
    // SAFETY: allocated by `zeroed_block` with exactly this layout.
    unsafe { std::alloc::dealloc(block.as_ptr().cast(), layout) };
}
