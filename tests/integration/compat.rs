//! What RedisBloom's users and tools see of the module besides the BF.* commands: the version in
//! `MODULE LIST`, and RedisBloom's config names where the server lets a module register them.
use redis::{Connection, Value};
use rustbloom_testkit::*;

/// The version RedisBloom would report for this crate's version: major·10000 + minor·100 + patch.
fn expected_version() -> i64 {
    let part = |text: &str| text.parse::<i64>().expect("numeric version part");
    part(env!("CARGO_PKG_VERSION_MAJOR")) * 10000
        + part(env!("CARGO_PKG_VERSION_MINOR")) * 100
        + part(env!("CARGO_PKG_VERSION_PATCH"))
}

/// `CONFIG GET name`: the value, or None when the server has no such config.
fn config_get(c: &mut Connection, name: &str) -> Option<String> {
    let pair: Vec<String> = redis::cmd("CONFIG").arg("GET").arg(name).query(c).unwrap();
    match pair.as_slice() {
        [] => None,
        [n, v] if n == name => Some(v.clone()),
        other => panic!("CONFIG GET {name}: {other:?}"),
    }
}

fn bf_info_field(c: &mut Connection, key: &str, field: &str) -> Value {
    let reply = as_array(raw_ok(c, &["BF.INFO", key, field]));
    reply.into_iter().next().expect("one value")
}

#[test]
fn module_list_names_bf_with_a_redisbloom_style_version() {
    let s = Server::start();
    let mut c = s.conn();
    let modules = as_array(raw_ok(&mut c, &["MODULE", "LIST"]));
    let ours: Vec<Vec<(String, Value)>> = modules
        .into_iter()
        .map(info_pairs)
        .filter(|fields| {
            fields
                .iter()
                .any(|(n, v)| n == "name" && value_to_string(v) == "bf")
        })
        .collect();
    assert_eq!(ours.len(), 1, "one module named bf in MODULE LIST");
    let version = ours[0]
        .iter()
        .find(|(n, _)| n == "ver")
        .map(|(_, v)| as_int(v))
        .expect("a ver field");
    assert_eq!(version, expected_version());
}

