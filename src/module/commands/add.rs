//! The add commands (BF.ADD, BF.MADD, BF.INSERT, BF.ADDAT) and the single-item fast path.

use std::panic::{catch_unwind, AssertUnwindSafe};

use rustbloom_core::layer::Layer;
use rustbloom_core::replication::add_effects;
use rustbloom_core::scalable::{AddOutcome, GrownLayer, InsertError};
use rustbloom_core::{Filter, Outcome, StoredFilter};

use crate::module::args::{self, CreateOptions};
use crate::module::errors::{
    insert_error, replay_mismatch, CommandError, CommandResult, INTERNAL, NOT_FOUND, NOT_WINDOW,
    TIMESTAMP_AHEAD,
};
use crate::module::ffi::{log, Command, Key};
use crate::module::memory::CommandBudget;
use crate::module::partition;
use crate::module::personality;
use crate::module::stats::{self, BeforeAdd};

use super::create::{check_scale_to, create};
use super::replication::replicate;
use super::window::add_to_window;
use super::{budget, ready, ready_mut, store, unrouted_ready_mut, AddReply};

/// Adds `command`'s arguments from `first_item` to the key's filter, creating it from
/// `create_options()` when missing (None: the key must exist). One item to an existing scalable
/// filter that is no partition takes [`add_one`]; the rest [`add_batch`].
#[inline(always)]
fn add_items(
    command: &Command,
    first_item: usize,
    create_options: impl FnOnce() -> Option<CreateOptions>,
    reply: AddReply,
) -> CommandResult {
    let mut key = command.open_key(true);
    if command.argc() == first_item + 1 {
        if let Some(result) = add_one(command, &mut key, first_item, reply) {
            return result;
        }
    }
    add_batch(command, key, first_item, create_options(), None, reply)
}

/// The common add, one item to an existing scalable filter that is no partition (BF.ADD, a
/// BF.MADD or BF.INSERT of one): hashed once, tested and set, then answered, counted and
/// replicated as received, with nothing allocated and no routing check. None, having done
/// nothing, for any other key, which takes [`add_batch`]' general path.
#[inline(always)]
fn add_one(
    command: &Command,
    key: &mut Key,
    first_item: usize,
    reply: AddReply,
) -> Option<CommandResult> {
    let filter @ Filter::Scalable(_) = unrouted_ready_mut(key)? else {
        return None;
    };
    let item = command.arg(first_item);
    let mut budget = budget(command);
    // Only an add to a full newest layer can push one, which the gauges account for from
    // what the filter held before.
    let may_grow = match &*filter {
        Filter::Scalable(scalable) => scalable.layers().last().is_some_and(Layer::is_full),
        _ => return None,
    };
    let before = may_grow.then(|| BeforeAdd::of(filter));
    let Filter::Scalable(scalable) = &mut *filter else {
        return None;
    };
    let added = match catch_unwind(AssertUnwindSafe(|| scalable.insert_one(item, &mut budget))) {
        Ok(Ok((added, None))) => {
            stats::count(&stats::ADDS, 1);
            if added {
                stats::item_counted();
                command.replicate_verbatim();
            }
            added
        }
        Ok(Ok((_, Some(grown)))) => {
            replicate_grown_one(command, filter, before, grown, first_item);
            true
        }
        Ok(Err(error)) => return Some(refused_one(command, &budget, error, reply)),
        Err(panic) => {
            // Dropped here, so that the common path has no payload to drop.
            drop(panic);
            return Some(Err(add_panicked(command)));
        }
    };
    if added {
        key.signal_modified();
        command.notify(c"bf.add");
    }
    if reply == AddReply::Array {
        command.reply_array(1);
    }
    command.reply_bool(added);
    Some(Ok(()))
}

/// [`add_one`] pushed a layer for its item: counted from what the filter held `before`, and
/// replicated as BF.GROW before the item.
#[cold]
fn replicate_grown_one(
    command: &Command,
    filter: &Filter,
    before: Option<BeforeAdd>,
    grown: GrownLayer,
    first_item: usize,
) {
    stats::count(&stats::ADDS, 1);
    if let Some(before) = before {
        before.record(filter);
    }
    let outcome = Outcome::Scalable(AddOutcome {
        added: vec![true],
        error: None,
        grown: vec![grown],
    });
    replicate(
        command,
        first_item,
        &add_effects(filter, &outcome, 1, false),
    );
}

/// [`add_one`]'s item refused by a limit (nothing changed): the error, or for an array reply
/// an array of that one error.
#[cold]
fn refused_one(
    command: &Command,
    budget: &CommandBudget,
    error: InsertError,
    reply: AddReply,
) -> CommandResult {
    let error = insert_error(command, budget, error);
    match reply {
        AddReply::Single => Err(error),
        AddReply::Array => {
            command.reply_array(1);
            command.reply_error(&error);
            Ok(())
        }
    }
}

/// An add panicked (a bug): logged, and answered as an internal error.
#[cold]
fn add_panicked(command: &Command) -> CommandError {
    log(
        command.ctx(),
        "warning",
        "rustbloom: an add failed internally; the items added before it were kept and replicated",
    );
    INTERNAL
}

