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

impl std::fmt::Display for CreateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CreateError::Sizing(sizing) => sizing.fmt(f),
            CreateError::Shape(why) => write!(f, "bad layer shape: {why}"),
            CreateError::Limit(limit) => limit.fmt(f),
        }
    }
}

/// Why an explicit layer (BF.GROW) could not be pushed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PushError {
    /// The shape or the index does not fit this filter.
    Shape(&'static str),
    /// A memory limit refused it.
    Limit(LimitError),
}

impl std::fmt::Display for PushError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PushError::Shape(why) => write!(f, "cannot grow: {why}"),
            PushError::Limit(limit) => limit.fmt(f),
        }
    }
}

/// Why an item could not be added.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InsertError {
    /// A non-scaling filter holds its capacity.
    NonScalingFull,
    /// Growing would need a layer past [`MAX_LAYERS`](super::MAX_LAYERS) or a size that cannot be represented.
    CannotGrow,
    /// Growing would break a memory limit.
    Limit(LimitError),
}

impl std::fmt::Display for InsertError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            InsertError::NonScalingFull => f.write_str("non scaling filter is full"),
            InsertError::CannotGrow => f.write_str(
                "filter cannot grow any further (layer limit reached); create a larger one",
            ),
            InsertError::Limit(limit) => limit.fmt(f),
        }
    }
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
