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
//!
//! valkey-bloom's type `bloomfltr` is registered too, as an alias of this one: the same values,
//! but its keys hold valkey-bloom's objects and are saved in valkey-bloom's encodings (see
//! [`super::valkey_type`]).

use std::ffi::c_int;
use std::ptr::null_mut;

use redis_module::raw;

use rustbloom_core::budget::LimitError;
use rustbloom_core::encoding::RDB_PIECE_BYTES;
use rustbloom_core::redisbloom::{rdb as rb_rdb, RdbError, RdbSource};
use rustbloom_core::stored::decode_value;
use rustbloom_core::transfer::load_commands;
use rustbloom_core::{DecodeError, Filter, StoredFilter, StoredValue};

use super::alloc;
use super::config;
use super::errors;
use super::ffi::{
    self, log, now_ms, stop_server, DefragCtx, Digest, Io, ModuleValue, RedisBuffer, Registration,
    ValueType,
};
use super::memory::CommandBudget;
use super::partition::descriptor_args;
use super::stats;
use super::valkey_type;

/// Name shared with RedisBloom, so that its RDB files load here.
pub const TYPE_NAME: &str = rb_rdb::TYPE_NAME;
/// Our encodings start at 100; 0–4 are RedisBloom's.
pub const ENCODING_VERSION: i32 = 100;

pub static BLOOM_TYPE: ValueType<StoredValue> = ValueType::new(TYPE_NAME, ENCODING_VERSION);

impl ModuleValue for StoredValue {
    fn value_type() -> &'static ValueType<Self> {
        &BLOOM_TYPE
    }

    fn alias_type() -> Option<&'static ValueType<Self>> {
        Some(&valkey_type::VALKEY_BLOOM_TYPE)
    }

    fn rdb_save(&self, rdb: Io, registration: Registration) {
        match registration {
            Registration::Own => each_rdb_string(self, |bytes| rdb.save_buffer(bytes)),
            Registration::Alias => valkey_type::rdb_save(self, rdb),
        }
    }

    fn rdb_load(rdb: Io, encver: c_int, registration: Registration) -> Option<Self> {
        let loaded = match registration {
            Registration::Own => rdb_load(rdb, encver),
            Registration::Alias => valkey_type::rdb_load(rdb, encver),
        };
        match loaded {
            Ok(filter) => {
                stats::filter_added(&filter);
                Some(filter)
            }
            Err(reason) => {
                log(
                    null_mut(),
                    "warning",
                    &format!("rustbloom: refused a Bloom filter payload: {reason}"),
                );
                None
            }
        }
    }

    fn aof_rewrite(&self, aof: Io, key: *mut raw::RedisModuleString, registration: Registration) {
        match registration {
            Registration::Own => aof_rewrite(self, aof, key),
            Registration::Alias => valkey_type::aof_rewrite(self, aof, key),
        }
    }

    fn mem_usage(&self) -> usize {
        self.memory_usage() as usize
    }

    fn digest(&self, md: Digest) {
        each_rdb_string(self, |bytes| md.add(bytes));
        md.end_sequence();
    }

    fn free(self) {
        stats::filter_freed(&self);
    }

    fn free_effort(&self) -> usize {
        free_effort(self)
    }

    fn copy(&self, from: *mut raw::RedisModuleString) -> Option<Self> {
        copy(self, from)
    }

    fn defrag(value: &mut Box<Self>, defrag: &DefragCtx, from: u64) -> Option<u64> {
        if !config::defrag_enabled() {
            // Done at once, nothing moved (bf.bloom-defrag-enabled no).
            return None;
        }
        let mut relocator = alloc::ServerRelocator::new(defrag);
        let next = StoredValue::relocate(value, &mut relocator, from);
        stats::count(&stats::DEFRAG_HITS, relocator.moved);
        stats::count(&stats::DEFRAG_MISSES, relocator.kept);
        next
    }
}

/// Hands `out` the RDB form of a filter, the part shared by rdb_save and digest: the header,
/// then the bits in pieces of at most RDB_PIECE_BYTES, each straight from the store where it
/// lies in one block (a big filter's), else copied into one reused buffer (never a second copy
/// of a big filter).
fn each_rdb_string(stored: &StoredValue, mut out: impl FnMut(&[u8])) {
    out(&stored.encode_header());
    let mut piece = Vec::new();
    for (offset, len) in stored.pieces(RDB_PIECE_BYTES) {
        let len = len as usize;
        if let Some(bytes) = stored.bits_in_one_block(offset, len) {
            out(bytes);
            continue;
        }
        piece.resize(len, 0);
        stored.read_bits(offset, &mut piece);
        out(&piece);
    }
}

