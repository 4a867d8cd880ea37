//! Admission under maxmemory follows the eviction policy: under `noeviction` a filter must fit in
//! what maxmemory leaves; under an evicting policy Redis' own rule applies (a write is refused
//! only when memory cannot be freed: the server evicts other keys to make room), bounded by
//! maxmemory itself and by `bf.max-filter-bytes`.

use std::time::Duration;

use redis::Connection;
use rustbloom_testkit::*;

const MIB: u64 = 1 << 20;
/// Bytes of each string key that fills the server before a filter is reserved.
const VALUE_BYTES: usize = 100_000;

/// A server with maxmemory set 8 MiB above what it uses, under `policy`, then filled with
/// string keys until about 2 MiB are left (with a TTL under a `volatile-*` policy, so that
/// they are the ones it may evict).
fn nearly_full(policy: &str) -> (Server, u64) {
    let s = Server::start();
    let mut c = s.conn();
    let maxmemory = used_memory(&mut c) + 8 * MIB;
    raw_ok(&mut c, &["CONFIG", "SET", "maxmemory-policy", policy]);
    raw_ok(
        &mut c,
        &["CONFIG", "SET", "maxmemory", &maxmemory.to_string()],
    );
    let value = "v".repeat(VALUE_BYTES);
    let mut n = 0;
    while used_memory(&mut c) + 2 * MIB < maxmemory {
        let key = format!("s{n}");
        if policy.starts_with("volatile-") {
            raw_ok(&mut c, &["SET", &key, &value, "EX", "3600"]);
        } else {
            raw_ok(&mut c, &["SET", &key, &value]);
        }
        n += 1;
    }
    (s, maxmemory)
}

fn evicted_keys(c: &mut Connection) -> u64 {
    info_field(&info_section(c, "stats"), "evicted_keys")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// A reservation of about 3.6 MB: more than is left, less than maxmemory.
const RESERVE: [&str; 4] = ["BF.RESERVE", "f", "0.01", "3000000"];

#[test]
fn under_noeviction_a_filter_must_fit_in_what_maxmemory_leaves() {
    let (s, _) = nearly_full("noeviction");
    let mut c = s.conn();
    let refusal = raw_err(&mut c, &RESERVE);
    assert!(refusal.contains("can be allocated"), "{refusal}");
    assert_no_key(&mut c, "f");
    assert_eq!(evicted_keys(&mut c), 0);
}

/// Reserves [`RESERVE`] under `policy`: admitted, and the server then evicts until it is
/// within maxmemory again.
fn admitted_under(policy: &str) -> Server {
    let (s, maxmemory) = nearly_full(policy);
    let mut c = s.conn();
    raw_ok(&mut c, &RESERVE);
    // The server evicts before its next commands, as after any write past maxmemory.
    let settled = wait_until(Duration::from_secs(30), || {
        raw_ok(&mut c, &["PING"]);
        used_memory(&mut c) <= maxmemory
    });
    assert!(settled, "{policy}: used_memory stayed above maxmemory");
    assert!(evicted_keys(&mut c) > 0, "{policy}: nothing evicted");
    s
}

#[test]
fn under_allkeys_lru_a_filter_within_maxmemory_is_admitted_and_keys_evicted() {
    let s = admitted_under("allkeys-lru");
    let mut c = s.conn();
    // A filter bigger than maxmemory itself: no eviction can make room for it.
    let refusal = raw_err(&mut c, &["BF.RESERVE", "huge", "0.01", "10000000"]);
    assert!(refusal.contains("more than maxmemory"), "{refusal}");
    assert_no_key(&mut c, "huge");
    // Nor one above the per-filter cap.
    raw_ok(&mut c, &["CONFIG", "SET", "bf.max-filter-bytes", "1mb"]);
    let refusal = raw_err(&mut c, &["BF.RESERVE", "g", "0.01", "3000000"]);
    assert!(refusal.contains("per-filter limit"), "{refusal}");
    assert_no_key(&mut c, "g");
}

#[test]
fn under_volatile_lru_the_expiring_keys_make_room_for_the_filter() {
    let s = admitted_under("volatile-lru");
    let mut c = s.conn();
    assert!(memory_usage(&mut c, "f") > 2 * MIB);
    assert_eq!(as_int(&raw_ok(&mut c, &["BF.ADD", "f", "item"])), 1);
}
