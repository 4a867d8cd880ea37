//! Helpers shared by the fuzz targets: a byte reader over the fuzz input, and builders that give
//! the decoder inputs with a correct checksum, so the fuzzer explores the field checks behind it.
#![allow(dead_code)]

use rustbloom_core::{BloomFilter, FilterParams, Growth, Limits};
use xxhash_rust::xxh3::xxh3_64;

/// Small limits: the targets exercise validation, not the allocator.
pub const LIMITS: Limits = Limits {
    max_filter_bytes: 256 << 10,
    max_new_bytes: 256 << 10,
};

/// Reads the fuzz input front to back; past the end every read gives zeros.
pub struct Reader<'a> {
    pub data: &'a [u8],
}

impl<'a> Reader<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Reader { data }
    }
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
    pub fn u8(&mut self) -> u8 {
        match self.data.split_first() {
            Some((&b, rest)) => {
                self.data = rest;
                b
            }
            None => 0,
        }
    }
    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }
    pub fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }
    pub fn u64(&mut self) -> u64 {
        u64::from(self.u32()) | (u64::from(self.u32()) << 32)
    }
    pub fn bytes(&mut self, n: usize) -> &'a [u8] {
        let n = n.min(self.data.len());
        let (head, rest) = self.data.split_at(n);
        self.data = rest;
        head
    }
}

/// Overwrites the trailing 8 bytes with the xxh3-64 of everything before them (the header's and
/// a chunk's checksum layout).
pub fn fix_checksum(bytes: &mut [u8]) {
    if bytes.len() >= 8 {
        let body = bytes.len() - 8;
        let sum = xxh3_64(&bytes[..body]);
        bytes[body..].copy_from_slice(&sum.to_le_bytes());
    }
}

/// A real (small) filter whose parameters and items come from the input.
pub fn real_filter(r: &mut Reader) -> Option<BloomFilter> {
    let capacity = u64::from(r.u16() % 2000) + 1;
    let error_rate = match r.u8() {
        0 => 0.5,
        b => 1.0 / (f64::from(b) * 7.0 + 2.0),
    };
    let growth = match r.u8() % 8 {
        0 => Growth::NonScaling,
        1 => Growth::Scaling { expansion: 1 },
        x => Growth::Scaling {
            expansion: u32::from(x) * 3,
        },
    };
    let seed = r.u64();
    let params = FilterParams {
        capacity,
        error_rate,
        growth,
        seed,
    };
    let mut filter = BloomFilter::new(params, LIMITS).ok()?;
    let items = u32::from(r.u16() % 4096);
    for i in 0..items {
        if filter.insert(&i.to_le_bytes(), LIMITS).is_err() {
            break;
        }
    }
    Some(filter)
}

/// XORs up to 8 input-chosen bytes of `bytes` (its trailing checksum excluded).
pub fn mutate(r: &mut Reader, bytes: &mut [u8]) {
    let body = bytes.len().saturating_sub(8);
    if body == 0 {
        return;
    }
    for _ in 0..r.u8() % 9 {
        let at = usize::from(r.u16()) % body;
        bytes[at] ^= r.u8();
    }
}
