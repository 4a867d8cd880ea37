//! Partitioned filters on the server (docs/partitions.md): the routing check of item
//! commands on a partition key, the descriptor at the logical name, and their BF.INFO.
//!
//! The core ([`rustbloom_core::partition`]) routes and encodes; here are only the hooks the
//! command handlers call, so that they stay one line each.

use rustbloom_core::partition::{
    partition_key, partition_names_fit, Descriptor, Partition, PartitionGrowth,
};
use rustbloom_core::{Filter, Growth, StoredFilter, StoredValue};

use super::args::CreateOptions;
use super::config;
use super::errors::{
    items_to_descriptor, misrouted, names_too_long, CommandError, CommandResult, DESCRIPTOR,
    DESCRIPTOR_OPTIONS, LOADING, PARTITIONS_TOO_LARGE, SEED_REUSED,
};
use super::ffi::{Command, Key};

/// The complete filter at `key` for a lookup, checked before anything is read: on a partition
/// key every item from argument `first_item` must route to it, else the whole command is refused;
/// a descriptor refuses items (each goes to its partition); a filter still loading answers
/// LOADING. Ok(None) for a missing key. The value is fetched once, and a plain filter pays one
/// test for all of it.
#[inline(always)]
pub fn lookup_filter<'k>(
    command: &Command,
    key: &'k Key,
    first_item: usize,
) -> Result<Option<&'k Filter>, CommandError> {
    match key.value::<StoredValue>()? {
        Some(StoredValue::Filter(stored)) => match stored.plain_ready() {
            Some(filter) => Ok(Some(filter)),
            None => rare_lookup_filter(command, stored, first_item).map(Some),
        },
        Some(StoredValue::Descriptor(_)) => Err(items_to_descriptor(command)),
        None => Ok(None),
    }
}

/// [`lookup_filter`] of a partition or of a filter still loading.
#[cold]
fn rare_lookup_filter<'k>(
    command: &Command,
    stored: &'k StoredFilter,
    first_item: usize,
) -> Result<&'k Filter, CommandError> {
    if let Some(partition) = stored.partition() {
        check_routing(partition, command.args_from(first_item))?;
    }
    stored.ready().ok_or(LOADING)
}

/// [`lookup_filter`]'s check for an add: on a partition key also returns the items, fetched from the
/// server once for both the check and the add (fetching each argument twice is a noticeable
/// part of what the check adds to a BF.MADD). None for other keys.
pub fn routed_items<'c>(
    command: &'c Command,
    key: &Key,
    first_item: usize,
) -> Result<Option<Vec<&'c [u8]>>, CommandError> {
    let Some(partition) = key_partition(command, key)? else {
        return Ok(None);
    };
    let items: Vec<&[u8]> = command.args_from(first_item).collect();
    check_routing(&partition, items.iter().copied())?;
    Ok(Some(items))
}

/// The identity of the partition at `key`, None for a plain filter or no key; an error for a
/// descriptor, which holds no items.
fn key_partition(command: &Command, key: &Key) -> Result<Option<Partition>, CommandError> {
    match key.value::<StoredValue>()? {
        Some(StoredValue::Filter(stored)) => Ok(stored.partition().copied()),
        Some(StoredValue::Descriptor(_)) => Err(items_to_descriptor(command)),
        None => Ok(None),
    }
}

fn check_routing<'a>(
    partition: &Partition,
    items: impl IntoIterator<Item = &'a [u8]>,
) -> CommandResult {
    match partition.first_misrouted(items) {
        None => Ok(()),
        Some((_, routed)) => Err(misrouted(partition, routed)),
    }
}

/// The seed of a partition's filter: the one given, which must differ from the routing seed;
/// else the configured one (`bf.seed-mode fixed`), or its complement where that is the routing
/// seed, so that a fixed mode stays fixed; else a random one that differs.
pub fn filter_seed(
    options: &CreateOptions,
    partition: &Partition,
    random_seed: impl Fn() -> u64,
) -> Result<u64, CommandError> {
    let routing_seed = partition.routing_seed();
    match (options.seed, config::defaults().seed) {
        (Some(seed), _) if seed == routing_seed => Err(SEED_REUSED),
        (Some(seed), _) => Ok(seed),
        (None, Some(seed)) if seed == routing_seed => Ok(!seed),
        (None, Some(seed)) => Ok(seed),
        (None, None) => Ok(std::iter::repeat_with(random_seed)
            .find(|&seed| seed != routing_seed)
            .unwrap_or_default()),
    }
}

