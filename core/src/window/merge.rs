//! The union of window filters alike, slot by slot (see [`crate::merge`]).
//!
//! # When two windows line up
//!
//! A window filter's slot s holds, in each region, the generation ≡ s (mod 4) that region was
//! last brought to, and generations are numbered from the epoch: generation(t) = ⌊t / G⌋ with
//! G = ⌈W/3⌉ (see [`crate::window`]). So two filters with the same window W (hence the same G)
//! and the same slot shape keep the same generation in the same slot whenever they are seen at
//! the same time, whatever their own histories; their slots can be ORed one by one, and an item
//! set in either at time t sits in the slot of ⌊t/G⌋ in both, read by the same probes (same seed,
//! same shape). They differ only in how far each has rotated: a filter not written since an
//! earlier generation has not cleared the slots the newer generations reuse yet (reads skip
//! them). A merge therefore first brings every input to one time, the latest any of them was
//! written at (`T`, as a write to the destination at `T` would: its older generations leave the
//! window, and a source's slots count only where they are still inside the window at `T`), then
//! ORs slot s of each source into slot s of the destination, region by region.
//!
//! Anything else does not line up and is refused by its first [`Difference`]: the error rate,
//! the capacity, the window (another G numbers generations differently), the seed, and the
//! slots' shape (bits, hashes, layout; a `SHAPE` given at creation can differ for the same
//! parameters).
//!
//! # Why `T` and not the server's clock
//!
//! Bringing the inputs further, to the clock, would change nothing a read sees (reads answer as
//! of `max(clock, last write)` and skip the generations that left the window), but it would make
//! the merge depend on the clock: a replica or an AOF replayed later would rotate further than
//! the primary did and hold other counts and another time. With `T` taken from the values, the
//! merge is a pure function of them, which replicas and the AOF hold too, so the command itself
//! replicates. `T` never goes back for the destination (its own last write is among the times),
//! and a source's time is at most one window ahead of the clock that wrote it (BF.ADDAT's
//! bound), as a write's is.
//!
//! # Counts
//!
//! Each slot's count becomes the estimate its union's bits imply
//! ([`crate::layer::estimated_items`]), held between the largest count of the inputs' live slots
//! of that generation and their sum, and within what its bits allow (see
//! [`WindowFilter::counts_match_bits`]).

use std::iter::StepBy;
use std::ops::Range;

use super::regions::{Live, REGION_SLOT_WORDS};
use super::{WindowFilter, GENERATIONS_PER_WINDOW, SLOTS};
use crate::layer::estimated_items;
use crate::merge::Difference;
use crate::sizing::Layout;

impl WindowFilter {
    /// The first way in which `source` does not line up with this filter, in the order a user
    /// checks them; None when they line up (see the module documentation).
    pub(crate) fn window_difference(&self, source: &WindowFilter) -> Option<Difference> {
        let (ours, theirs) = (&self.params, &source.params);
        if ours.error_rate.to_bits() != theirs.error_rate.to_bits() {
            Some(Difference::ErrorRate)
        } else if ours.capacity != theirs.capacity {
            Some(Difference::Capacity)
        } else if ours.window_ms != theirs.window_ms {
            Some(Difference::Window)
        } else if ours.seed != theirs.seed {
            Some(Difference::Seed)
        } else if self.shape != source.shape {
            Some(Difference::Layout)
        } else {
            None
        }
    }

