//! The union of stores of one length, word by word: what BF.MERGE does to each layer.

use super::BitStore;

/// Words ORed at a time: the result's chunk (4 KiB) stays in L1 while every source's chunk is
/// ORed into it and its set bits are counted, so each byte crosses the memory bus once per
/// store, as in a copy.
const CHUNK: usize = 512;

impl BitStore {
    /// ORs every store of `sources` (each of this store's length) into this one and returns the
    /// number of bits set in the result. Panics when a source's length differs (callers check
    /// shapes first).
    pub(crate) fn union_with(&mut self, sources: &[&BitStore]) -> u64 {
        let len = self.len;
        assert!(
            sources.iter().all(|source| source.len == len),
            "a union of stores of different lengths"
        );
        let mut ones = 0u64;
        let mut at = 0usize;
        for block in self.blocks_mut() {
            for chunk in block.chunks_mut(CHUNK) {
                for source in sources {
                    match source.words_in_one_block(at, chunk.len()) {
                        Some(words) => {
                            for (word, other) in chunk.iter_mut().zip(words) {
                                *word |= *other;
                            }
                        }
                        // Blocks cut differently (never from one process's allocator, but a
                        // store's cut is its own business): word by word.
                        None => {
                            for (offset, word) in chunk.iter_mut().enumerate() {
                                *word |= source.word(at + offset);
                            }
                        }
                    }
                }
                ones += chunk
                    .iter()
                    .map(|word| u64::from(word.count_ones()))
                    .sum::<u64>();
                at += chunk.len();
            }
        }
        ones
    }

    /// Words `start .. start + len` as they lie in memory, when they are inside one block.
    /// Panics past the end.
    fn words_in_one_block(&self, start: usize, len: usize) -> Option<&[u64]> {
        assert!(
            start.checked_add(len).is_some_and(|end| end <= self.len),
            "words {start}+{len} of {}",
            self.len
        );
        if len == 0 {
            return None;
        }
        let index = if self.in_pieces() {
            start >> self.piece_shift
        } else {
            0
        };
        let within = start - self.block_start(index);
        let room = self.block_len(index) - within;
        // SAFETY: `len` <= `room` initialised words of block `index` from `within`, owned by
        // self and borrowed with it.
        (len <= room).then(|| unsafe {
            std::slice::from_raw_parts(self.block_ptr(index).as_ptr().add(within), len)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::BitStore;

    fn store(words: u64, set: impl Fn(usize) -> u64) -> BitStore {
        let mut store = BitStore::zeroed(words).unwrap();
        for index in 0..words as usize {
            *store.word_mut(index) = set(index);
        }
        store
    }

    #[test]
    fn a_union_is_the_or_of_every_word_and_counts_its_ones() {
        // Past one chunk and, at 2^20 words, in pieces on the allocators the crate knows.
        for words in [1u64, 8, 513, 1 << 20] {
            let mut dest = store(words, |i| if i % 3 == 0 { 1 } else { 0 });
            let first = store(words, |i| (i as u64) << 1);
            let second = store(words, |i| if i % 2 == 0 { 1 << 63 } else { 0 });
            let ones = dest.union_with(&[&first, &second]);
            let mut expected_ones = 0;
            for i in 0..words as usize {
                let expected = (if i % 3 == 0 { 1 } else { 0 })
                    | (i as u64) << 1
                    | if i % 2 == 0 { 1 << 63 } else { 0 };
                assert_eq!(dest.word(i), expected, "word {i} of {words}");
                expected_ones += u64::from(expected.count_ones());
            }
            assert_eq!(ones, expected_ones);
        }
    }
}
