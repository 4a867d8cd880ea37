//! The global allocator: Redis' allocator inside the server, so that `used_memory`, maxmemory and
//! MEMORY USAGE count every filter; the system allocator when Redis is absent (unit tests,
//! benches, tools linking the library).
//!
//! Redis' module allocator takes a size only, so alignment is this module's job (see [`Shape`]).

use std::alloc::{GlobalAlloc, Layout, System};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU8, Ordering};

use redis_module::raw;
use rustbloom_core::bits::AdoptableBlock;
use rustbloom_core::relocate::Relocator;
use rustbloom_core::StoredValue;

use super::ffi::{DefragCtx, RedisBuffer};

/// Routes allocations to `RedisModule_Alloc` and friends once the module API is initialised.
///
/// Nothing is allocated by this library before `RedisModule_Init` runs inside the server, so a
/// block is never allocated by one allocator and freed by the other.
pub struct ModuleAlloc;

/// Zeroed blocks from this size up may fail without aborting (see `alloc_zeroed`).
const FALLIBLE_BYTES: usize = 1 << 20;

/// The alignment every server allocator gives every block of 16 bytes and more (x86-64 and
/// aarch64 malloc, jemalloc).
const SERVER_ALIGN: usize = 16;
/// The alignment jemalloc gives a block whose size is a multiple of it.
const JEMALLOC_SIZE_CLASS_ALIGN: usize = 64;

/// How blocks aligned above [`SERVER_ALIGN`] (and at most [`JEMALLOC_SIZE_CLASS_ALIGN`]) are
/// made. Decided once: [`use_size_classes`] picks size classes when the server uses jemalloc,
/// unless such a block was already allocated with a header, which fixes headers for good, so
/// every block is freed the way it was allocated.
static OVER_ALIGNED: AtomicU8 = AtomicU8::new(UNDECIDED);
const UNDECIDED: u8 = 0;
const HEADED: u8 = 1;
const SIZE_CLASSES: u8 = 2;

/// The server allocates with jemalloc: blocks aligned up to 64 bytes are made by rounding their
/// size, which costs nothing more. Returns false if headers were already chosen.
pub fn use_size_classes() -> bool {
    OVER_ALIGNED
        .compare_exchange(
            UNDECIDED,
            SIZE_CLASSES,
            Ordering::Relaxed,
            Ordering::Relaxed,
        )
        .is_ok()
        || OVER_ALIGNED.load(Ordering::Relaxed) == SIZE_CLASSES
}

/// How one block of a layout is made:
///
/// ```text
///  align <= 16, or jemalloc and align <= 64       any other alignment ("headed" block)
///  size rounded up to a multiple of align         size + align bytes from the server
///  ┌──────────────────────────┐                   ┌─────────┬────────┬──────────────────────┐
///  │ block (server's pointer) │                   │ padding │ offset │ block (aligned)      │
///  └──────────────────────────┘                   └─────────┴────────┴──────────────────────┘
///  ^ returned as it is                            ^ server  ^ usize: returned − server pointer
/// ```
///
/// Every allocator the server may use (jemalloc, the C library's malloc) aligns a block to 16
/// bytes, and jemalloc a block whose size is a multiple of 64 to 64 (its size classes of such
/// sizes are multiples of 64 within page-aligned slabs, and large blocks keep cache-line
/// alignment). A headed block returns the first aligned address at least one word past the
/// server's pointer; the word before it says how far back the server's pointer is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    /// The server's block as it is, of this size (the layout's, rounded up to its alignment).
    Plain(usize),
    /// A headed block: this many bytes from the server (the layout's size plus its alignment).
    Headed(usize),
}

/// The shape of a block of `layout`; `size_classes`: the server rounds sizes to jemalloc's
/// classes. None when the size overflows.
fn shape(layout: Layout, size_classes: bool) -> Option<Shape> {
    let align = layout.align();
    let plain = align <= SERVER_ALIGN || (size_classes && align <= JEMALLOC_SIZE_CLASS_ALIGN);
    if plain {
        Some(Shape::Plain(layout.size().checked_next_multiple_of(align)?))
    } else {
        Some(Shape::Headed(layout.size().checked_add(align)?))
    }
}

