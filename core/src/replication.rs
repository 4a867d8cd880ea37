//! What replicas and the AOF must apply after a write, computed by the core from what the write
//! did, whatever the kind of filter.
//!
//! A write is replicated as its [`Effect`]s, in order. Each effect names everything a replica
//! needs to reach the primary's very bits without deciding anything itself: a creation carries
//! every parameter and the exact shape the primary sized (a scalable filter's first layer, a
//! window's slots), a growth carries the layer's shape, and an add carries the items the primary
//! applied — up to where it stopped, never the batch as received. A replica therefore depends
//! on neither its own defaults, its own random seed, its own sizing code nor its own limits.
//!
//! ```text
//!   BF.MADD k a b c d e  to a scalable filter that is missing, whose first layer fills after
//!   "b", with "c" already present and a memory limit refusing the third layer at "e":
//!
//!   outcome:  added = [true, true, false, true]  grown = [{index 1, first_item 3}]
//!             error = Limit (at position 4, "e")
//!   effects:  Create(Scalable { params, first_layer })   BF.RESERVE k ε n EXPANSION x SEED s SHAPE ..
//!             Add([0, 1])                                BF.MADD k a b
//!             Grow { index 1, shape }                    BF.GROW k 1 bits hashes layout
//!             Add([3])                                   BF.MADD k d
//!
//!   the same batch to a window filter:    AddAt { at_ms, count: 5 }     BF.ADDAT k ms a b c d e
//!   to a filter migrated from RedisBloom: Add(positions of the new items before the stop);
//!     its links grow by RedisBloom's own deterministic rule, which is part of its format, so a
//!     replica pushes the same links from the same items.
//!   a batch processed whole that created and pushed nothing of ours:  Batch   (as received)
//! ```
//!
//! Positions are indices into the batch of items the operation was given; the caller maps them
//! back to its arguments.

use crate::filter::{Filter, Outcome};
use crate::partition::Partition;
use crate::scalable::{AddOutcome, FilterParams, Growth, TIGHTENING_RATIO};
use crate::sizing::LayerSize;
use crate::valkeybloom::ObjectParams;
use crate::window::WindowParams;

/// One step a replica or an AOF replay applies.
#[derive(Clone, Debug, PartialEq)]
pub enum Effect {
    /// The filter was created, as described.
    Create(Creation),
    /// Add the items at these positions of the batch, in order.
    Add(Vec<usize>),
    /// Add the whole batch: the operation processed every item and pushed nothing (or, for a
    /// RedisBloom filter, only what its own rule pushes from the same items), so the command as
    /// received reaches the same bits; the cheapest thing to send.
    Batch,
    /// Push layer `index` of a scalable filter, of exactly this shape.
    Grow { index: usize, shape: LayerSize },
    /// Add the first `count` items of the batch to a window filter at `at_ms`, the time the
    /// primary's write used (it may have advanced the ring or refreshed items even when none
    /// was new).
    AddAt { at_ms: u64, count: usize },
}

/// A creation with everything a replica needs to create the same filter.
#[derive(Clone, Debug, PartialEq)]
pub enum Creation {
    /// A scalable filter and the exact shape of its first layer.
    Scalable {
        params: FilterParams,
        first_layer: LayerSize,
    },
    /// A window filter and the exact shape of its slots.
    Window {
        params: WindowParams,
        slot: LayerSize,
    },
    /// A filter created as RedisBloom creates one (only a replica of a RedisBloom primary or a
    /// RedisBloom AOF creates these): its own deterministic rule sizes it from these three.
    RedisBloom {
        capacity: u64,
        error_rate: f64,
        expansion: Option<u32>,
    },
    /// A valkey-bloom object (created by valkey-bloom's `BF.INSERT ... SEED <32 bytes>`, as its
    /// primaries replicate every creation): its rule sizes the first layer from its capacity
    /// and the object's parameters.
    ValkeyBloom { params: ObjectParams, capacity: u64 },
}

