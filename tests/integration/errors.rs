//! Error paths: every error string of docs/behaviour.md. No failing command may create a key.
use redis::Connection;
use rustbloom_testkit::*;

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

fn arity(cmd: &str) -> String {
    format!("ERR wrong number of arguments for '{cmd}' command")
}

/// Assert the error and that `key` was not created.
#[track_caller]
fn assert_err_nokey(c: &mut Connection, args: &[&str], expected: &str) {
    assert_err(c, args, expected);
    assert_no_key(c, args[1]);
}

#[test]
fn wrong_arity_every_command() {
    let s = Server::start();
    let mut c = s.conn();
    // Arity errors are sent with the lower-case command name so the expected text is the same
    // whether the check is done by Redis (registered name) or by the module (name as typed).
    let cases: Vec<(&str, Vec<&str>)> = vec![
        ("bf.reserve", vec!["bf.reserve"]),
        ("bf.reserve", vec!["bf.reserve", "k"]),
        ("bf.reserve", vec!["bf.reserve", "k", "0.01"]),
        ("bf.add", vec!["bf.add"]),
        ("bf.add", vec!["bf.add", "k"]),
        ("bf.add", vec!["bf.add", "k", "a", "b"]),
        ("bf.madd", vec!["bf.madd"]),
        ("bf.madd", vec!["bf.madd", "k"]),
        ("bf.exists", vec!["bf.exists"]),
        ("bf.exists", vec!["bf.exists", "k"]),
        ("bf.exists", vec!["bf.exists", "k", "a", "b"]),
        ("bf.mexists", vec!["bf.mexists"]),
        ("bf.mexists", vec!["bf.mexists", "k"]),
        ("bf.insert", vec!["bf.insert"]),
        ("bf.insert", vec!["bf.insert", "k"]),
        ("bf.insert", vec!["bf.insert", "k", "ITEMS"]),
        ("bf.insert", vec!["bf.insert", "k", "CAPACITY", "10"]),
        (
            "bf.insert",
            vec!["bf.insert", "k", "CAPACITY", "10", "ITEMS"],
        ),
        ("bf.insert", vec!["bf.insert", "k", "NOCREATE"]),
        ("bf.info", vec!["bf.info"]),
        ("bf.info", vec!["bf.info", "k", "CAPACITY", "SIZE"]),
        ("bf.card", vec!["bf.card"]),
        ("bf.card", vec!["bf.card", "k", "x"]),
        ("bf.scandump", vec!["bf.scandump"]),
        ("bf.scandump", vec!["bf.scandump", "k"]),
        ("bf.scandump", vec!["bf.scandump", "k", "0", "x"]),
        ("bf.loadchunk", vec!["bf.loadchunk"]),
        ("bf.loadchunk", vec!["bf.loadchunk", "k"]),
        ("bf.loadchunk", vec!["bf.loadchunk", "k", "1"]),
        (
            "bf.loadchunk",
            vec!["bf.loadchunk", "k", "1", "data", "extra"],
        ),
    ];
    let mut bad = Vec::new();
    for (name, args) in &cases {
        match raw(&mut c, args) {
            Err(e) if e == arity(name) => {}
            other => bad.push(format!("{args:?} -> {other:?}")),
        }
        if args.len() > 1 && exists(&mut c, args[1]) {
            bad.push(format!("{args:?} created the key"));
        }
    }
    assert!(bad.is_empty(), "wrong arity replies (expected 'ERR wrong number of arguments for '<lower-case name>' command'):\n{}", bad.join("\n"));
    // Also on an existing filter: arity errors do not modify it.
    raw_ok(&mut c, &["BF.ADD", "f", "a"]);
    let d = digest(&mut c, "f");
    assert_err(&mut c, &["bf.add", "f", "a", "b"], &arity("bf.add"));
    assert_err(&mut c, &["bf.insert", "f", "ITEMS"], &arity("bf.insert"));
    assert_eq!(d, digest(&mut c, "f"));
}

