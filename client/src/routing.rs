//! The partitioning rule of `docs/partitioning.md`: which partition an item belongs to, the key of
//! every partition, and how big each partition is made. Pure functions, checked against
//! `tests/fixtures/partitioning-vectors.json`.

use std::sync::OnceLock;

use xxhash_rust::xxh3::xxh3_64_with_seed;

/// Redis Cluster's slot count.
pub const SLOTS: u16 = 16384;

/// Most partitions a filter may have.
pub const MAX_PARTITIONS: u32 = 4096;

/// CRC16-XMODEM (polynomial 0x1021, initial value 0), the hash of Redis Cluster's key slots.
pub fn crc16(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in data {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// The cluster slot of a key, honouring its hash tag: when the key holds `{` and, later, `}` with
/// at least one byte between them, only the bytes between the first `{` and the next `}` count.
pub fn key_slot(key: &[u8]) -> u16 {
    let hashed = match key.iter().position(|&c| c == b'{') {
        Some(open) => match key[open + 1..].iter().position(|&c| c == b'}') {
            Some(len) if len > 0 => &key[open + 1..open + 1 + len],
            _ => key,
        },
        None => key,
    };
    crc16(hashed) % SLOTS
}

/// The partition (0 ≤ p < `partitions`) of `item`: the top 64 bits of xxh3_64(item, seed) ×
/// partitions.
pub fn partition_of(item: &[u8], routing_seed: u64, partitions: u32) -> u32 {
    let h = xxh3_64_with_seed(item, routing_seed);
    // The product's top half is below `partitions`, so it fits in u32.
    ((u128::from(h) * u128::from(partitions)) >> 64) as u32
}

/// For every slot, the smallest n whose decimal string hashes to it (all are below 110,000).
fn slot_tags() -> &'static [u32] {
    static TAGS: OnceLock<Vec<u32>> = OnceLock::new();
    TAGS.get_or_init(|| {
        let mut tags = vec![u32::MAX; usize::from(SLOTS)];
        let mut left = usize::from(SLOTS);
        let mut n: u32 = 0;
        while left > 0 {
            let slot = usize::from(crc16(n.to_string().as_bytes()) % SLOTS);
            if tags[slot] == u32::MAX {
                tags[slot] = n;
                left -= 1;
            }
            n += 1;
        }
        tags
    })
}

/// The hash tag (a decimal string) that puts a key in `slot`; None for a slot ≥ 16384.
pub fn slot_tag(slot: u16) -> Option<String> {
    slot_tags().get(usize::from(slot)).map(|n| n.to_string())
}

/// The target slot of partition `index` of `partitions` for the logical name `name`: the name's
/// own slot plus ⌊index × 16384 / partitions⌋, modulo 16384, so partitions sit on evenly spaced
/// slots.
pub fn partition_slot(name: &[u8], index: u32, partitions: u32) -> u16 {
    let base = u64::from(key_slot(name));
    let step = u64::from(index) * u64::from(SLOTS) / u64::from(partitions.max(1));
    ((base + step) % u64::from(SLOTS)) as u16
}

/// The key of partition `index`: `{T}NAME/index`, where the tag T puts it in its
/// [`partition_slot`].
pub fn partition_key(name: &[u8], index: u32, partitions: u32) -> Vec<u8> {
    let slot = partition_slot(name, index, partitions);
    let tag = slot_tags()[usize::from(slot)];
    let mut key = Vec::with_capacity(name.len() + 16);
    key.push(b'{');
    key.extend_from_slice(tag.to_string().as_bytes());
    key.push(b'}');
    key.extend_from_slice(name);
    key.push(b'/');
    key.extend_from_slice(index.to_string().as_bytes());
    key
}

/// Every partition key of `name`, in order.
pub fn partition_keys(name: &[u8], partitions: u32) -> Vec<Vec<u8>> {
    (0..partitions)
        .map(|i| partition_key(name, i, partitions))
        .collect()
}

/// The capacity each of `partitions` partitions is created with for `items` items in all:
/// ⌈items / P⌉, and for NONSCALING partitions six standard deviations of the binomial spread
/// more, plus one, so that loading exactly `items` random items never fills one.
pub fn partition_capacity(items: u64, partitions: u32, nonscaling: bool) -> u64 {
    let p = u64::from(partitions.max(1));
    if !nonscaling {
        return items.div_ceil(p);
    }
    let n = items as f64;
    let q = 1.0 / p as f64;
    let spread = 6.0 * (n * q * (1.0 - q)).sqrt();
    (n / p as f64 + spread).ceil() as u64 + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_of_the_redis_docs() {
        assert_eq!(key_slot(b"somekey"), 11058);
        assert_eq!(key_slot(b"foo{hash_tag}"), 2515);
        assert_eq!(key_slot(b"hash_tag"), 2515);
        // An empty tag hashes the whole key.
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
