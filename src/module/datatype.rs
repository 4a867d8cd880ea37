//! The `MBbloom--` native type: persistence and introspection callbacks.
//!
//! Every path writes the one encoding of [`rustbloom_core::encoding`]: RDB (and so DUMP/RESTORE,
//! MIGRATE and full sync) stores the header and then the bits in pieces; AOF rewrite emits the
//! BF.LOADCHUNK commands a SCANDUMP would produce; the digest covers the same bytes.

use std::ffi::{c_int, c_void};
use std::ptr::null_mut;

use redis_module::{native_types::RedisType, raw};

use rustbloom_core::encoding::{
    data_chunk, decode_header, encode_header, encode_transfer_header, pieces, CHUNK_BYTES,
    RDB_PIECE_BYTES,
};
use rustbloom_core::{BloomFilter, DecodeError, Limits};

use super::config;
use super::ffi::{api, guard, log, RedisBuffer};
use super::memory;
use super::stats;

/// Name shared with RedisBloom, so one day RDB files of either module can be read by the other.
pub const TYPE_NAME: &str = "MBbloom--";
/// Our encodings start at 100; 0–4 are RedisBloom's.
pub const ENCODING_VERSION: i32 = 100;

pub static BLOOM_TYPE: RedisType = RedisType::new(
    TYPE_NAME,
    ENCODING_VERSION,
    raw::RedisModuleTypeMethods {
        version: 3,
        rdb_load: Some(rdb_load),
        rdb_save: Some(rdb_save),
        aof_rewrite: Some(aof_rewrite),
        mem_usage: Some(mem_usage),
        digest: Some(digest),
        free: Some(free),
        aux_load: None,
        aux_save: None,
        aux_save_triggers: 0,
        free_effort: Some(free_effort),
        unlink: None,
        copy: Some(copy),
        defrag: None,
        mem_usage2: None,
        free_effort2: None,
        unlink2: None,
        copy2: None,
        aux_save2: None,
    },
);

/// The registered type, for key lookups.
pub fn bloom_type() -> *mut raw::RedisModuleType {
    *BLOOM_TYPE.raw_type.borrow()
}

unsafe fn filter_ref<'a>(value: *mut c_void) -> &'a BloomFilter {
    &*value.cast::<BloomFilter>()
}

/// Hands `out` the RDB form of a filter, the part shared by rdb_save and digest: the header,
/// then the bits in pieces of at most RDB_PIECE_BYTES (one reused buffer, never a second copy
/// of a big filter).
fn each_rdb_string(filter: &BloomFilter, mut out: impl FnMut(&mut [u8])) {
    out(&mut encode_header(filter));
    let mut piece = Vec::new();
    for (offset, len) in pieces(filter.bytes(), RDB_PIECE_BYTES) {
        piece.resize(len as usize, 0);
        filter.read_bits(offset, &mut piece);
        out(&mut piece);
    }
}

extern "C" fn rdb_save(rdb: *mut raw::RedisModuleIO, value: *mut c_void) {
    guard("rdb_save", (), || {
        let save = api!(RedisModule_SaveStringBuffer);
        each_rdb_string(unsafe { filter_ref(value) }, |bytes| unsafe {
            save(rdb, bytes.as_ptr().cast(), bytes.len())
        });
    })
}

fn load_buffer(rdb: *mut raw::RedisModuleIO) -> Option<RedisBuffer> {
    let mut len = 0usize;
    let ptr = unsafe { api!(RedisModule_LoadStringBuffer)(rdb, &mut len) };
    let buffer = unsafe { RedisBuffer::new(ptr, len) };
    let failed = unsafe { api!(RedisModule_IsIOError)(rdb) } != 0;
    (!failed && buffer.bytes().is_some()).then_some(buffer)
}

extern "C" fn rdb_load(rdb: *mut raw::RedisModuleIO, encver: c_int) -> *mut c_void {
    guard("rdb_load", null_mut(), || {
        if encver != ENCODING_VERSION {
            let writer = if encver < ENCODING_VERSION {
                "RedisBloom's format"
            } else {
                "written by a newer rustbloom"
            };
            log(
                null_mut(),
                "warning",
                &format!(
                    "rustbloom: cannot read {TYPE_NAME} encoding version {encver} ({writer}); \
                     this release reads only version {ENCODING_VERSION}"
                ),
            );
            return null_mut();
        }
        match load_filter(rdb) {
            Ok(filter) => {
                stats::filter_added(&filter);
                Box::into_raw(Box::new(filter)).cast()
            }
            Err(reason) => {
                log(
                    null_mut(),
                    "warning",
                    &format!("rustbloom: refused a Bloom filter payload: {reason}"),
                );
                null_mut()
            }
        }
    })
}

