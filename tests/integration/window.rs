//! Sliding-window filters (`BF.RESERVE key e c WINDOW ms`, `BF.INSERT ... WINDOW ms ITEMS ...`)
//! against real servers, with windows of 1 to 2 seconds.
//!
//! The contract a user relies on: an item added at time t answers 1 at every moment up to t + W,
//! whatever the load; it is forgotten when the fourth generation after its own begins, at
//! (⌊t/G⌋ + 4)·G with G = ⌈W/3⌉, which is at most t + 2W.
//!
//! Time in these tests: the server and the test read the same realtime clock, so a command the
//! test sends at `sent` and whose reply arrives at `received` (its own clock, ms) ran at some
//! server moment in [sent, received] ([`Timed`]). A check is asserted only when that whole
//! interval lies on one side of the moment that matters (*conclusive*); otherwise it is skipped.
//! The write time t of a batch is read back exactly from BF.INFO "Last write (ms)". So a slow or
//! loaded machine makes fewer checks conclusive but never fails one that holds; where a test
//! needs some conclusive check, it says so and retries the scenario instead of failing.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use redis::{Connection, Value};
use rustbloom_core::bits::{allocated_bytes, allocated_bytes_by};
use rustbloom_core::budget::{allocation_size, Allocator};
use rustbloom_core::window::encoding::parse_header;
use rustbloom_core::window::{bytes_needed, WindowParams};
use rustbloom_testkit::*;

const AOF: [&str; 4] = ["--appendonly", "yes", "--appendfsync", "always"];

// ---------------------------------------------------------------------------------------------
// Time
// ---------------------------------------------------------------------------------------------

/// The test's clock, Unix ms, as the server's `RedisModule_Milliseconds` reads it.
fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis() as u64
}

fn sleep_until(ms: u64) {
    let now = now_ms();
    if ms > now {
        std::thread::sleep(Duration::from_millis(ms - now));
    }
}

/// A reply with the test's clock just before the command was sent and just after the reply
/// arrived: the server ran the command at a moment in [sent, received].
struct Timed<T> {
    value: T,
    sent: u64,
    received: u64,
}

fn timed<T>(f: impl FnOnce() -> T) -> Timed<T> {
    let sent = now_ms();
    let value = f();
    Timed {
        value,
        sent,
        received: now_ms(),
    }
}

/// G = ⌈W/3⌉.
fn generation_ms(window_ms: u64) -> u64 {
    window_ms.div_ceil(3)
}

/// When an item written at `at` stops answering: the start of the fourth generation after its
/// own (what docs/windows.md documents).
fn forgotten_at(at: u64, window_ms: u64) -> u64 {
    let g = generation_ms(window_ms);
    (at / g + 4) * g
}

// ---------------------------------------------------------------------------------------------
// Commands
// ---------------------------------------------------------------------------------------------

/// BF.MADD in one command; the answers as booleans.
fn madd(c: &mut Connection, key: &str, items: &[String]) -> Vec<bool> {
    let mut args = vec!["BF.MADD", key];
    args.extend(items.iter().map(String::as_str));
    as_ints(raw_ok(c, &args)).iter().map(|&x| x == 1).collect()
}

/// BF.MEXISTS in one command.
fn mexists(c: &mut Connection, key: &str, items: &[String]) -> Vec<bool> {
    let mut args = vec!["BF.MEXISTS", key];
    args.extend(items.iter().map(String::as_str));
    as_ints(raw_ok(c, &args)).iter().map(|&x| x == 1).collect()
}

fn card(c: &mut Connection, key: &str) -> u64 {
    as_int(&raw_ok(c, &["BF.CARD", key])) as u64
}

/// BF.INFO as (name, value) pairs, in the server's order.
fn info_of(c: &mut Connection, key: &str) -> Vec<(String, Value)> {
    info_pairs(raw_ok(c, &["BF.INFO", key]))
}

/// One integer field of BF.INFO.
fn info_int(c: &mut Connection, key: &str, name: &str) -> i64 {
    let pairs = info_of(c, key);
    let (_, value) = pairs
        .iter()
        .find(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("BF.INFO {key} has no {name:?}: {pairs:?}"));
    as_int(value)
}

/// The timestamp the filter's latest write used (BF.INFO "Last write (ms)").
fn last_write(c: &mut Connection, key: &str) -> u64 {
    info_int(c, key, "Last write (ms)") as u64
}

/// BF.INFO without "Number of items inserted", which depends on the moment it is read: the
/// fields two copies of a filter must agree on whenever they are read.
fn info_without_items(c: &mut Connection, key: &str) -> Vec<(String, Value)> {
    info_of(c, key)
        .into_iter()
        .filter(|(name, _)| name != "Number of items inserted")
        .collect()
}

fn count_true(answers: &[bool]) -> usize {
    answers.iter().filter(|&&a| a).count()
}

/// The bits of the classic (optimal, unpartitioned) Bloom filter of `capacity` items at
/// `error_rate`: n·ln(1/ε)/ln²2.
fn classic_bits(capacity: u64, error_rate: f64) -> f64 {
    capacity as f64 * (1.0 / error_rate).ln() / std::f64::consts::LN_2.powi(2)
}

// ---------------------------------------------------------------------------------------------
// (a) The contract
// ---------------------------------------------------------------------------------------------

/// Items written by one command, with the timestamp the write used.
struct Batch {
    items: Vec<String>,
    at: u64,
}

/// Items at a steady rate, written in batches as time passes.
struct Traffic {
    batches: Vec<Batch>,
    written: u64,
}

impl Traffic {
    /// Writes the items numbered from the last written up to `due` in one BF.MADD.
    fn catch_up(&mut self, c: &mut Connection, key: &str, due: u64) {
        if due <= self.written {
            return;
        }
        let items: Vec<String> = (self.written..due).map(|i| format!("t:{i}")).collect();
        madd(c, key, &items);
        let at = last_write(c, key);
        self.batches.push(Batch { items, at });
        self.written = due;
    }

    fn all_items(&self) -> Vec<String> {
        self.batches.iter().flat_map(|b| b.items.clone()).collect()
    }

    /// Checks every batch with one BF.MEXISTS: a batch still inside its window (conclusively)
    /// must answer 1 for every item. Returns how many batches were checked so.
    fn check_inside(&self, c: &mut Connection, key: &str, window_ms: u64) -> usize {
        if self.batches.is_empty() {
            return 0;
        }
        let check = timed(|| mexists(c, key, &self.all_items()));
        let mut answers = check.value.iter();
        let mut checked = 0;
        for batch in &self.batches {
            let got: Vec<bool> = answers.by_ref().take(batch.items.len()).copied().collect();
            if check.received <= batch.at + window_ms {
                let missing = got.iter().filter(|&&a| !a).count();
                assert_eq!(
                    missing,
                    0,
                    "a batch written at {} missed {missing} of {} items at [{}, {}]",
                    batch.at,
                    got.len(),
                    check.sent,
                    check.received
                );
                checked += 1;
            }
        }
        checked
    }
}

