//! RedisBloom values that decode but would break the server, in the form a user meets them:
//! BF.LOADCHUNK of a SCANDUMP header and RESTORE of a DUMP payload (which RDB loading and a
//! replica's full sync read with the same code). A link that claims more entries than its bits
//! hold (one BF.ADD would wrap its count, and every later save would fail to load), and a chain
//! whose lookups probe a million bits, are refused with an error reply and leave no key.
use redis::Connection;
use rustbloom_testkit::hostile::*;
use rustbloom_testkit::payload::*;
use rustbloom_testkit::*;

/// RedisBloom's bits per entry at `error`.
fn bpe(error: f64) -> f64 {
    -(error.ln() / 0.480453013918201)
}

/// One link: entries, error, hashes, bytes (bits = 8 · bytes), items.
type Link = (u64, f64, u32, u64, u64);

/// A SCANDUMP header of a scaling filter (options NOROUND | FORCE64, growth `growth`).
fn scandump_header(growth: u32, links: &[Link]) -> Vec<u8> {
    let items: u64 = links.iter().fold(0, |sum, l| sum.wrapping_add(l.4));
    let mut out = Vec::new();
    out.extend_from_slice(&items.to_le_bytes());
    out.extend_from_slice(&(links.len() as u32).to_le_bytes());
    out.extend_from_slice(&5u32.to_le_bytes());
    out.extend_from_slice(&growth.to_le_bytes());
    for &(entries, error, hashes, bytes, items) in links {
        out.extend_from_slice(&bytes.to_le_bytes());
        out.extend_from_slice(&(bytes * 8).to_le_bytes());
        out.extend_from_slice(&items.to_le_bytes());
        out.extend_from_slice(&error.to_le_bytes());
        out.extend_from_slice(&bpe(error).to_le_bytes());
        out.extend_from_slice(&hashes.to_le_bytes());
        out.extend_from_slice(&entries.to_le_bytes());
        out.push(0);
    }
    out
}

/// The same filter as RedisBloom's DUMP payload (type MBbloom--, encoding 4), arrays all ones.
fn dump_payload(c: &mut Connection, growth: u32, links: &[Link]) -> Vec<u8> {
    use ModuleField::{Bytes, Double, Unsigned};
    let items: u64 = links.iter().fold(0, |sum, l| sum.wrapping_add(l.4));
    let mut fields = vec![
        Unsigned(items),
        Unsigned(links.len() as u64),
        Unsigned(5),
        Unsigned(u64::from(growth)),
    ];
    for &(entries, error, hashes, bytes, items) in links {
        fields.extend([
            Unsigned(entries),
            Double(error),
            Unsigned(u64::from(hashes)),
            Double(bpe(error)),
            Unsigned(bytes * 8),
            Unsigned(0),
            Bytes(vec![0xff; bytes as usize]),
            Unsigned(items),
        ]);
    }
    // The server's RDB version, from a DUMP of its own.
    raw_ok(c, &["SET", "rdb-version", "x"]);
    let own = dump(c, "rdb-version");
    let version = [own[own.len() - 10], own[own.len() - 9]];
    module_payload("MBbloom--", 4, &fields, version)
}

/// Both ways in refuse `links` with an error reply and leave no key.
fn refused_both_ways(c: &mut Connection, key: &str, growth: u32, links: &[Link]) {
    let header = scandump_header(growth, links);
    let error = must_err(c, &[b"BF.LOADCHUNK", key.as_bytes(), b"1", &header]);
    assert!(error.starts_with("ERR "), "LOADCHUNK: {error}");
    assert_eq!(
        as_int(&raw_ok(c, &["EXISTS", key])),
        0,
        "LOADCHUNK left a key"
    );
    let payload = dump_payload(c, growth, links);
    let error = must_err(c, &[b"RESTORE", key.as_bytes(), b"0", &payload]);
    assert!(!error.is_empty(), "RESTORE accepted");
    assert_eq!(
        as_int(&raw_ok(c, &["EXISTS", key])),
        0,
        "RESTORE left a key"
    );
}

#[test]
fn a_link_claiming_more_entries_than_its_bits_is_refused() {
    let s = Server::start();
    let mut c = s.conn();
    // The payload builder is right: the same fields with honest entries restore and answer.
    let honest: Link = (100, 0.005, 8, 144, 100);
    let payload = dump_payload(&mut c, 2, &[honest]);
    raw_ok(&mut c, &[&b"RESTORE"[..], b"honest", b"0", &payload]);
    assert_eq!(as_int(&raw_ok(&mut c, &["BF.CARD", "honest"])), 100);
    assert_eq!(as_int(&raw_ok(&mut c, &["BF.EXISTS", "honest", "x"])), 1);
    // entries 2^64 − 1 in 144 bytes, its count one below: the header of the report.
    let wrapping: Link = (u64::MAX, 0.005, 8, 144, u64::MAX - 1);
    refused_both_ways(&mut c, "wrapping", 2, &[wrapping]);
    // Just past what 1152 bits hold at 0.005 (104 entries).
    refused_both_ways(&mut c, "over", 2, &[(105, 0.005, 8, 144, 0)]);
    // The server still saves and reloads what it holds.
    raw_ok(&mut c, &["DEBUG", "RELOAD"]);
    assert_eq!(as_int(&raw_ok(&mut c, &["BF.CARD", "honest"])), 100);
}

#[test]
fn chains_that_probe_a_million_bits_per_lookup_are_refused() {
    let s = Server::start();
    let mut c = s.conn();
    // 1100 links of 1100 hashes: no error rate gives a link 1100 hashes.
    let slow: Link = (1, 1e-300, 1100, 256, 0);
    refused_both_ways(&mut c, "slow", 1, &vec![slow; 1100]);
    // 1100 links at the smallest error rate, 1075 hashes each as RedisBloom sizes them: each
    // link passes, the chain (1.18 million probes a lookup) does not.
    let smallest = f64::from_bits(1);
    let slowest: Link = (1, smallest, 1075, 256, 0);
    refused_both_ways(&mut c, "slowest", 1, &vec![slowest; 1100]);
    // As many of those links as RedisBloom's longest chain probes (578,350 in all) load.
    let fit = 578_350 / 1075;
    let header = scandump_header(1, &vec![slowest; fit]);
    raw_ok(&mut c, &[&b"BF.LOADCHUNK"[..], b"fits", b"1", &header]);
    assert_eq!(as_int(&raw_ok(&mut c, &["EXISTS", "fits"])), 1);
}
