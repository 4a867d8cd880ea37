//! AOF durability: filters of every shape come back identical from a restart on the AOF, as
//! appended or rewritten (with and without the RDB preamble); nothing acknowledged is lost across
//! `kill -9`; and BGREWRITEAOF rebuilds every filter exactly, the big, the half-loaded and the
//! expiring ones included.
//!
//! The kill -9 test runs a deterministic script of BF.* writes against a server with
//! `appendonly yes` + `appendfsync always`, from a writer thread that records every reply it got,
//! and kills the server with SIGKILL while the writer is mid-stream. Redis writes and fsyncs the
//! AOF before it sends any reply (beforeSleep flushes the AOF before handling pending writes), so
//! every acknowledged command must be in the file. The writer sends one command at a time, so at
//! most one command — the one in flight when the server died — was sent but not acknowledged; it
//! may or may not have reached the file (a partial tail is truncated at load, a half-written
//! MULTI/EXEC block is dropped). So after restart the dataset must equal exactly the state after
//! the last acknowledged command, or the state after one more. Both states are computed by
//! replaying the same script on a reference server (every filter is created with a fixed seed, so
//! replay is deterministic) and compared with `DEBUG DIGEST-VALUE` per key, `DEBUG DIGEST`,
//! BF.INFO and BF.CARD. The reference's replies must also equal the replies the killed server
//! gave, which checks that the script really is deterministic.
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use redis::{Connection, ConnectionLike, Value};
use rustbloom_testkit::*;

fn rewrite(c: &mut Connection, preamble: &str) {
    raw_ok(c, &["CONFIG", "SET", "aof-use-rdb-preamble", preamble]);
    wait_rewrite_done(c);
    raw_ok(c, &["BGREWRITEAOF"]);
    wait_rewrite_done(c);
}

// ---------------------------------------------------------------------------------------------
// Restarts on the AOF
// ---------------------------------------------------------------------------------------------

fn aof_roundtrip(preamble: &str, rewrite: bool) {
    let mut s = start_aof(preamble);
    let mut c = s.conn();
    let f = VariedFilters::create(&mut c);
    let before = f.snapshot(&mut c);
    if rewrite {
        raw_ok(&mut c, &["BGREWRITEAOF"]);
        wait_rewrite_done(&mut c);
    }
    drop(c);
    s.restart();
    let mut c = s.conn();
    f.assert_unchanged(
        &mut c,
        &before,
        &format!("AOF restart (preamble {preamble}, rewrite {rewrite})"),
    );
}

#[test]
fn aof_restart_keeps_filters() {
    aof_roundtrip("no", false);
}

#[test]
fn aof_rewrite_without_rdb_preamble_then_restart() {
    // With the preamble off the rewrite uses the module's AOF rewrite callback.
    aof_roundtrip("no", true);
}

#[test]
fn aof_rewrite_with_rdb_preamble_then_restart() {
    aof_roundtrip("yes", true);
}

#[test]
fn aof_rewrite_big_filter_in_pieces() {
    let mut s = start_aof("no");
    let mut c = s.conn();
    raw_ok(
        &mut c,
        &["BF.RESERVE", "big", "0.001", "10000000", "EXPANSION", "2"],
    );
    let its = items("b", 3000);
    madd_all(&mut c, "big", &its);
    let d = digest(&mut c, "big");
    raw_ok(&mut c, &["BGREWRITEAOF"]);
    wait_rewrite_done(&mut c);
    drop(c);
    s.restart();
    let mut c = s.conn();
    assert_eq!(d, digest(&mut c, "big"));
    assert_all_exist(&mut c, "big", &its);
    // Writes after the rewrite are appended and replayed too.
    raw_ok(&mut c, &["BF.ADD", "big", "after-rewrite"]);
    let d2 = digest(&mut c, "big");
    drop(c);
    s.restart();
    let mut c = s.conn();
    assert_eq!(d2, digest(&mut c, "big"));
}

#[test]
fn aof_replays_commands_identically() {
    // Without rewrite, the AOF holds the commands as propagated: a random-seed auto-created filter
    // must come back identical (so creation must be logged with an explicit seed).
    let mut s = start_aof("yes");
    let mut c = s.conn();
    raw_ok(&mut c, &["BF.ADD", "a", "1"]);
    raw_ok(
        &mut c,
        &["BF.INSERT", "b", "CAPACITY", "20", "ITEMS", "1", "2"],
    );
    raw_ok(&mut c, &["BF.RESERVE", "c", "0.01", "10"]);
    madd_all(&mut c, "c", &items("c", 200));
    let da = digest(&mut c, "a");
    let db = digest(&mut c, "b");
    let dc = digest(&mut c, "c");
    drop(c);
    s.restart();
    let mut c = s.conn();
    assert_eq!(da, digest(&mut c, "a"));
    assert_eq!(db, digest(&mut c, "b"));
    assert_eq!(dc, digest(&mut c, "c"));
}

