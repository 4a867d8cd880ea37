use std::alloc::Layout;
use std::collections::HashSet;
use std::ptr::NonNull;

use super::Relocator;
use crate::budget::Unlimited;
use crate::partition::{Descriptor, Partition, PartitionGrowth};
use crate::redisbloom::RbFilter;
use crate::{BloomFilter, Filter, FilterParams, Growth, StoredFilter, StoredValue};
use crate::{WindowFilter, WindowParams};

/// Moves every block it is offered (or none), as a server's defrag would move those in sparse
/// pages, recording each address offered; asks to stop after every `step` blocks when set. The
/// old blocks are scribbled over and freed only when it is dropped, so that no new block takes
/// an old address and a stale pointer reads garbage.
#[derive(Default)]
struct Mover {
    moves: bool,
    step: Option<usize>,
    offered_in_step: usize,
    offered: Vec<usize>,
    given_up: Vec<(NonNull<u8>, Layout)>,
}

impl Drop for Mover {
    fn drop(&mut self) {
        for &(block, layout) in &self.given_up {
            // SAFETY: blocks the walk gave up, allocated with `layout`, freed once.
            unsafe { std::alloc::dealloc(block.as_ptr(), layout) };
        }
    }
}

// SAFETY: a moved block is a new block of the same layout from the global allocator holding
// the old one's bytes; the old one is scribbled over and never used again (freed on drop).
unsafe impl Relocator for Mover {
    fn relocate(&mut self, block: NonNull<u8>, layout: Layout) -> Option<NonNull<u8>> {
        self.offered.push(block.as_ptr() as usize);
        self.offered_in_step += 1;
        if !self.moves {
            return None;
        }
        // SAFETY: a layout of non-zero size (the walk offers no empty block).
        let moved = NonNull::new(unsafe { std::alloc::alloc(layout) })?;
        // SAFETY: both blocks hold `layout.size()` bytes and are distinct; the old one is the
        // walk's to give up, allocated with `layout`.
        unsafe {
            std::ptr::copy_nonoverlapping(block.as_ptr(), moved.as_ptr(), layout.size());
            block.as_ptr().write_bytes(0xa5, layout.size());
        }
        self.given_up.push((block, layout));
        Some(moved)
    }

    fn should_stop(&mut self) -> bool {
        self.step.is_some_and(|step| self.offered_in_step >= step)
    }
}

/// The addresses of every block of `value`, in walk order.
fn blocks(value: &mut Box<StoredValue>) -> Vec<usize> {
    let mut recorder = Mover::default();
    assert_eq!(StoredValue::relocate(value, &mut recorder, 0), None);
    std::mem::take(&mut recorder.offered)
}

/// Moves every block of `value`, `step` blocks at a time when set; returns the steps taken.
fn move_all(value: &mut Box<StoredValue>, step: Option<usize>) -> usize {
    let mut mover = Mover::default();
    mover.moves = true;
    mover.step = step;
    let (mut from, mut steps) = (0, 0);
    loop {
        mover.offered_in_step = 0;
        steps += 1;
        match StoredValue::relocate(value, &mut mover, from) {
            Some(next) => {
                assert!(next > from, "a step made no progress");
                from = next;
            }
            None => return steps,
        }
    }
}

fn items(count: usize) -> Vec<Vec<u8>> {
    (0..count)
        .map(|i| format!("item:{i}").into_bytes())
        .collect()
}

fn filled(mut filter: Filter, count: usize) -> Filter {
    let items = items(count);
    let mut outcome = filter.new_outcome(|| 1_000);
    filter.insert_many(
        items.iter().map(Vec::as_slice),
        &mut Unlimited,
        &mut outcome,
    );
    filter
}

fn scalable(growth: Growth, count: usize) -> Filter {
    let params = FilterParams {
        capacity: 100,
        error_rate: 0.01,
        growth,
        seed: 7,
        tightening: crate::scalable::TIGHTENING_RATIO,
    };
    filled(
        Filter::Scalable(BloomFilter::new(params, &mut Unlimited).unwrap()),
        count,
    )
}

