//! valkey-bloom 1.0's data taken over: objects made by the real `bloomfilter` crate by
//! valkey-bloom's own rule (tests/support/src/valkeybloom.rs), brought in as valkey-bloom hands
//! them over — RESTORE of its DUMP payloads, an RDB file at start-up, BF.LOAD from its AOF, a
//! full sync — answer every item, member or not, as valkey-bloom does, grow as it grows, and
//! leave in valkey-bloom's own encodings (DUMP byte for byte, BF.LOAD in the AOF).
use redis::Connection;
use rustbloom_testkit::payload::{module_payload, rdb_version, ModuleField};
use rustbloom_testkit::valkeybloom::{VbObject, FIXED_SEED};
use rustbloom_testkit::*;

fn items(prefix: &str, count: usize) -> Vec<Vec<u8>> {
    (0..count)
        .map(|i| format!("{prefix}{i}").into_bytes())
        .collect()
}

/// Non-members, text and binary, and a few odd items.
fn probes() -> Vec<Vec<u8>> {
    let mut probes = items("probe-", 6000);
    probes.extend((0..2000u32).map(|i| {
        let mut item = i.to_le_bytes().to_vec();
        item.push(0xfe);
        item
    }));
    probes.extend([
        Vec::new(),
        vec![0],
        (0..=255).collect(),
        "café ☕".as_bytes().to_vec(),
    ]);
    probes
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

/// Every member answers 1 and every probe as valkey-bloom (the crate) answers it.
#[track_caller]
fn assert_answers_as(c: &mut Connection, key: &str, object: &VbObject, members: &[Vec<u8>]) {
    assert!(
        mexists(c, key, members).iter().all(|&found| found == 1),
        "{key}: a member missing"
    );
    let probes = probes();
    let want: Vec<i64> = probes
        .iter()
        .map(|item| i64::from(object.check(item)))
        .collect();
    assert_eq!(mexists(c, key, &probes), want, "{key}: non-members");
    assert_eq!(
        as_int(&raw(c, &["BF.CARD", key]).unwrap()) as u64,
        object.items(),
        "{key}: BF.CARD"
    );
}

/// The shapes under test: (name, object, members added by valkey-bloom).
fn objects() -> Vec<(&'static str, VbObject, Vec<Vec<u8>>)> {
    let mut out = Vec::new();
    for (name, capacity, fp, expansion, tightening, seed, count) in [
        (
            "scaling",
            100u64,
            0.01,
            2u32,
            0.5,
            Some([7u8; 32]),
            750usize,
        ),
        ("fixed-seed", 1000, 0.001, 1, 0.5, None, 2500),
        ("tight", 40, 0.05, 4, 0.9, Some([0xa5; 32]), 900),
        ("nonscaling", 500, 0.01, 0, 0.5, None, 500),
    ] {
        let mut object = VbObject::new(capacity, fp, expansion, tightening, seed);
        let members = items(&format!("{name}-"), count);
        for item in &members {
            assert_eq!(object.add(item).map(|_| ()), Some(()));
        }
        out.push((name, object, members));
    }
    out
}

/// BF.ADD of new items to `key` and to the model: the same replies (1, 0, or a refusal).
/// Returns the items not refused (members from now on).
fn add_to_both(
    c: &mut Connection,
    key: &str,
    object: &mut VbObject,
    new: Vec<Vec<u8>>,
) -> Vec<Vec<u8>> {
    let mut taken = Vec::new();
    for item in new {
        let got = rawb(c, &[b"BF.ADD", key.as_bytes(), &item]).map(|v| as_int(&v) == 1);
        match object.add(&item) {
            Some(added) => {
                assert_eq!(got, Ok(added), "{key}: BF.ADD {item:?}");
                taken.push(item);
            }
            None => assert!(
                got.is_err(),
                "{key}: a full non-scaling object took {item:?}"
            ),
        }
    }
    taken
}

fn dump(c: &mut Connection, key: &str) -> Vec<u8> {
    match raw(c, &["DUMP", key]).unwrap() {
        redis::Value::BulkString(bytes) => bytes,
        other => panic!("DUMP {key}: {other:?}"),
    }
}

#[test]
fn restored_values_answer_grow_and_dump_as_valkey_bloom_does() {
    let mut s = Server::start();
    let mut c = s.conn();
    let version = rdb_version(&mut c);
    // DUMP compares byte for byte with the uncompressed payload valkey-bloom's fields make.
    raw_ok(&mut c, &["CONFIG", "SET", "rdbcompression", "no"]);
    let mut objects = objects();
    for (name, object, members) in &mut objects {
        let payload = object.restore_payload(version);
        rawb(&mut c, &[b"RESTORE", name.as_bytes(), b"0", &payload])
            .unwrap_or_else(|e| panic!("RESTORE {name}: {e}\n{}", s.log_tail()));
        assert_eq!(key_type(&mut c, name), "bloomfltr");
        assert_answers_as(&mut c, name, object, members);
        // Grown further, as valkey-bloom would have grown it; then DUMP is valkey-bloom's own
        // payload of the grown object, byte for byte.
        let new = items(&format!("{name}-new-"), members.len() * 2);
        members.extend(add_to_both(&mut c, name, object, new));
        assert_answers_as(&mut c, name, object, members);
        assert_eq!(
            dump(&mut c, name),
            object.restore_payload(version),
            "{name}: DUMP"
        );
    }
    // Saved and loaded again (in valkey-bloom's encoding), the same keys answer the same.
    raw_ok(&mut c, &["SAVE"]);
    s.restart();
    let mut c = s.conn();
    for (name, object, members) in &objects {
        assert_eq!(key_type(&mut c, name), "bloomfltr");
        assert_answers_as(&mut c, name, object, members);
    }
    // COPY keeps the type and the answers.
    raw_ok(&mut c, &["COPY", "scaling", "copied"]);
    assert_eq!(key_type(&mut c, "copied"), "bloomfltr");
    assert_answers_as(&mut c, "copied", &objects[0].1, &objects[0].2);
}

/// An RDB file holding one value: RDB version 10's header (every server here reads it), the
/// key in database 0, no checksum (0: not checked).
fn rdb_file(key: &str, payload: &[u8]) -> Vec<u8> {
    assert!(key.len() < 64);
    let value = &payload[..payload.len() - 10];
    let mut file = b"REDIS0010".to_vec();
    file.extend([0xfe, 0]);
    file.push(value[0]);
    file.push(key.len() as u8);
    file.extend_from_slice(key.as_bytes());
    file.extend_from_slice(&value[1..]);
    file.push(0xff);
    file.extend([0; 8]);
    file
}

#[test]
fn an_rdb_file_with_valkey_bloom_values_loads_at_start_up() {
    let (_, object, members) = objects().swap_remove(0);
    let file = rdb_file("vb", &object.restore_payload([10, 0]));
    let s = Server::start_with_files(&[], &[("dump.rdb", &file)]);
    let mut c = s.conn();
    assert_eq!(key_type(&mut c, "vb"), "bloomfltr", "{}", s.log_tail());
    assert_answers_as(&mut c, "vb", &object, &members);
}

#[test]
fn bf_load_takes_valkey_blooms_aof_and_the_aof_rewrite_writes_it_back() {
    let mut s = start_aof("no");
    let mut c = s.conn();
    let mut objects = objects();
    for (name, object, members) in &mut objects {
        raw_ok(
            &mut c,
            &[b"BF.LOAD".as_slice(), name.as_bytes(), &object.load_blob()],
        );
        assert_eq!(key_type(&mut c, name), "bloomfltr");
        assert_answers_as(&mut c, name, object, members);
        let new = items(&format!("{name}-aof-"), 300);
        members.extend(add_to_both(&mut c, name, object, new));
    }
    // As valkey-bloom: BF.LOAD onto an existing key is refused, and so is a blob that is not one.
    assert_eq!(
        raw_err(
            &mut c,
            &[b"BF.LOAD".as_slice(), b"scaling", &objects[0].1.load_blob()]
        ),
        "BUSYKEY Target key name already exists."
    );
    assert_eq!(
        raw_err(&mut c, &[b"BF.LOAD".as_slice(), b"junk", b"\x01not a blob"]),
        "ERR bloom object decoding failed"
    );
    // Replayed from the AOF of the adds, then from a rewrite (which writes BF.LOAD lines).
    s.restart();
    let mut c = s.conn();
    for (name, object, members) in &objects {
        assert_answers_as(&mut c, name, object, members);
    }
    raw_ok(&mut c, &["BGREWRITEAOF"]);
    wait_rewrite_done(&mut c);
    let aof: Vec<u8> = std::fs::read_dir(s.dir().join("appendonlydir"))
        .unwrap()
        .flat_map(|entry| std::fs::read(entry.unwrap().path()).unwrap())
        .collect();
    assert!(
        aof.windows(7).any(|w| w == b"BF.LOAD"),
        "no BF.LOAD in the rewritten AOF"
    );
    assert!(aof
        .windows(objects[0].1.load_blob().len())
        .any(|w| w == objects[0].1.load_blob()));
    s.restart();
    let mut c = s.conn();
    for (name, object, members) in &objects {
        assert_eq!(key_type(&mut c, name), "bloomfltr");
        assert_answers_as(&mut c, name, object, members);
    }
}

#[test]
fn a_replica_takes_valkey_bloom_values_by_full_sync_and_their_growth_by_replication() {
    let primary = Server::start();
    let mut pc = primary.conn();
    let version = rdb_version(&mut pc);
    let mut objects = objects();
    for (name, object, _) in &objects {
        rawb(
            &mut pc,
            &[
                b"RESTORE",
                name.as_bytes(),
                b"0",
                &object.restore_payload(version),
            ],
        )
        .unwrap();
    }
    let replica = Server::start();
    replicate_from(&primary, &replica);
    let mut rc = replica.conn();
    for (name, object, members) in &mut objects {
        let new = items(&format!("{name}-repl-"), 400);
        members.extend(add_to_both(&mut pc, name, object, new));
    }
    wait_synced(&mut pc, &mut [&mut rc]);
    for (name, object, members) in &objects {
        assert_eq!(key_type(&mut rc, name), "bloomfltr");
        assert_answers_as(&mut rc, name, object, members);
        assert_eq!(dump(&mut rc, name), dump(&mut pc, name), "{name}");
    }
}

/// valkey-bloom's fields with field `index` replaced.
fn with(fields: &[ModuleField], index: usize, value: ModuleField) -> Vec<ModuleField> {
    let mut fields = fields.to_vec();
    fields[index] = value;
    fields
}

#[test]
fn payloads_valkey_bloom_could_not_have_written_are_refused_and_change_nothing() {
    let s = Server::start();
    let mut c = s.conn();
    let version = rdb_version(&mut c);
    let mut object = VbObject::new(10, 0.01, 2, 0.5, Some(FIXED_SEED));
    object.seed_random = false;
    for item in items("x", 25) {
        object.add(&item);
    }
    let good = object.rdb_fields();
    let ModuleField::Bytes(layer) = &good[5] else {
        panic!("layer bytes")
    };
    let mut other_seed = layer.clone();
    other_seed[20] ^= 1;
    let mut hashes = layer.clone();
    hashes[9] = 200;
    let mut huge = layer[..45].to_vec();
    huge[1..9].copy_from_slice(&(1u64 << 40).to_le_bytes());
    let cases: Vec<(&str, Vec<ModuleField>, i32)> = vec![
        ("no layers", with(&good, 0, ModuleField::Unsigned(0)), 1),
        (
            "2^40 layers",
            with(&good, 0, ModuleField::Unsigned(1 << 40)),
            1,
        ),
        ("error rate 0", with(&good, 2, ModuleField::Double(0.0)), 1),
        (
            "error rate NaN",
            with(&good, 2, ModuleField::Double(f64::NAN)),
            1,
        ),
        ("tightening 1", with(&good, 3, ModuleField::Double(1.0)), 1),
        ("seed flag 2", with(&good, 4, ModuleField::Unsigned(2)), 1),
        (
            "fixed mode, other seed",
            with(&good, 5, ModuleField::Bytes(other_seed)),
            1,
        ),
        ("200 hashes", with(&good, 5, ModuleField::Bytes(hashes)), 1),
        (
            "a 1 TiB bitmap claimed",
            with(&good, 5, ModuleField::Bytes(huge)),
            1,
        ),
        (
            "capacity off the rule",
            with(&good, 8, ModuleField::Unsigned(21)),
            1,
        ),
        (
            "items over capacity",
            with(&good, 9, ModuleField::Unsigned(21)),
            1,
        ),
        (
            "a double for an unsigned",
            with(&good, 6, ModuleField::Double(10.0)),
            1,
        ),
        ("truncated", good[..7].to_vec(), 1),
        ("encoding 2", good.clone(), 2),
    ];
    raw_ok(&mut c, &["BF.ADD", "bystander", "a"]);
    let before = dataset_digest(&mut c);
    for (what, fields, encver) in cases {
        let payload = module_payload("bloomfltr", encver as u64, &fields, version);
        let reply = rawb(&mut c, &[b"RESTORE", b"bad", b"0", &payload]);
        assert!(reply.is_err(), "{what}: accepted");
        assert!(!exists(&mut c, "bad"), "{what}");
    }
    assert_eq!(dataset_digest(&mut c), before);
    // The good payload still restores.
    rawb(
        &mut c,
        &[
            b"RESTORE",
            b"good",
            b"0",
            &module_payload("bloomfltr", 1, &good, version),
        ],
    )
    .unwrap();
    assert_answers_as(&mut c, "good", &object, &items("x", 25));
}

/// BF.INFO `field` of `key` as a number (RESP2: a one-element array).
fn info_number(c: &mut Connection, key: &str, field: &str) -> f64 {
    let reply = as_array(raw(c, &["BF.INFO", key, field]).unwrap());
    value_to_string(&reply[0]).parse().unwrap()
}

/// Adds new items one at a time until an add is refused; returns BF.CARD then.
fn fill_until_refused(c: &mut Connection, key: &str) -> u64 {
    for i in 0.. {
        if raw(c, &["BF.ADD", key, &format!("fill-{i}")]).is_err() {
            break;
        }
    }
    as_int(&raw(c, &["BF.CARD", key]).unwrap()) as u64
}

#[test]
fn bf_info_answers_valkey_blooms_error_tightening_and_max_scaled_capacity() {
    let s = Server::start();
    let mut c = s.conn();
    let version = rdb_version(&mut c);
    raw_ok(&mut c, &["CONFIG", "SET", "bf.max-filter-bytes", "200000"]);
    // A valkey-bloom object: its own fields; its max scaled capacity is where adds stop.
    let object = VbObject::new(100, 0.02, 2, 0.75, Some([3; 32]));
    rawb(
        &mut c,
        &[b"RESTORE", b"vb", b"0", &object.restore_payload(version)],
    )
    .unwrap();
    assert_eq!(info_number(&mut c, "vb", "ERROR"), 0.02);
    assert_eq!(info_number(&mut c, "vb", "TIGHTENING"), 0.75);
    let max = info_number(&mut c, "vb", "MAXSCALEDCAPACITY") as u64;
    assert!(max > 100);
    assert_eq!(fill_until_refused(&mut c, "vb"), max);
    // The full record of a valkey-bloom object lists the three after RedisBloom's five.
    let record = value_to_string(&raw(&mut c, &["BF.INFO", "vb"]).unwrap());
    for name in ["Error rate", "Tightening ratio", "Max scaled capacity"] {
        assert!(record.contains(name), "{record}");
    }
    // Our own filters answer them too: a scaling one stops growing at its max scaled capacity,
    // a non-scaling one's is its capacity.
    raw_ok(
        &mut c,
        &["BF.RESERVE", "ours", "0.01", "100", "EXPANSION", "2"],
    );
    assert_eq!(info_number(&mut c, "ours", "ERROR"), 0.01);
    assert_eq!(info_number(&mut c, "ours", "TIGHTENING"), 0.5);
    let max = info_number(&mut c, "ours", "MAXSCALEDCAPACITY") as u64;
    assert!(max > 100);
    assert_eq!(fill_until_refused(&mut c, "ours"), max);
    raw_ok(
        &mut c,
        &["BF.RESERVE", "fixed", "0.01", "1000", "NONSCALING"],
    );
    assert_eq!(info_number(&mut c, "fixed", "MAXSCALEDCAPACITY"), 1000.0);
    // RedisBloom's five-field record of our filters is unchanged.
    let record = value_to_string(&raw(&mut c, &["BF.INFO", "ours"]).unwrap());
    assert!(!record.contains("Tightening"), "{record}");
}

fn config_get(c: &mut Connection, name: &str) -> String {
    let pair: Vec<String> = redis::cmd("CONFIG").arg("GET").arg(name).query(c).unwrap();
    assert_eq!(pair.len(), 2, "CONFIG GET {name}: {pair:?}");
    pair[1].clone()
}

#[test]
fn valkey_blooms_config_names_set_ours() {
    // As a valkey.conf written for valkey-bloom sets them.
    let s = Server::start_with(&[
        "--bf.bloom-capacity",
        "500",
        "--bf.bloom-fp-rate",
        "0.001",
        "--bf.bloom-expansion",
        "4",
        "--bf.bloom-use-random-seed",
        "no",
        "--bf.bloom-memory-usage-limit",
        "1000000",
    ]);
    let mut c = s.conn();
    for (ours, value) in [
        ("bf.initial-capacity", "500"),
        ("bf.error-rate", "0.001"),
        ("bf.expansion", "4"),
        ("bf.seed-mode", "fixed"),
        ("bf.max-filter-bytes", "1000000"),
    ] {
        assert_eq!(config_get(&mut c, ours), value, "{ours}\n{}", s.log_tail());
    }
    raw_ok(&mut c, &["BF.ADD", "new", "a"]);
    assert_eq!(info_number(&mut c, "new", "CAPACITY"), 500.0);
    assert_eq!(info_number(&mut c, "new", "EXPANSION"), 4.0);
    assert_eq!(info_number(&mut c, "new", "ERROR"), 0.001);
    // CONFIG SET through either name; CONFIG GET of either answers the same.
    raw_ok(&mut c, &["CONFIG", "SET", "bf.bloom-capacity", "7"]);
    assert_eq!(config_get(&mut c, "bf.initial-capacity"), "7");
    raw_ok(&mut c, &["CONFIG", "SET", "bf.seed-mode", "random"]);
    assert_eq!(config_get(&mut c, "bf.bloom-use-random-seed"), "yes");
    assert_eq!(config_get(&mut c, "bf.bloom-fp-rate"), "0.001");
    // Invalid values are refused and change nothing.
    for (name, value) in [
        ("bf.bloom-capacity", "0"),
        ("bf.bloom-fp-rate", "1"),
        ("bf.bloom-expansion", "0"),
        ("bf.bloom-use-random-seed", "maybe"),
        ("bf.bloom-memory-usage-limit", "-1"),
    ] {
        assert!(
            raw(&mut c, &["CONFIG", "SET", name, value]).is_err(),
            "{name} {value}"
        );
    }
    assert_eq!(config_get(&mut c, "bf.initial-capacity"), "7");
    assert_eq!(config_get(&mut c, "bf.error-rate"), "0.001");
}

#[test]
fn scandump_and_loadchunk_move_a_valkey_bloom_object_between_rustbloom_servers() {
    let s = Server::start();
    let mut c = s.conn();
    let version = rdb_version(&mut c);
    let (_, mut object, mut members) = objects().swap_remove(2);
    rawb(
        &mut c,
        &[b"RESTORE", b"vb", b"0", &object.restore_payload(version)],
    )
    .unwrap();
    let chunks = scandump(&mut c, "vb");
    let t = Server::start();
    let mut tc = t.conn();
    loadchunks(&mut tc, "moved", &chunks);
    // It arrives as a key of our type, the same object: same answers, same growth.
    assert_answers_as(&mut tc, "moved", &object, &members);
    members.extend(add_to_both(
        &mut tc,
        "moved",
        &mut object,
        items("after-", 500),
    ));
    assert_answers_as(&mut tc, "moved", &object, &members);
}

/// One command as RESP, as an AOF holds it.
fn resp(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for arg in args {
        out.extend(format!("${}\r\n", arg.len()).into_bytes());
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// valkey-bloom's replicated creation of `object`: BF.INSERT with every property, then `items`
/// (none for a BF.RESERVE, which it replicates without ITEMS).
fn creation(key: &str, object: &VbObject, items: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let (capacity, fp, tightening) = (
        object.filters[0].2.to_string(),
        object.fp_rate.to_string(),
        object.tightening.to_string(),
    );
    let mut args: Vec<Vec<u8>> = [
        b"BF.INSERT".as_slice(),
        key.as_bytes(),
        b"CAPACITY",
        capacity.as_bytes(),
        b"ERROR",
        fp.as_bytes(),
        b"TIGHTENING",
        tightening.as_bytes(),
        b"SEED",
        &object.seed,
    ]
    .map(<[u8]>::to_vec)
    .to_vec();
    if object.expansion == 0 {
        args.push(b"NONSCALING".to_vec());
    } else {
        args.extend([
            b"EXPANSION".to_vec(),
            object.expansion.to_string().into_bytes(),
        ]);
    }
    if !items.is_empty() {
        args.push(b"ITEMS".to_vec());
        args.extend(items.iter().cloned());
    }
    args
}

/// An object created as valkey-bloom's commands create it: the object before any add, the
/// items of the creating BF.INSERT, and the items added after.
type Created = (&'static str, VbObject, Vec<Vec<u8>>, Vec<Vec<u8>>);

/// The objects under test, as valkey-bloom's BF.RESERVE, BF.INSERT and BF.ADD create them.
fn created_objects() -> Vec<Created> {
    vec![
        // BF.RESERVE: no ITEMS.
        (
            "reserved",
            VbObject::new(100, 0.01, 2, 0.5, Some([0x3c; 32])),
            vec![],
            items("reserved-", 900),
        ),
        // BF.INSERT of a non-scaling object with items, then BF.MADD up to its capacity.
        (
            "inserted",
            VbObject::new(50, 0.001, 0, 0.9, Some([0x71; 32])),
            items("inserted-first-", 3),
            items("inserted-", 47),
        ),
        // BF.ADD on a missing key in fixed-seed mode, slow tightening, expansion 1.
        (
            "added",
            VbObject::new(30, 0.05, 1, 0.6, None),
            items("added-first-", 1),
            items("added-", 300),
        ),
    ]
}

#[test]
fn valkey_blooms_replicated_creations_replay_from_its_aof_as_it_made_them() {
    let mut aof = Vec::new();
    let mut expected = Vec::new();
    for (key, mut object, first, later) in created_objects() {
        let args = creation(key, &object, &first);
        aof.extend(resp(&args.iter().map(Vec::as_slice).collect::<Vec<_>>()));
        // An item the object already answers for (a false positive) changes nothing, there
        // as here.
        for item in first.iter().chain(&later) {
            assert!(object.add(item).is_some(), "{key}: full");
        }
        for item in &later {
            aof.extend(resp(&[b"BF.ADD", key.as_bytes(), item]));
        }
        let members: Vec<Vec<u8>> = first.into_iter().chain(later).collect();
        expected.push((key, object, members));
    }
    // An AOF of the form valkey-bloom's server wrote before multi-part AOFs: the server takes it
    // as the base of its own.
    let s = Server::start_with_files(&["--appendonly", "yes"], &[("appendonly.aof", &aof)]);
    let mut c = s.conn();
    let version = rdb_version(&mut c);
    raw_ok(&mut c, &["CONFIG", "SET", "rdbcompression", "no"]);
    for (key, object, members) in &expected {
        assert_eq!(key_type(&mut c, key), "bloomfltr", "{key}");
        assert_answers_as(&mut c, key, object, members);
        assert_eq!(
            dump(&mut c, key),
            object.restore_payload(version),
            "{key}: DUMP"
        );
    }
}

#[test]
fn a_valkey_bloom_creation_replicates_in_valkey_blooms_words_and_the_replica_holds_the_same() {
    let primary = Server::start();
    let replica = Server::start();
    replicate_from(&primary, &replica);
    let (mut pc, mut rc) = (primary.conn(), replica.conn());
    let mut objects = Vec::new();
    for (key, mut object, first, later) in created_objects() {
        let args = creation(key, &object, &first);
        let reply = rawb(&mut pc, &args.iter().map(Vec::as_slice).collect::<Vec<_>>()).unwrap();
        assert_eq!(as_ints(reply), vec![1; first.len()], "{key}");
        for item in &first {
            object.add(item);
        }
        let mut members = first;
        members.extend(add_to_both(&mut pc, key, &mut object, later));
        objects.push((key, object, members));
    }
    wait_synced(&mut pc, &mut [&mut rc]);
    for (key, object, members) in &objects {
        assert_eq!(key_type(&mut rc, key), "bloomfltr", "{key}");
        assert_answers_as(&mut rc, key, object, members);
        assert_eq!(dump(&mut rc, key), dump(&mut pc, key), "{key}");
    }
    // Only the valkey-bloom form leaves ITEMS out; RedisBloom's BF.INSERT still needs it.
    assert!(raw(&mut pc, &["BF.INSERT", "plain", "CAPACITY", "10"]).is_err());
    assert_eq!(raw(&mut pc, &["EXISTS", "plain"]), Ok(redis::Value::Int(0)));
}