#[test]
fn wrong_arity_uppercase_name_mentions_command() {
    let s = Server::start();
    let mut c = s.conn();
    let e = raw_err(&mut c, &["BF.ADD", "k"]);
    assert_eq!(
        e.to_lowercase(),
        arity("bf.add").to_lowercase(),
        "got {e:?}"
    );
}

#[test]
fn bad_error_rate() {
    let s = Server::start();
    let mut c = s.conn();
    for bad in [
        "nan", "NaN", "inf", "-inf", "1e309", "", "abc", "0.01x", "0,01",
    ] {
        assert_err_nokey(
            &mut c,
            &["BF.RESERVE", "k", bad, "100"],
            "ERR bad error rate",
        );
        assert_err_nokey(
            &mut c,
            &["BF.INSERT", "k", "ERROR", bad, "ITEMS", "a"],
            "ERR Bad error rate",
        );
    }
    let range = "ERR error rate must be in the range (0.000000, 1.000000)";
    for bad in ["0", "1", "-0.5", "1.5", "-1", "0.0", "1.0", "100", "-0"] {
        assert_err_nokey(&mut c, &["BF.RESERVE", "k", bad, "100"], range);
        // BF.INSERT answers as RedisBloom's does, naming the option whatever is wrong.
        assert_err_nokey(
            &mut c,
            &["BF.INSERT", "k", "ERROR", bad, "ITEMS", "a"],
            "ERR Bad error rate",
        );
    }
}

#[test]
fn bad_capacity() {
    let s = Server::start();
    let mut c = s.conn();
    for bad in [
        "1e6",
        "-",
        "0x10",
        " 5",
        "5 ",
        "",
        "abc",
        "5.0",
        "1.5",
        "99999999999999999999",
        "+",
        "10k",
    ] {
        assert_err_nokey(
            &mut c,
            &["BF.RESERVE", "k", "0.01", bad],
            "ERR bad capacity",
        );
        assert_err_nokey(
            &mut c,
            &["BF.INSERT", "k", "CAPACITY", bad, "ITEMS", "a"],
            "ERR Bad capacity",
        );
    }
    let range = "ERR capacity must be in the range [1, 1073741824]";
    for bad in ["0", "-1", "-9223372036854775808"] {
        assert_err_nokey(&mut c, &["BF.RESERVE", "k", "0.01", bad], range);
        assert_err_nokey(
            &mut c,
            &["BF.INSERT", "k", "CAPACITY", bad, "ITEMS", "a"],
            "ERR Bad capacity",
        );
    }
    // Above the cap RedisBloom's BF.INSERT has no reply of its own (it takes the value): the range.
    for bad in ["1073741825", "9223372036854775807"] {
        assert_err_nokey(&mut c, &["BF.RESERVE", "k", "0.01", bad], range);
        assert_err_nokey(
            &mut c,
            &["BF.INSERT", "k", "CAPACITY", bad, "ITEMS", "a"],
            range,
        );
    }
}

