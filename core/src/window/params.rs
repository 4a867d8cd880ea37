//! What a window filter is created with ([`WindowParams`]), the shape its slots get from them
//! ([`WindowShape`], by the layout rules of [`crate::window`]) and why creation is refused.

use super::encoding;
use crate::bits;
use crate::budget::LimitError;
use crate::math;
use crate::scalable::MAX_CAPACITY;
use crate::sizing::{check_shape, slot_size, LayerSize, SizingError};

/// Generations per window (l). Three keeps the forget bound 4⌈W/3⌉ within the 2W the contract
/// allows for every W ≥ 4 ms, and at ε = 1e-2 costs 1.87× a classic filter where two generations
/// cost 1.99× and four 1.83× (blocked): more generations mean more slots per lookup for little
/// memory.
pub const GENERATIONS_PER_WINDOW: u64 = 3;

/// Slots in the ring: the generations a window reaches into, plus the current one.
pub const SLOTS: usize = GENERATIONS_PER_WINDOW as usize + 1;

/// Each slot is sized for this fraction of its share ε/[`SLOTS`], as a non-scaling filter is (see
/// [`crate::scalable::NON_SCALING_MARGIN`]): the union bound is tight when all four slots are
/// full, and the margin keeps the measured rate under ε despite double-hashing correlation.
pub const SLOT_MARGIN: f64 = 0.9;

/// The blocked layout is used when the four slots take at most this many times the bits of a
/// classic filter of N items at ε (the contract allows 2.1; the rest absorbs rounding to blocks).
pub const MAX_MEMORY_FACTOR: f64 = 2.0;

/// The blocked layout is used only while its slots take at most this many times the bits of
/// classic ones (+6% at ε = 1e-2, +12% at 1e-3, +19% at 1e-4 for big windows): at 1e-5 it would
/// take +35%, where two lines per item take +5% (and the window's memory would otherwise grow
/// from 1e-6 to 1e-5).
pub const BLOCKED_MAX_COST: f64 = 1.25;

/// The shortest window: below 4 ms, ⌈W/3⌉·4 exceeds 2W.
pub const MIN_WINDOW_MS: u64 = 4;

/// The longest window, 2^40 ms (about 35 years): beyond any use, and it keeps every generation
/// arithmetic far from overflow.
pub const MAX_WINDOW_MS: u64 = 1 << 40;

/// What a window filter is created with; everything needed to recreate it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WindowParams {
    /// The false-positive rate at `capacity` items per window, in (0, 1).
    pub error_rate: f64,
    /// Distinct items that may arrive within one window (N), 1..=[`MAX_CAPACITY`].
    pub capacity: u64,
    /// The window W in milliseconds, [`MIN_WINDOW_MS`]..=[`MAX_WINDOW_MS`].
    pub window_ms: u64,
    /// Seed of the item hash.
    pub seed: u64,
}

/// Why a window filter cannot be created.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WindowError {
    /// The error rate is not in (0, 1), or too small to size.
    ErrorRate,
    /// Capacity zero or above [`MAX_CAPACITY`].
    Capacity,
    /// Window outside [`MIN_WINDOW_MS`]..=[`MAX_WINDOW_MS`].
    Window,
    /// The memory budget, or the system, refused the bits.
    Limit(LimitError),
    /// An explicit slot shape these parameters cannot have ([`WindowParams::check_slot`]).
    Shape(&'static str),
}

impl std::fmt::Display for WindowError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WindowError::ErrorRate => SizingError::ErrorRate.fmt(f),
            WindowError::Capacity => SizingError::Capacity.fmt(f),
            WindowError::Window => f.write_str("bad window"),
            WindowError::Limit(limit) => limit.fmt(f),
            WindowError::Shape(why) => write!(f, "bad slot shape: {why}"),
        }
    }
}

/// The shape of a window filter: what its header stores and its bits follow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowShape {
    /// The shape shared by the four slots.
    pub slot: LayerSize,
    /// Length of one generation in ms: ⌈W / 3⌉.
    pub generation_ms: u64,
}

impl WindowShape {
    /// Bytes of bits over all slots.
    pub fn bytes(&self) -> u64 {
        self.slot.bytes() * SLOTS as u64
    }

    /// The generation a timestamp falls in.
    pub fn generation(&self, ms: u64) -> u64 {
        ms / self.generation_ms
    }

    /// The first moment of the generation after `generation` (saturated).
    pub(super) fn generation_end(&self, generation: u64) -> u64 {
        (generation + 1).saturating_mul(self.generation_ms)
    }