fn window() -> Filter {
    let params = WindowParams {
        error_rate: 0.01,
        capacity: 5_000,
        window_ms: 60_000,
        seed: 9,
    };
    let window = WindowFilter::new(params, 1_000, &mut Unlimited).unwrap();
    filled(Filter::Window(Box::new(window)), 3_000)
}

fn redisbloom() -> Filter {
    let filter = RbFilter::new(100, 0.01, Some(2), &mut Unlimited)
        .unwrap()
        .unwrap();
    filled(Filter::RedisBloom(filter), 20_000)
}

/// A value of every kind the module stores.
fn every_kind() -> Vec<(&'static str, StoredValue)> {
    let ready = |filter| StoredValue::Filter(StoredFilter::ready_filter(filter));
    let partition = StoredFilter::ready_filter(scalable(Growth::Scaling { expansion: 2 }, 500))
        .with_partition(Partition::new(1, 4, 99).unwrap())
        .unwrap();
    let descriptor = Descriptor::new(
        4,
        99,
        10_000,
        0.01,
        PartitionGrowth::Scaling { expansion: 2 },
    )
    .unwrap();
    vec![
        // 100 → 51,100 items: ten layers, the big ones in pieces.
        (
            "scalable",
            ready(scalable(Growth::Scaling { expansion: 2 }, 100_000)),
        ),
        ("nonscaling", ready(scalable(Growth::NonScaling, 90))),
        ("window", ready(window())),
        ("redisbloom", ready(redisbloom())),
        ("partition", StoredValue::Filter(partition)),
        (
            "loading",
            StoredValue::Filter(StoredFilter::partly_loaded(
                scalable(Growth::Scaling { expansion: 2 }, 0),
                3,
            )),
        ),
        ("descriptor", StoredValue::Descriptor(descriptor)),
    ]
}

fn answers(value: &StoredValue) -> Vec<bool> {
    let StoredValue::Filter(stored) = value else {
        return Vec::new();
    };
    items(30_000)
        .iter()
        .map(|item| stored.filter().contains(item, || 2_000))
        .collect()
}

#[test]
fn every_block_of_every_kind_moves_and_the_value_stays_the_same() {
    for (kind, value) in every_kind() {
        let mut value = Box::new(value);
        let copy = value.try_clone(&mut Unlimited).unwrap();
        let before = blocks(&mut value);
        let answered = answers(&value);
        assert_eq!(move_all(&mut value, None), 1, "{kind}");
        let after = blocks(&mut value);
        assert_eq!(after.len(), before.len(), "{kind}");
        let old: HashSet<usize> = before.iter().copied().collect();
        assert!(after.iter().all(|block| !old.contains(block)), "{kind}");
        assert_eq!(*value, copy, "{kind}");
        assert_eq!(answers(&value), answered, "{kind}");
    }
}

#[test]
fn a_walk_stopped_after_each_block_resumes_where_it_stopped() {
    for (kind, value) in every_kind() {
        let mut value = Box::new(value);
        let copy = value.try_clone(&mut Unlimited).unwrap();
        let before = blocks(&mut value);
        assert_eq!(move_all(&mut value, Some(1)), before.len(), "{kind}");
        let old: HashSet<usize> = before.iter().copied().collect();
        assert!(blocks(&mut value).iter().all(|block| !old.contains(block)));
        assert_eq!(*value, copy, "{kind}");
    }
}

#[test]
fn a_moved_filter_keeps_growing() {
    let mut value = Box::new(StoredValue::Filter(StoredFilter::ready_filter(scalable(
        Growth::Scaling { expansion: 2 },
        1_000,
    ))));
    move_all(&mut value, Some(3));
    let StoredValue::Filter(stored) = &mut *value else {
        unreachable!()
    };
    let filter = stored.ready_mut().unwrap();
    let more = items(20_000);
    let mut outcome = filter.new_outcome(|| 1_000);
    filter.insert_many(more.iter().map(Vec::as_slice), &mut Unlimited, &mut outcome);
    assert!(more.iter().all(|item| filter.contains(item, || 1_000)));
    assert!(filter.layer_count() > 5);
}
