//! The `MBbloom--` native type: persistence and introspection callbacks.
//!
//! Every path writes the one encoding of [`rustbloom_core::stored`]: RDB (and so DUMP/RESTORE,
//! MIGRATE and full sync) stores the header and then the bits in pieces; AOF rewrite emits the
//! BF.LOADCHUNK commands a SCANDUMP would produce; the digest covers the same bytes.
//!
//! RedisBloom registers the same type name, so its RDB values (encoding versions 0–4) arrive
//! here too: at start-up on its data directory, in a full sync from a RedisBloom primary, and in
//! RESTORE of its DUMP payloads. They load as RedisBloom filters
//! ([`rustbloom_core::redisbloom`]) and are saved in our encoding from then on.

use std::ffi::{c_int, c_void};
use std::ptr::null_mut;

use redis_module::{native_types::RedisType, raw};

use rustbloom_core::encoding::RDB_PIECE_BYTES;
use rustbloom_core::redisbloom::{rdb as rb_rdb, RdbError, RdbSource};
use rustbloom_core::scalable::LimitError;
use rustbloom_core::stored::{decode_value, load_commands};
use rustbloom_core::{DecodeError, Filter, StoredFilter, StoredValue};

use super::config;
use super::ffi::{api, guard, log, stop_server, RedisBuffer};
use super::memory::CommandBudget;
use super::partition::descriptor_args;
use super::stats;

/// Name shared with RedisBloom, so that its RDB files load here.
pub const TYPE_NAME: &str = rb_rdb::TYPE_NAME;
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

unsafe fn stored_ref<'a>(value: *const c_void) -> &'a StoredValue {
    &*value.cast::<StoredValue>()
}

/// Hands `out` the RDB form of a filter, the part shared by rdb_save and digest: the header,
/// then the bits in pieces of at most RDB_PIECE_BYTES (one reused buffer, never a second copy
/// of a big filter).
fn each_rdb_string(stored: &StoredValue, mut out: impl FnMut(&mut [u8])) {
    out(&mut stored.encode_header());
    let mut piece = Vec::new();
    for (offset, len) in stored.pieces(RDB_PIECE_BYTES) {
        piece.resize(len as usize, 0);
        stored.read_bits(offset, &mut piece);
        out(&mut piece);
    }
}

