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
//! The count of a merged layer is estimated from its bits (see [`crate::layer`]): items in
//! several inputs count once, so the sum of the counts would overstate it. The estimate is made
//! once, when the merge runs, and stored as the layer's count (see [`crate::layer::Layer`]), which later adds increase as
//! usual; nothing else marks it, so the encoding is unchanged. The operation is a pure function
//! of the inputs' values, which replicas and the AOF hold too: the merge replicates as the
//! command itself and reaches the same bits and counts there.
//!
//! Window filters (whose slots follow a clock) and filters kept in RedisBloom's or valkey-bloom's
//! own format are refused for now.

use crate::budget::{LimitError, MemoryBudget};
use crate::filter::Filter;
use crate::scalable::merge::merged_shapes;
use crate::scalable::BloomFilter;
use crate::sizing::LayerSize;
use crate::stored::StoredFilter;

/// The first way two filters differ that keeps them from being merged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Difference {
    Kind,
    ErrorRate,
    Capacity,
    Expansion,
    /// The ratio of each new layer's error rate to the previous one's (`TIGHTENING`).
    Tightening,
    Seed,
    /// The shape (bits, hashes, layout) of a layer both have.
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
    /// A window filter: not merged (yet).
    Window,
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

/// The scalable filters of `dest` and `sources` once every check but the layers' passes.
fn scalable_inputs<'a>(
    dest: &'a StoredFilter,
    sources: &[&'a StoredFilter],
) -> Result<(&'a BloomFilter, Vec<&'a BloomFilter>), MergeError> {
    let all = || std::iter::once(dest).chain(sources.iter().copied());
    if all().any(StoredFilter::is_loading) {
        return Err(MergeError::Loading);
    }
    let kind = |stored: &'a StoredFilter| match stored.filter() {
        Filter::Scalable(filter) => Ok(filter),
        Filter::Window(_) => Err(MergeError::Window),
        Filter::RedisBloom(_) => Err(MergeError::RedisBloom),
        Filter::ValkeyBloom(_) => Err(MergeError::ValkeyBloom),
    };
    let kinds: Vec<_> = all().map(kind).collect();
    if kinds.iter().all(Result::is_err) || kinds.iter().all(Result::is_ok) {
        // Alike kinds: refused for what they are, or all scalable.
        let mut filters = kinds.into_iter().collect::<Result<Vec<_>, _>>()?;
        let dest_filter = filters.remove(0);
        if sources
            .iter()
            .any(|source| source.partition() != dest.partition())
        {
            return Err(MergeError::Differ(Difference::Partition));
        }
        return Ok((dest_filter, filters));
    }
    Err(MergeError::Differ(Difference::Kind))
}

/// Checks that `sources` can be merged into `dest` and returns the layer shapes of the result.
pub fn check(dest: &StoredFilter, sources: &[&StoredFilter]) -> Result<Vec<LayerSize>, MergeError> {
    let (dest, sources) = scalable_inputs(dest, sources)?;
    merged_shapes(dest, &sources).map_err(MergeError::Differ)
}

/// Merges `sources` into `dest`, or refuses with `dest` unchanged.
pub fn merge_into<B: MemoryBudget + ?Sized>(
    dest: &mut StoredFilter,
    sources: &[&StoredFilter],
    budget: &mut B,
) -> Result<Merged, MergeError> {
    let shapes = check(dest, sources)?;
    let sources: Vec<&BloomFilter> = sources
        .iter()
        .filter_map(|source| match source.filter() {
            Filter::Scalable(filter) => Some(filter),
            _ => None,
        })
        .collect();
    let Filter::Scalable(filter) = &mut dest.filter else {
        unreachable!("checked: a scalable filter");
    };
    let pushed = filter
        .union_with(&sources, &shapes, budget)
        .map_err(MergeError::Limit)?;
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
