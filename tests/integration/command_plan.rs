//! Each command runs one plan (parse, one core operation, reply and replicate), checked in the
//! form a user would meet a breach of it: memory limits that one command, COPY or a lazily
//! zeroed reservation bypassed; a replica or an AOF replay that kept fewer items than its primary
//! accepted; a panic inside an array reply; a replica whose sizing differs; big filters freed on
//! the event loop; forged counts; bfctl.

use std::time::{Duration, Instant};

use redis::Connection;
use rustbloom_testkit::payload::{fix_xxh3, put};
use rustbloom_testkit::*;

/// Seconds per call of `args` over `calls` round trips.
fn per_call(c: &mut Connection, args: &[&str], calls: u32) -> f64 {
    let started = Instant::now();
    for _ in 0..calls {
        let _ = raw(c, args);
    }
    started.elapsed().as_secs_f64() / f64::from(calls)
}

#[test]
fn adds_to_a_filter_whose_growth_is_refused_cost_what_exists_costs() {
    let s = Server::start();
    let mut c = s.conn();
    // The next layer (10M items, a blocked layout that takes milliseconds to size) is over the
    // cap, so growth is refused; an add must not size it again each time.
    raw_ok(&mut c, &["CONFIG", "SET", "bf.max-filter-bytes", "1mb"]);
    raw_ok(
        &mut c,
        &["BF.RESERVE", "k", "0.01", "1000", "EXPANSION", "10000"],
    );
    // Fill the first layer (false positives do not count) until growth is refused.
    let mut refused = None;
    for i in 0..5000 {
        let item = format!("m:{i}");
        if let Err(e) = raw(&mut c, &["BF.ADD", "k", item.as_str()]) {
            refused = Some((e, item));
            break;
        }
    }
    let (refused, new_item) = refused.expect("growth must be refused");
    assert!(refused.contains("bf.max-filter-bytes"), "{refused}");

    let exists = per_call(&mut c, &["BF.EXISTS", "k", "m:1"], 300);
    let add_present = per_call(&mut c, &["BF.ADD", "k", "m:1"], 300);
    let add_refused = per_call(&mut c, &["BF.ADD", "k", new_item.as_str()], 300);
    // Both round trips are dominated by the socket; a sizing per call (~7 ms) would be 100× that.
    assert!(add_present < exists * 10.0, "{add_present} vs {exists}");
    assert!(add_refused < exists * 10.0, "{add_refused} vs {exists}");
}

#[test]
fn reservations_cannot_promise_more_memory_than_the_machine_has() {
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap();
    let field = |name: &str| -> u64 {
        meminfo
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|r| r.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .unwrap_or(0)
            * 1024
    };
    let available = field("MemAvailable:") + field("SwapFree:");
    let s = Server::start();
    let mut c = s.conn();
    raw_ok(&mut c, &["CONFIG", "SET", "bf.max-filter-bytes", "1000gb"]);
    // ~1.4 GB each at 1e-6 (lazily zeroed: reserving them makes nothing resident).
    let mut reserved = 0u64;
    let mut refusal = None;
    for i in 0..200 {
        let key = format!("big{i}");
        match raw(
            &mut c,
            &["BF.RESERVE", key.as_str(), "0.000001", "400000000"],
        ) {
            Ok(_) => reserved += memory_usage(&mut c, &key),
            Err(e) => {
                refusal = Some(e);
                break;
            }
        }
    }
    let refusal = refusal.expect("some reservation must be refused");
    assert!(refusal.contains("can be allocated"), "{refusal}");
    assert!(
        reserved <= available + (available / 20),
        "reserved {reserved} bytes with {available} available"
    );
    assert_eq!(
        raw_ok(&mut c, &["PING"]),
        redis::Value::SimpleString("PONG".into())
    );
}

