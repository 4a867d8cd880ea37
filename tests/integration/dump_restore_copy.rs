//! Copies of a filter: DUMP/RESTORE onto the same server and another one (REPLACE included, a
//! corrupted payload refused) and COPY (to the same and another database) give a filter identical
//! to its source and independent of it.
use redis::Value;
use rustbloom_testkit::*;

#[test]
fn dump_restore_same_and_other_server() {
    let a = Server::start();
    let b = Server::start();
    let mut ca = a.conn();
    let mut cb = b.conn();
    let f = VariedFilters::create(&mut ca);
    let mut size_diffs: Vec<String> = Vec::new();
    for k in VARIED_KEYS {
        let dump: Vec<u8> = redis::cmd("DUMP").arg(k).query(&mut ca).unwrap();
        assert!(!dump.is_empty());
        let copy = format!("{k}-copy");
        let r: Value = redis::cmd("RESTORE")
            .arg(&copy)
            .arg(0)
            .arg(dump.as_slice())
            .query(&mut ca)
            .unwrap();
        assert_eq!(r, Value::Okay);
        let r: Value = redis::cmd("RESTORE")
            .arg(k)
            .arg(0)
            .arg(dump.as_slice())
            .query(&mut cb)
            .unwrap();
        assert_eq!(r, Value::Okay);
        assert_eq!(digest(&mut ca, k), digest(&mut ca, &copy), "{k}");
        assert_same_digest(&mut ca, k, &mut cb, k);
        let (ia, ib, ic) = (info(&mut ca, k), info(&mut cb, k), info(&mut ca, &copy));
        let strip = |i: &Info| Info {
            size: 0,
            ..i.clone()
        };
        assert_eq!(
            strip(&ia),
            strip(&ib),
            "{k}: BF.INFO differs on the other server"
        );
        assert_eq!(
            strip(&ia),
            strip(&ic),
            "{k}: BF.INFO differs for the restored copy"
        );
        if ia.size != ib.size || ia.size != ic.size {
            size_diffs.push(format!(
                "{k}: Size {} (orig) vs {} (other server) vs {} (copy)",
                ia.size, ib.size, ic.size
            ));
        }
    }
    for (k, m) in &f.members {
        assert_all_exist(&mut cb, k, m);
    }
    // RESTORE ... REPLACE over an existing filter.
    let dump: Vec<u8> = redis::cmd("DUMP").arg("scaled").query(&mut ca).unwrap();
    let r: Value = redis::cmd("RESTORE")
        .arg("auto")
        .arg(0)
        .arg(dump.as_slice())
        .arg("REPLACE")
        .query(&mut cb)
        .unwrap();
    assert_eq!(r, Value::Okay);
    assert_same_digest(&mut ca, "scaled", &mut cb, "auto");
    // A corrupted payload is refused by RESTORE (Redis checks the CRC).
    let mut bad = dump.clone();
    let mid = bad.len() / 2;
    bad[mid] ^= 0xff;
    let r: redis::RedisResult<Value> = redis::cmd("RESTORE")
        .arg("corrupt")
        .arg(0)
        .arg(bad.as_slice())
        .query(&mut cb);
    assert!(r.is_err());
    assert_no_key(&mut cb, "corrupt");
    assert!(
        size_diffs.is_empty(),
        "BF.INFO Size differs after DUMP/RESTORE:\n{}",
        size_diffs.join("\n")
    );
}

#[test]
fn copy_is_deep() {
    let s = Server::start();
    let mut c = s.conn();
    raw_ok(&mut c, &["BF.RESERVE", "orig", "0.01", "100"]);
    let its = items("o", 300);
    madd_all(&mut c, "orig", &its);
    let d = digest(&mut c, "orig");
    let i = info(&mut c, "orig");
    let n: i64 = redis::cmd("COPY")
        .arg("orig")
        .arg("copy")
        .query(&mut c)
        .unwrap();
    assert_eq!(n, 1);
    assert_eq!(d, digest(&mut c, "copy"));
    let info_copy = info(&mut c, "copy");
    assert_eq!(
        Info {
            size: 0,
            ..i.clone()
        },
        Info {
            size: 0,
            ..info_copy.clone()
        }
    );
    let more = items("copy-only", 500);
    madd_all(&mut c, "copy", &more);
    assert_ne!(d, digest(&mut c, "copy"));
    assert_eq!(
        d,
        digest(&mut c, "orig"),
        "adding to the copy changed the original"
    );
    assert_eq!(
        i,
        info(&mut c, "orig"),
        "adding to the copy changed the original's BF.INFO"
    );
    assert_all_exist(&mut c, "copy", &its);
    assert_all_exist(&mut c, "copy", &more);
    // And the other way round.
    raw_ok(&mut c, &["BF.ADD", "orig", "orig-only"]);
    let dc = digest(&mut c, "copy");
    madd_all(&mut c, "orig", &items("orig-more", 100));
    assert_eq!(dc, digest(&mut c, "copy"));
    // COPY to another db, then DEL the original.
    let n: i64 = redis::cmd("COPY")
        .arg("orig")
        .arg("orig")
        .arg("DB")
        .arg(1)
        .query(&mut c)
        .unwrap();
    assert_eq!(n, 1);
    let d_orig = digest(&mut c, "orig");
    let _: i64 = redis::cmd("DEL").arg("orig").query(&mut c).unwrap();
    let _: Value = redis::cmd("SELECT").arg(1).query(&mut c).unwrap();
    assert_eq!(d_orig, digest(&mut c, "orig"));
    assert_all_exist(&mut c, "orig", &its);
    assert_eq!(
        i.size, info_copy.size,
        "BF.INFO Size of the COPY differs from the original: {i:?} vs {info_copy:?}"
    );
}
