//! The stored fields of a valkey-bloom object before its bit arrays are allocated, the limits a
//! decoder holds them to, and how valkey-bloom 1.0 sizes each filter.
//!
//! valkey-bloom keeps an object of one or more plain filters ("layers" here; its "filters"),
//! each a `bloomfilter` crate `Bloom<[u8]>`. Layer i (0 = oldest) is created as:
//!
//! ```text
//!   error_i    = fp_rate · tightening^i                  (layer 0: fp_rate itself)
//!   capacity_i = capacity_(i-1) · expansion              (expansion 0: one layer, never grows)
//!   bytes_i    = ⌈capacity_i · ln(error_i) / (−8 · ln²2)⌉   (the crate's compute_bitmap_size)
//!   hashes_i   = max(1, round(8 · bytes_i / capacity_i · ln 2))   (the crate's optimal_k_num)
//!   seed_i     = seed_0 (every layer shares the first layer's 32-byte seed)
//! ```
//!
//! A layer takes items until it holds `capacity_i`; then the next is pushed (growth fails when
//! error_i would not stay above the smallest normal double, as valkey-bloom's does). The
//! decoders accept exactly what that rule produces, give or take one byte or one hash for the
//! last bits of another C library's `log`, so that a forged payload cannot claim a small filter
//! with a huge array, huge hash counts or items its bits cannot hold.

use crate::encoding::{check, DecodeError};

/// valkey-bloom's built-in seed, which every filter of an object in fixed-seed mode carries.
pub const FIXED_SEED: [u8; 32] = [
    89, 15, 245, 34, 234, 120, 17, 218, 167, 20, 216, 9, 59, 62, 123, 217, 29, 137, 138, 115, 62,
    152, 136, 135, 48, 127, 151, 205, 40, 7, 51, 131,
];

/// Most layers an object may have. valkey-bloom has no count limit of its own (its 128 MiB
/// memory limit per object bounds it); every lookup probes every layer, so ours is the bound
/// of the RedisBloom kind's links, with room for slow tightening.
pub const MAX_LAYERS: usize = 4096;
/// Most probes one lookup may make over all layers (the RedisBloom kind's bound): at the
/// default tightening 0.5 each layer needs about one hash more than the one before, from at
/// most ~1023 (an error rate near the smallest normal double).
pub const MAX_TOTAL_HASHES: u64 = 1075 * 1076 / 2;
/// Largest capacity valkey-bloom can hold (it keeps counts as i64).
pub const MAX_CAPACITY: u64 = i64::MAX as u64;

/// What the whole object stores besides its layers.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ObjectParams {
    /// Each new layer's capacity is the previous one's times this; 0 for a non-scaling object.
    pub expansion: u32,
    /// The error rate of layer 0.
    pub fp_rate: f64,
    /// Each new layer's error rate is the previous one's times this (valkey-bloom's default 0.5).
    pub tightening: f64,
    /// Whether the seed was drawn at random (else it is [`FIXED_SEED`]).
    pub seed_random: bool,
    /// The 32-byte seed of every layer: two SipHash-1-3 keys.
    pub seed: [u8; 32],
}

impl ObjectParams {
    /// Checks the object-wide fields against what valkey-bloom accepts.
    pub(crate) fn validate(&self) -> Result<(), DecodeError> {
        check(self.fp_rate > 0.0 && self.fp_rate < 1.0, "error rate")?;
        check(
            self.tightening > 0.0 && self.tightening < 1.0,
            "tightening ratio",
        )?;
        check(
            self.seed_random || self.seed == FIXED_SEED,
            "fixed-seed object without the fixed seed",
        )
    }

    /// The error rate valkey-bloom gives layer `index`, or None where it would underflow (no
    /// such layer can exist).
    pub fn layer_error(&self, index: usize) -> Option<f64> {
        let index = i32::try_from(index).ok()?;
        let error = self.fp_rate * self.tightening.powi(index);
        (error > f64::MIN_POSITIVE).then_some(error)
    }

    pub fn is_scaling(&self) -> bool {
        self.expansion != 0
    }

    /// The capacity an object of these parameters reaches, from `capacity` items in `bytes` of
    /// bitmaps over its first `layers` layers (the newest of `last_capacity`), by pushing layers
    /// by valkey-bloom's rule until the next would take the bitmaps past `max_bytes` or could
    /// not be made (valkey-bloom's MAXSCALEDCAPACITY and VALIDATESCALETO).
    pub fn scaled_capacity_from(
        &self,
        mut layers: usize,
        mut last_capacity: u64,
        mut capacity: u64,
        mut bytes: u64,
        max_bytes: u64,
    ) -> u64 {
        while self.is_scaling() && layers < MAX_LAYERS {
            let Some(next) = self.layer_error(layers).and_then(|error| {
                let capacity = last_capacity.checked_mul(u64::from(self.expansion))?;
                (capacity <= MAX_CAPACITY).then(|| LayerShape::new(capacity, error))?
            }) else {
                break;
            };
            bytes = bytes.saturating_add(crate::bits::allocated_bytes(next.bytes));
            if bytes > max_bytes {
                break;
            }
            capacity = capacity.saturating_add(next.capacity);
            last_capacity = next.capacity;
            layers += 1;
        }
        capacity
    }

    /// The capacity a new object of these parameters and a first layer of `capacity` items
    /// could reach with at most `max_bytes` of bitmaps (0 when not even its first layer fits).
    pub fn max_scaled_capacity(&self, capacity: u64, max_bytes: u64) -> u64 {
        match LayerShape::new(capacity, self.fp_rate) {
            Some(first) if crate::bits::allocated_bytes(first.bytes) <= max_bytes => self
                .scaled_capacity_from(
                    1,
                    capacity,
                    capacity,
                    crate::bits::allocated_bytes(first.bytes),
                    max_bytes,
                ),
            _ => 0,
        }
    }
}

