//! The pure argument parsers behind BF.RESERVE / BF.INSERT / BF.SCANDUMP / BF.LOADCHUNK and the
//! error-rate config: no panic on any bytes, and every accepted value is in its documented range
//! and agrees with the stricter parser under it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rustbloom_core::scalable::MAX_CAPACITY;
use rustbloom::module::args::{
    parse_capacity, parse_error_rate, parse_f64, parse_i64, parse_iterator, parse_seed, parse_u64,
};

fuzz_target!(|data: &[u8]| {
    let f = parse_f64(data);
    let i = parse_i64(data);
    let u = parse_u64(data);
    let plain = data.iter().all(|b| b.is_ascii_graphic());
    if let Some(v) = f {
        assert!(v.is_finite(), "parse_f64 accepted a non-finite value");
        assert!(plain, "parse_f64 accepted whitespace or control bytes");
    }
    if let Some(v) = i {
        assert!(plain);
        assert!(
            data.iter()
                .all(|b| b.is_ascii_digit() || *b == b'-' || *b == b'+'),
            "parse_i64 accepted {data:?} as {v}"
        );
        // Every integer is also a number (within f64 precision).
        let as_f = f.expect("an integer parse_f64 refuses");
        assert!((as_f - v as f64).abs() <= (v as f64).abs() * 1e-15 + 1e-9);
    }
    if let Some(v) = u {
        assert!(data.iter().all(|b| b.is_ascii_digit() || *b == b'+'));
        if v <= i64::MAX as u64 {
            assert_eq!(i, Some(v as i64));
        }
    }
    match parse_error_rate(data) {
        Ok(rate) => {
            assert!(rate > 0.0 && rate < 1.0);
            assert_eq!(Some(rate), f);
        }
        Err(_) => assert!(f.map_or(true, |v| !(v > 0.0 && v < 1.0))),
    }
    match parse_capacity(data) {
        Ok(c) => {
            assert!((1..=MAX_CAPACITY).contains(&c));
            assert_eq!(i, Some(c as i64));
        }
        Err(_) => assert!(i.map_or(true, |v| v < 1 || v as u64 > MAX_CAPACITY)),
    }
    match parse_iterator(data) {
        Ok(it) => assert_eq!(i, Some(it as i64)),
        Err(_) => assert!(i.map_or(true, |v| v < 0)),
    }
    match parse_seed(data) {
        Ok(s) => assert_eq!(u, Some(s)),
        Err(_) => assert_eq!(u, None),
    }
});
