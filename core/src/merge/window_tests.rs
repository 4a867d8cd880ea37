//! Merging window filters: alike windows fed over one clock merge into exactly what one filter
//! fed with all their writes holds; anything that does not line up is refused untouched.

use proptest::prelude::*;

use super::*;
use crate::budget::Unlimited;
use crate::partition::Partition;
use crate::redisbloom::RbFilter;
use crate::scalable::{FilterParams, Growth};
use crate::sizing::Layout;
use crate::window::{WindowParams, SLOTS};

/// Far from the epoch, like real Unix milliseconds.
const T0: u64 = 1_780_000_000_000;
/// The window of most tests, and its generation G = W/3.
const WINDOW_MS: u64 = 60_000;
const G: u64 = WINDOW_MS / 3;

fn params(error_rate: f64, capacity: u64) -> WindowParams {
    WindowParams {
        error_rate,
        capacity,
        window_ms: WINDOW_MS,
        seed: 17,
    }
}

fn empty(params: WindowParams) -> StoredFilter {
    StoredFilter::ready_filter(Filter::Window(Box::new(
        WindowFilter::new(params, 0, &mut Unlimited).unwrap(),
    )))
}

fn window(stored: &StoredFilter) -> &WindowFilter {
    match stored.filter() {
        Filter::Window(filter) => filter,
        _ => panic!("not a window filter"),
    }
}

fn window_mut(stored: &mut StoredFilter) -> &mut WindowFilter {
    match &mut stored.filter {
        Filter::Window(filter) => filter,
        _ => panic!("not a window filter"),
    }
}

fn item(n: u64) -> Vec<u8> {
    format!("item-{n}").into_bytes()
}

/// The bits as encoded: what the filter holds.
fn held_bits(filter: &WindowFilter) -> Vec<u8> {
    let mut bits = vec![0; filter.bytes() as usize];
    filter.read_bits(0, &mut bits).unwrap();
    bits
}

/// One write of a schedule: its time, its item and which of two filters receives it.
type Write = (u64, u64, bool);

/// Feeds the writes (in time order) to `a` (true) or `b` (false), and all of them to `all`.
fn feed(writes: &[Write], a: &mut StoredFilter, b: &mut StoredFilter, all: &mut StoredFilter) {
    for &(at, n, to_a) in writes {
        let target = if to_a { &mut *a } else { &mut *b };
        window_mut(target).insert(&item(n), at);
        window_mut(all).insert(&item(n), at);
    }
}

