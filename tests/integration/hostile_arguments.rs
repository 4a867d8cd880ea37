//! Hostile arguments: weird numbers for every numeric argument, broken option lists,
//! bad config values, and thousands of random commands. Every bad request must get an error
//! reply, no failed command may leave a key behind, and each test ends with the checks of
//! [`Barrage::finish`].

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use redis::Connection;
use rustbloom_testkit::hostile::*;
use rustbloom_testkit::*;

#[test]
fn weird_numbers_are_refused() {
    run(weird_numbers);
}

#[test]
fn bad_config_values_are_refused() {
    run(bad_configs);
}

#[test]
fn random_commands_get_error_replies() {
    run(random_commands);
}

// ---- Weird numbers --------------------------------------------------------------------------

fn weird_numbers(cx: &mut Barrage) {
    let c = &mut cx.c;
    let mut n = 0;
    let mut fresh = || {
        n += 1;
        format!("w:{n}")
    };
    let float_junk: &[&str] = &[
        "nan",
        "NaN",
        "-nan",
        "inf",
        "-inf",
        "+inf",
        "infinity",
        "Infinity",
        "1e309",
        "-1e309",
        "",
        " ",
        " 0.01",
        "0.01 ",
        "\t0.01",
        "0.01\n",
        "0x0.1",
        "0x1p-4",
        "0.01\0",
        "1,5",
        "0,01",
        "abc",
        "0.01abc",
        "--0.01",
        "0..01",
        "e-3",
        "\u{0660}.\u{0661}",
        "½",
    ];
    let rate_range: &[&str] = &[
        "0", "-0", "1", "1.0", "-0.01", "1.5", "1e-400", "2", "1e308",
    ];
    let int_junk: &[&str] = &[
        "",
        " ",
        " 5",
        "5 ",
        "5\n",
        "0x10",
        "0X10",
        "1e6",
        "1E3",
        "1.0",
        "5.",
        ".5",
        "-",
        "+",
        "--5",
        "nan",
        "inf",
        "99999999999999999999",
        "18446744073709551616",
        "-9223372036854775809",
        "9223372036854775808",
        "١٠",
        "5\0",
        "five",
    ];
    let cap_range: &[&str] = &[
        "0",
        "-0",
        "-1",
        "-9223372036854775808",
        "1073741825",
        "9223372036854775807",
    ];
    let exp_range: &[&str] = &[
        "-1",
        "32769",
        "4294967297",
        "9223372036854775807",
        "-9223372036854775808",
    ];
    let seed_junk: &[&str] = &[
        "-1",
        "18446744073709551616",
        "",
        " 1",
        "1 ",
        "0x1",
        "1.5",
        "1e3",
        "nan",
        "-0x1",
        "99999999999999999999999",
    ];

    let expect = |c: &mut Connection, args: Vec<String>, key: &str| {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        must_errs(c, &a);
        assert_no_key(c, key);
    };

    for v in float_junk.iter().chain(rate_range) {
        let k = fresh();
        expect(
            c,
            vec!["BF.RESERVE".into(), k.clone(), v.to_string(), "100".into()],
            &k,
        );
        expect(c, svec(&["BF.INSERT", &k, "ERROR", v, "ITEMS", "x"]), &k);
        expect(
            c,
            svec(&["BF.INSERT", &k, "CAPACITY", "10", "ERROR", v, "ITEMS", "x"]),
            &k,
        );
    }
    for v in int_junk.iter().chain(cap_range) {
        let k = fresh();
        expect(c, svec(&["BF.RESERVE", &k, "0.01", v]), &k);
        expect(c, svec(&["BF.INSERT", &k, "CAPACITY", v, "ITEMS", "x"]), &k);
    }
    for v in int_junk.iter().chain(exp_range).chain(&["0"]) {
        let k = fresh();
        expect(
            c,
            svec(&["BF.RESERVE", &k, "0.01", "100", "EXPANSION", v]),
            &k,
        );
        if *v != "0" {
            expect(
                c,
                svec(&["BF.INSERT", &k, "EXPANSION", v, "ITEMS", "x"]),
                &k,
            );
        }
    }
    for v in seed_junk {
        let k = fresh();
        expect(c, svec(&["BF.RESERVE", &k, "0.01", "100", "SEED", v]), &k);
        expect(c, svec(&["BF.INSERT", &k, "SEED", v, "ITEMS", "x"]), &k);
    }
    // Duplicate options, options without values, unknown options, contradictions, arity.
    let k = fresh();
    let shapes: Vec<Vec<&str>> = vec![
        vec![
            "BF.RESERVE",
            &k,
            "0.01",
            "100",
            "EXPANSION",
            "2",
            "EXPANSION",
            "2",
        ],
        vec!["BF.RESERVE", &k, "0.01", "100", "NONSCALING", "NONSCALING"],
        vec!["BF.RESERVE", &k, "0.01", "100", "SEED", "1", "SEED", "1"],
        vec![
            "BF.RESERVE",
            &k,
            "0.01",
            "100",
            "EXPANSION",
            "2",
            "NONSCALING",
        ],
        vec![
            "BF.RESERVE",
            &k,
            "0.01",
            "100",
            "NONSCALING",
            "EXPANSION",
            "2",
        ],
        vec!["BF.RESERVE", &k, "0.01", "100", "EXPANSION"],
        vec!["BF.RESERVE", &k, "0.01", "100", "SEED"],
        vec!["BF.RESERVE", &k, "0.01", "100", "FOO"],
        vec!["BF.RESERVE", &k, "0.01", "100", "EXPANSIONS", "2"],
        vec!["BF.RESERVE", &k, "0.01", "100", ""],
        vec!["BF.RESERVE", &k, "0.01", "100", "ITEMS", "x"],
        vec!["BF.RESERVE", &k, "0.01", "100", "CAPACITY", "5"],
        vec!["BF.RESERVE", &k, "0.01", "100", "2"],
        vec!["BF.RESERVE", &k, "0.01"],
        vec!["BF.RESERVE", &k],
        vec!["BF.RESERVE"],
        vec![
            "BF.INSERT",
            &k,
            "CAPACITY",
            "100",
            "CAPACITY",
            "100",
            "ITEMS",
            "x",
        ],
        vec![
            "BF.INSERT",
            &k,
            "ERROR",
            "0.1",
            "ERROR",
            "0.1",
            "ITEMS",
            "x",
        ],
        vec!["BF.INSERT", &k, "NOCREATE", "NOCREATE", "ITEMS", "x"],
        vec![
            "BF.INSERT",
            &k,
            "EXPANSION",
            "2",
            "EXPANSION",
            "3",
            "ITEMS",
            "x",
        ],
        vec!["BF.INSERT", &k, "SEED", "1", "SEED", "2", "ITEMS", "x"],
        vec!["BF.INSERT", &k, "CAPACITY", "ITEMS", "x"],
        vec!["BF.INSERT", &k, "ERROR", "ITEMS", "x"],
        vec!["BF.INSERT", &k, "CAPACITY"],
        vec!["BF.INSERT", &k, "ITEMS"],
        vec!["BF.INSERT", &k, "x"],
        vec!["BF.INSERT", &k],
        vec!["BF.INSERT", &k, "FOO", "ITEMS", "x"],
        vec!["BF.INSERT", &k, "", "ITEMS", "x"],
        vec!["BF.INSERT", &k, "ITEM", "x"],
        vec!["BF.INSERT", &k, "NOCREATE", "ITEMS", "x"],
        vec!["BF.ADD", &k],
        vec!["BF.ADD", &k, "a", "b"],
        vec!["BF.MADD", &k],
        vec!["BF.EXISTS", &k],
        vec!["BF.MEXISTS", &k],
        vec!["BF.CARD"],
        vec!["BF.INFO", &k],
        vec!["BF.INFO", &k, "CAPACITY", "SIZE"],
        vec!["BF.SCANDUMP", &k, "0"],
        vec!["BF.SCANDUMP", &k],
        vec!["BF.LOADCHUNK", &k, "1"],
        vec!["BF.LOADCHUNK", &k, "2", "xxxxxxxxxxxxxxxxxxxx"],
        vec!["BF.LOADCHUNK", &k, "1", "RBLM"],
        vec!["BF.LOADCHUNK", &k, "1", ""],
    ];
    for shape in &shapes {
        must_errs(c, shape);
        assert_no_key(c, &k);
    }
    // Iterators and BF.INFO fields on the live filter: errors, and nothing changes.
    let before = digest(c, "keep");
    for it in [
        "-1",
        "nan",
        "",
        " 1",
        "1 ",
        "1e3",
        "0x1",
        "18446744073709551616",
        "-9223372036854775808",
        "1.0",
    ] {
        must_errs(c, &["BF.SCANDUMP", "keep", it]);
        must_errs(c, &["BF.LOADCHUNK", "keep", it, "data"]);
        must_errs(c, &["BF.LOADCHUNK", "nokey", it, "data"]);
        assert_no_key(c, "nokey");
    }
    for field in ["", "capacityx", "ITEMS ", "0", "EXPANSIONS"] {
        must_errs(c, &["BF.INFO", "keep", field]);
    }
    for shape in [
        vec!["BF.RESERVE", "keep", "0.01", "100"],
        vec!["BF.RESERVE", "keep", "nan", "100"],
        vec!["BF.INSERT", "keep", "CAPACITY", "0", "ITEMS", "x"],
        vec!["BF.INSERT", "keep", "ERROR", "2", "ITEMS", "x"],
        vec!["BF.INSERT", "keep", "SEED", "-1", "ITEMS", "x"],
    ] {
        must_errs(c, &shape);
    }
    assert_eq!(digest(c, "keep"), before, "bad arguments changed keep");
    // Nothing named w:* exists.
    let left: Vec<String> = redis::cmd("KEYS").arg("w:*").query(c).unwrap();
    assert!(left.is_empty(), "keys left by failed commands: {left:?}");
}

