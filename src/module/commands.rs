//! The BF.* command handlers: parse (in [`args`](super::args)), act on the core, reply, replicate.

use std::sync::atomic::{AtomicU64, Ordering};

use rustbloom_core::encoding::{decode_load_header, load_chunk, scandump_step, ChunkError};
use rustbloom_core::scalable::CreateError;
use rustbloom_core::{
    BloomFilter, DecodeError, FilterParams, Growth, InsertError, Limits, SizingError,
};

use super::args::{self, CreateOptions, InfoField};
use super::config;
use super::datatype::bloom_type;
use super::ffi::{Command, CommandError, CommandResult, Key};
use super::memory::{self, SMALL_ALLOCATION};
use super::stats::{self, Footprint};

const NOT_FOUND: CommandError = CommandError::Static("ERR not found");
const ITEM_EXISTS: CommandError = CommandError::Static("ERR item exists");
const FULL: CommandError = CommandError::Static("ERR non scaling filter is full");
const LOADING: CommandError = CommandError::Static("ERR filter is being loaded by BF.LOADCHUNK");
const BAD_DATA: CommandError = CommandError::Static("ERR received bad data");
const BAD_OFFSET: CommandError = CommandError::Static("ERR invalid offset - no link found");
const TOO_BIG: CommandError =
    CommandError::Static("ERR invalid chunk - Too big for current filter");

/// The limits this call must respect when it may allocate up to `allocation` bytes: none when
/// it allocates nothing (the common add, which then skips every lookup below) or replays what a
/// primary already admitted.
fn limits(command: &Command, allocation: u64) -> Limits {
    if allocation == 0 || command.is_replayed() {
        Limits::UNLIMITED
    } else if allocation < SMALL_ALLOCATION {
        config::limits(u64::MAX)
    } else {
        config::limits(memory::headroom(command.ctx()))
    }
}

/// Stores a new filter at the command's key.
fn store(key: &Key, filter: BloomFilter) {
    stats::filter_added(&filter);
    key.set_value(bloom_type(), Box::new(filter));
    key.signal_modified();
}

/// Counts a refusal by a limit, passing the error on.
fn refused(message: String) -> CommandError {
    stats::count(&stats::REFUSED_BY_LIMITS, 1);
    CommandError::Owned(message)
}

