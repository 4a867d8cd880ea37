//! The items of the benchmark: pseudo-random lowercase words from a fixed seed, and their RESP
//! arguments encoded once, before any pass, so that encoding costs no pass anything.

use std::io::Write;
use std::ops::Range;

/// wyrand: small, fast, deterministic.
pub struct Rng(pub u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0xa076_1d64_78bd_642f);
        let t = u128::from(self.0) * u128::from(self.0 ^ 0xe703_7ed1_a0b4_28db);
        ((t >> 64) ^ t) as u64
    }

    /// Uniform in 0..n (multiply-shift).
    fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next()) * u128::from(n)) >> 64) as u64
    }
}

/// Words laid end to end, with their end offsets.
pub struct Words {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl Words {
    /// `count` lowercase words of length `min..=max` drawn from `rng`.
    pub fn generate(rng: &mut Rng, count: usize, min: u64, max: u64) -> Words {
        let mut words = Words {
            bytes: Vec::with_capacity(count * ((min + max) / 2 + 1) as usize),
            ends: Vec::with_capacity(count),
        };
        for _ in 0..count {
            let len = min + rng.below(max - min + 1);
            for _ in 0..len {
                words.bytes.push(b'a' + rng.below(26) as u8);
            }
            words.ends.push(words.bytes.len());
        }
        words
    }

    pub fn len(&self) -> usize {
        self.ends.len()
    }

    fn get(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.bytes[start..self.ends[i]]
    }

    /// Distinct words (each at most 16 letters: packed in base 27 into a u128, sorted).
    pub fn distinct(&self) -> usize {
        let mut packed: Vec<u128> = (0..self.len())
            .map(|i| {
                self.get(i)
                    .iter()
                    .fold(0u128, |acc, &b| acc * 27 + u128::from(b - b'a' + 1))
            })
            .collect();
        packed.sort_unstable();
        packed.dedup();
        packed.len()
    }
}

/// The RESP arguments of a range of words cut into batches: one contiguous body per batch.
pub struct Batches {
    pub body: Vec<u8>,
    /// (end of the batch's bytes in `body`, items in it)
    pub batches: Vec<(usize, usize)>,
}

impl Batches {
    pub fn new(words: &Words, range: Range<usize>, per_batch: usize) -> Batches {
        let mut out = Batches {
            body: Vec::new(),
            batches: Vec::new(),
        };
        let mut in_batch = 0;
        for i in range {
            let word = words.get(i);
            write!(out.body, "${}\r\n", word.len()).expect("write to a Vec");
            out.body.extend_from_slice(word);
            out.body.extend_from_slice(b"\r\n");
            in_batch += 1;
            if in_batch == per_batch {
                out.batches.push((out.body.len(), in_batch));
                in_batch = 0;
            }
        }
        if in_batch > 0 {
            out.batches.push((out.body.len(), in_batch));
        }
        out
    }

    pub fn items(&self) -> usize {
        self.batches.iter().map(|b| b.1).sum()
    }
}

/// Every pass's items: the words, the never-added probes and the fillers' generator.
pub struct Workload {
    pub items: usize,
    pub words: Words,
    pub distinct: usize,
    /// Words of length 13..=16, never added: the false-positive probes.
    pub probes: Words,
    pub max_probes: u64,
    /// Never-seen words that fill a NONSCALING filter up to its capacity.
    pub fillers: Rng,
    /// The words in batches of 1000, the batch of parts 1 and 3.
    pub batches_1000: Batches,
}

impl Workload {
    /// `items` words and the most probes any rate of `rates` asks for (`fixed_probes` when set).
    pub fn generate(items: usize, rates: &[f64], fixed_probes: Option<u64>) -> Workload {
        let words = Words::generate(&mut Rng(0x0dd_ba11_5eed), items, 4, 12);
        let max_probes = fixed_probes.unwrap_or_else(|| {
            rates
                .iter()
                .map(|&e| probes_for(e))
                .max()
                .unwrap_or(1_000_000)
        });
        Workload {
            items,
            distinct: words.distinct(),
            probes: Words::generate(&mut Rng(0x009e_0be5), max_probes as usize, 13, 16),
            max_probes,
            fillers: Rng(0x00f1_11e5),
            batches_1000: Batches::new(&words, 0..items, 1000),
            words,
        }
    }
}

/// Probes asked of a filter at error rate `e`: enough for ~200 false positives, within 1M..=10M.
pub fn probes_for(e: f64) -> u64 {
    ((200.0 / e) as u64).clamp(1_000_000, 10_000_000)
}
