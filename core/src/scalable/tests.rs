//! The scalable filter's tests: batch paths against one-by-one and test-then-set.

use std::ops::ControlFlow;

use super::batch::{for_each_group, FirstLinesPass, OneLayer, OneLayerLookup, BATCH};
use super::*;
use crate::budget::Unlimited;
use crate::sizing::Layout;

/// A fresh non-scaling filter of one layer of `size`, for 2,000 items.
fn filter_of(size: LayerSize) -> BloomFilter {
    let num_hashes = size.num_hashes as i32;
    let params = FilterParams {
        capacity: 2_000,
        error_rate: (0.5f64.powi(num_hashes) / 0.9).min(0.5),
        growth: Growth::NonScaling,
        seed: 77,
        tightening: crate::scalable::TIGHTENING_RATIO,
    };
    BloomFilter::with_first_layer(params, size, &mut Unlimited).unwrap()
}

/// Adds `items` group by group through `add` into a fresh filter of `size`.
fn added_by(
    size: LayerSize,
    items: &[[u8; 8]],
    add: impl Fn(&mut BloomFilter, &[ItemHash], &mut AddOutcome) -> ControlFlow<()>,
) -> (BloomFilter, AddOutcome) {
    let mut filter = filter_of(size);
    let mut outcome = AddOutcome::default();
    for_each_group(
        items.iter().map(|i| i.as_slice()),
        filter.params.seed,
        |group| add(&mut filter, group, &mut outcome),
    );
    (filter, outcome)
}

/// Adds `items` to `filter` as one batch ([`BloomFilter::insert_many`]).
fn insert_all(filter: &mut BloomFilter, items: &[[u8; 8]]) -> AddOutcome {
    let mut outcome = AddOutcome::default();
    filter.insert_many(
        items.iter().map(|item| item.as_slice()),
        &mut Unlimited,
        &mut outcome,
    );
    outcome
}

#[test]
fn a_batch_into_a_grown_filter_answers_as_testing_every_layer_before_setting() {
    let item = |i: u64| i.wrapping_mul(0x9e37_79b9_7f4a_7c15).to_le_bytes();
    // Three layers of the layout (0: the sizing's own, classic at this size), the newest
    // with room, holding items 0..400.
    for (error_rate, lines) in [(0.02, 0), (0.02, 1), (1e-9, 4)] {
        let params = FilterParams {
            capacity: 50,
            error_rate,
            growth: Growth::Scaling { expansion: 3 },
            seed: 5,
            tightening: crate::scalable::TIGHTENING_RATIO,
        };
        let shape = |index: usize| match lines {
            0 => params.layer_size(index).unwrap(),
            lines => crate::sizing::lines_size(
                params.layer_capacity(index).unwrap(),
                params.layer_error_rate(index),
                lines,
            )
            .unwrap(),
        };
        let mut filter = BloomFilter::with_first_layer(params, shape(0), &mut Unlimited).unwrap();
        for i in 0..400 {
            if filter.newest().is_full() {
                let index = filter.layers().len();
                filter
                    .push_layer(index, shape(index), &mut Unlimited)
                    .unwrap();
            }
            filter.insert(&item(i), &mut Unlimited).unwrap();
        }
        assert_eq!(filter.layers().len(), 3);
        assert_eq!(filter.layers()[2].size().layout.lines(), lines);
        // Items of every layer (some only in the older ones), new items, each new one
        // again at once (present in the newest layer), and enough to grow twice.
        let batch: Vec<[u8; 8]> = (0..4_500u64)
            .map(|i| match i % 3 {
                0 => item(i / 3 % 400),
                _ => item(1_000 + i / 3),
            })
            .collect();
        let mut reference = filter.try_clone(&mut Unlimited).unwrap();
        let mut grown = Vec::new();
        let expected: Vec<bool> = batch
            .iter()
            .enumerate()
            .map(|(at, item)| {
                let hash = reference.hash(item);
                if reference.layers.iter().any(|layer| layer.contains(&hash)) {
                    return false;
                }
                if reference.newest().is_full() {
                    let (index, size) = reference.grow(&mut Unlimited).unwrap();
                    grown.push(GrownLayer {
                        index,
                        size,
                        first_item: at,
                    });
                }
                let newest = reference.layers.last_mut().unwrap();
                newest.set(&hash);
                newest.count_item();
                true
            })
            .collect();
        let mut one_by_one = filter.try_clone(&mut Unlimited).unwrap();
        let singly: Vec<bool> = batch
            .iter()
            .map(|item| one_by_one.insert(item, &mut Unlimited).unwrap())
            .collect();
        let outcome = insert_all(&mut filter, &batch);
        assert_eq!(outcome.error, None);
        let first_difference = |answers: &[bool]| {
            (0..expected.len()).find(|&at| answers.get(at) != Some(&expected[at]))
        };
        assert_eq!(first_difference(&outcome.added), None, "{lines} lines");
        assert_eq!(first_difference(&singly), None, "{lines} lines");
        assert_eq!(outcome.grown, grown);
        assert!(!grown.is_empty(), "the batch grows the filter");
        assert_eq!(filter, reference);
        assert_eq!(one_by_one, reference);
        let present = expected.iter().filter(|&&new| !new).count();
        assert!(
            present >= 3_000 && batch.len() - present > 1_000,
            "{present}"
        );
    }
}

