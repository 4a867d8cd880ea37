//! What a write replicates and what the AOF rewrite writes bring replicas and restarts to the
//! primary's very bits, whatever the kind of filter: a RedisBloom-kind add stopped by a limit,
//! a RedisBloom v1.0 filter (32-bit probe sums) through an AOF rewrite, and a window creation
//! on a replica whose sizing differs.
use redis::{Connection, Value};
use rustbloom_core::budget::Unlimited;
use rustbloom_core::redisbloom::{scandump, RbFilter};
use rustbloom_testkit::payload::fix_xxh3;
use rustbloom_testkit::*;

/// BF.MEXISTS of `items` in batches, as 0/1.
fn answers(c: &mut Connection, key: &str, items: &[String]) -> Vec<i64> {
    items
        .chunks(1000)
        .flat_map(|batch| {
            let mut args = vec!["BF.MEXISTS".to_string(), key.to_string()];
            args.extend(batch.iter().cloned());
            as_ints(raw_ok(c, &args))
        })
        .collect()
}

fn loadchunk(c: &mut Connection, key: &str, iterator: u64, data: &[u8]) {
    let iterator = iterator.to_string();
    rawb(
        c,
        &[b"BF.LOADCHUNK", key.as_bytes(), iterator.as_bytes(), data],
    )
    .unwrap_or_else(|e| panic!("BF.LOADCHUNK {iterator}: {e}"));
}

#[test]
fn a_redisbloom_filter_add_stopped_by_a_limit_replicates_only_what_the_primary_added() {
    let mut primary = Server::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let replica = Server::start();
    replicate_from(&primary, &replica);
    let mut pc = primary.conn();
    let mut rc = replica.conn();
    // A filter as RedisBloom 2.8.2 creates it (BF.RESERVE rb 0.01 1000), arriving by its
    // SCANDUMP stream as a migration brings it.
    let filter = RbFilter::new(1000, 0.01, Some(2), &mut Unlimited)
        .unwrap()
        .unwrap();
    let mut iterator = 0;
    loop {
        let (next, data) = scandump::scandump_step(&filter, iterator);
        if next == 0 {
            break;
        }
        loadchunk(&mut pc, "rb", next, &data);
        iterator = next;
    }
    // Room for the first link only: the second is refused half-way through the batch.
    let limit = (filter.allocated_bytes() + 1).to_string();
    raw_ok(&mut pc, &["CONFIG", "SET", "bf.max-filter-bytes", &limit]);
    let batch = items("item-", 3000);
    let mut args = vec!["BF.MADD".to_string(), "rb".into()];
    args.extend(batch.iter().cloned());
    let reply = as_array(raw_ok(&mut pc, &args));
    let processed = reply.len() - 1;
    assert!(
        matches!(reply.last(), Some(Value::ServerError(_))),
        "the batch must stop at the limit: {:?}",
        reply.last()
    );
    assert!((1000..1100).contains(&processed), "{processed}");
    let want = answers(&mut pc, "rb", &batch);
    assert_eq!(want[2999], 0, "the primary stopped before the last item");
    assert_eq!(info(&mut pc, "rb").filters, 1);

    wait_synced(&mut pc, &mut [&mut rc]);
    assert_eq!(answers(&mut rc, "rb", &batch), want, "replica");
    assert_same_digest(&mut pc, "rb", &mut rc, "rb");

    let digest_before = digest(&mut pc, "rb");
    drop(pc);
    primary.restart();
    let mut pc = primary.conn();
    assert_eq!(answers(&mut pc, "rb", &batch), want, "after an AOF replay");
    assert_eq!(digest(&mut pc, "rb"), digest_before);
}

/// The envelope header (core/src/redisbloom/envelope.rs) of a filter written by RedisBloom
/// v1.0 (RDB encoding 1: probe sums in 32 bits) with one empty link of 2^33 bits (1 GiB).
fn wrap32_envelope() -> Vec<u8> {
    let bits: u64 = 1 << 33;
    let error = 0.01f64;
    let bpe = -error.ln() / (std::f64::consts::LN_2 * std::f64::consts::LN_2);
    let mut chain = Vec::new();
    chain.extend_from_slice(&0u64.to_le_bytes()); // items
    chain.extend_from_slice(&1u32.to_le_bytes()); // links
    chain.extend_from_slice(&0u32.to_le_bytes()); // options: v1.0 had none
    chain.extend_from_slice(&2u32.to_le_bytes()); // growth
    chain.extend_from_slice(&(bits / 8).to_le_bytes());
    chain.extend_from_slice(&bits.to_le_bytes());
    chain.extend_from_slice(&0u64.to_le_bytes()); // link items
    chain.extend_from_slice(&error.to_le_bytes());
    chain.extend_from_slice(&bpe.to_le_bytes());
    chain.extend_from_slice(&7u32.to_le_bytes()); // hashes
    chain.extend_from_slice(&((bits as f64 / bpe) as u64).to_le_bytes()); // entries
    chain.push(33); // n2: the modulus is 2^33
    let mut header = b"RBLR".to_vec();
    header.extend_from_slice(&[1, 1, 0, 0]); // version 1, 32-bit arithmetic
    header.extend_from_slice(&(bits / 8).to_le_bytes()); // loaded: complete
    header.extend_from_slice(&chain);
    header.extend_from_slice(&[0; 8]);
    fix_xxh3(&mut header);
    header
}