/// The arguments after the key that create `descriptor`, everything explicit: `ε N PARTITIONS
/// P routing_seed` and its growth (replication and AOF rewrite).
pub fn descriptor_args(descriptor: &Descriptor) -> Vec<String> {
    let mut args = vec![
        descriptor.error_rate().to_string(),
        descriptor.capacity().to_string(),
        String::from("PARTITIONS"),
        descriptor.partitions().to_string(),
        descriptor.routing_seed().to_string(),
    ];
    match descriptor.growth() {
        PartitionGrowth::NonScaling => args.push(String::from("NONSCALING")),
        PartitionGrowth::Scaling { expansion } => {
            args.extend([String::from("EXPANSION"), expansion.to_string()])
        }
        PartitionGrowth::Window { window_ms } => {
            args.extend([String::from("WINDOW"), window_ms.to_string()])
        }
    }
    args
}

/// `BF.RESERVE NAME ε N PARTITIONS P routing_seed [NONSCALING | EXPANSION x | WINDOW ms]` on a
/// missing key: stores the descriptor and replicates it with its growth explicit.
pub fn reserve_descriptor(
    command: &Command,
    key: &mut Key,
    options: CreateOptions,
    partitions: u32,
    routing_seed: u64,
) -> CommandResult {
    if options.seed.is_some()
        || options.shape.is_some()
        || options.tightening.is_some()
        || options.scale_to.is_some()
    {
        return Err(DESCRIPTOR_OPTIONS);
    }
    // A limit on what BF.INFO lists, for clients only: a replayed descriptor (one renamed to a
    // long name, rewritten to the AOF) is kept.
    if !partition_names_fit(command.arg(1).len(), partitions) && !command.is_replayed() {
        return Err(names_too_long(partitions));
    }
    let growth = match options.window_ms {
        Some(window_ms) => PartitionGrowth::Window { window_ms },
        None => match options.growth.unwrap_or(config::defaults().growth) {
            Growth::NonScaling => PartitionGrowth::NonScaling,
            Growth::Scaling { expansion } => PartitionGrowth::Scaling { expansion },
        },
    };
    let defaults = config::defaults();
    let descriptor = Descriptor::new(
        partitions,
        routing_seed,
        options.capacity.unwrap_or(defaults.capacity),
        options.error_rate.unwrap_or(defaults.error_rate),
        growth,
    )
    .map_err(|_| PARTITIONS_TOO_LARGE)?;
    let args = descriptor_args(&descriptor);
    command.replicate(
        "BF.RESERVE",
        std::iter::once(command.arg(1)).chain(args.iter().map(String::as_bytes)),
    );
    key.set_value(Box::new(StoredValue::Descriptor(descriptor)));
    key.signal_modified();
    command.notify(c"bf.reserve");
    command.reply_ok();
    Ok(())
}

/// The partition identity of the filter at `key`, if it is a partition.
pub fn of_key(key: &Key) -> Result<Option<Partition>, CommandError> {
    Ok(match key.value::<StoredValue>()? {
        Some(StoredValue::Filter(stored)) => stored.partition().copied(),
        _ => None,
    })
}

/// BF.INFO of a descriptor: the map of the specification, every partition key included.
/// Ok(false) when `key` holds no descriptor. A single field is not defined for a descriptor.
pub fn info_descriptor(
    command: &Command,
    key: &Key,
    field_given: bool,
) -> Result<bool, CommandError> {
    let Some(StoredValue::Descriptor(descriptor)) = key.value::<StoredValue>()? else {
        return Ok(false);
    };
    if field_given {
        return Err(DESCRIPTOR);
    }
    let name = command.arg(1);
    if !partition_names_fit(name.len(), descriptor.partitions()) {
        return Err(names_too_long(descriptor.partitions()));
    }
    command.reply_map(8);
    command.reply_simple("Partitions");
    command.reply_count(u64::from(descriptor.partitions()));
    command.reply_simple("Routing seed");
    command.reply_bulk(descriptor.routing_seed().to_string().as_bytes());
    command.reply_simple("Capacity");
    command.reply_count(descriptor.capacity());
    command.reply_simple("Partition capacity");
    command.reply_count(descriptor.partition_capacity());
    command.reply_simple("Error rate");
    command.reply_double(descriptor.error_rate());
    command.reply_simple("Expansion rate");
    match descriptor.growth() {
        PartitionGrowth::Scaling { expansion } => command.reply_integer(i64::from(expansion)),
        _ => command.reply_null(),
    }
    command.reply_simple("Window (ms)");
    match descriptor.growth() {
        PartitionGrowth::Window { window_ms } => command.reply_count(window_ms),
        _ => command.reply_null(),
    }
    command.reply_simple("Partition keys");
    command.reply_array(descriptor.partitions() as usize);
    for index in 0..descriptor.partitions() {
        command.reply_bulk(&partition_key(name, index, descriptor.partitions()));
    }
    Ok(true)
}
