//! The replication encoding: a write's effects as the commands replicas and the AOF replay.

use rustbloom_core::partition::Partition;
use rustbloom_core::replication::{Creation, Effect};
use rustbloom_core::scalable::TIGHTENING_RATIO;
use rustbloom_core::valkeybloom::ObjectParams;
use rustbloom_core::{Growth, LayerSize};

use crate::module::ffi::Command;
use crate::module::partition;

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
pub(super) fn replicate(command: &Command, first_item: usize, effects: &[Effect]) {
    // The key and the items travel as received, never copied.
    let mut effects = effects.iter().peekable();
    while let Some(effect) = effects.next() {
        match effect {
            Effect::Create(Creation::ValkeyBloom { params, capacity }) => {
                // As valkey-bloom replicates a creation: one BF.INSERT with the items it added.
                let added = match effects.peek() {
                    Some(Effect::Add(positions)) => {
                        effects.next();
                        positions.as_slice()
                    }
                    _ => &[],
                };
                let items: Vec<&[u8]> =
                    added.iter().map(|&p| command.arg(first_item + p)).collect();
                replicate_valkey_bloom_creation(command, params, *capacity, &items);
            }
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
            Effect::AddAt { at_ms, count } => {
                command.replicate_at(c"BF.ADDAT", *at_ms, first_item, *count)
            }
        }
    }
}

/// A creation as `BF.RESERVE` with every parameter explicit: a replica depends on neither its
/// own defaults, its own random seed, nor its own sizing code. A RedisBloom filter's names no
/// seed and no shape, which is how a replica knows to create it by RedisBloom's rule.
pub(super) fn replicate_creation(
    command: &Command,
    creation: &Creation,
    partition: Option<&Partition>,
) {
    if let Creation::ValkeyBloom { params, capacity } = creation {
        return replicate_valkey_bloom_creation(command, params, *capacity, &[]);
    }
    let (error_rate, capacity) = match creation {
        Creation::Scalable { params, .. } => (params.error_rate, params.capacity),
        Creation::Window { params, .. } => (params.error_rate, params.capacity),
        Creation::RedisBloom {
            capacity,
            error_rate,
            ..
        } => (*error_rate, *capacity),
        Creation::ValkeyBloom { .. } => return,
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
            if params.tightening != TIGHTENING_RATIO {
                argv.extend(["TIGHTENING".into(), params.tightening.to_string()]);
            }
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
        Creation::ValkeyBloom { .. } => return,
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

/// A valkey-bloom object's creation in valkey-bloom's own words, as its primaries replicate
/// every creation: `BF.INSERT key CAPACITY c ERROR e TIGHTENING r SEED s (EXPANSION x |
/// NONSCALING) [ITEMS items]`, the items those the creating command added (none for a
/// BF.RESERVE). Its rule sizes the first layer from these alone, here as there, so a
/// valkey-bloom replica could follow as well as ours.
fn replicate_valkey_bloom_creation(
    command: &Command,
    params: &ObjectParams,
    capacity: u64,
    items: &[&[u8]],
) {
    let [capacity, error_rate, tightening, expansion] = [
        capacity.to_string(),
        params.fp_rate.to_string(),
        params.tightening.to_string(),
        params.expansion.to_string(),
    ];
    let mut argv: Vec<&[u8]> = vec![
        command.arg(1),
        b"CAPACITY",
        capacity.as_bytes(),
        b"ERROR",
        error_rate.as_bytes(),
        b"TIGHTENING",
        tightening.as_bytes(),
        b"SEED",
        &params.seed,
    ];
    if params.is_scaling() {
        argv.extend([b"EXPANSION".as_slice(), expansion.as_bytes()]);
    } else {
        argv.push(b"NONSCALING");
    }
    if !items.is_empty() {
        argv.push(b"ITEMS");
        argv.extend_from_slice(items);
    }
    command.replicate("BF.INSERT", argv);
}
