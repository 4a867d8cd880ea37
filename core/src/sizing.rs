//! Sizing math: layout, bits and hash count of a layer from (capacity, error rate).
//!
//! Only the crate's own ln and exp (`math.rs`) are used, never libm's, so a shape is the same on
//! every machine. Replicas and the AOF receive every layer's shape explicitly (BF.GROW), but an
//! AOF or replication stream written by an older release replays its growth by sizing here.

use super::math;

/// The most hash functions a layer may use. Enough for error rates around 1e-70, far below what
/// any scaling filter reaches before it hits the layer cap.
pub const MAX_HASHES: u32 = 255;

/// Bits in one block of a [`Layout::Blocked`] layer: one 64-byte cache line.
pub const BLOCK_BITS: u64 = 512;

/// The most hashes a blocked layer uses (more would crowd one block; such error rates get the
/// classic layout anyway).
pub const MAX_BLOCKED_HASHES: u32 = 16;

/// Layers whose classic size is below this stay classic: they sit in the CPU caches, where the
/// k probes of the classic layout cost little (measured here: at 1.2 MB blocked saves ~1 ns of
/// ~12 ns per lookup; at 12 MB 30%, at 120 MB 20–25%, with batches).
pub const BLOCKED_MIN_BYTES: u64 = 8 << 20;

/// A big layer goes blocked when that costs at most this factor in bits over classic: a few
/// percent more memory for one cache miss per item instead of k (Putze, Sanders, Singler,
/// "Cache-, Hash- and Space-Efficient Bloom Filters", 2007). The penalty grows as the error rate
/// falls (≈3% at 1%, ≈8% at 0.1%), so tight filters keep the classic layout.
pub const BLOCKED_MAX_COST: f64 = 1.06;

/// Where an item's bits go in a layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// k positions anywhere in the layer.
    Classic,
    /// k positions inside one 512-bit block chosen per item.
    Blocked,
}

/// The shape of one layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LayerSize {
    /// Number of bits, a positive multiple of 64 (of 512 when blocked).
    pub bits: u64,
    /// Number of hash probes per item, in `1..=MAX_HASHES` (`..=MAX_BLOCKED_HASHES` when blocked).
    pub num_hashes: u32,
    pub layout: Layout,
}

impl LayerSize {
    /// Bytes of bit storage.
    pub fn bytes(&self) -> u64 {
        self.bits / 8
    }
}

/// Why a layer cannot be sized.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SizingError {
    /// The error rate is not strictly between 0 and 1, or so small it needs more than
    /// [`MAX_HASHES`] hashes.
    ErrorRate,
    /// Capacity zero, or a size beyond 2^60 bits.
    Capacity,
}

/// Sizes a layer so that `capacity` items give a false-positive rate of at most `error_rate`:
/// the classic layout, or the blocked one for big layers where it costs little (see
/// [`BLOCKED_MAX_COST`]).
///
/// ```
/// use rustbloom_core::sizing::{layer_size, Layout};
/// let small = layer_size(10_000, 0.01).unwrap();
/// assert_eq!((small.layout, small.num_hashes), (Layout::Classic, 7));
/// let big = layer_size(10_000_000, 0.01).unwrap();
/// assert_eq!(big.layout, Layout::Blocked);
/// // The classic optimum is ln(1/ε)/ln²2 = 9.585 bits per item.
/// let bits_per_item = big.bits as f64 / 1e7;
/// assert!(bits_per_item > 9.585 && bits_per_item < 9.585 * 1.06, "{bits_per_item}");
/// ```
pub fn layer_size(capacity: u64, error_rate: f64) -> Result<LayerSize, SizingError> {
    let classic = classic_size(capacity, error_rate)?;
    if classic.bytes() < BLOCKED_MIN_BYTES {
        return Ok(classic);
    }
    match blocked_size(capacity, error_rate) {
        Some(blocked) if blocked.bits as f64 <= classic.bits as f64 * BLOCKED_MAX_COST => {
            Ok(blocked)
        }
        _ => Ok(classic),
    }
}

