//! The union of filters (BF.MERGE): a destination becomes the union of itself and its sources,
//! or a missing one is created as the union of the sources.
//!
//! Bloom filters of one shape and seed set the same bits for the same item, so the union of
//! their items is the word-wise OR of their bits, layer by layer; a lookup in the result answers
//! yes for every item of every input, at the rate the layers were sized for as long as the
//! union stays within their capacities. Filters are alike when they have the same kind, error
//! rate, capacity, expansion (or non-scaling), tightening, seed, partition identity, and the same shape for
//! every layer index both have; a source with more layers than the destination adds its layers
//! to it, with their exact shapes. Anything else is refused as a whole, before anything changes,
//! with the first [`Difference`].
//!
//! ```text
//!   dest:     | L0 |  L1  |                      dest after:  | L0|L0' | L1|L1' |  L2'  |
//!   source:   | L0'|  L1' |  L2'  |                             (L2' pushed with its shape, then ORed)
//! ```
//!
//! Window filters merge slot by slot when their windows line up: the same error rate, capacity,
//! window, seed and slot shape; the merge brings them to the latest time any of them was written
//! at and ORs each slot into the destination's (see [`crate::window`]'s `merge` module for what
//! "line up" means and why that time). A window and a scalable filter differ in kind.
//!
//! The count of a merged layer (or slot) is estimated from its bits (see [`crate::layer`]):
//! items in several inputs count once, so the sum of the counts would overstate it. The
//! estimate is made once, when the merge runs, and stored as the layer's count (see
//! [`crate::layer::Layer`]), which later adds increase as usual; nothing else marks it, so the
//! encoding is unchanged. The operation is a pure function of the inputs' values (it reads no
//! clock), which replicas and the AOF hold too: the merge replicates as the command itself and
//! reaches the same bits and counts there.
//!
//! Filters kept in RedisBloom's or valkey-bloom's own format are refused, unless there is no
//! source at all: the union of a filter and nothing is the filter, whatever its format.

use crate::budget::{LimitError, MemoryBudget};
use crate::filter::Filter;
use crate::scalable::merge::merged_shapes;
use crate::scalable::BloomFilter;
use crate::sizing::LayerSize;
use crate::stored::StoredFilter;
use crate::window::WindowFilter;

/// The first way two filters differ that keeps them from being merged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Difference {
    Kind,
    ErrorRate,
    Capacity,
    /// A window filter's window (its generations' length, hence their numbering).
    Window,
    Expansion,
    /// The ratio of each new layer's error rate to the previous one's (`TIGHTENING`).
    Tightening,
    Seed,
    /// The shape (bits, hashes, layout) of a layer both have, or of two windows' slots.
    Layout,
    /// One is a partition and the other not, or another partition (index, count, routing seed).
    Partition,
}

impl Difference {
    /// The name in the error reply: `filters differ: <name>`.
    pub fn name(self) -> &'static str {
        match self {
            Difference::Kind => "kind",
            Difference::ErrorRate => "error rate",
            Difference::Capacity => "capacity",
            Difference::Window => "window",
            Difference::Expansion => "expansion",
            Difference::Tightening => "tightening",
            Difference::Seed => "seed",
            Difference::Layout => "layout",
            Difference::Partition => "partition",
        }
    }
}

/// Why a merge was refused; the destination is unchanged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MergeError {
    Differ(Difference),
    /// A filter in RedisBloom's own format: not merged.
    RedisBloom,
    /// A filter in valkey-bloom's own format: not merged.
    ValkeyBloom,
    /// An input still arriving by BF.LOADCHUNK.
    Loading,
    /// The budget or the system refused the bytes of the layers or of the created filter.
    Limit(LimitError),
}

/// What a merge did: the layers it pushed to the destination (index and shape).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Merged {
    pub pushed: Vec<(usize, LayerSize)>,
}

