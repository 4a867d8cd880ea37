//! Lookups: BF.EXISTS, BF.MEXISTS, BF.CARD.

use crate::module::errors::{CommandError, CommandResult};
use crate::module::ffi::Command;
use crate::module::partition;
use crate::module::stats::{self};

use super::ready;

/// `BF.EXISTS key item`
#[inline(always)]
pub fn exists(command: &Command) -> CommandResult {
    if command.argc() != 3 {
        return Err(CommandError::WrongArity);
    }
    let found = lookup_one(command)?;
    command.reply_bool(found);
    Ok(())
}

/// `BF.MEXISTS key item [item ...]`
#[inline(always)]
pub fn mexists(command: &Command) -> CommandResult {
    if command.argc() < 3 {
        return Err(CommandError::WrongArity);
    }
    if command.argc() == 3 {
        let found = lookup_one(command)?;
        command.reply_array(1);
        command.reply_bool(found);
        return Ok(());
    }
    lookup_batch(command)
}

/// BF.MEXISTS of several items: looked up together, then answered.
fn lookup_batch(command: &Command) -> CommandResult {
    let key = command.open_key(false);
    let filter = partition::lookup_filter(command, &key, 2)?;
    // The answers are collected before any is replied, so that a panic half-way (a bug) still
    // answers one well-formed error.
    let items = command.args_from(2);
    let mut found = vec![false; items.len()];
    if let Some(filter) = filter {
        // The closure owns its place in the answers (no vector to reload and grow per answer).
        let mut slots = found.iter_mut();
        let answer = move |answer| {
            if let Some(slot) = slots.next() {
                *slot = answer;
            }
        };
        filter.contains_many(items, || command.now_ms(), answer);
    }
    stats::count(&stats::LOOKUPS, found.len());
    command.reply_array(found.len());
    for answer in found {
        command.reply_bool(answer);
    }
    Ok(())
}

/// The answer for the one item at argument 2 (BF.EXISTS, a BF.MEXISTS of one), counted: hashed
/// once, with no batch, no vector and no allocation; the key is closed before the reply.
#[inline(always)]
fn lookup_one(command: &Command) -> Result<bool, CommandError> {
    let key = command.open_key(false);
    let found = match partition::lookup_filter(command, &key, 2)? {
        Some(filter) => filter.contains(command.arg(2), || command.now_ms()),
        None => false,
    };
    stats::count(&stats::LOOKUPS, 1);
    Ok(found)
}

/// `BF.CARD key`
pub fn card(command: &Command) -> CommandResult {
    if command.argc() != 2 {
        return Err(CommandError::WrongArity);
    }
    let key = command.open_key(false);
    let items = ready(&key)?.map_or(0, |filter| filter.items(command.now_ms()));
    command.reply_count(items);
    Ok(())
}
