//! RedisBloom's data in rustbloom: filters written by the real RedisBloom 2.8.2 (generated at test
//! time, see `rustbloom_testkit::redisbloom`) reach rustbloom by every path a user has — an RDB
//! restart on RedisBloom's `dump.rdb`, RESTORE of its DUMP, BF.LOADCHUNK of its SCANDUMP, a
//! replica's full sync from a RedisBloom primary — and then answer exactly as RedisBloom does:
//! BF.INFO field by field (Size included), BF.CARD, every member present, and 100,000 non-members
//! per filter answered item by item as RedisBloom answers them. Then the same growth commands on
//! both (BF.MADD, BF.ADD, BF.INSERT; NONSCALING filters pushed past full) must get the same
//! replies and leave filters that still answer alike, and still do after rustbloom saved and
//! reloaded them in its own encoding (DEBUG RELOAD).
//!
//! RedisBloom comes from `RUSTBLOOM_REDISBLOOM_MODULE` (set by `make test`); without it these tests
//! print a loud SKIPPED and pass.

use redis::Value;
use rustbloom_testkit::redisbloom::*;
use rustbloom_testkit::*;

/// Before growth, growth, after growth, then DEBUG RELOAD (rustbloom's own encoding) and after
/// again: every difference from RedisBloom, labelled by `path`.
fn check_migrated(s: &Server, corpus: &Corpus, path: &str) {
    let mut c = s.conn();
    assert_no_diffs(
        &format!("{path}: filters as RedisBloom wrote them"),
        &compare(&mut c, corpus, Phase::Before),
    );
    assert_no_diffs(&format!("{path}: growth replies"), &grow(&mut c, corpus));
    assert_no_diffs(
        &format!("{path}: after growth"),
        &compare(&mut c, corpus, Phase::After),
    );
    let r = raw(&mut c, &["DEBUG", "RELOAD"]);
    assert_eq!(r, Ok(Value::Okay), "DEBUG RELOAD; log:\n{}", s.log_tail());
    assert_no_diffs(
        &format!("{path}: after growth, saved and reloaded by rustbloom"),
        &compare(&mut c, corpus, Phase::After),
    );
}

/// The control: RedisBloom restarted on its own dump.rdb answers exactly as recorded, before and
/// after growth — so the corpus, the recording and the comparison are right — and a rustbloom
/// holding filters built natively by the same commands is told apart (the comparison sees
/// hashing).
#[test]
fn redisbloom_reference_is_consistent() {
    let Some(module) = redisbloom_module("redisbloom_reference_is_consistent") else {
        return;
    };
    let corpus = corpus(&module);
    // The corpus has the shapes it claims.
    let layers = |key: &str| -> i64 {
        let i = corpus.cases.iter().position(|c| c.key == key).unwrap();
        let f = &corpus.before[i].info;
        f.iter()
            .find(|(n, _)| n == "Number of filters")
            .unwrap()
            .1
            .parse()
            .unwrap()
    };
    assert!(layers("many_layers") >= 12, "{}", layers("many_layers"));
    assert_eq!(layers("expansion1"), 20);
    assert!(layers("expansion4") >= 4);
    assert_eq!(layers("nonscaling"), 1);
    for refused in ["nonscaling", "insert_nonscaling", "empty_nonscaling"] {
        let i = corpus.cases.iter().position(|c| c.key == refused).unwrap();
        assert!(
            corpus.grow_replies[i].iter().any(|r| r.contains("error(")),
            "{refused}: growth should reach the non-scaling filter's capacity"
        );
    }
    for (i, case) in corpus.cases.iter().enumerate() {
        let before = &corpus.before[i].probes;
        assert_eq!(before.len(), PROBES, "{}", case.key);
        assert!(corpus.scandumps[i].len() >= 2, "{}", case.key);
    }

    let rb = start_redisbloom(&module, &[("dump.rdb", &corpus.rdb)]);
    let mut c = rb.conn();
    assert_no_diffs(
        "RedisBloom on its own dump.rdb",
        &compare(&mut c, corpus, Phase::Before),
    );
    assert_no_diffs("RedisBloom growing again", &grow(&mut c, corpus));
    assert_no_diffs(
        "RedisBloom after growing again",
        &compare(&mut c, corpus, Phase::After),
    );
    drop(c);
    drop(rb);

    // rustbloom's own filters, built by the same commands, hash differently: the comparison must
    // notice (BF.INFO Size and the non-members' answers differ).
    let s = Server::start();
    let mut c = s.conn();
    for case in &corpus.cases {
        run_all(&mut c, &case.build);
    }
    let diffs = compare(&mut c, corpus, Phase::Before);
    // Wherever RedisBloom's answers hold enough false positives, other hashing must show.
    let mut told_apart = 0;
    for (i, case) in corpus.cases.iter().enumerate() {
        let positives = corpus.before[i].probes.iter().filter(|&&x| x == 1).count();
        if positives >= 20 {
            let needle = format!("{}: ", case.key);
            assert!(
                diffs
                    .iter()
                    .any(|d| d.starts_with(&needle)
                        && d.contains("non-members answered differently")),
                "{}: a natively built filter should answer RedisBloom's {positives} false \
                 positives differently: {diffs:#?}",
                case.key
            );
            told_apart += 1;
        }
    }
    assert!(
        told_apart >= 8,
        "only {told_apart} filters with enough false positives"
    );
}

