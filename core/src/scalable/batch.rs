//! The batch operations of the scalable filter (BF.MADD, BF.MEXISTS, BF.INSERT): items hashed a
//! group at a time, their lines prefetched, then tested and set through the line code compiled
//! for the CPU ([`bits::with_fast_shifts`]).

use std::ops::ControlFlow;

use super::{AddOutcome, Added, BloomFilter, GrownLayer};
use crate::bits::{self, by_probe_count};
use crate::budget::MemoryBudget;
use crate::hash::ItemHash;
use crate::layer::Layer;

/// Items hashed and prefetched together by the batch operations: enough misses in flight to keep
/// the memory system busy, few enough that the lines are still cached when the items are
/// processed. Measured here per item (blocked layout): 16 → 32 took a 126 MB filter from 38 to 31
/// ns per insert and 36 to 28 ns per lookup, a 12 MB one from 15 to 13 ns; 64 was worse again.
pub(super) const BATCH: usize = bits::GROUP;
const _: () = assert!(BATCH <= 64, "a group's answers fit one word");

/// Calls `each` with the hashes of `items`, BATCH at a time ([`HashedGroups`]). Stops when
/// `each` breaks.
pub(crate) fn for_each_group<'a>(
    items: impl IntoIterator<Item = &'a [u8]>,
    seed: u64,
    mut each: impl FnMut(&[ItemHash]) -> ControlFlow<()>,
) {
    let mut groups = HashedGroups::new(items.into_iter(), seed);
    let mut group = [ItemHash::default(); BATCH];
    while let Some(hashes) = groups.next_group(&mut group) {
        if each(hashes).is_break() {
            return;
        }
    }
}

/// The hashes of items, BATCH at a time, each group filled in place in the caller's array: no
/// group copied out of an iterator (512 bytes each, which a one-item BF.ADD paid twice), and
/// the items' iterator kept apart from the hashes handed out (so in registers). A loop over it
/// rather than a closure per group lets a caller compiled for the CPU's features
/// ([`bits::with_fast_shifts`]) keep each group's work in its own body.
struct HashedGroups<I> {
    items: I,
    seed: u64,
    /// Set once a group came short: the items are used up.
    done: bool,
}

impl<'a, I: Iterator<Item = &'a [u8]>> HashedGroups<I> {
    #[inline(always)]
    fn new(items: I, seed: u64) -> HashedGroups<I> {
        HashedGroups {
            items,
            seed,
            done: false,
        }
    }

    /// The next group's hashes (up to BATCH) in `group`, None once the items are used up.
    #[inline(always)]
    fn next_group<'g>(&mut self, group: &'g mut [ItemHash; BATCH]) -> Option<&'g [ItemHash]> {
        if self.done {
            return None;
        }
        // One count, both where the next hash goes and how many there are.
        let mut len = 0;
        while len < BATCH {
            let Some(item) = self.items.next() else {
                break;
            };
            #[cfg(feature = "test-hooks")]
            super::test_hooks::panic_on(item);
            group[len] = ItemHash::new(item, self.seed);
            len += 1;
        }
        self.done = len < BATCH;
        (len > 0).then(|| &group[..len])
    }
}

/// A batch add's groups ([`BloomFilter::insert_many`]), hashed and added in one run compiled
/// for the CPU's features ([`bits::with_fast_shifts`]): the features are checked, and the
/// line code's values set up, once a batch rather than once a group.
pub(super) struct AddGroups<'a, I, B: MemoryBudget + ?Sized> {
    pub(super) filter: &'a mut BloomFilter,
    pub(super) items: I,
    pub(super) budget: &'a mut B,
    pub(super) outcome: &'a mut AddOutcome,
}

impl<'i, I: Iterator<Item = &'i [u8]>, B: MemoryBudget + ?Sized> bits::ShiftHeavy
    for AddGroups<'_, I, B>
{
    type Output = ();

    #[inline(always)]
    fn run<L: bits::LineOps>(self, lines: L) {
        let AddGroups {
            filter,
            items,
            budget,
            outcome,
        } = self;
        let mut groups = HashedGroups::new(items, filter.params.seed);
        let mut hashes = [ItemHash::default(); BATCH];
        while let Some(group) = groups.next_group(&mut hashes) {
            filter.prefetch(group);
            if filter.add_group(lines, group, budget, outcome).is_break() {
                return;
            }
        }
    }
}