    /// The first moment at which an item written at `write_ms` (the timestamp the write used, see
    /// [`Inserted::at_ms`](super::Inserted::at_ms)) is no longer held: the start of the fourth generation after its own.
    /// Saturates at `u64::MAX`.
    pub fn forgotten_at(&self, write_ms: u64) -> u64 {
        (self.generation(write_ms) + SLOTS as u64).saturating_mul(self.generation_ms)
    }
}

impl WindowParams {
    /// Items each slot is sized for: one generation's share, ⌈N/3⌉.
    pub fn slot_capacity(&self) -> u64 {
        self.capacity.div_ceil(GENERATIONS_PER_WINDOW)
    }

    /// The false-positive rate each slot is sized for: 0.9·ε/4.
    pub fn slot_error_rate(&self) -> f64 {
        SLOT_MARGIN * self.error_rate / SLOTS as f64
    }

    /// The shape these parameters give, or why they are refused.
    ///
    /// ```
    /// use rustbloom_core::window::{WindowError, WindowParams};
    /// let params = WindowParams { error_rate: 0.001, capacity: 300_000, window_ms: 90_000, seed: 1 };
    /// let shape = params.shape().unwrap();
    /// assert_eq!(shape.generation_ms, 30_000);
    /// let classic_bits = 300_000.0 * (1.0f64 / 0.001).ln() / std::f64::consts::LN_2.powi(2);
    /// assert!((shape.bytes() * 8) as f64 <= 2.0 * classic_bits);
    /// assert_eq!(WindowParams { window_ms: 3, ..params }.shape(), Err(WindowError::Window));
    /// ```
    pub fn shape(&self) -> Result<WindowShape, WindowError> {
        if !(self.error_rate > 0.0 && self.error_rate < 1.0) {
            return Err(WindowError::ErrorRate);
        }
        if !(1..=MAX_CAPACITY).contains(&self.capacity) {
            return Err(WindowError::Capacity);
        }
        if !(MIN_WINDOW_MS..=MAX_WINDOW_MS).contains(&self.window_ms) {
            return Err(WindowError::Window);
        }
        // ln comes from crate::math, as all of the sizing, so every machine picks the same layout.
        let max_bits = MAX_MEMORY_FACTOR * self.capacity as f64 * math::ln(1.0 / self.error_rate)
            / (std::f64::consts::LN_2 * std::f64::consts::LN_2);
        let slot = slot_size(
            self.slot_capacity(),
            self.slot_error_rate(),
            SLOTS as u64,
            max_bits,
            BLOCKED_MAX_COST,
        )
        .map_err(|error| match error {
            SizingError::ErrorRate => WindowError::ErrorRate,
            SizingError::Capacity => WindowError::Capacity,
        })?;
        #[cfg(feature = "test-hooks")]
        let slot = crate::scalable::test_hooks::skewed(slot);
        Ok(self.shape_with(slot))
    }

    pub(super) fn shape_with(&self, slot: LayerSize) -> WindowShape {
        WindowShape {
            slot,
            generation_ms: self.window_ms.div_ceil(GENERATIONS_PER_WINDOW),
        }
    }

    /// Ok when `slot` is a shape these parameters' slots could have, whoever sized them (see
    /// [`crate::sizing::check_shape`]): what an explicit slot shape must pass before it is
    /// trusted ([`WindowFilter::with_slot_shape`](super::WindowFilter::with_slot_shape)).
    pub fn check_slot(&self, slot: LayerSize) -> Result<(), WindowError> {
        // The parameters' own checks first, with the sizing they imply.
        self.shape()?;
        slot.check().map_err(WindowError::Shape)?;
        if slot.bits > encoding::MAX_SLOT_BITS {
            return Err(WindowError::Shape("bit count"));
        }
        check_shape(slot, self.slot_capacity(), self.slot_error_rate()).map_err(WindowError::Shape)
    }
}

/// Bytes a window filter with these parameters allocates for its bits, known before allocating:
/// what a bit store of [`WindowShape::bytes`] takes ([`bits::allocated_bytes`]), what its
/// creation charges the budget and [`WindowFilter::allocated_bytes`](super::WindowFilter::allocated_bytes) reports.
pub fn bytes_needed(params: &WindowParams) -> Result<u64, WindowError> {
    Ok(bits::allocated_bytes(params.shape()?.bytes()))
}