/// The shape of a block of `layout` in the server, deciding the mode for over-aligned blocks
/// on first use (see [`OVER_ALIGNED`]).
fn server_shape(layout: Layout) -> Option<Shape> {
    if layout.align() > SERVER_ALIGN && layout.align() <= JEMALLOC_SIZE_CLASS_ALIGN {
        // Fixes headers if nothing decided yet; a failure means the mode is already fixed.
        let _ =
            OVER_ALIGNED.compare_exchange(UNDECIDED, HEADED, Ordering::Relaxed, Ordering::Relaxed);
    }
    shape(layout, OVER_ALIGNED.load(Ordering::Relaxed) == SIZE_CLASSES)
}

/// True when the global allocator frees every block of at most 64-byte alignment with
/// `RedisModule_Free` on its address as it is (in the server, jemalloc's size classes chosen:
/// every such block is [`Shape::Plain`]).
fn frees_server_blocks() -> bool {
    in_server() && OVER_ALIGNED.load(Ordering::Relaxed) == SIZE_CLASSES
}

/// Keeps a string Redis loaded from RDB as bytes `offset ..` of `stored`'s bits, instead of
/// copying it, when they are one block of a store ([`StoredValue::adopt_bits`]) and the global
/// allocator frees a block of Redis' as its own. Hands the buffer back otherwise.
pub fn keep_loaded_bits(
    stored: &mut StoredValue,
    offset: u64,
    buffer: RedisBuffer,
) -> Result<(), RedisBuffer> {
    let Some((block, len)) = buffer.block().filter(|_| frees_server_blocks()) else {
        return Err(buffer);
    };
    // SAFETY: Redis allocated the buffer's `len` bytes with its allocator
    // (RM_LoadStringBuffer) and they are ours; with size classes chosen, the global allocator
    // frees every block of at most 64-byte alignment with RedisModule_Free on its address,
    // which is how a buffer of Redis' is freed. On true the buffer is forgotten, not freed.
    let block = unsafe { AdoptableBlock::new(block, len) };
    if stored.adopt_bits(offset, block) {
        std::mem::forget(buffer);
        Ok(())
    } else {
        Err(buffer)
    }
}

/// Active defrag's mover: offers the server each block the global allocator made as a block of
/// the server's own (every block of at most 64-byte alignment once jemalloc's size classes are
/// chosen), counting those it moved and those it left.
pub struct ServerRelocator<'a> {
    defrag: &'a DefragCtx<'a>,
    pub moved: usize,
    pub kept: usize,
}

impl<'a> ServerRelocator<'a> {
    pub fn new(defrag: &'a DefragCtx<'a>) -> Self {
        ServerRelocator {
            defrag,
            moved: 0,
            kept: 0,
        }
    }
}

// SAFETY: a block is handed to the server only when it is the server's own block, exactly as
// allocated (see `frees_server_blocks`); RedisModule_DefragAlloc then either leaves it or
// returns a block of the same usable size (so of the same jemalloc size class, whose alignment
// the block's layout had) holding its bytes, having freed the old one, and the global allocator
// frees that block by its address as it is.
unsafe impl Relocator for ServerRelocator<'_> {
    fn relocate(&mut self, block: NonNull<u8>, layout: Layout) -> Option<NonNull<u8>> {
        let moved = if frees_server_blocks() && layout.align() <= JEMALLOC_SIZE_CLASS_ALIGN {
            // SAFETY: a live block of the server's allocator, at the address it returned, owned
            // by the walk, which stops using it when it moves.
            unsafe { self.defrag.move_block(block) }
        } else {
            None
        };
        if moved.is_some() {
            self.moved += 1;
        } else {
            self.kept += 1;
        }
        moved
    }

    fn should_stop(&mut self) -> bool {
        self.defrag.should_stop()
    }
}

