//! BF.MERGE: the union of alike filters into the first key (see [`rustbloom_core::merge`]).

use rustbloom_core::merge::{self, MergeError};
use rustbloom_core::StoredFilter;

use crate::module::errors::{self, replay_mismatch, CommandError, CommandResult, LOADING};
use crate::module::ffi::{Command, Key};
use crate::module::memory::CommandBudget;
use crate::module::stats::{self, Footprint};

use super::{budget, store, stored, stored_mut};

const REDISBLOOM: CommandError = CommandError::Static(
    "ERR BF.MERGE does not merge filters kept in RedisBloom's format (taken over, not rebuilt)",
);
const VALKEYBLOOM: CommandError = CommandError::Static(
    "ERR BF.MERGE does not merge filters kept in valkey-bloom's format (taken over, not rebuilt)",
);

/// `BF.MERGE destkey sourcekey [sourcekey ...]` (PFMERGE's shape): `destkey` becomes the union
/// of itself and the sources, all alike; a missing `destkey` is created as a copy of the first
/// existing source (its parameters, seed, layer shapes and partition), merged with the rest. A
/// missing source is an empty one, as in PFMERGE, and a source naming `destkey` adds nothing;
/// a key of another type is WRONGTYPE. Every check is made before anything changes. With no
/// source left, an existing `destkey` of any format is left as it is and the command answers OK,
/// as it does for a native one.
///
/// Replicated as received: the merge is a pure function of the keys' values (the count
/// estimates use the crate's own ln and exp; window filters are brought to the latest time one
/// of them was written at, never to the server's clock), which replicas and the AOF hold too,
/// as the replication stream orders every earlier write (an expired source's DEL included)
/// before it; the union's bits never travel.
pub fn merge(command: &Command) -> CommandResult {
    if command.argc() < 3 {
        return Err(CommandError::WrongArity);
    }
    let mut dest_key = command.open_key(true);
    let source_keys: Vec<Key> = (2..command.argc())
        .filter(|&index| command.arg(index) != command.arg(1))
        .map(|index| command.open_source_key(index))
        .collect();
    let mut sources: Vec<&StoredFilter> = Vec::with_capacity(source_keys.len());
    for key in &source_keys {
        if let Some(source) = stored(key)? {
            sources.push(source);
        }
    }
    let mut budget = budget(command);
    match stored_mut(&mut dest_key)? {
        Some(dest) => {
            let before = Footprint::of(dest.filter());
            merge::merge_into(dest, &sources, &mut budget)
                .map_err(|error| merge_error(command, &budget, error))?;
            stats::changed(before, Footprint::of(dest.filter()));
            dest_key.signal_modified();
        }
        None => {
            // No source either: nothing to take parameters from, and nothing to write (the
            // union of nothing is empty, as BF.EXISTS on the missing key answers).
            let Some((first, rest)) = sources.split_first() else {
                command.reply_ok();
                return Ok(());
            };
            let created = merge::merged_copy(first, rest, &mut budget)
                .map_err(|error| merge_error(command, &budget, error))?;
            store(&mut dest_key, created);
        }
    }
    command.replicate_verbatim();
    command.notify(c"bf.merge");
    command.reply_ok();
    Ok(())
}

/// The reply to a refused merge. A replayed merge refused here (the primary merged the same
/// values) stops the server, as any replayed write it cannot apply.
fn merge_error(command: &Command, budget: &CommandBudget, error: MergeError) -> CommandError {
    match error {
        MergeError::Limit(limit) => errors::limit_error(command, budget, limit),
        _ if budget.is_replayed() => {
            replay_mismatch(command, &format!("a merge refused here: {error:?}"))
        }
        MergeError::Differ(difference) => {
            CommandError::Owned(format!("ERR filters differ: {}", difference.name()))
        }
        MergeError::RedisBloom => REDISBLOOM,
        MergeError::ValkeyBloom => VALKEYBLOOM,
        MergeError::Loading => LOADING,
    }
}
