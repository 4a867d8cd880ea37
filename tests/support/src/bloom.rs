//! Bloom filter helpers: parsed BF.INFO, SCANDUMP/LOADCHUNK round trips, bulk adds and checks.

use redis::{Connection, Value};

use crate::reply::{as_array, as_int, err_text, raw, rawb, value_to_string};

/// BF.INFO as (name, value) pairs, from either RESP2 (flat array) or RESP3 (map).
#[track_caller]
pub fn info_pairs(v: Value) -> Vec<(String, Value)> {
    match v {
        Value::Array(a) => {
            assert!(a.len() % 2 == 0, "flat BF.INFO array has odd length: {a:?}");
            a.chunks(2)
                .map(|p| (value_to_string(&p[0]), p[1].clone()))
                .collect()
        }
        Value::Map(m) => m
            .into_iter()
            .map(|(k, v)| (value_to_string(&k), v))
            .collect(),
        other => panic!("unexpected BF.INFO reply {other:?}"),
    }
}

/// Parsed BF.INFO.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Info {
    pub capacity: i64,
    pub size: i64,
    pub filters: i64,
    pub items: i64,
    /// None for non-scaling filters (nil).
    pub expansion: Option<i64>,
}

#[track_caller]
pub fn info(c: &mut Connection, key: impl AsRef<[u8]>) -> Info {
    let key = key.as_ref();
    let v = rawb(c, &[b"BF.INFO", key])
        .unwrap_or_else(|e| panic!("BF.INFO {}: {e}", String::from_utf8_lossy(key)));
    let pairs = info_pairs(v);
    let names: Vec<&str> = pairs.iter().map(|(n, _)| n.as_str()).collect();
    // RedisBloom's five fields; a valkey-bloom object adds valkey-bloom's three after them.
    let redisbloom = [
        "Capacity",
        "Size",
        "Number of filters",
        "Number of items inserted",
        "Expansion rate",
    ];
    let valkey_bloom = ["Error rate", "Tightening ratio", "Max scaled capacity"];
    assert!(
        names == redisbloom || names == [redisbloom.as_slice(), &valkey_bloom].concat(),
        "BF.INFO fields {names:?}"
    );
    let get = |i: usize| -> Option<i64> {
        match &pairs[i].1 {
            Value::Nil => None,
            v => Some(as_int(v)),
        }
    };
    Info {
        capacity: get(0).unwrap(),
        size: get(1).unwrap(),
        filters: get(2).unwrap(),
        items: get(3).unwrap(),
        expansion: get(4),
    }
}

/// Full SCANDUMP of a key: the list of (iterator, data) chunks, header first, excluding the
/// terminating `[0, ""]`.
#[track_caller]
pub fn scandump(c: &mut Connection, key: &str) -> Vec<(i64, Vec<u8>)> {
    let mut out = Vec::new();
    let mut it: i64 = 0;
    for _ in 0..100_000 {
        let v = raw(
            c,
            &["BF.SCANDUMP".to_string(), key.to_string(), it.to_string()],
        )
        .unwrap_or_else(|e| panic!("BF.SCANDUMP {key} {it}: {e}"));
        let a = as_array(v);
        assert_eq!(a.len(), 2, "SCANDUMP reply must have 2 elements");
        let next = as_int(&a[0]);
        let data = match &a[1] {
            Value::BulkString(b) => b.clone(),
            other => panic!("SCANDUMP data is not a bulk string: {other:?}"),
        };
        if next == 0 {
            assert!(
                data.is_empty(),
                "final SCANDUMP reply must carry empty data"
            );
            return out;
        }
        out.push((next, data));
        it = next;
    }
    panic!("SCANDUMP of {key} did not terminate");
}

/// Replay chunks with BF.LOADCHUNK into `key`.
#[track_caller]
pub fn loadchunks(c: &mut Connection, key: &str, chunks: &[(i64, Vec<u8>)]) {
    for (it, data) in chunks {
        let r = redis::cmd("BF.LOADCHUNK")
            .arg(key)
            .arg(*it)
            .arg(data.as_slice())
            .query::<Value>(c);
        match r {
            Ok(v) => assert_eq!(v, Value::Okay, "LOADCHUNK {key} {it}"),
            Err(e) => panic!(
                "BF.LOADCHUNK {key} {it} ({} bytes): {}",
                data.len(),
                err_text(&e)
            ),
        }
    }
}

/// Deterministic distinct items `prefix:0`, `prefix:1`, ...
pub fn items(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}:{i}")).collect()
}

/// Add items with BF.MADD in batches; returns the number of 1s.
pub fn madd_all(c: &mut Connection, key: &str, items: &[String]) -> usize {
    let mut new = 0;
    for batch in items.chunks(1000) {
        let mut cmd = redis::cmd("BF.MADD");
        cmd.arg(key);
        for i in batch {
            cmd.arg(i);
        }
        let r: Vec<i64> = cmd
            .query(c)
            .unwrap_or_else(|e| panic!("BF.MADD {key}: {}", err_text(&e)));
        assert_eq!(r.len(), batch.len());
        new += r.iter().filter(|&&x| x == 1).count();
    }
    new
}

/// Assert every item is reported present (no false negatives), checking in MEXISTS batches.
#[track_caller]
pub fn assert_all_exist(c: &mut Connection, key: &str, items: &[String]) {
    for batch in items.chunks(1000) {
        let mut cmd = redis::cmd("BF.MEXISTS");
        cmd.arg(key);
        for i in batch {
            cmd.arg(i);
        }
        let r: Vec<i64> = cmd
            .query(c)
            .unwrap_or_else(|e| panic!("BF.MEXISTS {key}: {}", err_text(&e)));
        for (i, x) in batch.iter().zip(r) {
            assert_eq!(x, 1, "false negative: {i} not in {key}");
        }
    }
}

/// Compare two BF.INFO results: every field but Size first, then Size (so a Size-only difference
/// is reported as such).
#[track_caller]
pub fn assert_info_eq(a: &Info, b: &Info, what: &str) {
    let strip = |i: &Info| Info {
        size: 0,
        ..i.clone()
    };
    assert_eq!(strip(a), strip(b), "BF.INFO differs ({what})");
    assert_eq!(
        a.size, b.size,
        "BF.INFO Size differs ({what}): {a:?} vs {b:?}"
    );
}