/// The first-line test of a group of a batch lookup ([`BloomFilter::contains_many`]) in every
/// layer, run compiled for the CPU's features ([`bits::with_fast_shifts`]): bit i set when item
/// i passed in some layer.
pub(super) struct FirstLinesPass<'a> {
    pub(super) layers: &'a [Layer],
    pub(super) group: &'a [ItemHash],
}

impl bits::ShiftHeavy for FirstLinesPass<'_> {
    type Output = u64;

    #[inline(always)]
    fn run<L: bits::LineOps>(self, lines: L) -> u64 {
        self.layers.iter().fold(0, |passed, layer| {
            passed | layer.first_lines_pass(lines, self.group)
        })
    }
}

/// A filter of one layer in lines, the common case of [`BloomFilter::contains_many`]: where
/// items' first lines are in it, found by one formula however its bits are cut.
#[derive(Clone, Copy)]
pub(super) struct OneLayer<'f> {
    layer: &'f Layer,
    lines: bits::LineFinder<'f>,
    per_line: u32,
    seed: u64,
}

impl<'f> OneLayer<'f> {
    /// `filter`'s one layer, when it has one layer and that in lines.
    pub(super) fn of(filter: &'f BloomFilter) -> Option<OneLayer<'f>> {
        let [layer] = &filter.layers[..] else {
            return None;
        };
        let (lines, per_line) = layer.line_finder()?;
        Some(OneLayer {
            layer,
            lines,
            per_line,
            seed: filter.params.seed,
        })
    }
}

/// A batch lookup in a [`OneLayer`] filter, calling `found` with each answer in order, run
/// compiled for the CPU's features ([`bits::with_fast_shifts`]), the hashing included: each
/// item's first line is found (and its loading started) as soon as it is hashed.
pub(super) struct OneLayerLookup<'f, I, F> {
    pub(super) filter: OneLayer<'f>,
    pub(super) items: I,
    pub(super) found: F,
}

impl<'a, I: Iterator<Item = &'a [u8]>, F: FnMut(bool)> bits::ShiftHeavy
    for OneLayerLookup<'_, I, F>
{
    type Output = ();

    #[inline(always)]
    fn run<L: bits::LineOps>(self, ops: L) {
        // Locals, not fields of `self` (which the compiler keeps in memory, storing each change).
        let OneLayerLookup {
            filter:
                OneLayer {
                    layer,
                    lines,
                    per_line,
                    seed,
                },
            mut items,
            mut found,
        } = self;
        // An item whose first line passes is answered by its whole test, unless that line is
        // all its probes.
        let one_line = layer.size().layout.lines() == 1;
        let mut group = [ItemHash::default(); BATCH];
        let mut first_lines = [lines.first_line(&group[0]); BATCH];
        loop {
            let mut len = 0;
            for ((hash, line), item) in group.iter_mut().zip(&mut first_lines).zip(&mut items) {
                #[cfg(feature = "test-hooks")]
                super::test_hooks::panic_on(item);
                *hash = ItemHash::new(item, seed);
                *line = lines.first_line(hash);
                bits::prefetch_line(line);
                len += 1;
            }
            let (group, first_lines) = (&group[..len], &first_lines[..len]);
            let passed = by_probe_count!(
                per_line,
                N => first_lines_passed::<L, N>(ops, layer, first_lines, group, per_line),
                _ => first_lines_passed::<L, 0>(ops, layer, first_lines, group, per_line)
            );
            if passed == 0 {
                group.iter().for_each(|_| found(false));
            } else {
                for (i, hash) in group.iter().enumerate() {
                    found(passed & (1 << i) != 0 && (one_line || layer.contains(hash)));
                }
            }
            if len < BATCH {
                return;
            }
        }
    }
}

/// Bit i set when item i of `group` passes its first line, `first_lines[i]`, of `layer`
/// (through `ops`, compiled for `N` probes a line, 0: any count, `per_line`); the other lines of
/// those that pass start loading at once.
#[inline(always)]
fn first_lines_passed<L: bits::LineOps, const N: usize>(
    ops: L,
    layer: &Layer,
    first_lines: &[&[u64; 8]],
    group: &[ItemHash],
    per_line: u32,
) -> u64 {
    let per_line = if N == 0 { per_line } else { N as u32 };
    let mut passed = 0u64;
    for (i, (line, hash)) in first_lines.iter().zip(group).enumerate() {
        if ops.test(line, hash.line_seed(0), per_line) {
            passed |= 1 << i;
            layer.prefetch_other_lines(hash);
        }
    }
    passed
}

