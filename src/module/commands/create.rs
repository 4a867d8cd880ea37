//! Filters made: BF.RESERVE and the creation behind every first add, and BF.GROW's layers.

use std::sync::atomic::{AtomicU64, Ordering};

use rustbloom_core::redisbloom::RbFilter;
use rustbloom_core::replication::Creation;
use rustbloom_core::valkeybloom::{ObjectParams, VbFilter, FIXED_SEED as VB_FIXED_SEED};
use rustbloom_core::{
    BloomFilter, Filter, FilterParams, Growth, StoredFilter, StoredValue, WindowFilter,
    WindowParams,
};

use crate::module::args::{self, CreateOptions, PartitionRole};
use crate::module::config;
use crate::module::errors::{
    self, limit_error, replay_mismatch, CommandError, CommandResult, CAPACITY_RANGE, ITEM_EXISTS,
    NOT_FOUND, NOT_SCALABLE, SEED_REUSED,
};
use crate::module::ffi::Command;
use crate::module::memory::CommandBudget;
use crate::module::partition;
use crate::module::personality;
use crate::module::stats::{self, Footprint};

use super::replication::{replicate_creation, replicate_valkey_bloom_creation};
use super::{budget, ready_mut, store};

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

/// valkey-bloom's default tightening ratio (`bf.bloom-tightening-ratio`): each new layer's
/// error rate is the previous one's times this.
const VALKEY_BLOOM_TIGHTENING: f64 = 0.5;

/// A random 32-byte valkey-bloom seed (its two SipHash keys).
fn random_seed_bytes() -> [u8; 32] {
    let mut seed = [0u8; 32];
    for part in seed.chunks_exact_mut(8) {
        part.copy_from_slice(&random_seed().to_le_bytes());
    }
    seed
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
    let plain = options.seed.is_none() && options.shape.is_none();
    if plain && personality::is_valkey_bloom() && !command.is_replayed() {
        // Replicated as BF.LOAD of the new object (see replicate_valkey_bloom_creation).
        let params = ObjectParams {
            expansion: match growth {
                Growth::Scaling { expansion } => expansion,
                Growth::NonScaling => 0,
            },
            fp_rate: error_rate,
            tightening: VALKEY_BLOOM_TIGHTENING,
            seed_random: defaults.seed.is_none(),
            seed: match defaults.seed {
                Some(_) => VB_FIXED_SEED,
                None => random_seed_bytes(),
            },
        };
        return match VbFilter::new(params, capacity, budget) {
            Ok(Some(filter)) => Ok(Filter::ValkeyBloom(Box::new(filter))),
            Ok(None) => Err(CAPACITY_RANGE),
            Err(limit) => Err(limit_error(command, budget, limit)),
        };
    }
    if command.is_replayed() && plain {
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
    if let Some(creation) = Creation::of(stored.filter()) {
        replicate_creation(command, &creation, stored.partition());
    } else if let Filter::ValkeyBloom(filter) = stored.filter() {
        replicate_valkey_bloom_creation(command, filter);
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
