//! What operations on a scalable filter report: an add's outcome item by item, the layers it
//! pushed, and why a creation, a push or an add was refused.

use crate::budget::LimitError;
use crate::sizing::{LayerSize, SizingError};

/// Why a filter cannot be created.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CreateError {
    Sizing(SizingError),
    /// An explicit first-layer shape that does not fit the parameters.
    Shape(&'static str),
    Limit(LimitError),
}

/// Why an explicit layer (BF.GROW) could not be pushed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PushError {
    /// The shape or the index does not fit this filter.
    Shape(&'static str),
    /// A memory limit refused it.
    Limit(LimitError),
}

/// Why an item could not be added.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InsertError {
    /// The filter already reports the item (not an error to users: the add answers 0).
    Present,
    /// A non-scaling filter holds its capacity.
    NonScalingFull,
    /// Growing would need a layer past [`MAX_LAYERS`](super::MAX_LAYERS) or a size that cannot be represented.
    CannotGrow,
    /// Growing would break a memory limit.
    Limit(LimitError),
}

/// Layers an operation pushed: the one that grew at `index`, with its exact shape, first used by
/// the item at position `first_item` of the operation's batch. This is what replication and the
/// AOF carry, so that replicas never size layers themselves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GrownLayer {
    pub index: usize,
    pub size: LayerSize,
    pub first_item: usize,
}

/// What one add operation did, item by item; filled as the operation goes, so that a caller
/// that catches a panic half-way still knows exactly what changed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AddOutcome {
    /// One entry per processed item, in order: true when it was new (and counted).
    pub added: Vec<bool>,
    /// What stopped the operation at item `added.len()`, if anything did.
    pub error: Option<InsertError>,
    /// Layers pushed, in order.
    pub grown: Vec<GrownLayer>,
}

impl AddOutcome {
    /// Positions (in the batch) of the items that changed the filter.
    pub fn added_positions(&self) -> impl Iterator<Item = usize> + '_ {
        self.added
            .iter()
            .enumerate()
            .filter_map(|(position, &new)| new.then_some(position))
    }
}
