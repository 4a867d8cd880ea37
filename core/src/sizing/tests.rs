//! The sizing rules against the optimum and the model table, the model's search and sums, and
//! the shapes a decoder accepts.

use super::*;

fn classic_optimum(error_rate: f64) -> f64 {
    (1.0 / error_rate).ln() / (LN_2 * LN_2)
}

#[test]
fn classic_sizes_within_two_percent_of_the_optimum() {
    for error_rate in [1e-2, 1e-3, 1e-4, 1e-5, 1e-6] {
        let size = classic_size(1_000_000, error_rate).unwrap();
        let ratio = size.bits as f64 / (1e6 * classic_optimum(error_rate));
        assert!((1.0..1.02).contains(&ratio), "{error_rate}: {ratio}");
        let p = expected_error_rate(size, 1_000_000);
        assert!(p <= error_rate * 1.0001, "{error_rate}: {p}");
    }
}

/// The model against the table in Putze, Sanders, Singler's terms as computed independently
/// (with the best real k): bits per item for 1 to 4 lines.
#[test]
fn lines_match_the_model_table() {
    let table = [
        (1e-4, [21.9, 19.8, 19.4, 19.3]),
        (1e-7, [49.4, 37.2, 35.1, 34.3]),
        (1e-9, [79.1, 51.1, 46.5, 44.9]),
    ];
    for (error_rate, row) in table {
        for (lines, expected) in (1..=MAX_LINES).zip(row) {
            let Some(size) = lines_size(10_000_000, error_rate, lines) else {
                // One line at 1e-7 and below needs more than 16 probes or 2× the bits.
                assert!(lines == 1 && error_rate < 1e-4, "{error_rate} {lines}");
                continue;
            };
            let bits_per_item = size.bits as f64 / 1e7;
            // Whole probes per line cost at most 1% over the best real k.
            assert!(
                bits_per_item >= expected * 0.995 && bits_per_item <= expected * 1.01,
                "{error_rate}, {lines} lines: {bits_per_item} vs {expected}"
            );
            let p = expected_error_rate(size, 10_000_000);
            assert!(p <= error_rate && p > error_rate * 0.99, "{p}");
        }
    }
}

#[test]
fn line_model_sums_every_term() {
    // Against the plain sum over j from 0, every term from logarithms.
    for (lambda, per_line) in [
        (0.3, 3),
        (5.0, 8),
        (51.2, 7),
        (46.5, 8),
        (700.0, 2),
        (1e4, 16),
    ] {
        let mut plain = 0.0;
        let mut ln_factorial = 0.0;
        for j in 0..(lambda as u32 * 2 + 200) {
            if j > 0 {
                ln_factorial += f64::from(j).ln();
            }
            let j = f64::from(j);
            let weight = (j * f64::ln(lambda) - lambda - ln_factorial).exp();
            let clear = (1.0 - 1.0 / 512.0f64).powf(j * f64::from(per_line));
            plain += weight * (1.0 - clear).powi(per_line as i32);
        }
        let ours = line_error_rate(lambda, per_line);
        assert!(
            (ours / plain - 1.0).abs() < 1e-9,
            "{lambda} {per_line}: {ours} vs {plain}"
        );
    }
    assert_eq!(line_error_rate(0.0, 4), 0.0);
    assert_eq!(line_error_rate(f64::INFINITY, 4), 1.0);
    assert!(line_error_rate(f64::NAN, 4) == 0.0);
}

#[test]
fn the_best_probes_per_line_are_among_the_candidates() {
    // Widen the search by hand: no count of probes outside the five tried does better.
    for error_rate in [1e-2, 3e-3, 1e-4, 1e-6, 1e-7, 1e-9, 1e-12] {
        for lines in 1..=MAX_LINES {
            let Some(size) = lines_size(1 << 30, error_rate, lines) else {
                continue;
            };
            let chosen = size.bits as f64 / (1u64 << 30) as f64;
            for per_line in 1..=MAX_BLOCKED_HASHES {
                let lambda = |c: f64| f64::from(lines) * 512.0 / c;
                // At 0.2% fewer bits than chosen, no per_line meets the rate.
                let c = chosen * 0.998;
                let p = line_error_rate(lambda(c), per_line).powi(lines as i32);
                assert!(
                    p > error_rate,
                    "{error_rate} {lines} lines: {per_line} per line wins"
                );
            }
        }
    }
}

