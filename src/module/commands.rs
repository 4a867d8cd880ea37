//! The BF.* command handlers. Each runs in three phases:
//!
//! 1. parse the arguments ([`args`](super::args)) and open the key;
//! 2. one core operation on the filter, charged to the command's [`CommandBudget`], which
//!    returns the per-item results and exactly what changed (items added, layers pushed);
//! 3. reply, replicate, signal and notify from those results.
//!
//! No reply is written while a filter changes, so the panic guard of
//! [`run_command`](super::ffi::run_command) can always answer one well-formed error, and an add
//! that panics half-way still replicates the items it did add.
//!
//! Replicas and the AOF never size a layer themselves: a creation travels as `BF.RESERVE ...
//! SEED s SHAPE bits hashes layout` and each layer an add pushed as `BF.GROW key index bits
//! hashes layout` between the `BF.MADD`s of the items before and after it. A write replayed from
//! the primary or the AOF is never refused by policy; if its allocation fails the server stops
//! ([`stop_server`]).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};

use rustbloom_core::encoding::{decode_load_header, load_chunk, scandump_step, ChunkError};
use rustbloom_core::scalable::{CreateError, LimitError, PushError};
use rustbloom_core::{
    AddOutcome, BloomFilter, DecodeError, FilterParams, Growth, InsertError, LayerSize,
    SizingError, StoredFilter,
};

use super::args::{self, CreateOptions, InfoField};
use super::config;
use super::datatype::bloom_type;
use super::ffi::{log, stop_server, Command, CommandError, CommandResult, Key};
use super::memory::CommandBudget;
use super::stats::{self, Footprint};

const NOT_FOUND: CommandError = CommandError::Static("ERR not found");
const ITEM_EXISTS: CommandError = CommandError::Static("ERR item exists");
const FULL: CommandError = CommandError::Static("ERR non scaling filter is full");
const LOADING: CommandError = CommandError::Static("ERR filter is being loaded by BF.LOADCHUNK");
const BAD_DATA: CommandError = CommandError::Static("ERR received bad data");
const BAD_OFFSET: CommandError = CommandError::Static("ERR invalid offset - no link found");
const TOO_BIG: CommandError =
    CommandError::Static("ERR invalid chunk - Too big for current filter");
const INTERNAL: CommandError = CommandError::Static("ERR internal error in rustbloom");

/// The budget of this call: unlimited when it replays what a primary or the AOF accepted.
fn budget(command: &Command) -> CommandBudget {
    CommandBudget::new(command.ctx(), command.is_replayed())
}

/// The reply to a memory limit: an error for a client; for a replayed write, which must not be
/// dropped, the server stops.
fn limit_error(command: &Command, budget: &CommandBudget, limit: LimitError) -> CommandError {
    if budget.is_replayed() {
        let key = String::from_utf8_lossy(command.arg(1));
        stop_server(&format!(
            "cannot apply a replicated or AOF write to key '{key}': {}",
            config::limit_message(limit)
        ));
    }
    stats::count(&stats::REFUSED_BY_LIMITS, 1);
    CommandError::Owned(config::limit_message(limit))
}

/// A replayed write that this server cannot apply as the primary did: stop.
fn replay_mismatch(command: &Command, why: &str) -> ! {
    let key = String::from_utf8_lossy(command.arg(1));
    stop_server(&format!(
        "cannot apply a replicated or AOF write to key '{key}': {why}"
    ))
}

/// Stores a new value at the command's key.
fn store(key: &Key, stored: StoredFilter) {
    stats::filter_added(&stored);
    key.set_value(bloom_type(), Box::new(stored));
    key.signal_modified();
}

/// The complete filter at `key` for reading: Ok(None) when the key is missing.
fn ready(key: &Key) -> Result<Option<&BloomFilter>, CommandError> {
    match key.value::<StoredFilter>(bloom_type())? {
        Some(stored) => stored.ready().map(Some).ok_or(LOADING),
        None => Ok(None),
    }
}

/// The complete filter at `key` for writing: Ok(None) when the key is missing.
fn ready_mut(key: &Key) -> Result<Option<&mut BloomFilter>, CommandError> {
    match key.value::<StoredFilter>(bloom_type())? {
        Some(stored) => stored.ready_mut().map(Some).ok_or(LOADING),
        None => Ok(None),
    }
}

/// A seed nobody can predict: a fresh std hasher is keyed from the OS's randomness once per
/// process and then per instance; mixing in a counter and the clock keeps seeds distinct.
fn random_seed() -> u64 {
    use std::collections::hash_map::RandomState;
    use std::hash::{BuildHasher, Hasher};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    if let Ok(now) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        hasher.write_u128(now.as_nanos());
    }
    hasher.finish()
}

