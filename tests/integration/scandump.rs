//! BF.SCANDUMP / BF.LOADCHUNK: round trips and error handling.
use redis::{Connection, Value};
use rustbloom_testkit::*;

const LOADING: &str = "ERR filter is being loaded by BF.LOADCHUNK";

fn loadchunk(c: &mut Connection, key: &str, it: i64, data: &[u8]) -> Result<Value, String> {
    let k = key.as_bytes();
    let its = it.to_string();
    rawb(c, &[b"BF.LOADCHUNK", k, its.as_bytes(), data])
}

/// A big single-layer filter: 10M items at 0.001 needs ~18 MB of bits (> one 16 MiB chunk).
fn make_big(c: &mut Connection, key: &str) -> Vec<String> {
    raw_ok(c, &["BF.RESERVE", key, "0.001", "10000000"]);
    let its = items("big", 5000);
    madd_all(c, key, &its);
    its
}

#[test]
fn big_filter_roundtrip_same_server() {
    let s = Server::start();
    let mut c = s.conn();
    let its = make_big(&mut c, "src");
    let chunks = scandump(&mut c, "src");
    assert_eq!(
        chunks[0].0, 1,
        "first reply carries iterator 1 and the header"
    );
    assert!(
        chunks.len() >= 3,
        "expected header + >= 2 data chunks, got {} chunks",
        chunks.len()
    );
    for (_, d) in &chunks {
        assert!(
            d.len() <= 16 * 1024 * 1024 + 4096,
            "chunk of {} bytes exceeds 16 MiB",
            d.len()
        );
        assert!(!d.is_empty());
    }
    let total: usize = chunks.iter().map(|(_, d)| d.len()).sum();
    let i = info(&mut c, "src");
    assert!(
        total as i64 >= i.size * 9 / 10 - 4096,
        "dump ({total} bytes) is smaller than the filter ({})",
        i.size
    );
    loadchunks(&mut c, "dst", &chunks);
    assert_eq!(info(&mut c, "src"), info(&mut c, "dst"));
    assert_all_exist(&mut c, "dst", &its);
    assert_eq!(digest(&mut c, "src"), digest(&mut c, "dst"));
    // Dumping the copy gives the same bytes.
    let again = scandump(&mut c, "dst");
    assert_eq!(again.len(), chunks.len());
    assert!(
        again == chunks,
        "dump of the restored filter differs from the original dump"
    );
}

#[test]
fn roundtrip_to_second_server_multi_layer() {
    let a = Server::start();
    let b = Server::start();
    let mut ca = a.conn();
    let mut cb = b.conn();
    // Several layers, non-default expansion, and a non-scaling filter.
    raw_ok(
        &mut ca,
        &["BF.RESERVE", "k", "0.01", "100", "EXPANSION", "3"],
    );
    let its = items("ml", 3000);
    madd_all(&mut ca, "k", &its);
    assert!(info(&mut ca, "k").filters >= 3);
    raw_ok(&mut ca, &["BF.RESERVE", "ns", "0.02", "500", "NONSCALING"]);
    madd_all(&mut ca, "ns", &items("ns", 300));
    raw_ok(&mut ca, &["BF.ADD", "empty-ish", ""]);
    raw_ok(&mut ca, &["BF.RESERVE", "empty", "0.01", "100"]);
    for key in ["k", "ns", "empty-ish", "empty"] {
        let chunks = scandump(&mut ca, key);
        loadchunks(&mut cb, key, &chunks);
        assert_eq!(info(&mut ca, key), info(&mut cb, key), "{key}");
        assert_same_digest(&mut ca, key, &mut cb, key);
    }
    assert_all_exist(&mut cb, "k", &its);
    assert_all_exist(&mut cb, "ns", &items("ns", 300));
    // Behaviour continues identically: same answers for new adds.
    let more = items("more", 500);
    let ra = madd_all(&mut ca, "k", &more);
    let rb = madd_all(&mut cb, "k", &more);
    assert_eq!(ra, rb);
    assert_same_digest(&mut ca, "k", &mut cb, "k");
}

