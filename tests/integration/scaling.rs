//! Scaling filters (layers) and full non-scaling filters.
use redis::{Connection, Value};
use rustbloom_testkit::*;

/// Sum of layer capacities for `n` layers.
fn expected_capacity(cap: i64, expansion: i64, n: i64) -> i64 {
    let mut total = 0;
    let mut c = cap;
    for _ in 0..n {
        total += c;
        c *= expansion;
    }
    total
}

#[test]
fn scaling_2000_items_into_capacity_100() {
    let s = Server::start();
    let mut c = s.conn();
    raw_ok(&mut c, &["BF.RESERVE", "k", "0.01", "100"]);
    let its = items("scale", 2000);
    let new = madd_all(&mut c, "k", &its) as i64;
    assert!(
        new > 1900,
        "only {new} of 2000 distinct items counted as new"
    );
    let i = info(&mut c, "k");
    assert!(i.filters >= 4, "expected >= 4 filters, got {i:?}");
    assert_eq!(i.items, new);
    let card = as_int(&raw_ok(&mut c, &["BF.CARD", "k"]));
    assert_eq!(card, new);
    assert_eq!(i.capacity, expected_capacity(100, 2, i.filters), "{i:?}");
    assert_eq!(i.expansion, Some(2));
    assert_all_exist(&mut c, "k", &its);
    // Capacity covers the items.
    assert!(i.capacity >= new);
}

#[test]
fn new_layer_exactly_when_full() {
    let s = Server::start();
    let mut c = s.conn();
    raw_ok(
        &mut c,
        &["BF.RESERVE", "k", "0.001", "100", "EXPANSION", "3"],
    );
    let mut i = 0;
    let mut new = 0;
    while new < 100 {
        if raw_ok(&mut c, &["BF.ADD".to_string(), "k".into(), format!("a{i}")]) == Value::Int(1) {
            new += 1;
        }
        i += 1;
    }
    let inf = info(&mut c, "k");
    assert_eq!(
        (inf.filters, inf.capacity, inf.items),
        (1, 100, 100),
        "layer 0 holds exactly 100"
    );
    // The next new item creates layer 1 with capacity 300.
    loop {
        if raw_ok(&mut c, &["BF.ADD".to_string(), "k".into(), format!("a{i}")]) == Value::Int(1) {
            break;
        }
        i += 1;
    }
    let inf = info(&mut c, "k");
    assert_eq!((inf.filters, inf.capacity, inf.items), (2, 400, 101));
}

#[test]
fn expansion_1_and_4() {
    let s = Server::start();
    let mut c = s.conn();
    for (key, exp) in [("e1", 1i64), ("e4", 4)] {
        raw_ok(
            &mut c,
            &[
                "BF.RESERVE",
                key,
                "0.01",
                "50",
                "EXPANSION",
                &exp.to_string(),
            ],
        );
        let its = items(key, 600);
        let new = madd_all(&mut c, key, &its) as i64;
        let i = info(&mut c, key);
        assert_eq!(i.items, new);
        assert_eq!(
            i.capacity,
            expected_capacity(50, exp, i.filters),
            "{key}: {i:?}"
        );
        assert!(i.capacity >= new);
        if exp == 1 {
            assert!(i.filters >= 11, "{i:?}");
        } else {
            assert!(i.filters >= 3, "{i:?}");
        }
        assert_all_exist(&mut c, key, &its);
    }
}

#[test]
fn scaled_filter_false_positive_rate_is_bounded() {
    let s = Server::start();
    let mut c = s.conn();
    raw_ok(&mut c, &["BF.RESERVE", "k", "0.01", "1000"]);
    madd_all(&mut c, "k", &items("in", 20_000));
    assert!(info(&mut c, "k").filters >= 5);
    let probes = items("out", 20_000);
    let mut fp = 0;
    for batch in probes.chunks(1000) {
        let mut cmd = redis::cmd("BF.MEXISTS");
        cmd.arg("k");
        for p in batch {
            cmd.arg(p);
        }
        let r: Vec<i64> = cmd.query(&mut c).unwrap();
        fp += r.iter().filter(|&&x| x == 1).count();
    }
    // Requested 1%; allow generous statistical slack.
    assert!(fp < 400, "false positive rate too high: {fp}/20000");
}

