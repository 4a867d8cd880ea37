//! The BF.* command handlers. Each runs in three phases:
//!
//! 1. parse the arguments ([`args`](super::args)) and open the key;
//! 2. one core operation on the filter, charged to the command's [`CommandBudget`], which
//!    returns the per-item results and exactly what changed (items added, layers pushed);
//! 3. reply, signal and notify from those results, and replicate the [`Effect`]s the core
//!    computes from them ([`rustbloom_core::replication`]), whatever the kind of filter.
//!
//! No reply is written while a filter changes, so the panic guard of
//! [`run_command`](super::ffi::run_command) can always answer one well-formed error, and an add
//! that panics half-way still replicates the items it did add.
//!
//! Replicas and the AOF never size a layer themselves: a creation travels as `BF.RESERVE ...
//! SEED s SHAPE bits hashes layout` (a window's as `... WINDOW ms SEED s SHAPE ...`, the shape
//! of its slots) and each layer an add pushed as `BF.GROW key index bits hashes layout` between
//! the `BF.MADD`s of the items before and after it; an add that stopped replicates only the
//! items before the stop. A write replayed from
//! the primary or the AOF is never refused by policy; if its allocation fails the server stops
//! ([`stop_server`]).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};

use rustbloom_core::layer::Layer;
use rustbloom_core::partition::Partition;
use rustbloom_core::redisbloom::RbFilter;
use rustbloom_core::replication::{add_effects, Creation, Effect};
use rustbloom_core::scalable::AddOutcome;
use rustbloom_core::transfer::{decode_load_header, load_chunk};
use rustbloom_core::{
    BloomFilter, Filter, FilterParams, Growth, LayerSize, Outcome, StoredFilter, StoredValue,
    WindowFilter, WindowParams,
};

use super::args::{self, CreateOptions, InfoField, PartitionRole};
use super::config;
use super::errors::{
    self, insert_error, limit_error, replay_mismatch, BAD_DATA, DESCRIPTOR, ITEM_EXISTS, LOADING,
    NOT_FOUND, NOT_SCALABLE, NOT_WINDOW, SEED_REUSED, TIMESTAMP_AHEAD,
};
use super::ffi::{log, Command, CommandError, CommandResult, Key, INTERNAL};
use super::memory::CommandBudget;
use super::partition;
use super::stats::{self, BeforeAdd, Footprint};

/// The budget of this call: unlimited when it replays what a primary or the AOF accepted.
fn budget(command: &Command) -> CommandBudget {
    CommandBudget::for_command(command.ctx())
}

