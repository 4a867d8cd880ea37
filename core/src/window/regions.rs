//! Lazy clearing by region: a write clears a new generation's slot only in the regions its own
//! probes touch, and reads skip the slots a region has not cleared yet (see the module
//! documentation's "Time, replicas and restarts" and the region table on
//! [`WindowFilter`]'s `regions`).

use super::{WindowFilter, WindowShape, SLOTS};
use crate::sizing::Layout;

/// Words of one slot in a region: 16 KiB, 256 blocks. A region is the unit the ring clears in:
/// a write that starts a generation clears the new generation's slot only in the regions its own
/// probes touch (at most four slots of 16 KiB per probed line, or per probed word when
/// classic), so its cost never grows with the filter; the rest of the slot is cleared by the
/// writes that touch it later, and reads skip the slots a region has not cleared yet. Small
/// enough for that cost to stay near a probe's (a few µs), big enough for the regions'
/// generations to take 8 bytes per 64 KiB of bits (an 800 MB filter's fit in L2).
pub const REGION_SLOT_WORDS: u64 = 2048;

/// Regions of a shape: its slot's words in runs of [`REGION_SLOT_WORDS`].
pub(super) fn region_count(shape: &WindowShape) -> u64 {
    (shape.slot.bits / 64).div_ceil(REGION_SLOT_WORDS)
}

/// Words of the region table of `regions` regions: their generations, then their dirty marks.
pub(super) fn region_table_words(regions: u64) -> u64 {
    regions + regions.div_ceil(8)
}

/// All slots, as a dirty mask.
pub(super) const ALL_SLOTS: u8 = (1 << SLOTS) - 1;

impl WindowFilter {
    /// Brings `region` to generation `to` (the ring's): clears there the slots of the
    /// generations begun since it was last brought forward, those that may hold bits.
    #[inline]
    pub(super) fn bring(&mut self, region: usize, to: u64) {
        let from = self.regions[region];
        if from >= to {
            return;
        }
        let begun = if to - from >= SLOTS as u64 {
            ALL_SLOTS
        } else {
            (from + 1..=to).fold(0, |mask, generation| {
                mask | 1 << (generation % SLOTS as u64)
            })
        };
        let stale = self.dirty(region) & begun;
        for slot in 0..SLOTS {
            if stale & (1 << slot) != 0 {
                self.clear_region_slot(region, slot);
            }
        }
        self.clear_dirty(region, begun);
        self.regions[region] = to;
    }

    /// Where `region`'s dirty mark is in the region table: its word and shift.
    #[inline]
    fn dirty_place(&self, region: usize) -> (usize, u32) {
        (self.region_count + region / 8, (region % 8 * 8) as u32)
    }

    /// The slots of `region` that may hold bits.
    #[inline]
    fn dirty(&self, region: usize) -> u8 {
        let (word, shift) = self.dirty_place(region);
        (self.regions[word] >> shift) as u8
    }

    /// Marks `slots` of `region` as possibly holding bits.
    #[inline]
    pub(super) fn mark_dirty(&mut self, region: usize, slots: u8) {
        let (word, shift) = self.dirty_place(region);
        self.regions[word] |= u64::from(slots) << shift;
    }

    #[inline]
    fn clear_dirty(&mut self, region: usize, slots: u8) {
        let (word, shift) = self.dirty_place(region);
        self.regions[word] &= !(u64::from(slots) << shift);
    }

    /// Zeroes `slot` within `region`: one run of words when classic, one block in every four
    /// when blocked or in lines (16 KiB either way).
    fn clear_region_slot(&mut self, region: usize, slot: usize) {
        let slot_words = (self.shape.slot.bits / 64) as usize;
        let first = region * REGION_SLOT_WORDS as usize;
        let end = (first + REGION_SLOT_WORDS as usize).min(slot_words);
        match self.shape.slot.layout {
            Layout::Classic => self
                .words
                .zero_words(slot * slot_words + first, slot * slot_words + end),
            Layout::Blocked | Layout::Lines(_) => {
                for group in (first * SLOTS..end * SLOTS).step_by(8 * SLOTS) {
                    *self.words.line_mut(group / 8 + slot) = [0; 8];
                }
            }
        }
    }