/// Fill a non-scaling filter with exactly `cap` new items, one BF.ADD at a time; returns the
/// index of the next unused item name.
fn fill_nonscaling(c: &mut Connection, key: &str, cap: i64) -> usize {
    let mut i = 0;
    let mut new = 0;
    while new < cap {
        let r = raw(c, &["BF.ADD".to_string(), key.into(), format!("f{i}")]);
        match r {
            Ok(Value::Int(1)) => new += 1,
            Ok(Value::Int(0)) => {}
            other => panic!("BF.ADD {key} f{i} while filling (new={new}): {other:?}"),
        }
        i += 1;
    }
    i
}

/// An item name not reported present in `key` (so adding it needs room).
fn fresh_item(c: &mut Connection, key: &str, prefix: &str, from: &mut usize) -> String {
    loop {
        let it = format!("{prefix}{}", *from);
        *from += 1;
        if raw_ok(c, &["BF.EXISTS", key, &it]) == Value::Int(0) {
            return it;
        }
    }
}

#[test]
fn nonscaling_full_add_errors() {
    let s = Server::start();
    let mut c = s.conn();
    raw_ok(&mut c, &["BF.RESERVE", "k", "0.01", "50", "NONSCALING"]);
    let mut i = 0;
    let mut new = 0;
    let err = loop {
        match raw(&mut c, &["BF.ADD".to_string(), "k".into(), format!("x{i}")]) {
            Ok(Value::Int(1)) => new += 1,
            Ok(Value::Int(0)) => {}
            Ok(other) => panic!("unexpected {other:?}"),
            Err(e) => break e,
        }
        i += 1;
        assert!(i < 10_000, "non-scaling filter never became full");
    };
    assert_eq!(err, "ERR non scaling filter is full");
    assert_eq!(
        new, 50,
        "a non-scaling filter of capacity 50 holds exactly 50 items"
    );
    let inf = info(&mut c, "k");
    assert_eq!(
        (inf.capacity, inf.filters, inf.items, inf.expansion),
        (50, 1, 50, None)
    );
    assert_eq!(as_int(&raw_ok(&mut c, &["BF.CARD", "k"])), 50);
    // Existing items are still reported, and re-adding one of them is not an error (it fits).
    assert_eq!(raw_ok(&mut c, &["BF.EXISTS", "k", "x0"]), Value::Int(1));
    let mut from = 100_000;
    let f = fresh_item(&mut c, "k", "y", &mut from);
    assert_err(
        &mut c,
        &["BF.ADD", "k", &f],
        "ERR non scaling filter is full",
    );
}

#[test]
fn nonscaling_full_readd_existing_item_answers_0() {
    let s = Server::start();
    let mut c = s.conn();
    raw_ok(&mut c, &["BF.RESERVE", "k", "0.01", "20", "NONSCALING"]);
    fill_nonscaling(&mut c, "k", 20);
    // "f0" was added first; adding it again to a full filter changes no bit: 0, not an error.
    assert_eq!(raw(&mut c, &["BF.ADD", "k", "f0"]), Ok(Value::Int(0)));
    assert_eq!(
        as_ints(raw_ok(&mut c, &["BF.MADD", "k", "f0", "f1"])),
        vec![0, 0]
    );
}

