//! Redis strings: borrowed text, vectors of strings made for one call, buffers Redis allocated.

use std::ffi::{c_char, c_void};

use redis_module::raw;

/// The text of a Redis string, borrowed for as long as the string lives.
///
/// # Safety
/// `string` is null or a live Redis string that outlives `'a` unchanged.
#[inline(always)]
pub(super) unsafe fn string_bytes<'a>(string: *const raw::RedisModuleString) -> &'a [u8] {
    if string.is_null() {
        return &[];
    }
    // SAFETY: a live Redis string (the caller's contract).
    unsafe { live_string_bytes(string) }
}

/// The text of a Redis string known to be live (a command's argument: Redis never passes a null
/// one), without the null check of [`string_bytes`].
///
/// # Safety
/// `string` is a live Redis string that outlives `'a` unchanged.
#[inline(always)]
pub(super) unsafe fn live_string_bytes<'a>(string: *const raw::RedisModuleString) -> &'a [u8] {
    let mut len = std::mem::MaybeUninit::<usize>::uninit();
    // SAFETY: a live Redis string (the caller's contract); StringPtrLen writes the length.
    let ptr = unsafe { hot_api!(RedisModule_StringPtrLen)(string, len.as_mut_ptr()) };
    if ptr.is_null() {
        // Never for a live string (Redis returns its buffer); a branch, not a select, as the
        // check runs for every item of a batch.
        return no_bytes();
    }
    // SAFETY: StringPtrLen returned a non-null pointer (checked) to the string's bytes, alive
    // for 'a, after writing their count to `len`; a length of 0 makes an empty slice there.
    unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len.assume_init()) }
}

#[cold]
fn no_bytes() -> &'static [u8] {
    &[]
}

/// The text of a Redis string Redis handed a callback (lossy), for log lines and messages.
pub fn string_text(string: *const raw::RedisModuleString) -> String {
    // SAFETY: callers pass strings Redis gave the running callback; the bytes are copied here.
    String::from_utf8_lossy(unsafe { string_bytes(string) }).into_owned()
}

/// Redis strings made from bytes for one call that takes a vector of them (the 'v' format of
/// Replicate and EmitAOF), each freed once when dropped, in the context it was made in.
pub(super) struct StringVector {
    ctx: *mut raw::RedisModuleCtx,
    strings: Vec<*mut raw::RedisModuleString>,
}

impl StringVector {
    /// # Safety
    /// `ctx` is null or a live context that outlives the vector.
    pub(super) unsafe fn new<'a>(
        ctx: *mut raw::RedisModuleCtx,
        args: impl IntoIterator<Item = &'a [u8]>,
    ) -> StringVector {
        let strings = args
            .into_iter()
            // SAFETY: a null or live context (the caller's contract); Redis copies
            // `bytes.len()` bytes into a new string.
            .map(|bytes| unsafe {
                api!(RedisModule_CreateString)(ctx, bytes.as_ptr().cast(), bytes.len())
            })
            .collect();
        StringVector { ctx, strings }
    }

    pub(super) fn as_ptr(&self) -> *const *mut raw::RedisModuleString {
        self.strings.as_ptr()
    }

    pub(super) fn len(&self) -> usize {
        self.strings.len()
    }
}

impl Drop for StringVector {
    fn drop(&mut self) {
        for &string in &self.strings {
            // SAFETY: a string made in `ctx` (null or still live) by `new`, freed only here.
            unsafe { api!(RedisModule_FreeString)(self.ctx, string) };
        }
    }
}

/// A buffer Redis allocated, freed on drop.
pub struct RedisBuffer {
    pub(super) ptr: *mut c_char,
    pub(super) len: usize,
}

impl AsRef<[u8]> for RedisBuffer {
    fn as_ref(&self) -> &[u8] {
        self.bytes().unwrap_or_default()
    }
}

impl RedisBuffer {
    /// The buffer's address and length (None when empty), for an owner that takes it over and
    /// then forgets this buffer (see [`crate::module::alloc::keep_loaded_bits`]).
    pub fn block(&self) -> Option<(std::ptr::NonNull<u8>, usize)> {
        std::ptr::NonNull::new(self.ptr.cast::<u8>()).map(|block| (block, self.len))
    }

    pub fn bytes(&self) -> Option<&[u8]> {
        if self.ptr.is_null() {
            None
        } else {
            // SAFETY: Redis allocated `len` bytes at `ptr`, owned by this buffer until drop.
            Some(unsafe { std::slice::from_raw_parts(self.ptr.cast::<u8>(), self.len) })
        }
    }
}

impl Drop for RedisBuffer {
    fn drop(&mut self) {
        if !self.ptr.is_null() {
            // SAFETY: a buffer from Redis' allocator, freed once, here.
            unsafe { api!(RedisModule_Free)(self.ptr.cast::<c_void>()) };
        }
    }
}
