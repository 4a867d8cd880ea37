//! Hostile LOADCHUNK streams: forged headers with a correct checksum and odd fields,
//! chunk streams broken in every way while a load is under way (with correct chunk checksums),
//! and LOADCHUNK aimed at live filters and at other types. Every broken chunk must be refused
//! without effect; each test ends with the checks of [`Barrage::finish`].

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use redis::{Connection, Value};
use rustbloom_testkit::hostile::*;
use rustbloom_testkit::payload::*;
use rustbloom_testkit::*;

#[test]
fn forged_loadchunk_headers_are_refused_or_load() {
    run(forged_loadchunk_headers);
}

#[test]
fn mutated_loadchunk_streams_are_refused_without_effect() {
    run(mutated_loadchunk_streams);
}

#[test]
fn loadchunk_at_live_filters_is_refused() {
    run(loadchunk_at_live_filters);
}

fn loadchunk(c: &mut Connection, key: &str, it: i64, data: &[u8]) -> Result<Value, String> {
    let its = it.to_string();
    call(c, &[b"BF.LOADCHUNK", key.as_bytes(), its.as_bytes(), data])
}

/// Headers with a correct checksum and odd but decodable fields: BF.LOADCHUNK either refuses or
/// starts a load; completing the load gives a consistent filter.
fn forged_loadchunk_headers(cx: &mut Barrage) {
    // Mutated headers may claim any size up to the cap, which we then fill chunk by chunk.
    config_set(&mut cx.c, "bf.max-filter-bytes", &(4 * MIB).to_string());
    let c = &mut cx.c;
    let (real, _) = scandump_raw(c, "keep");
    let mut rng = ChaCha8Rng::seed_from_u64(0x10ad);
    let mut started = 0;
    for i in 0..400 {
        let h = if i < 10 {
            // Hand-made edge cases.
            match i {
                0 => build_header(false, 0, 0.01, 1u64 << 62, 2, 64, &[(0, 512, 1)]),
                1 => build_header(false, 0, 0.01, u64::MAX, 2, 64, &[(0, 512, 1)]),
                2 => build_header(false, 0, 0.01, u64::MAX / 2 + 1, 2, 64, &[(3, 512, 255)]),
                3 => build_header(false, 0, 1e-300, 1, 1, 8, &[(1, 64, 255)]),
                4 => build_header(true, 7, 0.999, 1, 0, 8, &[(1, 64, 1)]),
                5 => build_header(false, 0, 0.5, 1, 32768, 16, &[(1, 64, 1), (0, 64, 1)]),
                6 => build_header(false, 0, 0.01, 1 << 40, 32768, 8, &[(1 << 40, 64, 1)]),
                7 => build_header(false, u64::MAX, 5e-324, 1, 1, 8, &[(0, 64, 1)]),
                // Items beyond i64: BF.CARD / BF.INFO items.
                8 => build_header(true, 0, 0.01, u64::MAX, 0, 8, &[(u64::MAX, 64, 1)]),
                _ => build_header(
                    false,
                    0,
                    0.01,
                    1 << 62,
                    4,
                    16,
                    &[(1 << 62, 64, 1), (1 << 63, 64, 1)],
                ),
            }
        } else {
            mutate_header(&mut rng, &real)
        };
        let key = format!("fh:{i}");
        match loadchunk(c, &key, 1, &h) {
            Err(e) => {
                assert!(e.starts_with("ERR "), "{e}");
                assert_no_key(c, &key);
            }
            Ok(_) => {
                started += 1;
                // A started load refuses queries until complete.
                must_err_eq(c, &[b"BF.EXISTS", key.as_bytes(), b"x"], LOADING);
                must_err_eq(c, &[b"BF.CARD", key.as_bytes()], LOADING);
                // Complete it with forged chunks of random bits.
                let total: u64 = (0..get(&h, 36, 4) as usize)
                    .map(|l| get(&h, 48 + 24 * l + 8, 8) / 8)
                    .sum();
                assert!(
                    total <= 4 * MIB,
                    "admitted {total} bytes over the 4 MiB cap"
                );
                let mut offset = 0u64;
                while offset < total {
                    let len = (total - offset).min(rng.random_range(1..(total / 4).max(4096)));
                    let bits: Vec<u8> = (0..len).map(|_| rng.random()).collect();
                    let chunk = forge_chunk(&h, offset, &bits);
                    loadchunk(c, &key, (1 + offset + len) as i64, &chunk)
                        .unwrap_or_else(|e| panic!("header {i}: chunk at {offset}: {e}"));
                    offset += len;
                }
                let what = if i < 10 {
                    format!("BF.LOADCHUNK {key} 1 <hex {}> + chunks", hex(&h))
                } else {
                    format!("forged header {i}")
                };
                check_consistent(c, &key, &what);
                call(c, &[b"DEL", key.as_bytes()]).unwrap();
            }
        }
    }
    eprintln!("forged LOADCHUNK headers: {started} of 400 started a load");
    assert!(started >= 5, "the hand-made valid headers must load");
    config_set(c, "bf.max-filter-bytes", &DEFAULT_CAP.to_string());
}

