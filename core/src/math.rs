//! `ln` and `exp` from IEEE-754 basic operations only.
//!
//! A replica grows a filter by running the same sizing code as its primary, so every machine must
//! size a layer to the same bit. Addition, multiplication, division and rounding are exactly
//! specified by IEEE 754; `f64::ln`, `exp` and `powf` come from the platform's libm, whose last
//! bit may differ between libraries and versions — enough to move a layer by one 64-bit word and
//! make a replica's digest differ. The functions here are accurate to a few ulps and, above all,
//! give the same bits everywhere.

use std::f64::consts::{LN_2, SQRT_2};

/// ln 2 split so that `k · LN_2_HIGH` is exact for |k| < 2^20 and `LN_2_LOW` carries the next
/// 53 bits (Cody and Waite; the values fdlibm uses).
const LN_2_HIGH: f64 = f64::from_bits(0x3fe6_2e42_fee0_0000);
const LN_2_LOW: f64 = f64::from_bits(0x3dea_39ef_3579_3c76);

/// 2^k for an integer k in the normal range, built from its bits.
fn two_to(k: i64) -> f64 {
    f64::from_bits(((k + 1023) as u64) << 52)
}

/// e^x.
pub fn exp(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    if x > 709.0 {
        return f64::INFINITY;
    }
    if x < -740.0 {
        return 0.0;
    }
    // x = k·ln 2 + r with |r| ≤ ln 2 / 2, then e^x = 2^k · e^r by Taylor series.
    let k = (x / LN_2).round();
    let r = (x - k * LN_2_HIGH) - k * LN_2_LOW;
    let mut term = 1.0;
    let mut sum = 1.0;
    for n in 1..=22 {
        term = term * r / f64::from(n);
        sum += term;
    }
    let k = k as i64;
    // Split the scaling so that neither factor leaves the normal range.
    let half = k / 2;
    sum * two_to(half) * two_to(k - half)
}

/// ln x for x > 0 (NaN for x < 0, −∞ for 0).
pub fn ln(x: f64) -> f64 {
    if x.is_nan() || x < 0.0 {
        return f64::NAN;
    }
    if x == 0.0 {
        return f64::NEG_INFINITY;
    }
    if x.is_infinite() {
        return x;
    }
    // Subnormals: scale into the normal range first.
    let (x, bias) = if x < f64::MIN_POSITIVE {
        (x * two_to(54), -54)
    } else {
        (x, 0)
    };
    // x = m · 2^e with m in [1/√2, √2): ln x = e·ln 2 + ln m.
    let bits = x.to_bits();
    let mut e = ((bits >> 52) & 0x7ff) as i64 - 1023 + bias;
    let mut m = f64::from_bits((bits & 0x000f_ffff_ffff_ffff) | 0x3ff0_0000_0000_0000);
    if m > SQRT_2 {
        m /= 2.0;
        e += 1;
    }
    // ln m = 2·atanh(s) = 2·(s + s³/3 + s⁵/5 + ...) with s = (m − 1)/(m + 1), |s| ≤ 0.172.
    let s = (m - 1.0) / (m + 1.0);
    let s2 = s * s;
    let mut power = s;
    let mut series = 0.0;
    for n in 0..24 {
        series += power / f64::from(2 * n + 1);
        power *= s2;
    }
    let e = e as f64;
    (e * LN_2_HIGH + 2.0 * series) + e * LN_2_LOW
}

/// x^y = e^(y · ln x), for x > 0.
pub fn pow(x: f64, y: f64) -> f64 {
    exp(y * ln(x))
}

/// x^n for a small non-negative integer n, by multiplication in a fixed order.
pub fn powi(x: f64, n: u32) -> f64 {
    (0..n).fold(1.0, |acc, _| acc * x)
}

/// x^n for any n, by squaring and multiplying in a fixed order (log2 n steps).
pub fn powu(mut x: f64, mut n: u64) -> f64 {
    let mut acc = 1.0;
    while n > 0 {
        if n & 1 == 1 {
            acc *= x;
        }
        x *= x;
        n >>= 1;
    }
    acc
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, ulps: f64) -> bool {
        a == b || ((a - b) / b).abs() <= ulps * f64::EPSILON
    }

    #[test]
    fn agree_with_the_platform_to_a_few_ulps() {
        let mut x = 1e-300;
        while x < 1e300 {
            assert!(close(ln(x), x.ln(), 4.0), "ln {x}: {} vs {}", ln(x), x.ln());
            x *= 1.37;
        }
        let mut x = -700.0;
        while x < 700.0 {
            assert!(
                close(exp(x), x.exp(), 8.0),
                "exp {x}: {} vs {}",
                exp(x),
                x.exp()
            );
            x += 0.173;
        }
        for (base, exponent) in [
            (0.01, 1.0 / 7.0),
            (0.5, 3.0),
            (1e-10, 0.05),
            (0.999, 1.0 / 3.0),
        ] {
            let (ours, theirs) = (pow(base, exponent), base.powf(exponent));
            assert!(
                close(ours, theirs, 16.0),
                "{base}^{exponent}: {ours} vs {theirs}"
            );
        }
        assert_eq!(powi(1.5, 3), 3.375);
        assert_eq!(powu(1.5, 3), 3.375);
        assert_eq!(powu(0.5, 0), 1.0);
        // Each squaring doubles the relative error: n·ε at worst.
        assert!((powu(0.999, 12345) / 0.999f64.powf(12345.0) - 1.0).abs() < 12345.0 * f64::EPSILON);
        assert_eq!(exp(0.0), 1.0);
        assert_eq!(ln(1.0), 0.0);
        assert!(ln(-1.0).is_nan() && ln(0.0) == f64::NEG_INFINITY);
        assert!(close(
            ln(f64::MIN_POSITIVE / 8.0),
            (f64::MIN_POSITIVE / 8.0).ln(),
            4.0
        ));
    }
}