// ---------------------------------------------------------------------------------------------
// The script
// ---------------------------------------------------------------------------------------------

/// One scripted write: its arguments and the items it adds, in argument order.
#[derive(Clone, Debug)]
struct Step {
    args: Vec<String>,
    key: String,
    items: Vec<String>,
}

/// A reply as the client saw it: a value (arrays keep nested errors) or a top-level error.
#[derive(Clone, Debug, PartialEq)]
enum Reply {
    Value(Value),
    Error(String),
}

/// A deterministic mix of BF.MADD / BF.INSERT (creating with explicit options, or NOCREATE),
/// BF.ADD, BF.RESERVE with a seed, auto-creation (the servers run `bf.seed-mode fixed`), repeated
/// items, and a small non-scaling filter that fills up mid-script (its MADD/INSERT replies then
/// carry `ERR non scaling filter is full` and stop).
fn script(len: usize) -> Vec<Step> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0xA0F);
    let mut steps = Vec::with_capacity(len);
    let mut existing: Vec<String> = Vec::new();
    let mut all_items: Vec<String> = Vec::new();
    let mut next_key = 0usize;
    let mut item_no = 0usize;
    let mut fresh = |n: usize, all: &mut Vec<String>, rng: &mut rand_chacha::ChaCha8Rng| {
        let mut v = Vec::new();
        for _ in 0..n {
            // One item in ten repeats an earlier one (answers 0, changes nothing).
            if !all.is_empty() && rng.random_range(0..10) == 0 {
                let i = rng.random_range(0..all.len());
                v.push(all[i].clone());
            } else {
                let it = format!("item:{item_no}:{}", rng.random::<u32>());
                item_no += 1;
                all.push(it.clone());
                v.push(it);
            }
        }
        v
    };
    for i in 0..len {
        if i == 5 {
            // The non-scaling filter that fills up.
            steps.push(Step {
                args: vec![
                    "BF.RESERVE".into(),
                    "ns".into(),
                    "0.01".into(),
                    "400".into(),
                    "NONSCALING".into(),
                    "SEED".into(),
                    "99".into(),
                ],
                key: "ns".into(),
                items: vec![],
            });
            continue;
        }
        let roll = rng.random_range(0..100);
        let new_key = existing.is_empty() || (roll < 6 && existing.len() < 40);
        if new_key {
            let key = format!("k{next_key}");
            next_key += 1;
            let items = fresh(rng.random_range(1..30), &mut all_items, &mut rng);
            let mut args: Vec<String>;
            match next_key % 4 {
                0 => {
                    args = vec![
                        "BF.INSERT".into(),
                        key.clone(),
                        "CAPACITY".into(),
                        rng.random_range(20..200).to_string(),
                        "ERROR".into(),
                        ["0.01", "0.001", "0.05"][rng.random_range(0..3)].into(),
                        "EXPANSION".into(),
                        rng.random_range(1..5).to_string(),
                        "SEED".into(),
                        rng.random::<u64>().to_string(),
                        "ITEMS".into(),
                    ];
                    args.extend(items.iter().cloned());
                }
                1 => {
                    // Auto-created with the defaults (fixed seed mode).
                    args = vec!["BF.MADD".into(), key.clone()];
                    args.extend(items.iter().cloned());
                }
                2 => {
                    args = vec![
                        "BF.RESERVE".into(),
                        key.clone(),
                        "0.02".into(),
                        "50".into(),
                        "EXPANSION".into(),
                        "2".into(),
                        "SEED".into(),
                        rng.random::<u64>().to_string(),
                    ];
                    existing.push(key.clone());
                    steps.push(Step {
                        args,
                        key,
                        items: vec![],
                    });
                    continue;
                }
                _ => {
                    args = vec!["BF.ADD".into(), key.clone(), items[0].clone()];
                    existing.push(key.clone());
                    steps.push(Step {
                        args,
                        key,
                        items: vec![items[0].clone()],
                    });
                    continue;
                }
            }
            existing.push(key.clone());
            steps.push(Step { args, key, items });
            continue;
        }
        if roll < 18 && i > 5 {
            // The non-scaling filter: fills up at 400 items, then every add is refused.
            let items = fresh(rng.random_range(5..40), &mut all_items, &mut rng);
            let mut args: Vec<String> = if roll % 2 == 0 {
                vec!["BF.MADD".into(), "ns".into()]
            } else {
                vec![
                    "BF.INSERT".into(),
                    "ns".into(),
                    "NOCREATE".into(),
                    "ITEMS".into(),
                ]
            };
            args.extend(items.iter().cloned());
            steps.push(Step {
                args,
                key: "ns".into(),
                items,
            });
            continue;
        }
        let key = existing[rng.random_range(0..existing.len())].clone();
        if roll < 30 {
            let items = fresh(1, &mut all_items, &mut rng);
            steps.push(Step {
                args: vec!["BF.ADD".into(), key.clone(), items[0].clone()],
                key,
                items,
            });
        } else if roll < 60 {
            let items = fresh(rng.random_range(1..60), &mut all_items, &mut rng);
            let mut args = vec![
                "BF.INSERT".to_string(),
                key.clone(),
                "NOCREATE".into(),
                "ITEMS".into(),
            ];
            args.extend(items.iter().cloned());
            steps.push(Step { args, key, items });
        } else {
            let items = fresh(rng.random_range(1..60), &mut all_items, &mut rng);
            let mut args = vec!["BF.MADD".to_string(), key.clone()];
            args.extend(items.iter().cloned());
            steps.push(Step { args, key, items });
        }
    }
    steps
}