#[test]
fn big_filter_roundtrip_to_second_server() {
    let a = Server::start();
    let b = Server::start();
    let mut ca = a.conn();
    let mut cb = b.conn();
    let its = make_big(&mut ca, "big");
    let chunks = scandump(&mut ca, "big");
    assert!(chunks.len() >= 3);
    loadchunks(&mut cb, "big2", &chunks);
    assert_eq!(info(&mut ca, "big"), info(&mut cb, "big2"));
    assert_all_exist(&mut cb, "big2", &its);
    assert_eq!(digest(&mut ca, "big"), digest(&mut cb, "big2"));
}

#[test]
fn data_chunk_into_complete_filter_is_refused() {
    let s = Server::start();
    let mut c = s.conn();
    raw_ok(&mut c, &["BF.RESERVE", "src", "0.01", "1000"]);
    madd_all(&mut c, "src", &items("a", 500));
    let chunks = scandump(&mut c, "src");
    assert!(chunks.len() >= 2);
    // Into the source itself (complete).
    let d = digest(&mut c, "src");
    let (it, data) = &chunks[1];
    assert_eq!(
        loadchunk(&mut c, "src", *it, data),
        Err("ERR invalid offset - no link found".to_string())
    );
    assert_eq!(d, digest(&mut c, "src"));
    // Into a completely loaded copy.
    loadchunks(&mut c, "dst", &chunks);
    let d2 = digest(&mut c, "dst");
    assert_eq!(
        loadchunk(&mut c, "dst", *it, data),
        Err("ERR invalid offset - no link found".to_string())
    );
    assert_eq!(d2, digest(&mut c, "dst"));
    // Into a different complete filter (default one).
    raw_ok(&mut c, &["BF.ADD", "other", "x"]);
    let d3 = digest(&mut c, "other");
    assert!(
        loadchunk(&mut c, "other", *it, data).is_err(),
        "data chunk into a foreign complete filter must fail"
    );
    assert_eq!(d3, digest(&mut c, "other"));
    // Into a missing key: refused as RedisBloom does, no key.
    assert_eq!(
        loadchunk(&mut c, "missing", *it, data),
        Err("ERR not found".to_string())
    );
    assert_no_key(&mut c, "missing");
}

/// Iterator 1 (a header) onto a key that exists, complete or being loaded: RedisBloom's reply.
#[test]
fn header_onto_existing_key() {
    let s = Server::start();
    let mut c = s.conn();
    raw_ok(&mut c, &["BF.MADD", "src", "a", "b"]);
    raw_ok(&mut c, &["BF.ADD", "existing", "z"]);
    let chunks = scandump(&mut c, "src");
    let d = digest(&mut c, "existing");
    assert_eq!(
        loadchunk(&mut c, "existing", chunks[0].0, &chunks[0].1),
        Err("ERR received bad data".to_string())
    );
    assert_eq!(d, digest(&mut c, "existing"));
    assert_eq!(
        loadchunk(&mut c, "src", chunks[0].0, &chunks[0].1),
        Err("ERR received bad data".to_string())
    );
    // Header onto a key whose own load is in progress.
    assert_eq!(
        loadchunk(&mut c, "loading", chunks[0].0, &chunks[0].1),
        Ok(Value::Okay)
    );
    assert_eq!(
        loadchunk(&mut c, "loading", chunks[0].0, &chunks[0].1),
        Err("ERR received bad data".to_string())
    );
}