/// Creates a filter from explicit options and the configured defaults.
fn create(
    command: &Command,
    options: CreateOptions,
    budget: &mut CommandBudget,
) -> Result<BloomFilter, CommandError> {
    let defaults = config::defaults();
    let params = FilterParams {
        capacity: options.capacity.unwrap_or(defaults.capacity),
        error_rate: options.error_rate.unwrap_or(defaults.error_rate),
        growth: options.growth.unwrap_or(defaults.growth),
        seed: options.seed.or(defaults.seed).unwrap_or_else(random_seed),
    };
    let created = match options.shape {
        Some(shape) => BloomFilter::with_first_layer(params, shape, budget),
        None => BloomFilter::new(params, budget),
    };
    created.map_err(|error| match error {
        CreateError::Sizing(SizingError::ErrorRate) => {
            CommandError::Static("ERR error rate too small for a Bloom filter")
        }
        CreateError::Sizing(SizingError::Capacity) => {
            CommandError::Static("ERR capacity too large for a Bloom filter")
        }
        CreateError::Shape(why) if budget.is_replayed() => replay_mismatch(command, why),
        CreateError::Shape(why) => CommandError::Owned(format!("ERR bad layer shape: {why}")),
        CreateError::Limit(limit) => limit_error(command, budget, limit),
    })
}

/// A layer shape as BF.RESERVE's SHAPE and BF.GROW carry it.
fn shape_args(size: LayerSize) -> [String; 3] {
    [
        size.bits.to_string(),
        size.num_hashes.to_string(),
        size.layout.lines().to_string(),
    ]
}

/// Replicates the creation of `filter` with every parameter explicit and its first layer's exact
/// shape, so that a replica depends on neither its own defaults, its own random seed, nor its
/// own sizing code.
fn replicate_creation(command: &Command, filter: &BloomFilter) {
    let params = filter.params();
    let error_rate = params.error_rate.to_string();
    let capacity = params.capacity.to_string();
    let seed = params.seed.to_string();
    let shape = shape_args(filter.layers()[0].size());
    let expansion;
    let mut argv: Vec<&[u8]> = vec![command.arg(1), error_rate.as_bytes(), capacity.as_bytes()];
    match params.growth {
        Growth::NonScaling => argv.push(b"NONSCALING"),
        Growth::Scaling { expansion: x } => {
            expansion = x.to_string();
            argv.extend([b"EXPANSION".as_slice(), expansion.as_bytes()]);
        }
    }
    argv.extend([b"SEED".as_slice(), seed.as_bytes(), b"SHAPE"]);
    argv.extend(shape.iter().map(String::as_bytes));
    command.replicate("BF.RESERVE", argv);
}

/// `BF.RESERVE key error_rate capacity [EXPANSION n] [NONSCALING] [SEED s] [SHAPE bits hashes layout]`
pub fn reserve(command: &Command) -> CommandResult {
    let options = args::parse_reserve(command)?;
    let key = command.open_key(true);
    if key.value::<StoredFilter>(bloom_type())?.is_some() {
        return Err(ITEM_EXISTS);
    }
    let filter = create(command, options, &mut budget(command))?;
    replicate_creation(command, &filter);
    store(&key, StoredFilter::Ready(filter));
    command.notify(c"bf.reserve");
    command.reply_ok();
    Ok(())
}

/// How an add command answers.
#[derive(Clone, Copy, PartialEq, Eq)]
enum AddReply {
    /// BF.ADD: one boolean, or the error itself.
    Single,
    /// BF.MADD, BF.INSERT: an array, ending at the first error.
    Array,
}

/// Replicates what an add changed. When it neither created, grew nor stopped early, the command
/// as received (a replica reaches the same bits from the same items); otherwise the exact
/// sequence: the creation, then `BF.MADD` of the items added before each new layer, `BF.GROW`
/// with that layer's shape, and so on.
fn replicate_adds(
    command: &Command,
    first_item: usize,
    outcome: &AddOutcome,
    created: Option<&BloomFilter>,
    complete: bool,
) {
    if let Some(filter) = created {
        replicate_creation(command, filter);
    }
    if created.is_none() && complete && outcome.grown.is_empty() {
        if outcome.added.contains(&true) {
            command.replicate_verbatim();
        }
        return;
    }
    let key = command.arg(1);
    let mut positions = outcome.added_positions().peekable();
    let mut madd_until = |end: usize| {
        let mut argv: Vec<&[u8]> = vec![key];
        while let Some(position) = positions.next_if(|&position| position < end) {
            argv.push(command.arg(first_item + position));
        }
        if argv.len() > 1 {
            command.replicate("BF.MADD", argv);
        }
    };
    for grown in &outcome.grown {
        madd_until(grown.first_item);
        let index = grown.index.to_string();
        let shape = shape_args(grown.size);
        let mut argv: Vec<&[u8]> = vec![key, index.as_bytes()];
        argv.extend(shape.iter().map(String::as_bytes));
        command.replicate("BF.GROW", argv);
    }
    madd_until(usize::MAX);
}