    /// The region and slot of word `word` of the bits (see the layout pictures).
    pub(super) fn place(&self, word: usize) -> (usize, usize) {
        match self.shape.slot.layout {
            Layout::Classic => {
                let slot_words = (self.shape.slot.bits / 64) as usize;
                (
                    word % slot_words / REGION_SLOT_WORDS as usize,
                    word / slot_words,
                )
            }
            Layout::Blocked | Layout::Lines(_) => (
                word / (REGION_SLOT_WORDS as usize * SLOTS),
                word / 8 % SLOTS,
            ),
        }
    }

    /// The newest generation a read at `now_ms` may see: never before the last write's.
    #[inline]
    pub(super) fn seen(&self, now_ms: u64) -> u64 {
        // Before the end of the current generation (also before the last write): no division.
        if now_ms < self.generation_end_ms {
            self.generation
        } else {
            self.shape.generation(now_ms)
        }
    }

    /// Which slots of which regions are inside the window as seen at `now_ms`. Computed once per
    /// operation or batch (it costs two divisions).
    #[inline]
    pub(super) fn live(&self, now_ms: u64) -> Live {
        Live::at(self.seen(now_ms))
    }

    /// The slots of `region` that may hold a probe: live, and holding bits there (a slot
    /// never written since it was cleared holds none, so an add's test of the older slots of a
    /// filter younger than its window stops here).
    #[inline]
    pub(super) fn holding(&self, region: usize, live: &Live) -> u8 {
        live.mask(self.regions[region]) & self.dirty(region)
    }

    /// The slot of the ring's current generation.
    #[inline]
    pub(super) fn newest_slot(&self) -> usize {
        (self.generation % SLOTS as u64) as usize
    }
}

/// Which slots are inside the window as seen in generation `seen`, for a region brought to any
/// generation up to it.
///
/// A region brought to generation r holds in slot s the generation r − ((r − s) mod 4), the
/// latest ≡ s (mod 4) it has seen; it is live when at least `seen − 3` (and not before the
/// first generation). So the live slots depend only on d = seen − r: those of the generations
/// r down to seen − 3, none once d ≥ 4.
#[derive(Clone, Copy)]
pub(super) struct Live {
    seen: u64,
    /// By d = min(seen − r, 4): the live slots as a mask.
    masks: [u8; SLOTS + 1],
}

impl Live {
    pub(super) fn at(seen: u64) -> Live {
        let mut masks = [0u8; SLOTS + 1];
        // masks[d]: the generations seen − d down to seen − 3, those that exist; built from the
        // oldest age, each adding its slot to the older ones' (one pass, on every write).
        let mut mask = 0u8;
        for age in (0..SLOTS).rev() {
            if age as u64 <= seen {
                mask |= 1 << ((seen - age as u64) % SLOTS as u64);
            }
            masks[age] = mask;
        }
        Live { seen, masks }
    }

    /// The live slots of a region brought to generation `region`.
    #[inline]
    pub(super) fn mask(&self, region: u64) -> u8 {
        let age = self.seen.saturating_sub(region).min(SLOTS as u64);
        self.masks[age as usize]
    }

    /// The slots of `mask`, newest generation first.
    #[inline]
    pub(super) fn newest_first(&self, mask: u8) -> impl Iterator<Item = usize> {
        let seen = self.seen;
        // No slot: no walk over the ages (an add's test of the older slots of a young filter).
        let ages = if mask == 0 { 0 } else { SLOTS as u64 };
        (0..ages)
            .map(move |age| (seen.wrapping_sub(age) % SLOTS as u64) as usize)
            .filter(move |&slot| mask & (1 << slot) != 0)
    }
}

#[cfg(test)]
mod tests {
    use super::{Live, SLOTS};

    #[test]
    fn live_slots_hold_the_generations_from_the_region_s_down_to_three_before_seen() {
        let seens = (0..12).chain([u64::MAX / 3, u64::MAX - 1, u64::MAX]);
        for seen in seens {
            let live = Live::at(seen);
            for region in seen.saturating_sub(6)..=seen {
                let expected = (seen.saturating_sub(SLOTS as u64 - 1)..=region)
                    .fold(0u8, |mask, generation| {
                        mask | 1 << (generation % SLOTS as u64)
                    });
                assert_eq!(live.mask(region), expected, "seen {seen}, region {region}");
            }
        }
    }
}