/// The raw allocator underneath: the server's, or a fake one in tests.
trait RawAlloc {
    /// `size` bytes aligned to [`SERVER_ALIGN`] (to 8 below 16 bytes), or null.
    fn alloc(&self, size: usize) -> *mut u8;
    /// `size` zeroed bytes, or null.
    fn alloc_zeroed(&self, size: usize) -> *mut u8;
    /// Frees a block this allocator returned.
    ///
    /// # Safety
    /// `block` came from this allocator and is not used afterwards.
    unsafe fn free(&self, block: *mut u8);
    /// Resizes a block this allocator returned, or returns null and leaves it.
    ///
    /// # Safety
    /// `block` came from this allocator; on success it is not used afterwards.
    unsafe fn realloc(&self, block: *mut u8, size: usize) -> *mut u8;
}

/// The aligned block inside the server's block `raw` of a headed block of `align`, with its
/// offset stored in the word before it. Null stays null.
///
/// # Safety
/// `raw` is null or points to at least `size + align` bytes the caller owns, `align` being a
/// power of two above [`SERVER_ALIGN`] and `raw` aligned to a word.
unsafe fn head(raw: *mut u8, align: usize) -> *mut u8 {
    if raw.is_null() {
        return raw;
    }
    // The next multiple of `align` strictly after `raw` is at most `align` bytes on, and at
    // least a word on since `raw` is word-aligned: room for the offset, and `size` bytes after.
    let offset = align - (raw as usize & (align - 1));
    // SAFETY: offset <= align, inside the block the caller owns.
    let block = unsafe { raw.add(offset) };
    // SAFETY: `block` is aligned to more than a word and at least a word past `raw`, so the
    // word before it is inside the block and aligned.
    unsafe { block.cast::<usize>().sub(1).write(offset) };
    block
}

/// The server's pointer of the headed block `block`.
///
/// # Safety
/// `block` was returned by [`head`] and not freed.
unsafe fn server_pointer(block: *mut u8) -> *mut u8 {
    // SAFETY: `head` wrote the offset in the word before `block`, inside the server's block.
    let offset = unsafe { block.cast::<usize>().sub(1).read() };
    // SAFETY: `block - offset` is the server's pointer, the start of the same allocation.
    unsafe { block.sub(offset) }
}

/// Allocates a block of `layout` from `raw`.
fn alloc_with(raw: &impl RawAlloc, layout: Layout, shape: Option<Shape>, zeroed: bool) -> *mut u8 {
    let get = |size| {
        if zeroed {
            raw.alloc_zeroed(size)
        } else {
            raw.alloc(size)
        }
    };
    match shape {
        None => std::ptr::null_mut(),
        Some(Shape::Plain(size)) => get(size),
        // SAFETY: the server's block holds size + align bytes, aligned to 16.
        Some(Shape::Headed(size)) => unsafe { head(get(size), layout.align()) },
    }
}

/// Frees a block allocated by [`alloc_with`] with the same shape.
///
/// # Safety
/// `block` came from [`alloc_with`] with `shape` and the same `raw`, and is not used afterwards.
unsafe fn dealloc_with(raw: &impl RawAlloc, block: *mut u8, shape: Option<Shape>) {
    match shape {
        // SAFETY: a plain block is the server's own pointer (the caller's contract).
        Some(Shape::Plain(_)) => unsafe { raw.free(block) },
        // SAFETY: a headed block came from `head` (the caller's contract).
        Some(Shape::Headed(_)) => unsafe { raw.free(server_pointer(block)) },
        // No block was ever made of a layout without a shape.
        None => {}
    }
}