#[test]
fn items_answer_through_their_window_under_4x_overload_and_are_forgotten_by_2w() {
    const W: u64 = 2000;
    const N: u64 = 2000;
    const ERROR: f64 = 0.01;
    let server = Server::start();
    let mut c = server.conn();
    raw_ok(
        &mut c,
        &[
            "BF.RESERVE",
            "clicks",
            "0.01",
            &N.to_string(),
            "WINDOW",
            &W.to_string(),
        ],
    );
    let mut traffic = Traffic {
        batches: Vec::new(),
        written: 0,
    };
    // One window at four times the capacity (4N distinct items within W), checking everything
    // written so far every ~50 ms.
    let start = now_ms();
    let mut checked = 0;
    while now_ms() < start + W {
        traffic.catch_up(&mut c, "clicks", 4 * N * (now_ms() - start) / W);
        checked += traffic.check_inside(&mut c, "clicks", W);
        std::thread::sleep(Duration::from_millis(50));
    }
    traffic.catch_up(&mut c, "clicks", 4 * N);
    let overload = traffic.batches.len();
    let overload_end = traffic.batches[overload - 1].at;
    let overloaded_card = card(&mut c, "clicks");
    // Then traffic at capacity for two windows and more, still checked all along.
    let calm = now_ms();
    loop {
        traffic.catch_up(&mut c, "clicks", 4 * N + N * (now_ms() - calm) / W);
        checked += traffic.check_inside(&mut c, "clicks", W);
        if now_ms() > overload_end + 2 * W {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(checked >= overload, "only {checked} conclusive checks");
    // Past t + 2W the overload is forgotten: what still answers 1 are the false positives of a
    // filter kept at capacity, at most a few times ε.
    let old: Vec<String> = traffic.batches[..overload]
        .iter()
        .flat_map(|b| b.items.clone())
        .collect();
    assert_eq!(old.len() as u64, 4 * N);
    let stale = timed(|| mexists(&mut c, "clicks", &old));
    assert!(stale.sent > overload_end + 2 * W);
    let present = count_true(&stale.value) as f64 / old.len() as f64;
    assert!(
        present <= 3.0 * ERROR,
        "{present} of the overload still answers after 2W"
    );
    // BF.CARD counts the last generations only: it drops once the overload has left.
    let calm_card = card(&mut c, "clicks");
    assert!(
        overloaded_card > 2 * N && calm_card <= 2 * N,
        "BF.CARD {overloaded_card} at the end of the overload, {calm_card} after"
    );
    eprintln!(
        "{checked} conclusive batch checks; {present:.4} of the overload answers after 2W; \
         BF.CARD {overloaded_card} -> {calm_card}"
    );
}

/// Without other writes, items answer exactly until the start of the fourth generation after
/// their write and not from then on; BF.CARD and BF.INFO's items follow.
#[test]
fn a_quiet_filter_forgets_at_the_start_of_the_fourth_generation() {
    const W: u64 = 1200;
    let server = Server::start();
    let mut c = server.conn();
    // A check before the forgetting moment needs the machine to answer within 1.2 s of the add:
    // a stalled attempt is retried rather than failed.
    for attempt in 0..3 {
        let key = format!("quiet{attempt}");
        raw_ok(
            &mut c,
            &["BF.RESERVE", &key, "0.01", "1000", "WINDOW", "1200"],
        );
        let added = items("q", 300);
        let counted = count_true(&madd(&mut c, &key, &added)) as u64;
        let at = last_write(&mut c, &key);
        let gone = forgotten_at(at, W);
        assert!(gone > at + W && gone <= at + 2 * W);
        let (mut inside, mut outside) = (0, 0);
        while outside < 3 {
            let check = timed(|| {
                (
                    mexists(&mut c, &key, &added),
                    card(&mut c, &key),
                    info_int(&mut c, &key, "Number of items inserted") as u64,
                )
            });
            let (answers, card, info_items) = check.value;
            if check.received < gone {
                assert_eq!(
                    count_true(&answers),
                    added.len(),
                    "at [{}, {}]",
                    check.sent,
                    check.received
                );
                assert_eq!((card, info_items), (counted, counted));
                inside += 1;
            } else if check.sent >= gone {
                assert_eq!(
                    count_true(&answers),
                    0,
                    "at {} (gone at {gone})",
                    check.sent
                );
                assert_eq!((card, info_items), (0, 0));
                outside += 1;
            }
            std::thread::sleep(Duration::from_millis(30));
        }
        // Reads changed nothing: the filter's time is its last write's.
        assert_eq!(last_write(&mut c, &key), at);
        if inside > 0 {
            return;
        }
    }
    panic!("three attempts without a check before the forgetting moment (machine too slow?)");
}

/// Adding an item again refreshes it: it then lives a window from the refresh.
#[test]
fn adding_an_item_again_extends_its_life() {
    const W: u64 = 1200;
    let server = Server::start();
    let mut c = server.conn();
    for attempt in 0..3 {
        let key = format!("refresh{attempt}");
        raw_ok(
            &mut c,
            &["BF.RESERVE", &key, "0.01", "100", "WINDOW", "1200"],
        );
        raw_ok(&mut c, &["BF.ADD", &key, "kept"]);
        raw_ok(&mut c, &["BF.ADD", &key, "dropped"]);
        let first = last_write(&mut c, &key);
        let gone = forgotten_at(first, W);
        // Refreshed in the half-window before it would have gone.
        sleep_until(gone - W / 2);
        let refresh = timed(|| as_int(&raw_ok(&mut c, &["BF.ADD", &key, "kept"])));
        if refresh.received < gone {
            assert_eq!(refresh.value, 0, "still present, so not new");
        }
        let again = last_write(&mut c, &key);
        sleep_until(gone);
        let check = timed(|| mexists(&mut c, &key, &["kept".into(), "dropped".into()]));
        assert!(check.sent >= gone);
        assert!(!check.value[1], "the item not refreshed is forgotten");
        if refresh.received < gone && check.received <= again + W {
            assert!(check.value[0], "the refreshed item is still there");
            return;
        }
    }
    panic!("three attempts without a conclusive timing (machine too slow?)");
}

#[test]
fn info_adds_the_window_fields_after_the_five_standard_ones() {
    let server = Server::start();
    let mut c = server.conn();
    raw_ok(
        &mut c,
        &[
            "BF.RESERVE",
            "w",
            "0.001",
            "5000",
            "WINDOW",
            "90000",
            "SEED",
            "7",
        ],
    );
    let fresh = info_of(&mut c, "w");
    let names: Vec<&str> = fresh.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "Capacity",
            "Size",
            "Number of filters",
            "Number of items inserted",
            "Expansion rate",
            "Window (ms)",
            "Generation (ms)",
            "Last write (ms)",
            "Error rate"
        ]
    );
    // Created with its ring before any generation: creation does not depend on the clock.
    assert_eq!(last_write(&mut c, "w"), 0);
    let write = timed(|| raw_ok(&mut c, &["BF.ADD", "w", "x"]));
    let info = info_of(&mut c, "w");
    let get = |name: &str| info.iter().find(|(n, _)| n == name).unwrap().1.clone();
    assert_eq!(as_int(&get("Capacity")), 5000);
    assert!(as_int(&get("Size")) > 0);
    assert_eq!(as_int(&get("Number of filters")), 4);
    assert_eq!(as_int(&get("Number of items inserted")), 1);
    assert_eq!(get("Expansion rate"), Value::Nil);
    assert_eq!(as_int(&get("Window (ms)")), 90000);
    assert_eq!(as_int(&get("Generation (ms)")), 30000);
    let last = as_int(&get("Last write (ms)")) as u64;
    assert!((write.sent..=write.received).contains(&last));
    let rate: f64 = value_to_string(&get("Error rate")).parse().unwrap();
    assert_eq!(rate, 0.001);
    // RESP3 clients read the same fields as a map, the rate as a double.
    let mut c3 = server.conn_resp3();
    let map = info_pairs(raw_ok(&mut c3, &["BF.INFO", "w"]));
    assert_eq!(map.len(), 9);
    assert_eq!(map[8].1, Value::Double(0.001));
    // Single fields answer as for any filter.
    assert_eq!(
        as_ints(raw_ok(&mut c, &["BF.INFO", "w", "CAPACITY"])),
        [5000]
    );
    assert_eq!(
        as_array(raw_ok(&mut c, &["BF.INFO", "w", "EXPANSION"])),
        [Value::Nil]
    );
}