/// A value of any encoding of our type this release reads, or why not.
fn rdb_load(rdb: Io, encver: c_int) -> Result<StoredValue, String> {
    if encver == ENCODING_VERSION {
        load_filter(rdb)
    } else if (0..=rb_rdb::ENCODING_VERSION).contains(&encver) {
        load_redisbloom(rdb, encver)
    } else {
        Err(format!(
            "cannot read {TYPE_NAME} encoding version {encver} (written by a newer \
                 rustbloom); this release reads {ENCODING_VERSION} and RedisBloom's 0 to {}",
            rb_rdb::ENCODING_VERSION
        ))
    }
}

fn load_filter(rdb: Io) -> Result<StoredValue, String> {
    let header = rdb.load_buffer().ok_or("short read")?;
    let mut budget = load_budget(rdb);
    let mut stored = decode_value(header.bytes().unwrap_or_default(), &mut budget).map_err(
        |error| match error {
            DecodeError::Corrupt(what) => format!("corrupt header ({what})"),
            DecodeError::Limit(limit) => refused_load(rdb, &budget, limit),
        },
    )?;
    // Each piece Redis reads into a buffer of its own: kept as a block of the bits where it is
    // one (a big filter's pieces), so that its bytes are neither copied nor faulted in twice;
    // copied where not.
    for (offset, len) in stored.pieces(RDB_PIECE_BYTES) {
        let piece = rdb.load_buffer().ok_or("short read")?;
        let got = piece.bytes().unwrap_or_default().len();
        if got as u64 != len {
            return Err(format!("bit piece of {got} bytes, expected {len}"));
        }
        if let Err(piece) = alloc::keep_loaded_bits(&mut stored, offset, piece) {
            stored.write_bits(offset, piece.bytes().unwrap_or_default());
        }
    }
    // A client's RESTORE is held to BF.ADDAT's rule: a window filter's time never goes back, so
    // one far ahead of the clock would forget nothing until the clock caught up.
    if let StoredValue::Filter(filter) = &stored {
        let Filter::Window(window) = filter.filter() else {
            return Ok(stored);
        };
        if !budget.is_replayed() && window.is_ahead_of(now_ms()) {
            return Err(String::from(
                "window filter's last write more than one window ahead of the server's clock",
            ));
        }
    }
    Ok(stored)
}

/// The fields of a RedisBloom or valkey-bloom RDB value, read from Redis' RDB stream.
pub(super) struct RdbFields<'a>(pub(super) Io<'a>);

/// A field Redis could not read (truncated or corrupt stream).
pub(super) struct ShortRead;

impl RdbSource for RdbFields<'_> {
    type Error = ShortRead;
    type Bytes = RedisBuffer;
    fn unsigned(&mut self) -> Result<u64, ShortRead> {
        self.0.load_unsigned().ok_or(ShortRead)
    }
    fn double(&mut self) -> Result<f64, ShortRead> {
        self.0.load_double().ok_or(ShortRead)
    }
    fn string(&mut self) -> Result<RedisBuffer, ShortRead> {
        self.0.load_buffer().ok_or(ShortRead)
    }
}