fn complete(filter: &BloomFilter) -> Result<&BloomFilter, CommandError> {
    match filter.loading() {
        Some(_) => Err(LOADING),
        None => Ok(filter),
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

fn create_error(error: CreateError) -> CommandError {
    match error {
        CreateError::Sizing(SizingError::ErrorRate) => {
            CommandError::Static("ERR error rate too small for a Bloom filter")
        }
        CreateError::Sizing(SizingError::Capacity) => {
            CommandError::Static("ERR capacity too large for a Bloom filter")
        }
        CreateError::Limit(limit) => refused(config::limit_message(limit)),
    }
}

/// Creates a filter from explicit options and the configured defaults.
fn create(command: &Command, options: CreateOptions) -> Result<BloomFilter, CommandError> {
    let defaults = config::defaults();
    let params = FilterParams {
        capacity: options.capacity.unwrap_or(defaults.capacity),
        error_rate: options.error_rate.unwrap_or(defaults.error_rate),
        growth: options.growth.unwrap_or(defaults.growth),
        seed: options.seed.or(defaults.seed).unwrap_or_else(random_seed),
    };
    let bytes = params.layer_size(0).map_or(0, |size| size.bytes());
    BloomFilter::new(params, limits(command, bytes)).map_err(create_error)
}

/// Replicates the creation of a filter with every parameter explicit, so that a replica never
/// depends on its own defaults or its own random seed.
fn replicate_creation(command: &Command, params: &FilterParams) {
    let error_rate = params.error_rate.to_string();
    let capacity = params.capacity.to_string();
    let seed = params.seed.to_string();
    let expansion;
    let mut argv: Vec<&[u8]> = vec![command.arg(1), error_rate.as_bytes(), capacity.as_bytes()];
    match params.growth {
        Growth::NonScaling => argv.push(b"NONSCALING"),
        Growth::Scaling { expansion: x } => {
            expansion = x.to_string();
            argv.extend([b"EXPANSION".as_slice(), expansion.as_bytes()]);
        }
    }
    argv.extend([b"SEED".as_slice(), seed.as_bytes()]);
    command.replicate("BF.RESERVE", argv);
}

fn insert_error(error: InsertError) -> CommandError {
    match error {
        InsertError::NonScalingFull => FULL,
        InsertError::CannotGrow => CommandError::Static(
            "ERR filter cannot grow any further (layer limit reached); create a larger one",
        ),
        InsertError::Limit(limit) => refused(config::limit_message(limit)),
    }
}

/// `BF.RESERVE key error_rate capacity [EXPANSION n] [NONSCALING] [SEED s]`
pub fn reserve(command: &Command) -> CommandResult {
    let options = args::parse_reserve(command)?;
    let key = command.open_key(true);
    if key.value::<BloomFilter>(bloom_type())?.is_some() {
        return Err(ITEM_EXISTS);
    }
    let filter = create(command, options)?;
    replicate_creation(command, filter.params());
    store(&key, filter);
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

/// Adds `command`'s arguments from `first_item` to the key's filter, creating it from `create`
/// when missing (None: the key must exist).
fn add_items(
    command: &Command,
    first_item: usize,
    create_options: Option<CreateOptions>,
    reply: AddReply,
) -> CommandResult {
    let key = command.open_key(true);
    let existing = key.value::<BloomFilter>(bloom_type())?;
    let created = existing.is_none();
    if let Some(filter) = &existing {
        complete(filter)?;
    }
    let new_filter;
    let filter: &mut BloomFilter = match existing {
        Some(filter) => filter,
        None => {
            let options = create_options.ok_or(NOT_FOUND)?;
            new_filter = create(command, options)?;
            store(&key, new_filter);
            key.value::<BloomFilter>(bloom_type())?
                .ok_or(CommandError::Static(
                    "ERR internal error: filter not stored",
                ))?
        }
    };

    let items = command.args_from(first_item);
    let growth = if filter.room() < items.len() as u64 {
        filter.next_layer_bytes().unwrap_or(0)
    } else {
        0
    };
    let limits = limits(command, growth);
    let before = Footprint::of(filter);
    // Indexes of the items that changed the filter: all a replica needs to end up identical.
    let mut added: Vec<usize> = Vec::with_capacity(items.len());
    let mut failure = None;
    if reply == AddReply::Array {
        command.reply_array_postponed();
    }
    let mut processed = 0usize;
    filter.insert_many(items, limits, |result| match result {
        Ok(new) => {
            if new {
                added.push(first_item + processed);
            }
            command.reply_bool(new);
            processed += 1;
        }
        Err(error) => failure = Some(insert_error(error)),
    });
    if reply == AddReply::Array {
        if let Some(error) = &failure {
            command.reply_error(error);
        }
        command.set_array_length(processed + usize::from(failure.is_some()));
    }
    stats::changed(before, Footprint::of(filter));
    stats::count(&stats::ADDS, processed);

    if created {
        replicate_creation(command, filter.params());
    }
    if created || failure.is_some() {
        if !added.is_empty() {
            let mut argv: Vec<&[u8]> = vec![command.arg(1)];
            argv.extend(added.iter().map(|&i| command.arg(i)));
            command.replicate("BF.MADD", argv);
        }
    } else if !added.is_empty() {
        command.replicate_verbatim();
    }
    if !added.is_empty() {
        key.signal_modified();
        command.notify(c"bf.add");
    }
    match (reply, failure) {
        (AddReply::Single, Some(error)) => Err(error),
        _ => Ok(()),
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

/// Opens the key at argument 1 for reading: Ok(None) when missing.
fn read_filter(key: &Key) -> Result<Option<&BloomFilter>, CommandError> {
    match key.value::<BloomFilter>(bloom_type())? {
        Some(filter) => complete(filter).map(Some),
        None => Ok(None),
    }
}

/// `BF.EXISTS key item`
pub fn exists(command: &Command) -> CommandResult {
    if command.argc() != 3 {
        return Err(CommandError::WrongArity);
    }
    let key = command.open_key(false);
    let found = read_filter(&key)?.is_some_and(|filter| filter.contains(command.arg(2)));
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
    let filter = read_filter(&key)?;
    let items = command.args_from(2);
    stats::count(&stats::LOOKUPS, items.len());
    command.reply_array(items.len());
    match filter {
        Some(filter) => filter.contains_many(items, |found| command.reply_bool(found)),
        None => items.for_each(|_| command.reply_bool(false)),
    }
    Ok(())
}

/// `BF.CARD key`
pub fn card(command: &Command) -> CommandResult {
    if command.argc() != 2 {
        return Err(CommandError::WrongArity);
    }
    let key = command.open_key(false);
    let items = read_filter(&key)?.map_or(0, BloomFilter::items);
    command.reply_count(items);
    Ok(())
}

/// `BF.INFO key [CAPACITY | SIZE | FILTERS | ITEMS | EXPANSION]`
pub fn info(command: &Command) -> CommandResult {
    let field = args::parse_info(command)?;
    let key = command.open_key(false);
    let filter = read_filter(&key)?.ok_or(NOT_FOUND)?;
    let reply_field = |field: InfoField| match field {
        InfoField::Capacity => command.reply_count(filter.capacity()),
        InfoField::Size => command.reply_count(filter.memory_usage()),
        InfoField::Filters => command.reply_count(filter.layers().len() as u64),
        InfoField::Items => command.reply_count(filter.items()),
        InfoField::Expansion => match filter.params().growth {
            Growth::Scaling { expansion } => command.reply_integer(i64::from(expansion)),
            Growth::NonScaling => command.reply_null(),
        },
    };
    match field {
        Some(field) => {
            command.reply_array(1);
            reply_field(field);
        }
        None => {
            let fields = [
                ("Capacity", InfoField::Capacity),
                ("Size", InfoField::Size),
                ("Number of filters", InfoField::Filters),
                ("Number of items inserted", InfoField::Items),
                ("Expansion rate", InfoField::Expansion),
            ];
            command.reply_map(fields.len());
            for (name, field) in fields {
                command.reply_simple(name);
                reply_field(field);
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
    let filter = read_filter(&key)?.ok_or(NOT_FOUND)?;
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
    let existing = key.value::<BloomFilter>(bloom_type())?;
    if iterator == 1 {
        if existing.is_some() {
            return Err(ITEM_EXISTS);
        }
        let filter =
            decode_load_header(data, limits(command, u64::MAX)).map_err(|error| match error {
                DecodeError::Corrupt(_) => BAD_DATA,
                DecodeError::Limit(limit) => refused(config::limit_message(limit)),
            })?;
        store(&key, filter);
    } else {
        let filter = existing.ok_or(BAD_OFFSET)?;
        load_chunk(filter, iterator, data).map_err(|error| match error {
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