/// Resizes a block of `layout` allocated by [`alloc_with`] to `new_size` bytes.
///
/// # Safety
/// As [`GlobalAlloc::realloc`], with `old` and `new` the shapes of the old and new layouts.
unsafe fn realloc_with(
    raw: &impl RawAlloc,
    block: *mut u8,
    layout: Layout,
    old: Option<Shape>,
    new: Option<Shape>,
    new_size: usize,
) -> *mut u8 {
    if let (Some(Shape::Plain(_)), Some(Shape::Plain(size))) = (old, new) {
        // SAFETY: a plain block is the server's pointer; the server keeps its alignment for a
        // size of the same rounding.
        return unsafe { raw.realloc(block, size) };
    }
    // A headed block's offset may differ in a moved block: copy into a new block instead.
    let Ok(new_layout) = Layout::from_size_align(new_size, layout.align()) else {
        return std::ptr::null_mut();
    };
    let moved = alloc_with(raw, new_layout, new, false);
    if !moved.is_null() {
        // SAFETY: both blocks hold at least the smaller size and are distinct allocations.
        unsafe { std::ptr::copy_nonoverlapping(block, moved, layout.size().min(new_size)) };
        // SAFETY: `block` came from alloc_with with `old` (the caller's contract).
        unsafe { dealloc_with(raw, block, old) };
    }
    moved
}

/// The server's allocator, through the module API.
struct ServerAlloc;

impl RawAlloc for ServerAlloc {
    fn alloc(&self, size: usize) -> *mut u8 {
        // SAFETY: reading the API pointer, which Redis sets once in RedisModule_Init before
        // any allocation of this module.
        match unsafe { raw::RedisModule_Alloc } {
            // SAFETY: RedisModule_Alloc accepts any size.
            Some(alloc) => unsafe { alloc(size) }.cast(),
            None => std::ptr::null_mut(),
        }
    }

    /// Zeroed blocks come from calloc, so a big filter's pages stay untouched until used. Big
    /// blocks (filter bits) use the non-aborting variants, so that a refusal reaches the caller
    /// as null and becomes an error reply: TryCalloc where the server has it (7.4+), else
    /// TryAlloc and [`zero`], which keeps the pages untouched too.
    fn alloc_zeroed(&self, size: usize) -> *mut u8 {
        if size >= FALLIBLE_BYTES {
            // SAFETY: reading API pointers set once at module load.
            let (try_calloc, try_alloc) =
                unsafe { (raw::RedisModule_TryCalloc, raw::RedisModule_TryAlloc) };
            if let Some(try_calloc) = try_calloc {
                // SAFETY: TryCalloc accepts any size and returns null on failure.
                return unsafe { try_calloc(1, size) }.cast();
            }
            if let Some(try_alloc) = try_alloc {
                // SAFETY: TryAlloc accepts any size and returns null on failure.
                let block = unsafe { try_alloc(size) }.cast::<u8>();
                if !block.is_null() {
                    // SAFETY: the block was just allocated with `size` bytes and is ours.
                    unsafe { zero(block, size) };
                }
                return block;
            }
        }
        // SAFETY: reading the API pointer, set once at module load.
        match unsafe { raw::RedisModule_Calloc } {
            // SAFETY: Calloc accepts any size.
            Some(calloc) => unsafe { calloc(1, size) }.cast(),
            None => std::ptr::null_mut(),
        }
    }

    unsafe fn free(&self, block: *mut u8) {
        // SAFETY: reading the API pointer, set once at module load.
        if let Some(free) = unsafe { raw::RedisModule_Free } {
            // SAFETY: `block` came from the server's allocator (the caller's contract).
            unsafe { free(block.cast()) };
        }
    }

    unsafe fn realloc(&self, block: *mut u8, size: usize) -> *mut u8 {
        // SAFETY: reading the API pointer, set once at module load.
        match unsafe { raw::RedisModule_Realloc } {
            // SAFETY: `block` came from the server's allocator (the caller's contract).
            Some(realloc) => unsafe { realloc(block.cast(), size) }.cast(),
            None => std::ptr::null_mut(),
        }
    }
}

