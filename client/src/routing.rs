//! The partitioning rule of `docs/partitions.md` as a client sees it: which partition an item
//! belongs to, the key of every partition, and how big each partition is made. The rule itself
//! lives in the core ([`rustbloom_core::partition`]), which the module checks items with, so a
//! client and the server can never route differently; this module only gives it the shapes a
//! client wants. Checked against `tests/fixtures/partitioning-vectors.json`.

pub use rustbloom_core::partition::{
    crc16, key_slot, partition_capacity, partition_key, MAX_PARTITIONS, SLOTS,
};

/// The partition of `item` among `partitions` under `routing_seed`: the top bits of
/// `xxh3_64(item, routing_seed) × partitions`.
pub fn partition_of(item: &[u8], routing_seed: u64, partitions: u32) -> u32 {
    rustbloom_core::partition::route(item, partitions, routing_seed)
}

/// The decimal tag whose CRC16 lands on `slot` (the smallest such number), None past the
/// last slot.
pub fn slot_tag(slot: u16) -> Option<String> {
    (slot < SLOTS).then(|| rustbloom_core::partition::slot_tag(slot).to_string())
}

/// The slot partition `index` of `name` sits on.
pub fn partition_slot(name: &[u8], index: u32, partitions: u32) -> u16 {
    rustbloom_core::partition::partition_slot(key_slot(name), index, partitions)
}

/// The keys of all `partitions` partitions of `name`, in order.
pub fn partition_keys(name: &[u8], partitions: u32) -> Vec<Vec<u8>> {
    (0..partitions)
        .map(|i| partition_key(name, i, partitions))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_of_the_redis_docs() {
        assert_eq!(key_slot(b"somekey"), 11058);
        assert_eq!(key_slot(b"foo{hash_tag}"), 2515);
        assert_eq!(key_slot(b"hash_tag"), 2515);
        assert_eq!(key_slot(b"a{}b"), crc16(b"a{}b") % SLOTS);
    }

    #[test]
    fn every_tag_is_below_110000_and_hashes_to_its_slot() {
        for slot in 0..SLOTS {
            let tag = slot_tag(slot).unwrap();
            assert!(tag.parse::<u32>().unwrap() < 110_000);
            assert_eq!(key_slot(tag.as_bytes()), slot);
        }
        assert_eq!(slot_tag(SLOTS), None);
    }
}

/// A master and the slots it serves, from `CLUSTER SLOTS`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Master {
    /// `host:port` as the cluster announces it.
    pub addr: String,
    /// Inclusive slot ranges.
    pub ranges: Vec<(u16, u16)>,
}

impl Master {
    pub fn owns(&self, slot: u16) -> bool {
        self.ranges.iter().any(|&(lo, hi)| lo <= slot && slot <= hi)
    }
}