/// Broken chunk streams into a key being loaded: every broken chunk is refused without effect,
/// so finishing with the correct chunks still gives the source filter exactly.
fn mutated_loadchunk_streams(cx: &mut Barrage) {
    let c = &mut cx.c;
    let keep_digest = digest(c, "keep");
    let (header, real_chunks) = scandump_raw(c, "keep");
    assert_eq!(real_chunks.len(), 1);
    let bits = real_chunks[0].1[..real_chunks[0].1.len() - 8].to_vec();
    let (other_header, other_chunks) = scandump_raw(c, "keep-ns");
    let mut rng = ChaCha8Rng::seed_from_u64(0x57_4ea4);

    for round in 0..200 {
        let key = format!("ls:{round}");
        // Split the bits into 1..8 pieces at random cut points; forge correct chunks for them.
        let pieces = rng.random_range(1..9usize);
        let mut cuts: Vec<usize> = (0..pieces - 1)
            .map(|_| rng.random_range(1..bits.len()))
            .collect();
        cuts.push(0);
        cuts.push(bits.len());
        cuts.sort();
        cuts.dedup();
        let chunks: Vec<(i64, Vec<u8>)> = cuts
            .windows(2)
            .map(|w| {
                (
                    (1 + w[1]) as i64,
                    forge_chunk(&header, w[0] as u64, &bits[w[0]..w[1]]),
                )
            })
            .collect();

        // A data chunk before any header: no such key.
        must_err_eq(
            c,
            &[
                b"BF.LOADCHUNK",
                key.as_bytes(),
                chunks[0].0.to_string().as_bytes(),
                &chunks[0].1,
            ],
            NOT_FOUND,
        );
        assert_no_key(c, &key);
        // Broken headers first.
        for _ in 0..rng.random_range(0..3) {
            let mut h = header.clone();
            let at = rng.random_range(0..h.len());
            h[at] ^= 1 << rng.random_range(0..8);
            must_err_eq(c, &[b"BF.LOADCHUNK", key.as_bytes(), b"1", &h], BAD_DATA);
            assert_no_key(c, &key);
            let n = rng.random_range(0..header.len());
            must_err_eq(
                c,
                &[b"BF.LOADCHUNK", key.as_bytes(), b"1", &header[..n]],
                BAD_DATA,
            );
            assert_no_key(c, &key);
        }
        loadchunk(c, &key, 1, &header).unwrap();
        let mut next = 0;
        while next < chunks.len() {
            let (it, data) = &chunks[next];
            // Send some broken chunks before the right one.
            for _ in 0..rng.random_range(0..4) {
                let (bad_it, bad): (i64, Vec<u8>) = match rng.random_range(0..10) {
                    0 => {
                        let mut d = data.clone();
                        let at = rng.random_range(0..d.len());
                        d[at] ^= 1 << rng.random_range(0..8);
                        (*it, d)
                    }
                    1 => {
                        let n = rng.random_range(0..data.len());
                        (*it, data[..n].to_vec())
                    }
                    2 => (
                        *it + [1i64, -1, 7, -7][rng.random_range(0..4)],
                        data.clone(),
                    ),
                    3 if next + 1 < chunks.len() => chunks[next + 1].clone(), // reordered
                    4 if next > 0 => chunks[next - 1].clone(),                // replayed
                    5 => (1, header.clone()),                                 // header again
                    6 => (other_chunks[0].0, other_chunks[0].1.clone()),      // another filter's
                    7 => (0, data.clone()),
                    8 => (i64::MAX, data.clone()),
                    _ => {
                        // Correct checksum, wrong place: a chunk forged for an offset past the
                        // expected one, or reaching past the end.
                        let off = rng.random_range(0..bits.len() as u64 + 100);
                        let len = rng.random_range(1..64u64);
                        let b: Vec<u8> = (0..len).map(|_| rng.random()).collect();
                        let expected = cuts[next] as u64;
                        if off == expected && off + len <= bits.len() as u64 {
                            continue; // that one would be right
                        }
                        ((1 + off + len) as i64, forge_chunk(&header, off, &b))
                    }
                };
                let e = loadchunk(c, &key, bad_it, &bad).err().unwrap_or_else(|| {
                    panic!("round {round}: broken chunk accepted at iterator {bad_it}")
                });
                assert!(
                    [
                        BAD_DATA,
                        BAD_OFFSET,
                        "ERR invalid chunk - Too big for current filter"
                    ]
                    .contains(&e.as_str()),
                    "round {round}: {e}"
                );
                if next < chunks.len() {
                    must_err_eq(c, &[b"BF.EXISTS", key.as_bytes(), b"x"], LOADING);
                }
            }
            loadchunk(c, &key, *it, data)
                .unwrap_or_else(|e| panic!("round {round}: chunk {next}: {e}"));
            next += 1;
        }
        assert_eq!(
            digest(c, &key),
            keep_digest,
            "round {round}: loaded filter differs"
        );
        // After completion, any further chunk (even a correct one) is refused.
        let last = chunks.last().unwrap();
        must_err_eq(
            c,
            &[
                b"BF.LOADCHUNK",
                key.as_bytes(),
                last.0.to_string().as_bytes(),
                &last.1,
            ],
            BAD_OFFSET,
        );
        assert_eq!(digest(c, &key), keep_digest);
        call(c, &[b"DEL", key.as_bytes()]).unwrap();
    }
    // A load abandoned half way stays an incomplete filter that refuses queries, survives
    // DUMP/RESTORE, and can be deleted.
    let key = "ls:abandoned";
    loadchunk(c, key, 1, &other_header).unwrap();
    assert!(!check_consistent(c, key, "abandoned load"));
    call(c, &[b"DEL", key.as_bytes()]).unwrap();
    assert_memory_within(cx, 8 * MIB, "LOADCHUNK streams");
}

