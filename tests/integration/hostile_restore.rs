//! Hostile RESTORE payloads: hundreds of mutated DUMP payloads with a correct CRC64,
//! forged so that they reach the module's field validation (the filter header's xxh3-64 checksum
//! and the RDB framing are rebuilt here). RESTORE must refuse with `ERR Bad data format` and
//! create nothing, or give a consistent filter; each test ends with the checks of
//! [`Barrage::finish`].

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use redis::{Connection, Value};
use rustbloom_testkit::hostile::*;
use rustbloom_testkit::payload::*;
use rustbloom_testkit::*;

#[test]
fn crc_and_framing_match_redis() {
    run(crc_and_framing_self_check);
}

#[test]
fn mutated_restore_payloads_are_refused_or_consistent() {
    run(mutated_restores);
}

#[test]
fn mutated_compressed_restore_payloads_are_refused_or_consistent() {
    run(mutated_compressed_restores);
}

// ---------------------------------------------------------------------------------------------
// The DUMP payload (Redis' rdb.c / cluster.c)
// ---------------------------------------------------------------------------------------------

/// RDB length encoding (rdbSaveLen).
fn rdb_len(n: u64) -> Vec<u8> {
    if n < 64 {
        vec![n as u8]
    } else if n < 16384 {
        vec![0x40 | (n >> 8) as u8, n as u8]
    } else if n <= u64::from(u32::MAX) {
        let mut v = vec![0x80];
        v.extend_from_slice(&(n as u32).to_be_bytes());
        v
    } else {
        let mut v = vec![0x81];
        v.extend_from_slice(&n.to_be_bytes());
        v
    }
}

/// Reads an RDB length at `at`; returns (value, bytes used).
fn read_rdb_len(b: &[u8], at: usize) -> (u64, usize) {
    match b[at] >> 6 {
        0 => (u64::from(b[at] & 0x3f), 1),
        1 => ((u64::from(b[at] & 0x3f) << 8) | u64::from(b[at + 1]), 2),
        _ if b[at] == 0x80 => (
            u64::from(u32::from_be_bytes(b[at + 1..at + 5].try_into().unwrap())),
            5,
        ),
        _ if b[at] == 0x81 => (u64::from_be_bytes(b[at + 1..at + 9].try_into().unwrap()), 9),
        _ => panic!(
            "unexpected RDB length byte {:#x} (compressed string?)",
            b[at]
        ),
    }
}

/// An uncompressed DUMP payload of a module value split into its parts.
#[derive(Clone, Debug)]
struct Dump {
    /// RDB type byte (7 = MODULE_2) and the module id, length-encoded.
    prefix: Vec<u8>,
    /// The module's strings in order: the header, then the bit pieces.
    strings: Vec<Vec<u8>>,
    /// RDB version, 2 bytes.
    version: [u8; 2],
}

const OPCODE_STRING: u8 = 5;
const OPCODE_EOF: u8 = 0;

impl Dump {
    fn parse(p: &[u8]) -> Dump {
        assert_eq!(p[0], 7, "not a MODULE_2 value");
        let (_, n) = read_rdb_len(p, 1);
        let prefix = p[..1 + n].to_vec();
        let mut at = 1 + n;
        let mut strings = Vec::new();
        loop {
            let op = p[at];
            at += 1;
            if op == OPCODE_EOF {
                break;
            }
            assert_eq!(op, OPCODE_STRING, "only strings expected in our type");
            let (len, n) = read_rdb_len(p, at);
            at += n;
            strings.push(p[at..at + len as usize].to_vec());
            at += len as usize;
        }
        let version = [p[at], p[at + 1]];
        assert_eq!(at + 10, p.len(), "trailing bytes after the CRC");
        Dump {
            prefix,
            strings,
            version,
        }
    }

    /// The value part: prefix, opcodes + strings, EOF.
    fn value(&self) -> Vec<u8> {
        let mut out = self.prefix.clone();
        for s in &self.strings {
            out.push(OPCODE_STRING);
            out.extend(rdb_len(s.len() as u64));
            out.extend_from_slice(s);
        }
        out.push(OPCODE_EOF);
        out
    }

    fn payload(&self) -> Vec<u8> {
        seal(self.value(), self.version)
    }
}