/// Stores a new value at the command's key.
fn store(key: &mut Key, stored: StoredFilter) {
    let stored = StoredValue::Filter(stored);
    stats::filter_added(&stored);
    key.set_value(Box::new(stored));
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

/// Creates a filter from explicit options and the configured defaults: a window filter when
/// the options give a window, else a scalable one.
fn create(
    command: &Command,
    options: CreateOptions,
    budget: &mut CommandBudget,
) -> Result<Filter, CommandError> {
    let defaults = config::defaults();
    let error_rate = options.error_rate.unwrap_or(defaults.error_rate);
    let capacity = options.capacity.unwrap_or(defaults.capacity);
    let seed = options.seed.or(defaults.seed).unwrap_or_else(random_seed);
    if let Some(window_ms) = options.window_ms {
        let params = WindowParams {
            error_rate,
            capacity,
            window_ms,
            seed,
        };
        // The ring starts before any generation: creation does not depend on the clock, so a
        // replica creating it later holds the same value.
        let created = match options.shape {
            Some(slot) => WindowFilter::with_slot_shape(params, slot, 0, budget),
            None => WindowFilter::new(params, 0, budget),
        };
        return created
            .map(|window| Filter::Window(Box::new(window)))
            .map_err(|error| errors::window_error(command, budget, error));
    }
    let growth = options.growth.unwrap_or(defaults.growth);
    if command.is_replayed() && options.seed.is_none() && options.shape.is_none() {
        // Our primaries and AOF always name the seed and shape of what they create; a creation
        // without them comes from a RedisBloom primary or a RedisBloom AOF, and is created as
        // RedisBloom creates it, so that it holds RedisBloom's very bits.
        let expansion = match growth {
            Growth::Scaling { expansion } => Some(expansion),
            Growth::NonScaling => None,
        };
        return match RbFilter::new(capacity, error_rate, expansion, budget) {
            Ok(Some(filter)) => Ok(Filter::RedisBloom(filter)),
            Ok(None) => replay_mismatch(command, "a RedisBloom filter it cannot size"),
            Err(limit) => Err(limit_error(command, budget, limit)),
        };
    }
    let params = FilterParams {
        capacity,
        error_rate,
        growth,
        seed,
    };
    let created = match options.shape {
        Some(shape) => BloomFilter::with_first_layer(params, shape, budget),
        None => BloomFilter::new(params, budget),
    };
    created
        .map(Filter::Scalable)
        .map_err(|error| errors::create_error(command, budget, error))
}

/// A layer shape as BF.RESERVE's SHAPE and BF.GROW carry it.
fn shape_args(size: LayerSize) -> [String; 3] {
    [
        size.bits.to_string(),
        size.num_hashes.to_string(),
        size.layout.lines().to_string(),
    ]
}

/// Sends a write's effects (computed by the core, see [`rustbloom_core::replication`]) to
/// replicas and the AOF; positions count from the argument `first_item`.
fn replicate(command: &Command, first_item: usize, effects: &[Effect]) {
    // The key and the items travel as received, never copied.
    for effect in effects {
        match effect {
            Effect::Create(creation) => replicate_creation(command, creation, None),
            Effect::Batch => command.replicate_verbatim(),
            Effect::Add(positions) => command.replicate_received(
                c"BF.MADD",
                &[],
                positions.iter().map(|&p| first_item + p),
            ),
            Effect::Grow { index, shape } => {
                let index = index.to_string();
                let [bits, hashes, layout] = shape_args(*shape);
                let made = [&index, &bits, &hashes, &layout].map(|arg| arg.as_bytes());
                command.replicate_received(c"BF.GROW", &made, std::iter::empty());
            }
            Effect::AddAt { at_ms, count } => command.replicate_received(
                c"BF.ADDAT",
                &[at_ms.to_string().as_bytes()],
                first_item..first_item + count,
            ),
        }
    }
}

/// A creation as `BF.RESERVE` with every parameter explicit: a replica depends on neither its
/// own defaults, its own random seed, nor its own sizing code. A RedisBloom filter's names no
/// seed and no shape, which is how a replica knows to create it by RedisBloom's rule.
fn replicate_creation(command: &Command, creation: &Creation, partition: Option<&Partition>) {
    let (error_rate, capacity) = match creation {
        Creation::Scalable { params, .. } => (params.error_rate, params.capacity),
        Creation::Window { params, .. } => (params.error_rate, params.capacity),
        Creation::RedisBloom {
            capacity,
            error_rate,
            ..
        } => (*error_rate, *capacity),
    };
    let [error_rate, capacity] = [error_rate.to_string(), capacity.to_string()];
    let mut argv: Vec<String> = Vec::new();
    let mut growth = |expansion: Option<u32>| match expansion {
        Some(expansion) => argv.extend(["EXPANSION".into(), expansion.to_string()]),
        None => argv.push("NONSCALING".into()),
    };
    let explicit = match creation {
        Creation::Scalable {
            params,
            first_layer,
        } => {
            growth(match params.growth {
                Growth::Scaling { expansion } => Some(expansion),
                Growth::NonScaling => None,
            });
            Some((params.seed, *first_layer))
        }
        Creation::Window { params, slot } => {
            argv.extend(["WINDOW".into(), params.window_ms.to_string()]);
            Some((params.seed, *slot))
        }
        Creation::RedisBloom { expansion, .. } => {
            growth(*expansion);
            None
        }
    };
    if let Some((seed, shape)) = explicit {
        argv.extend(["SEED".into(), seed.to_string(), "SHAPE".into()]);
        argv.extend(shape_args(shape));
    }
    if let Some(partition) = partition {
        argv.extend(partition::identity_args(partition));
    }
    let head = [command.arg(1), error_rate.as_bytes(), capacity.as_bytes()];
    command.replicate(
        "BF.RESERVE",
        head.into_iter().chain(argv.iter().map(String::as_bytes)),
    );
}

/// `BF.RESERVE key error_rate capacity [EXPANSION n] [NONSCALING] [WINDOW ms] [SEED s] [SHAPE bits hashes layout]`
pub fn reserve(command: &Command) -> CommandResult {
    let (mut options, role) = args::parse_reserve(command)?;
    let mut key = command.open_key(true);
    if key.value::<StoredValue>()?.is_some() {
        return Err(ITEM_EXISTS);
    }
    let partition = match role {
        Some(PartitionRole::Descriptor {
            partitions,
            routing_seed,
        }) => {
            return partition::reserve_descriptor(
                command,
                &mut key,
                options,
                partitions,
                routing_seed,
            )
        }
        Some(PartitionRole::Partition(partition)) => {
            options.seed = Some(partition::filter_seed(&options, &partition, random_seed)?);
            Some(partition)
        }
        None => None,
    };
    let mut stored = StoredFilter::ready_filter(create(command, options, &mut budget(command))?);
    if let Some(partition) = partition {
        stored = stored.with_partition(partition).map_err(|_| SEED_REUSED)?;
    }
    replicate_creation(command, &Creation::of(stored.filter()), stored.partition());
    store(&mut key, stored);
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

/// The common add, one item to an existing scalable filter that is no partition (BF.ADD, a
/// BF.MADD or BF.INSERT of one): hashed once, tested and set, then answered, counted and
/// replicated as received, with nothing allocated and no routing check. None, having done
/// nothing, for any other key, which takes [`add_items`]' general path.
fn add_one(
    command: &Command,
    key: &mut Key,
    first_item: usize,
    reply: AddReply,
) -> Option<CommandResult> {
    let Ok(Some(StoredValue::Filter(stored))) = key.value_mut::<StoredValue>() else {
        return None;
    };
    if stored.partition().is_some() {
        return None;
    }
    let Some(filter @ Filter::Scalable(_)) = stored.ready_mut() else {
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
    let result = catch_unwind(AssertUnwindSafe(|| scalable.insert_one(item, &mut budget)));
    let added = match result {
        Ok(Ok((added, grown))) => {
            stats::count(&stats::ADDS, 1);
            match grown {
                // The layer pushed first travels as BF.GROW before the item.
                Some(grown) => {
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
                None if added => {
                    stats::item_counted();
                    command.replicate_verbatim();
                }
                None => {}
            }
            added
        }
        Ok(Err(error)) => {
            let error = insert_error(command, &budget, error);
            return Some(match reply {
                AddReply::Single => Err(error),
                AddReply::Array => {
                    command.reply_array(1);
                    command.reply_error(&error);
                    Ok(())
                }
            });
        }
        Err(_) => {
            log(
                command.ctx(),
                "warning",
                "rustbloom: an add failed internally; the items added before it were kept and replicated",
            );
            return Some(Err(INTERNAL));
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

/// Adds `command`'s arguments from `first_item` to the key's filter at `at_ms` (None: the
/// server's clock, read only for a window filter), creating it
/// from `create_options` when missing (None: the key must exist).
fn add_items(
    command: &Command,
    first_item: usize,
    create_options: Option<CreateOptions>,
    at_ms: Option<u64>,
    reply: AddReply,
) -> CommandResult {
    // Phase 1: the key, its items' routing, and the filter to add to.
    let mut key = command.open_key(true);
    if at_ms.is_none() && command.argc() == first_item + 1 {
        if let Some(result) = add_one(command, &mut key, first_item, reply) {
            return result;
        }
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

    // Phase 2: one core operation; its outcome survives a panic half-way.
    let before = BeforeAdd::of(filter);
    let mut outcome = filter.new_outcome(|| at_ms.unwrap_or_else(|| command.now_ms()));
    let batch_len = command.args_from(first_item).len();
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
        log(
            command.ctx(),
            "warning",
            "rustbloom: an add failed internally; the items added before it were kept and replicated",
        );
        return Err(INTERNAL);
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
pub fn add(command: &Command) -> CommandResult {
    if command.argc() != 3 {
        return Err(CommandError::WrongArity);
    }
    add_items(
        command,
        2,
        Some(CreateOptions::default()),
        None,
        AddReply::Single,
    )
}

/// `BF.MADD key item [item ...]`
pub fn madd(command: &Command) -> CommandResult {
    if command.argc() < 3 {
        return Err(CommandError::WrongArity);
    }
    add_items(
        command,
        2,
        Some(CreateOptions::default()),
        None,
        AddReply::Array,
    )
}

/// `BF.INSERT key [options] ITEMS item [item ...]`
pub fn insert(command: &Command) -> CommandResult {
    let parsed = args::parse_insert(command)?;
    let create = (!parsed.nocreate).then_some(parsed.create);
    add_items(command, parsed.first_item, create, None, AddReply::Array)
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
    add_items(command, 3, None, Some(at_ms), AddReply::Array)
}

/// `BF.GROW key index bits hashes layout`: pushes the layer a primary pushed, with its shape.
/// Sent by primaries to replicas and written to the AOF; from a client it is checked like any
/// write (the shape must fit the filter, the budget must admit it).
pub fn grow(command: &Command) -> CommandResult {
    let (index, shape) = args::parse_grow(command)?;
    let mut key = command.open_key(true);
    let mut budget = budget(command);
    let filter = match ready_mut(&mut key)? {
        Some(Filter::Scalable(filter)) => filter,
        Some(_) if budget.is_replayed() => replay_mismatch(command, "BF.GROW of another kind"),
        Some(_) => return Err(NOT_SCALABLE),
        None if budget.is_replayed() => replay_mismatch(command, "BF.GROW of a missing filter"),
        None => return Err(NOT_FOUND),
    };
    let before = Footprint::of_scalable(filter);
    filter
        .push_layer(index, shape, &mut budget)
        .map_err(|error| errors::push_error(command, &budget, error))?;
    stats::changed(before, Footprint::of_scalable(filter));
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
    let found = match partition::lookup_filter(command, &key, 2)? {
        Some(stored) => stored
            .ready()
            .ok_or(LOADING)?
            .contains(command.arg(2), || command.now_ms()),
        None => false,
    };
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
    let filter = match partition::lookup_filter(command, &key, 2)? {
        Some(stored) => Some(stored.ready().ok_or(LOADING)?),
        None => None,
    };
    // The answers are collected before any is replied, so that a panic half-way (a bug) still
    // answers one well-formed error.
    let items = command.args_from(2);
    let mut found = Vec::with_capacity(items.len());
    match filter {
        Some(filter) => {
            filter.contains_many(items, || command.now_ms(), |answer| found.push(answer))
        }
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
    let items = ready(&key)?.map_or(0, |filter| filter.items(command.now_ms()));
    command.reply_count(items);
    Ok(())
}

/// One BF.INFO value.
enum InfoValue {
    Count(u64),
    Integer(i64),
    Double(f64),
    Text(String),
    Null,
}

/// The name BF.INFO gives a field.
fn info_name(field: InfoField) -> &'static str {
    match field {
        InfoField::Capacity => "Capacity",
        InfoField::Size => "Size",
        InfoField::Filters => "Number of filters",
        InfoField::Items => "Number of items inserted",
        InfoField::Expansion => "Expansion rate",
    }
}

/// `BF.INFO key [CAPACITY | SIZE | FILTERS | ITEMS | EXPANSION]`: RedisBloom's five fields, in
/// its order; a window filter adds its own after them, so that clients that read the five keep
/// working. One field: a one-element array in RESP2 and, as RedisBloom 2.6 and later, a
/// one-entry map in RESP3.
pub fn info(command: &Command) -> CommandResult {
    let field = args::parse_info(command)?;
    let key = command.open_key(false);
    if partition::info_descriptor(command, &key, field.is_some())? {
        return Ok(());
    }
    let identity = partition::of_key(&key)?;
    let filter = ready(&key)?.ok_or(NOT_FOUND)?;
    let now_ms = command.now_ms();
    let value = |field: InfoField| match field {
        InfoField::Capacity => InfoValue::Count(filter.capacity()),
        InfoField::Size => InfoValue::Count(filter.info_size()),
        InfoField::Filters => InfoValue::Count(filter.layer_count()),
        InfoField::Items => InfoValue::Count(filter.items(now_ms)),
        InfoField::Expansion => match filter.expansion() {
            Some(expansion) => InfoValue::Integer(i64::from(expansion)),
            None => InfoValue::Null,
        },
    };
    let reply_value = |value: InfoValue| match value {
        InfoValue::Count(count) => command.reply_count(count),
        InfoValue::Integer(integer) => command.reply_integer(integer),
        InfoValue::Double(double) => command.reply_double(double),
        InfoValue::Text(text) => command.reply_bulk(text.as_bytes()),
        InfoValue::Null => command.reply_null(),
    };
    if let Some(field) = field {
        let answer = value(field);
        if command.is_resp3() {
            command.reply_map(1);
            command.reply_simple(info_name(field));
        } else {
            command.reply_array(1);
        }
        reply_value(answer);
        return Ok(());
    }
    let mut fields: Vec<(&str, InfoValue)> = [
        InfoField::Capacity,
        InfoField::Size,
        InfoField::Filters,
        InfoField::Items,
        InfoField::Expansion,
    ]
    .into_iter()
    .map(|field| (info_name(field), value(field)))
    .collect();
    if let Filter::Window(window) = filter {
        let shape = window.shape();
        let params = window.params();
        fields.extend([
            ("Window (ms)", InfoValue::Count(params.window_ms)),
            ("Generation (ms)", InfoValue::Count(shape.generation_ms)),
            ("Last write (ms)", InfoValue::Count(window.last_ms())),
            ("Error rate", InfoValue::Double(params.error_rate)),
        ]);
    }
    if let Some(partition) = identity {
        fields.extend([
            ("Partition", InfoValue::Count(u64::from(partition.index()))),
            ("Partitions", InfoValue::Count(u64::from(partition.count()))),
            (
                "Routing seed",
                InfoValue::Text(partition.routing_seed().to_string()),
            ),
        ]);
    }
    command.reply_map(fields.len());
    for (name, answer) in fields {
        command.reply_simple(name);
        reply_value(answer);
    }
    Ok(())
}

/// `BF.DEBUG key`: RedisBloom's report of a filter, one bulk string per line: `size:<items>`,
/// then one line per layer (per link of a migrated filter, per slot of a window filter, oldest
/// slot of the ring first) `bytes:B bits:b hashes:k hashwidth:w capacity:c size:n ratio:ε`, the
/// ratio formatted as C's `%g`.
pub fn debug(command: &Command) -> CommandResult {
    if command.argc() != 2 {
        return Err(CommandError::WrongArity);
    }
    let key = command.open_key(false);
    let filter = ready(&key)?.ok_or(NOT_FOUND)?;
    let layers = filter.layer_reports();
    command.reply_array(1 + layers.len());
    command.reply_bulk(format!("size:{}", filter.items(command.now_ms())).as_bytes());
    for layer in layers {
        let line = format!(
            "bytes:{} bits:{} hashes:{} hashwidth:{} capacity:{} size:{} ratio:{}",
            layer.bytes,
            layer.bits,
            layer.hashes,
            layer.hash_width,
            layer.capacity,
            layer.items,
            format_g(layer.error_rate)
        );
        command.reply_bulk(line.as_bytes());
    }
    Ok(())
}

/// `value` as C's `printf("%g")` writes it (RedisBloom's BF.DEBUG ratios): six significant
/// digits, trailing zeros removed, in exponent form below 1e-4 or from 1e6 up.
fn format_g(value: f64) -> String {
    if value == 0.0 || !value.is_finite() {
        return value.to_string();
    }
    let scientific = format!("{value:.5e}");
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let trim = |digits: &str| -> String {
        if digits.contains('.') {
            digits
                .trim_end_matches('0')
                .trim_end_matches('.')
                .to_string()
        } else {
            digits.to_string()
        }
    };
    if (-4..6).contains(&exponent) {
        let decimals = usize::try_from(5 - exponent).unwrap_or(0);
        trim(&format!("{value:.decimals$}"))
    } else {
        let sign = if exponent < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", trim(mantissa), exponent.abs())
    }
}

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

#[cfg(test)]
mod tests {
    use super::format_g;

    #[test]
    fn ratios_are_written_as_c_writes_them_with_percent_g() {
        // RedisBloom's BF.DEBUG lines for layers at these rates (its flow tests).
        for (value, expected) in [
            (0.005, "0.005"),
            (0.0025, "0.0025"),
            (0.000625, "0.000625"),
            (0.0005, "0.0005"),
            (6.25e-05, "6.25e-05"),
            (1.5625e-05, "1.5625e-05"),
            (0.01, "0.01"),
            (1e-9, "1e-09"),
            (0.1234567, "0.123457"),
            (1234567.0, "1.23457e+06"),
            (0.00009999996, "0.0001"),
        ] {
            assert_eq!(format_g(value), expected, "{value}");
        }
    }
}