/// Sends one step; Ok(reply) when the server answered (an error reply counts as an answer),
/// Err when the connection failed (the server died).
fn send(c: &mut Connection, step: &Step) -> Result<Reply, String> {
    let mut cmd = redis::Cmd::new();
    for a in &step.args {
        cmd.arg(a);
    }
    match c.req_command(&cmd) {
        Ok(Value::ServerError(e)) => Ok(Reply::Error(server_err_text(&e))),
        Ok(v) => Ok(Reply::Value(v)),
        Err(e) if e.code().is_some() => Ok(Reply::Error(err_text(&e))),
        Err(e) => Err(e.to_string()),
    }
}

/// Items a reply acknowledges as stored: a 1/0 answer per item, up to the first error.
fn acknowledged(step: &Step, reply: &Reply) -> Vec<String> {
    match reply {
        Reply::Error(_) => vec![],
        Reply::Value(Value::Int(_)) | Reply::Value(Value::Boolean(_)) => step.items.clone(),
        Reply::Value(Value::Array(a)) => step
            .items
            .iter()
            .zip(a)
            .take_while(|(_, v)| matches!(v, Value::Int(_) | Value::Boolean(_)))
            .map(|(i, _)| i.clone())
            .collect(),
        Reply::Value(_) => vec![],
    }
}

/// Everything a client can observe of the dataset.
#[derive(Debug, PartialEq, Clone)]
struct State {
    dataset: String,
    keys: Vec<(String, String, Info, i64)>,
}

fn state(c: &mut Connection) -> State {
    let mut keys: Vec<String> = redis::cmd("KEYS").arg("*").query(c).unwrap();
    keys.sort();
    let keys = keys
        .into_iter()
        .map(|k| {
            let d = digest(c, &k);
            let i = info(c, &k);
            let card = as_int(&raw_ok(c, &["BF.CARD", &k]));
            (k, d, i, card)
        })
        .collect();
    State {
        dataset: dataset_digest(c),
        keys,
    }
}

fn describe_diff(got: &State, want: &State) -> String {
    let mut out = Vec::new();
    if got.dataset != want.dataset {
        out.push(format!("DEBUG DIGEST {} vs {}", got.dataset, want.dataset));
    }
    let gk: Vec<&String> = got.keys.iter().map(|k| &k.0).collect();
    let wk: Vec<&String> = want.keys.iter().map(|k| &k.0).collect();
    if gk != wk {
        out.push(format!("keys {gk:?} vs {wk:?}"));
    }
    for g in &got.keys {
        if let Some(w) = want.keys.iter().find(|w| w.0 == g.0) {
            if g != w {
                out.push(format!(
                    "{}: {:?} vs {:?}",
                    g.0,
                    (&g.1, &g.2, g.3),
                    (&w.1, &w.2, w.3)
                ));
            }
        }
    }
    out.join("; ")
}