/// Adds `command`'s arguments from `first_item` to the filter at `key` at `at_ms` (None: the
/// server's clock, read only for a window filter), creating it from `create_options` when
/// missing (None: the key must exist).
fn add_batch(
    command: &Command,
    mut key: Key,
    first_item: usize,
    create_options: Option<CreateOptions>,
    at_ms: Option<u64>,
    reply: AddReply,
) -> CommandResult {
    // Phase 1: the key's items' routing, and the filter to add to (an existing window filter's
    // writes take their own path).
    if let Some(result) = add_to_window(command, &mut key, first_item, at_ms, reply) {
        return result;
    }
    let routed = partition::routed_items(command, &key, first_item)?;
    let mut budget = budget(command);
    let mut created = None;
    let existing = ready_mut(&mut key)?;
    let creating = existing.is_none();
    let filter = match existing {
        Some(filter) => filter,
        None => created.insert(create(
            command,
            create_options.ok_or(NOT_FOUND)?,
            &mut budget,
        )?),
    };

    // The valkey-bloom personality refuses whole a batch a non-scaling valkey-bloom object has no
    // room for (counting every item, as valkey-bloom does since it stopped adding part of such a
    // batch), before anything changes.
    let batch_len = command.args_from(first_item).len();
    if let (Filter::ValkeyBloom(object), true) = (&*filter, personality::is_valkey_bloom()) {
        let room = object.capacity().saturating_sub(object.items());
        if !object.is_scaling() && room < batch_len as u64 {
            return Err(insert_error(command, &budget, InsertError::NonScalingFull));
        }
    }

    // Phase 2: one core operation; its outcome survives a panic half-way.
    let before = BeforeAdd::of(filter);
    let mut outcome = filter.new_outcome(|| at_ms.unwrap_or_else(|| command.now_ms()));
    outcome.reserve(batch_len);
    let panicked = catch_unwind(AssertUnwindSafe(|| match &routed {
        Some(items) => filter.insert_many(items.iter().copied(), &mut budget, &mut outcome),
        None => filter.insert_many(command.args_from(first_item), &mut budget, &mut outcome),
    }))
    .is_err();
    if !creating {
        // A created filter is counted whole when it is stored below.
        before.record(filter);
    }
    let added = outcome.added();
    stats::count(&stats::ADDS, added.len());

    // Phase 3: replicate and store what changed, then answer.
    let effects = add_effects(filter, &outcome, batch_len, creating);
    replicate(command, first_item, &effects);
    if let Some(filter) = created {
        store(&mut key, StoredFilter::ready_filter(filter));
    }
    // A window write changes the filter's time even when it adds nothing new.
    let windowed = matches!(outcome, Outcome::Window(_));
    if added.contains(&true) || (windowed && !added.is_empty()) {
        key.signal_modified();
    }
    if added.contains(&true) {
        command.notify(c"bf.add");
    }
    if panicked {
        return Err(add_panicked(command));
    }
    let error = outcome
        .error()
        .map(|error| insert_error(command, &budget, error));
    match reply {
        AddReply::Single => match error {
            Some(error) => Err(error),
            None => {
                command.reply_bool(added.first() == Some(&true));
                Ok(())
            }
        },
        AddReply::Array => {
            command.reply_array(added.len() + usize::from(error.is_some()));
            for &new in added {
                command.reply_bool(new);
            }
            if let Some(error) = &error {
                command.reply_error(error);
            }
            Ok(())
        }
    }
}

/// `BF.ADD key item`
#[inline(always)]
pub fn add(command: &Command) -> CommandResult {
    if command.argc() != 3 {
        return Err(CommandError::WrongArity);
    }
    add_items(
        command,
        2,
        || Some(CreateOptions::default()),
        AddReply::Single,
    )
}

/// `BF.MADD key item [item ...]`
#[inline(always)]
pub fn madd(command: &Command) -> CommandResult {
    if command.argc() < 3 {
        return Err(CommandError::WrongArity);
    }
    add_items(
        command,
        2,
        || Some(CreateOptions::default()),
        AddReply::Array,
    )
}

/// `BF.INSERT key [options] ITEMS item [item ...]`
pub fn insert(command: &Command) -> CommandResult {
    let parsed = args::parse_insert(command)?;
    check_scale_to(command, &parsed.create)?;
    let create = (!parsed.nocreate).then_some(parsed.create);
    add_items(command, parsed.first_item, move || create, AddReply::Array)
}

/// `BF.ADDAT key timestamp_ms item [item ...]`: adds to a window filter at a given time. Sent
/// by primaries to replicas and written to the AOF for every write to a window filter, so that
/// they apply it at the primary's time; from a client, a write like BF.MADD (the filter's time
/// never goes back: an earlier timestamp counts as its latest one; one more than a window ahead
/// of the server's clock is refused).
pub fn addat(command: &Command) -> CommandResult {
    let at_ms = args::parse_addat(command)?;
    {
        let key = command.open_key(false);
        match ready(&key)? {
            // A client's time far ahead of the clock would become the filter's time, which never
            // goes back: nothing would be forgotten until the clock caught up (never, at 2^64 − 1).
            // A window ahead is allowed for clients whose clocks run a little ahead. Replicas and
            // the AOF apply whatever time the primary used.
            Some(Filter::Window(filter))
                if !command.is_replayed()
                    && at_ms > command.now_ms().saturating_add(filter.params().window_ms) =>
            {
                return Err(TIMESTAMP_AHEAD)
            }
            Some(Filter::Window(_)) => {}
            Some(_) => return Err(NOT_WINDOW),
            None if command.is_replayed() => {
                replay_mismatch(command, "BF.ADDAT of a missing filter")
            }
            None => return Err(NOT_FOUND),
        }
    }
    add_batch(
        command,
        command.open_key(true),
        3,
        None,
        Some(at_ms),
        AddReply::Array,
    )
}