fn svec(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

/// Config setters refuse bad values and keep the old one.
fn bad_configs(cx: &mut Barrage) {
    let c = &mut cx.c;
    let cases: &[(&str, &[&str])] = &[
        (
            "bf.error-rate",
            &[
                "0", "1", "-0.1", "nan", "inf", "1e309", "", " 0.1", "abc", "2",
            ],
        ),
        (
            "bf.initial-capacity",
            &[
                "0",
                "-1",
                "1073741825",
                "nan",
                "",
                "1e3",
                "0x10",
                "99999999999999999999",
            ],
        ),
        ("bf.expansion", &["0", "-1", "32769", "", "2.5", "x"]),
        (
            "bf.max-filter-bytes",
            &["0", "-1", "63", "", "x", "1.5", "99999999999999999999"],
        ),
        ("bf.seed-mode", &["", "bogus", "0", "randomx"]),
    ];
    for (name, values) in cases {
        let before = config_get(c, name);
        for v in *values {
            let e = call(c, &[b"CONFIG", b"SET", name.as_bytes(), v.as_bytes()]);
            assert!(e.is_err(), "CONFIG SET {name} {v:?} accepted");
            assert_eq!(
                config_get(c, name),
                before,
                "CONFIG SET {name} {v:?} changed it"
            );
        }
    }
    // The defaults still create a usable filter.
    raw_ok(c, &["BF.ADD", "cfg-probe", "x"]);
    check_consistent(c, "cfg-probe", "after bad configs");
    call(c, &[b"DEL", b"cfg-probe"]).unwrap();
}

// ---- Random commands ------------------------------------------------------------------------

fn random_commands(cx: &mut Barrage) {
    // A small cap bounds what random creations may take: 6 pool keys × 16 MiB.
    const CAP: u64 = 16 * MIB;
    config_set(&mut cx.c, "bf.max-filter-bytes", &CAP.to_string());
    let c = &mut cx.c;
    raw_ok(c, &["SET", "str", "a string"]);
    let mut rng = ChaCha8Rng::seed_from_u64(0x5eed_4057_11e5);
    let (keep_header, keep_chunks) = scandump_raw(c, "keep");
    let (ns_header, ns_chunks) = scandump_raw(c, "keep-ns");
    let names: &[&str] = &[
        "BF.RESERVE",
        "BF.ADD",
        "BF.MADD",
        "BF.INSERT",
        "BF.EXISTS",
        "BF.MEXISTS",
        "BF.INFO",
        "BF.CARD",
        "BF.SCANDUMP",
        "BF.LOADCHUNK",
        "bf.add",
        "Bf.Insert",
        "bf.loadchunk",
        "bf.reserve",
        "BF.DEBUG",
        "BF.RESERVEX",
        "BF.",
    ];
    let read_only: &[&str] = &[
        "BF.EXISTS",
        "BF.MEXISTS",
        "BF.INFO",
        "BF.CARD",
        "BF.SCANDUMP",
        "BF.LOADCHUNK",
        "BF.RESERVE",
    ];
    let words: &[&str] = &[
        "0.01",
        "0.5",
        "1e-5",
        "0.99999",
        "100",
        "1",
        "0",
        "2",
        "1000000",
        "1073741824",
        "32768",
        "ITEMS",
        "items",
        "CAPACITY",
        "ERROR",
        "EXPANSION",
        "NONSCALING",
        "NOCREATE",
        "SEED",
        "SIZE",
        "FILTERS",
        "nan",
        "inf",
        "-1",
        "",
        " ",
        "1e309",
        "18446744073709551615",
        "9223372036854775807",
        "-9223372036854775808",
        "0x10",
        "\0",
        "RBLM",
    ];
    let mut errors = 0usize;
    let mut oks = 0usize;
    for round in 0..6000 {
        let name = names[rng.random_range(0..names.len())];
        let key: Vec<u8> = match rng.random_range(0..20) {
            0 => b"str".to_vec(),
            1 if read_only.contains(&name) => b"keep".to_vec(),
            2 => b"missing".to_vec(),
            3 => vec![],
            _ => format!("r{}", rng.random_range(0..6)).into_bytes(),
        };
        let mut args: Vec<Vec<u8>> = vec![name.as_bytes().to_vec()];
        if rng.random_range(0..30) != 0 {
            args.push(key.clone());
        }
        let nargs = rng.random_range(0..9);
        let is_loadchunk = name.eq_ignore_ascii_case("BF.LOADCHUNK");
        for j in 0..nargs {
            let a: Vec<u8> = if is_loadchunk && j == 1 && rng.random_bool(0.7) {
                // Plausible LOADCHUNK data: real headers and chunks, sometimes damaged.
                let mut d = match rng.random_range(0..4) {
                    0 => keep_header.clone(),
                    1 => ns_header.clone(),
                    2 => keep_chunks[0].1.clone(),
                    _ => ns_chunks[0].1.clone(),
                };
                if rng.random_bool(0.3) && !d.is_empty() {
                    let at = rng.random_range(0..d.len());
                    d[at] ^= 1 << rng.random_range(0..8);
                }
                d
            } else if is_loadchunk && j == 0 && rng.random_bool(0.7) {
                let it = match rng.random_range(0..4) {
                    0 => 1,
                    1 => keep_chunks[0].0,
                    2 => ns_chunks[0].0,
                    _ => rng.random_range(-5i64..100_000),
                };
                it.to_string().into_bytes()
            } else {
                match rng.random_range(0..10) {
                    0..=4 => words[rng.random_range(0..words.len())].as_bytes().to_vec(),
                    5 => rng.random::<u64>().to_string().into_bytes(),
                    6 => rng.random::<i64>().to_string().into_bytes(),
                    7 => format!(
                        "{}",
                        rng.random::<f64>() * 10f64.powi(rng.random_range(-30..30))
                    )
                    .into_bytes(),
                    8 => (0..rng.random_range(0..40))
                        .map(|_| rng.random::<u8>())
                        .collect(),
                    _ => format!("item{}", rng.random_range(0..3000)).into_bytes(),
                }
            };
            args.push(a);
        }
        if !names[..14].contains(&name) {
            // Redis echoes the arguments of an unknown command in its error, and the client
            // cannot parse an error that is not UTF-8: keep those arguments printable.
            for a in &mut args {
                a.retain(|b| b.is_ascii_graphic());
            }
        }
        let refs: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
        match call(c, &refs) {
            Ok(_) => oks += 1,
            Err(e) => {
                errors += 1;
                assert!(
                    e.starts_with("ERR ") || e.starts_with("WRONGTYPE "),
                    "unexpected error kind for {}: {e}",
                    show(&refs)
                );
            }
        }
        if round % 500 == 499 {
            let pong: String = redis::cmd("PING").query(c).unwrap();
            assert_eq!(pong, "PONG");
        }
    }
    assert!(
        oks > 100 && errors > 100,
        "random phase too one-sided: {oks} ok, {errors} errors"
    );
    // Every pool key that exists is a consistent filter (or an incomplete load), never garbage.
    for i in 0..6 {
        let k = format!("r{i}");
        if exists(c, &k) {
            check_consistent(c, &k, &format!("random pool key {k}"));
        }
    }
    assert_eq!(key_type(c, "str"), "string");
    assert_memory_within(cx, 6 * CAP + 32 * MIB, "random commands");
    let c = &mut cx.c;
    delete_barrage_keys(c);
    config_set(c, "bf.max-filter-bytes", &DEFAULT_CAP.to_string());
}
