//! The ring's bits as the encoding's little-endian bytes: what it holds, read and written in
//! ranges (see [`super::encoding`]), and the slots' counts checked against them.

use super::regions::Live;
use super::{OutOfRange, WindowFilter, SLOTS};

impl WindowFilter {
    /// Copies `out.len()` bytes of the encoded bits (words as little-endian bytes, in memory
    /// order) starting at byte `offset`. A region's slot whose generation has left the window
    /// (not cleared yet, see [`REGION_SLOT_WORDS`](super::REGION_SLOT_WORDS)) reads as zero, as
    /// it would once cleared: the encoding is of what the filter holds, whichever writes came
    /// since.
    pub fn read_bits(&self, offset: u64, out: &mut [u8]) -> Result<(), OutOfRange> {
        let mut at = self.byte_range(offset, out.len())?;
        let live = Live::at(self.generation);
        let mut rest = out;
        while !rest.is_empty() {
            let (word, within) = (at / 8, at % 8);
            let take = (8 - within).min(rest.len());
            let (head, tail) = rest.split_at_mut(take);
            head.copy_from_slice(&self.held_word(word, &live).to_le_bytes()[within..within + take]);
            at += take;
            rest = tail;
        }
        Ok(())
    }

    /// Word `word` of the bits when its region's slot is live (at the ring's generation), else 0.
    #[inline]
    fn held_word(&self, word: usize, live: &Live) -> u64 {
        let (region, slot) = self.place(word);
        if live.mask(self.regions[region]) & (1 << slot) != 0 {
            self.words.word(word)
        } else {
            0
        }
    }

    /// Overwrites bytes of the encoded bits starting at byte `offset` (after
    /// [`decode_header`](super::encoding::decode_header)). The regions written are brought to
    /// the ring's generation first and their slots marked as holding bits, so that what is
    /// written reads back.
    pub fn write_bits(&mut self, offset: u64, data: &[u8]) -> Result<(), OutOfRange> {
        let mut at = self.byte_range(offset, data.len())?;
        let mut rest = data;
        while !rest.is_empty() {
            let (word, within) = (at / 8, at % 8);
            let take = (8 - within).min(rest.len());
            let (region, slot) = self.place(word);
            self.bring(region, self.generation);
            self.mark_dirty(region, 1 << slot);
            let word = self.words.word_mut(word);
            let mut le = word.to_le_bytes();
            le[within..within + take].copy_from_slice(&rest[..take]);
            *word = u64::from_le_bytes(le);
            at += take;
            rest = &rest[take..];
        }
        Ok(())
    }

    /// `offset` as an index, when `len` bytes from it lie inside the bits.
    fn byte_range(&self, offset: u64, len: usize) -> Result<usize, OutOfRange> {
        let end = offset.checked_add(len as u64).ok_or(OutOfRange)?;
        if end > self.bytes() {
            return Err(OutOfRange);
        }
        Ok(offset as usize)
    }

    /// Bits set per slot, counting only what the filter holds (see
    /// [`read_bits`](Self::read_bits)). O(the filter): for loading, not for commands.
    pub fn slot_bits_set(&self) -> [u64; SLOTS] {
        let live = Live::at(self.generation);
        let mut set = [0u64; SLOTS];
        for word in 0..self.words.len() {
            let (_, slot) = self.place(word);
            set[slot] += u64::from(self.held_word(word, &live).count_ones());
        }
        set
    }

    /// Whether every slot's count agrees with its bits: each counted add set between one and k
    /// of them, so a slot with c adds holds from c to k·c bits (none when c = 0). A filter's own
    /// writes keep this; a decoded count that breaks it was not written by this filter.
    pub fn counts_match_bits(&self) -> bool {
        let k = u64::from(self.shape.slot.num_hashes);
        self.slot_bits_set()
            .iter()
            .zip(self.items)
            .all(|(&set, items)| items <= set && set <= items.saturating_mul(k))
    }

    /// Brings each slot's count into the range its bits allow (see
    /// [`counts_match_bits`](Self::counts_match_bits)): at most the bits set, at least those
    /// bits over k. For a loader that cannot refuse a value once its bits are read.
    pub fn recount_from_bits(&mut self) {
        let k = u64::from(self.shape.slot.num_hashes);
        let bits_set = self.slot_bits_set();
        for (items, set) in self.items.iter_mut().zip(bits_set) {
            *items = (*items).clamp(set.div_ceil(k), set);
        }
    }
}

/// Two filters are equal when they hold the same: parameters, time, counts and the bits as
/// encoded (a region not yet cleared holds no more than a cleared one).
impl PartialEq for WindowFilter {
    fn eq(&self, other: &Self) -> bool {
        let (mine, theirs) = (Live::at(self.generation), Live::at(other.generation));
        self.params == other.params
            && self.shape == other.shape
            && self.last_ms == other.last_ms
            && self.items == other.items
            && self.words.len() == other.words.len()
            && (0..self.words.len())
                .all(|word| self.held_word(word, &mine) == other.held_word(word, &theirs))
    }
}
