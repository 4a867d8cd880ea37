//! The keyspace and the server as seen by a client: key existence and type, `DEBUG DIGEST`,
//! `INFO` sections.

use redis::{Connection, Value};

use crate::reply::value_to_string;

pub fn exists(c: &mut Connection, key: &str) -> bool {
    let n: i64 = redis::cmd("EXISTS").arg(key).query(c).unwrap();
    n == 1
}

#[track_caller]
pub fn assert_no_key(c: &mut Connection, key: &str) {
    assert!(
        !exists(c, key),
        "key {key:?} should not exist after a failed command"
    );
}

pub fn key_type(c: &mut Connection, key: &str) -> String {
    redis::cmd("TYPE").arg(key).query(c).unwrap()
}

/// `DEBUG DIGEST-VALUE key` as a hex string.
pub fn digest(c: &mut Connection, key: &str) -> String {
    let v: Value = redis::cmd("DEBUG")
        .arg("DIGEST-VALUE")
        .arg(key)
        .query(c)
        .unwrap_or_else(|e| panic!("DEBUG DIGEST-VALUE {key}: {e}"));
    match v {
        Value::Array(items) if items.len() == 1 => value_to_string(&items[0]),
        other => value_to_string(&other),
    }
}

/// `DEBUG DIGEST` of the whole dataset.
pub fn dataset_digest(c: &mut Connection) -> String {
    let v: Value = redis::cmd("DEBUG").arg("DIGEST").query(c).unwrap();
    value_to_string(&v)
}

#[track_caller]
pub fn assert_same_digest(a: &mut Connection, ka: &str, b: &mut Connection, kb: &str) {
    let da = digest(a, ka);
    let db = digest(b, kb);
    assert_ne!(
        da, "0000000000000000000000000000000000000000",
        "digest of {ka} is zero (missing key?)"
    );
    assert_eq!(da, db, "DEBUG DIGEST-VALUE differs: {ka} vs {kb}");
}

/// `INFO <section>` as text.
pub fn info_section(c: &mut Connection, section: &str) -> String {
    redis::cmd("INFO").arg(section).query(c).unwrap()
}

/// Value of `name:` in an INFO text.
pub fn info_field(info: &str, name: &str) -> Option<String> {
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .map(|s| s.trim().to_string())
}

/// Every key, sorted.
pub fn all_keys(c: &mut Connection) -> Vec<Vec<u8>> {
    let mut k: Vec<Vec<u8>> = redis::cmd("KEYS").arg("*").query(c).unwrap();
    k.sort();
    k
}

/// `used_memory` from INFO memory.
pub fn used_memory(c: &mut Connection) -> u64 {
    info_field(&info_section(c, "memory"), "used_memory")
        .and_then(|v| v.parse().ok())
        .expect("used_memory in INFO memory")
}

/// `MEMORY USAGE key`, of a key that exists.
#[track_caller]
pub fn memory_usage(c: &mut Connection, key: &str) -> u64 {
    redis::cmd("MEMORY")
        .arg("USAGE")
        .arg(key)
        .query(c)
        .unwrap_or_else(|e| panic!("MEMORY USAGE {key}: {e}"))
}
