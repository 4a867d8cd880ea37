//! What the URL asks of a single-server connection: a user and password (AUTH, or HELLO 3 with
//! AUTH for RESP3), a database (SELECT), RESP2 or RESP3 replies. `load` and `dedup` read their
//! batches' answers in either protocol and write to the URL's database only.

use crate::common::{bfctl_at, ok};
use rustbloom_testkit::*;

fn failed(out: &std::process::Output) -> String {
    assert!(!out.status.success(), "bfctl succeeded");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn load_and_dedup_as_the_url_asks() {
    let s = Server::start();
    let mut c = s.conn();
    raw_ok(
        &mut c,
        &["ACL", "SETUSER", "loader", "on", ">secret", "~*", "+@all"],
    );
    // Without the URL's credentials a connection is the default user, which may not add.
    raw_ok(
        &mut c,
        &["ACL", "SETUSER", "default", "-bf.insert", "-bf.reserve"],
    );
    let base = format!("redis://loader:secret@127.0.0.1:{}", s.port());
    for (db, query) in [("3", ""), ("4", "?protocol=resp3")] {
        let url = format!("{base}/{db}{query}");
        ok(&bfctl_at(&url, &["reserve", "seen", "0.001", "10000"], b""));
        let out = ok(&bfctl_at(&url, &["load", "seen"], b"a\nb\nc\n"));
        assert!(out.contains("3 items, 3 new"), "{query}: {out}");
        let out = ok(&bfctl_at(&url, &["dedup", "seen"], b"b\nd\nd\ne\n"));
        assert_eq!(out, "d\ne\n", "{query}");
        raw_ok(&mut c, &["SELECT", db]);
        assert_eq!(
            raw_ok(&mut c, &["BF.MEXISTS", "seen", "a", "d", "z"]),
            redis::Value::Array(vec![
                redis::Value::Int(1),
                redis::Value::Int(1),
                redis::Value::Int(0)
            ]),
            "db {db}"
        );
    }
    raw_ok(&mut c, &["SELECT", "0"]);
    assert_eq!(raw_ok(&mut c, &["EXISTS", "seen"]), redis::Value::Int(0));
    for query in ["", "?protocol=resp3"] {
        let url = format!("redis://loader:wrong@127.0.0.1:{}/3{query}", s.port());
        let err = failed(&bfctl_at(&url, &["load", "seen"], b"a\n"));
        assert!(err.contains("cannot connect"), "{query}: {err}");
    }
}
