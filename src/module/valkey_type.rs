//! valkey-bloom's type `bloomfltr`, registered beside `MBbloom--` as its alias: a Valkey server
//! that ran valkey-bloom 1.0 starts on its RDB (and AOF, through BF.LOAD), takes its DUMP
//! payloads and a full sync from a valkey-bloom primary, and every such key keeps answering,
//! growing and being saved as valkey-bloom would — in valkey-bloom's own encodings, so that
//! valkey-bloom can take the data back ([`rustbloom_core::valkeybloom`]).
//!
//! Only valkey-bloom objects live under this type, and every one does: its RDB load, BF.LOAD and
//! valkey-bloom's `BF.INSERT ... SEED <32 bytes>` create them, COPY and RENAME keep them, and no
//! command changes a key's kind. Our own filters get `MBbloom--`.

use std::ffi::c_int;
use std::ptr::null_mut;

use redis_module::raw;

use rustbloom_core::redisbloom::{RdbError, RdbSink};
use rustbloom_core::valkeybloom::{blob, rdb as vb_rdb, VbFilter};
use rustbloom_core::{DecodeError, Filter, StoredFilter, StoredValue};

use super::datatype::{load_budget, refused_load, RdbFields, ShortRead, BLOOM_TYPE};
use super::ffi::{log, Io, ValueType};

pub static VALKEY_BLOOM_TYPE: ValueType<StoredValue> =
    ValueType::new_alias(vb_rdb::TYPE_NAME, vb_rdb::ENCODING_VERSION);

/// The valkey-bloom object a value of this type holds (all of them, see the module docs).
fn object(stored: &StoredValue) -> Option<&VbFilter> {
    match stored {
        StoredValue::Filter(stored) => match stored.ready() {
            Some(Filter::ValkeyBloom(filter)) => Some(filter),
            _ => None,
        },
        StoredValue::Descriptor(_) => None,
    }
}

/// The type a value is stored under: valkey-bloom's for its objects, else ours.
pub fn type_of(stored: &StoredValue) -> &'static ValueType<StoredValue> {
    match object(stored) {
        Some(_) => &VALKEY_BLOOM_TYPE,
        None => &BLOOM_TYPE,
    }
}

/// A valkey-bloom object as a key's value.
pub fn value_of(filter: VbFilter) -> StoredValue {
    StoredValue::Filter(StoredFilter::ready_filter(Filter::ValkeyBloom(Box::new(
        filter,
    ))))
}

/// A `bloomfltr` value of encoding `encver`, or why not.
pub fn rdb_load(rdb: Io, encver: c_int) -> Result<StoredValue, String> {
    let mut budget = load_budget(rdb);
    vb_rdb::load(&mut RdbFields(rdb), encver, &mut budget)
        .map(value_of)
        .map_err(|error| match error {
            RdbError::Source(ShortRead) => String::from("short read"),
            RdbError::Decode(DecodeError::Corrupt("encoding version")) => format!(
                "cannot read {} encoding version {encver} (written by a newer valkey-bloom); \
                 this release reads {}",
                vb_rdb::TYPE_NAME,
                vb_rdb::ENCODING_VERSION
            ),
            RdbError::Decode(DecodeError::Corrupt(what)) => {
                format!("corrupt valkey-bloom value ({what})")
            }
            RdbError::Decode(DecodeError::Limit(limit)) => refused_load(rdb, &budget, limit),
        })
}

/// Redis' RDB stream as the sink of a valkey-bloom value's fields.
struct RdbOut<'a>(Io<'a>);

impl RdbSink for RdbOut<'_> {
    fn unsigned(&mut self, value: u64) {
        self.0.save_unsigned(value);
    }
    fn double(&mut self, value: f64) {
        self.0.save_double(value);
    }
    fn string(&mut self, bytes: &[u8]) {
        self.0.save_buffer(bytes);
    }
}

/// Saves the object as valkey-bloom 1.0 does.
pub fn rdb_save(stored: &StoredValue, rdb: Io) {
    match object(stored) {
        Some(filter) => vb_rdb::save(filter, &mut RdbOut(rdb)),
        None => log(
            null_mut(),
            "warning",
            &format!(
                "rustbloom: key '{}' of type {} holds no valkey-bloom object; not saved",
                rdb.key_name(),
                vb_rdb::TYPE_NAME
            ),
        ),
    }
}

/// Writes the key as valkey-bloom's AOF rewrite does: `BF.LOAD key blob`.
pub fn aof_rewrite(stored: &StoredValue, aof: Io, key: *mut raw::RedisModuleString) {
    if let Some(filter) = object(stored) {
        aof.emit_load(key, &blob::encode(filter));
    }
}