/// Shapes of every layout a slot takes: classic (a small window at a high rate), blocked (big
/// at 1%, over several regions) and in lines (big at 1e-6).
fn layouts() -> [(WindowParams, Layout); 3] {
    [
        (params(0.05, 200), Layout::Classic),
        (params(0.01, 1_000_000), Layout::Blocked),
        (params(1e-6, 1_000_000), Layout::Lines(3)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Whatever the schedule (writes spread over up to eight generations, one input lagging
    /// behind the other or not), the union holds exactly the bits of one filter that received
    /// every write, at the latest time either was written at, and answers as it does at every
    /// later moment; merging either way round gives the same filter.
    #[test]
    fn a_union_of_alike_windows_holds_what_one_filter_fed_every_write_holds(
        layout in 0..3usize,
        steps in prop::collection::vec((0..G * 8, any::<bool>()), 1..300),
        later in 0..G * 6,
    ) {
        let (params, expected_layout) = layouts()[layout];
        let (mut a, mut b, mut all) = (empty(params), empty(params), empty(params));
        prop_assert_eq!(window(&a).slot_shape().layout, expected_layout);
        let mut writes: Vec<Write> = steps
            .iter()
            .enumerate()
            .map(|(n, &(offset, to_a))| (T0 + offset, n as u64, to_a))
            .collect();
        writes.sort_unstable();
        feed(&writes, &mut a, &mut b, &mut all);

        let mut merged = a.try_clone(&mut Unlimited).unwrap();
        merge_into(&mut merged, &[&b], &mut Unlimited).unwrap();
        let mut other_way = b.try_clone(&mut Unlimited).unwrap();
        merge_into(&mut other_way, &[&a], &mut Unlimited).unwrap();
        prop_assert_eq!(&merged, &other_way);

        let (union, single) = (window(&merged), window(&all));
        prop_assert_eq!(union.last_ms(), single.last_ms());
        prop_assert_eq!(held_bits(union), held_bits(single));
        prop_assert!(union.counts_match_bits());
        let now = single.last_ms() + later;
        for &(_, n, _) in &writes {
            prop_assert_eq!(union.contains(&item(n), now), single.contains(&item(n), now));
        }
        // A merge with nothing new in it (a copy of itself) keeps the bits and the time; the
        // counts move only to the estimate, within the inputs' largest and their sum.
        let again = merged.try_clone(&mut Unlimited).unwrap();
        merge_into(&mut merged, &[&again], &mut Unlimited).unwrap();
        let (merged, again) = (window(&merged), window(&again));
        prop_assert_eq!(held_bits(merged), held_bits(again));
        prop_assert_eq!(merged.last_ms(), again.last_ms());
        prop_assert!(merged.counts_match_bits());
        for (after, before) in merged.slot_items().into_iter().zip(again.slot_items()) {
            prop_assert!(before <= after && after <= 2 * before);
        }
    }
}

#[test]
fn a_lagging_input_is_rotated_first_and_its_expired_generations_stay_out() {
    let params = params(0.01, 3000);
    let (mut ahead, mut behind) = (empty(params), empty(params));
    // `behind` was written in generations g and g + 1, `ahead` in g + 4 only: at g + 4, the
    // window reaches back to g + 1.
    let start = (T0 / G + 1) * G;
    window_mut(&mut behind).insert(b"old", start);
    window_mut(&mut behind).insert(b"recent", start + G);
    window_mut(&mut ahead).insert(b"new", start + 4 * G);
    assert!(window(&behind).contains(b"old", start + 3 * G));
    merge_into(&mut behind, &[&ahead], &mut Unlimited).unwrap();
    let merged = window(&behind);
    assert_eq!(
        merged.last_ms(),
        start + 4 * G,
        "the latest write's time, not a clock"
    );
    let now = start + 4 * G;
    assert!(merged.contains(b"new", now) && merged.contains(b"recent", now));
    assert!(!merged.contains(b"old", now), "left the window at g + 4");
    // Counted: the two items inside the window, none of the expired one.
    assert_eq!(merged.items(now), 2);
    // As a write at that time leaves it: the same filter as `behind` written there directly.
    let mut direct = empty(params);
    for (at, what) in [(start, &b"old"[..]), (start + G, b"recent"), (now, b"new")] {
        window_mut(&mut direct).insert(what, at);
    }
    assert_eq!(held_bits(merged), held_bits(window(&direct)));
    assert_eq!(merged.slot_items(), window(&direct).slot_items());
}

#[test]
fn the_count_of_a_merged_slot_is_estimated_from_its_bits() {
    // 9,000 items over two filters overlapping by a third, in one generation whose slot is
    // sized for 10,000.
    let params = params(0.01, 30_000);
    let (mut a, mut b) = (empty(params), empty(params));
    let at = T0;
    for n in 0..6000 {
        window_mut(&mut a).insert(&item(n), at);
    }
    for n in 3000..9000 {
        window_mut(&mut b).insert(&item(n), at + 1);
    }
    merge_into(&mut a, &[&b], &mut Unlimited).unwrap();
    let merged = window(&a);
    let count = merged.items(at + 1) as f64;
    assert!((count - 9000.0).abs() < 0.03 * 9000.0, "estimated {count}");
    assert!((0..9000).all(|n| merged.contains(&item(n), at + 1)));
    // One slot held items; the others still count none.
    let slots = merged.slot_items();
    assert_eq!(slots.iter().filter(|&&items| items > 0).count(), 1);
    // Saved and loaded as any window filter.
    assert!(crate::stored::decode_header(&a.encode_header(), &mut Unlimited).is_ok());
}

#[test]
fn windows_that_do_not_line_up_are_refused_by_their_first_difference() {
    let base = params(0.01, 1000);
    let mut dest = empty(base);
    window_mut(&mut dest).insert(b"x", T0);
    let before = dest.try_clone(&mut Unlimited).unwrap();
    let cases = [
        (params(0.02, 1000), Difference::ErrorRate),
        (params(0.01, 2000), Difference::Capacity),
        (
            WindowParams {
                window_ms: WINDOW_MS + 3,
                ..base
            },
            Difference::Window,
        ),
        (WindowParams { seed: 18, ..base }, Difference::Seed),
    ];
    for (other, difference) in cases {
        let source = empty(other);
        assert_eq!(
            merge_into(&mut dest, &[&source], &mut Unlimited),
            Err(MergeError::Differ(difference))
        );
        assert_eq!(dest, before);
    }
    // Slots of another shape under the same parameters (BF.RESERVE ... SHAPE), even after an
    // alike source: checked whole before anything changes.
    let shape = window(&dest).slot_shape();
    let wider = LayerSize {
        bits: shape.bits + 512,
        ..shape
    };
    let odd = StoredFilter::ready_filter(Filter::Window(Box::new(
        WindowFilter::with_slot_shape(base, wider, 0, &mut Unlimited).unwrap(),
    )));
    let mut good = empty(base);
    window_mut(&mut good).insert(b"y", T0 + 5 * G);
    assert_eq!(
        merge_into(&mut dest, &[&good, &odd], &mut Unlimited),
        Err(MergeError::Differ(Difference::Layout))
    );
    assert_eq!(dest, before);
    // Another kind, either way round.
    let scalable = StoredFilter::ready_filter(Filter::Scalable(
        BloomFilter::new(
            FilterParams {
                capacity: 1000,
                error_rate: 0.01,
                growth: Growth::Scaling { expansion: 2 },
                seed: 17,
                tightening: crate::scalable::TIGHTENING_RATIO,
            },
            &mut Unlimited,
        )
        .unwrap(),
    ));
    assert_eq!(
        merge_into(&mut dest, &[&scalable], &mut Unlimited),
        Err(MergeError::Differ(Difference::Kind))
    );
    let mut scalable_dest = scalable.try_clone(&mut Unlimited).unwrap();
    assert_eq!(
        merge_into(&mut scalable_dest, &[&dest], &mut Unlimited),
        Err(MergeError::Differ(Difference::Kind))
    );
    // A window partition merges only with its like partition.
    let partition = Partition::new(0, 4, 99).unwrap();
    let part = empty(base).with_partition(partition).unwrap();
    assert_eq!(
        merge_into(&mut dest, &[&part], &mut Unlimited),
        Err(MergeError::Differ(Difference::Partition))
    );
    let mut like = empty(base).with_partition(partition).unwrap();
    assert!(merge_into(&mut like, &[&part], &mut Unlimited).is_ok());
    assert_eq!(dest, before);
}

#[test]
fn a_created_destination_is_a_copy_of_the_first_window_merged_with_the_rest() {
    let params = params(0.01, 1000);
    let (mut first, mut second) = (empty(params), empty(params));
    window_mut(&mut first).insert(b"a", T0);
    window_mut(&mut second).insert(b"b", T0 + G);
    let created = merged_copy(&first, &[&second], &mut Unlimited).unwrap();
    let mut merged = first.try_clone(&mut Unlimited).unwrap();
    merge_into(&mut merged, &[&second], &mut Unlimited).unwrap();
    assert_eq!(created, merged);
    assert!(window(&created).contains(b"a", T0 + G) && window(&created).contains(b"b", T0 + G));
    assert_eq!(window(&created).slot_items().iter().sum::<u64>(), 2);
    assert_eq!(window(&created).slot_items().len(), SLOTS);
}

#[test]
fn with_no_source_any_destination_is_left_as_it_is() {
    // The union of a filter and nothing is the filter, whatever its format.
    let mut redisbloom = StoredFilter::ready_filter(Filter::RedisBloom(
        RbFilter::new(1000, 0.01, Some(2), &mut Unlimited)
            .unwrap()
            .unwrap(),
    ));
    let before = redisbloom.try_clone(&mut Unlimited).unwrap();
    assert_eq!(
        merge_into(&mut redisbloom, &[], &mut Unlimited),
        Ok(Merged { pushed: vec![] })
    );
    assert_eq!(redisbloom, before);
    assert_eq!(merged_copy(&before, &[], &mut Unlimited).unwrap(), before);
    // Not a union of two of them.
    assert_eq!(
        merge_into(&mut redisbloom, &[&before], &mut Unlimited),
        Err(MergeError::RedisBloom)
    );
    let mut windowed = empty(params(0.01, 1000));
    window_mut(&mut windowed).insert(b"x", T0);
    let before = windowed.try_clone(&mut Unlimited).unwrap();
    merge_into(&mut windowed, &[], &mut Unlimited).unwrap();
    assert_eq!(windowed, before);
}
