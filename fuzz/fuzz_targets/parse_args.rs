//! The pure argument parsers behind BF.RESERVE / BF.INSERT (WINDOW included) / BF.SCANDUMP /
//! BF.LOADCHUNK and the error-rate config: no panic on any bytes, and every accepted value is in
//! its documented range and agrees with the stricter parser under it.
//!
//! `parse_reserve` (its SHAPE option) and `parse_grow` take a Redis `Command`, which cannot be
//! built outside a server, and `parse_shape` is private; their grammar is `bits hashes layout`
//! (three `parse_u64`s, the layout a code for `Layout::with_lines`) after a layer index
//! (`parse_u64` below MAX_LAYERS) for BF.GROW. When the input is five space-separated words
//! `index bits hashes layout expansion`, this target reads them with the same grammar and hands
//! the shape to the core as BF.RESERVE ... SHAPE and BF.GROW would: whatever bytes a client
//! sends there, `LayerSize::check`, `FilterParams::check_layer`, `BloomFilter::with_first_layer`
//! and `BloomFilter::push_layer` must refuse or accept without panicking, and agree.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rustbloom::module::args::{
    parse_capacity, parse_error_rate, parse_f64, parse_i64, parse_iterator, parse_seed, parse_u64,
    parse_window,
};
use rustbloom_core::scalable::{CreateError, PushError, MAX_CAPACITY, MAX_LAYERS};
use rustbloom_core::sizing::Layout;
use rustbloom_core::window::{MAX_WINDOW_MS, MIN_WINDOW_MS};
use rustbloom_core::{BloomFilter, Budget, FilterParams, Growth, LayerSize, Unlimited};

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
        Err(_) => assert!(f.is_none_or(|v| !(v > 0.0 && v < 1.0))),
    }
    match parse_capacity(data) {
        Ok(c) => {
            assert!((1..=MAX_CAPACITY).contains(&c));
            assert_eq!(i, Some(c as i64));
        }
        Err(_) => assert!(i.is_none_or(|v| v < 1 || v as u64 > MAX_CAPACITY)),
    }
    match parse_iterator(data) {
        Ok(it) => assert_eq!(i, Some(it as i64)),
        Err(_) => assert!(i.is_none_or(|v| v < 0)),
    }
    match parse_seed(data) {
        Ok(s) => assert_eq!(u, Some(s)),
        Err(_) => assert_eq!(u, None),
    }
    let windows = MIN_WINDOW_MS..=MAX_WINDOW_MS;
    match parse_window(data) {
        Ok(w) => {
            assert!(windows.contains(&w));
            assert_eq!(i, Some(w as i64));
        }
        Err(_) => assert!(i.is_none_or(|v| !u64::try_from(v).is_ok_and(|v| windows.contains(&v)))),
    }
    shape(data);
});

/// The SHAPE / BF.GROW grammar over `index bits hashes layout expansion`, into the core.
fn shape(data: &[u8]) {
    let words: Vec<&[u8]> = data.split(|&b| b == b' ').collect();
    let [index, bits, hashes, layout, expansion] = words[..] else {
        return;
    };
    let Some(index) = parse_u64(index)
        .and_then(|i| usize::try_from(i).ok())
        .filter(|&i| i < MAX_LAYERS)
    else {
        return;
    };
    let (Some(bits), Some(num_hashes), Some(layout)) = (
        parse_u64(bits),
        parse_u64(hashes).and_then(|k| u32::try_from(k).ok()),
        parse_u64(layout)
            .and_then(|code| u32::try_from(code).ok())
            .and_then(Layout::with_lines),
    ) else {
        return;
    };
    assert!(layout.lines() <= 4);
    assert_eq!(Layout::with_lines(layout.lines()), Some(layout));
    let size = LayerSize {
        bits,
        num_hashes,
        layout,
    };
    let growth = match parse_u64(expansion) {
        Some(0) | None => Growth::NonScaling,
        Some(x) => Growth::Scaling {
            expansion: u32::try_from(x % 32768).unwrap_or(1).max(1),
        },
    };
    let params = FilterParams {
        capacity: 1 + bits % 4096,
        error_rate: 1.0 / (2.0 + f64::from(num_hashes % 1000)),
        growth,
        seed: bits ^ u64::from(num_hashes),
        tightening: rustbloom_core::scalable::TIGHTENING_RATIO,
    };
    let form = size.check();
    let fits = params.check_layer(index, size);
    let _ = params.check_layer(0, size);
    // BF.RESERVE ... SHAPE: the shape must pass both checks and the (small) budget.
    let mut budget = Budget::new(64 << 10, 64 << 10);
    match BloomFilter::with_first_layer(params, size, &mut budget) {
        Ok(filter) => {
            assert_eq!(form, Ok(()));
            assert_eq!(params.check_layer(0, size), Ok(()));
            assert_eq!(filter.layers()[0].size(), size);
            assert_eq!(filter.layers().len(), 1);
            assert!(size.bytes() <= 64 << 10);
        }
        Err(CreateError::Shape(_)) => {
            assert!(form.is_err() || params.check_layer(0, size).is_err())
        }
        Err(CreateError::Limit(_)) => {
            assert_eq!(form, Ok(()));
            assert_eq!(params.check_layer(0, size), Ok(()));
        }
        Err(CreateError::Sizing(_)) => panic!("with_first_layer does not size"),
    }
    // BF.GROW on a filter whose first layer is full: a layer 1 with this shape.
    if index != 1 || params.growth == Growth::NonScaling {
        return;
    }
    let Ok(mut filter) = BloomFilter::new(params, &mut Budget::new(64 << 10, 64 << 10)) else {
        return;
    };
    let mut i = 0u64;
    while filter.items() < params.capacity && i < 1 << 16 {
        let _ = filter.insert(&i.to_le_bytes(), &mut Unlimited);
        i += 1;
    }
    if filter.layers().len() != 1 {
        return;
    }
    let before = filter.layers().len();
    match filter.push_layer(index, size, &mut Budget::new(128 << 10, 64 << 10)) {
        Ok(()) => {
            assert_eq!(form, Ok(()));
            assert_eq!(fits, Ok(()));
            assert_eq!(filter.layers().len(), before + 1);
            assert_eq!(filter.layers()[index].size(), size);
            assert!(filter.insert(b"after grow", &mut Unlimited).is_ok());
        }
        Err(PushError::Shape(_)) => {
            assert_eq!(filter.layers().len(), before);
        }
        Err(PushError::Limit(_)) => {
            assert_eq!(form, Ok(()));
            assert_eq!(fits, Ok(()));
            assert_eq!(filter.layers().len(), before);
        }
    }
}
