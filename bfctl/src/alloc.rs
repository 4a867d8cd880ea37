//! bfctl's allocator: the C library's malloc, except for blocks of [`MAPPED_FROM`] and more,
//! which are mapped fresh from the kernel and hinted into transparent huge pages.
//!
//! Those are the filters `bfctl build` and `load --offline` fill (one block per layer, see
//! `budget::Allocator::Libc`). Every item touches a few lines at random over gigabytes, and with
//! 4 KiB pages each of them also misses the TLB: 10^9 items at 1e-9 (5.6 GB) built in 132 s with
//! huge pages against 171 s without, 144 against 224 CPU seconds (glibc's `hugetlb` tunable as
//! the switch, 2026-11-28). A fresh mapping is already zero, so `alloc_zeroed` writes nothing:
//! the kernel clears each huge page when a worker first touches it, on whichever core that
//! worker runs, over the whole build — where zeroing the blocks when they are made took one
//! thread ~15 s at 10^9 before any item was read, the other core idle.
//!
//! Servers never do this: Redis turns huge pages off for its forks' sake, and the module
//! allocates through Redis.

use std::alloc::{GlobalAlloc, Layout, System};

/// Blocks this big and bigger are mapped; smaller ones are malloc's. The same as the
/// threshold below which bfctl keeps freed memory in malloc for reuse (`keep_freed_memory`):
/// a load's buffers, freed and taken again every round trip, stay there.
pub const MAPPED_FROM: usize = 16 << 20;

/// Base pages: a mapping is whole pages, so a block's alignment up to this is free.
const PAGE: usize = 4096;

pub struct BfctlAlloc;

/// True for the layouts this allocator maps (and so unmaps): decided by the layout alone, which
/// `dealloc` and `realloc` are given exactly as `alloc` was.
fn mapped(layout: Layout) -> bool {
    layout.size() >= MAPPED_FROM && layout.align() <= PAGE
}

/// Maps `size` bytes of zeroed memory, hinted into huge pages; null when refused.
fn map(size: usize) -> *mut u8 {
    // SAFETY: a new private anonymous mapping; no existing memory is named.
    let at = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            size,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if at == libc::MAP_FAILED {
        return std::ptr::null_mut();
    }
    hint_huge_pages(at, size);
    at.cast()
}

/// Asks for transparent huge pages over the mapping at `at` (before it is first written, so
/// that its pages fault in huge); a hint, ignored where the system decides alone.
fn hint_huge_pages(at: *mut libc::c_void, size: usize) {
    // SAFETY: the whole of one live mapping of ours; the advice changes how it is backed,
    // never a byte the program sees.
    unsafe { libc::madvise(at, size, libc::MADV_HUGEPAGE) };
}

// SAFETY: every block is either malloc's (System, given the same layouts) or a mapping of at
// least its size, page-aligned (so aligned for any `mapped` layout), zeroed, and unmapped
// exactly once by `dealloc` or moved by `realloc`; which one is decided by the layout alone.
unsafe impl GlobalAlloc for BfctlAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if mapped(layout) {
            map(layout.size())
        } else {
            // SAFETY: the caller's layout, of non-zero size.
            unsafe { System.alloc(layout) }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if mapped(layout) {
            // A fresh mapping reads as zeros: nothing to write.
            map(layout.size())
        } else {
            // SAFETY: the caller's layout, of non-zero size.
            unsafe { System.alloc_zeroed(layout) }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if mapped(layout) {
            // SAFETY: a mapping made by `map` (or moved by `realloc`) for this layout's size.
            unsafe { libc::munmap(ptr.cast(), layout.size()) };
        } else {
            // SAFETY: a block of System's, allocated with this layout.
            unsafe { System.dealloc(ptr, layout) }
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's layout's alignment with a non-zero size it vouches for.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        match (mapped(layout), mapped(new_layout)) {
            // SAFETY: a block of System's with this layout.
            (false, false) => unsafe { System.realloc(ptr, layout, new_size) },
            (true, true) => {
                // SAFETY: our mapping of `layout.size()` bytes, moved whole by the kernel
                // (no copy); the grown part reads as zeros.
                let at = unsafe {
                    libc::mremap(ptr.cast(), layout.size(), new_size, libc::MREMAP_MAYMOVE)
                };
                if at == libc::MAP_FAILED {
                    return std::ptr::null_mut();
                }
                hint_huge_pages(at, new_size);
                at.cast()
            }
            // Across the threshold: a new block of the other kind, the bytes copied over.
            _ => {
                // SAFETY: a non-zero size (the caller's) with a valid alignment.
                let new = unsafe { self.alloc(new_layout) };
                if !new.is_null() {
                    // SAFETY: both blocks live, distinct, and at least this long.
                    unsafe {
                        std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                        self.dealloc(ptr, layout);
                    }
                }
                new
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mapped_blocks_are_zeroed_aligned_and_grow_keeping_their_bytes() {
        let a = BfctlAlloc;
        let layout = Layout::from_size_align(MAPPED_FROM + 123, 64).unwrap();
        // SAFETY: a non-zero layout; every block is freed with the layout it has.
        unsafe {
            let p = a.alloc_zeroed(layout);
            assert!(!p.is_null() && (p as usize).is_multiple_of(64));
            let block = std::slice::from_raw_parts_mut(p, layout.size());
            assert!(block.iter().all(|&b| b == 0));
            block[0] = 7;
            block[layout.size() - 1] = 9;
            // Grown as a mapping, shrunk below the threshold into malloc's, then back.
            let grown = a.realloc(p, layout, 2 * MAPPED_FROM);
            assert_eq!((*grown, *grown.add(layout.size() - 1)), (7, 9));
            assert_eq!(*grown.add(2 * MAPPED_FROM - 1), 0);
            let big = Layout::from_size_align(2 * MAPPED_FROM, 64).unwrap();
            let small = a.realloc(grown, big, 100);
            assert_eq!(*small, 7);
            let small_layout = Layout::from_size_align(100, 64).unwrap();
            let back = a.realloc(small, small_layout, MAPPED_FROM);
            assert_eq!(*back, 7);
            a.dealloc(back, Layout::from_size_align(MAPPED_FROM, 64).unwrap());
        }
    }
}