#[test]
fn non_scaling_layers_cost_at_most_a_tenth_over_the_optimum() {
    let mut rate = 1e-2;
    while rate >= 1e-9 {
        // A non-scaling layer is sized for 0.9·ε.
        for capacity in [10_000, 100_000, 1_000_000, 10_000_000, 100_000_000, 1 << 30] {
            let size = layer_size(capacity, rate * 0.9).unwrap();
            let ratio = size.bits as f64 / capacity as f64 / classic_optimum(rate);
            assert!(ratio <= 1.1, "ε {rate:e}, capacity {capacity}: {ratio}");
            let classic = classic_size(capacity, rate * 0.9).unwrap();
            assert!(size.bits as f64 <= classic.bits as f64 * LINES_MAX_COST + 512.0);
            assert!(expected_error_rate(size, capacity) <= rate * 0.9);
            assert_eq!(size.check(), Ok(()));
        }
        rate /= 3.0;
    }
}

#[test]
fn big_layers_take_the_fewest_lines_within_five_percent() {
    let expect = [
        (1e-2, Layout::Blocked),
        (1e-3, Layout::Lines(2)),
        (1e-4, Layout::Lines(2)),
        (1e-7, Layout::Lines(3)),
        (1e-9, Layout::Lines(4)),
    ];
    for (error_rate, layout) in expect {
        let classic = classic_size(10_000_000, error_rate).unwrap();
        let chosen = layer_size(10_000_000, error_rate).unwrap();
        assert_eq!(chosen.layout, layout, "{error_rate}");
        let cost = chosen.bits as f64 / classic.bits as f64;
        assert!(cost <= LINES_MAX_COST, "{error_rate}: {cost}");
        assert!(expected_error_rate(chosen, 10_000_000) <= error_rate);
        assert_eq!(chosen.check(), Ok(()));
        // One fewer line would cost more than 5%.
        if let Some(fewer) = chosen.layout.lines().checked_sub(1).filter(|&h| h > 0) {
            let fewer = lines_size(10_000_000, error_rate, fewer);
            assert!(fewer.is_none_or(|f| f.bits as f64 > classic.bits as f64 * LINES_MAX_COST));
        }
    }
    // Below about 1e-10 no number of lines is within 5%, but classic layers of any size that
    // fits in memory sit far above ε on double hashing's floor: the lines with the fewest bits.
    let classic = classic_size(10_000_000, 1e-12).unwrap();
    let chosen = layer_size(10_000_000, 1e-12).unwrap();
    assert_eq!(chosen.layout, Layout::Lines(4));
    let cost = chosen.bits as f64 / classic.bits as f64;
    assert!(cost > LINES_MAX_COST && cost < 1.1, "{cost}");
    assert!(expected_error_rate(chosen, 10_000_000) <= 1e-12);
}

/// Small layers stay classic while double hashing's floor, 0.3/m, is at most ε (m ≥ 0.3/ε);
/// below that they take the lines with the fewest bits, the fewer lines on a tie.
#[test]
fn small_layers_leave_classic_at_the_floor() {
    // RedisBloom's flow tests pin the sizes of 0.001 x 100 and of 3 items at 1%: they stay classic.
    for (capacity, error_rate) in [
        (100, 1e-2),
        (100, 5e-4),
        (3, 0.009),
        (1000, 1e-4),
        (20, 0.05),
    ] {
        let size = layer_size(capacity, error_rate).unwrap();
        assert_eq!(size.layout, Layout::Classic, "{capacity} at {error_rate}");
        assert!(!past_classic_floor(size, error_rate));
    }
    for (capacity, error_rate) in [(10, 1e-3), (100, 1e-4), (1000, 1e-5), (10_000, 1e-6)] {
        let classic = classic_size(capacity, error_rate).unwrap();
        assert!(past_classic_floor(classic, error_rate));
        let size = layer_size(capacity, error_rate).unwrap();
        assert!(size.layout.lines() > 0, "{capacity} at {error_rate}");
        assert_eq!(size.check(), Ok(()));
        assert!(expected_error_rate(size, capacity) <= error_rate);
        let fewer_bits = (1..=MAX_LINES)
            .filter_map(|lines| lines_size(capacity, error_rate, lines))
            .filter(|other| other.bits < size.bits)
            .count();
        assert_eq!(fewer_bits, 0, "{capacity} at {error_rate}: {size:?}");
    }
}

