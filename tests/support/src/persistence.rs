//! Persistence: AOF rewrites, and a set of filters of every shape to carry through RDB, AOF and
//! DUMP/RESTORE and compare afterwards.

use std::time::Duration;

use redis::{Connection, Value};

use crate::bloom::{assert_all_exist, assert_info_eq, info, items, madd_all, Info};
use crate::keyspace::{dataset_digest, digest, info_section, key_type};
use crate::reply::{raw, raw_ok, rawb};
use crate::server::{wait_until, Server};

/// A server on an AOF fsynced at every write, with the RDB preamble in rewrites or not
/// (`preamble` "yes" or "no"), once its first base file is written (Redis 7 writes it at start).
pub fn start_aof(preamble: &str) -> Server {
    let s = Server::start_with(&[
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
        "--aof-use-rdb-preamble",
        preamble,
    ]);
    wait_rewrite_done(&mut s.conn());
    s
}

/// Waits until a BGREWRITEAOF (started or scheduled) has finished, and checks it succeeded.
pub fn wait_rewrite_done(c: &mut Connection) {
    let ok = wait_until(Duration::from_secs(120), || {
        let p = info_section(c, "persistence");
        p.contains("aof_rewrite_in_progress:0") && p.contains("aof_rewrite_scheduled:0")
    });
    assert!(
        ok,
        "AOF rewrite did not finish: {}",
        info_section(c, "persistence")
    );
    let p = info_section(c, "persistence");
    assert!(
        p.contains("aof_last_bgrewrite_status:ok"),
        "rewrite failed: {p}"
    );
}

/// The keys [`VariedFilters::create`] makes besides the binary one ([`VARIED_BINARY_KEY`]).
pub const VARIED_KEYS: [&str; 8] = [
    "auto", "scaled", "ns", "ins", "empty", "deep", "tight", "vbseed",
];
/// The 32-byte seed of [`VariedFilters`]' valkey-bloom object (`vbseed`).
pub const VARIED_VALKEY_SEED: &[u8; 32] = b"a valkey-bloom seed of 32 bytes!";
/// A key of [`VariedFilters`] with a NUL and a non-UTF-8 byte, holding [`VARIED_BINARY_ITEM`].
pub const VARIED_BINARY_KEY: &[u8] = b"bin\0\xffkey";
pub const VARIED_BINARY_ITEM: &[u8] = b"\0\xff";

/// Filters of every shape (defaults, options, several layers, non-scaling and full, many layers
/// grown one add at a time, empty, a tightening ratio other than ½, a valkey-bloom object made by
/// valkey-bloom's 32-byte SEED form, binary key) and the items each was given.
pub struct VariedFilters {
    pub members: Vec<(&'static str, Vec<String>)>,
}

/// What a client sees of [`VariedFilters`]: each key's `DEBUG DIGEST-VALUE` and BF.INFO, and
/// `DEBUG DIGEST`.
pub struct VariedSnapshot {
    digests: Vec<String>,
    infos: Vec<Info>,
    dataset: String,
}

impl VariedFilters {
    /// Creates the filters on `c`.
    pub fn create(c: &mut Connection) -> VariedFilters {
        let mut members = Vec::new();
        let a = items("auto", 50);
        madd_all(c, "auto", &a);
        members.push(("auto", a));

        raw_ok(
            c,
            &["BF.RESERVE", "scaled", "0.01", "100", "EXPANSION", "3"],
        );
        let sc = items("sc", 2500);
        madd_all(c, "scaled", &sc);
        members.push(("scaled", sc));

        raw_ok(
            c,
            &[
                "BF.RESERVE",
                "ns",
                "0.001",
                "30",
                "NONSCALING",
                "SEED",
                "77",
            ],
        );
        let mut args: Vec<String> = vec!["BF.MADD".into(), "ns".into()];
        args.extend(items("ns", 60));
        // Fills up: the reply's last element is the error.
        let _ = raw(c, &args);
        members.push(("ns", vec![]));

        raw_ok(
            c,
            &[
                "BF.INSERT",
                "ins",
                "CAPACITY",
                "1000",
                "ERROR",
                "0.0001",
                "EXPANSION",
                "1",
                "ITEMS",
                "x",
                "y",
                "z",
            ],
        );
        members.push(("ins", vec!["x".into(), "y".into(), "z".into()]));

        // Many layers grown one add at a time (7 layers: 10, 20, ..., 640).
        raw_ok(c, &["BF.RESERVE", "deep", "0.01", "10"]);
        let dp = items("deep", 1000);
        for it in &dp {
            raw_ok(c, &["BF.ADD", "deep", it.as_str()]);
        }
        members.push(("deep", dp));

        raw_ok(c, &["BF.RESERVE", "empty", "0.05", "10"]);
        members.push(("empty", vec![]));

        // Layers at ε·0.2·0.8^i: five layers of 50..800.
        raw_ok(
            c,
            &["BF.RESERVE", "tight", "0.01", "50", "TIGHTENING", "0.8"],
        );
        let tight = items("tight", 1200);
        madd_all(c, "tight", &tight);
        members.push(("tight", tight));

        // valkey-bloom's own creation (its replicated BF.INSERT): layers at 0.02·0.7^i.
        rawb(
            c,
            &[
                b"BF.INSERT",
                b"vbseed",
                b"CAPACITY",
                b"60",
                b"ERROR",
                b"0.02",
                b"TIGHTENING",
                b"0.7",
                b"SEED",
                VARIED_VALKEY_SEED,
                b"EXPANSION",
                b"3",
            ],
        )
        .expect("BF.INSERT of the valkey-bloom object");
        let vb = items("vb", 700);
        madd_all(c, "vbseed", &vb);
        members.push(("vbseed", vb));

        rawb(c, &[b"BF.ADD", VARIED_BINARY_KEY, VARIED_BINARY_ITEM])
            .expect("BF.ADD of the binary key");

        VariedFilters { members }
    }

    pub fn snapshot(&self, c: &mut Connection) -> VariedSnapshot {
        let mut digests = Vec::new();
        let mut infos = Vec::new();
        for k in VARIED_KEYS {
            digests.push(digest(c, k));
            infos.push(info(c, k));
        }
        let v: Value = redis::cmd("DEBUG")
            .arg("DIGEST-VALUE")
            .arg(VARIED_BINARY_KEY)
            .query(c)
            .expect("DEBUG DIGEST-VALUE of the binary key");
        digests.push(format!("{v:?}"));
        VariedSnapshot {
            digests,
            infos,
            dataset: dataset_digest(c),
        }
    }

    /// Every filter on `c` is as in `before` (digests, BF.INFO), and holds its items; `what`
    /// names what happened in between.
    #[track_caller]
    pub fn assert_unchanged(&self, c: &mut Connection, before: &VariedSnapshot, what: &str) {
        let after = self.snapshot(c);
        assert_eq!(
            before.digests, after.digests,
            "DEBUG DIGEST-VALUE differs after {what}"
        );
        assert_eq!(
            before.dataset, after.dataset,
            "DEBUG DIGEST differs after {what}"
        );
        for (k, m) in &self.members {
            assert_all_exist(c, k, m);
        }
        assert_eq!(
            rawb(c, &[b"BF.EXISTS", VARIED_BINARY_KEY, VARIED_BINARY_ITEM]),
            Ok(Value::Int(1)),
            "the binary key's item after {what}"
        );
        for (a, b) in before.infos.iter().zip(after.infos.iter()) {
            assert_info_eq(a, b, what);
        }
        assert_eq!(key_type(c, "scaled"), "MBbloom--");
    }
}