/// LOADCHUNK aimed at live (complete) filters and at other types: always refused, never a change.
fn loadchunk_at_live_filters(cx: &mut Barrage) {
    let c = &mut cx.c;
    let (header, chunks) = scandump_raw(c, "keep");
    let (ns_header, ns_chunks) = scandump_raw(c, "keep-ns");
    let before = (digest(c, "keep"), digest(c, "keep-ns"));
    let bits = &chunks[0].1[..chunks[0].1.len() - 8];
    let zeros = vec![0u8; bits.len()];
    let ones = vec![0xffu8; bits.len()];
    for key in ["keep", "keep-ns"] {
        // Headers: the key exists (RedisBloom reads iterator 1 on a filter as a misplaced chunk).
        for h in [&header, &ns_header] {
            must_err_eq(c, &[b"BF.LOADCHUNK", key.as_bytes(), b"1", h], BAD_DATA);
        }
        // Real and forged chunks (correct checksum for this very filter): not being loaded.
        let mut attempts: Vec<(i64, Vec<u8>)> = vec![chunks[0].clone(), ns_chunks[0].clone()];
        for (h, b) in [(&header, &zeros), (&header, &ones), (&ns_header, &zeros)] {
            attempts.push(((1 + b.len()) as i64, forge_chunk(h, 0, b)));
            attempts.push(((1 + 8 + 64) as i64, forge_chunk(h, 8, &b[..64])));
        }
        attempts.push((2, forge_chunk(&header, 0, &[0xff])));
        for (it, data) in &attempts {
            let e = loadchunk(c, key, *it, data).unwrap_err();
            assert_eq!(e, BAD_OFFSET, "LOADCHUNK {key} {it}");
        }
    }
    assert_eq!(
        (digest(c, "keep"), digest(c, "keep-ns")),
        before,
        "live filters changed"
    );
    // Other types.
    raw_ok(c, &["SET", "str2", "x"]);
    for (it, data) in [(1i64, header.clone()), (chunks[0].0, chunks[0].1.clone())] {
        let e = loadchunk(c, "str2", it, &data).unwrap_err();
        assert!(e.starts_with("WRONGTYPE"), "{e}");
    }
    assert_eq!(key_type(c, "str2"), "string");
    call(c, &[b"DEL", b"str2"]).unwrap();
}
