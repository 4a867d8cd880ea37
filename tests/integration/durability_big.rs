//! Big filters: one larger than `proto-max-bulk-len` moves between servers with
//! SCANDUMP/LOADCHUNK (where DUMP/RESTORE and MIGRATE cannot carry it), one larger than the
//! 64 MiB RDB piece survives SAVE and a restart, and one of 9 RDB pieces (whose load keeps the
//! pieces Redis read as its own blocks) reloads whole, its memory counted, while a file cut inside
//! a piece is refused.
//!
//! `proto-max-bulk-len` is lowered to 17 MB (SCANDUMP chunks are at most 16 MiB of bits plus an
//! 8-byte checksum, so they still fit) so that a ~41 MB filter is "too big" and the test stays
//! cheap; the same holds for a multi-GB filter against the 512 MB default.
use redis::Value;
use rustbloom_testkit::*;

const BULK_LIMIT: &str = "17mb";
const BULK_LIMIT_BYTES: i64 = 17 << 20;

#[test]
fn filter_over_proto_max_bulk_len_moves_with_scandump_loadchunk() {
    // A real filter is about half ones and does not compress; this one is mostly empty, so turn
    // off RDB string compression to give DUMP the size a full filter's payload would have.
    let src = Server::start_with(&["--proto-max-bulk-len", BULK_LIMIT, "--rdbcompression", "no"]);
    // verbose: Redis logs protocol errors only at that level.
    let dst = Server::start_with(&["--proto-max-bulk-len", BULK_LIMIT, "--loglevel", "verbose"]);
    let mut sc = src.conn();
    let mut dc = dst.conn();
    raw_ok(
        &mut sc,
        &["BF.RESERVE", "big", "0.01", "30000000", "SEED", "3"],
    );
    let its = items("big", 20_000);
    madd_all(&mut sc, "big", &its);
    let src_info = info(&mut sc, "big");
    assert!(
        src_info.size > 2 * BULK_LIMIT_BYTES,
        "filter must exceed proto-max-bulk-len: {src_info:?}"
    );

    // DUMP works on the source (replies are not limited), but the payload cannot be sent back
    // as a RESTORE argument: the target refuses the bulk and closes the connection.
    let payload: Vec<u8> = redis::cmd("DUMP").arg("big").query(&mut sc).unwrap();
    assert!(payload.len() as i64 > BULK_LIMIT_BYTES);
    let e = raw(
        &mut dc,
        &[b"RESTORE".to_vec(), b"big".to_vec(), b"0".to_vec(), payload],
    )
    .expect_err("RESTORE of a payload over proto-max-bulk-len must fail");
    assert!(
        e.contains("invalid bulk length")
            || e.contains("Protocol error")
            || e.contains("non-server error"),
        "RESTORE over proto-max-bulk-len: {e}"
    );
    eprintln!("RESTORE of a {BULK_LIMIT}+ payload: {e}");
    assert!(
        wait_until(std::time::Duration::from_secs(10), || dst
            .log()
            .contains("invalid bulk length")),
        "target did not log the refused bulk:\n{}",
        dst.log_tail()
    );
    let mut dc = dst.conn();
    assert_no_key(&mut dc, "big");
    // MIGRATE is DUMP + RESTORE over a connection to the target: it fails the same way and
    // leaves the key where it was.
    let m = raw(
        &mut sc,
        &[
            "MIGRATE".to_string(),
            "127.0.0.1".into(),
            dst.port().to_string(),
            "big".into(),
            "0".into(),
            "20000".into(),
        ],
    );
    assert!(
        m.is_err(),
        "MIGRATE of a filter over proto-max-bulk-len: {m:?}"
    );
    eprintln!("MIGRATE of it: {m:?}");
    assert!(exists(&mut sc, "big"));
    let mut dc = dst.conn();
    assert_no_key(&mut dc, "big");

    // SCANDUMP/LOADCHUNK moves it: every chunk fits under the limit.
    let chunks = scandump(&mut sc, "big");
    assert!(
        chunks.len() >= 4,
        "header + 3 data chunks, got {}",
        chunks.len()
    );
    for (it, data) in &chunks {
        assert!(
            (data.len() as i64) < BULK_LIMIT_BYTES,
            "chunk {it} has {} bytes",
            data.len()
        );
    }
    loadchunks(&mut dc, "big", &chunks);
    assert_same_digest(&mut sc, "big", &mut dc, "big");
    assert_info_eq(
        &src_info,
        &info(&mut dc, "big"),
        "moved by SCANDUMP/LOADCHUNK",
    );
    assert_all_exist(&mut dc, "big", &its);
    // Non-members answer the same on both sides (same bits, same seed).
    let probe = items("probe", 20_000);
    for batch in probe.chunks(5000) {
        let mut args = vec!["BF.MEXISTS".to_string(), "big".into()];
        args.extend(batch.iter().cloned());
        assert_eq!(raw_ok(&mut sc, &args), raw_ok(&mut dc, &args));
    }
    // The copy is a normal filter: it takes writes and persists.
    assert_eq!(
        raw_ok(&mut dc, &["BF.ADD", "big", "added-on-target"]),
        Value::Int(1)
    );
    raw_ok(&mut dc, &["DEBUG", "RELOAD"]);
    assert_all_exist(&mut dc, "big", &its);
    assert_eq!(
        as_int(&raw_ok(&mut dc, &["BF.CARD", "big"])),
        src_info.items + 1
    );
}

