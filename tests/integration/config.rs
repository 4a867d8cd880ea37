//! Module configs (`bf.*`), load-time arguments, `INFO bf`, and command docs.
use std::process::Command;

use redis::Value;
use rustbloom_testkit::*;

fn config_get(c: &mut redis::Connection, name: &str) -> String {
    let pair: Vec<String> = redis::cmd("CONFIG").arg("GET").arg(name).query(c).unwrap();
    assert_eq!(pair.len(), 2, "CONFIG GET {name}: {pair:?}");
    pair[1].clone()
}

fn info_value(v: Value, field: &str) -> Value {
    info_pairs(v)
        .into_iter()
        .find(|(name, _)| name == field)
        .map(|(_, value)| value)
        .unwrap_or_else(|| panic!("no field {field}"))
}

#[test]
fn configs_have_defaults_and_refuse_invalid_values() {
    let s = Server::start();
    let mut c = s.conn();
    assert_eq!(config_get(&mut c, "bf.error-rate"), "0.01");
    assert_eq!(config_get(&mut c, "bf.initial-capacity"), "100");
    assert_eq!(config_get(&mut c, "bf.expansion"), "2");
    assert_eq!(config_get(&mut c, "bf.max-filter-bytes"), "1073741824");
    assert_eq!(config_get(&mut c, "bf.seed-mode"), "random");

    for (name, bad) in [
        ("bf.error-rate", "0"),
        ("bf.error-rate", "1"),
        ("bf.error-rate", "nan"),
        ("bf.error-rate", "abc"),
        ("bf.initial-capacity", "0"),
        ("bf.initial-capacity", "1073741825"),
        ("bf.expansion", "0"),
        ("bf.expansion", "40000"),
        ("bf.max-filter-bytes", "-1"),
        ("bf.seed-mode", "sometimes"),
    ] {
        let err = raw_err(&mut c, &["CONFIG", "SET", name, bad]);
        assert!(err.starts_with("ERR"), "{name} {bad}: {err}");
    }
    // Nothing invalid was stored.
    assert_eq!(config_get(&mut c, "bf.error-rate"), "0.01");
    assert_eq!(config_get(&mut c, "bf.expansion"), "2");
    assert_eq!(config_get(&mut c, "bf.seed-mode"), "random");
}

#[test]
fn auto_created_filters_use_the_configured_defaults() {
    let s = Server::start();
    let mut c = s.conn();
    raw_ok(&mut c, &["CONFIG", "SET", "bf.initial-capacity", "1000"]);
    raw_ok(&mut c, &["CONFIG", "SET", "bf.expansion", "4"]);
    raw_ok(&mut c, &["CONFIG", "SET", "bf.error-rate", "0.001"]);
    raw_ok(&mut c, &["BF.ADD", "k", "x"]);
    assert_eq!(
        as_int(&info_value(raw_ok(&mut c, &["BF.INFO", "k"]), "Capacity")),
        1000
    );
    assert_eq!(
        as_int(&info_value(
            raw_ok(&mut c, &["BF.INFO", "k"]),
            "Expansion rate"
        )),
        4
    );
    // A tighter default error rate makes a bigger filter than the 1% one.
    raw_ok(&mut c, &["BF.RESERVE", "one-percent", "0.01", "1000"]);
    let size = |c: &mut redis::Connection, key: &str| {
        as_int(&info_value(raw_ok(c, &["BF.INFO", key]), "Size"))
    };
    assert!(size(&mut c, "k") > size(&mut c, "one-percent"));
}

#[test]
fn max_filter_bytes_refuses_creation_and_growth() {
    let s = Server::start();
    let mut c = s.conn();
    raw_ok(&mut c, &["CONFIG", "SET", "bf.max-filter-bytes", "1mb"]);
    assert_eq!(config_get(&mut c, "bf.max-filter-bytes"), "1048576");
    let err = raw_err(&mut c, &["BF.RESERVE", "big", "0.01", "10000000"]);
    assert!(err.starts_with("ERR filter would use"), "{err}");
    assert!(err.contains("bf.max-filter-bytes"), "{err}");
    assert_no_key(&mut c, "big");

    // A filter that fits, then growth past the cap stops at the error and keeps what fit.
    raw_ok(&mut c, &["BF.RESERVE", "grow", "0.01", "400000"]);
    let items: Vec<String> = (0..450_000).map(|i| format!("item{i}")).collect();
    let mut refused = None;
    for chunk in items.chunks(10_000) {
        let mut args = vec!["BF.MADD".to_string(), "grow".to_string()];
        args.extend(chunk.iter().cloned());
        let reply = as_array(raw_ok(&mut c, &args));
        if let Some(Value::ServerError(e)) = reply.last() {
            refused = Some(server_err_text(e));
            break;
        }
    }
    let refused = refused.expect("growth past the cap must be refused");
    assert!(refused.starts_with("ERR filter would use"), "{refused}");
    assert_eq!(
        as_int(&info_value(
            raw_ok(&mut c, &["BF.INFO", "grow"]),
            "Number of filters"
        )),
        1
    );
    let info = raw_ok(&mut c, &["INFO", "bf"]);
    let text = value_to_string(&info);
    assert!(text.contains("bf_refused_by_limits:2"), "{text}");
}

