//! The BF.* command handlers. Each runs in three phases:
//!
//! 1. parse the arguments ([`args`](super::args)) and open the key;
//! 2. one core operation on the filter, charged to the command's [`CommandBudget`], which
//!    returns the per-item results and exactly what changed (items added, layers pushed);
//! 3. reply, signal and notify from those results, and replicate the
//!    [`Effect`](rustbloom_core::replication::Effect)s the core computes from them
//!    ([`rustbloom_core::replication`]), whatever the kind of filter.
//!
//! No reply is written while a filter changes, so the panic guard of
//! [`run_command`](super::ffi::run_command) can always answer one well-formed error, and an add
//! that panics half-way still replicates the items it did add.
//!
//! Replicas and the AOF never size a layer themselves: a creation travels as `BF.RESERVE ...
//! SEED s SHAPE bits hashes layout` (a window's as `... WINDOW ms SEED s SHAPE ...`, the shape
//! of its slots) and each layer an add pushed as `BF.GROW key index bits hashes layout` between
//! the `BF.MADD`s of the items before and after it; an add that stopped replicates only the
//! items before the stop. A write replayed from the primary or the AOF is never refused by
//! policy; if its allocation fails the server stops ([`stop_server`](super::ffi::stop_server)).
//!
//! One file per concern: `create.rs` (BF.RESERVE, the creation behind a first add, BF.GROW),
//! `add.rs` (the adds and the single-item fast path), `lookup.rs`, `info.rs` (BF.INFO,
//! BF.DEBUG), `chunks.rs` (BF.SCANDUMP, BF.LOADCHUNK), `merge.rs` (BF.MERGE), `replication.rs` (the commands that
//! carry a write's effects) and `window.rs` (adds to an existing window filter); here, what they
//! share.

mod add;
mod chunks;
mod create;
mod info;
mod lookup;
mod merge;
mod replication;
mod window;

pub use add::{add, addat, insert, madd};
pub use chunks::{load, loadchunk, scandump};
pub use create::{grow, reserve};
pub use info::{debug, info};
pub use lookup::{card, exists, mexists};
pub use merge::merge;

use rustbloom_core::{Filter, StoredFilter, StoredValue};

use super::errors::{CommandError, DESCRIPTOR, LOADING};
use super::ffi::{Command, Key};
use super::memory::CommandBudget;
use super::stats;
use super::valkey_type;

/// How an add command answers.
#[derive(Clone, Copy, PartialEq, Eq)]
enum AddReply {
    /// BF.ADD: one boolean, or the error itself.
    Single,
    /// BF.MADD, BF.INSERT: an array, ending at the first error.
    Array,
}

/// The ready filter at `key` when it is one of its own, not a partition of a partitioned one:
/// what the fast paths of the adds take (None for a missing key, another type, a partition, a
/// descriptor or a filter still loading, which the general path answers).
#[inline(always)]
fn unrouted_ready_mut<'a>(key: &'a mut Key) -> Option<&'a mut Filter> {
    let Ok(Some(StoredValue::Filter(stored))) = key.value_mut::<StoredValue>() else {
        return None;
    };
    // The test of `StoredFilter::plain_ready`, written as its two parts: so compiled into
    // BF.ADD, it measured 6 instructions a call fewer than the one test.
    if stored.partition().is_some() {
        return None;
    }
    stored.ready_mut()
}

/// The budget of this call: unlimited when it replays what a primary or the AOF accepted.
fn budget(command: &Command) -> CommandBudget {
    CommandBudget::for_command(command.ctx())
}

/// Stores a new value at the command's key: a valkey-bloom object under valkey-bloom's type,
/// where every such object lives (see [`valkey_type`](super::valkey_type)), anything else under
/// ours.
fn store(key: &mut Key, stored: StoredFilter) {
    let stored = StoredValue::Filter(stored);
    stats::filter_added(&stored);
    let value_type = valkey_type::type_of(&stored);
    key.set_value_as(Box::new(stored), value_type);
    key.signal_modified();
}

/// The filter value at `key` (complete or not): Ok(None) when the key is missing; an error
/// for a partitioned filter's descriptor, which holds no items.
fn stored<'a>(key: &'a Key) -> Result<Option<&'a StoredFilter>, CommandError> {
    match key.value::<StoredValue>()? {
        Some(StoredValue::Filter(stored)) => Ok(Some(stored)),
        Some(StoredValue::Descriptor(_)) => Err(DESCRIPTOR),
        None => Ok(None),
    }
}

/// [`stored`] for writing.
fn stored_mut<'a>(key: &'a mut Key) -> Result<Option<&'a mut StoredFilter>, CommandError> {
    match key.value_mut::<StoredValue>()? {
        Some(StoredValue::Filter(stored)) => Ok(Some(stored)),
        Some(StoredValue::Descriptor(_)) => Err(DESCRIPTOR),
        None => Ok(None),
    }
}

/// The complete filter at `key` for reading: Ok(None) when the key is missing.
fn ready<'a>(key: &'a Key) -> Result<Option<&'a Filter>, CommandError> {
    match stored(key)? {
        Some(stored) => stored.ready().map(Some).ok_or(LOADING),
        None => Ok(None),
    }
}

/// The complete filter at `key` for writing: Ok(None) when the key is missing.
fn ready_mut<'a>(key: &'a mut Key) -> Result<Option<&'a mut Filter>, CommandError> {
    match stored_mut(key)? {
        Some(stored) => stored.ready_mut().map(Some).ok_or(LOADING),
        None => Ok(None),
    }
}
