mod common;
use common::*;
#[test]
fn harness_self_check() {
    let mut s = Server::start_without_module(&[]);
    let mut c = s.conn();
    assert_eq!(raw_ok(&mut c, &["SET", "a", "1"]), redis::Value::Okay);
    assert_err(
        &mut c,
        &["GET"],
        "ERR wrong number of arguments for 'get' command",
    );
    assert_err(
        &mut c,
        &["LPUSH", "a", "x"],
        "WRONGTYPE Operation against a key holding the wrong kind of value",
    );
    println!("digest {}", digest(&mut c, "a"));
    let mut c3 = s.conn_resp3();
    println!("{:?}", raw_ok(&mut c3, &["HELLO"]));
    let p = s.port();
    s.restart();
    assert_eq!(p, s.port());
    let mut c = s.conn();
    assert!(!exists(&mut c, "a"));
    let _ = s.conn_tcp();
    println!("{}", s.log_tail());
}
