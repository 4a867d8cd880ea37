//! A scalable filter's parameters and its growth rule: the capacity and error rate each layer
//! is sized for (see the table in [`crate`]'s "The scalable filter").

#[cfg(feature = "test-hooks")]
use super::test_hooks;
use crate::math;
use crate::sizing::{self, layer_size, LayerSize, SizingError};

/// Each new layer gets this fraction of the previous layer's error rate, so the rates of all
/// layers sum to less than the requested one (Almeida et al.'s tightening ratio, as RedisBloom):
/// the ratio of every filter created without `TIGHTENING`.
pub const TIGHTENING_RATIO: f64 = 0.5;

/// Whether `ratio` can be a filter's tightening ratio: strictly between 0 and 1 (valkey-bloom's
/// range), so that the layers' rates shrink and their sum converges.
pub fn is_tightening_ratio(ratio: f64) -> bool {
    ratio > 0.0 && ratio < 1.0
}

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
    /// Each new layer's error rate over the previous one's, in (0, 1): [`TIGHTENING_RATIO`]
    /// unless the filter was created with `TIGHTENING r`. A non-scaling filter has one layer and
    /// always keeps [`TIGHTENING_RATIO`] here, so that it has one encoding.
    pub tightening: f64,
}

impl FilterParams {
    /// The error rate layer `index` is sized for: ε·(1 − r)·r^i for a scaling filter of
    /// tightening ratio r, so that the rates of all layers, however many, sum to less than ε
    /// (a geometric series: ε·(1 − r)·(1 + r + r² + …) = ε). With r = ½ that is ε·½^(i+1),
    /// RedisBloom's series, bit for bit (every factor a power of two). valkey-bloom gives layer i
    /// ε·r^i instead, so its first layer alone spends the whole budget; its own objects keep its
    /// rule ([`crate::valkeybloom`]), ours keep this one whatever r they were given.
    pub fn layer_error_rate(&self, index: usize) -> f64 {
        match self.growth {
            Growth::NonScaling => self.error_rate * NON_SCALING_MARGIN,
            Growth::Scaling { .. } => {
                self.error_rate
                    * (1.0 - self.tightening)
                    * math::powi(self.tightening, index as u32)
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

    /// The capacity a filter of these parameters reaches, from `capacity` items in `bytes`
    /// allocated over its first `layers` layers, by pushing layers until the next would take
    /// the allocation past `max_bytes`, could not be sized, or would be layer [`MAX_LAYERS`]
    /// (valkey-bloom's MAXSCALEDCAPACITY and VALIDATESCALETO; a non-scaling filter stays at
    /// `capacity`).
    pub fn scaled_capacity_from(
        &self,
        layers: usize,
        mut capacity: u64,
        mut bytes: u64,
        max_bytes: u64,
    ) -> u64 {
        if self.growth == Growth::NonScaling {
            return capacity;
        }
        for index in layers..MAX_LAYERS {
            let (Some(layer_capacity), Ok(size)) =
                (self.layer_capacity(index), self.layer_size(index))
            else {
                break;
            };
            bytes = bytes.saturating_add(crate::layer::layer_allocation_size(size.bytes()));
            if bytes > max_bytes {
                break;
            }
            capacity = capacity.saturating_add(layer_capacity);
        }
        capacity
    }

    /// The capacity a new filter of these parameters could reach with at most `max_bytes`
    /// allocated for its bits (0 when not even its first layer fits).
    pub fn max_scaled_capacity(&self, max_bytes: u64) -> u64 {
        match (self.layer_size(0), self.layer_capacity(0)) {
            (Ok(size), Some(capacity))
                if crate::layer::layer_allocation_size(size.bytes()) <= max_bytes =>
            {
                let bytes = crate::layer::layer_allocation_size(size.bytes());
                self.scaled_capacity_from(1, capacity, bytes, max_bytes)
            }
            _ => 0,
        }
    }

    /// Ok when `size` is a shape layer `index` of this filter could have, whoever sized it: enough
    /// bits for its capacity at its error rate, and a hash count that rate implies. What a decoder
    /// and an explicit growth (BF.GROW) check before trusting a shape.
    pub fn check_layer(&self, index: usize, size: LayerSize) -> Result<(), &'static str> {
        let capacity = self.layer_capacity(index).ok_or("capacity")?;
        sizing::check_shape(size, capacity, self.layer_error_rate(index))
    }
}