#[test]
fn bad_header_is_refused_and_creates_nothing() {
    let s = Server::start();
    let mut c = s.conn();
    raw_ok(
        &mut c,
        &["BF.RESERVE", "src", "0.01", "1000", "EXPANSION", "3"],
    );
    madd_all(&mut c, "src", &items("a", 1500));
    let chunks = scandump(&mut c, "src");
    let header = chunks[0].1.clone();
    let bad = "ERR received bad data";
    // Truncations.
    for cut in [0, 1, header.len() / 2, header.len() - 1] {
        assert_eq!(
            loadchunk(&mut c, "k", 1, &header[..cut]),
            Err(bad.to_string()),
            "header cut at {cut}"
        );
        assert_no_key(&mut c, "k");
    }
    // Extra trailing byte.
    let mut longer = header.clone();
    longer.push(0);
    assert_eq!(
        loadchunk(&mut c, "k", 1, &longer),
        Err(bad.to_string()),
        "header with trailing byte"
    );
    assert_no_key(&mut c, "k");
    // Every single-byte mutation (flip all bits of one byte) must be detected.
    for pos in 0..header.len() {
        let mut m = header.clone();
        m[pos] ^= 0xff;
        assert_eq!(
            loadchunk(&mut c, "k", 1, &m),
            Err(bad.to_string()),
            "header byte {pos} mutated"
        );
        assert_no_key(&mut c, "k");
    }
    // Garbage.
    assert_eq!(
        loadchunk(&mut c, "k", 1, b"hello world"),
        Err(bad.to_string())
    );
    assert_no_key(&mut c, "k");
    // The intact header still works afterwards.
    loadchunks(&mut c, "k", &chunks);
    assert_eq!(digest(&mut c, "src"), digest(&mut c, "k"));
}

#[test]
fn bad_data_chunk_is_refused() {
    let s = Server::start();
    let mut c = s.conn();
    raw_ok(&mut c, &["BF.RESERVE", "src", "0.01", "1000"]);
    madd_all(&mut c, "src", &items("a", 500));
    let chunks = scandump(&mut c, "src");
    assert_eq!(
        loadchunk(&mut c, "k", chunks[0].0, &chunks[0].1),
        Ok(Value::Okay)
    );
    let (it, data) = &chunks[1];
    // A corrupted data chunk is refused (checksummed format); the load stays pending.
    let mut m = data.clone();
    let mid = m.len() / 2;
    m[mid] ^= 0x01;
    let r = loadchunk(&mut c, "k", *it, &m);
    assert!(r.is_err(), "mutated data chunk accepted: {r:?}");
    let e = r.unwrap_err();
    assert!(
        e == "ERR received bad data" || e == "ERR invalid chunk - Too big for current filter",
        "unexpected error for a mutated chunk: {e:?}"
    );
    assert!(
        loadchunk(&mut c, "k", *it, &data[..data.len() / 2]).is_err(),
        "truncated chunk accepted"
    );
    // The correct chunks still complete the load.
    for (it, data) in &chunks[1..] {
        assert_eq!(loadchunk(&mut c, "k", *it, data), Ok(Value::Okay));
    }
    assert_eq!(digest(&mut c, "src"), digest(&mut c, "k"));
}

#[test]
fn chunk_past_end_is_refused() {
    let s = Server::start();
    let mut c = s.conn();
    raw_ok(&mut c, &["BF.RESERVE", "src", "0.01", "100"]);
    raw_ok(&mut c, &["BF.MADD", "src", "a", "b"]);
    let chunks = scandump(&mut c, "src");
    assert_eq!(
        loadchunk(&mut c, "k", chunks[0].0, &chunks[0].1),
        Ok(Value::Okay)
    );
    // A data chunk of a much bigger filter does not fit this one.
    raw_ok(&mut c, &["BF.RESERVE", "bigger", "0.0001", "100000"]);
    let bigger = scandump(&mut c, "bigger");
    let r = loadchunk(&mut c, "k", bigger[1].0, &bigger[1].1);
    assert!(r.is_err(), "chunk from a bigger filter accepted: {r:?}");
    let e = r.unwrap_err();
    assert!(
        [
            "ERR invalid chunk - Too big for current filter",
            "ERR received bad data",
            "ERR invalid offset - no link found"
        ]
        .contains(&e.as_str()),
        "unexpected error {e:?}"
    );
}

