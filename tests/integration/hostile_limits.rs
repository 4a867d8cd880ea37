//! Hostile input, memory limits: filters far over `bf.max-filter-bytes`, growth that
//! breaks the cap or the layer limit, LOADCHUNK headers that claim huge sizes (with a correct
//! checksum), and the same under a tight `maxmemory`. Every bomb must get an error reply naming
//! the limit, leave no key behind and take no memory; the test ends with the checks of
//! [`Barrage::finish`].

use redis::{Connection, Value};
use rustbloom_testkit::hostile::*;
use rustbloom_testkit::payload::{build_header, fix_xxh3, put};
use rustbloom_testkit::*;

#[test]
fn memory_bombs_are_refused() {
    let mut cx = Barrage::start();
    memory_bombs(&mut cx);
    // Refusals by limits were counted.
    let stats = info_section(&mut cx.c, "bf");
    assert!(
        stats.contains("bf_refused_by_limits:") && !stats.contains("bf_refused_by_limits:0\r"),
        "bf_refused_by_limits not counted:\n{stats}"
    );
    cx.finish();
}

fn assert_limit_error(e: &str, what: &str) {
    assert!(
        e.starts_with("ERR filter would use ") || e.starts_with("ERR filter needs "),
        "{what}: not a limit error: {e}"
    );
    if e.starts_with("ERR filter would use ") {
        assert!(
            e.contains("bf.max-filter-bytes"),
            "{what}: says how to raise: {e}"
        );
    } else {
        assert!(e.contains("maxmemory"), "{what}: names maxmemory: {e}");
    }
}

/// Adds distinct items in batches until a reply carries an error; returns it.
fn add_until_error(c: &mut Connection, key: &str, prefix: &str, max: usize) -> String {
    let mut n = 0;
    while n < max {
        let mut args: Vec<Vec<u8>> = vec![b"BF.MADD".to_vec(), key.as_bytes().to_vec()];
        for i in n..n + 1000 {
            args.push(format!("{prefix}:{i}").into_bytes());
        }
        n += 1000;
        let refs: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
        let v = call(c, &refs).unwrap_or_else(|e| panic!("BF.MADD {key}: {e}"));
        for x in as_array(v) {
            if let Value::ServerError(e) = x {
                return server_err_text(&e);
            }
        }
    }
    panic!("{key}: no error after {max} items");
}

