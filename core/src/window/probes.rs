//! An item's probes in the ring: derived from its hash once per operation, prefetched, tested
//! in the live slots newest first and set in the newest (see the module documentation's
//! "Layout" and "Cost").

use std::ops::ControlFlow;

use super::regions::{Live, ALL_SLOTS, REGION_SLOT_WORDS};
use super::{Inserted, WindowFilter, SLOTS};
use crate::hash::ItemHash;
use crate::scalable::batch::for_each_group;
use crate::sizing::{LayerSize, Layout, BLOCK_BITS, MAX_LINES};

impl WindowFilter {
    /// True when `item` may have been added within the window at `now_ms`.
    pub fn contains(&self, item: &[u8], now_ms: u64) -> bool {
        self.contains_hash(&self.hash(item), now_ms)
    }

    /// [`contains`](Self::contains) for an already hashed item.
    pub fn contains_hash(&self, hash: &ItemHash, now_ms: u64) -> bool {
        let probe = self.probe(hash);
        // All slots' lines start loading at once, rather than each after the previous test.
        self.prefetch(&probe, self.newest_slot());
        self.contains_live(&probe, &self.live(now_ms), ALL_SLOTS)
    }

    /// True when `probe` is set in one slot, among `among`, that is live in every region it
    /// touches; newest first.
    #[inline]
    fn contains_live(&self, probe: &Probe, live: &Live, among: u8) -> bool {
        match probe {
            Probe::Classic(hash) => {
                let LayerSize {
                    bits, num_hashes, ..
                } = self.shape.slot;
                let slot_words = (bits / 64) as usize;
                // The slots still holding every position so far; an absent item empties it
                // within a few positions.
                let mut holding = among;
                for p in hash.positions(bits, num_hashes) {
                    let word = (p / 64) as usize;
                    holding &= live.mask(self.regions[word / REGION_SLOT_WORDS as usize]);
                    for slot in 0..SLOTS {
                        if self.words.word(slot * slot_words + word) & (1u64 << (p % 64)) == 0 {
                            holding &= !(1 << slot);
                        }
                    }
                    if holding == 0 {
                        return false;
                    }
                }
                true
            }
            Probe::Blocked { base, mask, region } => {
                let holding = among & self.holding(*region, live);
                live.newest_first(holding).any(|slot| {
                    // Branch-free over the 8 words (the compiler vectorizes it): cheaper than
                    // stopping at the first unset bit, whose branch is mispredicted half the time.
                    missing(self.block(base + slot * 8), mask) == 0
                })
            }
            // Line by line, probe by probe: an absent item usually fails in its first line (as
            // in a layer; a mask per line would be built for nothing).
            Probe::Lines {
                hash,
                bases,
                regions,
                lines,
                per_line,
            } => {
                let lines = usize::from(*lines);
                let holding = regions[..lines].iter().fold(among, |holding, &region| {
                    holding & self.holding(region, live)
                });
                live.newest_first(holding).any(|slot| {
                    bases[..lines].iter().enumerate().all(|(j, base)| {
                        let block = self.block(base + slot * 8);
                        hash.line_probes(j, u32::from(*per_line))
                            .all(|p| block[(p / 64) as usize] & (1 << (p % 64)) != 0)
                    })
                })
            }
        }
    }

    /// Adds `item` at `now_ms` (advancing the ring first).
    pub fn insert(&mut self, item: &[u8], now_ms: u64) -> Inserted {
        let probe = self.probe(&self.hash(item));
        let at_ms = self.advance(now_ms);
        self.prefetch(&probe, self.newest_slot());
        Inserted {
            new: self.add_probe(&probe, &Live::at(self.generation)),
            at_ms,
        }
    }

    /// Sets `probe` in the newest slot of an advanced ring (whose liveness is `live`), bringing
    /// the regions it touches to the ring's generation first; true when it was absent from all
    /// live slots before.
    #[inline]
    fn add_probe(&mut self, probe: &Probe, live: &Live) -> bool {
        let newest = self.newest_slot();
        self.bring_probe(probe);
        if !self.slot_add(newest, probe) {
            return false;
        }
        // Every counted add set a bit, so the count never passes the slot's bits, the bound the
        // decoder checks (a count decoded without its bits checked, through the piecewise API,
        // is held there too, so that the filter's saves stay loadable).
        self.items[newest] = (self.items[newest] + 1).min(self.shape.slot.bits);
        // Present in an older slot: refreshed, not new.
        !self.contains_live(probe, live, ALL_SLOTS & !(1 << newest))
    }