#[test]
fn rdb_save_and_load_of_filter_over_one_rdb_piece() {
    let mut s = Server::start();
    let mut c = s.conn();
    // ~83 MB of bits: two 64 MiB RDB pieces.
    raw_ok(
        &mut c,
        &["BF.RESERVE", "huge", "0.01", "60000000", "SEED", "11"],
    );
    let its = items("h", 30_000);
    madd_all(&mut c, "huge", &its);
    // A second, multi-layer filter in the same file.
    raw_ok(
        &mut c,
        &["BF.RESERVE", "layers", "0.01", "100", "SEED", "12"],
    );
    madd_all(&mut c, "layers", &items("l", 5000));
    let i = info(&mut c, "huge");
    assert!(i.size > 64 << 20, "{i:?}");
    let d = digest(&mut c, "huge");
    let dl = digest(&mut c, "layers");
    let il = info(&mut c, "layers");
    let all = dataset_digest(&mut c);
    raw_ok(&mut c, &["SAVE"]);
    let rdb = std::fs::metadata(s.dir().join("dump.rdb")).unwrap().len();
    assert!(rdb > 1 << 20, "dump.rdb is {rdb} bytes");
    drop(c);
    s.restart();
    let mut c = s.conn();
    assert_eq!(digest(&mut c, "huge"), d);
    assert_info_eq(&i, &info(&mut c, "huge"), "huge after SAVE + restart");
    assert_eq!(digest(&mut c, "layers"), dl);
    assert_info_eq(&il, &info(&mut c, "layers"), "layers after SAVE + restart");
    assert_eq!(dataset_digest(&mut c), all);
    assert_all_exist(&mut c, "huge", &its);
    assert_all_exist(&mut c, "layers", &items("l", 5000));
    assert!(s.log().contains("keys loaded: 2"), "{}", s.log_tail());
}

/// Bytes of a filter's bits from which the bit store is cut at the RDB's 64 MiB pieces, and a
/// load keeps each piece Redis read as a block of the filter rather than copying it.
const RDB_CUT_FROM: i64 = 8 * (64 << 20);

fn used_memory(c: &mut redis::Connection) -> i64 {
    info_field(&info_section(c, "memory"), "used_memory")
        .and_then(|v| v.parse().ok())
        .expect("used_memory")
}

#[test]
fn filter_of_many_rdb_pieces_reloads_whole_and_a_cut_file_is_refused() {
    // Compressed RDB strings: the filter is mostly zeros, so the file stays a few MB while each
    // 64 MiB piece is still read into a buffer of its own at load.
    let mut s = Server::start();
    let mut c = s.conn();
    raw_ok(&mut c, &["CONFIG", "SET", "bf.max-filter-bytes", "1gb"]);
    raw_ok(
        &mut c,
        &[
            "BF.RESERVE",
            "big",
            "0.000000001",
            "110000000",
            "NONSCALING",
            "SEED",
            "21",
        ],
    );
    let its = items("b", 5_000);
    madd_all(&mut c, "big", &its);
    let i = info(&mut c, "big");
    assert!(i.size > RDB_CUT_FROM, "{i:?}");
    let usage = as_int(&raw_ok(&mut c, &["MEMORY", "USAGE", "big"]));
    let d = digest(&mut c, "big");
    raw_ok(&mut c, &["SAVE"]);
    let rdb = std::fs::read(s.dir().join("dump.rdb")).unwrap();
    drop(c);

    s.restart();
    let mut c = s.conn();
    assert_eq!(digest(&mut c, "big"), d);
    assert_info_eq(&i, &info(&mut c, "big"), "big after SAVE + restart");
    assert_all_exist(&mut c, "big", &its);
    // What the load allocated is what MEMORY USAGE says, and deleting the key gives it all back
    // (give or take the server's own buffers, tens of KB: a piece or a tail counted wrong would
    // be MBs).
    assert_eq!(as_int(&raw_ok(&mut c, &["MEMORY", "USAGE", "big"])), usage);
    let before = used_memory(&mut c);
    raw_ok(&mut c, &["DEL", "big"]);
    // Valkey frees a big value in the background (lazyfree-lazy-user-del yes): wait for it.
    assert!(wait_until(std::time::Duration::from_secs(30), || {
        info_field(&info_section(&mut c, "memory"), "lazyfree_pending_objects").as_deref()
            == Some("0")
    }));
    let freed = before - used_memory(&mut c);
    assert!(
        (freed - usage).abs() < 256 << 10,
        "DEL freed {freed} bytes, MEMORY USAGE said {usage}"
    );
    drop(c);

    // The same file cut inside a later piece: the load is refused, nothing half-loaded.
    s.stop();
    std::fs::write(s.dir().join("dump.rdb"), &rdb[..rdb.len() * 7 / 10]).unwrap();
    let refused = s
        .try_start_again_with_wrapper(&[])
        .expect_err("a cut RDB file must not load");
    assert!(
        refused.contains("refused a Bloom filter payload: short read"),
        "{refused}"
    );
}