#[test]
fn incomplete_load_answers_loading_error() {
    let s = Server::start();
    let mut c = s.conn();
    raw_ok(&mut c, &["BF.RESERVE", "src", "0.01", "1000"]);
    let its = items("a", 800);
    madd_all(&mut c, "src", &its);
    let chunks = scandump(&mut c, "src");
    assert!(chunks.len() >= 2);
    assert_eq!(
        loadchunk(&mut c, "k", chunks[0].0, &chunks[0].1),
        Ok(Value::Okay)
    );
    assert!(exists(&mut c, "k"), "the header creates the key");
    assert_eq!(key_type(&mut c, "k"), "MBbloom--");
    let cmds: Vec<Vec<&str>> = vec![
        vec!["BF.ADD", "k", "a"],
        vec!["BF.EXISTS", "k", "a"],
        vec!["BF.MADD", "k", "a", "b"],
        vec!["BF.MEXISTS", "k", "a", "b"],
        vec!["BF.INSERT", "k", "ITEMS", "a"],
        vec!["BF.INSERT", "k", "NOCREATE", "ITEMS", "a"],
        vec!["BF.INFO", "k"],
        vec!["BF.INFO", "k", "CAPACITY"],
        vec!["BF.CARD", "k"],
        vec!["BF.SCANDUMP", "k", "0"],
        vec!["BF.RESERVE", "k", "0.01", "100"],
    ];
    for args in &cmds {
        let e = raw_err(&mut c, args);
        if args[0] == "BF.RESERVE" {
            // The key exists: either answer is acceptable for RESERVE.
            assert!(e == LOADING || e == "ERR item exists", "{args:?}: {e:?}");
        } else {
            assert_eq!(e, LOADING, "{args:?}");
        }
    }
    // Finish the load: everything works.
    loadchunks(&mut c, "k", &chunks[1..]);
    assert_all_exist(&mut c, "k", &its);
    assert_eq!(info(&mut c, "src"), info(&mut c, "k"));
    assert_eq!(digest(&mut c, "src"), digest(&mut c, "k"));
    // A load abandoned half-way can be deleted and redone.
    assert_eq!(
        loadchunk(&mut c, "k2", chunks[0].0, &chunks[0].1),
        Ok(Value::Okay)
    );
    let n: i64 = redis::cmd("DEL").arg("k2").query(&mut c).unwrap();
    assert_eq!(n, 1);
    loadchunks(&mut c, "k2", &chunks);
    assert_eq!(digest(&mut c, "src"), digest(&mut c, "k2"));
}

#[test]
fn multi_chunk_partial_load_still_loading() {
    let s = Server::start();
    let mut c = s.conn();
    let its = make_big(&mut c, "src");
    let chunks = scandump(&mut c, "src");
    assert!(chunks.len() >= 3);
    // Header + first data chunk only: still loading.
    loadchunks(&mut c, "k", &chunks[..2]);
    assert_eq!(raw_err(&mut c, &["BF.EXISTS", "k", "big:1"]), LOADING);
    assert_eq!(raw_err(&mut c, &["BF.ADD", "k", "x"]), LOADING);
    // Replaying the already loaded chunk is refused or harmless; the rest completes the load.
    let _ = loadchunk(&mut c, "k", chunks[1].0, &chunks[1].1);
    loadchunks(&mut c, "k", &chunks[2..]);
    assert_all_exist(&mut c, "k", &its);
    assert_eq!(digest(&mut c, "src"), digest(&mut c, "k"));
}

#[test]
fn loadchunk_iterator_zero_or_mismatched() {
    let s = Server::start();
    let mut c = s.conn();
    raw_ok(&mut c, &["BF.MADD", "src", "a", "b"]);
    let chunks = scandump(&mut c, "src");
    // A data chunk sent as the header is bad data / refused; no key.
    let r = loadchunk(&mut c, "k", 1, &chunks[1].1);
    assert!(r.is_err(), "data chunk accepted as a header: {r:?}");
    assert_no_key(&mut c, "k");
}
