//! A partitioned filter's descriptor (docs/partitions.md) as a user meets it: a descriptor is
//! accepted only as `BF.RESERVE ... PARTITIONS` would create it, so every one a server holds
//! survives its own AOF rewrite; BF.INFO of one stays within a bounded reply; and the edges of
//! its creation (one NONSCALING partition of 2^30 items, a fixed seed mode whose seed is the
//! routing seed).
//!
//! The server is Redis 7.0 by default; `RUSTBLOOM_SERVER` runs the same on Valkey 9.1.

use std::io::Write;
use std::os::unix::net::UnixStream;
use std::time::Duration;

use redis::{Connection, Value};
use rustbloom_core::partition::{Descriptor, PartitionGrowth, MAX_PARTITION_NAME_BYTES};
use rustbloom_testkit::payload::{descriptor_payload, forge_descriptor, rdb_version};
use rustbloom_testkit::*;

/// `descriptor`'s saved bytes with P, N and c replaced where given.
fn forged(descriptor: &Descriptor, p: Option<u32>, n: Option<u64>, c: Option<u64>) -> Vec<u8> {
    forge_descriptor(&descriptor.encode(), p, n, c)
}

fn restore(c: &mut Connection, key: &str, descriptor: &[u8]) -> Result<Value, String> {
    let payload = descriptor_payload(descriptor, rdb_version(c));
    rawb(c, &[b"RESTORE", key.as_bytes(), b"0", &payload])
}

/// BF.INFO of a descriptor as text, field by field.
fn described(c: &mut Connection, key: &str) -> Vec<(String, String)> {
    info_pairs(raw_ok(c, &["BF.INFO", key]))
        .into_iter()
        .map(|(name, value)| (name, format!("{value:?}")))
        .collect()
}

#[test]
fn a_restored_descriptor_is_one_bf_reserve_would_create_and_survives_an_aof_rewrite() {
    let mut s = start_aof("no");
    let mut c = s.conn();
    let scaling = PartitionGrowth::Scaling { expansion: 2 };
    let one = Descriptor::new(1, 1, 1000, 0.01, scaling).unwrap();
    let nonscaling = Descriptor::new(4, 1, 1000, 0.01, PartitionGrowth::NonScaling).unwrap();
    assert_eq!(nonscaling.partition_capacity(), 334);

    // Fields that disagree with what BF.RESERVE ... PARTITIONS computes are refused, not kept
    // until a rewrite loses them or recomputed silently.
    let refused = [
        (
            "N = 2^40 over one partition of 1",
            forged(&one, None, Some(1 << 40), Some(1)),
        ),
        (
            "NONSCALING, N = 1000 over 4 of 1",
            forged(&nonscaling, None, None, Some(1)),
        ),
        (
            "N = 2^64 - 1",
            forged(&nonscaling, Some(4096), Some(u64::MAX), Some(1 << 30)),
        ),
    ];
    for (what, bytes) in &refused {
        let key = format!("bad {what}");
        let reply = restore(&mut c, &key, bytes);
        assert!(reply.is_err(), "{what}: RESTORE answered {reply:?}");
        assert_no_key(&mut c, &key);
    }
    assert_err(
        &mut c,
        &[
            "BF.RESERVE",
            "huge",
            "0.01",
            "18446744073709551615",
            "PARTITIONS",
            "4096",
            "1",
        ],
        "ERR capacity too large for this many partitions",
    );

    // One that agrees, restored, and one created, come back from the rewritten AOF as they were.
    assert_eq!(
        restore(&mut c, "restored", &nonscaling.encode()),
        Ok(Value::Okay)
    );
    raw_ok(
        &mut c,
        &[
            "BF.RESERVE",
            "created",
            "0.001",
            "1000000",
            "PARTITIONS",
            "16",
            "7",
            "EXPANSION",
            "4",
        ],
    );
    // One renamed past the limit on names times partitions: its rewrite, a BF.RESERVE that a
    // client could not send, is replayed all the same.
    let long_name = "n".repeat(64 << 10);
    raw_ok(
        &mut c,
        &[
            "BF.RESERVE",
            "renamed",
            "0.01",
            "1000",
            "PARTITIONS",
            "4096",
            "1",
        ],
    );
    raw_ok(&mut c, &["RENAME", "renamed", long_name.as_str()]);
    let renamed = digest(&mut c, &long_name);
    let before: Vec<_> = ["restored", "created"]
        .iter()
        .map(|key| (described(&mut c, key), digest(&mut c, key)))
        .collect();
    raw_ok(&mut c, &["BGREWRITEAOF"]);
    wait_rewrite_done(&mut c);
    s.restart();
    let mut c = s.conn();
    let after: Vec<_> = ["restored", "created"]
        .iter()
        .map(|key| (described(&mut c, key), digest(&mut c, key)))
        .collect();
    assert_eq!(after, before, "log:\n{}", s.log_tail());
    assert_eq!(digest(&mut c, &long_name), renamed);
    let capacity = described(&mut c, "restored")
        .into_iter()
        .find(|(name, _)| name == "Partition capacity");
    assert_eq!(
        capacity,
        Some(("Partition capacity".into(), "int(334)".into()))
    );
}