fn load_filter(rdb: *mut raw::RedisModuleIO) -> Result<BloomFilter, String> {
    let header = load_buffer(rdb).ok_or("short read")?;
    let mut filter =
        decode_header(header.bytes().unwrap_or_default(), load_limits(rdb)).map_err(|error| {
            match error {
                DecodeError::Corrupt(what) => format!("corrupt header ({what})"),
                DecodeError::Limit(limit) => config::limit_message(limit),
            }
        })?;
    for (offset, len) in pieces(filter.bytes(), RDB_PIECE_BYTES) {
        let piece = load_buffer(rdb).ok_or("short read")?;
        let bytes = piece.bytes().unwrap_or_default();
        if bytes.len() as u64 != len {
            return Err(format!(
                "bit piece of {} bytes, expected {len}",
                bytes.len()
            ));
        }
        filter.write_bits(offset, bytes);
    }
    Ok(filter)
}

/// Loading the dataset (start-up, full sync) restores what the server already held and admitted,
/// and a replica applies the RESTOREs its primary admitted (the IO context of 7.0 has no client,
/// so "replicated" cannot be told apart: being a replica stands for it). A RESTORE from a client
/// brings something new, which must pass the configured limits.
fn load_limits(rdb: *mut raw::RedisModuleIO) -> Limits {
    let ctx = unsafe { api!(RedisModule_GetContextFromIO)(rdb) };
    let flags = unsafe { api!(RedisModule_GetContextFlags)(ctx) } as u32;
    if flags & (raw::REDISMODULE_CTX_FLAGS_LOADING | raw::REDISMODULE_CTX_FLAGS_SLAVE) != 0 {
        Limits::UNLIMITED
    } else {
        config::limits(memory::headroom(ctx))
    }
}

extern "C" fn aof_rewrite(
    aof: *mut raw::RedisModuleIO,
    key: *mut raw::RedisModuleString,
    value: *mut c_void,
) {
    guard("aof_rewrite", (), || {
        let filter = unsafe { filter_ref(value) };
        let emit = api!(RedisModule_EmitAOF);
        // A filter still being loaded is rewritten as the same partial load, which stays
        // incomplete (and refuses queries) until its remaining chunks arrive.
        let loaded = filter.loading().unwrap_or_else(|| filter.bytes());
        let header = (1, encode_transfer_header(filter));
        let chunks = pieces(loaded, CHUNK_BYTES)
            .map(|(offset, len)| (1 + offset + len, data_chunk(filter, offset, len)));
        for (iterator, data) in std::iter::once(header).chain(chunks) {
            unsafe {
                emit(
                    aof,
                    c"BF.LOADCHUNK".as_ptr(),
                    c"slb".as_ptr(),
                    key,
                    iterator as std::ffi::c_longlong,
                    data.as_ptr(),
                    data.len(),
                )
            };
        }
    })
}

extern "C" fn mem_usage(value: *const c_void) -> usize {
    guard("mem_usage", 0, || unsafe {
        filter_ref(value.cast_mut()).memory_usage() as usize
    })
}

extern "C" fn digest(md: *mut raw::RedisModuleDigest, value: *mut c_void) {
    guard("digest", (), || {
        let add = api!(RedisModule_DigestAddStringBuffer);
        each_rdb_string(unsafe { filter_ref(value) }, |bytes| unsafe {
            add(md, bytes.as_mut_ptr().cast(), bytes.len())
        });
        unsafe { api!(RedisModule_DigestEndSequence)(md) };
    })
}

extern "C" fn free(value: *mut c_void) {
    guard("free", (), || {
        if !value.is_null() {
            let filter = unsafe { Box::from_raw(value.cast::<BloomFilter>()) };
            stats::filter_freed(&filter);
        }
    })
}

/// Freeing costs one deallocation per layer.
extern "C" fn free_effort(_key: *mut raw::RedisModuleString, value: *const c_void) -> usize {
    guard("free_effort", 1, || unsafe {
        filter_ref(value.cast_mut()).layers().len()
    })
}

extern "C" fn copy(
    _from: *mut raw::RedisModuleString,
    _to: *mut raw::RedisModuleString,
    value: *const c_void,
) -> *mut c_void {
    guard("copy", null_mut(), || {
        let copy = unsafe { filter_ref(value.cast_mut()) }.clone();
        stats::filter_added(&copy);
        Box::into_raw(Box::new(copy)).cast()
    })
}