fn set_fixed_seed(c: &mut Connection) {
    raw_ok(c, &["CONFIG", "SET", "bf.seed-mode", "fixed"]);
}

struct Round {
    /// Replies to the steps acknowledged in this round, in order.
    replies: Vec<Reply>,
    /// Index (into the script) of the first step not acknowledged.
    acked_to: usize,
    /// Whether a step was sent and never answered.
    in_flight: bool,
}

/// Runs the script from `from` on a writer thread and kills the server once `kill_at` steps are
/// acknowledged (None: run to the end and stop normally).
fn run_round(s: &mut Server, steps: &Arc<Vec<Step>>, from: usize, kill_at: Option<usize>) -> Round {
    let mut c = s.conn();
    let acked = Arc::new(AtomicUsize::new(from));
    let sent = Arc::new(AtomicUsize::new(from));
    let writer = {
        let steps = steps.clone();
        let acked = acked.clone();
        let sent = sent.clone();
        std::thread::spawn(move || {
            let mut replies = Vec::new();
            for i in from..steps.len() {
                sent.store(i + 1, Ordering::SeqCst);
                match send(&mut c, &steps[i]) {
                    Ok(r) => {
                        replies.push(r);
                        acked.store(i + 1, Ordering::SeqCst);
                    }
                    Err(_) => break,
                }
            }
            replies
        })
    };
    if let Some(kill_at) = kill_at {
        let deadline = Instant::now() + Duration::from_secs(120);
        while acked.load(Ordering::SeqCst) < kill_at {
            assert!(
                Instant::now() < deadline,
                "writer made no progress to step {kill_at}"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        s.kill9();
    }
    let replies = writer.join().expect("writer thread panicked");
    let acked_to = acked.load(Ordering::SeqCst);
    let in_flight = sent.load(Ordering::SeqCst) > acked_to;
    assert_eq!(replies.len(), acked_to - from);
    Round {
        replies,
        acked_to,
        in_flight,
    }
}

#[test]
fn kill9_mid_stream_loses_nothing_acknowledged() {
    let steps = Arc::new(script(2600));
    let mut s = start_aof("yes");
    set_fixed_seed(&mut s.conn());
    let reference = Server::start();
    let mut rc = reference.conn();
    set_fixed_seed(&mut rc);
    // Invariant at the start of each round: server and reference both hold the state after
    // steps[..from].
    let mut from = 0usize;
    let mut acked_items: Vec<(String, String)> = Vec::new();
    let mut in_flight_applied = 0;
    let mut in_flight_lost = 0;
    // Kill points; between rounds the AOF is rewritten (without, then with the RDB preamble) so
    // later kills land on a rewritten base plus an incremental file.
    let kills = [350usize, 900, 1500, 2100];
    for (round, &kill_at) in kills.iter().enumerate() {
        let r = run_round(&mut s, &steps, from, Some(kill_at));
        assert!(!s.is_alive());
        let n = r.acked_to;
        assert!(n >= kill_at && n < steps.len(), "round {round}: acked {n}");
        // Replay the acknowledged steps on the reference: same replies.
        for (k, i) in (from..n).enumerate() {
            let want = send(&mut rc, &steps[i]).unwrap();
            assert_eq!(
                r.replies[k], want,
                "step {i} {:?}: server and reference replied differently",
                steps[i].args
            );
            acked_items.extend(
                acknowledged(&steps[i], &r.replies[k])
                    .into_iter()
                    .map(|it| (steps[i].key.clone(), it)),
            );
        }
        let after_acked = state(&mut rc);
        // One more: the step that was in flight.
        let (after_next, next_reply) = if r.in_flight {
            let reply = send(&mut rc, &steps[n]).unwrap();
            (Some(state(&mut rc)), Some(reply))
        } else {
            (None, None)
        };

        s.start_again();
        let mut c = s.conn();
        let got = state(&mut c);
        let resend = if got == after_acked {
            if r.in_flight {
                in_flight_lost += 1;
            }
            // The in-flight step (if any) did not reach the AOF; the client sends it again.
            r.in_flight
        } else if after_next.as_ref() == Some(&got) {
            in_flight_applied += 1;
            false
        } else {
            panic!(
                "round {round}: after kill -9 at step {n} (in flight: {}) the dataset is neither \
                 the last acknowledged state ({}) nor the one after the in-flight step ({})",
                r.in_flight,
                describe_diff(&got, &after_acked),
                after_next
                    .as_ref()
                    .map(|a| describe_diff(&got, a))
                    .unwrap_or_else(|| "no step in flight".into()),
            );
        };
        // Every acknowledged item is there; BF.INFO / BF.CARD were compared through `state`.
        for (key, item) in &acked_items {
            let e = as_int(&raw_ok(&mut c, &["BF.EXISTS", key.as_str(), item.as_str()]));
            assert_eq!(
                e, 1,
                "acknowledged item {item} missing from {key} after kill -9"
            );
        }
        set_fixed_seed(&mut c);
        if resend {
            let reply = send(&mut c, &steps[n]).unwrap();
            assert_eq!(Some(&reply), next_reply.as_ref(), "re-sent step {n}");
            acked_items.extend(
                acknowledged(&steps[n], &reply)
                    .into_iter()
                    .map(|it| (steps[n].key.clone(), it)),
            );
        }
        from = if r.in_flight { n + 1 } else { n };
        if let Some(reply) = next_reply {
            if !resend {
                acked_items.extend(
                    acknowledged(&steps[n], &reply)
                        .into_iter()
                        .map(|it| (steps[n].key.clone(), it)),
                );
            }
        }
        assert_eq!(state(&mut c), state(&mut rc), "round {round}: resync");
        match round {
            0 => rewrite(&mut c, "no"),
            1 => rewrite(&mut c, "yes"),
            _ => {}
        }
    }
    // Run the rest and stop cleanly: the final states agree.
    let r = run_round(&mut s, &steps, from, None);
    assert_eq!(r.acked_to, steps.len());
    for (k, i) in (from..steps.len()).enumerate() {
        assert_eq!(r.replies[k], send(&mut rc, &steps[i]).unwrap(), "step {i}");
    }
    s.restart();
    let mut c = s.conn();
    assert_eq!(state(&mut c), state(&mut rc), "after the whole script");
    // The non-scaling filter filled up on the way.
    let ns = info(&mut c, "ns");
    assert_eq!(ns.expansion, None);
    assert_eq!(
        raw_err(&mut c, &["BF.ADD", "ns", "one-more-surely-new-item"]),
        "ERR non scaling filter is full"
    );
    eprintln!(
        "kill -9 rounds: {}, in-flight step persisted {in_flight_applied}×, lost {in_flight_lost}×",
        kills.len()
    );
}

// ---------------------------------------------------------------------------------------------
// BGREWRITEAOF
// ---------------------------------------------------------------------------------------------

/// One key as a snapshot sees it: name, DEBUG DIGEST-VALUE, BF.INFO (or the error a loading
/// filter answers), PTTL.
type KeyView = (Vec<u8>, String, Result<Value, String>, i64);

/// Every key's view, and the dataset digest.
fn snapshot(c: &mut Connection) -> (String, Vec<KeyView>) {
    let mut keys: Vec<Vec<u8>> = redis::cmd("KEYS").arg("*").query(c).unwrap();
    keys.sort();
    let per_key = keys
        .into_iter()
        .map(|k| {
            let d: Value = redis::cmd("DEBUG")
                .arg("DIGEST-VALUE")
                .arg(k.as_slice())
                .query(c)
                .unwrap();
            let i = rawb(c, &[b"BF.INFO", k.as_slice()]);
            let ttl: i64 = redis::cmd("PTTL").arg(k.as_slice()).query(c).unwrap();
            // PTTL counts down; keep only whether the key has one.
            (k, format!("{d:?}"), i, ttl.signum())
        })
        .collect();
    (dataset_digest(c), per_key)
}

/// Filters of every shape, including one whose bits (~47 MB over three layers of very different
/// sizes) span three 16 MiB rewrite pieces with layer boundaries inside a piece, and one that is
/// half-way through a BF.LOADCHUNK load.
fn populate_for_rewrite(c: &mut Connection) -> (Vec<(i64, Vec<u8>)>, String) {
    // Layers of capacity 3, 9000 and 27,000,000.
    raw_ok(
        c,
        &[
            "BF.RESERVE",
            "multi",
            "0.01",
            "3",
            "EXPANSION",
            "3000",
            "SEED",
            "1",
        ],
    );
    madd_all(c, "multi", &items("m", 9500));
    let i = info(c, "multi");
    assert_eq!(i.filters, 3, "{i:?}");
    assert!(i.size > 40 << 20, "{i:?}");
    raw_ok(c, &["BF.RESERVE", "exp1", "0.05", "10", "EXPANSION", "1"]);
    madd_all(c, "exp1", &items("e", 400));
    raw_ok(c, &["BF.RESERVE", "nsfull", "0.01", "30", "NONSCALING"]);
    let mut args = vec!["BF.MADD".to_string(), "nsfull".into()];
    args.extend(items("n", 60));
    raw_ok(c, &args);
    madd_all(c, "auto", &items("a", 500));
    rawb(
        c,
        &[b"BF.MADD", b"bin\x00key\xff", b"", b"\x00", b"\xff\xfe"],
    )
    .unwrap();
    raw_ok(c, &["BF.ADD", "ttl", "x"]);
    raw_ok(c, &["PEXPIRE", "ttl", "100000000"]);
    // A load left half-way: header and the first of three data chunks.
    let chunks = scandump(c, "multi");
    assert_eq!(chunks.len(), 4, "header + 3 data chunks");
    loadchunks(c, "partial", &chunks[..2]);
    assert_eq!(
        raw_err(c, &["BF.EXISTS", "partial", "m:1"]),
        "ERR filter is being loaded by BF.LOADCHUNK"
    );
    // And one stopped right after its header (no bits loaded at all).
    let small = scandump(c, "exp1");
    loadchunks(c, "hdr-only", &small[..1]);
    let source_digest = digest(c, "multi");
    (chunks, source_digest)
}

fn rewrite_rebuilds_exactly(preamble: &str) {
    let mut s = start_aof(preamble);
    let mut c = s.conn();
    let (chunks, source_digest) = populate_for_rewrite(&mut c);
    raw_ok(&mut c, &["BGREWRITEAOF"]);
    // Writes while the rewrite runs land in the new incremental file.
    madd_all(&mut c, "auto", &items("during", 300));
    raw_ok(&mut c, &["BF.ADD", "multi", "during-rewrite"]);
    wait_rewrite_done(&mut c);
    let before = snapshot(&mut c);

    // The base file is of the kind asked for; without the preamble it is the module's AOF
    // rewrite: BF.LOADCHUNK commands, the big filter in header + 3 pieces.
    let dir = s.dir().join("appendonlydir");
    let manifest = std::fs::read_to_string(
        std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.to_string_lossy().ends_with(".manifest"))
            .expect("AOF manifest"),
    )
    .unwrap();
    let base_line = manifest
        .lines()
        .find(|l| l.ends_with("type b"))
        .unwrap_or_else(|| panic!("no base in manifest:\n{manifest}"));
    let base_name = base_line.split_whitespace().nth(1).unwrap();
    if preamble == "yes" {
        assert!(base_name.ends_with(".base.rdb"), "{manifest}");
    } else {
        assert!(base_name.ends_with(".base.aof"), "{manifest}");
        let base = std::fs::read(dir.join(base_name)).unwrap();
        let needle = b"BF.LOADCHUNK";
        let count = base.windows(needle.len()).filter(|w| w == needle).count();
        // multi: 1 + 3; partial: 1 + 1; five small filters: 1 + 1 each; hdr-only: 1.
        assert_eq!(
            count,
            4 + 2 + 2 * 5 + 1,
            "BF.LOADCHUNK commands in the rewritten base"
        );
    }

    drop(c);
    s.restart();
    let mut c = s.conn();
    let after = snapshot(&mut c);
    assert_eq!(before.1.len(), after.1.len());
    for (b, a) in before.1.iter().zip(&after.1) {
        assert_eq!(
            b,
            a,
            "key {} differs after rewrite (preamble {preamble}) + restart",
            String::from_utf8_lossy(&b.0)
        );
    }
    assert_eq!(before.0, after.0, "DEBUG DIGEST");
    assert_all_exist(&mut c, "multi", &items("m", 9500));
    assert_all_exist(&mut c, "auto", &items("during", 300));
    // The half-way load carries on from where it was and ends identical to its source.
    loadchunks(&mut c, "partial", &chunks[2..]);
    assert_eq!(digest(&mut c, "partial"), source_digest);
    let small = scandump(&mut c, "exp1");
    loadchunks(&mut c, "hdr-only", &small[1..]);
    assert_eq!(digest(&mut c, "hdr-only"), digest(&mut c, "exp1"));
    assert_all_exist(&mut c, "partial", &items("m", 9500));
}

#[test]
fn bgrewriteaof_without_rdb_preamble_rebuilds_every_filter() {
    rewrite_rebuilds_exactly("no");
}

#[test]
fn bgrewriteaof_with_rdb_preamble_rebuilds_every_filter() {
    rewrite_rebuilds_exactly("yes");
}