/// The CRC64 and the DUMP framing implemented here match Redis: a rebuilt payload of a real DUMP
/// is byte-identical, and RESTORE accepts it.
fn crc_and_framing_self_check(cx: &mut Barrage) {
    assert_eq!(
        crc64(b"123456789"),
        0xe9c6_d914_c4b8_d9ca,
        "crc64 check value"
    );
    let c = &mut cx.c;
    for key in ["keep", "keep-ns"] {
        let real = dump(c, key);
        let parsed = Dump::parse(&real);
        assert_eq!(parsed.payload(), real, "rebuilt DUMP of {key} differs");
        assert_eq!(parsed.strings.len(), 2, "header + one piece of bits");
        let (header, _) = scandump_raw(c, key);
        assert_eq!(
            &parsed.strings[0][..40],
            &header[..40],
            "RDB header and SCANDUMP header agree on the fixed fields"
        );
    }
    // And the forged chunk checksum matches the module's.
    let (header, chunks) = scandump_raw(c, "keep");
    let (it, data) = &chunks[0];
    let bits = &data[..data.len() - 8];
    assert_eq!(
        &forge_chunk(&header, 0, bits),
        data,
        "forged chunk checksum"
    );
    assert_eq!(*it as usize, 1 + bits.len());
}

fn restore(c: &mut Connection, key: &str, payload: &[u8]) -> Result<Value, String> {
    call(c, &[b"RESTORE", key.as_bytes(), b"0", payload])
}

/// RESTORE must refuse with `ERR Bad data format` (and create nothing) or give a consistent
/// filter. Returns true when accepted.
#[track_caller]
fn restore_checked(c: &mut Connection, key: &str, payload: &[u8], what: &str) -> bool {
    match restore(c, key, payload) {
        Err(e) => {
            assert_eq!(e, BAD_FORMAT, "{what}: RESTORE error");
            assert_no_key(c, key);
            false
        }
        Ok(v) => {
            assert_eq!(v, Value::Okay, "{what}");
            check_consistent(c, key, what);
            call(c, &[b"DEL", key.as_bytes()]).unwrap();
            true
        }
    }
}

