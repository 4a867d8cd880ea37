//! Sizing math: bits and hash count of a layer from (capacity, error rate).

/// The most hash functions a layer may use. Enough for error rates around 1e-70, far below what
/// any scaling filter reaches before it hits the layer cap.
pub const MAX_HASHES: u32 = 255;

/// The shape of one layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LayerSize {
    /// Number of bits, a positive multiple of 64.
    pub bits: u64,
    /// Number of hash probes per item, in `1..=MAX_HASHES`.
    pub num_hashes: u32,
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

/// Sizes a layer so that `capacity` items give a textbook false-positive rate of at most
/// `error_rate`, (1 − e^(−k·n/m))^k ≤ ε.
///
/// Returns the smallest bit count (rounded up to 64-bit words) over the integers k near the
/// optimum log2(1/ε): rounding k itself, as RedisBloom does, would overshoot the rate.
///
/// ```
/// use rustbloom::bloom::sizing::layer_size;
/// let size = layer_size(1_000_000, 0.01).unwrap();
/// assert_eq!(size.num_hashes, 7);
/// let bits_per_item = size.bits as f64 / 1e6;
/// // The classic optimum is ln(1/ε)/ln²2 = 9.585 bits per item.
/// assert!(bits_per_item > 9.585 && bits_per_item < 9.7, "{bits_per_item}");
/// ```
pub fn layer_size(capacity: u64, error_rate: f64) -> Result<LayerSize, SizingError> {
    if !(error_rate > 0.0 && error_rate < 1.0) {
        return Err(SizingError::ErrorRate);
    }
    if capacity == 0 {
        return Err(SizingError::Capacity);
    }
    let target = error_rate;
    let optimal_k = (1.0 / target).log2();
    if !optimal_k.is_finite() || optimal_k > f64::from(MAX_HASHES) {
        return Err(SizingError::ErrorRate);
    }
    let lowest = (optimal_k.floor() as u32).saturating_sub(1).max(1);
    let highest = (optimal_k.ceil() as u32 + 1).min(MAX_HASHES);
    let (num_hashes, bits_per_item) = (lowest..=highest)
        .map(|k| (k, bits_per_item(k, target)))
        .fold((0, f64::INFINITY), |best, candidate| {
            if candidate.1 < best.1 {
                candidate
            } else {
                best
            }
        });
    let bits = (capacity as f64 * bits_per_item).ceil();
    if !bits.is_finite() || bits > (1u64 << 60) as f64 {
        return Err(SizingError::Capacity);
    }
    let words = ((bits as u64).max(1)).div_ceil(64);
    Ok(LayerSize {
        bits: words * 64,
        num_hashes,
    })
}

/// Bits per item so that k hashes give exactly rate `target` at capacity:
/// solve (1 − e^(−k/b))^k = target for b.
fn bits_per_item(k: u32, target: f64) -> f64 {
    let k = f64::from(k);
    // ln(1 - target^(1/k)) via ln_1p keeps precision when target^(1/k) is close to 0.
    -k / (-(target.powf(1.0 / k))).ln_1p()
}

/// The textbook false-positive rate of `items` items in a layer of this shape.
pub fn expected_error_rate(size: LayerSize, items: u64) -> f64 {
    let k = f64::from(size.num_hashes);
    (1.0 - (-k * items as f64 / size.bits as f64).exp()).powf(k)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_within_two_percent_of_the_classic_optimum() {
        for error_rate in [1e-2, 1e-3, 1e-4, 1e-5, 1e-6] {
            let size = layer_size(1_000_000, error_rate).unwrap();
            let classic = 1_000_000.0 * (1.0 / error_rate).ln() / std::f64::consts::LN_2.powi(2);
            let ratio = size.bits as f64 / classic;
            assert!((1.0..1.02).contains(&ratio), "{error_rate}: {ratio}");
            let p = expected_error_rate(size, 1_000_000);
            assert!(p <= error_rate * 1.0001, "{error_rate}: {p}");
        }
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
