//! The union of scalable filters alike, layer by layer (see [`crate::merge`]).

use super::{BloomFilter, Growth, NextShape};
use crate::budget::{LimitError, MemoryBudget};
use crate::layer::Layer;
use crate::merge::Difference;
use crate::scalable::InsertError;
use crate::sizing::LayerSize;

impl BloomFilter {
    /// The first parameter in which `source` differs from this filter, in the order a user
    /// checks them; None when alike. Layer shapes are compared by [`merged_shapes`].
    pub(crate) fn parameter_difference(&self, source: &BloomFilter) -> Option<Difference> {
        let (ours, theirs) = (&self.params, &source.params);
        if ours.error_rate.to_bits() != theirs.error_rate.to_bits() {
            Some(Difference::ErrorRate)
        } else if ours.capacity != theirs.capacity {
            Some(Difference::Capacity)
        } else if ours.growth != theirs.growth {
            Some(Difference::Expansion)
        } else if ours.tightening.to_bits() != theirs.tightening.to_bits() {
            Some(Difference::Tightening)
        } else if ours.seed != theirs.seed {
            Some(Difference::Seed)
        } else {
            None
        }
    }

    /// ORs `sources` (alike, see [`merged_shapes`]) into this filter: layers only a source has
    /// are pushed first with that source's shape, charged to `budget`; refused as a whole (the
    /// filter unchanged) when the budget or the system refuses one. Then each layer becomes the
    /// union of its inputs, its count estimated ([`Layer::union_with`]). Returns the indices and
    /// shapes of the layers pushed.
    pub(crate) fn union_with<B: MemoryBudget + ?Sized>(
        &mut self,
        sources: &[&BloomFilter],
        shapes: &[LayerSize],
        budget: &mut B,
    ) -> Result<Vec<(usize, LayerSize)>, LimitError> {
        let before = self.layers.len();
        let mut pushed = Vec::new();
        for (index, shape) in shapes.iter().enumerate().skip(before) {
            if let Err(error) = self.push_checked_layer(index, *shape, budget) {
                self.truncate_layers(before);
                return Err(match error {
                    InsertError::Limit(limit) => limit,
                    // The sources' own layers, so never past the growth rule.
                    _ => LimitError::Allocation {
                        needed: shape.bytes(),
                    },
                });
            }
            pushed.push((index, *shape));
        }
        for (index, layer) in self.layers.iter_mut().enumerate() {
            let inputs: Vec<&Layer> = sources
                .iter()
                .filter_map(|source| source.layers.get(index))
                .collect();
            if !inputs.is_empty() {
                layer.union_with(&inputs);
            }
        }
        self.next_shape = NextShape::default();
        Ok(pushed)
    }

    /// Drops the layers from `len` on (only layers a failed merge pushed, all empty).
    fn truncate_layers(&mut self, len: usize) {
        let mut layers = std::mem::take(&mut self.layers).into_vec();
        layers.truncate(len);
        self.layers = layers.into_boxed_slice();
        self.next_shape = NextShape::default();
    }
}

/// The layer shapes of the union of `dest` and `sources`, which must have alike parameters:
/// `dest`'s own, then those only sources have; the first difference when a source's layer
/// differs from the layer of that index in `dest` or an earlier source ([`Difference::Layout`]).
pub(crate) fn merged_shapes(
    dest: &BloomFilter,
    sources: &[&BloomFilter],
) -> Result<Vec<LayerSize>, Difference> {
    let mut shapes: Vec<LayerSize> = dest.layers.iter().map(Layer::size).collect();
    for source in sources {
        if let Some(difference) = dest.parameter_difference(source) {
            return Err(difference);
        }
        for (index, layer) in source.layers.iter().enumerate() {
            match shapes.get(index) {
                Some(shape) if *shape != layer.size() => return Err(Difference::Layout),
                Some(_) => {}
                None => shapes.push(layer.size()),
            }
        }
    }
    // Alike parameters: a non-scaling filter never has a second layer to add.
    debug_assert!(dest.params.growth != Growth::NonScaling || shapes.len() == 1);
    Ok(shapes)
}