/// The classic layout: solve (1 − e^(−k·n/m))^k ≤ ε for the smallest m, over the integers k
/// near the optimum log2(1/ε) (rounding k itself, as RedisBloom does, overshoots the rate).
/// m is rounded up to whole 64-bit words.
pub fn classic_size(capacity: u64, error_rate: f64) -> Result<LayerSize, SizingError> {
    if !(error_rate > 0.0 && error_rate < 1.0) {
        return Err(SizingError::ErrorRate);
    }
    if capacity == 0 {
        return Err(SizingError::Capacity);
    }
    let optimal_k = math::ln(1.0 / error_rate) / std::f64::consts::LN_2;
    if !optimal_k.is_finite() || optimal_k > f64::from(MAX_HASHES) {
        return Err(SizingError::ErrorRate);
    }
    let lowest = (optimal_k.floor() as u32).saturating_sub(1).max(1);
    let highest = (optimal_k.ceil() as u32 + 1).min(MAX_HASHES);
    let (num_hashes, bits_per_item) = cheapest(lowest..=highest, |k| {
        Some(classic_bits_per_item(k, error_rate))
    });
    let bits = round_up(capacity, bits_per_item, 64)?;
    Ok(LayerSize {
        bits,
        num_hashes,
        layout: Layout::Classic,
    })
}

/// The blocked layout: an item's k bits land in one 512-bit block. With n items over B blocks a
/// block holds j items with probability Poisson(j; λ = n/B), and a query that falls in it is a
/// false positive with probability (1 − (1 − 1/512)^(k·j))^k; the rate is the sum over j. We
/// bisect for the smallest bits per item meeting ε, for each k, and keep the cheapest. None when
/// no k up to [`MAX_BLOCKED_HASHES`] reaches ε within 200 bits per item.
pub fn blocked_size(capacity: u64, error_rate: f64) -> Option<LayerSize> {
    let optimal_k = math::ln(1.0 / error_rate) / std::f64::consts::LN_2;
    let highest = (optimal_k.ceil() as u32 + 1).min(MAX_BLOCKED_HASHES);
    let lowest = highest.saturating_sub(6).max(1);
    let (num_hashes, bits_per_item) = cheapest(lowest..=highest, |k| {
        let (mut low, mut high) = (1.0, 200.0);
        if blocked_error_rate(high, k) > error_rate {
            return None;
        }
        for _ in 0..50 {
            let mid = (low + high) / 2.0;
            if blocked_error_rate(mid, k) > error_rate {
                low = mid;
            } else {
                high = mid;
            }
        }
        Some(high)
    });
    if !bits_per_item.is_finite() {
        return None;
    }
    let bits = round_up(capacity, bits_per_item, BLOCK_BITS).ok()?;
    Some(LayerSize {
        bits,
        num_hashes,
        layout: Layout::Blocked,
    })
}

/// The k (and its bits per item) with the fewest bits per item.
fn cheapest(
    candidates: std::ops::RangeInclusive<u32>,
    bits_per_item: impl Fn(u32) -> Option<f64>,
) -> (u32, f64) {
    candidates
        .filter_map(|k| bits_per_item(k).map(|b| (k, b)))
        .fold((1, f64::INFINITY), |best, candidate| {
            if candidate.1 < best.1 {
                candidate
            } else {
                best
            }
        })
}

/// `capacity × bits_per_item` rounded up to a multiple of `unit` bits.
fn round_up(capacity: u64, bits_per_item: f64, unit: u64) -> Result<u64, SizingError> {
    let bits = (capacity as f64 * bits_per_item).ceil();
    if !bits.is_finite() || bits > (1u64 << 60) as f64 {
        return Err(SizingError::Capacity);
    }
    Ok((bits as u64).max(1).div_ceil(unit) * unit)
}

/// Bits per item so that k hashes give exactly rate `target` at capacity:
/// solve (1 − e^(−k/b))^k = target for b.
fn classic_bits_per_item(k: u32, target: f64) -> f64 {
    let k = f64::from(k);
    // target^(1/k) stays near 1/2 for the k tried, so ln(1 − t) loses no precision.
    -k / math::ln(1.0 - math::pow(target, 1.0 / k))
}

/// The false-positive rate of a blocked layer with `bits_per_item` bits per item and k hashes,
/// at capacity.
fn blocked_error_rate(bits_per_item: f64, num_hashes: u32) -> f64 {
    let lambda = BLOCK_BITS as f64 / bits_per_item;
    let k = f64::from(num_hashes);
    let miss = math::ln(1.0 - 1.0 / BLOCK_BITS as f64);
    let last = (lambda + 12.0 * lambda.sqrt() + 30.0) as u32;
    let mut ln_factorial = 0.0;
    let mut rate = 0.0;
    for j in 0..=last {
        if j > 0 {
            ln_factorial += math::ln(f64::from(j));
        }
        let j = f64::from(j);
        let poisson = math::exp(-lambda + j * math::ln(lambda) - ln_factorial);
        rate += poisson * math::powi(1.0 - math::exp(miss * k * j), num_hashes);
    }
    rate
}