    /// ORs `sources` (lined up with this filter, see [`window_difference`](Self::window_difference))
    /// into it at the latest time any input was written at, and estimates each slot's count.
    /// Allocates nothing: the slots are the destination's own.
    pub(crate) fn union_with(&mut self, sources: &[&WindowFilter]) {
        let at = sources
            .iter()
            .map(|source| source.last_ms)
            .fold(self.last_ms, u64::max);
        self.advance(at);
        let generation = self.generation;
        // The counts of the generations inside the window at `at`, by slot: the destination's
        // (advancing zeroed those of the generations it began) and each source's.
        let (mut most, mut sum) = (self.items, self.items);
        for source in sources {
            for (slot, items) in source.live_items(generation).into_iter().enumerate() {
                most[slot] = most[slot].max(items);
                sum[slot] = sum[slot].saturating_add(items);
            }
        }
        let live = Live::at(generation);
        let mut ones = [0u64; SLOTS];
        for region in 0..self.region_count {
            // The slots the sources hold bits in, inside the window at `at`.
            let adding = sources
                .iter()
                .fold(0u8, |mask, source| mask | source.holding(region, &live));
            if adding != 0 {
                self.bring(region, generation);
                self.mark_dirty(region, adding);
                for source in sources {
                    let holding = source.holding(region, &live);
                    for slot in (0..SLOTS).filter(|slot| holding & (1 << slot) != 0) {
                        self.or_region_slot(source, region, slot);
                    }
                }
            }
            // What the destination holds there now (a region it has not cleared yet holds
            // nothing in the slots that left the window).
            let held = live.mask(self.regions[region]);
            for (slot, ones) in ones.iter_mut().enumerate() {
                if held & (1 << slot) != 0 {
                    *ones += self.region_slot_ones(region, slot);
                }
            }
        }
        let k = u64::from(self.shape.slot.num_hashes);
        for slot in 0..SLOTS {
            self.items[slot] = estimated_items(self.shape.slot, ones[slot])
                .clamp(most[slot], sum[slot])
                .clamp(ones[slot].div_ceil(k), ones[slot]);
        }
    }

    /// Per slot, this filter's count when the generation it holds is still inside the window
    /// seen in generation `seen` (at least this filter's own), else 0.
    fn live_items(&self, seen: u64) -> [u64; SLOTS] {
        let mut items = [0u64; SLOTS];
        for age in 0..SLOTS as u64 {
            let Some(held) = self.generation.checked_sub(age) else {
                break;
            };
            if held.saturating_add(GENERATIONS_PER_WINDOW) >= seen {
                let slot = (held % SLOTS as u64) as usize;
                items[slot] = self.items[slot];
            }
        }
        items
    }

    /// ORs `source`'s words of `slot` in `region` into this filter's (same shape).
    fn or_region_slot(&mut self, source: &WindowFilter, region: usize, slot: usize) {
        match self.region_slot_span(region, slot) {
            Span::Words(words) => {
                for word in words {
                    *self.words.word_mut(word) |= source.words.word(word);
                }
            }
            Span::Lines(lines) => {
                for line in lines {
                    let theirs = source.words.line(line);
                    for (ours, theirs) in self.words.line_mut(line).iter_mut().zip(theirs) {
                        *ours |= theirs;
                    }
                }
            }
        }
    }

    /// Bits set in this filter's words of `slot` in `region`.
    fn region_slot_ones(&self, region: usize, slot: usize) -> u64 {
        let ones = |word: u64| u64::from(word.count_ones());
        match self.region_slot_span(region, slot) {
            Span::Words(words) => words.map(|word| ones(self.words.word(word))).sum(),
            Span::Lines(lines) => lines
                .map(|line| {
                    self.words
                        .line(line)
                        .iter()
                        .map(|&word| ones(word))
                        .sum::<u64>()
                })
                .sum(),
        }
    }

    /// Where the words of `slot` in `region` are (see the layout pictures in
    /// [`crate::window`]): one run of words when classic, one line (block) in every four when
    /// blocked or in lines, taken a line at a time.
    fn region_slot_span(&self, region: usize, slot: usize) -> Span {
        let slot_words = (self.shape.slot.bits / 64) as usize;
        let first = region * REGION_SLOT_WORDS as usize;
        let end = (first + REGION_SLOT_WORDS as usize).min(slot_words);
        match self.shape.slot.layout {
            Layout::Classic => Span::Words(slot * slot_words + first..slot * slot_words + end),
            Layout::Blocked | Layout::Lines(_) => {
                Span::Lines((first * SLOTS / 8 + slot..end * SLOTS / 8).step_by(SLOTS))
            }
        }
    }
}

/// The words of one slot in one region ([`WindowFilter::region_slot_span`]).
enum Span {
    /// Word indices.
    Words(Range<usize>),
    /// Line indices (8 words each).
    Lines(StepBy<Range<usize>>),
}