impl Creation {
    /// How `filter` was created (its first layer, slots or link are never replaced).
    pub fn of(filter: &Filter) -> Creation {
        match filter {
            Filter::Scalable(filter) => Creation::Scalable {
                params: *filter.params(),
                first_layer: filter.layers()[0].size(),
            },
            Filter::Window(filter) => Creation::Window {
                params: *filter.params(),
                slot: filter.slot_shape(),
            },
            Filter::RedisBloom(filter) => {
                // RbFilter::new gives the first link the capacity as its entries and halves the
                // error rate of a scaling filter; doubling a double is exact.
                let first = filter.links()[0].shape();
                let scaling = filter.is_scaling();
                Creation::RedisBloom {
                    capacity: first.entries,
                    error_rate: if scaling {
                        first.error * 2.0
                    } else {
                        first.error
                    },
                    expansion: scaling.then_some(filter.header().growth),
                }
            }
            Filter::ValkeyBloom(filter) => Creation::ValkeyBloom {
                params: *filter.params(),
                capacity: filter.layers()[0].shape().capacity,
            },
        }
    }

    /// The arguments after the key of the `BF.RESERVE` that makes this filter again with every
    /// parameter explicit (`ε n EXPANSION x|NONSCALING [TIGHTENING r] SEED s SHAPE …` or `ε n
    /// WINDOW w SEED s SHAPE …`, then `PARTITION i P R` for a partition): what a primary
    /// replicates, and what makes an empty filter alike to this one across slots. A RedisBloom
    /// filter's names no seed and no shape (its own rule sizes it); None for a valkey-bloom
    /// object, created by valkey-bloom's own `BF.INSERT … SEED` form instead.
    pub fn reserve_args(&self, partition: Option<&Partition>) -> Option<Vec<String>> {
        let mut args: Vec<String> = Vec::new();
        let growth = |args: &mut Vec<String>, expansion: Option<u32>| match expansion {
            Some(expansion) => args.extend(["EXPANSION".into(), expansion.to_string()]),
            None => args.push("NONSCALING".into()),
        };
        let explicit = match self {
            Creation::Scalable {
                params,
                first_layer,
            } => {
                args.extend([params.error_rate.to_string(), params.capacity.to_string()]);
                growth(
                    &mut args,
                    match params.growth {
                        Growth::Scaling { expansion } => Some(expansion),
                        Growth::NonScaling => None,
                    },
                );
                if params.tightening != TIGHTENING_RATIO {
                    args.extend(["TIGHTENING".into(), params.tightening.to_string()]);
                }
                Some((params.seed, *first_layer))
            }
            Creation::Window { params, slot } => {
                args.extend([params.error_rate.to_string(), params.capacity.to_string()]);
                args.extend(["WINDOW".into(), params.window_ms.to_string()]);
                Some((params.seed, *slot))
            }
            Creation::RedisBloom {
                capacity,
                error_rate,
                expansion,
            } => {
                args.extend([error_rate.to_string(), capacity.to_string()]);
                growth(&mut args, *expansion);
                None
            }
            Creation::ValkeyBloom { .. } => return None,
        };
        if let Some((seed, shape)) = explicit {
            args.extend(["SEED".into(), seed.to_string(), "SHAPE".into()]);
            args.extend(shape_args(shape));
        }
        if let Some(partition) = partition {
            args.extend([
                String::from("PARTITION"),
                partition.index().to_string(),
                partition.count().to_string(),
                partition.routing_seed().to_string(),
            ]);
        }
        Some(args)
    }
}

/// A layer shape as BF.RESERVE's SHAPE and BF.GROW carry it: bits, hashes, lines.
pub fn shape_args(size: LayerSize) -> [String; 3] {
    [
        size.bits.to_string(),
        size.num_hashes.to_string(),
        size.layout.lines().to_string(),
    ]
}