/// docs/sizing.md's table of what small layers cost in lines: (capacity, ε, bits, lines, classic
/// bits).
#[test]
fn small_layers_cost_what_the_sizing_page_says() {
    let table = [
        (100, 1e-4, 2_048, 2, 1_920),
        (100, 1e-6, 3_072, 3, 2_880),
        (100, 1e-9, 4_608, 4, 4_352),
        (1_000, 1e-4, 19_200, 0, 19_200),
        (1_000, 1e-6, 29_696, 3, 28_800),
        (1_000, 1e-9, 45_056, 4, 43_136),
        (10_000, 1e-4, 191_744, 0, 191_744),
        (10_000, 1e-6, 292_352, 4, 287_616),
        (10_000, 1e-9, 449_024, 4, 431_360),
        (10, 1e-2, 128, 0, 128),
        (10, 1e-4, 512, 1, 192),
    ];
    for (capacity, error_rate, bits, lines, classic_bits) in table {
        let size = layer_size(capacity, error_rate).unwrap();
        let classic = classic_size(capacity, error_rate).unwrap();
        assert_eq!(
            (size.bits, size.layout.lines(), classic.bits),
            (bits, lines, classic_bits),
            "{capacity} at {error_rate}"
        );
    }
}

#[test]
fn the_search_takes_few_steps_and_lands_on_the_safe_side() {
    for error_rate in [1e-2, 3e-3, 1e-4, 1e-7, 1e-9, 1e-12] {
        let floor = classic_optimum(error_rate);
        let (_, classic) = classic_bits_per_item(error_rate).unwrap();
        for lines in 1..=MAX_LINES {
            for per_line in 1..=MAX_BLOCKED_HASHES {
                let calls = std::cell::Cell::new(0);
                let rate = |c: f64| {
                    calls.set(calls.get() + 1);
                    let lambda = f64::from(lines) * 512.0 / c;
                    math::powi(line_error_rate(lambda, per_line), lines)
                };
                let Some(c) = smallest_meeting(floor, classic * 2.0, error_rate, rate) else {
                    continue;
                };
                assert!(
                    calls.get() <= 40,
                    "{error_rate} {lines}×{per_line}: {}",
                    calls.get()
                );
                assert!(rate(c) <= error_rate);
                // Tight to the model's own rounding noise.
                let below = rate(c * (1.0 - 1e-11));
                assert!(
                    below > error_rate,
                    "{error_rate} {lines}×{per_line}: {c} {below:e}"
                );
            }
        }
    }
}

/// tests/integration/golden.rs restores a blocked filter (BF.RESERVE 0.01 7000000, so layer 0 at 0.005)
/// and rebuilds it with the same commands: one-line layers keep the bits releases before
/// gave them.
#[test]
fn one_line_layers_keep_their_released_size() {
    let size = layer_size(7_000_000, 0.005).unwrap();
    assert_eq!(
        (size.layout, size.num_hashes, size.bits),
        (Layout::Blocked, 7, 80_532_480)
    );
}

#[test]
fn shapes_are_checked() {
    let size = |bits, num_hashes, layout| LayerSize {
        bits,
        num_hashes,
        layout,
    };
    assert_eq!(size(64, 7, Layout::Classic).check(), Ok(()));
    assert_eq!(size(1024, 6, Layout::Lines(2)).check(), Ok(()));
    assert_eq!(size(512, 16, Layout::Blocked).check(), Ok(()));
    assert_eq!(size(96, 7, Layout::Classic).check(), Err("bit count"));
    assert_eq!(size(64, 0, Layout::Classic).check(), Err("hash count"));
    assert_eq!(size(640, 4, Layout::Lines(2)).check(), Err("bit count"));
    assert_eq!(size(1024, 7, Layout::Lines(2)).check(), Err("hash count"));
    assert_eq!(size(1024, 68, Layout::Lines(4)).check(), Err("hash count"));
    assert_eq!(size(512, 17, Layout::Blocked).check(), Err("hash count"));
    assert_eq!(size(1024, 4, Layout::Lines(1)).check(), Err("layout"));
    assert_eq!(size(1024, 5, Layout::Lines(5)).check(), Err("layout"));
    assert_eq!(size(0, 5, Layout::Lines(1)).check(), Err("layout"));
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