#[test]
fn one_madd_crossing_two_layer_boundaries_is_checked_against_all_it_allocates() {
    let s = Server::start();
    let mut c = s.conn();
    let limit = used_memory(&mut c) + (10 << 20);
    raw_ok(&mut c, &["CONFIG", "SET", "maxmemory", &limit.to_string()]);
    // Layers of 1, 4096 and 16.7M items: one MADD of 4,300 reaches the third (29 MB).
    raw_ok(
        &mut c,
        &["BF.RESERVE", "a", "0.01", "1", "EXPANSION", "4096"],
    );
    let batch = items("i", 4300);
    let mut args = vec!["BF.MADD", "a"];
    args.extend(batch.iter().map(String::as_str));
    let reply = as_array(raw_ok(&mut c, &args));
    let added = reply.iter().filter(|v| **v == redis::Value::Int(1)).count();
    assert_eq!(added, 1 + 4096, "the items that fit the first two layers");
    match reply.last() {
        Some(redis::Value::ServerError(e)) => {
            let text = format!("{e:?}");
            assert!(text.contains("can be allocated"), "{text}");
        }
        other => panic!("expected the refusal last: {other:?}"),
    }
    assert_eq!(info(&mut c, "a").filters, 2);
    assert!(
        used_memory(&mut c) <= limit,
        "used_memory went past maxmemory"
    );
}

#[test]
fn copy_respects_the_filter_cap_and_maxmemory() {
    let s = Server::start();
    let mut c = s.conn();
    raw_ok(&mut c, &["BF.RESERVE", "src", "0.01", "10000000"]);
    raw_ok(&mut c, &["BF.ADD", "src", "x"]);
    raw_ok(&mut c, &["CONFIG", "SET", "bf.max-filter-bytes", "1mb"]);
    let refused = raw_err(&mut c, &["COPY", "src", "dst"]);
    assert!(refused.contains("copy"), "{refused}");
    assert!(!exists(&mut c, "dst"));
    assert!(
        s.log().contains("COPY of 'src' refused"),
        "the log says why"
    );

    raw_ok(&mut c, &["CONFIG", "SET", "bf.max-filter-bytes", "1gb"]);
    let limit = used_memory(&mut c) + (4 << 20);
    raw_ok(&mut c, &["CONFIG", "SET", "maxmemory", &limit.to_string()]);
    raw_err(&mut c, &["COPY", "src", "dst"]);
    assert!(!exists(&mut c, "dst"));
    raw_ok(&mut c, &["CONFIG", "SET", "maxmemory", "0"]);
    assert_eq!(as_int(&raw_ok(&mut c, &["COPY", "src", "dst"])), 1);
    assert_same_digest(&mut s.conn(), "src", &mut c, "dst");
}

#[test]
fn memory_usage_and_the_limits_count_what_the_allocator_hands_out() {
    let s = Server::start();
    let mut c = s.conn();
    let before = used_memory(&mut c);
    raw_ok(&mut c, &["BF.RESERVE", "k", "0.01", "100000000"]);
    let grown = used_memory(&mut c) - before;
    let usage = memory_usage(&mut c, "k");
    let ratio = usage as f64 / grown as f64;
    assert!(
        (0.97..=1.03).contains(&ratio),
        "MEMORY USAGE {usage} vs used_memory +{grown}"
    );
    // BF.INFO Size is the filter's own bytes; above 1 MiB its bits come in pieces, so what the
    // allocator adds to them (the piece table, the tail's size class) is a sliver.
    let info_size = info(&mut c, "k").size as u64;
    assert!(
        info_size <= usage && (usage - info_size) as f64 <= 0.001 * usage as f64,
        "BF.INFO Size {info_size}, MEMORY USAGE {usage}"
    );
}

#[test]
fn unlink_frees_big_filters_in_the_background() {
    let s = Server::start();
    let mut c = s.conn();
    let lazyfreed = |c: &mut Connection| -> u64 {
        info_field(&info_section(c, "memory"), "lazyfreed_objects")
            .and_then(|v| v.parse().ok())
            .expect("lazyfreed_objects")
    };
    raw_ok(&mut c, &["BF.RESERVE", "small", "0.01", "1000"]);
    raw_ok(&mut c, &["UNLINK", "small"]);
    assert_eq!(lazyfreed(&mut c), 0, "small filters are freed at once");
    raw_ok(&mut c, &["BF.RESERVE", "big", "0.01", "100000000"]);
    raw_ok(&mut c, &["BF.ADD", "big", "x"]);
    raw_ok(&mut c, &["UNLINK", "big"]);
    assert!(
        wait_until(Duration::from_secs(10), || lazyfreed(&mut c) == 1),
        "the 160 MB filter was not freed by the background thread"
    );
    raw_ok(&mut c, &["BF.RESERVE", "big2", "0.01", "100000000"]);
    raw_ok(&mut c, &["FLUSHALL", "ASYNC"]);
    assert!(wait_until(Duration::from_secs(10), || lazyfreed(&mut c) >= 2));
}