    /// Brings every region `probe` touches to the ring's generation, and marks its newest slot
    /// there as holding bits.
    #[inline]
    fn bring_probe(&mut self, probe: &Probe) {
        let (to, newest) = (self.generation, 1u8 << self.newest_slot());
        let bring = |filter: &mut Self, region: usize| {
            filter.bring(region, to);
            filter.mark_dirty(region, newest);
        };
        match probe {
            Probe::Classic(hash) => {
                let LayerSize {
                    bits, num_hashes, ..
                } = self.shape.slot;
                for p in hash.positions(bits, num_hashes) {
                    bring(self, (p / 64 / REGION_SLOT_WORDS) as usize);
                }
            }
            Probe::Blocked { region, .. } => bring(self, *region),
            Probe::Lines { regions, lines, .. } => regions[..usize::from(*lines)]
                .iter()
                .for_each(|&region| bring(self, region)),
        }
    }

    /// Adds a batch of items at one timestamp, calling `added` with each one's
    /// [`Inserted::new`] in order; returns the timestamp used. Hashes and prefetches a group of
    /// items before touching any (see [`crate::BloomFilter::insert_many`]).
    pub fn insert_many<'a>(
        &mut self,
        items: impl IntoIterator<Item = &'a [u8]>,
        now_ms: u64,
        mut added: impl FnMut(bool),
    ) -> u64 {
        let at = self.advance(now_ms);
        let live = Live::at(self.generation);
        let mut probes = Vec::new();
        for_each_group(items, self.params.seed, |group| {
            self.prefetch_group(group, self.newest_slot(), &mut probes);
            for probe in &probes {
                added(self.add_probe(probe, &live));
            }
            ControlFlow::Continue(())
        });
        at
    }

    /// Looks up a batch of items at `now_ms`, calling `found` with each answer in order.
    pub fn contains_many<'a>(
        &self,
        items: impl IntoIterator<Item = &'a [u8]>,
        now_ms: u64,
        mut found: impl FnMut(bool),
    ) {
        let live = self.live(now_ms);
        let mut probes = Vec::new();
        for_each_group(items, self.params.seed, |group| {
            self.prefetch_group(group, self.newest_slot(), &mut probes);
            for probe in &probes {
                found(self.contains_live(probe, &live, ALL_SLOTS));
            }
            ControlFlow::Continue(())
        });
    }

    /// The first word of `block` in slot 0 (blocked layout); slot s's copy follows 8·s words on.
    #[inline]
    fn block_base(&self, block: u64) -> usize {
        block as usize * SLOTS * 8
    }

    /// The 8 words of one slot's block starting at word `start` (a multiple of 8).
    #[inline]
    fn block(&self, start: usize) -> &[u64; 8] {
        self.words.line(start / 8)
    }

    /// What `hash` touches, derived once and used in every slot.
    #[inline]
    fn probe(&self, hash: &ItemHash) -> Probe {
        let LayerSize {
            bits,
            num_hashes,
            layout,
        } = self.shape.slot;
        // Blocks per region.
        let per_region = REGION_SLOT_WORDS / 8;
        match layout {
            Layout::Classic => Probe::Classic(*hash),
            // The one-line layout's block and in-block bits, as a layer in one line picks them.
            Layout::Blocked => {
                let block = hash.line(0, bits / BLOCK_BITS);
                Probe::Blocked {
                    base: self.block_base(block),
                    mask: hash.line_mask(0, num_hashes),
                    region: (block / per_region) as usize,
                }
            }
            // The h lines a layer in h lines picks, their probes derived line by line.
            Layout::Lines(lines) => {
                let mut bases = [0; MAX_LINES as usize];
                let mut regions = [0; MAX_LINES as usize];
                for j in 0..usize::from(lines) {
                    let block = hash.line(j, bits / BLOCK_BITS);
                    bases[j] = self.block_base(block);
                    regions[j] = (block / per_region) as usize;
                }
                Probe::Lines {
                    hash: *hash,
                    bases,
                    regions,
                    lines,
                    // LayerSize::check bounds it by MAX_BLOCKED_HASHES = 16.
                    per_line: self.shape.slot.hashes_per_line() as u8,
                }
            }
        }
    }

    /// Sets `probe` in `slot`; true when a bit changed.
    #[inline]
    fn slot_add(&mut self, slot: usize, probe: &Probe) -> bool {
        match probe {
            Probe::Classic(hash) => {
                let LayerSize {
                    bits, num_hashes, ..
                } = self.shape.slot;
                let first = slot * (bits / 64) as usize;
                let mut changed = 0u64;
                for p in hash.positions(bits, num_hashes) {
                    let word = self.words.word_mut(first + (p / 64) as usize);
                    let bit = 1u64 << (p % 64);
                    changed |= !*word & bit;
                    *word |= bit;
                }
                changed != 0
            }
            Probe::Blocked { base, mask, .. } => {
                let start = base + slot * 8;
                let changed = missing(self.block(start), mask) != 0;
                let block = self.words.line_mut(start / 8);
                block.iter_mut().zip(mask).for_each(|(word, m)| *word |= m);
                changed
            }
            Probe::Lines {
                hash,
                bases,
                lines,
                per_line,
                ..
            } => {
                let mut changed = 0u64;
                for (j, base) in bases[..usize::from(*lines)].iter().enumerate() {
                    let start = base + slot * 8;
                    let block = self.words.line_mut(start / 8);
                    for p in hash.line_probes(j, u32::from(*per_line)) {
                        let (word, bit) = (&mut block[(p / 64) as usize], 1u64 << (p % 64));
                        changed |= !*word & bit;
                        *word |= bit;
                    }
                }
                changed != 0
            }
        }
    }

    /// Replaces `probes` by those of a group of hashed items, after asking the CPU to start
    /// loading the cache lines each touches (see [`prefetch`](Self::prefetch)), so that the
    /// misses of the whole group overlap. The vector is reused from group to group: one
    /// allocation per batch.
    fn prefetch_group(&self, group: &[ItemHash], newest: usize, probes: &mut Vec<Probe>) {
        probes.clear();
        probes.extend(group.iter().map(|hash| {
            let probe = self.probe(hash);
            self.prefetch(&probe, newest);
            probe
        }));
    }

    /// Starts loading what an operation on `probe` reads: classic, its k words in each slot;
    /// blocked, its four adjacent blocks; in lines, the four blocks of its first line, and of the
    /// other lines only the copy in the `newest` slot. An add tests and sets every line of the
    /// newest slot but usually finds a new item missing from an older slot in its first line, as
    /// a lookup of an absent item does in every slot: fetching all four copies of every line
    /// (16 cache lines per item at 4 lines) spent the memory bandwidth on lines never read.
    #[inline]
    fn prefetch(&self, probe: &Probe, newest: usize) {
        #[cfg(target_arch = "x86_64")]
        {
            let fetch = |word: usize| self.words.prefetch(word);
            match probe {
                Probe::Classic(hash) => {
                    let LayerSize {
                        bits, num_hashes, ..
                    } = self.shape.slot;
                    for slot in 0..SLOTS {
                        let base = slot * (bits / 64) as usize;
                        for p in hash.positions(bits, num_hashes) {
                            fetch(base + (p / 64) as usize);
                        }
                    }
                }
                Probe::Blocked { base, .. } => (0..SLOTS).for_each(|slot| fetch(base + slot * 8)),
                Probe::Lines { bases, lines, .. } => {
                    let (first, rest) = bases[..usize::from(*lines)]
                        .split_first()
                        .expect("at least one line");
                    (0..SLOTS).for_each(|slot| fetch(first + slot * 8));
                    rest.iter().for_each(|base| fetch(base + newest * 8));
                }
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (probe, newest);
    }
}

/// An item's probes, derived from its hash once per operation.
enum Probe {
    /// Its k positions, re-derived in each slot.
    Classic(ItemHash),
    /// Its block's first word (slot 0), its k bits as a 512-bit mask, and its region.
    Blocked {
        base: usize,
        mask: [u64; 8],
        region: usize,
    },
    /// Its h lines' first words (slot 0) and regions, and its hash for the probes in each.
    Lines {
        hash: ItemHash,
        bases: [usize; MAX_LINES as usize],
        regions: [usize; MAX_LINES as usize],
        lines: u8,
        per_line: u8,
    },
}

/// The bits of `mask` that `block` lacks, OR-ed together: zero when all are set.
#[inline]
fn missing(block: &[u64; 8], mask: &[u64; 8]) -> u64 {
    block
        .iter()
        .zip(mask)
        .fold(0, |acc, (word, m)| acc | (m & !word))
}