/// (a) RDB restart: rustbloom started on the dump.rdb RedisBloom saved.
#[test]
fn rdb_written_by_redisbloom_loads() {
    let Some(module) = redisbloom_module("rdb_written_by_redisbloom_loads") else {
        return;
    };
    let corpus = corpus(&module);
    let s = Server::start_with_files(&[], &[("dump.rdb", &corpus.rdb)]);
    let mut c = s.conn();
    let mut keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut c).unwrap();
    keys.sort();
    let mut want: Vec<String> = corpus.cases.iter().map(|c| c.key.clone()).collect();
    want.sort();
    assert_eq!(keys, want, "keys loaded from RedisBloom's dump.rdb");
    check_migrated(&s, corpus, "RDB restart");
}

/// (b) RESTORE of RedisBloom's DUMP payloads.
#[test]
fn restore_of_redisbloom_dump() {
    let Some(module) = redisbloom_module("restore_of_redisbloom_dump") else {
        return;
    };
    let corpus = corpus(&module);
    let s = Server::start();
    let mut c = s.conn();
    for (case, payload) in corpus.cases.iter().zip(&corpus.dumps) {
        let r = rawb(
            &mut c,
            &[b"RESTORE", case.key.as_bytes(), b"0", payload.as_slice()],
        );
        assert_eq!(r, Ok(Value::Okay), "RESTORE {}", case.key);
    }
    check_migrated(&s, corpus, "RESTORE");
}

/// (c) BF.LOADCHUNK of RedisBloom's SCANDUMP streams, chunk by chunk as it answered them.
#[test]
fn loadchunk_of_redisbloom_scandump() {
    let Some(module) = redisbloom_module("loadchunk_of_redisbloom_scandump") else {
        return;
    };
    let corpus = corpus(&module);
    let s = Server::start();
    let mut c = s.conn();
    for (case, chunks) in corpus.cases.iter().zip(&corpus.scandumps) {
        loadchunks(&mut c, &case.key, chunks);
    }
    check_migrated(&s, corpus, "LOADCHUNK");
}

/// (d) A rustbloom replica of a RedisBloom primary: the full sync, then the primary's growth
/// commands replicated to it.
#[test]
fn replica_of_redisbloom_primary() {
    let Some(module) = redisbloom_module("replica_of_redisbloom_primary") else {
        return;
    };
    let corpus = corpus(&module);
    let primary = start_redisbloom(&module, &[("dump.rdb", &corpus.rdb)]);
    let replica = Server::start();
    replicate_from(&primary, &replica);
    let mut pc = primary.conn();
    let mut rc = replica.conn();
    wait_synced(&mut pc, &mut [&mut rc]);
    assert_no_diffs(
        "replica after its full sync",
        &compare(&mut rc, corpus, Phase::Before),
    );
    // The growth runs on RedisBloom and reaches the replica as the replication stream.
    assert_no_diffs("growth on the RedisBloom primary", &grow(&mut pc, corpus));
    wait_synced(&mut pc, &mut [&mut rc]);
    assert_no_diffs(
        "replica after the primary's growth",
        &compare(&mut rc, corpus, Phase::After),
    );
    // Promoted, it keeps them in its own encoding.
    assert_eq!(raw(&mut rc, &["REPLICAOF", "NO", "ONE"]), Ok(Value::Okay));
    assert_eq!(raw(&mut rc, &["DEBUG", "RELOAD"]), Ok(Value::Okay));
    assert_no_diffs(
        "promoted replica, saved and reloaded by rustbloom",
        &compare(&mut rc, corpus, Phase::After),
    );
}

