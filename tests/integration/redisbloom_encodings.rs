//! RESTORE of RedisBloom's DUMP payloads of every encoding it ever wrote, 0 to 4, into the
//! module: each loads as a RedisBloom filter that answers, grows and SCANDUMPs exactly as
//! RedisBloom 2.8.2 did, and still does after a save and a restart in our own encoding.
//!
//! The payloads and answers are the core's fixtures (core/tests/fixtures/redisbloom, recorded
//! by generate.py there): encoding 4 is a real DUMP of RedisBloom 2.8.2; encodings 0 to 3 have
//! no writer left to run, so they were built from the format description and RESTOREd into
//! RedisBloom 2.8.2, which recorded the answers. The item rules below are generate.py's.
use std::path::{Path, PathBuf};

use redis::Connection;
use rustbloom_testkit::*;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("core/tests/fixtures/redisbloom")
        .join(name)
}

fn unhex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("hex"))
        .collect()
}

/// The values of `key` in a fixture file, in order.
fn values(text: &str, key: &str) -> Vec<String> {
    text.lines()
        .filter_map(|line| line.strip_prefix(key)?.strip_prefix(' '))
        .map(str::to_string)
        .collect()
}

fn unpack_bits(hex: &str, count: usize) -> Vec<i64> {
    let bytes = unhex(hex);
    (0..count)
        .map(|i| i64::from(bytes[i / 8] >> (i % 8) & 1))
        .collect()
}

/// The items whose answers restore_v*.case records: 300 members, five odd ones, then
/// non-members alternating between text and binary.
fn queried() -> Vec<Vec<u8>> {
    let mut items: Vec<Vec<u8>> = (0..300).map(|i| format!("m{i}").into_bytes()).collect();
    items.extend([
        Vec::new(),
        vec![0],
        vec![0xff, 0xfe, 0, 1],
        (0..=255).collect(),
        "café ☕".as_bytes().to_vec(),
    ]);
    items.extend((0..12000u32).map(|i| {
        if i % 2 == 1 {
            format!("q{i}").into_bytes()
        } else {
            let mut item = i.to_le_bytes().to_vec();
            item.push(0xff);
            item
        }
    }));
    items
}

fn mexists(c: &mut Connection, key: &str, items: &[Vec<u8>]) -> Vec<i64> {
    items
        .chunks(1000)
        .flat_map(|batch| {
            let mut args: Vec<&[u8]> = vec![b"BF.MEXISTS", key.as_bytes()];
            args.extend(batch.iter().map(Vec::as_slice));
            as_ints(rawb(c, &args).unwrap())
        })
        .collect()
}

fn scandump_all(c: &mut Connection, key: &str) -> Vec<Vec<u8>> {
    scandump(c, key)
        .into_iter()
        .map(|(_, chunk)| chunk)
        .collect()
}

#[test]
fn every_redisbloom_encoding_restores_and_keeps_working() {
    let mut s = Server::start();
    let mut c = s.conn();
    let queried = queried();
    let mut expected_after = Vec::new();
    for version in 0..4 {
        let key = format!("v{version}");
        let text = std::fs::read_to_string(fixture(&format!("restore_v{version}.case"))).unwrap();
        let payload = unhex(&values(&text, "payload")[0]);
        rawb(&mut c, &[b"RESTORE", key.as_bytes(), b"0", &payload])
            .unwrap_or_else(|e| panic!("RESTORE of encoding {version}: {e}\n{}", s.log_tail()));
        let expected = unpack_bits(&values(&text, "exists")[0], queried.len());
        assert_eq!(
            mexists(&mut c, &key, &queried),
            expected,
            "encoding {version}"
        );

        // Grown with the same items as RedisBloom was, it answers the adds as RedisBloom did and
        // ends with RedisBloom's very SCANDUMP stream.
        let grow = values(&text, "grow")[0].clone();
        let (count, answers) = grow.split_once(' ').unwrap();
        let added: String = (0..count.parse::<usize>().unwrap())
            .map(|i| match raw(&mut c, &["BF.ADD", &key, &format!("g{i}")]) {
                Ok(v) => char::from(b'0' + as_int(&v) as u8),
                Err(_) => 'E',
            })
            .collect();
        assert_eq!(added, answers, "encoding {version}: adds");
        let after: Vec<Vec<u8>> = values(&text, "after").iter().map(|h| unhex(h)).collect();
        assert_eq!(
            scandump_all(&mut c, &key),
            after,
            "encoding {version}: grown"
        );
        expected_after.push((key, after));
    }
    let dump_v4 = unhex(
        std::fs::read_to_string(fixture("dump_v4.hex"))
            .unwrap()
            .trim(),
    );
    rawb(&mut c, &[b"RESTORE", b"v4", b"0", &dump_v4]).unwrap();
    let scaling = std::fs::read_to_string(fixture("default_scaling.case")).unwrap();
    let after: Vec<Vec<u8>> = values(&scaling, "after").iter().map(|h| unhex(h)).collect();
    assert_eq!(scandump_all(&mut c, "v4"), after, "encoding 4");
    expected_after.push(("v4".to_string(), after));

    // Saved in our encoding and loaded back: the same filters, and the same digests as when
    // first loaded.
    let digests: Vec<String> = expected_after
        .iter()
        .map(|(key, _)| digest(&mut c, key))
        .collect();
    s.restart_saving();
    let mut c = s.conn();
    for ((key, after), before) in expected_after.iter().zip(&digests) {
        assert_eq!(&scandump_all(&mut c, key), after, "{key} after a restart");
        assert_eq!(&digest(&mut c, key), before, "{key} digest after a restart");
    }
}