/// The effects of one add operation of a batch of `batch_len` items on `filter`, given its
/// `outcome`; `created` when the operation created the filter first.
pub fn add_effects(
    filter: &Filter,
    outcome: &Outcome,
    batch_len: usize,
    created: bool,
) -> Vec<Effect> {
    let mut effects = Vec::new();
    if created {
        effects.push(Effect::Create(Creation::of(filter)));
    }
    // Items that were present change nothing, so a batch processed whole, with no layer of our
    // sizing pushed, replays as received.
    let whole = !created
        && outcome.added().len() == batch_len
        && outcome.error().is_none()
        && outcome.added().contains(&true);
    match outcome {
        Outcome::Scalable(outcome) if whole && outcome.grown.is_empty() => {
            effects.push(Effect::Batch)
        }
        Outcome::RedisBloom(_) | Outcome::ValkeyBloom(_) if whole => effects.push(Effect::Batch),
        Outcome::Scalable(outcome) => scalable_adds(outcome, &mut effects),
        Outcome::Window(outcome) => {
            if !outcome.added.is_empty() {
                effects.push(Effect::AddAt {
                    at_ms: outcome.at_ms,
                    count: outcome.added.len(),
                });
            }
        }
        Outcome::RedisBloom(outcome) | Outcome::ValkeyBloom(outcome) => {
            push_add(&mut effects, outcome.added_positions())
        }
    }
    effects
}

/// The items added before each pushed layer, that layer, and so on.
fn scalable_adds(outcome: &AddOutcome, effects: &mut Vec<Effect>) {
    let mut positions = outcome.added_positions().peekable();
    for grown in &outcome.grown {
        push_add(
            effects,
            std::iter::from_fn(|| positions.next_if(|&p| p < grown.first_item)),
        );
        effects.push(Effect::Grow {
            index: grown.index,
            shape: grown.size,
        });
    }
    push_add(effects, positions);
}

