use super::*;
use crate::budget::{Budget, Unlimited};
use crate::partition::Partition;
use crate::redisbloom::RbFilter;
use crate::scalable::{FilterParams, Growth};
use crate::sizing::Layout;
use crate::window::{WindowFilter, WindowParams};

fn params(capacity: u64, error_rate: f64, seed: u64) -> FilterParams {
    FilterParams {
        capacity,
        error_rate,
        growth: Growth::Scaling { expansion: 2 },
        seed,
        tightening: crate::scalable::TIGHTENING_RATIO,
    }
}

fn filled(params: FilterParams, items: impl Iterator<Item = u64>) -> StoredFilter {
    let mut filter = BloomFilter::new(params, &mut Unlimited).unwrap();
    for item in items {
        filter
            .insert(format!("item-{item}").as_bytes(), &mut Unlimited)
            .unwrap();
    }
    StoredFilter::ready_filter(Filter::Scalable(filter))
}

fn scalable(stored: &StoredFilter) -> &BloomFilter {
    match stored.filter() {
        Filter::Scalable(filter) => filter,
        _ => panic!("not scalable"),
    }
}

#[test]
fn a_union_holds_every_item_and_estimates_its_count() {
    // 90,000 items over two filters overlapping by half, at 0.1%: classic layers (100k) and
    // layers in lines (1M, 2 lines at 1e-3).
    for capacity in [100_000, 1_000_000] {
        let mut dest = filled(params(capacity, 0.001, 7), 0..60_000);
        let source = filled(params(capacity, 0.001, 7), 30_000..90_000);
        let merged = merge_into(&mut dest, &[&source], &mut Unlimited).unwrap();
        assert!(merged.pushed.is_empty());
        let filter = scalable(&dest);
        assert!((0..90_000).all(|item| filter.contains(format!("item-{item}").as_bytes())));
        let count = filter.items() as f64;
        assert!(
            (count - 90_000.0).abs() / 90_000.0 < 0.03,
            "capacity {capacity}: estimated {count}"
        );
        if capacity == 1_000_000 {
            assert_eq!(filter.layers()[0].size().layout, Layout::Lines(2));
        }
    }
}

#[test]
fn a_source_with_more_layers_grows_the_destination_with_its_shapes() {
    let mut dest = filled(params(100, 0.01, 3), 0..50);
    let source = filled(params(100, 0.01, 3), 1000..1400);
    assert_eq!(scalable(&source).layers().len(), 3);
    let merged = merge_into(&mut dest, &[&source], &mut Unlimited).unwrap();
    let shapes: Vec<LayerSize> = scalable(&source)
        .layers()
        .iter()
        .map(|l| l.size())
        .collect();
    assert_eq!(merged.pushed, vec![(1, shapes[1]), (2, shapes[2])]);
    let filter = scalable(&dest);
    assert_eq!(
        filter.layers().iter().map(|l| l.size()).collect::<Vec<_>>(),
        shapes
    );
    assert!((0..50)
        .chain(1000..1400)
        .all(|item| filter.contains(format!("item-{item}").as_bytes())));
}

#[test]
fn a_copy_of_the_first_source_takes_the_others() {
    let first = filled(params(1000, 0.01, 5), 0..100);
    let second = filled(params(1000, 0.01, 5), 100..200);
    let copy = merged_copy(&first, &[&second], &mut Unlimited).unwrap();
    assert_eq!(scalable(&copy).params(), scalable(&first).params());
    assert!((0..200).all(|item| scalable(&copy).contains(format!("item-{item}").as_bytes())));
    // One source: an exact copy, its exact count too.
    assert_eq!(merged_copy(&first, &[], &mut Unlimited).unwrap(), first);
}

