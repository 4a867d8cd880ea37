//! Filters made: BF.RESERVE and the creation behind every first add, and BF.GROW's layers.

use std::sync::atomic::{AtomicU64, Ordering};

use rustbloom_core::redisbloom::RbFilter;
use rustbloom_core::replication::Creation;
use rustbloom_core::{
    BloomFilter, Filter, FilterParams, Growth, StoredFilter, StoredValue, WindowFilter,
    WindowParams,
};

use crate::module::args::{self, CreateOptions, PartitionRole};
use crate::module::config;
use crate::module::errors::{
    self, limit_error, replay_mismatch, CommandError, CommandResult, ITEM_EXISTS, LOADING,
    NOT_FOUND, NOT_SCALABLE, SEED_REUSED,
};
use crate::module::ffi::Command;
use crate::module::memory::CommandBudget;
use crate::module::partition;
use crate::module::stats::{self, Footprint};

use super::replication::replicate_creation;
use super::{budget, ready_mut, store, stored};

/// LIKE names a filter taken over in RedisBloom's or valkey-bloom's format, which no command
/// creates here.
const LIKE_FOREIGN: CommandError = CommandError::Static(
    "ERR LIKE takes a filter made here, not one kept in RedisBloom's or valkey-bloom's format",
);

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
pub(super) fn create(
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

/// `BF.RESERVE key error_rate capacity [EXPANSION n] [NONSCALING] [WINDOW ms] [SEED s] [SHAPE bits hashes layout]`,
/// or `BF.RESERVE key LIKE other` ([`reserve_like`]).
pub fn reserve(command: &Command) -> CommandResult {
    if command.argc() == 4 && command.arg(2).eq_ignore_ascii_case(b"LIKE") {
        return reserve_like(command);
    }
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
    if let Some(creation) = Creation::of(stored.filter()) {
        replicate_creation(command, &creation, stored.partition());
    }
    store(&mut key, stored);
    command.notify(c"bf.reserve");
    command.reply_ok();
    Ok(())
}

/// `BF.RESERVE key LIKE other`: an empty filter made as `other` was (kind, error rate, capacity,
/// expansion or window, seed, first layer's or slots' shape, partition identity), so that
/// BF.MERGE takes the two: the way to a filter alike to one made with a random seed. Replicated
/// as any creation, every parameter explicit (replicas never read `other`).
fn reserve_like(command: &Command) -> CommandResult {
    let mut key = command.open_key(true);
    if key.value::<StoredValue>()?.is_some() {
        return Err(ITEM_EXISTS);
    }
    if command.arg(3) == command.arg(1) {
        // The key itself, missing.
        return Err(NOT_FOUND);
    }
    let model_key = command.open_source_key(3);
    let model = stored(&model_key)?.ok_or(NOT_FOUND)?;
    let options = match model.ready().map(Creation::of) {
        None => return Err(LOADING),
        Some(Some(Creation::Scalable {
            params,
            first_layer,
        })) => CreateOptions {
            error_rate: Some(params.error_rate),
            capacity: Some(params.capacity),
            growth: Some(params.growth),
            seed: Some(params.seed),
            shape: Some(first_layer),
            window_ms: None,
        },
        Some(Some(Creation::Window { params, slot })) => CreateOptions {
            error_rate: Some(params.error_rate),
            capacity: Some(params.capacity),
            growth: None,
            seed: Some(params.seed),
            shape: Some(slot),
            window_ms: Some(params.window_ms),
        },
        Some(Some(Creation::RedisBloom { .. }) | None) => return Err(LIKE_FOREIGN),
    };
    let mut stored = StoredFilter::ready_filter(create(command, options, &mut budget(command))?);
    if let Some(partition) = model.partition() {
        stored = stored.with_partition(*partition).map_err(|_| SEED_REUSED)?;
    }
    if let Some(creation) = Creation::of(stored.filter()) {
        replicate_creation(command, &creation, stored.partition());
    }
    store(&mut key, stored);
    command.notify(c"bf.reserve");
    command.reply_ok();
    Ok(())
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