// ---------------------------------------------------------------------------------------------
// (b) Bad windows
// ---------------------------------------------------------------------------------------------

#[test]
fn bad_windows_answer_an_error_and_create_nothing() {
    let server = Server::start();
    let mut c = server.conn();
    let reserve = |extra: &[&str]| {
        let mut args = vec!["BF.RESERVE", "k", "0.01", "100"];
        args.extend(extra);
        args.into_iter().map(String::from).collect::<Vec<_>>()
    };
    let insert = |options: &[&str]| {
        let mut args = vec!["BF.INSERT", "k"];
        args.extend(options);
        args.extend(["ITEMS", "a", "b"]);
        args.into_iter().map(String::from).collect::<Vec<_>>()
    };
    let bad_values = [
        "0",
        "-1",
        "-1000",
        "1",
        "3",
        "1.5",
        "1000.0",
        "1e3",
        "abc",
        "",
        " 1000",
        "0x400",
        "1099511627777",
        "99999999999999999999",
    ];
    let mut cases: Vec<Vec<String>> = Vec::new();
    for value in bad_values {
        cases.push(reserve(&["WINDOW", value]));
        cases.push(insert(&["WINDOW", value]));
        cases.push(insert(&[
            "CAPACITY", "1000", "ERROR", "0.001", "WINDOW", value,
        ]));
    }
    cases.extend([
        // A missing value: WINDOW last, or followed by ITEMS.
        reserve(&["WINDOW"]),
        reserve(&["SEED", "1", "WINDOW"]),
        insert(&["WINDOW"]),
        // Window filters do not scale: EXPANSION and NONSCALING are refused with WINDOW.
        reserve(&["WINDOW", "1000", "EXPANSION", "2"]),
        reserve(&["EXPANSION", "4", "WINDOW", "1000"]),
        reserve(&["WINDOW", "1000", "NONSCALING"]),
        reserve(&["NONSCALING", "WINDOW", "1000"]),
        insert(&["WINDOW", "1000", "EXPANSION", "2"]),
        insert(&["NONSCALING", "WINDOW", "1000"]),
        insert(&["WINDOW", "1000", "EXPANSION", "0"]),
        // Twice.
        reserve(&["WINDOW", "1000", "WINDOW", "2000"]),
        insert(&["WINDOW", "1000", "WINDOW", "1000"]),
        // A slot shape too small for a generation's share (a primary replicates its own).
        reserve(&["WINDOW", "1000", "SHAPE", "64", "7", "0"]),
        // Bad companions of a good window.
        vec![
            "BF.RESERVE".into(),
            "k".into(),
            "0".into(),
            "100".into(),
            "WINDOW".into(),
            "1000".into(),
        ],
        vec![
            "BF.RESERVE".into(),
            "k".into(),
            "0.01".into(),
            "0".into(),
            "WINDOW".into(),
            "1000".into(),
        ],
        insert(&["ERROR", "2", "WINDOW", "1000"]),
    ]);
    for args in &cases {
        let err = raw_err(&mut c, args);
        assert!(err.starts_with("ERR"), "{args:?}: {err}");
        assert_no_key(&mut c, "k");
    }
    // The bounds themselves are accepted.
    raw_ok(&mut c, &["BF.RESERVE", "min", "0.01", "100", "WINDOW", "4"]);
    raw_ok(
        &mut c,
        &[
            "BF.RESERVE",
            "max",
            "0.01",
            "100",
            "WINDOW",
            "1099511627776",
        ],
    );
    raw_ok(
        &mut c,
        &["BF.INSERT", "lower", "window", "4000", "items", "a"],
    );
    assert_eq!(info_int(&mut c, "lower", "Window (ms)"), 4000);
    // NOCREATE with WINDOW on a missing key creates nothing either.
    let err = raw_err(
        &mut c,
        &["BF.INSERT", "k", "NOCREATE", "WINDOW", "1000", "ITEMS", "a"],
    );
    assert!(err.starts_with("ERR"), "{err}");
    assert_no_key(&mut c, "k");
    // BF.ADDAT writes to window filters only, and never creates one.
    raw_ok(&mut c, &["BF.ADD", "plain", "a"]);
    for args in [
        &["BF.ADDAT", "k", "1000", "a"][..],
        &["BF.ADDAT", "plain", "1000", "a"],
        &["BF.ADDAT", "min", "-1", "a"],
        &["BF.ADDAT", "min", "soon", "a"],
        &["BF.ADDAT", "min", "1000"],
    ] {
        let err = raw_err(&mut c, args);
        assert!(err.starts_with("ERR"), "{args:?}: {err}");
    }
    assert_no_key(&mut c, "k");
    assert_eq!(
        last_write(&mut c, "min"),
        0,
        "a refused BF.ADDAT moved the filter's time"
    );
}

/// BF.ADDAT from a client: a time from the past counts as the filter's latest (its time never
/// goes back); a time more than a window ahead of the server's clock is refused, since it would
/// become the filter's time and stop it forgetting until the clock caught up.
#[test]
fn a_client_timestamp_far_ahead_is_refused_so_the_filter_keeps_forgetting() {
    const W: u64 = 1000;
    let server = Server::start();
    let mut c = server.conn();
    raw_ok(
        &mut c,
        &["BF.RESERVE", "w", "0.01", "100", "WINDOW", "1000"],
    );
    let day_ahead = (now_ms() + 86_400_000).to_string();
    for at in ["18446744073709551615", day_ahead.as_str()] {
        let err = raw_err(&mut c, &["BF.ADDAT", "w", at, "x"]);
        assert!(err.starts_with("ERR"), "{at}: {err}");
    }
    assert_eq!(
        last_write(&mut c, "w"),
        0,
        "a refused write moved the filter's time"
    );
    assert_eq!(card(&mut c, "w"), 0);
    // Half a window ahead is a client clock running a little fast: accepted as given.
    let ahead = now_ms() + W / 2;
    let reply = as_ints(raw_ok(&mut c, &["BF.ADDAT", "w", &ahead.to_string(), "x"]));
    assert_eq!(reply, [1]);
    assert_eq!(last_write(&mut c, "w"), ahead);
    // From the past: the filter's latest time is used.
    let past = (now_ms() - 100_000).to_string();
    assert_eq!(as_ints(raw_ok(&mut c, &["BF.ADDAT", "w", &past, "y"])), [1]);
    assert_eq!(last_write(&mut c, "w"), ahead);
    // And both are forgotten as if written then.
    sleep_until(forgotten_at(ahead, W));
    assert_eq!(
        mexists(&mut c, "w", &["x".into(), "y".into()]),
        [false, false]
    );
}

