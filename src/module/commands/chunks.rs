//! BF.SCANDUMP and BF.LOADCHUNK: a filter out and in, chunk by chunk.

use rustbloom_core::transfer::{decode_load_header, load_chunk};
use rustbloom_core::Filter;

use crate::module::args::{self};
use crate::module::errors::{
    self, CommandError, CommandResult, BAD_DATA, LOADING, NOT_FOUND, TIMESTAMP_AHEAD,
};
use crate::module::ffi::Command;

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