fn memory_bombs(cx: &mut Barrage) {
    let c = &mut cx.c;
    assert_eq!(
        config_get(c, "bf.max-filter-bytes"),
        DEFAULT_CAP.to_string()
    );
    assert_eq!(config_get(c, "maxmemory"), "0");

    // Creations far over the default per-filter cap (1 GiB): 6.6 GB, 45 GB, 1.3 GB.
    let bombs: &[&[&str]] = &[
        &["BF.RESERVE", "bomb", "1e-10", "1073741824"],
        &["BF.RESERVE", "bomb", "1e-70", "1073741824"],
        &["BF.RESERVE", "bomb", "0.01", "1073741824"],
        &["BF.RESERVE", "bomb", "1e-10", "1073741824", "NONSCALING"],
        &[
            "BF.RESERVE",
            "bomb",
            "1e-10",
            "1073741824",
            "EXPANSION",
            "32768",
        ],
        &[
            "BF.INSERT",
            "bomb",
            "CAPACITY",
            "1073741824",
            "ERROR",
            "1e-10",
            "ITEMS",
            "x",
        ],
        &[
            "BF.INSERT",
            "bomb",
            "ERROR",
            "1e-12",
            "CAPACITY",
            "1000000000",
            "ITEMS",
            "a",
            "b",
        ],
    ];
    for b in bombs {
        let e = must_errs(c, b);
        assert_limit_error(&e, &b.join(" "));
        assert_no_key(c, "bomb");
    }
    // Error rates too small to size at all.
    for rate in [
        "1e-300",
        "4.9e-324",
        "2.2250738585072014e-308",
        "1e-100",
        "1e-77",
    ] {
        for cap in ["1", "1000", "1073741824"] {
            let e = must_errs(c, &["BF.RESERVE", "bomb", rate, cap]);
            assert!(
                e == "ERR error rate too small for a Bloom filter"
                    || e.starts_with("ERR filter would use"),
                "RESERVE {rate} {cap}: {e}"
            );
            assert_no_key(c, "bomb");
            must_errs(
                c,
                &[
                    "BF.INSERT",
                    "bomb",
                    "ERROR",
                    rate,
                    "CAPACITY",
                    cap,
                    "ITEMS",
                    "x",
                ],
            );
            assert_no_key(c, "bomb");
        }
    }
    cx_mem(c, cx.baseline, 4 * MIB, "after creation bombs");

    // Growth bombs: a full first layer whose successor (32768× its capacity) breaks the cap.
    raw_ok(
        c,
        &["BF.RESERVE", "grow", "0.01", "50000", "EXPANSION", "32768"],
    );
    let e = add_until_error(c, "grow", "g", 60_000);
    assert_limit_error(&e, "EXPANSION 32768 growth");
    let i = info(c, "grow");
    assert_eq!(
        (i.filters, i.items, i.capacity),
        (1, 50_000, 50_000),
        "grow after refusal"
    );
    // The refused add is refused again, and the filter still answers. The item is one the full
    // filter answers absent for: a fixed one is a false positive (answered 0, no growth) in
    // about one random seed of a hundred.
    let absent = (0..)
        .map(|k| format!("one-more-{k}"))
        .find(|item| call(c, &[b"BF.EXISTS", b"grow", item.as_bytes()]) == Ok(Value::Int(0)))
        .expect("an absent item");
    let e = must_errs(c, &["BF.ADD", "grow", &absent]);
    assert_limit_error(&e, "BF.ADD on a full grow");
    assert_eq!(info(c, "grow"), i);
    call(c, &[b"DEL", b"grow"]).unwrap();

    // Expansion 1 runs into the layer limit (64) instead.
    raw_ok(c, &["BF.RESERVE", "thin", "0.5", "1", "EXPANSION", "1"]);
    let e = add_until_error(c, "thin", "t", 20_000);
    assert!(e.starts_with("ERR filter cannot grow any further"), "{e}");
    assert_eq!(info(c, "thin").filters, 64);
    call(c, &[b"DEL", b"thin"]).unwrap();

    // LOADCHUNK headers that claim huge sizes, with a correct checksum. Start from the real
    // header of a one-layer filter and rewrite its fields.
    raw_ok(c, &["BF.RESERVE", "one", "0.01", "1000", "SEED", "1"]);
    let (real, _) = scandump_raw(c, "one");
    call(c, &[b"DEL", b"one"]).unwrap();
    let claim = |bytes: u64, items: u64| {
        let mut h = real.clone();
        put(&mut h, 48 + 8, 8, bytes * 8); // layer 0 bits
        put(&mut h, 48, 8, items);
        put(&mut h, 40, 8, bytes); // loaded = total: a complete filter's transfer header
        fix_xxh3(&mut h);
        h
    };
    let two_gib = claim(2 << 30, 0);
    let pib = claim(1 << 50, 0);
    let near_max = claim((u64::MAX - 63) / 8, 0);
    let cap_plus_one = claim(DEFAULT_CAP + 8, 0);
    // Many layers whose sizes add past 2^64: corrupt, never an overflow.
    let overflow = build_header(
        false,
        1,
        0.01,
        1,
        1,
        0,
        &(0..16)
            .map(|i| (if i == 15 { 0 } else { 1 }, u64::MAX - 63, 1))
            .collect::<Vec<_>>(),
    );

    let limit_only = |c: &mut Connection, h: &[u8], what: &str| {
        let e = must_err(c, &[b"BF.LOADCHUNK", b"bomb", b"1", h]);
        assert_limit_error(&e, what);
        assert_no_key(c, "bomb");
    };
    // maxmemory unset, default cap.
    for (h, what) in [
        (&two_gib, "2 GiB"),
        (&pib, "1 PiB"),
        (&near_max, "2^61"),
        (&cap_plus_one, "cap+8"),
    ] {
        limit_only(c, h, what);
    }
    must_err_eq(c, &[b"BF.LOADCHUNK", b"bomb", b"1", &overflow], BAD_DATA);
    assert_no_key(c, "bomb");
    // Cap raised to the maximum, maxmemory unset: only the machine's memory limits; 1 PiB and
    // more can never be available.
    config_set(c, "bf.max-filter-bytes", &i64::MAX.to_string());
    for (h, what) in [(&pib, "1 PiB, no cap"), (&near_max, "2^61, no cap")] {
        let e = must_err(c, &[b"BF.LOADCHUNK", b"bomb", b"1", h]);
        assert!(e.starts_with("ERR filter needs "), "{what}: {e}");
        assert_no_key(c, "bomb");
    }
    let e = must_errs(c, &["BF.RESERVE", "bomb", "1e-76", "1073741824"]);
    assert!(
        e.starts_with("ERR filter needs ") || e.starts_with("ERR error rate too small"),
        "{e}"
    );
    assert_no_key(c, "bomb");
    // maxmemory set a little above what is used: everything bigger than the headroom is refused
    // with the maxmemory message, whatever the cap says.
    let used = used_memory(c);
    config_set(c, "maxmemory", &(used + 64 * MIB).to_string());
    for (h, what) in [
        (&two_gib, "2 GiB, maxmemory"),
        (&pib, "1 PiB, maxmemory"),
        (&near_max, "2^61, maxmemory"),
    ] {
        let e = must_err(c, &[b"BF.LOADCHUNK", b"bomb", b"1", h]);
        assert!(e.starts_with("ERR filter needs "), "{what}: {e}");
        assert!(e.contains("maxmemory"), "{what}: {e}");
        assert_no_key(c, "bomb");
    }
    let e = must_err(c, &[b"BF.LOADCHUNK", b"bomb", b"1", &claim(128 * MIB, 0)]);
    assert!(
        e.starts_with("ERR filter needs "),
        "128 MiB under 64 MiB headroom: {e}"
    );
    assert_no_key(c, "bomb");
    for b in [
        &["BF.RESERVE", "bomb", "1e-10", "1073741824"][..],
        &["BF.RESERVE", "bomb", "0.001", "100000000"],
        &["BF.INSERT", "bomb", "CAPACITY", "100000000", "ITEMS", "x"],
    ] {
        let e = must_errs(c, b);
        assert!(
            e.starts_with("ERR filter needs ") || e.starts_with("OOM"),
            "{b:?}: {e}"
        );
        assert_no_key(c, "bomb");
    }
    // Under the headroom: admitted, and it really takes the memory it claims.
    raw_ok(c, &["BF.RESERVE", "fits", "0.01", "1000000"]);
    // Growth refused by maxmemory: the second layer (65.5M items at 0.25%, ~100 MB) is under
    // the raised cap but over the headroom (~60 MiB).
    raw_ok(
        c,
        &["BF.RESERVE", "grow2", "0.01", "2000", "EXPANSION", "32768"],
    );
    let e = add_until_error(c, "grow2", "h", 3_000);
    assert!(
        e.starts_with("ERR filter needs "),
        "growth under maxmemory: {e}"
    );
    assert_eq!(info(c, "grow2").filters, 1);
    // Over maxmemory altogether: Redis refuses deny-oom commands itself.
    let half = used_memory(c) / 2;
    config_set(c, "maxmemory", &half.to_string());
    let e = call(c, &[b"BF.ADD", b"fits", b"x"]).unwrap_err();
    assert!(e.starts_with("OOM "), "{e}");
    let e = call(c, &[b"BF.LOADCHUNK", b"bomb", b"1", &real]).unwrap_err();
    assert!(e.starts_with("OOM "), "{e}");
    assert_no_key(c, "bomb");
    config_set(c, "maxmemory", "0");
    call(c, &[b"DEL", b"fits", b"grow2"]).unwrap();
    config_set(c, "bf.max-filter-bytes", &DEFAULT_CAP.to_string());
    cx_mem(c, cx.baseline, 4 * MIB, "after memory bombs");
}

#[track_caller]
fn cx_mem(c: &mut Connection, baseline: u64, extra: u64, phase: &str) {
    let used = used_memory(c);
    assert!(
        used <= baseline + extra,
        "{phase}: used_memory {used} exceeds baseline {baseline} + {extra}"
    );
}