// ---------------------------------------------------------------------------------------------
// (c) Replication
// ---------------------------------------------------------------------------------------------

/// Per key, the same DEBUG DIGEST-VALUE (bits, counts and the filter's time) and the same BF.INFO
/// but its items; and the same dataset digest.
#[track_caller]
fn assert_same_filters(a: &mut Connection, b: &mut Connection, what: &str) {
    let keys = all_keys(a);
    assert_eq!(keys, all_keys(b), "keys differ ({what})");
    for key in &keys {
        let key = String::from_utf8_lossy(key).into_owned();
        assert_same_digest(a, &key, b, &key);
        assert_eq!(
            info_without_items(a, &key),
            info_without_items(b, &key),
            "BF.INFO of {key} differs ({what})"
        );
    }
    assert_eq!(
        dataset_digest(a),
        dataset_digest(b),
        "DEBUG DIGEST ({what})"
    );
}

/// Writes of every kind to window filters over `duration_ms`, a step every ~120 ms so that they
/// fall in many generations: new items, repeated items that only refresh (or change nothing but
/// the filter's time), BF.INSERT into an existing filter and one created mid-way, client
/// BF.ADDAT from the past and ahead of the clock, a window at 1e-7 (its slots in lines, encoding
/// version 2) and a plain filter alongside. `between` runs after each step.
fn window_workload(c: &mut Connection, duration_ms: u64, mut between: impl FnMut(u32)) {
    raw_ok(
        c,
        &["BF.RESERVE", "reserved", "0.01", "500", "WINDOW", "1000"],
    );
    raw_ok(
        c,
        &["BF.RESERVE", "lines", "1e-7", "600000", "WINDOW", "1000"],
    );
    raw_ok(
        c,
        &[
            "BF.INSERT",
            "inserted",
            "CAPACITY",
            "300",
            "ERROR",
            "0.001",
            "WINDOW",
            "1500",
            "ITEMS",
            "a",
            "b",
        ],
    );
    raw_ok(c, &["BF.ADD", "plain", "x"]);
    let start = now_ms();
    let mut step = 0u32;
    let mut last = Vec::new();
    while now_ms() < start + duration_ms {
        let fresh = items(&format!("s{step}"), 20);
        match step % 6 {
            0 => {
                madd(c, "reserved", &fresh);
                madd(c, "lines", &fresh);
                last = fresh;
            }
            // The same items again: refreshes only (the first may be new to this generation).
            1 => {
                madd(c, "reserved", &last);
                madd(c, "lines", &last);
            }
            2 => {
                let mut args: Vec<&str> = vec!["BF.INSERT", "inserted", "ITEMS"];
                args.extend(fresh.iter().map(String::as_str));
                args.extend(["a", "b"]);
                raw_ok(c, &args);
            }
            // A client's timestamp from the past counts as the filter's latest; one ahead of
            // the clock (by less than a window) becomes it, and the writes after it use it.
            3 => {
                let past = (now_ms() - 5000).to_string();
                raw_ok(
                    c,
                    &["BF.ADDAT", "reserved", &past, "from-the-past", &fresh[0]],
                );
                let ahead = (now_ms() + 400).to_string();
                raw_ok(c, &["BF.ADDAT", "lines", &ahead, "ahead", &fresh[1]]);
                madd(c, "lines", &fresh[2..4]);
            }
            4 => {
                raw_ok(c, &["BF.ADD", "reserved", "a"]);
                raw_ok(c, &["BF.ADD", "reserved", "a"]);
                raw_ok(c, &["BF.MADD", "plain", &fresh[0], &fresh[1]]);
            }
            _ => {
                raw_ok(
                    c,
                    &[
                        "BF.INSERT",
                        "late",
                        "CAPACITY",
                        "100",
                        "WINDOW",
                        "1200",
                        "ITEMS",
                        &fresh[0],
                    ],
                );
            }
        }
        between(step);
        step += 1;
        std::thread::sleep(Duration::from_millis(120));
    }
}

#[test]
fn replicas_hold_the_same_bits_after_writes_over_several_windows() {
    let primary = Server::start();
    let replica = Server::start();
    replicate_from(&primary, &replica);
    let mut pc = primary.conn();
    let mut rc = replica.conn();
    let mut checkpoint = primary.conn();
    window_workload(&mut pc, 4500, |step| {
        // Mid-stream too: the replica follows every write as it happens.
        if step % 10 == 9 {
            wait_synced(&mut checkpoint, &mut [&mut rc]);
            assert_same_filters(&mut checkpoint, &mut rc, &format!("step {step}"));
        }
    });
    wait_synced(&mut pc, &mut [&mut rc]);
    assert_same_filters(&mut pc, &mut rc, "after the workload");
    // Answers on the replica come from its own clock and the same bits.
    let fresh = items("final", 50);
    madd(&mut pc, "reserved", &fresh);
    let at = last_write(&mut pc, "reserved");
    wait_synced(&mut pc, &mut [&mut rc]);
    let check = timed(|| mexists(&mut rc, "reserved", &fresh));
    if check.received <= at + 1000 {
        assert_eq!(count_true(&check.value), fresh.len());
    }
    // A replica attached now gets the filters by a full sync (RDB) and holds the same bits.
    let late = Server::start();
    replicate_from(&primary, &late);
    let mut lc = late.conn();
    wait_synced(&mut pc, &mut [&mut rc, &mut lc]);
    assert_same_filters(&mut pc, &mut lc, "full sync");
    // Writes after the full sync still reach both alike.
    raw_ok(&mut pc, &["BF.MADD", "reserved", "after", "sync"]);
    raw_ok(&mut pc, &["BF.INSERT", "inserted", "ITEMS", "after"]);
    wait_synced(&mut pc, &mut [&mut rc, &mut lc]);
    assert_same_filters(&mut pc, &mut rc, "after the full sync");
    assert_same_filters(&mut pc, &mut lc, "after the full sync (late replica)");
}

// ---------------------------------------------------------------------------------------------
// (d) AOF
// ---------------------------------------------------------------------------------------------

/// Every key's digest and filter time, and the dataset digest.
fn snapshot(c: &mut Connection) -> Vec<(String, String, Option<u64>)> {
    let mut out: Vec<(String, String, Option<u64>)> = all_keys(c)
        .iter()
        .map(|key| {
            let key = String::from_utf8_lossy(key).into_owned();
            let windowed = info_of(c, &key).iter().any(|(n, _)| n == "Last write (ms)");
            let last = windowed.then(|| last_write(c, &key));
            (key.clone(), digest(c, &key), last)
        })
        .collect();
    out.push(("<DEBUG DIGEST>".into(), dataset_digest(c), None));
    out
}