/// One layer's stored fields, without its bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LayerShape {
    /// Bytes of its bitmap (the crate's `len_bytes`).
    pub bytes: u64,
    /// Hash functions (the crate's `k_num`).
    pub hashes: u32,
    /// Items it takes before the next layer is pushed.
    pub capacity: u64,
    /// Items it holds.
    pub items: u64,
}

impl LayerShape {
    /// A fresh layer for `capacity` items at `error`, as the crate sizes it; None when the
    /// sizes cannot be represented.
    pub fn new(capacity: u64, error: f64) -> Option<LayerShape> {
        let bytes = bitmap_bytes(capacity, error)?;
        Some(LayerShape {
            bytes,
            hashes: optimal_hashes(bytes.checked_mul(8)?, capacity),
            capacity,
            items: 0,
        })
    }

    /// Bits of the bitmap: the modulus of every probe.
    pub fn bits(&self) -> u64 {
        self.bytes * 8
    }

    /// Checks this layer as layer `index` of an object of `params` whose previous layer had
    /// `previous_capacity` (None for layer 0), holding `items`.
    pub(crate) fn validate(
        &self,
        params: &ObjectParams,
        index: usize,
        previous_capacity: Option<u64>,
    ) -> Result<(), DecodeError> {
        check((1..=MAX_CAPACITY).contains(&self.capacity), "capacity")?;
        if let Some(previous) = previous_capacity {
            check(
                params.is_scaling(),
                "several layers in a non-scaling object",
            )?;
            check(
                previous.checked_mul(u64::from(params.expansion)) == Some(self.capacity),
                "capacity is not the previous one times the expansion",
            )?;
        }
        check(self.items <= self.capacity, "items over capacity")?;
        let error = params
            .layer_error(index)
            .ok_or(DecodeError::Corrupt("layer error rate underflows"))?;
        let expected = bitmap_bytes(self.capacity, error).ok_or(DecodeError::Corrupt("size"))?;
        check(
            self.bytes.abs_diff(expected) <= 1 && self.bytes > 0,
            "bitmap size is not the one its capacity and error rate give",
        )?;
        let bits = self
            .bytes
            .checked_mul(8)
            .ok_or(DecodeError::Corrupt("size"))?;
        check(
            self.hashes.abs_diff(optimal_hashes(bits, self.capacity)) <= 1 && self.hashes > 0,
            "hash count is not the one its size and capacity give",
        )
    }
}

/// The `bloomfilter` crate's `compute_bitmap_size`: ⌈capacity · ln(error) / (−8 ln²2)⌉ bytes.
/// None when error is outside (0, 1), capacity is 0, or the size does not fit a u64 or an
/// address.
pub fn bitmap_bytes(capacity: u64, error: f64) -> Option<u64> {
    if capacity == 0 || !(error > 0.0 && error < 1.0) {
        return None;
    }
    let ln2 = std::f64::consts::LN_2;
    let bytes = ((capacity as f64) * error.ln() / (-8.0 * (ln2 * ln2))).ceil();
    // Below 2^63 (an address's range and exact in a double's conversion to u64).
    (1.0..9_223_372_036_854_775_808.0)
        .contains(&bytes)
        .then_some(bytes as u64)
}

/// The `bloomfilter` crate's `optimal_k_num`: max(1, round(bits / capacity · ln 2)), saturating
/// (a count this large fails every validation that follows).
pub fn optimal_hashes(bits: u64, capacity: u64) -> u32 {
    let hashes = (bits as f64 / capacity as f64 * 2.0f64.ln()).round();
    // `as` saturates at u32::MAX (and a NaN, impossible for capacity ≥ 1, gives 0).
    (hashes as u32).max(1)
}

/// Everything a decoder learned about an object before it allocates the bit arrays.
#[derive(Clone, Debug, PartialEq)]
pub struct ObjectShape {
    pub params: ObjectParams,
    /// Oldest first.
    pub layers: Vec<LayerShape>,
}

impl ObjectShape {
    /// Checks the whole object: its params, each layer in its place, that only the newest layer
    /// may be partly full (valkey-bloom pushes a layer only when the newest is full), and the
    /// bounds on layers and probes.
    pub(crate) fn validate(&self) -> Result<(), DecodeError> {
        self.params.validate()?;
        check((1..=MAX_LAYERS).contains(&self.layers.len()), "layer count")?;
        let mut previous = None;
        let mut hashes = 0u64;
        for (index, layer) in self.layers.iter().enumerate() {
            layer.validate(&self.params, index, previous)?;
            if index + 1 < self.layers.len() {
                check(layer.items == layer.capacity, "an older layer not full")?;
            }
            hashes += u64::from(layer.hashes);
            previous = Some(layer.capacity);
        }
        check(hashes <= MAX_TOTAL_HASHES, "hashes over the layers")?;
        check(self.total_bytes().is_some(), "total bytes")
    }

    /// Bytes of all bitmaps, when their sum fits.
    pub fn total_bytes(&self) -> Option<u64> {
        self.layers
            .iter()
            .try_fold(0u64, |sum, layer| sum.checked_add(layer.bytes))
    }

    /// Bytes the allocator hands out for all bitmaps (see [`crate::bits`]).
    pub fn allocated_bytes(&self) -> u64 {
        self.layers.iter().fold(0u64, |sum, layer| {
            sum.saturating_add(crate::bits::allocated_bytes(layer.bytes))
        })
    }
}