#[test]
fn unlike_filters_are_refused_by_their_first_difference_and_nothing_changes() {
    let base = params(1000, 0.01, 5);
    let mut dest = filled(base, 0..10);
    let before = filled(base, 0..10);
    let nonscaling = FilterParams {
        growth: Growth::NonScaling,
        ..base
    };
    let cases = [
        (params(1000, 0.02, 5), Difference::ErrorRate),
        (params(2000, 0.01, 5), Difference::Capacity),
        (nonscaling, Difference::Expansion),
        (params(1000, 0.01, 6), Difference::Seed),
        (
            FilterParams {
                tightening: 0.8,
                ..base
            },
            Difference::Tightening,
        ),
    ];
    for (other, difference) in cases {
        let source = filled(other, 0..10);
        assert_eq!(
            merge_into(&mut dest, &[&source], &mut Unlimited),
            Err(MergeError::Differ(difference))
        );
        assert_eq!(dest, before);
    }
    // A layer of another shape (same parameters, as a BF.RESERVE ... SHAPE can make).
    let shape = scalable(&dest).layers()[0].size();
    let wider = LayerSize {
        bits: shape.bits + 64,
        ..shape
    };
    let odd = StoredFilter::ready_filter(Filter::Scalable(
        BloomFilter::with_first_layer(base, wider, &mut Unlimited).unwrap(),
    ));
    let good = filled(base, 10..20);
    assert_eq!(
        merge_into(&mut dest, &[&good, &odd], &mut Unlimited),
        Err(MergeError::Differ(Difference::Layout))
    );
    assert_eq!(dest, before, "checked whole before anything changes");
    // A partition merges only with its like partition.
    let partition = Partition::new(0, 4, 99).unwrap();
    let part = filled(base, 0..10).with_partition(partition).unwrap();
    assert_eq!(
        merge_into(&mut dest, &[&part], &mut Unlimited),
        Err(MergeError::Differ(Difference::Partition))
    );
    let mut like = filled(base, 20..30).with_partition(partition).unwrap();
    assert!(merge_into(&mut like, &[&part], &mut Unlimited).is_ok());
    // Other kinds.
    let window_params = WindowParams {
        error_rate: 0.01,
        capacity: 1000,
        window_ms: 60_000,
        seed: 5,
    };
    let window = StoredFilter::ready_filter(Filter::Window(Box::new(
        WindowFilter::new(window_params, 0, &mut Unlimited).unwrap(),
    )));
    assert_eq!(
        merge_into(&mut dest, &[&window], &mut Unlimited),
        Err(MergeError::Differ(Difference::Kind))
    );
    let redisbloom = || {
        StoredFilter::ready_filter(Filter::RedisBloom(
            RbFilter::new(1000, 0.01, Some(2), &mut Unlimited)
                .unwrap()
                .unwrap(),
        ))
    };
    assert_eq!(
        merge_into(&mut redisbloom(), &[&redisbloom()], &mut Unlimited),
        Err(MergeError::RedisBloom)
    );
    assert_eq!(dest, before);
}

#[test]
fn a_refused_growth_leaves_the_destination_unchanged() {
    let mut dest = filled(params(100, 0.01, 3), 0..50);
    let before = filled(params(100, 0.01, 3), 0..50);
    let source = filled(params(100, 0.01, 3), 1000..1400);
    let mut tight = Budget::new(dest.filter().allocated_bytes() + 1, u64::MAX);
    assert!(matches!(
        merge_into(&mut dest, &[&source], &mut tight),
        Err(MergeError::Limit(_))
    ));
    assert_eq!(dest, before);
}

#[test]
fn a_union_past_a_layers_capacity_counts_it_full_and_stays_a_valid_value() {
    let mut dest = filled(params(1000, 0.01, 9), 0..1000);
    let source = filled(params(1000, 0.01, 9), 1000..2000);
    let layers = |stored: &StoredFilter| scalable(stored).layers().len();
    assert_eq!((layers(&dest), layers(&source)), (1, 1));
    merge_into(&mut dest, &[&source], &mut Unlimited).unwrap();
    assert_eq!(scalable(&dest).layers()[0].items(), 1000);
    // Saved and loaded as any filter: a layer never counts past its capacity.
    assert!(crate::stored::decode_header(&dest.encode_header(), &mut Unlimited).is_ok());
    // The next add goes to a new layer, sized for the target rate.
    let Filter::Scalable(filter) = &mut dest.filter else {
        unreachable!("scalable");
    };
    filter.insert(b"after the union", &mut Unlimited).unwrap();
    assert_eq!(filter.layers().len(), 2);
}
