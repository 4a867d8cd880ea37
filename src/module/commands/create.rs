//! Filters made: BF.RESERVE and the creation behind every first add, and BF.GROW's layers.

use std::sync::atomic::{AtomicU64, Ordering};

use rustbloom_core::redisbloom::RbFilter;
use rustbloom_core::replication::Creation;
use rustbloom_core::scalable::TIGHTENING_RATIO;
use rustbloom_core::valkeybloom::{ObjectParams, VbFilter, FIXED_SEED as VALKEY_BLOOM_FIXED_SEED};
use rustbloom_core::{
    BloomFilter, Filter, FilterParams, Growth, StoredFilter, StoredValue, WindowFilter,
    WindowParams,
};

use crate::module::args::{self, CreateOptions, PartitionRole};
use crate::module::config;
use crate::module::errors::{
    self, limit_error, replay_mismatch, CommandError, CommandResult, ITEM_EXISTS, LOADING,
    NONSCALING_VALIDATE_SCALE_TO, NOT_FOUND, NOT_SCALABLE, SCALE_TO_MEMORY, SCALE_TO_RATE,
    SEED_REUSED,
};
use crate::module::ffi::Command;
use crate::module::memory::CommandBudget;
use crate::module::partition;
use crate::module::personality;
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

/// A random 32-byte valkey-bloom seed (its two SipHash keys).
fn random_seed_bytes() -> [u8; 32] {
    let mut seed = [0u8; 32];
    for part in seed.chunks_exact_mut(8) {
        part.copy_from_slice(&random_seed().to_le_bytes());
    }
    seed
}

/// What a command creates, every parameter resolved against the configured defaults.
enum Plan {
    Window(WindowParams),
    Scalable(FilterParams),
    /// As RedisBloom creates one, by its own rule.
    RedisBloom {
        capacity: u64,
        error_rate: f64,
        expansion: Option<u32>,
    },
    /// As valkey-bloom creates one, by its own rule: a first layer of `capacity` items.
    ValkeyBloom {
        params: ObjectParams,
        capacity: u64,
    },
}

/// The filter `options` ask for: a window filter when they give a window, a valkey-bloom
/// object when they give valkey-bloom's 32-byte seed (or name none of our own options under the
/// valkey-bloom personality), a RedisBloom filter when a replayed creation names no seed, else
/// one of our scalable filters.
fn plan(command: &Command, options: &CreateOptions) -> Plan {
    let defaults = config::defaults();
    let error_rate = options.error_rate.unwrap_or(defaults.error_rate);
    let capacity = options.capacity.unwrap_or(defaults.capacity);
    let tightening = options.tightening.unwrap_or(defaults.tightening);
    let growth = options.growth.unwrap_or(defaults.growth);
    let plain = options.seed.is_none() && options.shape.is_none() && options.window_ms.is_none();
    let valkey_seed = match options.valkey_seed {
        // The valkey-bloom personality: a new filter is a valkey-bloom object, with a random
        // 32-byte seed or valkey-bloom's fixed one (options only rustbloom has, a window, a
        // shape, a numeric seed, still make one of ours). A replayed creation names its kind.
        None if plain && personality::is_valkey_bloom() && !command.is_replayed() => {
            Some(match defaults.seed {
                Some(_) => VALKEY_BLOOM_FIXED_SEED,
                None => random_seed_bytes(),
            })
        }
        given => given,
    };
    if let Some(seed) = valkey_seed {
        return Plan::ValkeyBloom {
            params: ObjectParams {
                expansion: match growth {
                    Growth::Scaling { expansion } => expansion,
                    Growth::NonScaling => 0,
                },
                fp_rate: error_rate,
                tightening,
                seed_random: seed != VALKEY_BLOOM_FIXED_SEED,
                seed,
            },
            capacity,
        };
    }
    let seed = options.seed.or(defaults.seed).unwrap_or_else(random_seed);
    if let Some(window_ms) = options.window_ms {
        return Plan::Window(WindowParams {
            error_rate,
            capacity,
            window_ms,
            seed,
        });
    }
    if command.is_replayed() && options.seed.is_none() && options.shape.is_none() {
        // Our primaries and AOF always name the seed and shape of what they create; a creation
        // without them comes from a RedisBloom primary or a RedisBloom AOF, and is created as
        // RedisBloom creates it, so that it holds RedisBloom's very bits.
        return Plan::RedisBloom {
            capacity,
            error_rate,
            expansion: match growth {
                Growth::Scaling { expansion } => Some(expansion),
                Growth::NonScaling => None,
            },
        };
    }
    Plan::Scalable(FilterParams {
        capacity,
        error_rate,
        growth,
        seed,
        // A non-scaling filter's one layer does not depend on it: one value, one encoding.
        tightening: match growth {
            Growth::Scaling { .. } => tightening,
            Growth::NonScaling => TIGHTENING_RATIO,
        },
    })
}