#[test]
fn first_lines_pass_alike_on_every_path_and_only_where_an_item_may_be() {
    let item = |i: u64| i.wrapping_mul(0xd1b5_4a32_d192_ed03).to_le_bytes();
    for (layout, per_line) in [
        (Layout::Classic, 7),
        (Layout::Blocked, 7),
        (Layout::Blocked, 12),
        (Layout::Lines(4), 7),
    ] {
        let size = LayerSize {
            bits: 2_000 * 64,
            num_hashes: per_line * layout.lines().max(1),
            layout,
        };
        let items: Vec<[u8; 8]> = (0..1_500).map(item).collect();
        let (filter, _) = added_by(size, &items, |f, group, outcome| {
            f.add_group(bits::Portable::new(), group, &mut Unlimited, outcome)
        });
        // Groups of items added (even i) and never added (odd i).
        let hashes: Vec<ItemHash> = (0..3_000)
            .map(|i| filter.hash(&item(if i % 2 == 0 { i / 2 } else { 10_000 + i })))
            .collect();
        let mut failed = 0;
        for group in hashes.chunks(BATCH) {
            let pass = || FirstLinesPass {
                layers: &filter.layers,
                group,
            };
            let portable = bits::ShiftHeavy::run(pass(), bits::Portable::new());
            assert_eq!(bits::with_fast_shifts(pass()), portable, "{layout:?}");
            for (i, hash) in group.iter().enumerate() {
                let passed = portable & (1 << i) != 0;
                assert!(passed || !filter.contains_hash(hash), "{layout:?}");
                failed += usize::from(!passed);
            }
        }
        assert!(failed > 1_000, "{layout:?}: {failed} absent items failed");
    }
}

#[test]
fn the_batch_add_compiled_for_the_cpu_sets_the_bits_of_the_portable_one() {
    // Repeats (items 0..300 twice) answer "not new" the second time.
    let items: Vec<[u8; 8]> = (0..1_800u64)
        .map(|i| {
            (i % 1_500)
                .wrapping_mul(0x9e37_79b9_7f4a_7c15)
                .to_le_bytes()
        })
        .collect();
    let shapes = [
        (Layout::Classic, 7),
        (Layout::Blocked, 6),
        (Layout::Blocked, 16),
        (Layout::Lines(2), 5),
        (Layout::Lines(3), 7),
        (Layout::Lines(4), 7),
        (Layout::Lines(4), 8),
    ];
    for (layout, per_line) in shapes {
        let size = LayerSize {
            bits: 2_000 * 64,
            num_hashes: per_line * layout.lines().max(1),
            layout,
        };
        let portable = added_by(size, &items, |f, group, outcome| {
            f.add_group(bits::Portable::new(), group, &mut Unlimited, outcome)
        });
        let mut compiled = (filter_of(size), AddOutcome::default());
        compiled.0.insert_many(
            items.iter().map(|i| i.as_slice()),
            &mut Unlimited,
            &mut compiled.1,
        );
        assert_eq!(compiled, portable, "{layout:?} × {per_line}");
        assert_eq!(portable.1.added.iter().filter(|&&new| !new).count(), 300);
    }
}

