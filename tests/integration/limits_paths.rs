//! Limits on the paths that a check inside the command alone would miss: many small filters
//! created inside one script or transaction (Redis checks maxmemory once, at its start), a
//! client's RESTORE and COPY on a writable replica, and CONFIG GET of the string configs (which
//! must not leak a string per call).

use redis::{Connection, Value};
use rustbloom_testkit::hostile::{config_get, config_set};
use rustbloom_testkit::replication::{replicate_from, wait_synced};
use rustbloom_testkit::*;

const MAXMEMORY: u64 = 64 << 20;
/// Each filter of this capacity at 1% takes ~770 KB: under the 1 MiB above which every
/// command reads the server's headroom.
const SMALL_FILTER_CAPACITY: &str = "500000";
const SMALL_FILTER_MAX_BYTES: u64 = 1 << 20;
/// More filters than maxmemory holds (~98 MB).
const FILTERS: usize = 128;

fn start_with_maxmemory() -> Server {
    Server::start_with(&[
        "--maxmemory",
        &MAXMEMORY.to_string(),
        "--maxmemory-policy",
        "noeviction",
    ])
}

fn dbsize(c: &mut Connection) -> usize {
    as_int(&raw_ok(c, &["DBSIZE"])) as usize
}

/// Some filters were created, then the memory error stopped the rest, and used_memory stayed
/// within one filter of maxmemory.
#[track_caller]
fn assert_stopped_at_maxmemory(c: &mut Connection, error: &str, what: &str) {
    assert!(
        error.contains("maxmemory"),
        "{what}: not the memory error: {error}"
    );
    let created = dbsize(c);
    assert!(
        created > 10 && created < FILTERS,
        "{what}: {created} of {FILTERS} filters created"
    );
    let used = used_memory(c);
    assert!(
        used <= MAXMEMORY + SMALL_FILTER_MAX_BYTES,
        "{what}: used_memory {used} is more than one filter over maxmemory {MAXMEMORY}"
    );
}

#[test]
fn small_reserves_in_one_script_stop_at_maxmemory() {
    let server = start_with_maxmemory();
    let mut c = server.conn();
    let script = "for i = 1, tonumber(ARGV[1]) do \
                  redis.call('BF.RESERVE', 'f' .. i, '0.01', ARGV[2]) end return 1";
    let error = raw_err(
        &mut c,
        &[
            "EVAL",
            script,
            "0",
            &FILTERS.to_string(),
            SMALL_FILTER_CAPACITY,
        ],
    );
    assert_stopped_at_maxmemory(&mut c, &error, "EVAL");
}

#[test]
fn small_reserves_in_one_transaction_stop_at_maxmemory() {
    let server = start_with_maxmemory();
    let mut c = server.conn();
    raw_ok(&mut c, &["MULTI"]);
    for i in 0..FILTERS {
        let queued = raw_ok(
            &mut c,
            &[
                "BF.RESERVE",
                &format!("f{i}"),
                "0.01",
                SMALL_FILTER_CAPACITY,
            ],
        );
        assert_eq!(value_to_string(&queued), "QUEUED");
    }
    let replies = as_array(raw_ok(&mut c, &["EXEC"]));
    assert_eq!(replies.len(), FILTERS);
    let errors: Vec<String> = replies
        .iter()
        .filter_map(|reply| match reply {
            Value::ServerError(e) => Some(server_err_text(e)),
            _ => None,
        })
        .collect();
    let first = errors
        .first()
        .expect("no BF.RESERVE of the transaction was refused");
    assert_stopped_at_maxmemory(&mut c, first, "MULTI");
    assert_eq!(dbsize(&mut c), FILTERS - errors.len());
}

#[test]
fn writable_replica_charges_a_clients_restore_and_copy() {
    let primary = Server::start();
    let replica = Server::start_with(&["--replica-read-only", "no"]);
    replicate_from(&primary, &replica);
    let (mut pc, mut rc) = (primary.conn(), replica.conn());

    // A filter of ~12 KB made on the replica itself, then a cap far below it.
    raw_ok(&mut rc, &["BF.RESERVE", "local", "0.01", "10000"]);
    raw_ok(&mut rc, &["BF.ADD", "local", "item"]);
    let payload = match raw_ok(&mut rc, &["DUMP", "local"]) {
        Value::BulkString(bytes) => bytes,
        other => panic!("DUMP: {other:?}"),
    };
    config_set(&mut rc, "bf.max-filter-bytes", "1024");

    let restore: [&[u8]; 4] = [b"RESTORE", b"restored", b"0", &payload];
    // Redis answers a refused load with its own "Bad data format"; the log says why.
    rawb(&mut rc, &restore).expect_err("RESTORE over the cap was accepted");
    let log = replica.log();
    assert!(
        log.contains("RESTORE of 'restored' refused") && log.contains("bf.max-filter-bytes"),
        "the replica's log does not say why RESTORE was refused:\n{}",
        replica.log_tail()
    );
    raw_err(&mut rc, &["COPY", "local", "copied"]);
    assert_no_key(&mut rc, "restored");
    assert_no_key(&mut rc, "copied");

    // The primary's writes, over the replica's cap too, still apply.
    raw_ok(&mut pc, &["BF.RESERVE", "shared", "0.01", "10000"]);
    raw_ok(&mut pc, &["BF.ADD", "shared", "from-primary"]);
    wait_synced(&mut pc, &mut [&mut rc]);
    assert_eq!(
        as_int(&raw_ok(&mut rc, &["BF.EXISTS", "shared", "from-primary"])),
        1
    );
    assert_eq!(config_get(&mut rc, "bf.max-filter-bytes"), "1024");
}

/// used_memory after `calls` CONFIG GET of `name`, less before.
fn config_get_growth(c: &mut Connection, name: &str, calls: usize) -> i64 {
    let get = |c: &mut Connection, n: usize| {
        let mut pipe = redis::pipe();
        for _ in 0..n {
            pipe.cmd("CONFIG").arg("GET").arg(name);
        }
        let replies: Vec<Value> = pipe.query(c).expect("CONFIG GET");
        assert_eq!(replies.len(), n);
    };
    // The first calls allocate what stays (the string each getter keeps).
    get(c, 100);
    let before = used_memory(c);
    for _ in 0..calls / 1000 {
        get(c, 1000);
    }
    used_memory(c) as i64 - before as i64
}

#[test]
fn config_get_of_string_configs_does_not_leak() {
    let server = Server::start();
    let mut c = server.conn();
    let mut names = vec!["bf.error-rate"];
    if server_kind(&mut c).has_unprefixed_module_configs() {
        names.extend(["bf-error-rate", "bf-initial-size", "bf-expansion-factor"]);
    }
    for name in names {
        // A leak of one string per call would be ~640 KB here.
        let growth = config_get_growth(&mut c, name, 20_000);
        assert!(
            growth < 16 << 10,
            "20,000 CONFIG GET {name} grew used_memory by {growth} bytes"
        );
    }
}
