//! The replication encoding: a write's effects as the commands replicas and the AOF replay.

use rustbloom_core::partition::Partition;
use rustbloom_core::replication::{shape_args, Creation, Effect};
use rustbloom_core::valkeybloom::ObjectParams;

use crate::module::ffi::Command;

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
    let Some(args) = creation.reserve_args(partition) else {
        return;
    };
    command.replicate(
        "BF.RESERVE",
        std::iter::once(command.arg(1)).chain(args.iter().map(String::as_bytes)),
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