/// A value RedisBloom wrote (encoding 0 to 4): loaded as a RedisBloom filter, ready.
fn load_redisbloom(rdb: Io, encver: c_int) -> Result<StoredValue, String> {
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
/// and a read-only replica's RESTOREs come from its primary, which admitted them. Anything else
/// is charged: a client's RESTORE brings something new, on a primary and on a writable replica
/// (`replica-read-only no`) alike. The IO context has no client (nor does COPY's callback), so
/// on a writable replica the primary's own RESTOREs and COPYs are charged too: over this
/// replica's limits they are refused and logged (see [`refused_load`]).
pub(super) fn load_budget(rdb: Io) -> CommandBudget {
    let ctx = rdb.ctx();
    CommandBudget::new(ctx, admitted_elsewhere(ctx))
}

/// True while loading the dataset or on a read-only replica (see [`load_budget`]).
fn admitted_elsewhere(ctx: *mut raw::RedisModuleCtx) -> bool {
    let flags = ffi::context_flags(ctx);
    let read_only_replica = raw::REDISMODULE_CTX_FLAGS_SLAVE | raw::REDISMODULE_CTX_FLAGS_READONLY;
    flags & raw::REDISMODULE_CTX_FLAGS_LOADING != 0
        || flags & read_only_replica == read_only_replica
}

/// On a writable replica, what a refusal may mean, for the log.
fn writable_replica_note(ctx: *mut raw::RedisModuleCtx) -> &'static str {
    if ffi::context_flags(ctx) & raw::REDISMODULE_CTX_FLAGS_SLAVE != 0 {
        " (on this writable replica: if the primary sent it, this replica now lacks the key; \
         give replicas the primary's bf.max-filter-bytes and memory)"
    } else {
        ""
    }
}

/// A limit refused a load: the reason, for a client's RESTORE; for the dataset or a replica's
/// copy of its primary, the server stops rather than start without the filter.
pub(super) fn refused_load(rdb: Io, budget: &CommandBudget, limit: LimitError) -> String {
    let message = errors::limit_message(limit);
    let key = rdb.key_name();
    if budget.is_replayed() {
        stop_server(&format!("cannot load key '{key}': {message}"));
    }
    let note = writable_replica_note(rdb.ctx());
    if !note.is_empty() {
        log(
            null_mut(),
            "warning",
            &format!("rustbloom: RESTORE of '{key}' refused: {message}{note}"),
        );
    }
    message
}

/// A descriptor as its BF.RESERVE, a filter as the BF.LOADCHUNKs of a SCANDUMP.
fn aof_rewrite(stored: &StoredValue, aof: Io, key: *mut raw::RedisModuleString) {
    let stored = match stored {
        StoredValue::Filter(stored) => stored,
        StoredValue::Descriptor(descriptor) => {
            aof.emit_reserve(key, &descriptor_args(descriptor));
            return;
        }
    };
    // A filter still being loaded is rewritten as the same partial load, which stays
    // incomplete (and refuses queries) until its remaining chunks arrive.
    for (iterator, data) in load_commands(stored) {
        aof.emit_loadchunk(key, iterator as i64, &data);
    }
}

/// Bytes one unit of free effort stands for. Redis frees a value in the background when its
/// effort exceeds its lazy-free threshold (64): with 64 KiB units, filters above 4 MiB, whose
/// pages take the event loop a millisecond or more to hand back, go to the background thread
/// (UNLINK, FLUSHALL ASYNC, lazyfree-lazy-* settings); smaller ones are freed at once, cheaper
/// than the hand-off.
const FREE_EFFORT_UNIT: u64 = 64 << 10;

fn free_effort(stored: &StoredValue) -> usize {
    let bytes = match stored {
        StoredValue::Filter(stored) => stored.filter().allocated_bytes(),
        StoredValue::Descriptor(_) => 0,
    };
    usize::try_from(bytes / FREE_EFFORT_UNIT + 1).unwrap_or(usize::MAX)
}

/// COPY: a deep copy whose bytes the budget admits first, allocated fallibly; a refusal is
/// logged and Redis answers the client an error. On a read-only replica, or while loading, the
/// primary already admitted it (see [`load_budget`]).
fn copy(stored: &StoredValue, from: *mut raw::RedisModuleString) -> Option<StoredValue> {
    let mut budget = CommandBudget::new(null_mut(), admitted_elsewhere(null_mut()));
    match stored.try_clone(&mut budget) {
        Ok(copy) => {
            stats::filter_added(&copy);
            Some(copy)
        }
        Err(limit) => {
            let key = ffi::string_text(from);
            if budget.is_replayed() {
                stop_server(&format!(
                    "cannot copy key '{key}': {}",
                    errors::limit_message(limit)
                ));
            }
            stats::count(&stats::REFUSED_BY_LIMITS, 1);
            log(
                null_mut(),
                "warning",
                &format!(
                    "rustbloom: COPY of '{key}' refused: {}{}",
                    errors::limit_message(limit),
                    writable_replica_note(null_mut())
                ),
            );
            None
        }
    }
}