fn mutated_restores(cx: &mut Barrage) {
    // A small cap: a mutated header may claim any size up to it, and RESTORE allocates the
    // filter before it reads the bits.
    config_set(&mut cx.c, "bf.max-filter-bytes", &(4 * MIB).to_string());
    let c = &mut cx.c;
    let mut rng = ChaCha8Rng::seed_from_u64(0xd00d_5eed);
    raw_ok(
        c,
        &[
            "BF.RESERVE",
            "small",
            "0.05",
            "50",
            "EXPANSION",
            "2",
            "SEED",
            "9",
        ],
    );
    madd_all(c, "small", &items("s", 120));
    let bases: Vec<Dump> = ["keep", "keep-ns", "small"]
        .iter()
        .map(|k| Dump::parse(&dump(c, k)))
        .collect();
    call(c, &[b"DEL", b"small"]).unwrap();
    // The unmutated payloads restore to the same value.
    for (k, d) in ["keep", "keep-ns"].iter().zip(&bases) {
        let copy = format!("rs:orig:{k}");
        restore(c, &copy, &d.payload()).unwrap();
        assert_eq!(digest(c, &copy), digest(c, k));
        call(c, &[b"DEL", copy.as_bytes()]).unwrap();
    }

    // Hand-made: header fields at their extremes with the checksums right (RDB path).
    let ns = &bases[1];
    for (i, (field, value)) in [
        (24usize, u64::MAX), // capacity: nothing bounds it above
        (24, 1 << 63),
        (24, 1 << 30),
        (8, u64::MAX),             // seed
        (16, 5e-324f64.to_bits()), // error rate: smallest subnormal
        (40, 0),                   // loaded = 0: an incomplete filter
    ]
    .into_iter()
    .enumerate()
    {
        let mut d = ns.clone();
        put(&mut d.strings[0], field, 8, value);
        fix_xxh3(&mut d.strings[0]);
        let payload = d.payload();
        let what = format!("RESTORE rh:{i} 0 <hex {}>", hex(&payload));
        restore_checked(c, &format!("rh:{i}"), &payload, &what);
    }

    let mut accepted = [0usize; 5];
    let mut refused = [0usize; 5];
    for i in 0..1200 {
        let base = &bases[rng.random_range(0..bases.len())];
        let kind = i % 5;
        let payload = match kind {
            // A: blind byte flips in the value part (module id, opcodes, lengths, strings).
            0 => {
                let mut v = base.value();
                let start = 1; // not the type byte: another type is not our business
                for _ in 0..rng.random_range(1..5) {
                    let at = rng.random_range(start..v.len());
                    v[at] = match rng.random_range(0..3) {
                        0 => v[at] ^ (1 << rng.random_range(0..8)),
                        1 => rng.random(),
                        _ => [0u8, 0xff, 0x40, 0x80, 0x81, 5, 0][rng.random_range(0..7)],
                    };
                }
                seal(v, base.version)
            }
            // B: header fields rewritten with a correct xxh3.
            1 | 2 => {
                let mut d = base.clone();
                d.strings[0] = mutate_header(&mut rng, &d.strings[0]);
                d.payload()
            }
            // C: framing: strings dropped, added, resized, with the header possibly fixed.
            3 => {
                let mut d = base.clone();
                match rng.random_range(0..7) {
                    0 => {
                        d.strings.pop();
                    }
                    1 => d.strings.push(d.strings[1].clone()),
                    2 => {
                        let s = &mut d.strings[1];
                        let n = rng.random_range(0..s.len());
                        s.truncate(n);
                    }
                    3 => d.strings[1].extend(std::iter::repeat_n(0u8, rng.random_range(1..100))),
                    4 => d.strings.swap(0, 1),
                    5 => d.strings[0] = vec![],
                    _ => {
                        // The header says the bits are smaller or bigger, the piece follows the
                        // header: sizes disagree.
                        let mut h = d.strings[0].clone();
                        let at = 48 + 8;
                        let bits = get(&h, at, 8);
                        put(
                            &mut h,
                            at,
                            8,
                            if rng.random_bool(0.5) {
                                bits + 64
                            } else {
                                bits.saturating_sub(64)
                            },
                        );
                        fix_xxh3(&mut h);
                        d.strings[0] = h;
                    }
                }
                d.payload()
            }
            // D: raw value truncated, or lengths rewritten to huge claims.
            _ => {
                let mut v = base.value();
                if rng.random_bool(0.5) {
                    let n = rng.random_range(1..v.len());
                    v.truncate(n);
                } else {
                    // The header string's length field: right after prefix + opcode.
                    let at = base.prefix.len() + 1;
                    let claims: [&[u8]; 5] = [
                        &[0x80, 0xff, 0xff, 0xff, 0xf0],
                        &[0x81, 0, 0, 0, 1, 0, 0, 0, 0],
                        &[0x81, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xf0],
                        &[0x7f, 0xff],
                        &[0x00],
                    ];
                    let (_, n) = read_rdb_len(&v, at);
                    v.splice(
                        at..at + n,
                        claims[rng.random_range(0..claims.len())].iter().copied(),
                    );
                }
                seal(v, base.version)
            }
        };
        let key = format!("rs:{i}");
        if restore_checked(c, &key, &payload, &format!("mutation {i} (kind {kind})")) {
            accepted[kind] += 1;
        } else {
            refused[kind] += 1;
        }
    }
    eprintln!("mutated RESTORE: accepted {accepted:?}, refused {refused:?}");
    assert!(
        refused.iter().all(|&r| r > 0),
        "every kind must hit refusals"
    );
    assert!(
        accepted.iter().sum::<usize>() > 0,
        "some header mutations are valid filters"
    );

    // Bits-only changes are valid filters with other bits: accepted.
    for i in 0..50 {
        let mut d = bases[rng.random_range(0..bases.len())].clone();
        let s = &mut d.strings[1];
        let at = rng.random_range(0..s.len());
        s[at] = rng.random();
        assert!(restore_checked(
            c,
            &format!("rb:{i}"),
            &d.payload(),
            "bits-only mutation"
        ));
    }
    assert_memory_within(cx, 8 * MIB, "mutated RESTOREs");
    config_set(&mut cx.c, "bf.max-filter-bytes", &DEFAULT_CAP.to_string());
}

/// Mutations of LZF-compressed payloads (the default `rdbcompression yes`): Redis decompresses,
/// then the module validates.
fn mutated_compressed_restores(cx: &mut Barrage) {
    let c = &mut cx.c;
    config_set(c, "rdbcompression", "yes");
    let real = dump(c, "keep");
    config_set(c, "rdbcompression", "no");
    let body = &real[..real.len() - 10];
    let version = [real[real.len() - 10], real[real.len() - 9]];
    let mut rng = ChaCha8Rng::seed_from_u64(0x12f);
    for i in 0..300 {
        let mut v = body.to_vec();
        for _ in 0..rng.random_range(1..4) {
            let at = rng.random_range(1..v.len());
            v[at] ^= 1 << rng.random_range(0..8);
        }
        restore_checked(
            c,
            &format!("rc:{i}"),
            &seal(v, version),
            "compressed mutation",
        );
    }
}