#[test]
fn maxmemory_refuses_big_filters_before_allocating() {
    let s = Server::start_with(&["--maxmemory", "50mb"]);
    let mut c = s.conn();
    let err = raw_err(&mut c, &["BF.RESERVE", "big", "0.001", "100000000"]);
    assert!(err.starts_with("ERR filter needs"), "{err}");
    assert_no_key(&mut c, "big");
    raw_ok(&mut c, &["BF.RESERVE", "small", "0.01", "10000"]);
}

#[test]
fn seed_mode_fixed_makes_filters_identical_across_servers() {
    let a = Server::start();
    let b = Server::start();
    let (mut ca, mut cb) = (a.conn(), b.conn());
    for c in [&mut ca, &mut cb] {
        raw_ok(c, &["CONFIG", "SET", "bf.seed-mode", "fixed"]);
        raw_ok(c, &["BF.MADD", "k", "a", "b", "c"]);
    }
    assert_same_digest(&mut ca, "k", &mut cb, "k");
    // Random seeds (the default) differ between two filters holding the same items.
    for c in [&mut ca, &mut cb] {
        raw_ok(c, &["CONFIG", "SET", "bf.seed-mode", "random"]);
        raw_ok(c, &["BF.MADD", "r", "a", "b", "c"]);
    }
    assert_ne!(digest(&mut ca, "r"), digest(&mut cb, "r"));
    // An explicit SEED wins over the mode.
    raw_ok(&mut ca, &["BF.INSERT", "s", "SEED", "7", "ITEMS", "a"]);
    raw_ok(&mut cb, &["BF.INSERT", "s", "SEED", "7", "ITEMS", "a"]);
    assert_same_digest(&mut ca, "s", &mut cb, "s");
}

/// A server started from a config file (CONFIG REWRITE needs one), killed on drop.
struct ConfServer {
    child: std::process::Child,
    socket: std::path::PathBuf,
}

impl Drop for ConfServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A path as one argument of a config file line: double-quoted, `\\` and `"` escaped, so a
/// checkout whose path holds a space still loads.
fn conf_quoted(path: &std::path::Path) -> String {
    let text = path.display().to_string();
    format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
}

#[test]
fn config_rewrite_persists_bf_settings() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("redis.conf");
    let socket = dir.path().join("redis.sock");
    std::fs::write(
        &conf,
        format!(
            "port 0\nsave \"\"\nunixsocket {}\ndir {}\nloadmodule {}\n",
            conf_quoted(&socket),
            conf_quoted(dir.path()),
            conf_quoted(&module_path())
        ),
    )
    .unwrap();
    let child = Command::new(server_binary())
        .arg(&conf)
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("run redis-server");
    let server = ConfServer { child, socket };
    let url = format!("redis+unix://{}", server.socket.display());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut c = loop {
        if let Ok(mut c) = redis::Client::open(url.as_str()).unwrap().get_connection() {
            if redis::cmd("PING").query::<String>(&mut c).is_ok() {
                break c;
            }
        }
        assert!(std::time::Instant::now() < deadline, "server did not start");
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    raw_ok(&mut c, &["CONFIG", "SET", "bf.expansion", "8"]);
    raw_ok(&mut c, &["CONFIG", "REWRITE"]);
    let written = std::fs::read_to_string(&conf).unwrap();
    assert!(written.contains("bf.expansion 8"), "{written}");
}

#[test]
fn load_time_arguments_ours_and_redisbloom_names() {
    let module = module_path();
    let module = module.to_str().unwrap();
    let s = Server::start_without_module(&[
        "--loadmodule",
        module,
        "ERROR_RATE",
        "0.001",
        "INITIAL_SIZE",
        "5000",
        "expansion",
        "3",
        "CF_MAX_EXPANSIONS",
        "64",
    ]);
    // RedisBloom's argument for its cuckoo filters is accepted, and the log says it is ignored.
    assert!(
        s.log()
            .contains("ignoring RedisBloom's load-time argument CF_MAX_EXPANSIONS 64"),
        "{}",
        s.log()
    );
    let mut c = s.conn();
    assert_eq!(config_get(&mut c, "bf.error-rate"), "0.001");
    assert_eq!(config_get(&mut c, "bf.initial-capacity"), "5000");
    assert_eq!(config_get(&mut c, "bf.expansion"), "3");
    raw_ok(&mut c, &["BF.ADD", "k", "x"]);
    assert_eq!(
        as_int(&info_value(raw_ok(&mut c, &["BF.INFO", "k"]), "Capacity")),
        5000
    );
}