#[test]
fn bad_expansion() {
    let s = Server::start();
    let mut c = s.conn();
    for bad in ["abc", "1.5", "", "2x", "0x2", "1e2", "99999999999999999999"] {
        assert_err_nokey(
            &mut c,
            &["BF.RESERVE", "k", "0.01", "100", "EXPANSION", bad],
            "ERR bad expansion",
        );
        assert_err_nokey(
            &mut c,
            &["BF.INSERT", "k", "EXPANSION", bad, "ITEMS", "a"],
            "ERR Bad expansion",
        );
    }
    let range = "ERR expansion must be in the range [1, 32768]";
    for bad in ["32769", "100000"] {
        assert_err_nokey(
            &mut c,
            &["BF.RESERVE", "k", "0.01", "100", "EXPANSION", bad],
            range,
        );
    }
    // Below 1, RedisBloom 2.8's replies: BF.INSERT's EXPANSION 0 is refused, not non-scaling.
    for bad in ["0", "-1"] {
        assert_err_nokey(
            &mut c,
            &["BF.RESERVE", "k", "0.01", "100", "EXPANSION", bad],
            "ERR expansion should be greater or equal to 1",
        );
    }
    for bad in ["0", "-1", "-9223372036854775808"] {
        assert_err_nokey(
            &mut c,
            &["BF.INSERT", "k", "EXPANSION", bad, "ITEMS", "a"],
            "ERR Bad argument received",
        );
    }
    for bad in ["32769", "100000"] {
        assert_err_nokey(
            &mut c,
            &["BF.INSERT", "k", "EXPANSION", bad, "ITEMS", "a"],
            range,
        );
    }
    // EXPANSION last, with no value: RedisBloom's own reply (BF.INSERT's is an arity error).
    assert_err_nokey(
        &mut c,
        &["BF.RESERVE", "k", "0.01", "100", "EXPANSION"],
        "ERR no expansion",
    );
    assert_err_nokey(
        &mut c,
        &["BF.RESERVE", "k", "0.01", "100", "NONSCALING", "expansion"],
        "ERR no expansion",
    );
    assert_err_nokey(
        &mut c,
        &["BF.INSERT", "k", "EXPANSION"],
        &arity("bf.insert"),
    );
}

/// EXPANSION beside NONSCALING, as RedisBloom 2.8.2 answers it: BF.RESERVE refuses the pair in
/// either order; BF.INSERT creates a non-scaling filter, its expansion checked but unused
/// (clients that always send their expansion rely on it).
#[test]
fn expansion_with_nonscaling() {
    let s = Server::start();
    let mut c = s.conn();
    let e = "ERR Nonscaling filters cannot expand";
    for options in [
        ["EXPANSION", "2", "NONSCALING"],
        ["NONSCALING", "EXPANSION", "2"],
    ] {
        let mut args = vec!["BF.RESERVE", "k", "0.01", "100"];
        args.extend(options);
        assert_err_nokey(&mut c, &args, e);
    }
    let inserts: [&[&str]; 2] = [
        &["ERROR", "0.5", "EXPANSION", "1", "NONSCALING"],
        // SEED 1: the filter of 2 is filled below, and with a random seed two of "b", "c", "d"
        // read as present by chance about once in a million runs (then no refusal came).
        &["NONSCALING", "EXPANSION", "3", "CAPACITY", "2", "SEED", "1"],
    ];
    for (n, options) in inserts.iter().enumerate() {
        let key = format!("ins{n}");
        let mut args = vec!["BF.INSERT", key.as_str()];
        args.extend(options.iter());
        args.extend(["ITEMS", "a"]);
        let added: Vec<i64> = as_array(raw_ok(&mut c, &args)).iter().map(as_int).collect();
        assert_eq!(added, vec![1], "{args:?}");
        let nonscaling = raw_ok(&mut c, &["BF.INFO", key.as_str(), "EXPANSION"]);
        assert_eq!(
            nonscaling,
            redis::Value::Array(vec![redis::Value::Nil]),
            "{args:?}"
        );
    }
    // Full at its capacity, as a non-scaling filter is.
    let reply = raw_ok(&mut c, &["BF.INSERT", "ins1", "ITEMS", "b", "c", "d"]);
    assert_eq!(
        format!("{reply:?}")
            .matches("non scaling filter is full")
            .count(),
        1,
        "{reply:?}"
    );
    // The expansion is still checked.
    assert_err_nokey(
        &mut c,
        &[
            "BF.INSERT",
            "bad",
            "NONSCALING",
            "EXPANSION",
            "0",
            "ITEMS",
            "a",
        ],
        "ERR Bad argument received",
    );
}

#[test]
fn bad_seed() {
    let s = Server::start();
    let mut c = s.conn();
    for bad in [
        "abc",
        "-1",
        "18446744073709551616",
        "1.5",
        "",
        "0x10",
        "1e3",
    ] {
        assert_err_nokey(
            &mut c,
            &["BF.RESERVE", "k", "0.01", "100", "SEED", bad],
            "ERR bad seed",
        );
        assert_err_nokey(
            &mut c,
            &["BF.INSERT", "k", "SEED", bad, "ITEMS", "a"],
            "ERR bad seed",
        );
    }
}