extern "C" fn rdb_save(rdb: *mut raw::RedisModuleIO, value: *mut c_void) {
    guard("rdb_save", (), || {
        let save = api!(RedisModule_SaveStringBuffer);
        each_rdb_string(unsafe { stored_ref(value) }, |bytes| unsafe {
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
        let loaded = if encver == ENCODING_VERSION {
            load_filter(rdb)
        } else if (0..=rb_rdb::ENCODING_VERSION).contains(&encver) {
            load_redisbloom(rdb, encver)
        } else {
            Err(format!(
                "cannot read {TYPE_NAME} encoding version {encver} (written by a newer \
                 rustbloom); this release reads {ENCODING_VERSION} and RedisBloom's 0 to {}",
                rb_rdb::ENCODING_VERSION
            ))
        };
        match loaded {
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

fn load_filter(rdb: *mut raw::RedisModuleIO) -> Result<StoredValue, String> {
    let header = load_buffer(rdb).ok_or("short read")?;
    let mut budget = load_budget(rdb);
    let mut stored = decode_value(header.bytes().unwrap_or_default(), &mut budget).map_err(
        |error| match error {
            DecodeError::Corrupt(what) => format!("corrupt header ({what})"),
            DecodeError::Limit(limit) => refused_load(rdb, &budget, limit),
        },
    )?;
    for (offset, len) in stored.pieces(RDB_PIECE_BYTES) {
        let piece = load_buffer(rdb).ok_or("short read")?;
        let bytes = piece.bytes().unwrap_or_default();
        if bytes.len() as u64 != len {
            return Err(format!(
                "bit piece of {} bytes, expected {len}",
                bytes.len()
            ));
        }
        stored.write_bits(offset, bytes);
    }
    Ok(stored)
}

/// The fields of a RedisBloom RDB value, read from Redis' RDB stream.
struct RdbFields(*mut raw::RedisModuleIO);

/// A field Redis could not read (truncated or corrupt stream).
struct ShortRead;

impl RdbFields {
    fn checked<T>(&self, value: T) -> Result<T, ShortRead> {
        if unsafe { api!(RedisModule_IsIOError)(self.0) } != 0 {
            Err(ShortRead)
        } else {
            Ok(value)
        }
    }
}

impl RdbSource for RdbFields {
    type Error = ShortRead;
    type Bytes = RedisBuffer;
    fn unsigned(&mut self) -> Result<u64, ShortRead> {
        self.checked(unsafe { api!(RedisModule_LoadUnsigned)(self.0) })
    }
    fn double(&mut self) -> Result<f64, ShortRead> {
        self.checked(unsafe { api!(RedisModule_LoadDouble)(self.0) })
    }
    fn string(&mut self) -> Result<RedisBuffer, ShortRead> {
        load_buffer(self.0).ok_or(ShortRead)
    }
}

/// A value RedisBloom wrote (encoding 0 to 4): loaded as a RedisBloom filter, ready.
fn load_redisbloom(rdb: *mut raw::RedisModuleIO, encver: c_int) -> Result<StoredValue, String> {
    let mut budget = load_budget(rdb);
    let filter =
        rb_rdb::load(&mut RdbFields(rdb), encver, &mut budget).map_err(|error| match error {
            RdbError::Source(ShortRead) => String::from("short read"),
            RdbError::Decode(DecodeError::Corrupt(what)) => {
                format!("corrupt RedisBloom value, encoding {encver} ({what})")
            }
            RdbError::Decode(DecodeError::Limit(limit)) => refused_load(rdb, &budget, limit),
        })?;
    Ok(StoredValue::Filter(StoredFilter::ready_filter(
        Filter::RedisBloom(filter),
    )))
}

/// Loading the dataset (start-up, full sync) restores what the server already held and admitted,
/// and a replica applies the RESTOREs its primary admitted (the IO context of 7.0 has no client,
/// so "replicated" cannot be told apart: being a replica stands for it). A RESTORE from a client
/// brings something new, which must pass the configured limits.
fn load_budget(rdb: *mut raw::RedisModuleIO) -> CommandBudget {
    let ctx = unsafe { api!(RedisModule_GetContextFromIO)(rdb) };
    CommandBudget::new(ctx, admitted_elsewhere(ctx))
}

/// True while loading the dataset or on a replica (see [`load_budget`]).
fn admitted_elsewhere(ctx: *mut raw::RedisModuleCtx) -> bool {
    let flags = unsafe { api!(RedisModule_GetContextFlags)(ctx) } as u32;
    flags & (raw::REDISMODULE_CTX_FLAGS_LOADING | raw::REDISMODULE_CTX_FLAGS_SLAVE) != 0
}

/// A limit refused a load: the reason, for a client's RESTORE; for the dataset or a replica's
/// copy of its primary, the server stops rather than start without the filter.
fn refused_load(rdb: *mut raw::RedisModuleIO, budget: &CommandBudget, limit: LimitError) -> String {
    let message = config::limit_message(limit);
    if budget.is_replayed() {
        let key = unsafe { key_name(api!(RedisModule_GetKeyNameFromIO)(rdb)) };
        stop_server(&format!("cannot load key '{key}': {message}"));
    }
    message
}

extern "C" fn aof_rewrite(
    aof: *mut raw::RedisModuleIO,
    key: *mut raw::RedisModuleString,
    value: *mut c_void,
) {
    guard("aof_rewrite", (), || {
        let stored = match unsafe { stored_ref(value) } {
            StoredValue::Filter(stored) => stored,
            StoredValue::Descriptor(descriptor) => {
                let args = descriptor_args(descriptor);
                emit_reserve(aof, key, &args);
                return;
            }
        };
        let emit = api!(RedisModule_EmitAOF);
        // A filter still being loaded is rewritten as the same partial load, which stays
        // incomplete (and refuses queries) until its remaining chunks arrive.
        for (iterator, data) in load_commands(stored) {
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

/// A descriptor's AOF form: `BF.RESERVE key` and its arguments ([`descriptor_args`]: six, or
/// seven with a growth value).
fn emit_reserve(aof: *mut raw::RedisModuleIO, key: *mut raw::RedisModuleString, args: &[String]) {
    let emit = api!(RedisModule_EmitAOF);
    let arg = |i: usize| args.get(i).map_or(&b""[..], |arg| arg.as_bytes());
    let [a0, a1, a2, a3, a4, a5, a6] = std::array::from_fn(arg);
    let name = c"BF.RESERVE".as_ptr();
    // SAFETY: the format names one RedisModuleString and then (pointer, length) pairs, one per
    // argument that follows, every one alive for the call.
    unsafe {
        if args.len() == 6 {
            emit(
                aof,
                name,
                c"sbbbbbb".as_ptr(),
                key,
                a0.as_ptr(),
                a0.len(),
                a1.as_ptr(),
                a1.len(),
                a2.as_ptr(),
                a2.len(),
                a3.as_ptr(),
                a3.len(),
                a4.as_ptr(),
                a4.len(),
                a5.as_ptr(),
                a5.len(),
            );
        } else {
            emit(
                aof,
                name,
                c"sbbbbbbb".as_ptr(),
                key,
                a0.as_ptr(),
                a0.len(),
                a1.as_ptr(),
                a1.len(),
                a2.as_ptr(),
                a2.len(),
                a3.as_ptr(),
                a3.len(),
                a4.as_ptr(),
                a4.len(),
                a5.as_ptr(),
                a5.len(),
                a6.as_ptr(),
                a6.len(),
            );
        }
    }
}

extern "C" fn mem_usage(value: *const c_void) -> usize {
    guard("mem_usage", 0, || match unsafe { stored_ref(value) } {
        StoredValue::Filter(stored) => stored.filter().memory_usage() as usize,
        StoredValue::Descriptor(_) => std::mem::size_of::<StoredValue>(),
    })
}

extern "C" fn digest(md: *mut raw::RedisModuleDigest, value: *mut c_void) {
    guard("digest", (), || {
        let add = api!(RedisModule_DigestAddStringBuffer);
        each_rdb_string(unsafe { stored_ref(value) }, |bytes| unsafe {
            add(md, bytes.as_mut_ptr().cast(), bytes.len())
        });
        unsafe { api!(RedisModule_DigestEndSequence)(md) };
    })
}

extern "C" fn free(value: *mut c_void) {
    guard("free", (), || {
        if !value.is_null() {
            let stored = unsafe { Box::from_raw(value.cast::<StoredValue>()) };
            stats::filter_freed(&stored);
        }
    })
}

/// Bytes one unit of free effort stands for. Redis frees a value in the background when its
/// effort exceeds its lazy-free threshold (64): with 64 KiB units, filters above 4 MiB, whose
/// pages take the event loop a millisecond or more to hand back, go to the background thread
/// (UNLINK, FLUSHALL ASYNC, lazyfree-lazy-* settings); smaller ones are freed at once, cheaper
/// than the hand-off.
const FREE_EFFORT_UNIT: u64 = 64 << 10;

extern "C" fn free_effort(_key: *mut raw::RedisModuleString, value: *const c_void) -> usize {
    guard("free_effort", 1, || {
        let bytes = match unsafe { stored_ref(value) } {
            StoredValue::Filter(stored) => stored.filter().allocated_bytes(),
            StoredValue::Descriptor(_) => 0,
        };
        usize::try_from(bytes / FREE_EFFORT_UNIT + 1).unwrap_or(usize::MAX)
    })
}

/// COPY: a deep copy whose bytes the budget admits first, allocated fallibly; a refusal is
/// logged and Redis answers the client an error. On a replica, or while loading, the primary
/// already admitted it.
extern "C" fn copy(
    from: *mut raw::RedisModuleString,
    _to: *mut raw::RedisModuleString,
    value: *const c_void,
) -> *mut c_void {
    guard("copy", null_mut(), || {
        let stored = unsafe { stored_ref(value) };
        let mut budget = CommandBudget::new(null_mut(), admitted_elsewhere(null_mut()));
        match stored.try_clone(&mut budget) {
            Ok(copy) => {
                stats::filter_added(&copy);
                Box::into_raw(Box::new(copy)).cast()
            }
            Err(limit) => {
                let key = unsafe { key_name(from) };
                if budget.is_replayed() {
                    stop_server(&format!(
                        "cannot copy key '{key}': {}",
                        config::limit_message(limit)
                    ));
                }
                stats::count(&stats::REFUSED_BY_LIMITS, 1);
                log(
                    null_mut(),
                    "warning",
                    &format!(
                        "rustbloom: COPY of '{key}' refused: {}",
                        config::limit_message(limit)
                    ),
                );
                null_mut()
            }
        }
    })
}

/// The text of a key name (lossy), for log lines.
unsafe fn key_name(name: *const raw::RedisModuleString) -> String {
    if name.is_null() {
        return String::from("?");
    }
    let mut len = 0usize;
    let ptr = api!(RedisModule_StringPtrLen)(name, &mut len);
    String::from_utf8_lossy(std::slice::from_raw_parts(ptr.cast::<u8>(), len)).into_owned()
}