/// The error an add stopped at, as users see it.
fn insert_error(command: &Command, budget: &CommandBudget, error: InsertError) -> CommandError {
    match error {
        InsertError::NonScalingFull => FULL,
        InsertError::CannotGrow => CommandError::Static(
            "ERR filter cannot grow any further (layer limit reached); create a larger one",
        ),
        InsertError::Limit(limit) => limit_error(command, budget, limit),
        InsertError::Present => INTERNAL,
    }
}

/// Adds `command`'s arguments from `first_item` to the key's filter, creating it from
/// `create_options` when missing (None: the key must exist).
fn add_items(
    command: &Command,
    first_item: usize,
    create_options: Option<CreateOptions>,
    reply: AddReply,
) -> CommandResult {
    // Phase 1: the key, and the filter to add to.
    let key = command.open_key(true);
    let mut budget = budget(command);
    let mut created = None;
    let creating = ready_mut(&key)?.is_none();
    let filter = match ready_mut(&key)? {
        Some(filter) => filter,
        None => created.insert(create(
            command,
            create_options.ok_or(NOT_FOUND)?,
            &mut budget,
        )?),
    };

    // Phase 2: one core operation; its outcome survives a panic half-way.
    let before = Footprint::of(filter);
    let mut outcome = AddOutcome::default();
    let items = command.args_from(first_item);
    let panicked = catch_unwind(AssertUnwindSafe(|| {
        filter.insert_many(items, &mut budget, &mut outcome)
    }))
    .is_err();
    if !creating {
        // A created filter is counted whole when it is stored below.
        stats::changed(before, Footprint::of(filter));
    }
    stats::count(&stats::ADDS, outcome.added.len());

    // Phase 3: replicate and store what changed, then answer.
    let complete = !panicked && outcome.error.is_none();
    replicate_adds(command, first_item, &outcome, created.as_ref(), complete);
    if let Some(filter) = created {
        store(&key, StoredFilter::Ready(filter));
    }
    if outcome.added.contains(&true) {
        key.signal_modified();
        command.notify(c"bf.add");
    }
    if panicked {
        log(
            command.ctx(),
            "warning",
            "rustbloom: an add failed internally; the items added before it were kept and replicated",
        );
        return Err(INTERNAL);
    }
    let error = outcome
        .error
        .map(|error| insert_error(command, &budget, error));
    match reply {
        AddReply::Single => match error {
            Some(error) => Err(error),
            None => {
                command.reply_bool(outcome.added.first() == Some(&true));
                Ok(())
            }
        },
        AddReply::Array => {
            command.reply_array(outcome.added.len() + usize::from(error.is_some()));
            for &new in &outcome.added {
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
pub fn add(command: &Command) -> CommandResult {
    if command.argc() != 3 {
        return Err(CommandError::WrongArity);
    }
    add_items(command, 2, Some(CreateOptions::default()), AddReply::Single)
}

/// `BF.MADD key item [item ...]`
pub fn madd(command: &Command) -> CommandResult {
    if command.argc() < 3 {
        return Err(CommandError::WrongArity);
    }
    add_items(command, 2, Some(CreateOptions::default()), AddReply::Array)
}

/// `BF.INSERT key [options] ITEMS item [item ...]`
pub fn insert(command: &Command) -> CommandResult {
    let parsed = args::parse_insert(command)?;
    let create = (!parsed.nocreate).then_some(parsed.create);
    add_items(command, parsed.first_item, create, AddReply::Array)
}

/// `BF.GROW key index bits hashes layout`: pushes the layer a primary pushed, with its shape.
/// Sent by primaries to replicas and written to the AOF; from a client it is checked like any
/// write (the shape must fit the filter, the budget must admit it).
pub fn grow(command: &Command) -> CommandResult {
    let (index, shape) = args::parse_grow(command)?;
    let key = command.open_key(true);
    let mut budget = budget(command);
    let Some(filter) = ready_mut(&key)? else {
        if budget.is_replayed() {
            replay_mismatch(command, "BF.GROW of a missing filter");
        }
        return Err(NOT_FOUND);
    };
    let before = Footprint::of(filter);
    filter
        .push_layer(index, shape, &mut budget)
        .map_err(|error| match error {
            PushError::Shape(why) if budget.is_replayed() => replay_mismatch(command, why),
            PushError::Shape(why) => CommandError::Owned(format!("ERR cannot grow: {why}")),
            PushError::Limit(limit) => limit_error(command, &budget, limit),
        })?;
    stats::changed(before, Footprint::of(filter));
    command.replicate_verbatim();
    key.signal_modified();
    command.notify(c"bf.grow");
    command.reply_ok();
    Ok(())
}

/// `BF.EXISTS key item`
pub fn exists(command: &Command) -> CommandResult {
    if command.argc() != 3 {
        return Err(CommandError::WrongArity);
    }
    let key = command.open_key(false);
    let found = ready(&key)?.is_some_and(|filter| filter.contains(command.arg(2)));
    stats::count(&stats::LOOKUPS, 1);
    command.reply_bool(found);
    Ok(())
}

/// `BF.MEXISTS key item [item ...]`
pub fn mexists(command: &Command) -> CommandResult {
    if command.argc() < 3 {
        return Err(CommandError::WrongArity);
    }
    let key = command.open_key(false);
    let items = command.args_from(2);
    let mut found = Vec::with_capacity(items.len());
    match ready(&key)? {
        Some(filter) => filter.contains_many(items, |answer| found.push(answer)),
        None => found.resize(items.len(), false),
    }
    stats::count(&stats::LOOKUPS, found.len());
    command.reply_array(found.len());
    for answer in found {
        command.reply_bool(answer);
    }
    Ok(())
}

/// `BF.CARD key`
pub fn card(command: &Command) -> CommandResult {
    if command.argc() != 2 {
        return Err(CommandError::WrongArity);
    }
    let key = command.open_key(false);
    let items = ready(&key)?.map_or(0, BloomFilter::items);
    command.reply_count(items);
    Ok(())
}

/// One BF.INFO value.
enum InfoValue {
    Count(u64),
    Integer(i64),
    Null,
}

/// `BF.INFO key [CAPACITY | SIZE | FILTERS | ITEMS | EXPANSION]`
pub fn info(command: &Command) -> CommandResult {
    let field = args::parse_info(command)?;
    let key = command.open_key(false);
    let filter = ready(&key)?.ok_or(NOT_FOUND)?;
    let value = |field: InfoField| match field {
        InfoField::Capacity => InfoValue::Count(filter.capacity()),
        InfoField::Size => InfoValue::Count(filter.memory_usage()),
        InfoField::Filters => InfoValue::Count(filter.layers().len() as u64),
        InfoField::Items => InfoValue::Count(filter.items()),
        InfoField::Expansion => match filter.params().growth {
            Growth::Scaling { expansion } => InfoValue::Integer(i64::from(expansion)),
            Growth::NonScaling => InfoValue::Null,
        },
    };
    let reply_value = |value: InfoValue| match value {
        InfoValue::Count(count) => command.reply_count(count),
        InfoValue::Integer(integer) => command.reply_integer(integer),
        InfoValue::Null => command.reply_null(),
    };
    match field {
        Some(field) => {
            let answer = value(field);
            command.reply_array(1);
            reply_value(answer);
        }
        None => {
            let fields = [
                ("Capacity", InfoField::Capacity),
                ("Size", InfoField::Size),
                ("Number of filters", InfoField::Filters),
                ("Number of items inserted", InfoField::Items),
                ("Expansion rate", InfoField::Expansion),
            ]
            .map(|(name, field)| (name, value(field)));
            command.reply_map(fields.len());
            for (name, answer) in fields {
                command.reply_simple(name);
                reply_value(answer);
            }
        }
    }
    Ok(())
}

/// `BF.SCANDUMP key iterator`
pub fn scandump(command: &Command) -> CommandResult {
    if command.argc() != 3 {
        return Err(CommandError::WrongArity);
    }
    let iterator = args::parse_iterator(command.arg(2))?;
    let key = command.open_key(false);
    let filter = ready(&key)?.ok_or(NOT_FOUND)?;
    let (next, data) = scandump_step(filter, iterator);
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
    let key = command.open_key(true);
    let existing = key.value::<StoredFilter>(bloom_type())?;
    if iterator == 1 {
        if existing.is_some() {
            return Err(ITEM_EXISTS);
        }
        let mut budget = budget(command);
        let stored = decode_load_header(data, &mut budget).map_err(|error| match error {
            DecodeError::Corrupt(_) => BAD_DATA,
            DecodeError::Limit(limit) => limit_error(command, &budget, limit),
        })?;
        store(&key, stored);
    } else {
        let stored = existing.ok_or(BAD_OFFSET)?;
        load_chunk(stored, iterator, data).map_err(|error| match error {
            ChunkError::Offset => BAD_OFFSET,
            ChunkError::TooBig => TOO_BIG,
            ChunkError::BadData => BAD_DATA,
        })?;
        key.signal_modified();
    }
    command.replicate_verbatim();
    command.notify(c"bf.loadchunk");
    command.reply_ok();
    Ok(())
}