#[test]
fn unknown_options() {
    let s = Server::start();
    let mut c = s.conn();
    let e = "ERR Unknown argument received";
    assert_err_nokey(&mut c, &["BF.RESERVE", "k", "0.01", "100", "FOO"], e);
    assert_err_nokey(
        &mut c,
        &["BF.RESERVE", "k", "0.01", "100", "NONSCALING", "FOO"],
        e,
    );
    assert_err_nokey(&mut c, &["BF.RESERVE", "k", "0.01", "100", "EXP", "2"], e);
    assert_err_nokey(&mut c, &["BF.RESERVE", "k", "0.01", "100", "ITEMS", "a"], e);
    assert_err_nokey(&mut c, &["BF.INSERT", "k", "FOO", "ITEMS", "a"], e);
    // RedisBloom matches BF.INSERT options by prefix; we reject them.
    assert_err_nokey(&mut c, &["BF.INSERT", "k", "CAP", "10", "ITEMS", "a"], e);
    assert_err_nokey(&mut c, &["BF.INSERT", "k", "NOCREATEX", "ITEMS", "a"], e);
    assert_err_nokey(&mut c, &["BF.INSERT", "k", "ITEM", "a"], e);
    assert_err_nokey(
        &mut c,
        &["BF.INSERT", "k", "CAPACITY", "10", "X", "ITEMS", "a"],
        e,
    );
    // On an existing key too (and the filter is untouched).
    raw_ok(&mut c, &["BF.ADD", "f", "a"]);
    let d = digest(&mut c, "f");
    assert_err(&mut c, &["BF.INSERT", "f", "FOO", "ITEMS", "b"], e);
    assert_eq!(d, digest(&mut c, "f"));
}

#[test]
fn duplicate_options() {
    let s = Server::start();
    let mut c = s.conn();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec![
                "BF.RESERVE",
                "k",
                "0.01",
                "100",
                "EXPANSION",
                "2",
                "EXPANSION",
                "3",
            ],
            "EXPANSION",
        ),
        (
            vec!["BF.RESERVE", "k", "0.01", "100", "NONSCALING", "NONSCALING"],
            "NONSCALING",
        ),
        (
            vec!["BF.RESERVE", "k", "0.01", "100", "SEED", "1", "SEED", "2"],
            "SEED",
        ),
        (
            vec![
                "BF.INSERT",
                "k",
                "CAPACITY",
                "10",
                "CAPACITY",
                "20",
                "ITEMS",
                "a",
            ],
            "CAPACITY",
        ),
        (
            vec![
                "BF.INSERT",
                "k",
                "ERROR",
                "0.1",
                "ERROR",
                "0.2",
                "ITEMS",
                "a",
            ],
            "ERROR",
        ),
        (
            vec![
                "BF.INSERT",
                "k",
                "EXPANSION",
                "2",
                "EXPANSION",
                "2",
                "ITEMS",
                "a",
            ],
            "EXPANSION",
        ),
        (
            vec!["BF.INSERT", "k", "NONSCALING", "NONSCALING", "ITEMS", "a"],
            "NONSCALING",
        ),
        (
            vec!["BF.INSERT", "k", "SEED", "1", "SEED", "1", "ITEMS", "a"],
            "SEED",
        ),
        (
            vec!["BF.INSERT", "k", "NOCREATE", "NOCREATE", "ITEMS", "a"],
            "NOCREATE",
        ),
    ];
    for (args, name) in &cases {
        assert_err_nokey(&mut c, args, &format!("ERR duplicate option {name}"));
    }
}

