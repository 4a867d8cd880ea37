//! `bfctl restore` of a partitioned dump from a regular file, which loads its partitions in
//! parallel on a cluster: the copy is the source byte for byte, and a truncated or corrupt file,
//! or a chunk the server refuses while other workers are loading, leaves nothing behind.

use rustbloom_client::routing::partition_keys;
use rustbloom_client::{scandump, Client, Connection, Filter};

use crate::common::{bfctl_at, ok};
use rustbloom_testkit::cluster::Cluster;

const PARTS: u32 = 16;

fn lines(prefix: &str, n: usize) -> String {
    (0..n).map(|i| format!("{prefix}-{i}\n")).collect()
}

/// Every BF.SCANDUMP chunk of `key`, with its iterator.
fn chunks(conn: &mut Connection, key: &[u8]) -> Vec<(u64, Vec<u8>)> {
    let mut all = Vec::new();
    let mut it = 0;
    loop {
        let (next, data) = scandump(conn, key, it).unwrap();
        if next == 0 {
            return all;
        }
        all.push((next, data));
        it = next;
    }
}

/// How many of the keys of a filter `name` of PARTS partitions exist, the descriptor included.
fn keys_left(conn: &mut Connection, name: &str) -> usize {
    let mut keys = partition_keys(name.as_bytes(), PARTS);
    keys.push(name.as_bytes().to_vec());
    keys.iter()
        .filter(|k| {
            conn.query(redis::cmd("EXISTS").arg(k.as_slice())).unwrap() == redis::Value::Int(1)
        })
        .count()
}

/// Where partition `i`'s dump starts in the file: at its `BFCTLDMP` magic.
fn section_start(file: &[u8], i: usize) -> usize {
    file.windows(8)
        .enumerate()
        .filter(|(_, w)| w == b"BFCTLDMP")
        .map(|(at, _)| at)
        .nth(i)
        .expect("the partition's dump")
}

/// A filter `src` of PARTS partitions with `n` items on the cluster, dumped to `file`.
fn source(url: &str, file: &std::path::Path, n: usize) -> String {
    let n_text = n.to_string();
    let parts = PARTS.to_string();
    ok(&bfctl_at(
        url,
        &["reserve", "src", "1e-6", &n_text, "--partitions", &parts],
        b"",
    ));
    let items = lines("item", n);
    ok(&bfctl_at(url, &["load", "src"], items.as_bytes()));
    ok(&bfctl_at(
        url,
        &["dump", "src", file.to_str().unwrap()],
        b"",
    ));
    items
}

#[test]
fn a_partitioned_dump_restores_in_parallel_as_the_source_byte_for_byte() {
    let cl = Cluster::start(3, 1);
    let url = cl.url(0);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("src.bfd");
    let items = source(&url, &file, 200_000);
    let path = file.to_str().unwrap();

    // The default (one worker per master), one worker, and more workers than masters.
    for (name, jobs) in [("copy", None), ("one", Some("1")), ("many", Some("7"))] {
        let mut args = vec!["restore", name, path];
        if let Some(j) = jobs {
            args.extend(["--jobs", j]);
        }
        let out = bfctl_at(&cl.url(3), &args, b"");
        ok(&out);
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(
            said.contains(&format!("{name}: restored 16 partitions, ")),
            "{said}"
        );
        let mut conn = Client::open(&url).unwrap().connect().unwrap();
        let copy = Filter::discover(&mut conn, name.as_bytes())
            .unwrap()
            .unwrap();
        let info = copy.info(&mut conn).unwrap();
        assert!(info.problems.is_empty(), "{:?}", info.problems);
        let from = partition_keys(b"src", PARTS);
        let to = partition_keys(name.as_bytes(), PARTS);
        for (i, (f, t)) in from.iter().zip(&to).enumerate() {
            assert!(
                chunks(&mut conn, f) == chunks(&mut conn, t),
                "partition {i} of {name} differs from the source's"
            );
        }
        let present = ok(&bfctl_at(&url, &["exists", name], items.as_bytes()));
        assert!(present.lines().all(|l| l == "1"), "{name} lost an item");
    }
}

#[test]
fn a_bad_file_or_a_refused_chunk_leaves_nothing_behind() {
    let cl = Cluster::start(3, 0);
    let url = cl.url(1);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("src.bfd");
    source(&url, &file, 100_000);
    let bytes = std::fs::read(&file).unwrap();
    let mut conn = Client::open(&url).unwrap().connect().unwrap();
    let write = |name: &str, data: &[u8]| {
        let p = dir.path().join(name);
        std::fs::write(&p, data).unwrap();
        p.to_str().unwrap().to_string()
    };

    // Cut in the middle of partition 5: refused before anything is written.
    let (five, six) = (section_start(&bytes, 5), section_start(&bytes, 6));
    let cut = write("cut.bfd", &bytes[..(five + six) / 2]);
    let out = bfctl_at(&url, &["restore", "copy", &cut, "--jobs", "4"], b"");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("read partition 5") && err.contains("truncated dump file"),
        "{err}"
    );
    assert_eq!(keys_left(&mut conn, "copy"), 0);

    // Partition 5's record count one more than its records.
    let mut bad = bytes.clone();
    let count = &mut bad[six - 8..six];
    let n = u64::from_le_bytes(count.try_into().unwrap());
    count.copy_from_slice(&(n + 1).to_le_bytes());
    let badcount = write("count.bfd", &bad);
    let out = bfctl_at(&url, &["restore", "copy", &badcount], b"");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("read partition 5") && err.contains(&format!("it says {} records", n + 1)),
        "{err}"
    );
    assert_eq!(keys_left(&mut conn, "copy"), 0);

    // Data after the last partition.
    let mut longer = bytes.clone();
    longer.push(0);
    let longer = write("longer.bfd", &longer);
    let out = bfctl_at(&url, &["restore", "copy", &longer], b"");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("data after the end"), "{err}");
    assert_eq!(keys_left(&mut conn, "copy"), 0);

    // A flipped byte in the last chunk of partition 12: the framing is sound, so the load
    // starts, and the server refuses that chunk while other workers are loading theirs. Every
    // key any of them wrote is deleted and the error names partition 12.
    let thirteen = section_start(&bytes, 13);
    let mut flipped = bytes.clone();
    // The last byte of data before the end record (16 bytes) and the count (8).
    flipped[thirteen - 25] ^= 0x5a;
    let flipped = write("flipped.bfd", &flipped);
    let out = bfctl_at(&url, &["restore", "copy", &flipped, "--jobs", "3"], b"");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("partition 12 ("), "{err}");
    assert!(err.contains("BF.LOADCHUNK"), "{err}");
    assert_eq!(keys_left(&mut conn, "copy"), 0);

    // A partition key of the new name in the way: refused before anything is loaded, replaced
    // with --force.
    let path = file.to_str().unwrap();
    let seventh = partition_keys(b"copy", PARTS)[7].clone();
    conn.query(redis::cmd("SET").arg(seventh.as_slice()).arg("x"))
        .unwrap();
    let out = bfctl_at(&url, &["restore", "copy", path], b"");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("partition key") && err.contains("already exists"),
        "{err}"
    );
    assert_eq!(keys_left(&mut conn, "copy"), 1);
    ok(&bfctl_at(&url, &["restore", "copy", path, "--force"], b""));
    assert_eq!(keys_left(&mut conn, "copy"), PARTS as usize + 1);
}
