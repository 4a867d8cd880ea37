//! The random probes a copy is checked with, and why a copy is not accepted.

use rustbloom_client::routing::partition_of;
use rustbloom_client::KeyInfo;

/// Tiny deterministic generator for the probes (splitmix64); seeded per run.
pub(super) struct Probes(pub(super) u64);

impl Probes {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A probe for `shape`'s key: on a partition, one that routes to it (the module refuses
    /// items of other partitions).
    pub(super) fn item_for(&mut self, shape: &KeyInfo) -> Vec<u8> {
        loop {
            let item = self.item();
            match shape.partition {
                Some((i, p, seed)) if partition_of(&item, seed, p) != i => {}
                _ => return item,
            }
        }
    }

    /// A probe of 1 to 24 random bytes.
    fn item(&mut self) -> Vec<u8> {
        let len = 1 + (self.next_u64() % 24) as usize;
        let mut v = Vec::with_capacity(len + 8);
        while v.len() < len {
            v.extend_from_slice(&self.next_u64().to_le_bytes());
        }
        v.truncate(len);
        v
    }
}

/// Why a copy is not accepted.
pub(super) enum Mismatch {
    /// The source changed while it was read: a fresh copy may succeed.
    SourceChanged(String),
    /// The copy answers differently from an unchanged source.
    Differs(String),
}