#[test]
fn forged_loadchunk_headers_cannot_claim_impossible_counts() {
    let s = Server::start();
    let mut c = s.conn();
    raw_ok(
        &mut c,
        &["BF.RESERVE", "src", "0.01", "1000", "EXPANSION", "2"],
    );
    let chunks = scandump(&mut c, "src");
    let honest = chunks[0].1.clone();
    let layer = 48;
    // A layer claiming 2^30 items in its few bits, and one with 255 hashes.
    for (what, at, value) in [("items", layer, 1u64 << 30), ("hashes", layer + 16, 255)] {
        let mut header = honest.clone();
        let size = if what == "hashes" { 4 } else { 8 };
        put(&mut header, at, size, value);
        fix_xxh3(&mut header);
        let refused = raw_err(&mut c, &[b"BF.LOADCHUNK".as_slice(), b"dst", b"1", &header]);
        assert_eq!(refused, "ERR received bad data", "{what}");
        assert!(!exists(&mut c, "dst"), "{what}");
    }
    // 35 full layers whose counts add up past 2^63.
    let layers = 35usize;
    let mut header = honest[..48].to_vec();
    put(&mut header, 24, 8, 1 << 30);
    put(&mut header, 36, 4, layers as u64);
    put(&mut header, 40, 8, 0);
    for index in 0..layers {
        let mut record = vec![0u8; 24];
        put(&mut record, 0, 8, (1u64 << 30) << index.min(33));
        put(&mut record, 8, 8, 1 << 40);
        put(&mut record, 16, 4, 8);
        header.extend(record);
    }
    header.extend([0u8; 8]);
    fix_xxh3(&mut header);
    assert_eq!(
        raw_err(&mut c, &[b"BF.LOADCHUNK".as_slice(), b"dst", b"1", &header]),
        "ERR received bad data"
    );
    let gauge = info_field(&info_section(&mut c, "bf"), "bf_items").unwrap();
    assert_eq!(gauge, "0");
}

#[test]
fn a_replica_whose_sizing_differs_stays_identical() {
    let primary = Server::start_with(&["--enable-debug-command", "yes"]);
    let replica = Server::start_custom(
        &["--enable-debug-command", "yes"],
        &test_hooks_module(),
        &[],
    );
    replicate_from(&primary, &replica);
    let mut pc = primary.conn();
    let mut rc = replica.conn();
    raw_ok(&mut pc, &["BF.RESERVE", "r", "0.01", "100"]);
    madd_all(&mut pc, "r", &items("a", 5000));
    let mut args = vec!["BF.INSERT", "i", "CAPACITY", "50", "ITEMS"];
    let more = items("b", 700);
    args.extend(more.iter().map(String::as_str));
    raw_ok(&mut pc, &args);
    raw_ok(&mut pc, &["BF.ADD", "single", "x"]);
    wait_synced(&mut pc, &mut [&mut rc]);
    for key in ["r", "i", "single"] {
        assert!(info(&mut pc, key).filters >= 1);
        assert_same_digest(&mut pc, key, &mut rc, key);
    }
    assert!(
        info(&mut pc, "r").filters >= 5,
        "the filter grew several times"
    );
    // The replica's own sizing does differ: a filter it creates itself is not the primary's.
    let alone_server = Server::start_custom(&[], &test_hooks_module(), &[]);
    let mut alone = alone_server.conn();
    raw_ok(
        &mut alone,
        &["BF.RESERVE", "probe", "0.01", "100", "SEED", "1"],
    );
    raw_ok(
        &mut pc,
        &["BF.RESERVE", "probe", "0.01", "100", "SEED", "1"],
    );
    assert_ne!(digest(&mut alone, "probe"), digest(&mut pc, "probe"));
}