#[test]
fn duplicate_option_name_is_canonical_upper_case() {
    let s = Server::start();
    let mut c = s.conn();
    assert_err_nokey(
        &mut c,
        &[
            "BF.RESERVE",
            "k",
            "0.01",
            "100",
            "expansion",
            "2",
            "Expansion",
            "3",
        ],
        "ERR duplicate option EXPANSION",
    );
    assert_err_nokey(
        &mut c,
        &[
            "BF.INSERT",
            "k",
            "capacity",
            "10",
            "CAPACITY",
            "20",
            "ITEMS",
            "a",
        ],
        "ERR duplicate option CAPACITY",
    );
}

#[test]
fn reserve_existing_key() {
    let s = Server::start();
    let mut c = s.conn();
    raw_ok(&mut c, &["BF.RESERVE", "k", "0.01", "100"]);
    raw_ok(&mut c, &["BF.ADD", "k", "a"]);
    let d = digest(&mut c, "k");
    assert_err(
        &mut c,
        &["BF.RESERVE", "k", "0.01", "100"],
        "ERR item exists",
    );
    assert_err(
        &mut c,
        &["BF.RESERVE", "k", "0.05", "1000", "NONSCALING"],
        "ERR item exists",
    );
    assert_eq!(d, digest(&mut c, "k"));
    assert_eq!(info(&mut c, "k").capacity, 100);
}

#[test]
fn not_found_errors() {
    let s = Server::start();
    let mut c = s.conn();
    assert_err_nokey(
        &mut c,
        &["BF.INSERT", "k", "NOCREATE", "ITEMS", "a"],
        "ERR not found",
    );
    assert_err_nokey(
        &mut c,
        &[
            "BF.INSERT",
            "k",
            "CAPACITY",
            "10",
            "NOCREATE",
            "ITEMS",
            "a",
            "b",
        ],
        "ERR not found",
    );
    assert_err_nokey(&mut c, &["BF.INFO", "k"], "ERR not found");
    assert_err_nokey(&mut c, &["BF.INFO", "k", "CAPACITY"], "ERR not found");
    assert_err_nokey(&mut c, &["BF.SCANDUMP", "k", "0"], "ERR not found");
}

#[test]
fn info_unknown_field() {
    let s = Server::start();
    let mut c = s.conn();
    raw_ok(&mut c, &["BF.ADD", "k", "a"]);
    // ERROR, TIGHTENING and MAXSCALEDCAPACITY are valkey-bloom's fields, answered here too
    // (valkeybloom_data.rs); RedisBloom refuses them.
    for f in ["FOO", "", "CAP", "ERR", "TIGHT", "CAPACITYX"] {
        assert_err(
            &mut c,
            &["BF.INFO", "k", f],
            "ERR Invalid information value",
        );
    }
}

#[test]
fn iterator_not_numeric() {
    let s = Server::start();
    let mut c = s.conn();
    raw_ok(&mut c, &["BF.ADD", "k", "a"]);
    let e = "ERR Second argument must be numeric";
    for bad in ["abc", "-1", "", "1.5", "0x1", "99999999999999999999"] {
        assert_err(&mut c, &["BF.SCANDUMP", "k", bad], e);
        assert_err_nokey(&mut c, &["BF.LOADCHUNK", "new", bad, "data"], e);
    }
}