#[test]
fn a_one_layer_lookup_answers_as_whole_lookups_on_every_path_in_one_block_or_in_pieces() {
    let item = |i: u64| i.wrapping_mul(0x2545_f491_4f6c_dd1d).to_le_bytes();
    // 128,000 bytes take one block; 132,032 are cut in pieces (one block would take
    // jemalloc's 160 KiB class).
    for (words, pieced) in [(16_000u64, false), (16_504, true)] {
        for (layout, per_line) in [
            (Layout::Blocked, 7),
            (Layout::Blocked, 16),
            (Layout::Lines(2), 5),
            (Layout::Lines(4), 5),
        ] {
            let size = LayerSize {
                bits: words * 64,
                num_hashes: per_line * layout.lines(),
                layout,
            };
            // Filled to about half its bits, so that many absent items pass their first line.
            let capacity =
                (size.bits as f64 * std::f64::consts::LN_2 / f64::from(size.num_hashes)) as u64;
            let params = FilterParams {
                capacity,
                error_rate: (0.5f64.powi(size.num_hashes as i32) / 0.9).min(0.5),
                growth: Growth::NonScaling,
                seed: 3,
                tightening: crate::scalable::TIGHTENING_RATIO,
            };
            let mut filter = BloomFilter::with_first_layer(params, size, &mut Unlimited).unwrap();
            let members: Vec<[u8; 8]> = (0..capacity).map(item).collect();
            let outcome = insert_all(&mut filter, &members);
            assert_eq!(outcome.error, None);
            let layer = &filter.layers()[0];
            let context = format!("{words} words, {layout:?} × {per_line}");
            assert_eq!(
                layer
                    .bytes_in_one_block(0, layer.bytes() as usize)
                    .is_none(),
                pieced,
                "{context}"
            );
            // Members and absent items alternating; a last group whole (2,048) or not (2,001).
            for count in [2_048u64, 2_001] {
                let queries: Vec<[u8; 8]> = (0..count)
                    .map(|i| item(if i % 2 == 0 { i } else { capacity + i }))
                    .collect();
                let whole: Vec<bool> = queries.iter().map(|q| filter.contains(q)).collect();
                let first_difference = |answers: &[bool]| {
                    (0..whole.len().max(answers.len())).find(|&at| answers.get(at) != whole.get(at))
                };
                let one_layer = OneLayer::of(&filter).unwrap();
                let mut portable = Vec::new();
                let lookup = OneLayerLookup {
                    filter: one_layer,
                    items: queries.iter().map(|q| q.as_slice()),
                    found: |answer| portable.push(answer),
                };
                bits::ShiftHeavy::run(lookup, bits::Portable::new());
                assert_eq!(first_difference(&portable), None, "{context}");
                let mut compiled = Vec::new();
                bits::with_fast_shifts(OneLayerLookup {
                    filter: one_layer,
                    items: queries.iter().map(|q| q.as_slice()),
                    found: |answer| compiled.push(answer),
                });
                assert_eq!(first_difference(&compiled), None, "{context}");
                let mut batch = Vec::new();
                filter.contains_many(queries.iter().map(|q| q.as_slice()), |answer| {
                    batch.push(answer)
                });
                assert_eq!(first_difference(&batch), None, "{context}");
                // Absent items that pass their first line but not the whole test (several
                // lines), as well as members.
                let passed_first_only = queries
                    .iter()
                    .zip(&whole)
                    .filter(|(q, &present)| {
                        !present
                            && layer.first_lines_pass(bits::Portable::new(), &[filter.hash(*q)])
                                != 0
                    })
                    .count();
                assert!(
                    layout.lines() == 1 || passed_first_only > 10,
                    "{context}: {passed_first_only}"
                );
                assert!(whole.iter().filter(|&&present| present).count() >= 1_000);
            }
        }
    }
}

#[test]
fn a_batch_of_new_items_fills_a_layer_in_lines_exactly_to_its_capacity() {
    let item = |i: u64| i.wrapping_mul(0x9e37_79b9_7f4a_7c15).to_le_bytes();
    let params = FilterParams {
        capacity: 50,
        error_rate: 1e-9,
        growth: Growth::Scaling { expansion: 2 },
        seed: 11,
        tightening: crate::scalable::TIGHTENING_RATIO,
    };
    let shape = crate::sizing::lines_size(50, params.layer_error_rate(0), 4).unwrap();
    let mut filter = BloomFilter::with_first_layer(params, shape, &mut Unlimited).unwrap();
    assert_eq!(filter.layers()[0].size().layout, Layout::Lines(4));
    for i in 0..40 {
        filter.insert(&item(i), &mut Unlimited).unwrap();
    }
    let mut one_by_one = filter.try_clone(&mut Unlimited).unwrap();
    // New items only: the layer's 10 free places are taken by the group's first 10, and the
    // 11th, new too, goes to a layer pushed for it.
    let batch: Vec<[u8; 8]> = (1_000..1_100).map(item).collect();
    let outcome = insert_all(&mut filter, &batch);
    for item in &batch {
        one_by_one.insert(item, &mut Unlimited).unwrap();
    }
    assert_eq!(outcome.added, vec![true; batch.len()]);
    assert_eq!(filter.layers()[0].items(), 50);
    assert_eq!(
        outcome.grown.iter().map(|grown| grown.first_item).next(),
        Some(10)
    );
    assert_eq!(filter, one_by_one);
}