/// The `omem` (output buffer bytes) CLIENT LIST shows for the client named `name`, once its
/// last command is `command`.
fn output_buffer_of(c: &mut Connection, name: &str, command: &str) -> u64 {
    let mut omem = None;
    let found = wait_until(Duration::from_secs(30), || {
        let list = value_to_string(&raw_ok(c, &["CLIENT", "LIST"]));
        let line = list
            .lines()
            .find(|line| line.contains(&format!(" name={name} ")));
        let field = |line: &str, key: &str| {
            line.split(' ')
                .find_map(|kv| kv.strip_prefix(key))
                .map(str::to_string)
        };
        match line {
            Some(line) if field(line, "cmd=").as_deref() == Some(command) => {
                omem = field(line, "omem=").and_then(|v| v.parse().ok());
                true
            }
            _ => false,
        }
    });
    assert!(found, "client {name} never ran {command}");
    omem.expect("omem in CLIENT LIST")
}

/// Sends `args` as one RESP command on a connection that then never reads.
fn send_unread(s: &Server, name: &str, args: &[&[u8]]) -> UnixStream {
    let mut stream = UnixStream::connect(s.socket()).expect("connect");
    let mut command = Vec::new();
    let mut push = |args: &[&[u8]]| {
        command.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
        for arg in args {
            command.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
            command.extend_from_slice(arg);
            command.extend_from_slice(b"\r\n");
        }
    };
    push(&[b"CLIENT", b"SETNAME", name.as_bytes()]);
    push(args);
    stream.write_all(&command).expect("send");
    stream
}

#[test]
fn bf_info_of_a_descriptor_is_bounded_by_its_name_times_its_partitions() {
    let s = Server::start();
    let mut c = s.conn();
    let long_name = "n".repeat(64 << 10);
    let refusal = raw_err(
        &mut c,
        &[
            "BF.RESERVE",
            long_name.as_str(),
            "0.01",
            "1000",
            "PARTITIONS",
            "4096",
            "1",
        ],
    );
    assert!(
        refusal.starts_with("ERR name too long for 4096 partitions"),
        "{refusal}"
    );
    assert_no_key(&mut c, &long_name);

    // At the limit: the whole list, in a reply of about the limit.
    let at_limit = "a".repeat((MAX_PARTITION_NAME_BYTES / 4096) as usize);
    raw_ok(
        &mut c,
        &[
            "BF.RESERVE",
            at_limit.as_str(),
            "0.01",
            "1000",
            "PARTITIONS",
            "4096",
            "1",
        ],
    );
    let unread = send_unread(&s, "listing", &[b"BF.INFO", at_limit.as_bytes()]);
    let listed = output_buffer_of(&mut c, "listing", "bf.info");
    drop(unread);
    let bound = MAX_PARTITION_NAME_BYTES + 4096 * 64;
    assert!(
        listed <= bound,
        "BF.INFO at the limit held {listed} bytes of output"
    );
    let keys = info_pairs(raw_ok(&mut c, &["BF.INFO", at_limit.as_str()]))
        .into_iter()
        .find(|(name, _)| name == "Partition keys")
        .map(|(_, keys)| as_array(keys).len());
    assert_eq!(keys, Some(4096));

    // A descriptor renamed to a long name (RENAME cannot be refused): BF.INFO refuses to list.
    raw_ok(
        &mut c,
        &[
            "BF.RESERVE",
            "short",
            "0.01",
            "1000",
            "PARTITIONS",
            "4096",
            "1",
        ],
    );
    raw_ok(&mut c, &["RENAME", "short", long_name.as_str()]);
    let unread = send_unread(&s, "renamed", &[b"BF.INFO", long_name.as_bytes()]);
    let renamed = output_buffer_of(&mut c, "renamed", "bf.info");
    drop(unread);
    assert!(
        renamed <= bound,
        "BF.INFO of the renamed descriptor held {renamed} bytes"
    );
    let refusal = raw_err(&mut c, &["BF.INFO", long_name.as_str()]);
    assert!(
        refusal.starts_with("ERR name too long for 4096 partitions"),
        "{refusal}"
    );
}

#[test]
fn one_nonscaling_partition_may_hold_what_a_plain_nonscaling_filter_may() {
    let s = Server::start();
    let mut c = s.conn();
    let max = "1073741824";
    raw_ok(
        &mut c,
        &[
            "BF.RESERVE",
            "d",
            "0.01",
            max,
            "PARTITIONS",
            "1",
            "1",
            "NONSCALING",
        ],
    );
    let capacity = info_pairs(raw_ok(&mut c, &["BF.INFO", "d"]))
        .into_iter()
        .find(|(name, _)| name == "Partition capacity")
        .map(|(_, c)| as_int(&c));
    assert_eq!(capacity, Some(1 << 30));
    // Beyond it, as a plain filter: refused.
    assert_err(
        &mut c,
        &[
            "BF.RESERVE",
            "e",
            "0.01",
            "1073741825",
            "PARTITIONS",
            "1",
            "1",
            "NONSCALING",
        ],
        "ERR capacity too large for this many partitions",
    );
}

#[test]
fn a_fixed_seed_mode_creates_a_partition_whose_routing_seed_is_that_seed() {
    let s = Server::start();
    let mut c = s.conn();
    raw_ok(&mut c, &["CONFIG", "SET", "bf.seed-mode", "fixed"]);
    for key in ["p", "q"] {
        raw_ok(
            &mut c,
            &["BF.RESERVE", key, "0.01", "100", "PARTITION", "0", "2", "0"],
        );
    }
    // Fixed still: the same creation gives the same value.
    assert_eq!(digest(&mut c, "p"), digest(&mut c, "q"));
    // An explicit SEED equal to the routing seed is still refused.
    assert_err(
        &mut c,
        &[
            "BF.RESERVE",
            "r",
            "0.01",
            "100",
            "SEED",
            "0",
            "PARTITION",
            "0",
            "2",
            "0",
        ],
        "ERR a partition's SEED must differ from its routing seed",
    );
}