/// The inputs of a merge once every check but the layers' (or slots') passes.
enum Inputs<'d, 's> {
    /// No source: nothing to merge, whatever the destination's kind.
    Nothing,
    Scalable(&'d BloomFilter, Vec<&'s BloomFilter>),
    /// The sources, lined up with the destination.
    Window(Vec<&'s WindowFilter>),
}

/// The inputs of merging `sources` into `dest`, all of one kind, or why not.
fn inputs<'d, 's>(
    dest: &'d StoredFilter,
    sources: &[&'s StoredFilter],
) -> Result<Inputs<'d, 's>, MergeError> {
    let all = || std::iter::once(dest).chain(sources.iter().copied());
    if all().any(StoredFilter::is_loading) {
        return Err(MergeError::Loading);
    }
    if sources.is_empty() {
        return Ok(Inputs::Nothing);
    }
    let kind = |stored: &StoredFilter| std::mem::discriminant(stored.filter());
    if sources.iter().any(|source| kind(source) != kind(dest)) {
        return Err(MergeError::Differ(Difference::Kind));
    }
    if sources
        .iter()
        .any(|source| source.partition() != dest.partition())
    {
        return Err(MergeError::Differ(Difference::Partition));
    }
    match dest.filter() {
        Filter::Scalable(dest) => Ok(Inputs::Scalable(
            dest,
            sources
                .iter()
                .filter_map(|source| match source.filter() {
                    Filter::Scalable(scalable) => Some(scalable),
                    _ => None,
                })
                .collect(),
        )),
        Filter::Window(dest) => {
            let sources: Vec<&WindowFilter> = sources
                .iter()
                .filter_map(|source| match source.filter() {
                    Filter::Window(window) => Some(&**window),
                    _ => None,
                })
                .collect();
            match sources
                .iter()
                .find_map(|source| dest.window_difference(source))
            {
                Some(difference) => Err(MergeError::Differ(difference)),
                None => Ok(Inputs::Window(sources)),
            }
        }
        Filter::RedisBloom(_) => Err(MergeError::RedisBloom),
        Filter::ValkeyBloom(_) => Err(MergeError::ValkeyBloom),
    }
}

/// Checks that `sources` can be merged into `dest`: Ok when [`merge_into`] would change
/// nothing but the destination (budget permitting).
pub fn check(dest: &StoredFilter, sources: &[&StoredFilter]) -> Result<(), MergeError> {
    match inputs(dest, sources)? {
        Inputs::Scalable(dest, sources) => {
            merged_shapes(dest, &sources).map_err(MergeError::Differ)?;
            Ok(())
        }
        Inputs::Nothing | Inputs::Window(_) => Ok(()),
    }
}

/// Merges `sources` into `dest`, or refuses with `dest` unchanged.
pub fn merge_into<B: MemoryBudget + ?Sized>(
    dest: &mut StoredFilter,
    sources: &[&StoredFilter],
    budget: &mut B,
) -> Result<Merged, MergeError> {
    let pushed = match inputs(dest, sources)? {
        Inputs::Nothing => Vec::new(),
        Inputs::Scalable(filter, sources) => {
            let shapes = merged_shapes(filter, &sources).map_err(MergeError::Differ)?;
            let Filter::Scalable(filter) = &mut dest.filter else {
                unreachable!("checked: a scalable filter");
            };
            filter
                .union_with(&sources, &shapes, budget)
                .map_err(MergeError::Limit)?
        }
        Inputs::Window(sources) => {
            let Filter::Window(filter) = &mut dest.filter else {
                unreachable!("checked: a window filter");
            };
            filter.union_with(&sources);
            Vec::new()
        }
    };
    Ok(Merged { pushed })
}

/// A new filter, the union of `first` and `rest`: a copy of `first` (parameters, seed, layer
/// shapes and partition identity), its bytes charged to `budget`, into which `rest` is merged.
pub fn merged_copy<B: MemoryBudget + ?Sized>(
    first: &StoredFilter,
    rest: &[&StoredFilter],
    budget: &mut B,
) -> Result<StoredFilter, MergeError> {
    check(first, rest)?;
    let mut copy = first.try_clone(budget).map_err(MergeError::Limit)?;
    merge_into(&mut copy, rest, budget)?;
    Ok(copy)
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod window_tests;
