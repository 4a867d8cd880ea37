//! BF.SCANDUMP and BF.LOADCHUNK: a filter out and in, chunk by chunk; and BF.LOAD, a
//! valkey-bloom object in one piece, as valkey-bloom's AOF rewrite writes it.

use rustbloom_core::transfer::{decode_load_header, load_chunk};
use rustbloom_core::valkeybloom::blob;
use rustbloom_core::{DecodeError, Filter};

use crate::module::args::{self};
use crate::module::errors::{
    self, CommandError, CommandResult, BAD_DATA, BLOB_DECODE_FAILED, BUSY_KEY, LOADING, NOT_FOUND,
    TIMESTAMP_AHEAD,
};
use crate::module::ffi::Command;
use crate::module::stats;
use crate::module::valkey_type::{value_of, VALKEY_BLOOM_TYPE};

use super::{budget, store, stored, stored_mut};

/// `BF.SCANDUMP key iterator`
pub fn scandump(command: &Command) -> CommandResult {
    if command.argc() != 3 {
        return Err(CommandError::WrongArity);
    }
    let iterator = args::parse_iterator(command.arg(2))?;
    let key = command.open_key(false);
    let stored = stored(&key)?.ok_or(NOT_FOUND)?;
    if stored.is_loading() {
        return Err(LOADING);
    }
    let (next, data) = stored.scandump_step(iterator);
    command.reply_array(2);
    command.reply_count(next);
    command.reply_bulk(&data);
    Ok(())
}

/// `BF.LOADCHUNK key iterator data`
pub fn loadchunk(command: &Command) -> CommandResult {
    if command.argc() != 4 {
        return Err(CommandError::WrongArity);
    }
    let iterator = args::parse_iterator(command.arg(2))?;
    let data = command.arg(3);
    let mut key = command.open_key(true);
    let existing = stored_mut(&mut key)?;
    // As RedisBloom: a header (iterator 1) needs a missing key, and a data chunk an existing one.
    if iterator == 1 {
        if existing.is_some() {
            return Err(BAD_DATA);
        }
        let mut budget = budget(command);
        let stored = decode_load_header(data, &mut budget)
            .map_err(|error| errors::header_error(command, &budget, error))?;
        // As for BF.ADDAT: a window's time far ahead of the clock would stop it forgetting.
        if let Filter::Window(window) = stored.filter() {
            if !command.is_replayed() && window.is_ahead_of(command.now_ms()) {
                return Err(TIMESTAMP_AHEAD);
            }
        }
        store(&mut key, stored);
    } else {
        let stored = existing.ok_or(NOT_FOUND)?;
        load_chunk(stored, iterator, data).map_err(errors::core_error)?;
        key.signal_modified();
    }
    command.replicate_verbatim();
    command.notify(c"bf.loadchunk");
    command.reply_ok();
    Ok(())
}

/// `BF.LOAD key blob`: creates `key` from a valkey-bloom object's blob (what valkey-bloom's AOF
/// rewrite writes for each key), as a key of valkey-bloom's type. As valkey-bloom, onto a
/// missing key only.
pub fn load(command: &Command) -> CommandResult {
    if command.argc() != 3 {
        return Err(CommandError::WrongArity);
    }
    let mut key = command.open_key(true);
    if !key.is_empty() {
        return Err(BUSY_KEY);
    }
    let mut budget = budget(command);
    let filter = blob::decode(command.arg(2), &mut budget).map_err(|error| match error {
        DecodeError::Corrupt(_) => BLOB_DECODE_FAILED,
        limit => errors::header_error(command, &budget, limit),
    })?;
    let value = value_of(filter);
    stats::filter_added(&value);
    key.set_value_as(Box::new(value), &VALKEY_BLOOM_TYPE);
    key.signal_modified();
    command.replicate_verbatim();
    command.notify(c"bf.load");
    command.reply_ok();
    Ok(())
}