fn push_add(effects: &mut Vec<Effect>, positions: impl Iterator<Item = usize>) {
    let positions: Vec<usize> = positions.collect();
    if !positions.is_empty() {
        effects.push(Effect::Add(positions));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::budget::{Budget, Unlimited};
    use crate::redisbloom::RbFilter;
    use crate::scalable::{BloomFilter, Growth};
    use crate::window::WindowFilter;

    fn items(prefix: &str, count: usize) -> Vec<Vec<u8>> {
        (0..count)
            .map(|i| format!("{prefix}{i}").into_bytes())
            .collect()
    }

    /// Adds `batch` to `filter` under `budget` and returns the outcome and the effects.
    fn add(
        filter: &mut Filter,
        batch: &[Vec<u8>],
        budget: &mut Budget,
        created: bool,
    ) -> (Outcome, Vec<Effect>) {
        let mut outcome = filter.new_outcome(|| 5_000);
        filter.insert_many(batch.iter().map(Vec::as_slice), budget, &mut outcome);
        let effects = add_effects(filter, &outcome, batch.len(), created);
        (outcome, effects)
    }

    /// Applies `effects` of `batch` to `replica` as a replica would.
    fn apply(replica: &mut Filter, batch: &[Vec<u8>], effects: &[Effect]) {
        for effect in effects {
            let chosen: Vec<&[u8]> = match effect {
                Effect::Add(positions) => positions.iter().map(|&p| batch[p].as_slice()).collect(),
                Effect::Batch => batch.iter().map(Vec::as_slice).collect(),
                Effect::AddAt { count, .. } => batch[..*count].iter().map(Vec::as_slice).collect(),
                Effect::Grow { index, shape } => match replica {
                    Filter::Scalable(filter) => {
                        filter.push_layer(*index, *shape, &mut Unlimited).unwrap();
                        continue;
                    }
                    _ => panic!("growth of another kind"),
                },
                Effect::Create(_) => continue,
            };
            let at_ms = match effect {
                Effect::AddAt { at_ms, .. } => *at_ms,
                _ => 0,
            };
            let mut outcome = replica.new_outcome(|| at_ms);
            replica.insert_many(chosen, &mut Unlimited, &mut outcome);
            assert_eq!(outcome.error(), None, "a replayed add is never refused");
        }
    }

    #[test]
    fn a_redisbloom_add_stopped_by_a_limit_replicates_the_items_before_the_stop() {
        let mut unlimited = Budget::new(u64::MAX, u64::MAX);
        let new = || {
            RbFilter::new(1000, 0.01, Some(2), &mut Unlimited)
                .unwrap()
                .unwrap()
        };
        let mut primary = Filter::RedisBloom(new());
        let mut replica = Filter::RedisBloom(new());
        let one_link = primary.allocated_bytes();
        let mut limited = Budget::new(one_link + 1, u64::MAX);
        let mut batch = items("warm", 10);
        batch.extend(items("item-", 3000));
        let (outcome, effects) = add(&mut primary, &batch, &mut limited, false);
        assert_eq!(
            outcome.added().len(),
            1000,
            "stops where the first link is full"
        );
        assert!(outcome.error().is_some());
        let [Effect::Add(positions)] = &effects[..] else {
            panic!("{effects:?}")
        };
        assert!(positions.iter().all(|&p| p < 1000));
        apply(&mut replica, &batch, &effects);
        assert_eq!(replica, primary);
        // The whole batch, when nothing stops it, is the command as received.
        let (_, effects) = add(&mut primary, &items("more", 5), &mut unlimited, false);
        assert_eq!(effects, [Effect::Batch]);
    }

    #[test]
    fn a_scalable_add_replicates_growth_between_the_items_around_it() {
        let params = FilterParams {
            capacity: 100,
            error_rate: 0.01,
            growth: Growth::Scaling { expansion: 2 },
            seed: 9,
            tightening: crate::scalable::TIGHTENING_RATIO,
        };
        let mut primary = Filter::Scalable(BloomFilter::new(params, &mut Unlimited).unwrap());
        let mut budget = Budget::new(u64::MAX, u64::MAX);
        let batch = items("s", 350);
        let (_, effects) = add(&mut primary, &batch, &mut budget, true);
        let Effect::Create(Creation::Scalable { first_layer, .. }) = effects[0] else {
            panic!("{effects:?}")
        };
        let grown: Vec<usize> = effects
            .iter()
            .filter_map(|effect| match effect {
                Effect::Grow { index, .. } => Some(*index),
                _ => None,
            })
            .collect();
        assert_eq!(grown, [1, 2]);
        let mut replica = Filter::Scalable(
            BloomFilter::with_first_layer(params, first_layer, &mut Unlimited).unwrap(),
        );
        apply(&mut replica, &batch, &effects);
        assert_eq!(replica, primary);
    }

    #[test]
    fn a_window_creation_carries_its_slot_shape() {
        let params = WindowParams {
            error_rate: 0.001,
            capacity: 3000,
            window_ms: 60_000,
            seed: 4,
        };
        let mut primary = Filter::Window(Box::new(
            WindowFilter::new(params, 0, &mut Unlimited).unwrap(),
        ));
        let mut budget = Budget::new(u64::MAX, u64::MAX);
        let batch = items("w", 20);
        let (_, effects) = add(&mut primary, &batch, &mut budget, true);
        let Effect::Create(Creation::Window { slot, .. }) = effects[0] else {
            panic!("{effects:?}")
        };
        assert_eq!(
            effects[1],
            Effect::AddAt {
                at_ms: 5_000,
                count: 20
            }
        );
        let mut replica = Filter::Window(Box::new(
            WindowFilter::with_slot_shape(params, slot, 0, &mut Unlimited).unwrap(),
        ));
        apply(&mut replica, &batch, &effects);
        assert_eq!(replica, primary);
    }

    #[test]
    fn every_sized_window_slot_passes_the_explicit_shape_check() {
        for error_rate in [0.1, 0.01, 1e-3, 1e-4, 1e-6, 1e-9] {
            for capacity in [1, 10, 1000, 100_000, 10_000_000] {
                let params = WindowParams {
                    error_rate,
                    capacity,
                    window_ms: 1000,
                    seed: 0,
                };
                let slot = params.shape().unwrap().slot;
                assert_eq!(params.check_slot(slot), Ok(()), "{params:?}");
            }
        }
        let params = WindowParams {
            error_rate: 0.01,
            capacity: 100_000,
            window_ms: 1000,
            seed: 0,
        };
        let slot = params.shape().unwrap().slot;
        let starved = LayerSize { bits: 512, ..slot };
        assert!(params.check_slot(starved).is_err());
        assert!(WindowFilter::with_slot_shape(params, starved, 0, &mut Unlimited).is_err());
    }
}