#[test]
fn an_aof_rewrite_keeps_redisbloom_v1_arithmetic_of_a_gigabyte_link() {
    // The gigabyte of chunks would trigger an automatic rewrite of its own: only ours runs.
    let mut s = Server::start_with(&[
        "--appendonly",
        "yes",
        "--aof-use-rdb-preamble",
        "no",
        "--auto-aof-rewrite-percentage",
        "0",
    ]);
    let mut c = s.conn();
    raw_ok(&mut c, &["CONFIG", "SET", "bf.max-filter-bytes", "4gb"]);
    loadchunk(&mut c, "v1", 1, &wrap32_envelope());
    let chunk = vec![0u8; scandump::CHUNK_BYTES as usize];
    let link_bytes = 1u64 << 30;
    let mut offset = 0;
    while offset < link_bytes {
        offset += chunk.len() as u64;
        loadchunk(&mut c, "v1", 1 + offset, &chunk);
    }
    let members = items("m", 2000);
    madd_all(&mut c, "v1", &members);
    let absent = items("absent", 2000);
    let want_absent = answers(&mut c, "v1", &absent);
    assert!(answers(&mut c, "v1", &members).iter().all(|&a| a == 1));
    let digest_before = digest(&mut c, "v1");

    raw_ok(&mut c, &["BGREWRITEAOF"]);
    wait_rewrite_done(&mut c);
    drop(c);
    s.restart();
    let mut c = s.conn();
    assert!(
        answers(&mut c, "v1", &members).iter().all(|&a| a == 1),
        "members lost by the AOF rewrite"
    );
    assert_eq!(answers(&mut c, "v1", &absent), want_absent);
    assert_eq!(digest(&mut c, "v1"), digest_before);
}

#[test]
fn a_window_creation_replicates_its_slot_shape_to_a_replica_whose_sizing_differs() {
    let primary = Server::start();
    let replica = Server::start_custom(&[], &test_hooks_module(), &[]);
    replicate_from(&primary, &replica);
    let mut pc = primary.conn();
    let mut rc = replica.conn();
    raw_ok(
        &mut pc,
        &["BF.RESERVE", "reserved", "0.01", "3000", "WINDOW", "60000"],
    );
    let mut args = vec!["BF.INSERT", "inserted", "CAPACITY", "500", "WINDOW", "1000"];
    args.push("ITEMS");
    let batch = items("w", 300);
    args.extend(batch.iter().map(String::as_str));
    raw_ok(&mut pc, &args);
    madd_all(&mut pc, "reserved", &batch);
    wait_synced(&mut pc, &mut [&mut rc]);
    for key in ["reserved", "inserted"] {
        assert_same_digest(&mut pc, key, &mut rc, key);
    }

    // The replica's own sizing does differ: a window it sizes itself is not the primary's.
    let reserve = [
        "BF.RESERVE",
        "alone",
        "0.01",
        "3000",
        "WINDOW",
        "60000",
        "SEED",
        "1",
    ];
    let alone_server = Server::start_custom(&[], &test_hooks_module(), &[]);
    let mut alone = alone_server.conn();
    raw_ok(&mut alone, &reserve);
    raw_ok(&mut pc, &reserve);
    assert_ne!(digest(&mut alone, "alone"), digest(&mut pc, "alone"));
    // An explicit slot shape the parameters cannot have is refused to a client.
    let e = raw_err(
        &mut pc,
        &[
            "BF.RESERVE",
            "starved",
            "0.01",
            "100000",
            "WINDOW",
            "1000",
            "SHAPE",
            "512",
            "7",
            "1",
        ],
    );
    assert!(e.starts_with("ERR bad slot shape"), "{e}");
}