#[test]
fn a_panic_inside_an_array_reply_answers_one_error_and_replicates_what_was_added() {
    let module = test_hooks_module();
    let primary = Server::start_custom(&["--enable-debug-command", "yes"], &module, &[]);
    let replica = Server::start_custom(&["--enable-debug-command", "yes"], &module, &[]);
    replicate_from(&primary, &replica);
    let mut pc = primary.conn();
    let mut rc = replica.conn();
    raw_ok(&mut pc, &["BF.RESERVE", "k", "0.01", "1000"]);
    let before: Vec<String> = (0..40).map(|i| format!("x{i}")).collect();
    let mut args = vec!["BF.MADD", "k"];
    args.extend(before.iter().map(String::as_str));
    args.extend(["rustbloom-test-panic", "after"]);
    assert_eq!(raw_err(&mut pc, &args), "ERR internal error in rustbloom");
    // Batches hash 32 items ahead: the first 32 were added before the panic.
    assert_eq!(as_int(&raw_ok(&mut pc, &["BF.CARD", "k"])), 32);
    assert!(primary.log().contains("an add failed internally"));
    let mut args = vec!["BF.INSERT", "k", "ITEMS", "rustbloom-test-panic"];
    assert_eq!(raw_err(&mut pc, &args), "ERR internal error in rustbloom");
    // A lookup of several items (one is answered without a batch).
    args[0] = "BF.MEXISTS";
    args[2] = "x0";
    assert_eq!(raw_err(&mut pc, &args), "ERR internal error in rustbloom");
    // The same in a filter of one layer in lines (1.2 MB), which a lookup takes another way.
    raw_ok(&mut pc, &["BF.RESERVE", "lines", "0.01", "1000000"]);
    args[1] = "lines";
    assert_eq!(raw_err(&mut pc, &args), "ERR internal error in rustbloom");
    // The server is alive, answers well-formed replies, and its replica has what it has.
    assert_eq!(
        as_ints(raw_ok(&mut pc, &["BF.MEXISTS", "k", "x0", "nope"])),
        vec![1, 0]
    );
    wait_synced(&mut pc, &mut [&mut rc]);
    assert_same_digest(&mut pc, "k", &mut rc, "k");
}

/// A primary that grows `key` to a second layer of about 1 GB, which a server limited to 400 MB
/// of address space cannot allocate.
fn grow_to_a_gigabyte(c: &mut Connection, key: &str) {
    raw_ok(c, &["CONFIG", "SET", "bf.max-filter-bytes", "4gb"]);
    raw_ok(
        c,
        &["BF.RESERVE", key, "0.01", "20000", "EXPANSION", "32768"],
    );
    madd_all(c, key, &items("u", 20_990));
    assert_eq!(info(c, key).filters, 2);
}

const ADDRESS_SPACE_LIMIT: &str = "--as=400000000";

#[test]
fn a_replica_that_cannot_allocate_what_its_primary_grew_stops_loudly() {
    let primary = Server::start();
    let mut replica = Server::start_custom(&[], &module_path(), &["prlimit", ADDRESS_SPACE_LIMIT]);
    replicate_from(&primary, &replica);
    let mut pc = primary.conn();
    grow_to_a_gigabyte(&mut pc, "k");
    assert!(
        wait_until(Duration::from_secs(30), || !replica.is_alive()),
        "the replica kept serving without the primary's second layer"
    );
    let log = replica.log();
    assert!(
        log.contains("rustbloom: cannot apply a replicated or AOF write to key 'k'"),
        "{log}"
    );
    assert!(log.contains("stopping the server"), "{log}");
}

#[test]
fn an_aof_replay_that_cannot_allocate_stops_instead_of_dropping_items() {
    let mut s = Server::start_with(&["--appendonly", "yes", "--aof-use-rdb-preamble", "no"]);
    let mut c = s.conn();
    grow_to_a_gigabyte(&mut c, "k");
    drop(c);
    s.stop();
    let log = match s.try_start_again_with_wrapper(&["prlimit", ADDRESS_SPACE_LIMIT]) {
        Ok(()) => panic!("the server started from its AOF without the 1 GB layer"),
        Err(log) => log,
    };
    assert!(
        log.contains("cannot apply a replicated or AOF write to key 'k'"),
        "{log}"
    );
}

#[test]
fn make_build_builds_bfctl_beside_the_module() {
    let bfctl = module_path().with_file_name("bfctl");
    assert!(
        bfctl.exists(),
        "{} missing: make build must build bfctl",
        bfctl.display()
    );
    let help = std::process::Command::new(&bfctl)
        .arg("--help")
        .output()
        .unwrap();
    assert!(help.status.success());
    assert!(String::from_utf8_lossy(&help.stdout).contains("plan"));
}