/// Creates a filter from explicit options and the configured defaults ([`plan`]).
pub(super) fn create(
    command: &Command,
    options: CreateOptions,
    budget: &mut CommandBudget,
) -> Result<Filter, CommandError> {
    match plan(command, &options) {
        // The ring starts before any generation: creation does not depend on the clock, so a
        // replica creating it later holds the same value.
        Plan::Window(params) => match options.shape {
            Some(slot) => WindowFilter::with_slot_shape(params, slot, 0, budget),
            None => WindowFilter::new(params, 0, budget),
        }
        .map(|window| Filter::Window(Box::new(window)))
        .map_err(|error| errors::window_error(command, budget, error)),
        Plan::RedisBloom {
            capacity,
            error_rate,
            expansion,
        } => match RbFilter::new(capacity, error_rate, expansion, budget) {
            Ok(Some(filter)) => Ok(Filter::RedisBloom(filter)),
            Ok(None) => replay_mismatch(command, "a RedisBloom filter it cannot size"),
            Err(limit) => Err(limit_error(command, budget, limit)),
        },
        Plan::ValkeyBloom { params, capacity } => VbFilter::new(params, capacity, budget)
            .map(|filter| Filter::ValkeyBloom(Box::new(filter)))
            .map_err(|error| errors::create_error(command, budget, error)),
        Plan::Scalable(params) => match options.shape {
            Some(shape) => BloomFilter::with_first_layer(params, shape, budget),
            None => BloomFilter::new(params, budget),
        }
        .map(Filter::Scalable)
        .map_err(|error| errors::create_error(command, budget, error)),
    }
}

/// `VALIDATESCALETO n`: refuses, before anything is touched, a command whose filter could not
/// grow to hold n items under `bf.max-filter-bytes` and its growth rule (valkey-bloom's check,
/// made whether or not the key exists, as valkey-bloom makes it). A replayed command is never
/// refused: its primary checked.
pub(super) fn check_scale_to(command: &Command, options: &CreateOptions) -> CommandResult {
    let Some(items) = options.scale_to else {
        return Ok(());
    };
    if command.is_replayed() {
        return Ok(());
    }
    // A window or a RedisBloom creation never gets here: the parser refuses WINDOW with
    // VALIDATESCALETO, and only a replayed command creates RedisBloom's kind.
    let planned = plan(command, options);
    let (scaling, reach) = match &planned {
        Plan::Scalable(params) => (
            params.growth != Growth::NonScaling,
            Box::new(|max_bytes| params.max_scaled_capacity(max_bytes)) as Box<dyn Fn(u64) -> u64>,
        ),
        Plan::ValkeyBloom { params, capacity } => (
            params.is_scaling(),
            Box::new(|max_bytes| params.max_scaled_capacity(*capacity, max_bytes)) as Box<_>,
        ),
        Plan::Window(_) | Plan::RedisBloom { .. } => return Ok(()),
    };
    if !scaling {
        return Err(NONSCALING_VALIDATE_SCALE_TO);
    }
    if reach(config::filter_limit()) >= items {
        Ok(())
    } else if reach(u64::MAX) < items {
        Err(SCALE_TO_RATE)
    } else {
        Err(SCALE_TO_MEMORY)
    }
}

/// `BF.RESERVE key error_rate capacity [EXPANSION n] [NONSCALING] [WINDOW ms] [SEED s] [SHAPE bits hashes layout]`,
/// or `BF.RESERVE key LIKE other` ([`reserve_like`]).
pub fn reserve(command: &Command) -> CommandResult {
    let like = command.argc() == 4 && command.arg(2).eq_ignore_ascii_case(b"LIKE");
    if command.is_keys_position_request() {
        // Redis 7.0 routes a cluster's commands by the keys this answers, not by key specs.
        // With arity -1 (the valkey-bloom personality) a call may have no key at all.
        if command.argc() > 1 {
            command.declare_key(1);
        }
        if like {
            command.declare_key(3);
        }
        return Ok(());
    }
    if like {
        return reserve_like(command);
    }
    let (mut options, role) = args::parse_reserve(command)?;
    check_scale_to(command, &options)?;
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
        Some(Creation::Scalable {
            params,
            first_layer,
        }) => CreateOptions {
            error_rate: Some(params.error_rate),
            capacity: Some(params.capacity),
            growth: Some(params.growth),
            seed: Some(params.seed),
            shape: Some(first_layer),
            tightening: Some(params.tightening),
            ..CreateOptions::default()
        },
        Some(Creation::Window { params, slot }) => CreateOptions {
            error_rate: Some(params.error_rate),
            capacity: Some(params.capacity),
            seed: Some(params.seed),
            shape: Some(slot),
            window_ms: Some(params.window_ms),
            ..CreateOptions::default()
        },
        Some(Creation::RedisBloom { .. } | Creation::ValkeyBloom { .. }) => {
            return Err(LIKE_FOREIGN)
        }
    };
    let mut stored = StoredFilter::ready_filter(create(command, options, &mut budget(command))?);
    if let Some(partition) = model.partition() {
        stored = stored.with_partition(*partition).map_err(|_| SEED_REUSED)?;
    }
    replicate_creation(command, &Creation::of(stored.filter()), stored.partition());
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
