//! Adds to an existing window filter: the general add's three phases without its vectors of
//! outcomes and effects (a window add never stops early, never grows and never creates here),
//! replicated as `BF.ADDAT key at_ms items` made of the received arguments.

use std::panic::{catch_unwind, AssertUnwindSafe};

use rustbloom_core::Filter;

use crate::module::errors::{CommandResult, INTERNAL};
use crate::module::ffi::{log, Command, Key};
use crate::module::stats::{self, BeforeAdd};

use super::{unrouted_ready_mut, AddReply};

/// Adds `command`'s arguments from `first_item` (at least one) to the window filter at `key`
/// at `at_time` (BF.ADDAT's; None: the server's clock), then replicates, signals, notifies and
/// answers as the general add does. None, having done nothing, for any other key: missing, of
/// another kind, a partition (routed), still loading or of another type, which the general
/// path answers.
pub(super) fn add_to_window(
    command: &Command,
    key: &mut Key,
    first_item: usize,
    at_time: Option<u64>,
    reply: AddReply,
) -> Option<CommandResult> {
    let filter @ Filter::Window(_) = unrouted_ready_mut(key)? else {
        return None;
    };
    let count = command
        .argc()
        .checked_sub(first_item)
        .filter(|&count| count > 0)?;
    let before = BeforeAdd::of(filter);
    let Filter::Window(window) = &mut *filter else {
        return None;
    };
    // The time the write uses, which replicas and the AOF must apply: known before it starts,
    // so that the items added before a panic are replicated at it.
    let at_ms = window.write_time(at_time.unwrap_or_else(|| command.now_ms()));
    let mut one = false;
    let mut many = Vec::new();
    let panicked = catch_unwind(AssertUnwindSafe(|| {
        if count == 1 {
            one = window.insert(command.arg(first_item), at_ms).new;
        } else {
            many.reserve_exact(count);
            window.insert_many(command.args_from(first_item), at_ms, |new| many.push(new));
        }
    }))
    .is_err();
    let added: &[bool] = match (count, panicked) {
        (1, false) => std::slice::from_ref(&one),
        (1, true) => &[],
        _ => &many,
    };
    before.record(filter);
    stats::count(&stats::ADDS, added.len());

    if !added.is_empty() {
        if at_time.is_some() && !panicked {
            // BF.ADDAT as received: a replica or the AOF applies its time as the primary did,
            // never before the filter's (equal there) latest time, so it reaches the same state.
            command.replicate_verbatim();
        } else {
            command.replicate_at(c"BF.ADDAT", at_ms, first_item, added.len());
        }
        // A window write changes the filter's time even when it adds nothing new.
        key.signal_modified();
    }
    if added.contains(&true) {
        command.notify(c"bf.add");
    }
    if panicked {
        log(
            command.ctx(),
            "warning",
            "rustbloom: an add failed internally; the items added before it were kept and replicated",
        );
        return Some(Err(INTERNAL));
    }
    match reply {
        AddReply::Single => command.reply_bool(one),
        AddReply::Array => {
            command.reply_array(added.len());
            for &new in added {
                command.reply_bool(new);
            }
        }
    }
    Some(Ok(()))
}
