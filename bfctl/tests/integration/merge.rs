//! `bfctl merge DEST SOURCE…` on a 3-master cluster, where partition i of two filters sits on
//! two different slots: partitioned filters built from different items merge partition by
//! partition (through a temporary copy in DEST's slot) into one that finds every item of both,
//! created when missing; unlike filters and a missing partition are refused with DEST exactly as
//! it was (even when only the last partition differs); plain filters merge across slots; no
//! temporary key stays on any node. On one server: a creation cut short is finished by running
//! it again.

use std::path::Path;

use redis::Value;
use rustbloom_client::routing::key_slot;
use rustbloom_client::{Client, Connection, Filter};
use rustbloom_testkit::cluster::Cluster;

use crate::common::{bfctl_at, ok};

fn items(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

fn write_lines(dir: &Path, name: &str, items: &[String]) -> String {
    let path = dir.join(name);
    let mut text = items.join("\n");
    text.push('\n');
    std::fs::write(&path, text).expect("write items");
    path.display().to_string()
}

/// `bfctl exists` over `items`: how many answered 1.
fn count_present(url: &str, name: &str, items: &[String]) -> usize {
    let mut input = items.join("\n");
    input.push('\n');
    let out = ok(&bfctl_at(url, &["exists", name], input.as_bytes()));
    let answers: Vec<&str> = out.lines().collect();
    assert_eq!(answers.len(), items.len(), "one answer per line");
    answers.iter().filter(|a| **a == "1").count()
}

/// A partitioned filter of 4 partitions under `name`, holding `items`, built with the given
/// seeds (so that filters built alike merge) and restored on the cluster.
fn restore_built(url: &str, dir: &Path, name: &str, items: &[String], seeds: (&str, &str)) {
    let input = write_lines(dir, &format!("{name}.txt"), items);
    let dump = dir.join(format!("{name}.bfd")).display().to_string();
    let (seed, routing_seed) = seeds;
    ok(&bfctl_at(
        url,
        &[
            "build",
            &input,
            &dump,
            "--capacity",
            "40000",
            "--error",
            "1e-6",
            "--partitions",
            "4",
            "--seed",
            seed,
            "--routing-seed",
            routing_seed,
        ],
        b"",
    ));
    ok(&bfctl_at(url, &["restore", name, &dump], b""));
}

/// `bfctl dump NAME` as bytes: every key of the filter, header and bits.
fn dumped(url: &str, name: &str) -> Vec<u8> {
    ok(&bfctl_at(url, &["dump", name, "-"], b""));
    bfctl_at(url, &["dump", name, "-"], b"").stdout
}

/// The temporary keys of merges on every master.
fn leftovers(cl: &Cluster) -> Vec<String> {
    let owners = cl.slot_owners(0);
    let mut found = Vec::new();
    for m in Cluster::masters(&owners) {
        let mut c = redis::Client::open(cl.url(m))
            .and_then(|c| c.get_connection())
            .expect("a node connection");
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg("*rustbloom-merge-tmp*")
            .query(&mut c)
            .expect("KEYS");
        found.extend(keys);
    }
    found
}

fn refused(url: &str, args: &[&str]) -> String {
    let out = bfctl_at(url, args, b"");
    assert!(!out.status.success(), "{args:?} succeeded");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn query(conn: &mut Connection, args: &[&str]) -> Value {
    let mut cmd = redis::Cmd::new();
    for a in args {
        cmd.arg(*a);
    }
    conn.query(&cmd).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

#[test]
fn partitioned_filters_merge_partition_by_partition_across_slots() {
    let cl = Cluster::start(3, 0);
    let url = cl.url(0);
    let dir = tempfile::tempdir().expect("a scratch directory");
    let (monday, tuesday) = (items("monday", 8000), items("tuesday", 8000));
    restore_built(&url, dir.path(), "mon", &monday, ("11", "77"));
    restore_built(&url, dir.path(), "tue", &tuesday, ("11", "77"));

    // A missing DEST is created from the first source: every item of both is found.
    let said = ok(&bfctl_at(&url, &["merge", "week", "mon", "tue"], b""));
    assert!(
        said.starts_with("week: merged 2 filters into 4 partitions (created); 8 keys copied"),
        "{said}"
    );
    assert_eq!(count_present(&cl.url(1), "week", &monday), 8000);
    assert_eq!(count_present(&cl.url(2), "week", &tuesday), 8000);
    assert!(leftovers(&cl).is_empty(), "{:?}", leftovers(&cl));
    let info = ok(&bfctl_at(&url, &["info", "week"], b""));
    assert!(info.contains("routing seed:      77\n"), "{info}");
    assert!(info.contains("all 4 partitions exist"), "{info}");
    // The sources are as they were.
    assert_eq!(count_present(&url, "mon", &tuesday), 0);

    // Into an existing DEST, a third day; merging what it has again changes nothing.
    let wednesday = items("wednesday", 3000);
    restore_built(&url, dir.path(), "wed", &wednesday, ("11", "77"));
    let said = ok(&bfctl_at(&url, &["merge", "week", "wed", "mon"], b""));
    assert!(
        said.starts_with("week: merged 2 filters into 4 partitions;"),
        "{said}"
    );
    assert_eq!(count_present(&url, "week", &wednesday), 3000);
    assert_eq!(count_present(&url, "week", &monday), 8000);
    let before = dumped(&url, "week");
    ok(&bfctl_at(&url, &["merge", "week", "tue", "week"], b""));
    assert_eq!(dumped(&url, "week"), before, "a merge is idempotent");

    // Unlike descriptors (another routing seed, another P) and unlike partitions (another
    // filter seed) are refused, DEST untouched.
    restore_built(&url, dir.path(), "rerouted", &wednesday, ("11", "78"));
    let err = refused(&url, &["merge", "week", "mon", "rerouted"]);
    assert!(
        err.contains("filters differ: routing seed (\"week\" and \"rerouted\": 77 and 78)"),
        "{err}"
    );
    // A source that does not exist counts as empty, as in BF.MERGE, and is named.
    let out = bfctl_at(&url, &["merge", "week", "plainf"], b"");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("plainf does not exist: merged as an empty filter"),
        "{err}"
    );
    assert!(ok(&out).starts_with("week: merged 0 filters;"));
    assert_eq!(dumped(&url, "week"), before);
    let mut conn = Client::open(&url)
        .and_then(|c| c.connect())
        .expect("connect");
    query(&mut conn, &["BF.RESERVE", "plainf", "0.01", "100"]);
    let err = refused(&url, &["merge", "week", "plainf"]);
    assert!(
        err.contains(
            "filters differ: partitions (\"week\" has 4 partitions, \"plainf\" is not partitioned)"
        ),
        "{err}"
    );
    // Only the last partition of `odd` differs: the check of every partition comes before the
    // first merge, so not even partition 0 changes.
    restore_built(&url, dir.path(), "odd", &wednesday, ("11", "77"));
    let odd = Filter::discover(&mut conn, b"odd")
        .expect("discover")
        .expect("odd exists");
    let last = String::from_utf8(odd.partitioning().expect("partitioned").keys[3].clone())
        .expect("a text key");
    query(&mut conn, &["DEL", &last]);
    query(
        &mut conn,
        &[
            "BF.RESERVE",
            &last,
            "1e-6",
            "10000",
            "SEED",
            "12",
            "PARTITION",
            "3",
            "4",
            "77",
        ],
    );
    let err = refused(&url, &["merge", "week", "wed", "odd"]);
    assert!(
        err.contains("filters differ: seed (partition 3: ") && err.contains(&last),
        "{err}"
    );
    assert_eq!(dumped(&url, "week"), before, "nothing merged");

    // A missing partition of a source: the partition-missing error, DEST untouched.
    query(&mut conn, &["DEL", &last]);
    let err = refused(&url, &["merge", "week", "wed", "odd"]);
    // Named by the filter and the key, whatever the exact words of the partition-missing error.
    assert!(
        err.contains(last.as_str()) && err.matches("odd").count() >= 2,
        "{err}"
    );
    assert_eq!(dumped(&url, "week"), before, "nothing merged");
    assert!(leftovers(&cl).is_empty(), "{:?}", leftovers(&cl));
}

#[test]
fn plain_filters_merge_across_slots() {
    let cl = Cluster::start(3, 0);
    let url = cl.url(0);
    let mut conn = Client::open(&url)
        .and_then(|c| c.connect())
        .expect("connect");
    assert_ne!(key_slot(b"left"), key_slot(b"right"));
    for name in ["left", "right"] {
        query(
            &mut conn,
            &["BF.RESERVE", name, "0.0001", "20000", "SEED", "42"],
        );
    }
    let dir = tempfile::tempdir().expect("a scratch directory");
    let (left, right) = (items("left", 5000), items("right", 5000));
    for (name, these) in [("left", &left), ("right", &right)] {
        let file = write_lines(dir.path(), name, these);
        ok(&bfctl_at(&url, &["load", name, &file], b""));
    }
    let said = ok(&bfctl_at(&url, &["merge", "left", "right"], b""));
    assert!(
        said.starts_with("left: merged 1 filter; 1 key copied across slots, "),
        "{said}"
    );
    assert_eq!(count_present(&url, "left", &right), 5000);
    assert_eq!(count_present(&url, "left", &left), 5000);
    // A missing DEST in a third slot, created as the union.
    let said = ok(&bfctl_at(&url, &["merge", "both", "right", "left"], b""));
    assert!(
        said.starts_with("both: merged 2 filters (created); 2 keys copied"),
        "{said}"
    );
    assert_eq!(count_present(&url, "both", &left), 5000);
    assert_eq!(count_present(&url, "both", &right), 5000);
    // Unlike (another seed): refused, nothing changed.
    query(
        &mut conn,
        &["BF.RESERVE", "stranger", "0.0001", "20000", "SEED", "43"],
    );
    query(&mut conn, &["BF.ADD", "stranger", "x"]);
    let before = dumped(&url, "both");
    let err = refused(&url, &["merge", "both", "stranger"]);
    assert!(
        err.contains("filters differ: seed (\"both\", \"stranger\")"),
        "{err}"
    );
    assert_eq!(dumped(&url, "both"), before);
    assert!(leftovers(&cl).is_empty(), "{:?}", leftovers(&cl));
}

/// A creation cut short leaves partitions of DEST without its descriptor (the name answers "not
/// found"); the same merge run again merges into them and creates the descriptor. Partition keys
/// under DEST's name that are not alike are refused instead.
#[test]
fn a_rerun_finishes_a_creation_cut_short() {
    let s = rustbloom_testkit::Server::start();
    let url = format!("redis+unix://{}", s.socket().display());
    let dir = tempfile::tempdir().expect("a scratch directory");
    let (monday, tuesday) = (items("monday", 3000), items("tuesday", 3000));
    restore_built(&url, dir.path(), "mon", &monday, ("11", "77"));
    restore_built(&url, dir.path(), "tue", &tuesday, ("11", "77"));
    let mut conn = Client::open(&url)
        .and_then(|c| c.connect())
        .expect("connect");
    let keys = |name: &[u8]| rustbloom_client::routing::partition_keys(name, 4);
    let text = |key: &[u8]| String::from_utf8(key.to_vec()).expect("a text key");
    // As a run stopped after partition 1: partitions 0 and 1 merged, no descriptor.
    for i in 0..2 {
        let (dest, mon, tue) = (
            keys(b"week")[i].clone(),
            keys(b"mon")[i].clone(),
            keys(b"tue")[i].clone(),
        );
        query(
            &mut conn,
            &["BF.MERGE", &text(&dest), &text(&mon), &text(&tue)],
        );
    }
    assert!(Filter::discover(&mut conn, b"week")
        .expect("discover")
        .is_none());
    let said = ok(&bfctl_at(&url, &["merge", "week", "mon", "tue"], b""));
    assert!(
        said.starts_with("week: merged 2 filters into 4 partitions (created);"),
        "{said}"
    );
    assert_eq!(count_present(&url, "week", &monday), 3000);
    assert_eq!(count_present(&url, "week", &tuesday), 3000);
    let info = ok(&bfctl_at(&url, &["info", "week"], b""));
    assert!(info.contains("all 4 partitions exist"), "{info}");

    // A leftover partition key of another filter under the name: refused, nothing created.
    restore_built(&url, dir.path(), "rerouted", &monday, ("11", "78"));
    let (dest, other) = (keys(b"fresh")[2].clone(), keys(b"rerouted")[2].clone());
    query(&mut conn, &["BF.MERGE", &text(&dest), &text(&other)]);
    let err = refused(&url, &["merge", "fresh", "mon"]);
    assert!(
        err.contains("filters differ: partition (partition 2: "),
        "{err}"
    );
    assert!(Filter::discover(&mut conn, b"fresh")
        .expect("discover")
        .is_none());
    assert_eq!(
        query(&mut conn, &["EXISTS", &text(&keys(b"fresh")[0])]),
        Value::Int(0),
        "nothing merged before the refusal"
    );
}
