//! A scalable filter's parameters and its growth rule: the capacity and error rate each layer
//! is sized for (see the table in [`crate`]'s "The scalable filter").

#[cfg(feature = "test-hooks")]
use super::test_hooks;
use crate::math;
use crate::sizing::{self, layer_size, LayerSize, SizingError};

/// Each new layer gets this fraction of the previous layer's error rate, so the rates of all
/// layers sum to less than the requested one (Almeida et al.'s tightening ratio, as RedisBloom).
pub const TIGHTENING_RATIO: f64 = 0.5;

/// A non-scaling filter is sized for this fraction of the requested rate. Its one layer carries the
/// whole error budget, so the margin absorbs the double-hashing correlation and sampling noise and
/// the rate users measure at full capacity stays under what they asked for. Scaling filters need
/// no margin: their first layer gets half the budget and the series leaves the rest unused until
/// the filter grows.
pub const NON_SCALING_MARGIN: f64 = 0.9;

/// The largest capacity of a filter's first layer (RedisBloom's bound on a reservation).
pub const MAX_CAPACITY: u64 = 1 << 30;

/// The largest expansion a filter may have: RedisBloom's bound, which its own filters kept here
/// ([`crate::redisbloom`]) are held to as well.
pub const MAX_EXPANSION: u32 = 32768;

/// A filter never has more layers than this. With expansion 2 that is 2^64 × the initial capacity;
/// the cap exists for expansion 1, where every layer costs lookups on every later command.
pub const MAX_LAYERS: usize = 64;

/// How one scalable filter grows once its newest layer is full: the `EXPANSION` or
/// `NONSCALING` of its BF.RESERVE.
///
/// Two other types describe growth and are not this one: [`crate::partition::PartitionGrowth`],
/// what every partition of a partitioned filter is (one of these two, or a sliding window), kept
/// in its descriptor; and the client crate's `Growth`, what a client asks BF.RESERVE for (an
/// expansion it may leave to the server's default, or a window).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Growth {
    /// Push a layer `expansion` times the newest one's capacity.
    Scaling { expansion: u32 },
    /// Refuse new items once full.
    NonScaling,
}

/// The parameters a filter was created with; everything needed to recreate it identically.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FilterParams {
    /// Capacity of the first layer.
    pub capacity: u64,
    /// The requested overall false-positive rate.
    pub error_rate: f64,
    pub growth: Growth,
    /// Seed of the item hash.
    pub seed: u64,
}

impl FilterParams {
    /// The error rate layer `index` is sized for.
    pub fn layer_error_rate(&self, index: usize) -> f64 {
        match self.growth {
            Growth::NonScaling => self.error_rate * NON_SCALING_MARGIN,
            Growth::Scaling { .. } => {
                self.error_rate * math::powi(TIGHTENING_RATIO, index as u32 + 1)
            }
        }
    }

    /// The capacity of layer `index`, or None when it would overflow.
    pub fn layer_capacity(&self, index: usize) -> Option<u64> {
        match self.growth {
            Growth::NonScaling => (index == 0).then_some(self.capacity),
            Growth::Scaling { expansion } => u64::from(expansion)
                .checked_pow(u32::try_from(index).ok()?)
                .and_then(|factor| factor.checked_mul(self.capacity)),
        }
    }

    /// The shape of layer `index`.
    pub fn layer_size(&self, index: usize) -> Result<LayerSize, SizingError> {
        let capacity = self.layer_capacity(index).ok_or(SizingError::Capacity)?;
        let size = layer_size(capacity, self.layer_error_rate(index))?;
        #[cfg(feature = "test-hooks")]
        let size = test_hooks::skewed(size);
        Ok(size)
    }

    /// Ok when `size` is a shape layer `index` of this filter could have, whoever sized it: enough
    /// bits for its capacity at its error rate, and a hash count that rate implies. What a decoder
    /// and an explicit growth (BF.GROW) check before trusting a shape.
    pub fn check_layer(&self, index: usize, size: LayerSize) -> Result<(), &'static str> {
        let capacity = self.layer_capacity(index).ok_or("capacity")?;
        sizing::check_shape(size, capacity, self.layer_error_rate(index))
    }
}
