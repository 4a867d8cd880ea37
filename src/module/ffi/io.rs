//! The streams of the type callbacks: RDB and AOF, and the digest.

use std::ffi::c_longlong;
use std::marker::PhantomData;

use redis_module::raw;

use super::strings::{string_text, StringVector};
use super::RedisBuffer;

/// The RDB stream of one `rdb_load`/`rdb_save` call (or a RESTORE's, or an AOF rewrite's).
#[derive(Clone, Copy)]
pub struct Io<'a> {
    io: *mut raw::RedisModuleIO,
    call: PhantomData<&'a ()>,
}

impl Io<'_> {
    /// The stream Redis passed a type callback.
    ///
    /// # Safety
    /// `io` is the live stream Redis passed the running callback; the `Io` stays inside it.
    pub(super) unsafe fn new(io: *mut raw::RedisModuleIO) -> Self {
        Io {
            io,
            call: PhantomData,
        }
    }

    pub fn save_buffer(&self, bytes: &[u8]) {
        // SAFETY: a live stream; Redis copies the bytes.
        unsafe { api!(RedisModule_SaveStringBuffer)(self.io, bytes.as_ptr().cast(), bytes.len()) };
    }

    pub fn save_unsigned(&self, value: u64) {
        // SAFETY: a live stream.
        unsafe { api!(RedisModule_SaveUnsigned)(self.io, value) };
    }

    pub fn save_double(&self, value: f64) {
        // SAFETY: a live stream.
        unsafe { api!(RedisModule_SaveDouble)(self.io, value) };
    }

    /// The next string, None on a read error (a short or corrupt stream).
    pub fn load_buffer(&self) -> Option<RedisBuffer> {
        let mut len = 0usize;
        // SAFETY: a live stream; the buffer Redis returns (or null) is ours to free.
        let ptr = unsafe { api!(RedisModule_LoadStringBuffer)(self.io, &mut len) };
        let buffer = RedisBuffer { ptr, len };
        (!self.failed() && buffer.bytes().is_some()).then_some(buffer)
    }

    pub fn load_unsigned(&self) -> Option<u64> {
        // SAFETY: a live stream.
        let value = unsafe { api!(RedisModule_LoadUnsigned)(self.io) };
        (!self.failed()).then_some(value)
    }

    pub fn load_double(&self) -> Option<f64> {
        // SAFETY: a live stream.
        let value = unsafe { api!(RedisModule_LoadDouble)(self.io) };
        (!self.failed()).then_some(value)
    }

    /// True once a read failed (the module sets HANDLE_IO_ERRORS, so Redis reports instead of
    /// stopping).
    fn failed(&self) -> bool {
        // SAFETY: a live stream.
        unsafe { api!(RedisModule_IsIOError)(self.io) != 0 }
    }

    /// The stream's context (a context without a client on Redis 7.0).
    pub fn ctx(&self) -> *mut raw::RedisModuleCtx {
        // SAFETY: a live stream; the context lives as long as the stream.
        unsafe { api!(RedisModule_GetContextFromIO)(self.io) }
    }

    /// The name of the key being loaded (lossy), for messages.
    pub fn key_name(&self) -> String {
        // SAFETY: a live stream; the key name (or null) lives as long as the stream.
        string_text(unsafe { api!(RedisModule_GetKeyNameFromIO)(self.io) })
    }

    /// Writes `BF.RESERVE key` and `args` (a descriptor's, see `partition::descriptor_args`) to
    /// the AOF being rewritten.
    pub fn emit_reserve(&self, key: *mut raw::RedisModuleString, args: &[String]) {
        // SAFETY: no context: strings that are not auto-memory managed.
        let strings =
            unsafe { StringVector::new(std::ptr::null_mut(), args.iter().map(String::as_bytes)) };
        // SAFETY: a live AOF stream, the key Redis passed the callback, and the "sv" format
        // with one string and then a vector of `strings.len()` live strings (Redis takes a
        // reference to each for the call, Redis 7.0's module.c).
        unsafe {
            api!(RedisModule_EmitAOF)(
                self.io,
                c"BF.RESERVE".as_ptr(),
                c"sv".as_ptr(),
                key,
                strings.as_ptr(),
                strings.len(),
            );
        }
    }

    /// Writes `BF.LOAD key blob` (valkey-bloom's form of a key) to the AOF being rewritten.
    pub fn emit_load(&self, key: *mut raw::RedisModuleString, blob: &[u8]) {
        // SAFETY: a live AOF stream, the key Redis passed the callback, and the "sb" format
        // with exactly a string and a buffer with its length.
        unsafe {
            api!(RedisModule_EmitAOF)(
                self.io,
                c"BF.LOAD".as_ptr(),
                c"sb".as_ptr(),
                key,
                blob.as_ptr(),
                blob.len(),
            )
        };
    }

    /// Writes `BF.LOADCHUNK key iterator data` to the AOF being rewritten.
    pub fn emit_loadchunk(&self, key: *mut raw::RedisModuleString, iterator: i64, data: &[u8]) {
        // SAFETY: a live AOF stream, the key Redis passed the callback, and the "slb" format
        // with exactly a string, a long long and a buffer with its length.
        unsafe {
            api!(RedisModule_EmitAOF)(
                self.io,
                c"BF.LOADCHUNK".as_ptr(),
                c"slb".as_ptr(),
                key,
                iterator as c_longlong,
                data.as_ptr(),
                data.len(),
            )
        };
    }
}

/// The digest being computed by one `digest` call (DEBUG DIGEST-VALUE).
pub struct Digest<'a> {
    md: *mut raw::RedisModuleDigest,
    call: PhantomData<&'a ()>,
}

impl Digest<'_> {
    /// # Safety
    /// `md` is the live digest Redis passed the running callback; the `Digest` stays inside it.
    pub(super) unsafe fn new(md: *mut raw::RedisModuleDigest) -> Self {
        Digest {
            md,
            call: PhantomData,
        }
    }

    pub fn add(&self, bytes: &[u8]) {
        // SAFETY: a live digest; Redis reads `bytes.len()` bytes.
        unsafe {
            api!(RedisModule_DigestAddStringBuffer)(self.md, bytes.as_ptr().cast(), bytes.len())
        };
    }

    pub fn end_sequence(&self) {
        // SAFETY: a live digest.
        unsafe { api!(RedisModule_DigestEndSequence)(self.md) };
    }
}