#[test]
fn madd_overflowing_in_the_middle_stops_with_error() {
    let s = Server::start();
    let mut c = s.conn();
    raw_ok(&mut c, &["BF.RESERVE", "k", "0.001", "10", "NONSCALING"]);
    // 9 items in, room for exactly one more.
    let mut i = 0;
    let mut new = 0;
    while new < 9 {
        if raw_ok(&mut c, &["BF.ADD".to_string(), "k".into(), format!("f{i}")]) == Value::Int(1) {
            new += 1;
        }
        i += 1;
    }
    let mut from = 1000;
    let a = fresh_item(&mut c, "k", "n", &mut from);
    let b = fresh_item(&mut c, "k", "n", &mut from);
    let d = fresh_item(&mut c, "k", "n", &mut from);
    let v = raw_ok(&mut c, &["BF.MADD", "k", "f0", &a, &b, &d]);
    let arr = as_array(v);
    assert_eq!(
        arr.len(),
        3,
        "reply must stop at the first item that did not fit: {arr:?}"
    );
    assert_eq!(arr[0], Value::Int(0), "f0 already present");
    assert_eq!(arr[1], Value::Int(1), "{a} fills the last slot");
    match &arr[2] {
        Value::ServerError(e) => assert_eq!(server_err_text(e), "ERR non scaling filter is full"),
        other => panic!("last element must be the error, got {other:?}"),
    }
    let inf = info(&mut c, "k");
    assert_eq!(inf.items, 10);
    assert_eq!(raw_ok(&mut c, &["BF.EXISTS", "k", &a]), Value::Int(1));
    // Items after the failing one were not added.
    assert_eq!(raw_ok(&mut c, &["BF.EXISTS", "k", &d]), Value::Int(0));
    assert_eq!(raw_ok(&mut c, &["BF.EXISTS", "k", &b]), Value::Int(0));

    // BF.INSERT on the full filter: first new item errors at once.
    let e1 = fresh_item(&mut c, "k", "n", &mut from);
    let e2 = fresh_item(&mut c, "k", "n", &mut from);
    let arr = as_array(raw_ok(&mut c, &["BF.INSERT", "k", "ITEMS", "f0", &e1, &e2]));
    assert_eq!(arr.len(), 2, "{arr:?}");
    assert_eq!(arr[0], Value::Int(0));
    match &arr[1] {
        Value::ServerError(e) => assert_eq!(server_err_text(e), "ERR non scaling filter is full"),
        other => panic!("last element must be the error, got {other:?}"),
    }
    // MADD whose first item does not fit: a 1-element array holding the error.
    let arr = as_array(raw_ok(&mut c, &["BF.MADD", "k", &e1, &e2]));
    assert_eq!(arr.len(), 1, "{arr:?}");
    assert!(matches!(&arr[0], Value::ServerError(_)), "{arr:?}");
    assert_eq!(info(&mut c, "k").items, 10);
}

#[test]
fn insert_nonscaling_created_full_mid_array() {
    let s = Server::start();
    let mut c = s.conn();
    let mut args: Vec<String> = [
        "BF.INSERT",
        "k",
        "CAPACITY",
        "3",
        "ERROR",
        "0.0001",
        "NONSCALING",
        "ITEMS",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for i in 0..6 {
        args.push(format!("u{i}"));
    }
    let arr = as_array(raw_ok(&mut c, &args));
    assert_eq!(arr.len(), 4, "3 fit, the 4th errors: {arr:?}");
    assert_eq!(&arr[..3], &[Value::Int(1), Value::Int(1), Value::Int(1)]);
    assert!(
        matches!(&arr[3], Value::ServerError(e) if server_err_text(e) == "ERR non scaling filter is full"),
        "{arr:?}"
    );
    assert_eq!(info(&mut c, "k").items, 3);
}

#[test]
fn resp3_madd_overflow_error_element() {
    let s = Server::start();
    let mut c = s.conn_resp3();
    let arr = as_array(raw_ok(
        &mut c,
        &[
            "BF.INSERT",
            "k",
            "CAPACITY",
            "2",
            "ERROR",
            "0.0001",
            "NONSCALING",
            "ITEMS",
            "p",
            "q",
            "r",
            "s",
        ],
    ));
    // The seed is random: an item after the second may be a false positive of the full filter
    // (answered false, not an error); the error comes at the first item that needed room.
    let (last, answers) = arr.split_last().expect("a reply");
    assert_eq!(&answers[..2], &[Value::Boolean(true), Value::Boolean(true)]);
    assert!(
        answers[2..].iter().all(|v| *v == Value::Boolean(false)),
        "{arr:?}"
    );
    assert!(
        matches!(last, Value::ServerError(e) if server_err_text(e) == "ERR non scaling filter is full"),
        "{arr:?}"
    );
}