#[test]
fn redisbloom_config_names_where_the_server_allows_them() {
    let s = Server::start();
    let mut c = s.conn();
    let kind = server_kind(&mut c);
    if !kind.has_unprefixed_module_configs() {
        // Redis 7, Valkey: the module loads all the same, says why in the log, and our names work.
        for name in ["bf-error-rate", "bf-initial-size", "bf-expansion-factor"] {
            assert_eq!(config_get(&mut c, name), None, "{name} on {kind:?}");
        }
        assert!(
            s.log()
                .contains("does not let modules register unprefixed configs"),
            "no notice in the log:\n{}",
            s.log_tail()
        );
        raw_ok(&mut c, &["CONFIG", "SET", "bf.initial-capacity", "500"]);
        raw_ok(&mut c, &["BF.ADD", "k", "a"]);
        assert_eq!(as_int(&bf_info_field(&mut c, "k", "CAPACITY")), 500);
        return;
    }
    // Redis 8: RedisBloom's names read and set the same settings as ours.
    assert!(s.log().contains("are aliases of"), "{}", s.log_tail());
    assert_eq!(config_get(&mut c, "bf-error-rate").as_deref(), Some("0.01"));
    assert_eq!(
        config_get(&mut c, "bf-initial-size").as_deref(),
        Some("100")
    );
    assert_eq!(
        config_get(&mut c, "bf-expansion-factor").as_deref(),
        Some("2")
    );
    raw_ok(&mut c, &["CONFIG", "SET", "bf-error-rate", "0.001"]);
    assert_eq!(
        config_get(&mut c, "bf.error-rate").as_deref(),
        Some("0.001")
    );
    raw_ok(&mut c, &["CONFIG", "SET", "bf.initial-capacity", "300"]);
    assert_eq!(
        config_get(&mut c, "bf-initial-size").as_deref(),
        Some("300")
    );
    raw_ok(&mut c, &["CONFIG", "SET", "bf-initial-size", "500"]);
    raw_ok(&mut c, &["CONFIG", "SET", "bf-expansion-factor", "4"]);
    raw_ok(&mut c, &["BF.ADD", "scaling", "a"]);
    assert_eq!(as_int(&bf_info_field(&mut c, "scaling", "CAPACITY")), 500);
    assert_eq!(as_int(&bf_info_field(&mut c, "scaling", "EXPANSION")), 4);
    // Expansion factor 0: RedisBloom's non-scaling default.
    raw_ok(&mut c, &["CONFIG", "SET", "bf-expansion-factor", "0"]);
    raw_ok(&mut c, &["CONFIG", "SET", "bf-initial-size", "1"]);
    raw_ok(&mut c, &["BF.ADD", "fixed", "a"]);
    assert_eq!(bf_info_field(&mut c, "fixed", "EXPANSION"), Value::Nil);
    assert_err(
        &mut c,
        &["BF.ADD", "fixed", "b"],
        "ERR non scaling filter is full",
    );
    assert_eq!(config_get(&mut c, "bf.expansion").as_deref(), Some("4"));
    // Setting our name makes new filters scale again.
    raw_ok(&mut c, &["CONFIG", "SET", "bf.expansion", "3"]);
    assert_eq!(
        config_get(&mut c, "bf-expansion-factor").as_deref(),
        Some("3")
    );
    // RedisBloom keeps a default error rate above 0.25 as 0.25.
    raw_ok(&mut c, &["CONFIG", "SET", "bf-error-rate", "0.5"]);
    assert_eq!(config_get(&mut c, "bf.error-rate").as_deref(), Some("0.25"));
    // Invalid values are refused and change nothing.
    for (name, bad) in [
        ("bf-error-rate", "0"),
        ("bf-error-rate", "1"),
        ("bf-error-rate", "nan"),
        ("bf-error-rate", ""),
        ("bf-initial-size", "0"),
        ("bf-initial-size", "1073741825"),
        ("bf-initial-size", "x"),
        ("bf-expansion-factor", "-1"),
        ("bf-expansion-factor", "32769"),
    ] {
        let err = raw_err(&mut c, &["CONFIG", "SET", name, bad]);
        assert!(err.starts_with("ERR"), "{name} {bad}: {err}");
    }
    assert_eq!(config_get(&mut c, "bf-error-rate").as_deref(), Some("0.25"));
    assert_eq!(config_get(&mut c, "bf-initial-size").as_deref(), Some("1"));
    assert_eq!(
        config_get(&mut c, "bf-expansion-factor").as_deref(),
        Some("3")
    );
}

/// A configuration that names only one of two twins: the other one does not put its default
/// back over it at load (Redis 8 only: elsewhere RedisBloom's names would stop the server).
#[test]
fn redisbloom_config_names_in_the_configuration_file() {
    let probe = Server::start();
    let kind = server_kind(&mut probe.conn());
    drop(probe);
    if !kind.has_unprefixed_module_configs() {
        return;
    }
    let s = Server::start_with(&[
        "--bf.error-rate",
        "0.001",
        "--bf-initial-size",
        "7",
        "--bf-expansion-factor",
        "0",
    ]);
    let mut c = s.conn();
    assert_eq!(
        config_get(&mut c, "bf-error-rate").as_deref(),
        Some("0.001")
    );
    assert_eq!(
        config_get(&mut c, "bf.initial-capacity").as_deref(),
        Some("7")
    );
    assert_eq!(config_get(&mut c, "bf.expansion").as_deref(), Some("2"));
    raw_ok(&mut c, &["BF.ADD", "k", "a"]);
    assert_eq!(as_int(&bf_info_field(&mut c, "k", "CAPACITY")), 7);
    assert_eq!(bf_info_field(&mut c, "k", "EXPANSION"), Value::Nil);
}
