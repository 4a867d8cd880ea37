//! The routing, key and sizing rules against `tests/fixtures/partitioning-vectors.json`, the
//! vectors every implementation of `docs/partitions.md` is tested with.

use rustbloom_client::routing::{
    key_slot, partition_capacity, partition_keys, partition_of, partition_slot, slot_tag,
};
use serde_json::Value;

fn vectors() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/fixtures/partitioning-vectors.json"
    );
    let text = std::fs::read_to_string(path).expect("read the vectors");
    serde_json::from_str(&text).expect("parse the vectors")
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

fn u64_of(v: &Value) -> u64 {
    match v {
        Value::String(s) => s.parse().expect("decimal"),
        v => v.as_u64().expect("integer"),
    }
}

#[test]
fn items_go_to_the_partitions_of_the_vectors() {
    let v = vectors();
    let cases = v["routing"].as_array().expect("routing vectors");
    assert!(cases.len() > 100);
    for case in cases {
        let item = hex(case["item_hex"].as_str().unwrap());
        let seed = u64_of(&case["routing_seed"]);
        let p = u64_of(&case["partitions"]) as u32;
        assert_eq!(
            xxhash_of(&item, seed),
            u64_of(&case["xxh3_64"]),
            "xxh3 of {case}"
        );
        assert_eq!(
            u64::from(partition_of(&item, seed, p)),
            u64_of(&case["partition"]),
            "partition of {case}"
        );
    }
}

fn xxhash_of(item: &[u8], seed: u64) -> u64 {
    xxhash_rust::xxh3::xxh3_64_with_seed(item, seed)
}

#[test]
fn partition_keys_and_slots_of_the_vectors() {
    let v = vectors();
    for case in v["keys"].as_array().expect("key vectors") {
        let name = case["name"].as_str().unwrap().as_bytes();
        let p = u64_of(&case["partitions"]) as u32;
        assert_eq!(
            u64::from(key_slot(name)),
            u64_of(&case["name_slot"]),
            "{case}"
        );
        let want: Vec<Vec<u8>> = case["keys"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| k.as_str().unwrap().as_bytes().to_vec())
            .collect();
        assert_eq!(partition_keys(name, p), want, "keys of {case}");
        for (i, slot) in case["slots"].as_array().unwrap().iter().enumerate() {
            let i = i as u32;
            assert_eq!(u64::from(partition_slot(name, i, p)), u64_of(slot));
            assert_eq!(u64::from(key_slot(&want[i as usize])), u64_of(slot));
        }
    }
}

#[test]
fn slot_tags_of_the_vectors() {
    let v = vectors();
    for case in v["slot_tags"].as_array().expect("tag vectors") {
        let slot = u64_of(&case["slot"]) as u16;
        assert_eq!(slot_tag(slot).as_deref(), case["tag"].as_str(), "{case}");
    }
}

#[test]
fn partition_capacities_of_the_vectors() {
    let v = vectors();
    for case in v["capacity"].as_array().expect("capacity vectors") {
        assert_eq!(
            partition_capacity(
                u64_of(&case["items"]),
                u64_of(&case["partitions"]) as u32,
                case["nonscaling"].as_bool().unwrap()
            ),
            u64_of(&case["partition_capacity"]),
            "{case}"
        );
    }
}