#[test]
fn aof_replay_after_kill_9_gives_the_same_bits() {
    let mut server = Server::start_with(&AOF);
    let mut c = server.conn();
    window_workload(&mut c, 2500, |_| {});
    let last = items("last", 50);
    madd(&mut c, "reserved", &last);
    let at = last_write(&mut c, "reserved");
    let before = snapshot(&mut c);
    assert!(before.len() >= 5, "{before:?}");
    server.kill9();
    server.start_again();
    let mut c = server.conn();
    assert_eq!(snapshot(&mut c), before, "after kill -9 and AOF replay");
    let check = timed(|| mexists(&mut c, "reserved", &last));
    if check.received <= at + 1000 {
        assert_eq!(count_true(&check.value), last.len());
    }
    // The same after a rewrite (BF.LOADCHUNK commands) followed by more windowed writes.
    raw_ok(&mut c, &["CONFIG", "SET", "aof-use-rdb-preamble", "no"]);
    wait_rewrite_done(&mut c);
    raw_ok(&mut c, &["BGREWRITEAOF"]);
    wait_rewrite_done(&mut c);
    for round in 0..5 {
        raw_ok(&mut c, &["BF.MADD", "reserved", &format!("r{round}"), "a"]);
        raw_ok(
            &mut c,
            &["BF.INSERT", "inserted", "ITEMS", &format!("r{round}")],
        );
        std::thread::sleep(Duration::from_millis(150));
    }
    let before = snapshot(&mut c);
    server.kill9();
    server.start_again();
    let mut c = server.conn();
    assert_eq!(
        snapshot(&mut c),
        before,
        "after a rewrite, writes, kill -9 and replay"
    );
}