#[test]
fn wrongtype_every_command() {
    let s = Server::start();
    let mut c = s.conn();
    // A valid header from a real filter, so LOADCHUNK fails only because of the key type.
    raw_ok(&mut c, &["BF.ADD", "f", "a"]);
    let chunks = scandump(&mut c, "f");
    raw_ok(&mut c, &["SET", "s", "value"]);
    let cases: Vec<Vec<&str>> = vec![
        vec!["BF.RESERVE", "s", "0.01", "100"],
        vec!["BF.ADD", "s", "a"],
        vec!["BF.MADD", "s", "a", "b"],
        vec!["BF.EXISTS", "s", "a"],
        vec!["BF.MEXISTS", "s", "a", "b"],
        vec!["BF.INSERT", "s", "ITEMS", "a"],
        vec!["BF.INSERT", "s", "NOCREATE", "ITEMS", "a"],
        vec!["BF.INSERT", "s", "CAPACITY", "10", "ITEMS", "a"],
        vec!["BF.INFO", "s"],
        vec!["BF.INFO", "s", "CAPACITY"],
        vec!["BF.CARD", "s"],
        vec!["BF.SCANDUMP", "s", "0"],
    ];
    for args in &cases {
        assert_err(&mut c, args, WRONGTYPE);
        assert_eq!(key_type(&mut c, "s"), "string");
    }
    let r = redis::cmd("BF.LOADCHUNK")
        .arg("s")
        .arg(chunks[0].0)
        .arg(chunks[0].1.as_slice())
        .query::<redis::Value>(&mut c);
    match r {
        Err(e) => assert_eq!(
            err_text(&e),
            WRONGTYPE,
            "LOADCHUNK header onto a string key"
        ),
        Ok(v) => panic!("LOADCHUNK header onto a string key answered {v:?}"),
    }
    let v: String = redis::cmd("GET").arg("s").query(&mut c).unwrap();
    assert_eq!(v, "value");
    // Other types as well.
    raw_ok(&mut c, &["LPUSH", "l", "x"]);
    raw_ok(&mut c, &["HSET", "h", "f", "v"]);
    for k in ["l", "h"] {
        assert_err(&mut c, &["BF.ADD", k, "a"], WRONGTYPE);
        assert_err(&mut c, &["BF.EXISTS", k, "a"], WRONGTYPE);
        assert_err(&mut c, &["BF.CARD", k], WRONGTYPE);
    }
}

#[test]
fn add_to_full_nonscaling_errors() {
    let s = Server::start();
    let mut c = s.conn();
    raw_ok(&mut c, &["BF.RESERVE", "k", "0.001", "5", "NONSCALING"]);
    let mut added = 0;
    let mut i = 0;
    while added < 5 {
        if raw_ok(
            &mut c,
            &["BF.ADD".to_string(), "k".into(), format!("it{i}")],
        ) == redis::Value::Int(1)
        {
            added += 1;
        }
        i += 1;
        assert!(i < 1000);
    }
    let d = digest(&mut c, "k");
    // Find a new item (not a false positive) and add it: must fail.
    let mut j = 10_000;
    loop {
        let it = format!("it{j}");
        if raw_ok(&mut c, &["BF.EXISTS", "k", &it]) == redis::Value::Int(0) {
            assert_err(
                &mut c,
                &["BF.ADD", "k", &it],
                "ERR non scaling filter is full",
            );
            break;
        }
        j += 1;
    }
    assert_eq!(
        d,
        digest(&mut c, "k"),
        "a failed add must not change the filter"
    );
    assert_eq!(info(&mut c, "k").items, 5);
}

#[test]
fn size_limit_refuses_huge_filter() {
    // With maxmemory set, a reservation far beyond it must be refused before allocating.
    let s = Server::start_with(&["--maxmemory", "64mb"]);
    let mut c = s.conn();
    for args in [
        vec!["BF.RESERVE", "k", "1e-10", "1073741824"],
        vec!["BF.RESERVE", "k", "0.0001", "1000000000", "NONSCALING"],
    ] {
        let e = raw_err(&mut c, &args);
        assert!(
            e.starts_with("ERR filter would use ")
                && e.contains(" bytes, over the ")
                && e.contains("limit"),
            "{args:?}: got {e:?}"
        );
        assert_no_key(&mut c, "k");
    }
    let e = raw_err(
        &mut c,
        &[
            "BF.INSERT",
            "k",
            "CAPACITY",
            "1073741824",
            "ERROR",
            "0.00001",
            "ITEMS",
            "a",
        ],
    );
    assert!(e.starts_with("ERR filter would use "), "got {e:?}");
    assert_no_key(&mut c, "k");
    // The server is still fine.
    raw_ok(&mut c, &["BF.ADD", "ok", "a"]);
}