impl BloomFilter {
    /// Looks up a batch of items, calling `found` with each answer in order. Hashes a group of
    /// items and prefetches their first lines before testing any, which hides memory latency on
    /// big filters; then tests each first line, and fetches the other lines of only the items
    /// whose first line passed (in some layer), before their whole test. An absent item, which
    /// nearly always fails in its first line, costs one line's fetch and test, however many
    /// lines its items have. A filter of one layer in lines, the common case, is looked up in
    /// one function compiled for the CPU, hashing included.
    pub fn contains_many<'a>(
        &self,
        items: impl IntoIterator<Item = &'a [u8]>,
        mut found: impl FnMut(bool),
    ) {
        if let Some(filter) = OneLayer::of(self) {
            return bits::with_fast_shifts(OneLayerLookup {
                filter,
                items: items.into_iter(),
                found,
            });
        }
        for_each_group(items, self.params.seed, |group| {
            // Bit i: item i's first line passed in some layer (BATCH ≤ 64 items a group).
            let passed = bits::with_fast_shifts(FirstLinesPass {
                layers: &self.layers,
                group,
            });
            // Only the items that passed (few, for absent items) are visited.
            let mut pending = passed;
            while pending != 0 {
                let hash = &group[pending.trailing_zeros() as usize];
                pending &= pending - 1;
                self.layers
                    .iter()
                    .for_each(|layer| layer.prefetch_other_lines(hash));
            }
            for (i, hash) in group.iter().enumerate() {
                found(passed & (1 << i) != 0 && self.contains_hash(hash));
            }
            ControlFlow::Continue(())
        });
    }

    /// Adds a batch of items in order, recording each result (and each layer pushed) in
    /// `outcome` as it goes; stops at the first error. Prefetches like
    /// [`contains_many`](Self::contains_many).
    pub fn insert_many<'a, B: MemoryBudget + ?Sized>(
        &mut self,
        items: impl IntoIterator<Item = &'a [u8]>,
        budget: &mut B,
        outcome: &mut AddOutcome,
    ) {
        let mut items = items.into_iter();
        if items.size_hint() == (1, Some(1)) {
            // BF.ADD: one item, without the batch machinery.
            if let Some(item) = items.next() {
                match self.insert_one(item, budget) {
                    Ok((added, grown)) => {
                        outcome.grown.extend(grown);
                        outcome.added.push(added);
                    }
                    Err(error) => outcome.error = Some(error),
                }
            }
            return;
        }
        bits::with_fast_shifts(AddGroups {
            filter: self,
            items,
            budget,
            outcome,
        });
    }

    /// Adds a group of hashed items of [`insert_many`](Self::insert_many), recording each result;
    /// breaks at the first error. Lines are tested and set through `lines`.
    #[inline(always)]
    pub(super) fn add_group<L: bits::LineOps, B: MemoryBudget + ?Sized>(
        &mut self,
        lines: L,
        group: &[ItemHash],
        budget: &mut B,
        outcome: &mut AddOutcome,
    ) -> ControlFlow<()> {
        let mut rest = group;
        while let Some((hash, after)) = rest.split_first() {
            // The common case without insert_hash's call and result: room in the newest layer.
            if !self.newest().is_full() {
                let (newest, older) = self
                    .layers
                    .split_last_mut()
                    .expect("a filter always has a layer");
                let taken = newest.add_while_room(lines, older, rest, &mut outcome.added);
                rest = &rest[taken..];
                continue;
            }
            match self.insert_hash(hash, budget) {
                Ok(Added::New(grown)) => {
                    if let Some((index, size)) = grown {
                        outcome.grown.push(GrownLayer {
                            index,
                            size,
                            first_item: outcome.added.len(),
                        });
                    }
                    outcome.added.push(true);
                }
                Ok(Added::Present) => outcome.added.push(false),
                Err(error) => {
                    outcome.error = Some(error);
                    return ControlFlow::Break(());
                }
            }
            rest = after;
        }
        ControlFlow::Continue(())
    }

    /// Starts loading the cache lines a group of items will touch in the layers the group's
    /// add finds them in itself: every layer but the newest, when that has room (the add
    /// finds the newest's lines and starts loading them as it goes). Not for a lone item
    /// (BF.ADD, BF.MADD of one), which would wait for its lines at once anyway.
    fn prefetch(&self, group: &[ItemHash]) {
        if group.len() < 2 {
            return;
        }
        let layers = if self.newest().is_full() {
            &self.layers[..]
        } else {
            &self.layers[..self.layers.len() - 1]
        };
        for hash in group {
            for layer in layers {
                layer.prefetch(hash);
            }
        }
    }
}