#[test]
fn an_aof_replayed_after_the_window_holds_nothing_old_but_keeps_the_filter() {
    const W: u64 = 1000;
    let mut server = Server::start_with(&AOF);
    let mut c = server.conn();
    raw_ok(
        &mut c,
        &["BF.RESERVE", "w", "0.01", "1000", "WINDOW", "1000"],
    );
    let old = items("old", 500);
    madd(&mut c, "w", &old[..250]);
    std::thread::sleep(Duration::from_millis(400));
    madd(&mut c, "w", &old[250..]);
    let mut args = vec!["BF.INSERT", "i", "WINDOW", "1500", "ITEMS"];
    args.extend(old.iter().map(String::as_str));
    raw_ok(&mut c, &args);
    let before = snapshot(&mut c);
    let latest = last_write(&mut c, "i").max(last_write(&mut c, "w"));
    server.kill9();
    // Replayed two windows later: the writes carry their own timestamps, so the replay rebuilds
    // the same bits, and they answer nothing any more.
    sleep_until(latest + 2 * 1500 + 1);
    server.start_again();
    let mut c = server.conn();
    assert_eq!(snapshot(&mut c), before, "the replay reached other bits");
    for (key, window) in [("w", W), ("i", 1500)] {
        assert_eq!(key_type(&mut c, key), "MBbloom--");
        assert_eq!(count_true(&mexists(&mut c, key, &old)), 0, "{key}");
        assert_eq!(card(&mut c, key), 0, "{key}");
        assert_eq!(info_int(&mut c, key, "Window (ms)"), window as i64);
        // And the filter works on: a new item answers within its window.
        let add = timed(|| as_int(&raw_ok(&mut c, &["BF.ADD", key, "new"])));
        assert_eq!(add.value, 1, "{key}");
        let check = timed(|| as_int(&raw_ok(&mut c, &["BF.EXISTS", key, "new"])));
        if check.received <= add.sent + window {
            assert_eq!(check.value, 1, "{key}");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// (e) Restarts across a window boundary
// ---------------------------------------------------------------------------------------------

/// Old items, then new ones in the last half-window before the old ones go; `reload`; then,
/// once the old ones are past their forgetting moment and the new ones still inside their
/// window, the new ones answer and the old ones do not. Err when the machine was too slow for
/// a conclusive check.
fn across_a_boundary(
    server: &mut Server,
    key: &str,
    reload: fn(&mut Server),
) -> Result<(), String> {
    const W: u64 = 2000;
    const ERROR: f64 = 0.01;
    let mut c = server.conn();
    raw_ok(
        &mut c,
        &["BF.RESERVE", key, "0.01", "1000", "WINDOW", "2000"],
    );
    let old = items(&format!("{key}-old"), 500);
    madd(&mut c, key, &old);
    let t1 = last_write(&mut c, key);
    let gone = forgotten_at(t1, W);
    sleep_until(gone - W / 2);
    let new = items(&format!("{key}-new"), 100);
    madd(&mut c, key, &new);
    let t2 = last_write(&mut c, key);
    if t2 >= gone {
        return Err(format!(
            "new items written at {t2}, after the old ones went at {gone}"
        ));
    }
    let before = digest(&mut c, key);
    reload(server);
    let mut c = server.conn();
    assert_eq!(digest(&mut c, key), before, "{key}: reloaded bits differ");
    assert_eq!(last_write(&mut c, key), t2);
    let check = timed(|| (mexists(&mut c, key, &old), mexists(&mut c, key, &new)));
    if check.received < gone {
        assert_eq!(
            count_true(&check.value.0),
            old.len(),
            "{key}: old items inside"
        );
        assert_eq!(
            count_true(&check.value.1),
            new.len(),
            "{key}: new items inside"
        );
    }
    sleep_until(gone);
    let check = timed(|| (mexists(&mut c, key, &old), mexists(&mut c, key, &new)));
    let stale = count_true(&check.value.0);
    assert!(
        stale as f64 <= 3.0 * ERROR * old.len() as f64,
        "{key}: {stale} old items answer after {gone}"
    );
    if check.received > t2 + W {
        return Err(format!(
            "checked at {}, after the new items' window",
            check.received
        ));
    }
    assert_eq!(
        count_true(&check.value.1),
        new.len(),
        "{key}: new items after the reload"
    );
    Ok(())
}

#[test]
fn save_and_restart_across_a_window_boundary() {
    let mut server = Server::start();
    let mut failures = Vec::new();
    for attempt in 0..3 {
        let save_restart: fn(&mut Server) = |s| {
            raw_ok(&mut s.conn(), &["SAVE"]);
            s.restart();
        };
        match across_a_boundary(&mut server, &format!("saved{attempt}"), save_restart) {
            Ok(()) => return,
            Err(why) => failures.push(why),
        }
    }
    panic!("no conclusive attempt: {failures:?}");
}

#[test]
fn debug_reload_across_a_window_boundary() {
    let mut server = Server::start();
    let mut failures = Vec::new();
    for attempt in 0..3 {
        let reload: fn(&mut Server) = |s| {
            raw_ok(&mut s.conn(), &["DEBUG", "RELOAD"]);
        };
        match across_a_boundary(&mut server, &format!("reloaded{attempt}"), reload) {
            Ok(()) => return,
            Err(why) => failures.push(why),
        }
    }
    panic!("no conclusive attempt: {failures:?}");
}

// ---------------------------------------------------------------------------------------------
// (f) Copies and memory
// ---------------------------------------------------------------------------------------------

/// MEXISTS of `probes`, BF.CARD and BF.INFO of each key, in one MULTI/EXEC run inside one
/// generation of `generation_ms` (retried until it is): copies of one filter must answer alike.
fn answers_in_one_generation(
    c: &mut Connection,
    keys: &[&str],
    probes: &[String],
    generation_ms: u64,
) -> Vec<Value> {
    for _ in 0..10 {
        let mut pipe = redis::pipe();
        pipe.atomic();
        for key in keys {
            pipe.cmd("BF.MEXISTS").arg(*key).arg(probes);
            pipe.cmd("BF.CARD").arg(*key);
            pipe.cmd("BF.INFO").arg(*key);
        }
        let run = timed(|| pipe.query::<Vec<Value>>(c).expect("MULTI/EXEC"));
        if run.sent / generation_ms == run.received / generation_ms {
            return run.value;
        }
    }
    panic!("no run within one generation");
}

#[test]
fn dump_restore_copy_and_scandump_give_the_same_filter() {
    // A long window: these copies are checked for identity, not for time.
    const G: u64 = 20_000;
    let server = Server::start();
    let other = Server::start();
    let mut c = server.conn();
    let mut c2 = server.conn();
    let mut oc = other.conn();
    raw_ok(
        &mut c,
        &["BF.RESERVE", "src", "0.01", "5000", "WINDOW", "60000"],
    );
    raw_ok(
        &mut c,
        &[
            "BF.INSERT",
            "big",
            "CAPACITY",
            "6000000",
            "ERROR",
            "0.001",
            "WINDOW",
            "60000",
            "ITEMS",
            "a",
        ],
    );
    let added = items("x", 3000);
    madd(&mut c, "src", &added[..1500]);
    madd(&mut c, "big", &added);
    std::thread::sleep(Duration::from_millis(20));
    let past = (now_ms() - 100_000).to_string();
    raw_ok(&mut c, &["BF.ADDAT", "src", &past, "from-the-past"]);
    madd(&mut c, "src", &added[1500..]);
    let mut probes = added.clone();
    probes.extend(items("absent", 3000));
    for source in ["src", "big"] {
        let payload: Vec<u8> = redis::cmd("DUMP").arg(source).query(&mut c).unwrap();
        let restored = format!("{source}-restored");
        let copied = format!("{source}-copied");
        let loaded = format!("{source}-loaded");
        raw_ok(
            &mut c,
            &[
                b"RESTORE".as_slice(),
                restored.as_bytes(),
                b"0".as_slice(),
                &payload,
            ],
        );
        raw_ok(
            &mut oc,
            &[
                b"RESTORE".as_slice(),
                source.as_bytes(),
                b"0".as_slice(),
                &payload,
            ],
        );
        raw_ok(&mut c, &["COPY", source, &copied]);
        let chunks = scandump(&mut c, source);
        if source == "big" {
            assert!(chunks.len() > 2, "a big filter moves in several chunks");
        }
        loadchunks(&mut c, &loaded, &chunks);
        let copies = [source, &restored, &copied, &loaded];
        for copy in &copies[1..] {
            assert_same_digest(&mut c, source, &mut c2, copy);
        }
        assert_same_digest(&mut c, source, &mut oc, source);
        let usage: Vec<i64> = copies
            .iter()
            .map(|k| as_int(&raw_ok(&mut c, &["MEMORY", "USAGE", k])))
            .collect();
        // MEMORY USAGE counts the key's name too, which differs by a few bytes.
        assert!(
            usage.iter().all(|&u| u.abs_diff(usage[0]) <= 32),
            "MEMORY USAGE {usage:?}"
        );
        // The same answers, counts and BF.INFO (the filter's time included) from every copy.
        let answers = answers_in_one_generation(&mut c, &copies, &probes, G);
        let per_key: Vec<&[Value]> = answers.chunks(3).collect();
        for (copy, got) in copies.iter().zip(&per_key) {
            assert_eq!(got, &per_key[0], "{copy} answers differently from {source}");
        }
        let found = as_ints(per_key[0][0].clone());
        assert!(
            found[..added.len()].iter().all(|&f| f == 1),
            "{source}: false negative"
        );
        // Written at the same explicit time, the copies stay identical.
        let at = (now_ms() + 10).to_string();
        for copy in copies {
            raw_ok(&mut c, &["BF.ADDAT", copy, &at, "later", "x:1"]);
        }
        raw_ok(&mut oc, &["BF.ADDAT", source, &at, "later", "x:1"]);
        for copy in &copies[1..] {
            assert_same_digest(&mut c, source, &mut c2, copy);
        }
        assert_same_digest(&mut c, source, &mut oc, source);
    }
}

/// Bits per windowed item against the classic optimum, and what the server reports.
#[test]
fn memory_is_within_2_1_times_a_classic_filter() {
    let server = Server::start();
    let mut c = server.conn();
    for (capacity, error) in [
        (100_000u64, 0.01),
        (100_000, 0.001),
        (100_000, 1e-7),
        (1_000, 0.01),
    ] {
        let key = format!("w-{capacity}-{error}");
        raw_ok(
            &mut c,
            &[
                "BF.RESERVE",
                &key,
                &error.to_string(),
                &capacity.to_string(),
                "WINDOW",
                "60000",
            ],
        );
        let header = as_array(raw_ok(&mut c, &["BF.SCANDUMP", &key, "0"]));
        let header = match &header[1] {
            Value::BulkString(bytes) => parse_header(bytes).expect("a window header"),
            other => panic!("{other:?}"),
        };
        let bits = header.shape.bytes() * 8;
        let classic = classic_bits(capacity, error);
        let ratio = bits as f64 / classic;
        assert!(ratio <= 2.1, "{key}: {ratio:.3}× the classic bits");
        // Size is the bits plus RedisBloom's bookkeeping figures (32, and 64 per slot); MEMORY
        // USAGE what the allocator hands out: the bits in a bit store (within 1/32 of them),
        // the ring's region table (a byte or two per 16 KiB of a slot) and a few hundred bytes
        // of bookkeeping.
        let size = info_int(&mut c, &key, "Size") as u64;
        let usage = as_int(&raw_ok(&mut c, &["MEMORY", "USAGE", &key])) as u64;
        assert_eq!(size, 32 + 4 * 64 + bits / 8, "{key}: Size");
        assert!(
            usage >= bits / 8 && usage <= allocated_bytes(bits / 8) + bits / 8 / 4096 + 1024,
            "{key}: MEMORY USAGE {usage} vs Size {size}"
        );
        let params = WindowParams {
            error_rate: error,
            capacity,
            window_ms: 60_000,
            seed: 0,
        };
        assert_eq!(Ok(allocated_bytes(bits / 8)), bytes_needed(&params));
        let classic_bytes = (classic / 8.0).ceil() as u64;
        assert!(
            size <= allocation_size((2.1 * classic / 8.0) as u64) + 512,
            "{key}: Size {size} against a classic {classic_bytes} bytes"
        );
        eprintln!(
            "{key}: {:.2} bits/item = {ratio:.3}× classic ({:.2}); Size {size} = {:.3}× classic bytes, MEMORY USAGE {usage}",
            bits as f64 / capacity as f64,
            classic / capacity as f64,
            size as f64 / classic_bytes as f64,
        );
    }
}

/// A RESTOREd payload may count as many adds in a slot as the slot has bits (the most the decoder
/// accepts) while its bits are not full: later adds must not count past that bound, or the
/// filter's own saves (RDB, DUMP, the digest's encoding) would be refused when loaded back, and
/// a restart would fail.
#[test]
fn a_restored_filter_with_full_slot_counts_still_saves_and_loads() {
    // Uncompressed strings in DUMP payloads, so that the header can be edited in place.
    let server = Server::start_with(&["--rdbcompression", "no"]);
    let mut c = server.conn();
    raw_ok(
        &mut c,
        &[
            "BF.RESERVE",
            "w",
            "0.01",
            "1000",
            "WINDOW",
            "60000",
            "SEED",
            "1",
        ],
    );
    raw_ok(&mut c, &["BF.ADD", "w", "x"]);
    let at = last_write(&mut c, "w").to_string();
    let payload: Vec<u8> = redis::cmd("DUMP").arg("w").query(&mut c).unwrap();
    // The header is the first string of the value: find it by its magic, set every slot's count
    // to the slot's bits, reseal it and the payload.
    let start = payload
        .windows(4)
        .position(|w| w == b"RBLW")
        .expect("a window header in the payload");
    let mut value = payload[..payload.len() - 10].to_vec();
    let header = &mut value[start..start + 104];
    let bits = rustbloom_testkit::payload::get(header, 48, 8);
    for slot in 0..4 {
        rustbloom_testkit::payload::put(header, 56 + 8 * slot, 8, bits);
    }
    rustbloom_testkit::payload::fix_xxh3(header);
    let version = [payload[payload.len() - 10], payload[payload.len() - 9]];
    let forged = rustbloom_testkit::payload::seal(value, version);
    raw_ok(
        &mut c,
        &[
            b"RESTORE".as_slice(),
            b"forged".as_slice(),
            b"0".as_slice(),
            &forged,
        ],
    );
    // New items at the filter's own time, in the same generation: they set new bits.
    raw_ok(&mut c, &["BF.ADDAT", "forged", &at, "y", "z", "new"]);
    let again: Vec<u8> = redis::cmd("DUMP").arg("forged").query(&mut c).unwrap();
    let restored = raw(
        &mut c,
        &[
            b"RESTORE".as_slice(),
            b"again".as_slice(),
            b"0".as_slice(),
            &again,
        ],
    );
    assert_eq!(
        restored,
        Ok(Value::Okay),
        "the filter's own DUMP is refused"
    );
    let mut c2 = server.conn();
    assert_same_digest(&mut c, "forged", &mut c2, "again");
    assert_eq!(raw_ok(&mut c, &["DEBUG", "RELOAD"]), Value::Okay);
    assert_eq!(key_type(&mut c, "forged"), "MBbloom--");
}

// ---------------------------------------------------------------------------------------------
// (g) The memory budget
// ---------------------------------------------------------------------------------------------

/// The allocator of the server behind `c` (Debian's Redis: jemalloc; PyPI's Valkey: libc), whose
/// usable sizes the module charges and reports.
fn server_allocator(c: &mut Connection) -> Allocator {
    if info_section(c, "memory").contains("mem_allocator:libc") {
        Allocator::Libc
    } else {
        Allocator::Jemalloc
    }
}

#[test]
fn a_window_filter_over_the_per_filter_limit_is_refused_and_creates_nothing() {
    let server = Server::start();
    let mut c = server.conn();
    let params = WindowParams {
        error_rate: 0.001,
        capacity: 200_000,
        window_ms: 1000,
        seed: 0,
    };
    let needed = allocated_bytes_by(server_allocator(&mut c), params.shape().unwrap().bytes());
    let limit = |c: &mut Connection, bytes: u64| {
        raw_ok(
            c,
            &["CONFIG", "SET", "bf.max-filter-bytes", &bytes.to_string()],
        );
    };
    limit(&mut c, needed - 1);
    for args in [
        &["BF.RESERVE", "big", "0.001", "200000", "WINDOW", "1000"][..],
        &[
            "BF.INSERT",
            "big",
            "CAPACITY",
            "200000",
            "ERROR",
            "0.001",
            "WINDOW",
            "1000",
            "ITEMS",
            "a",
        ],
    ] {
        let err = raw_err(&mut c, args);
        assert!(
            err.starts_with("ERR")
                && err.contains(&needed.to_string())
                && err.contains("bf.max-filter-bytes"),
            "{args:?}: {err}"
        );
        assert_no_key(&mut c, "big");
    }
    // At the limit exactly it fits.
    limit(&mut c, needed);
    raw_ok(
        &mut c,
        &["BF.RESERVE", "big", "0.001", "200000", "WINDOW", "1000"],
    );
    raw_ok(&mut c, &["BF.ADD", "big", "a"]);
    let usage = as_int(&raw_ok(&mut c, &["MEMORY", "USAGE", "big"])) as u64;
    assert!(usage >= needed, "MEMORY USAGE {usage}, charged {needed}");
    // Copies are charged like creations.
    let payload: Vec<u8> = redis::cmd("DUMP").arg("big").query(&mut c).unwrap();
    let chunks = scandump(&mut c, "big");
    limit(&mut c, needed - 1);
    assert!(raw(
        &mut c,
        &[
            b"RESTORE".as_slice(),
            b"restored".as_slice(),
            b"0".as_slice(),
            &payload
        ]
    )
    .is_err());
    assert_no_key(&mut c, "restored");
    assert!(raw(&mut c, &["COPY", "big", "copied"]).is_err());
    assert_no_key(&mut c, "copied");
    let header = &chunks[0];
    let err = raw_err(
        &mut c,
        &[
            b"BF.LOADCHUNK".as_slice(),
            b"loaded".as_slice(),
            header.0.to_string().as_bytes(),
            &header.1,
        ],
    );
    assert!(err.contains("bf.max-filter-bytes"), "{err}");
    assert_no_key(&mut c, "loaded");
    // The filter that exists keeps working under the lower limit (its bits never grow).
    assert_eq!(as_int(&raw_ok(&mut c, &["BF.ADD", "big", "b"])), 1);
}

// ---------------------------------------------------------------------------------------------
// (h) Soundness by construction: bounded writes, values that lie
// ---------------------------------------------------------------------------------------------

/// The `q`-quantile of round trips, in µs.
fn quantile_us(mut samples: Vec<u64>, q: f64) -> u64 {
    samples.sort_unstable();
    samples[((samples.len() - 1) as f64 * q) as usize]
}

/// A command's round trip, µs.
fn round_trip_us(c: &mut Connection, args: &[&str]) -> u64 {
    let start = std::time::Instant::now();
    raw_ok(c, args);
    start.elapsed().as_micros() as u64
}

/// `writes` BF.ADDs to `key`, each in a generation of its own (3 ms apart, generations of 2 ms),
/// while another client PINGs; the round trips of the writes and of the PINGs, µs.
fn writes_across_generations(server: &Server, key: &str, writes: usize) -> (Vec<u64>, Vec<u64>) {
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let mut w = server.conn();
        let (done, key) = (done.clone(), key.to_string());
        std::thread::spawn(move || {
            let took: Vec<u64> = (0..writes)
                .map(|i| {
                    std::thread::sleep(Duration::from_millis(3));
                    round_trip_us(&mut w, &["BF.ADD", &key, &format!("item-{i}")])
                })
                .collect();
            done.store(true, std::sync::atomic::Ordering::SeqCst);
            took
        })
    };
    let mut pinger = server.conn();
    let mut pings = Vec::new();
    while !done.load(std::sync::atomic::Ordering::SeqCst) {
        pings.push(round_trip_us(&mut pinger, &["PING"]));
        std::thread::sleep(Duration::from_micros(500));
    }
    (writer.join().expect("the writer"), pings)
}

/// A big filter with a tiny window starts a generation on every write here. Each such write
/// clears the new generation's slot only where its own probes land, so it takes about as long
/// as the same write to a small filter, and another client's PING waits about as long as
/// during writes to the small one (clearing the whole slot of a 270 MB filter took ~15 ms per
/// write, on the event loop). Ratios of the two, measured the same way on the same server.
#[test]
fn writes_across_generations_of_a_big_window_do_not_stall_other_clients() {
    let server = Server::start();
    let mut c = server.conn();
    raw_ok(
        &mut c,
        &["BF.RESERVE", "small", "0.01", "1000", "WINDOW", "4"],
    );
    // 120M items at 1%: about 270 MB of bits; a generation of 2 ms.
    raw_ok(
        &mut c,
        &["BF.RESERVE", "big", "0.01", "120000000", "WINDOW", "4"],
    );
    assert!(info_int(&mut c, "big", "Size") > 250_000_000);
    // Measured in alternating rounds of 50 writes, so that a load on the (shared) machine that
    // comes or goes during the test weighs on both filters' samples alike rather than on one.
    let (mut small_writes, mut small_pings, mut big_writes, mut big_pings) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..4 {
        let (writes, pings) = writes_across_generations(&server, "small", 50);
        small_writes.extend(writes);
        small_pings.extend(pings);
        let (writes, pings) = writes_across_generations(&server, "big", 50);
        big_writes.extend(writes);
        big_pings.extend(pings);
    }
    let (small_write, big_write) = (quantile_us(small_writes, 0.5), quantile_us(big_writes, 0.5));
    assert!(
        big_write <= 5 * small_write + 1000,
        "BF.ADD p50 {big_write} µs on the big filter vs {small_write} µs on the small one"
    );
    // PINGs that arrive during a write wait for it: the slowest tenth shows the stalls.
    let (small_ping, big_ping) = (quantile_us(small_pings, 0.9), quantile_us(big_pings, 0.9));
    assert!(
        big_ping <= 5 * small_ping + 2000,
        "PING p90 {big_ping} µs during writes to the big filter vs {small_ping} µs (small)"
    );
    // The big filter's writes each started a generation: its count is the newest ones only.
    assert!(card(&mut c, "big") < 200);
}

/// The header string of a DUMP payload taken with `--rdbcompression no`, located by its magic:
/// (payload without its 10-byte trailer, the header's start, the trailer's version).
fn dump_header(c: &mut Connection, key: &str) -> (Vec<u8>, usize, [u8; 2]) {
    let payload: Vec<u8> = redis::cmd("DUMP").arg(key).query(c).unwrap();
    let start = payload
        .windows(4)
        .position(|w| w == b"RBLW")
        .expect("a window header in the payload");
    let version = [payload[payload.len() - 10], payload[payload.len() - 9]];
    (payload[..payload.len() - 10].to_vec(), start, version)
}

fn restore(c: &mut Connection, key: &str, payload: &[u8]) -> Result<Value, String> {
    raw(
        c,
        &[
            b"RESTORE".as_slice(),
            key.as_bytes(),
            b"0".as_slice(),
            payload,
        ],
    )
}

/// A window value whose slot counts say "empty" over set bits, once never cleared (the ring
/// skipped slots counted empty) and so answering 1 forever: BF.LOADCHUNK refuses it; RESTORE
/// (which cannot refuse a value once its bits are read) counts its adds from its bits, and it
/// forgets as a real filter does. A value whose time is a day ahead of the server's clock is
/// refused by both, as BF.ADDAT refuses such a time.
#[test]
fn a_window_value_that_lies_is_refused_or_forgets() {
    const W: u64 = 1000;
    let server = Server::start_with(&["--rdbcompression", "no"]);
    let mut c = server.conn();
    raw_ok(
        &mut c,
        &["BF.RESERVE", "w", "0.01", "1000", "WINDOW", "1000"],
    );
    let items: Vec<String> = (0..50).map(|i| format!("item-{i}")).collect();
    madd(&mut c, "w", &items);
    let at = last_write(&mut c, "w");

    // BF.LOADCHUNK: every bit set, every count 0.
    let chunks = scandump(&mut c, "w");
    let mut header = chunks[0].1.clone();
    for slot in 0..4 {
        rustbloom_testkit::payload::put(&mut header, 56 + 8 * slot, 8, 0);
    }
    rustbloom_testkit::payload::fix_xxh3(&mut header);
    let bits_len = parse_header(&header)
        .expect("a forged but valid header")
        .shape
        .bytes();
    let ones = vec![0xffu8; bits_len as usize];
    let load = |c: &mut Connection, key: &str, it: i64, data: &[u8]| {
        raw(
            c,
            &[
                b"BF.LOADCHUNK".as_slice(),
                key.as_bytes(),
                it.to_string().as_bytes(),
                data,
            ],
        )
    };
    load(&mut c, "chunked", 1, &header).expect("the header");
    let chunk = rustbloom_testkit::payload::forge_chunk(&header, 0, &ones);
    let refused = load(&mut c, "chunked", 1 + bits_len as i64, &chunk);
    assert!(refused.is_err(), "{refused:?}");
    assert!(raw(&mut c, &["BF.EXISTS", "chunked", "anything"]).is_err());

    // RESTORE of the same lie (counts 0 over the real bits): loaded with counts from its bits.
    let (mut value, start, version) = dump_header(&mut c, "w");
    {
        let header = &mut value[start..start + 104];
        for slot in 0..4 {
            rustbloom_testkit::payload::put(header, 56 + 8 * slot, 8, 0);
        }
        rustbloom_testkit::payload::fix_xxh3(header);
    }
    let forged = rustbloom_testkit::payload::seal(value, version);
    assert_eq!(restore(&mut c, "restored", &forged), Ok(Value::Okay));
    assert!(card(&mut c, "restored") >= 1, "counts from its bits");
    assert!(mexists(&mut c, "restored", &items).iter().all(|&x| x));
    // Written to across the generations that follow, it forgets what it held.
    let g = generation_ms(W);
    for step in 1..=5 {
        sleep_until(at + step * g);
        raw_ok(&mut c, &["BF.ADD", "restored", &format!("later-{step}")]);
    }
    sleep_until(forgotten_at(at, W));
    let remembered = count_true(&mexists(&mut c, "restored", &items));
    assert!(
        remembered <= 2,
        "{remembered} of {} still answer",
        items.len()
    );

    // A time a day ahead of the clock: refused by RESTORE and BF.LOADCHUNK.
    let day_ahead = now_ms() + 86_400_000;
    let (mut ahead, start, version) = dump_header(&mut c, "w");
    {
        let header = &mut ahead[start..start + 104];
        rustbloom_testkit::payload::put(header, 40, 8, day_ahead);
        rustbloom_testkit::payload::fix_xxh3(header);
    }
    let ahead = rustbloom_testkit::payload::seal(ahead, version);
    assert!(restore(&mut c, "ahead", &ahead).is_err());
    assert_no_key(&mut c, "ahead");
    let mut header = chunks[0].1.clone();
    rustbloom_testkit::payload::put(&mut header, 40, 8, day_ahead);
    rustbloom_testkit::payload::fix_xxh3(&mut header);
    let err = load(&mut c, "ahead", 1, &header).expect_err("a header a day ahead");
    assert!(err.contains("ahead"), "{err}");
    assert_no_key(&mut c, "ahead");
}