/// A migrated filter keeps RedisBloom's format on the way out: rustbloom's BF.SCANDUMP of it is
/// RedisBloom's own stream, chunk for chunk, so it can go back to a RedisBloom.
#[test]
fn scandump_of_migrated_filter_is_redisbloom_stream() {
    let Some(module) = redisbloom_module("scandump_of_migrated_filter_is_redisbloom_stream") else {
        return;
    };
    let corpus = corpus(&module);
    let s = Server::start();
    let mut c = s.conn();
    let mut diffs = Vec::new();
    for ((case, payload), want) in corpus
        .cases
        .iter()
        .zip(&corpus.dumps)
        .zip(&corpus.scandumps)
    {
        let r = rawb(
            &mut c,
            &[b"RESTORE", case.key.as_bytes(), b"0", payload.as_slice()],
        );
        assert_eq!(r, Ok(Value::Okay), "RESTORE {}", case.key);
        let got = scandump(&mut c, &case.key);
        if &got != want {
            let its = |v: &[(i64, Vec<u8>)]| -> Vec<(i64, usize)> {
                v.iter().map(|(i, d)| (*i, d.len())).collect()
            };
            diffs.push(format!(
                "{}: SCANDUMP (iterator, bytes) {:?}, RedisBloom {:?}{}",
                case.key,
                its(&got),
                its(want),
                if got.first() != want.first() {
                    " (headers differ)"
                } else {
                    ""
                }
            ));
        }
    }
    assert_no_diffs("SCANDUMP of filters RESTOREd from RedisBloom", &diffs);
}

/// The core's RedisBloom reader (`rustbloom_core::redisbloom`, which the module serves migrated
/// filters with) fed RedisBloom's SCANDUMP streams of the corpus predicts everything RedisBloom
/// answered: BF.INFO, every non-member, the growth replies item by item (refusals included) and
/// the answers after growth. This needs no server of ours: it checks the corpus and the recording
/// against the reader, so that a failure of the tests above points at the module's wiring.
#[test]
fn core_reader_predicts_redisbloom_on_the_corpus() {
    use rustbloom_core::redisbloom::scandump::{decode_header, load_chunk};
    use rustbloom_core::redisbloom::RbFilter;
    use rustbloom_core::{Filter, InsertError, Unlimited};

    let Some(module) = redisbloom_module("core_reader_predicts_redisbloom_on_the_corpus") else {
        return;
    };
    let corpus = corpus(&module);
    let info = |f: &RbFilter| -> Vec<(String, String)> {
        vec![
            ("Capacity".into(), f.capacity().to_string()),
            (
                "Size".into(),
                Filter::RedisBloom(f.try_clone(&mut Unlimited).unwrap())
                    .info_size()
                    .to_string(),
            ),
            ("Number of filters".into(), f.links().len().to_string()),
            ("Number of items inserted".into(), f.items().to_string()),
            (
                "Expansion rate".into(),
                if f.is_scaling() {
                    f.header().growth.to_string()
                } else {
                    "nil".into()
                },
            ),
        ]
    };
    let answers = |f: &RbFilter, items: &[Vec<u8>]| -> Vec<u8> {
        items.iter().map(|i| u8::from(f.contains(i))).collect()
    };
    let mut diffs = Vec::new();
    for (i, case) in corpus.cases.iter().enumerate() {
        let k = &case.key;
        let chunks = &corpus.scandumps[i];
        let mut f = decode_header(&chunks[0].1, &mut Unlimited)
            .unwrap_or_else(|e| panic!("{k}: header: {e:?}"));
        for (it, data) in &chunks[1..] {
            load_chunk(&mut f, *it as u64, data).unwrap_or_else(|e| panic!("{k}: chunk: {e:?}"));
        }
        let before = &corpus.before[i];
        if info(&f) != before.info {
            diffs.push(format!(
                "{k}: info {:?}, RedisBloom {:?}",
                info(&f),
                before.info
            ));
        }
        if answers(&f, &corpus.probes) != before.probes {
            diffs.push(format!("{k}: probes differ before growth"));
        }
        // Growth as RedisBloom replies: BF.ADD one reply; BF.MADD / BF.INSERT one per item up to
        // and including the first refusal.
        let mut replies = Vec::new();
        for g in &case.grow {
            let mut parts = Vec::new();
            for item in &g.items {
                match f.insert(item, &mut Unlimited) {
                    Ok(new) => parts.push(u8::from(new).to_string()),
                    Err(InsertError::NonScalingFull) => {
                        parts.push("error(ERR non scaling filter is full)".into());
                        break;
                    }
                    Err(e) => panic!("{k}: insert: {e:?}"),
                }
            }
            replies.push(if g.single {
                parts.remove(0)
            } else {
                format!("[{}]", parts.join(","))
            });
        }
        diffs.extend(reply_diffs(case, &replies, &corpus.grow_replies[i]));
        let after = &corpus.after[i];
        if info(&f) != after.info {
            diffs.push(format!(
                "{k}: info after growth {:?}, RedisBloom {:?}",
                info(&f),
                after.info
            ));
        }
        if answers(&f, &corpus.probes) != after.probes {
            diffs.push(format!("{k}: probes differ after growth"));
        }
    }
    assert_no_diffs("core reader on RedisBloom's streams", &diffs);
}