/// True once the module API is there; before (and without a server), the system allocator.
fn in_server() -> bool {
    // SAFETY: reading the API pointer, set once at module load.
    unsafe { raw::RedisModule_Alloc }.is_some()
}

// SAFETY: every block honours its Layout (see the module's picture): plain blocks by the
// server's alignment of their rounded size, headed ones by construction; each is freed and
// resized the way it was made, as the shape follows from the layout and a mode fixed before
// the first block it applies to.
unsafe impl GlobalAlloc for ModuleAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if !in_server() {
            // SAFETY: the caller's contract, passed on.
            return unsafe { System.alloc(layout) };
        }
        alloc_with(&ServerAlloc, layout, server_shape(layout), false)
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if !in_server() {
            // SAFETY: the caller's contract, passed on.
            return unsafe { System.alloc_zeroed(layout) };
        }
        alloc_with(&ServerAlloc, layout, server_shape(layout), true)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if !in_server() {
            // SAFETY: the caller's contract, passed on.
            return unsafe { System.dealloc(ptr, layout) };
        }
        // SAFETY: `ptr` came from `alloc` with `layout`, whose shape has not changed since.
        unsafe { dealloc_with(&ServerAlloc, ptr, server_shape(layout)) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if !in_server() {
            // SAFETY: the caller's contract, passed on.
            return unsafe { System.realloc(ptr, layout, new_size) };
        }
        let new = Layout::from_size_align(new_size, layout.align())
            .ok()
            .and_then(server_shape);
        // SAFETY: the caller's contract; the old shape is the one `ptr` was allocated with.
        unsafe {
            realloc_with(
                &ServerAlloc,
                ptr,
                layout,
                server_shape(layout),
                new,
                new_size,
            )
        }
    }
}

/// The size of a memory page, None where the system cannot say.
pub fn page_bytes() -> Option<usize> {
    // SAFETY: sysconf has no preconditions.
    usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).ok()
}

/// Zeroes a freshly allocated block without touching its whole pages: they are handed back to the
/// kernel (MADV_DONTNEED), which maps them to zero-filled pages again on first use, so a 1 GiB
/// filter is neither written nor made resident at creation. Only the partial pages at either end
/// are written. Falls back to writing everything if the kernel refuses.
///
/// # Safety
/// `block` must point to `size` writable bytes that the caller owns.
unsafe fn zero(block: *mut u8, size: usize) {
    let page = match page_bytes() {
        Some(page) if page.is_power_of_two() => page,
        // SAFETY: the caller owns `size` bytes at `block`.
        _ => return unsafe { block.write_bytes(0, size) },
    };
    let start = (block as usize).next_multiple_of(page);
    let end = (block as usize + size) & !(page - 1);
    if end <= start
        // SAFETY: [start, end) is whole pages inside the caller's block, whose contents may go.
        || unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED) }
            != 0
    {
        // SAFETY: the caller owns `size` bytes at `block`.
        return unsafe { block.write_bytes(0, size) };
    }
    // SAFETY: the partial pages at either end lie inside the caller's block.
    unsafe {
        block.write_bytes(0, start - block as usize);
        (end as *mut u8).write_bytes(0, block as usize + size - end);
    }
}

#[cfg(test)]
mod tests {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::RefCell;
    use std::collections::HashMap;

    use super::{alloc_with, dealloc_with, realloc_with, shape, zero, RawAlloc, Shape};

    /// An allocator that aligns every block to exactly 16 bytes, never 32 (as glibc's malloc
    /// may), and checks that every free and resize gets a pointer it handed out.
    #[derive(Default)]
    struct SixteenAligned {
        /// Pointer handed out → (the system block under it, its layout).
        live: RefCell<HashMap<usize, (usize, Layout)>>,
    }

