//! Counts on the command line (capacities, items, batch sizes, partitions, …): a whole number
//! written plainly (`1000000`) or in scientific notation (`1e6`, `2.5e6`), as error rates are
//! (`1e-6`). One parser for every count, so that each option takes the same forms and refuses
//! a fraction or a value out of its range in the same words. The value is read exactly, digit
//! by digit (never through a float, which would round `9007199254740993` or `1.000000000000000001e18`).

/// The integer types counts are read into.
pub trait Count: TryFrom<u64> + 'static {
    const MAX: u64;
}

impl Count for u32 {
    const MAX: u64 = u32::MAX as u64;
}

impl Count for u64 {
    const MAX: u64 = u64::MAX;
}

impl Count for usize {
    const MAX: u64 = usize::MAX as u64;
}

/// A clap value parser of counts of type `T` from `min` to `max` (both included; `u64::MAX`
/// for "as many as `T` holds").
pub fn count<T: Count>(
    min: u64,
    max: u64,
) -> impl Fn(&str) -> Result<T, String> + Clone + Send + Sync + 'static {
    let max = max.min(T::MAX);
    move |text| {
        let value = parse(text, min, max)?;
        T::try_from(value).map_err(|_| out_of_range(min, max))
    }
}

/// How a count may be written, for the refusals.
const FORMS: &str = "write a whole number such as 1000000, 1e6 or 2.5e6";

/// `text` as a whole number from `min` to `max`.
pub fn parse(text: &str, min: u64, max: u64) -> Result<u64, String> {
    let not_a_count = || format!("not a count: {FORMS}");
    let (mantissa, exponent) = match text.find(['e', 'E']) {
        Some(at) => (&text[..at], Some(&text[at + 1..])),
        None => (text, None),
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.len() + fraction.len() == 0 || !all_digits(whole) || !all_digits(fraction) {
        return Err(not_a_count());
    }
    // The exponent, with its sign; a longer one than i64 holds is far out of range anyway,
    // unless every digit is 0.
    let exponent: i64 = match exponent {
        None => 0,
        Some(e) => {
            let digits = e.strip_prefix(['+', '-']).unwrap_or(e);
            if digits.is_empty() || !all_digits(digits) {
                return Err(not_a_count());
            }
            e.parse().unwrap_or(if e.starts_with('-') {
                i64::MIN
            } else {
                i64::MAX
            })
        }
    };
    // The number is `digits × 10^shift`.
    let digits = format!("{whole}{fraction}");
    let digits = digits.trim_start_matches('0');
    let shift = i64::try_from(fraction.len())
        .ok()
        .and_then(|f| exponent.checked_sub(f));
    let value = if digits.is_empty() {
        Some(0)
    } else {
        match shift {
            Some(shift) if shift >= 0 => whole_digits(digits, shift),
            Some(shift) => {
                let dropped = usize::try_from(shift.unsigned_abs()).unwrap_or(usize::MAX);
                let kept = digits.len().saturating_sub(dropped);
                if dropped >= digits.len() || digits[kept..].bytes().any(|b| b != b'0') {
                    return Err(format!("not a whole number: {FORMS}"));
                }
                whole_digits(&digits[..kept], 0)
            }
            // The exponent is so negative that only zeros could be whole: digits were not.
            None => return Err(format!("not a whole number: {FORMS}")),
        }
    };
    match value {
        Some(v) if (min..=max).contains(&v) => Ok(v),
        _ => Err(out_of_range(min, max)),
    }
}

/// `digits × 10^shift`, when it fits in a u64.
fn whole_digits(digits: &str, shift: i64) -> Option<u64> {
    let mut value: u64 = 0;
    for b in digits.bytes() {
        value = value.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
    }
    let shift = u32::try_from(shift).ok()?;
    value.checked_mul(10u64.checked_pow(shift)?)
}

fn out_of_range(min: u64, max: u64) -> String {
    if max == u64::MAX {
        format!("out of range: must be at least {min}")
    } else {
        format!("out of range: must be from {min} to {max}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_and_scientific_whole_numbers_are_read_exactly() {
        for (text, want) in [
            ("0", 0),
            ("1000000", 1_000_000),
            ("1e6", 1_000_000),
            ("1E6", 1_000_000),
            ("1e+6", 1_000_000),
            ("2.5e6", 2_500_000),
            ("0.5e1", 5),
            ("250e-1", 25),
            ("2000e-3", 2),
            ("2.0", 2),
            ("007", 7),
            ("0e999999999999999999999", 0),
            ("1.8446744073709551615e19", u64::MAX),
            ("9007199254740993", 9_007_199_254_740_993),
            ("1.000000000000000001e18", 1_000_000_000_000_000_001),
        ] {
            assert_eq!(parse(text, 0, u64::MAX), Ok(want), "{text}");
        }
        assert_eq!(count::<u32>(1, 4096)("4.096e3"), Ok(4096));
    }

    #[test]
    fn fractions_signs_and_values_out_of_range_are_refused_with_why() {
        for text in ["1.5", "1e-6", "2.5e0", "25e-2", "1e-99999999999999999999"] {
            let e = parse(text, 0, u64::MAX).expect_err(text);
            assert!(e.starts_with("not a whole number"), "{text}: {e}");
        }
        for text in [
            "", "e6", "1e", "1e+", "-1", "+1", "1,000", "1_000", "0x10", " 1", "1.2.3",
        ] {
            let e = parse(text, 0, u64::MAX).expect_err(text);
            assert!(e.starts_with("not a count"), "{text:?}: {e}");
        }
        for text in [
            "1.8446744073709551616e19",
            "1e20",
            "1e9999999999999999999999",
        ] {
            let e = parse(text, 0, u64::MAX).expect_err(text);
            assert_eq!(e, "out of range: must be at least 0", "{text}");
        }
        assert_eq!(
            count::<u32>(1, 4096)("1e4"),
            Err("out of range: must be from 1 to 4096".to_string())
        );
        assert_eq!(
            count::<u32>(1, 4096)("0"),
            Err("out of range: must be from 1 to 4096".to_string())
        );
        assert_eq!(
            count::<u32>(0, u64::MAX)("5e9"),
            Err("out of range: must be from 0 to 4294967295".to_string())
        );
    }
}