/// Ok when `size` is a shape a layer of `capacity` items at `error_rate` could have, whoever sized
/// it (this release, an older one, or RedisBloom's formulas): at least the classic optimum of
/// bits, −ln ε / ln²2 per item (no Bloom filter layout reaches ε with fewer; 1% slack for the
/// rounding of other sizers), and a hash count within what ε implies, log2(1/ε) give or take a
/// few (all our sizers pick k near it; a forged k of 255 is not). Decoders and explicit growth
/// check this before trusting a shape, so a header cannot claim 2^30 items in 64 bits.
pub fn check_shape(size: LayerSize, capacity: u64, error_rate: f64) -> Result<(), &'static str> {
    if !(error_rate > 0.0 && error_rate < 1.0) {
        return Err("error rate");
    }
    let optimal_k = math::ln(1.0 / error_rate) / std::f64::consts::LN_2;
    let optimal_bits_per_item = optimal_k / std::f64::consts::LN_2;
    let fewest_bits = capacity as f64 * optimal_bits_per_item * 0.99;
    if (size.bits as f64) < fewest_bits.min((1u64 << 62) as f64) {
        return Err("bit count too small for the capacity");
    }
    let (lowest, highest) = match size.layout {
        Layout::Classic => (optimal_k / 2.0, optimal_k + 3.0),
        // Blocked layers trade hashes for bits (fewer probes per crowded block).
        Layout::Blocked => (optimal_k / 3.0, optimal_k + 3.0),
    };
    let k = f64::from(size.num_hashes);
    if k < lowest.floor().max(1.0) || k > highest.ceil() {
        return Err("hash count");
    }
    Ok(())
}

/// The false-positive rate of `items` items in a layer of this shape, by the model it was sized
/// with.
pub fn expected_error_rate(size: LayerSize, items: u64) -> f64 {
    match size.layout {
        Layout::Classic => {
            let k = f64::from(size.num_hashes);
            math::powi(
                1.0 - math::exp(-k * items as f64 / size.bits as f64),
                size.num_hashes,
            )
        }
        Layout::Blocked if items == 0 => 0.0,
        Layout::Blocked => blocked_error_rate(size.bits as f64 / items as f64, size.num_hashes),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classic_sizes_within_two_percent_of_the_optimum() {
        for error_rate in [1e-2, 1e-3, 1e-4, 1e-5, 1e-6] {
            let size = classic_size(1_000_000, error_rate).unwrap();
            let classic = 1_000_000.0 * (1.0 / error_rate).ln()
                / (std::f64::consts::LN_2 * std::f64::consts::LN_2);
            let ratio = size.bits as f64 / classic;
            assert!((1.0..1.02).contains(&ratio), "{error_rate}: {ratio}");
            let p = expected_error_rate(size, 1_000_000);
            assert!(p <= error_rate * 1.0001, "{error_rate}: {p}");
        }
    }

    #[test]
    fn big_layers_go_blocked_only_where_it_is_cheap() {
        for error_rate in [1e-2, 5e-3, 1e-3, 1e-4, 1e-6] {
            let classic = classic_size(10_000_000, error_rate).unwrap();
            let chosen = layer_size(10_000_000, error_rate).unwrap();
            let cost = chosen.bits as f64 / classic.bits as f64;
            assert!(cost <= BLOCKED_MAX_COST, "{error_rate}: {cost}");
            assert!(expected_error_rate(chosen, 10_000_000) <= error_rate * 1.0001);
            if chosen.layout == Layout::Blocked {
                assert_eq!(chosen.bits % BLOCK_BITS, 0);
                assert!(chosen.num_hashes <= MAX_BLOCKED_HASHES);
            }
        }
        // At 1% blocking costs a few percent; at 1e-4 too much, so the layout stays classic.
        assert_eq!(
            layer_size(10_000_000, 1e-2).unwrap().layout,
            Layout::Blocked
        );
        assert_eq!(
            layer_size(10_000_000, 1e-4).unwrap().layout,
            Layout::Classic
        );
        // Small layers stay classic whatever the rate.
        assert_eq!(layer_size(1000, 1e-2).unwrap().layout, Layout::Classic);
    }

    #[test]
    fn rejects_impossible_shapes() {
        assert_eq!(layer_size(0, 0.01), Err(SizingError::Capacity));
        for e in [0.0, 1.0, -0.1, f64::NAN, f64::INFINITY, 1e-300] {
            assert_eq!(layer_size(10, e), Err(SizingError::ErrorRate), "{e}");
        }
        assert_eq!(layer_size(u64::MAX, 0.01), Err(SizingError::Capacity));
    }

    #[test]
    fn tiny_and_loose_filters_get_one_word() {
        let size = layer_size(1, 0.5).unwrap();
        assert_eq!(size.bits, 64);
        assert!(size.num_hashes >= 1);
    }
}
