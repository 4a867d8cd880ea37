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
    /// TryAlloc and an explicit zeroing.
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let size = redis_size(layout);
        if size >= FALLIBLE_BYTES {
            if let Some(try_calloc) = raw::RedisModule_TryCalloc {
                return try_calloc(1, size).cast();
            }
            if let Some(try_alloc) = raw::RedisModule_TryAlloc {
                let block = try_alloc(size).cast::<u8>();
                if !block.is_null() {
                    block.write_bytes(0, size);
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