#[test]
fn invalid_load_time_arguments_refuse_the_load() {
    for args in [&["NOPE", "1"][..], &["ERROR_RATE", "2"], &["expansion"]] {
        let dir = tempfile::tempdir().unwrap();
        let mut command = Command::new("redis-server");
        command
            .args([
                "--port",
                "0",
                "--save",
                "",
                "--dir",
                dir.path().to_str().unwrap(),
            ])
            .arg("--unixsocket")
            .arg(dir.path().join("redis.sock"))
            .arg("--loadmodule")
            .arg(module_path())
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let output = command.output().expect("run redis-server");
        assert!(!output.status.success(), "{args:?} must refuse the load");
        let log = String::from_utf8_lossy(&output.stdout);
        assert!(
            log.contains("rustbloom:"),
            "{args:?}: the log must say why: {log}"
        );
    }
}

#[test]
fn info_bf_counts_filters_items_and_requests() {
    let s = Server::start();
    let mut c = s.conn();
    raw_ok(&mut c, &["BF.RESERVE", "a", "0.01", "100"]);
    raw_ok(&mut c, &["BF.MADD", "a", "x", "y", "x"]);
    raw_ok(&mut c, &["BF.ADD", "b", "z"]);
    raw_ok(&mut c, &["BF.MEXISTS", "a", "x", "q"]);
    let text = value_to_string(&raw_ok(&mut c, &["INFO", "bf"]));
    for expected in [
        "bf_filters:2",
        "bf_layers:2",
        "bf_items:3",
        "bf_adds:4",
        "bf_lookups:2",
    ] {
        assert!(text.contains(expected), "{expected} missing from {text}");
    }
    raw_ok(&mut c, &["DEL", "a"]);
    let text = value_to_string(&raw_ok(&mut c, &["INFO", "bf"]));
    assert!(
        text.contains("bf_filters:1") && text.contains("bf_items:1"),
        "{text}"
    );
}

/// The gauges follow adds that push layers (one item at a time and in batches) exactly as a
/// count from scratch does: the same figures as a restarted server, which counts the filters it
/// loads.
#[test]
fn info_bf_gauges_follow_growth_as_a_restart_counts_them() {
    let mut s = Server::start();
    let mut c = s.conn();
    raw_ok(&mut c, &["BF.RESERVE", "singles", "0.01", "4"]);
    for i in 0..40 {
        raw_ok(&mut c, &["BF.ADD", "singles", &format!("item-{i}")]);
    }
    let batch: Vec<String> = (0..300).map(|i| format!("batch-{i}")).collect();
    let mut madd = vec!["BF.MADD", "batches"];
    madd.extend(batch.iter().map(String::as_str));
    raw_ok(&mut c, &madd);
    raw_ok(
        &mut c,
        &["BF.RESERVE", "window", "0.01", "100", "WINDOW", "60000"],
    );
    raw_ok(&mut c, &["BF.MADD", "window", "a", "b", "c"]);
    let gauges = |c: &mut redis::Connection| {
        let text = value_to_string(&raw_ok(c, &["INFO", "bf"]));
        ["bf_filters", "bf_layers", "bf_bytes", "bf_items"]
            .map(|name| info_field(&text, name).unwrap_or_else(|| panic!("{name} in {text}")))
    };
    let grown = gauges(&mut c);
    assert!(
        grown[1].parse::<u64>().unwrap() > 3,
        "the adds pushed layers: {grown:?}"
    );
    s.restart_saving();
    assert_eq!(
        grown,
        gauges(&mut s.conn()),
        "filters, layers, bytes, items"
    );
}

#[test]
fn command_docs_and_key_specs_describe_every_command() {
    let s = Server::start();
    let mut c = s.conn();
    for (name, args) in [
        ("bf.reserve", &["0.01", "100"][..]),
        ("bf.add", &["x"]),
        ("bf.madd", &["x", "y"]),
        ("bf.insert", &["ITEMS", "x"]),
        ("bf.exists", &["x"]),
        ("bf.mexists", &["x", "y"]),
        ("bf.info", &[]),
        ("bf.card", &[]),
        ("bf.scandump", &["0"]),
        ("bf.loadchunk", &["1", "data"]),
    ] {
        let docs = value_to_string(&raw_ok(&mut c, &["COMMAND", "DOCS", name]));
        assert!(
            docs.contains("summary") && docs.contains("arguments"),
            "{name}: {docs}"
        );
        let keys: Vec<String> = redis::cmd("COMMAND")
            .arg("GETKEYS")
            .arg(name)
            .arg("mykey")
            .arg(args)
            .query(&mut c)
            .unwrap();
        assert_eq!(keys, vec!["mykey".to_string()], "{name}");
    }
    let info = value_to_string(&raw_ok(&mut c, &["COMMAND", "INFO", "bf.add", "bf.exists"]));
    assert!(info.contains("RW") && info.contains("RO"), "{info}");
}