    impl SixteenAligned {
        fn block(&self, size: usize, zeroed: bool) -> *mut u8 {
            let layout = Layout::from_size_align(size + 16, 32).unwrap();
            // SAFETY: a non-zero size.
            let system = unsafe {
                if zeroed {
                    System.alloc_zeroed(layout)
                } else {
                    System.alloc(layout)
                }
            };
            assert!(!system.is_null());
            // SAFETY: 16 bytes into a block of size + 16.
            let handed = unsafe { system.add(16) };
            self.live
                .borrow_mut()
                .insert(handed as usize, (system as usize, layout));
            handed
        }
    }

    impl RawAlloc for SixteenAligned {
        fn alloc(&self, size: usize) -> *mut u8 {
            self.block(size, false)
        }
        fn alloc_zeroed(&self, size: usize) -> *mut u8 {
            self.block(size, true)
        }
        unsafe fn free(&self, block: *mut u8) {
            let (system, layout) = self
                .live
                .borrow_mut()
                .remove(&(block as usize))
                .expect("freed a pointer the allocator never handed out");
            // SAFETY: allocated above with this layout.
            unsafe { System.dealloc(system as *mut u8, layout) };
        }
        unsafe fn realloc(&self, block: *mut u8, size: usize) -> *mut u8 {
            let moved = self.block(size, false);
            let old_len = self.live.borrow()[&(block as usize)].1.size() - 16;
            // SAFETY: both blocks are live and hold the smaller size.
            unsafe {
                std::ptr::copy_nonoverlapping(block, moved, old_len.min(size));
                self.free(block);
            }
            moved
        }
    }

    #[test]
    fn every_alignment_is_honoured_on_an_allocator_that_gives_sixteen() {
        let raw = SixteenAligned::default();
        for align in [1usize, 8, 16, 32, 64, 128, 4096] {
            for size in [1usize, 8, 24, 64, 100, 4096, 70_000] {
                let layout = Layout::from_size_align(size, align).unwrap();
                let layout_shape = shape(layout, false);
                let block = alloc_with(&raw, layout, layout_shape, true);
                assert_eq!(block as usize % align, 0, "size {size} align {align}");
                // SAFETY: the block holds `size` zeroed bytes.
                let bytes = unsafe { std::slice::from_raw_parts_mut(block, size) };
                assert!(bytes.iter().all(|&b| b == 0), "size {size} align {align}");
                bytes.iter_mut().enumerate().for_each(|(i, b)| *b = i as u8);

                let grown = size * 3;
                let new_layout = Layout::from_size_align(grown, align).unwrap();
                // SAFETY: `block` came from alloc_with with `layout_shape`.
                let moved = unsafe {
                    realloc_with(
                        &raw,
                        block,
                        layout,
                        layout_shape,
                        shape(new_layout, false),
                        grown,
                    )
                };
                assert_eq!(moved as usize % align, 0, "grown {size} align {align}");
                // SAFETY: the moved block holds `grown` >= `size` bytes.
                let kept = unsafe { std::slice::from_raw_parts(moved, size) };
                assert!(kept.iter().enumerate().all(|(i, &b)| b == i as u8));
                // SAFETY: `moved` came from realloc_with with the new layout's shape.
                unsafe { dealloc_with(&raw, moved, shape(new_layout, false)) };
            }
        }
        assert!(raw.live.borrow().is_empty(), "a block was never freed");
    }

    #[test]
    fn jemalloc_blocks_of_a_line_are_rounded_not_headed() {
        let line = Layout::from_size_align(4096, 64).unwrap();
        assert_eq!(shape(line, true), Some(Shape::Plain(4096)));
        assert_eq!(shape(line, false), Some(Shape::Headed(4096 + 64)));
        let odd = Layout::from_size_align(100, 64).unwrap();
        assert_eq!(shape(odd, true), Some(Shape::Plain(128)));
        let page = Layout::from_size_align(100, 4096).unwrap();
        assert_eq!(shape(page, true), Some(Shape::Headed(100 + 4096)));
        let word = Layout::from_size_align(12, 8).unwrap();
        assert_eq!(shape(word, false), Some(Shape::Plain(16)));
    }

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
            // SAFETY: the range lies inside `buffer`.
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
