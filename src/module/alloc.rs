//! The global allocator: Redis' allocator inside the server, so that `used_memory`, maxmemory and
//! MEMORY USAGE count every filter; the system allocator when Redis is absent (unit tests,
//! benches, tools linking the library).

use std::alloc::{GlobalAlloc, Layout, System};

use redis_module::raw;

/// Routes allocations to `RedisModule_Alloc` and friends once the module API is initialised.
///
/// Nothing is allocated by this library before `RedisModule_Init` runs inside the server, so a
/// block is never allocated by one allocator and freed by the other.
pub struct ModuleAlloc;

/// Zeroed blocks from this size up may fail without aborting (see `alloc_zeroed`).
const FALLIBLE_BYTES: usize = 1 << 20;

/// Redis' allocator (jemalloc) aligns every block to at least 8 bytes, and to the size's power of
/// two for small sizes; rounding the size up to the alignment gives any alignment we ask for.
fn redis_size(layout: Layout) -> usize {
    (layout.size() + layout.align() - 1) & !(layout.align() - 1)
}

unsafe impl GlobalAlloc for ModuleAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        match raw::RedisModule_Alloc {
            Some(alloc) => alloc(redis_size(layout)).cast(),
            None => System.alloc(layout),
        }
    }

    /// Zeroed blocks come from calloc, so a big filter's pages stay untouched until used. Big
    /// blocks (filter bits) use the non-aborting variants, so that a refusal reaches the caller
    /// as null and becomes an error reply: TryCalloc where the server has it (7.4+), else
    /// TryAlloc and [`zero`], which keeps the pages untouched too.
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let size = redis_size(layout);
        if size >= FALLIBLE_BYTES {
            if let Some(try_calloc) = raw::RedisModule_TryCalloc {
                return try_calloc(1, size).cast();
            }
            if let Some(try_alloc) = raw::RedisModule_TryAlloc {
                let block = try_alloc(size).cast::<u8>();
                if !block.is_null() {
                    zero(block, size);
                }
                return block;
            }
        }
        match raw::RedisModule_Calloc {
            Some(calloc) => calloc(1, size).cast(),
            None => System.alloc_zeroed(layout),
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        match raw::RedisModule_Free {
            Some(free) => free(ptr.cast()),
            None => System.dealloc(ptr, layout),
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        match raw::RedisModule_Realloc {
            Some(realloc) => {
                let new_layout = Layout::from_size_align_unchecked(new_size, layout.align());
                realloc(ptr.cast(), redis_size(new_layout)).cast()
            }
            None => System.realloc(ptr, layout, new_size),
        }
    }
}

/// Zeroes a freshly allocated block without touching its whole pages: they are handed back to the
/// kernel (MADV_DONTNEED), which maps them to zero-filled pages again on first use, so a 1 GiB
/// filter is neither written nor made resident at creation. Only the partial pages at either end
/// are written. Falls back to writing everything if the kernel refuses.
///
/// # Safety
/// `block` must point to `size` writable bytes that the caller owns.
unsafe fn zero(block: *mut u8, size: usize) {
    let page = match usize::try_from(libc::sysconf(libc::_SC_PAGESIZE)) {
        Ok(page) if page.is_power_of_two() => page,
        _ => return block.write_bytes(0, size),
    };
    let start = (block as usize).next_multiple_of(page);
    let end = (block as usize + size) & !(page - 1);
    if end <= start
        || libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED) != 0
    {
        return block.write_bytes(0, size);
    }
    block.write_bytes(0, start - block as usize);
    (end as *mut u8).write_bytes(0, block as usize + size - end);
}

#[cfg(test)]
mod tests {
    use super::zero;

    #[test]
    fn zero_clears_exactly_the_block_whatever_its_alignment() {
        let mut buffer = vec![0xffu8; (4 << 20) + 123];
        for (start, len) in [
            (7usize, (4 << 20) - 20),
            (0, 4 << 20),
            (100, 3000),
            (4096, 8192),
        ] {
            buffer.fill(0xff);
            unsafe { zero(buffer.as_mut_ptr().add(start), len) };
            assert!(
                buffer[start..start + len].iter().all(|&b| b == 0),
                "{start}+{len}"
            );
            assert!(buffer[..start].iter().all(|&b| b == 0xff), "before {start}");
            assert!(
                buffer[start + len..].iter().all(|&b| b == 0xff),
                "after {start}+{len}"
            );
        }
    }
}
