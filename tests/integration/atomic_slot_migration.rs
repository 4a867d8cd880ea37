//! Valkey 9's atomic slot migration (`CLUSTER MIGRATESLOTS`) on a 3-master cluster: filters of
//! every kind (scalable, NONSCALING, WINDOW, a 20 MB one, a partitioned filter's descriptor and
//! partition) in the slots that move, while another thread keeps adding to a second filter of
//! each kind and records every acknowledged item. Valkey refuses the command unless every loaded
//! module declares it handles the migration; the module does so on Valkey only.
//!
//! After the move, the filters nobody wrote have the same `DEBUG DIGEST-VALUE` and BF.INFO on
//! the new owner, and the written ones answer 1 for every acknowledged item and count exactly the
//! items acknowledged as new. The 20 MB filters travel as their AOF rewrite, in two BF.LOADCHUNKs,
//! to a target whose `proto-max-bulk-len` is far below them: that limit stops MIGRATE (one DUMP
//! payload from a client), while Valkey holds the migration's connection, as a primary's, to none.
//! The target takes them past its own `bf.max-filter-bytes`, as a replica takes its primary's.
//!
//! On a server without the command (Redis, whose own atomic slot migration is another command)
//! the same filters and writes run without the move: the module loads and serves them in a
//! cluster all the same.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use redis::{Connection, Value};
use rustbloom_core::partition::{key_slot, partition_capacity, partition_key, route, slot_tag};
use rustbloom_testkit::cluster::Cluster;
use rustbloom_testkit::*;

/// The slots moved: the start of the first master's range (0-5460 on a fresh 3-master cluster).
const MOVED_SLOTS: (usize, usize) = (0, 4095);
const PARTITIONS: u32 = 4;
const ROUTING_SEED: &str = "1";
/// How long the source's snapshot child waits per key (`rdb-key-save-delay`, microseconds): the
/// dozen keys take seconds to send, so the writes go on while they are being sent.
const SNAPSHOT_DELAY_PER_KEY: &str = "200000";
/// Items per BF.MADD of the writer.
const BATCH: usize = 10;
/// The most rounds (one BF.MADD to each written filter) the writer makes, a pause after each:
/// so the NONSCALING filter's capacity holds them all, and the move (seconds) sees thousands.
const WRITER_ROUNDS: usize = 20_000;
const ROUND_PAUSE: Duration = Duration::from_millis(1);
/// The target's `proto-max-bulk-len`: the least the server accepts, below every chunk of the big
/// filters.
const TARGET_MAX_BULK: u64 = 1 << 20;
/// The target's `bf.max-filter-bytes`: below the big filters, above every other.
const TARGET_MAX_FILTER_BYTES: u64 = 8 << 20;
/// How long a migration, or a command held by its write pause, may take.
const MIGRATION_TIMEOUT: Duration = Duration::from_secs(60);
/// BF.INFO fields that adds change (a scalable filter's capacity grows with its layers); every
/// other field stays as it was.
const CHANGED_BY_ADDS: [&str; 5] = [
    "Capacity",
    "Size",
    "Number of filters",
    "Number of items inserted",
    "Last write (ms)",
];

/// One filter of the test: its key and the `BF.RESERVE` arguments after the key.
#[derive(Clone)]
struct Filter {
    key: String,
    reserve: Vec<String>,
    /// Items added before the move.
    initial: usize,
    /// Whether `Number of items inserted` counts every new item (not a window's, which forgets).
    counts_items: bool,
    /// A partitioned filter's descriptor: no filter of its own.
    descriptor: bool,
}

/// What the writer adds to during the move: a filter, or a partitioned filter's partitions (each
/// item to its own).
#[derive(Clone)]
enum Written {
    Plain(String),
    Partitioned { name: String, keys: Vec<String> },
}

/// A key in the moved slot range: `{tag}name`, the n-th of the test's slots.
fn moving_key(n: usize, name: &str) -> String {
    let slot = MOVED_SLOTS.0 + 100 + 300 * n;
    assert!(slot <= MOVED_SLOTS.1);
    let slot = u16::try_from(slot).expect("a slot below 16384");
    format!("{{{}}}{name}", slot_tag(slot))
}

/// The four plain kinds, with `role` (quiet or busy) in their names, at slots from `first`.
fn plain_filters(first: usize, role: &str) -> Vec<Filter> {
    let kinds: [(&str, &[&str], usize, bool); 4] = [
        ("scalable", &["0.01", "1000"], 3000, true),
        ("nonscaling", &["0.01", "250000", "NONSCALING"], 3000, true),
        ("window", &["0.01", "1000", "WINDOW", "600000"], 3000, false),
        ("big", &["0.001", "10000000"], 20000, true),
    ];
    kinds
        .iter()
        .enumerate()
        .map(|(i, (kind, reserve, initial, counts_items))| Filter {
            key: moving_key(first + i, &format!("{kind}.{role}")),
            reserve: reserve.iter().map(|a| a.to_string()).collect(),
            initial: *initial,
            counts_items: *counts_items,
            descriptor: false,
        })
        .collect()
}

/// A partitioned filter for 100000 items at 1% whose descriptor (and so partition 0) is in the
/// moved range: its partitions, then its descriptor (as docs/partitions.md orders them).
fn partitioned_filter(n: usize, role: &str) -> (String, Vec<Filter>) {
    let name = moving_key(n, &format!("part.{role}"));
    let capacity = partition_capacity(100_000, PARTITIONS, false).to_string();
    let count = PARTITIONS.to_string();
    let mut filters: Vec<Filter> = (0..PARTITIONS)
        .map(|i| Filter {
            key: String::from_utf8(partition_key(name.as_bytes(), i, PARTITIONS)).unwrap(),
            reserve: [
                "0.01",
                &capacity,
                "PARTITION",
                &i.to_string(),
                &count,
                ROUTING_SEED,
            ]
            .map(str::to_string)
            .to_vec(),
            initial: 0,
            counts_items: true,
            descriptor: false,
        })
        .collect();
    filters.push(Filter {
        key: name.clone(),
        reserve: ["0.01", "100000", "PARTITIONS", &count, ROUTING_SEED]
            .map(str::to_string)
            .to_vec(),
        initial: 0,
        counts_items: false,
        descriptor: true,
    });
    (name, filters)
}

/// Creates `filter` on the owner of its slot and adds its initial items.
fn create(cl: &Cluster, owners: &[usize], filter: &Filter) {
    let mut c = cl.nodes[owners[slot(&filter.key)]].conn();
    let mut args = vec!["BF.RESERVE".to_string(), filter.key.clone()];
    args.extend(filter.reserve.iter().cloned());
    assert_eq!(raw(&mut c, &args), Ok(Value::Okay), "{args:?}");
    madd_all(&mut c, &filter.key, &items(&filter.key, filter.initial));
}

fn slot(key: &str) -> usize {
    usize::from(key_slot(key.as_bytes()))
}

/// BF.INFO of `key` as (field, value) pairs.
fn info_fields(c: &mut Connection, key: &str) -> Vec<(String, Value)> {
    info_pairs(raw(c, &["BF.INFO", key]).unwrap_or_else(|e| panic!("BF.INFO {key}: {e}")))
}

/// What a filter looks like from outside: its digest and BF.INFO.
#[derive(Debug, PartialEq)]
struct Seen {
    digest: String,
    info: Vec<(String, Value)>,
}

fn seen(cl: &Cluster, owners: &[usize], key: &str) -> Seen {
    let mut c = cl.nodes[owners[slot(key)]].conn();
    Seen {
        digest: digest(&mut c, key),
        info: info_fields(&mut c, key),
    }
}

/// Sends commands to the owner of their key's slot, following MOVED and ASK as a cluster client
/// does (and retrying TRYAGAIN), over connections of its own.
struct Router {
    conns: Vec<Connection>,
    ports: Vec<u16>,
    owners: Vec<usize>,
}

impl Router {
    fn new(cl: &Cluster, owners: &[usize]) -> Router {
        Router {
            conns: cl.nodes.iter().map(|n| n.conn()).collect(),
            ports: cl.nodes.iter().map(|n| n.port()).collect(),
            owners: owners.to_vec(),
        }
    }

    /// The node a `MOVED`/`ASK` redirection names (`<slot> <host>:<port>`).
    fn redirected_to(&self, detail: &str) -> usize {
        let port = detail
            .rsplit(':')
            .next()
            .and_then(|p| p.parse::<u16>().ok())
            .unwrap_or_else(|| panic!("redirection without a port: {detail}"));
        self.ports
            .iter()
            .position(|&p| p == port)
            .unwrap_or_else(|| panic!("redirection to an unknown port: {detail}"))
    }

    /// The reply of `cmd` (key at argument 1) from the owner of the key's slot; the error text
    /// of any error but a redirection or TRYAGAIN.
    fn query(&mut self, key: &str, cmd: &redis::Cmd) -> Result<Value, String> {
        let slot = slot(key);
        let deadline = Instant::now() + MIGRATION_TIMEOUT;
        let mut node = self.owners[slot];
        let mut asking = false;
        while Instant::now() < deadline {
            let c = &mut self.conns[node];
            if asking {
                let _: () = redis::cmd("ASKING").query(c).map_err(|e| err_text(&e))?;
            }
            let error = match cmd.query::<Value>(c) {
                Ok(reply) => return Ok(reply),
                Err(error) => error,
            };
            let detail = error.detail().unwrap_or_default().to_string();
            match error.code() {
                Some("MOVED") => {
                    node = self.redirected_to(&detail);
                    self.owners[slot] = node;
                    asking = false;
                }
                Some("ASK") => {
                    node = self.redirected_to(&detail);
                    asking = true;
                }
                Some("TRYAGAIN") => std::thread::sleep(Duration::from_millis(10)),
                _ => return Err(err_text(&error)),
            }
        }
        Err(format!("no answer for {key} within {MIGRATION_TIMEOUT:?}"))
    }
}

/// What the writer had acknowledged: per key, the items and how many were new (reply 1).
#[derive(Default)]
struct Acked {
    items: HashMap<String, Vec<String>>,
    new: HashMap<String, usize>,
}

impl Acked {
    fn record(&mut self, key: &str, items: Vec<String>, replies: Value) {
        let replies = as_ints(replies);
        assert_eq!(replies.len(), items.len(), "BF.MADD {key}: {replies:?}");
        *self.new.entry(key.to_string()).or_default() +=
            replies.iter().filter(|&&r| r == 1).count();
        self.items.entry(key.to_string()).or_default().extend(items);
    }
}

/// The batches of one writer round: `(key, items)`, items of a partitioned filter routed to
/// their partitions.
fn round_batches(written: &[Written], round: usize) -> Vec<(String, Vec<String>)> {
    let mut batches = Vec::new();
    for w in written {
        match w {
            Written::Plain(key) => {
                batches.push((key.clone(), items(&format!("{key}:w{round}"), BATCH)));
            }
            Written::Partitioned { name, keys } => {
                let seed = ROUTING_SEED.parse().unwrap();
                let mut routed = vec![Vec::new(); keys.len()];
                for item in items(&format!("{name}:w{round}"), BATCH * keys.len()) {
                    routed[route(item.as_bytes(), PARTITIONS, seed) as usize].push(item);
                }
                let groups = keys.iter().cloned().zip(routed);
                batches.extend(groups.filter(|(_, group)| !group.is_empty()));
            }
        }
    }
    batches
}

/// A thread adding to the written filters until told to stop (or dropped: a failing test stops
/// it before the servers) or its rounds are done; counts acknowledged commands.
struct Writer {
    stop: Arc<AtomicBool>,
    acks: Arc<AtomicUsize>,
    thread: Option<JoinHandle<Acked>>,
}

impl Writer {
    fn start(mut router: Router, written: Vec<Written>) -> Writer {
        let stop = Arc::new(AtomicBool::new(false));
        let acks = Arc::new(AtomicUsize::new(0));
        let (stopped, acked_count) = (stop.clone(), acks.clone());
        let thread = std::thread::spawn(move || {
            let mut acked = Acked::default();
            for round in 0..WRITER_ROUNDS {
                if stopped.load(Ordering::SeqCst) {
                    break;
                }
                for (key, items) in round_batches(&written, round) {
                    let mut cmd = redis::cmd("BF.MADD");
                    cmd.arg(&key).arg(&items);
                    let replies = router
                        .query(&key, &cmd)
                        .unwrap_or_else(|e| panic!("BF.MADD {key} while written: {e}"));
                    acked.record(&key, items, replies);
                    acked_count.fetch_add(1, Ordering::SeqCst);
                }
                std::thread::sleep(ROUND_PAUSE);
            }
            acked
        });
        Writer {
            stop,
            acks,
            thread: Some(thread),
        }
    }

    fn acks(&self) -> usize {
        self.acks.load(Ordering::SeqCst)
    }

    fn running(&self) -> bool {
        self.thread.as_ref().is_some_and(|t| !t.is_finished())
    }

    /// Waits until `count` commands were acknowledged or the writer ended (its rounds done, or
    /// failed: [`Writer::finish`] reports that).
    fn wait_acks(&self, count: usize) {
        let ok = wait_until(MIGRATION_TIMEOUT, || {
            self.acks() >= count || !self.running()
        });
        assert!(
            ok,
            "the writer had {} of {count} commands acknowledged",
            self.acks()
        );
    }

    fn finish(mut self) -> Acked {
        self.stop.store(true, Ordering::SeqCst);
        let thread = self.thread.take().expect("the writer's thread");
        match thread.join() {
            Ok(acked) => acked,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            // Its panic, if any, was printed already; the test's own failure is the one to show.
            let _ = thread.join();
        }
    }
}

/// Whether the server has `CLUSTER MIGRATESLOTS` (COMMAND INFO answers nil for an unknown one).
fn has_migrateslots(c: &mut Connection) -> bool {
    let v = raw(c, &["COMMAND", "INFO", "CLUSTER|MIGRATESLOTS"]).expect("COMMAND INFO");
    !matches!(as_array(v).first(), None | Some(Value::Nil))
}

/// The state of the export job on `source` (the newest first in CLUSTER GETSLOTMIGRATIONS), and
/// its message.
fn export_state(c: &mut Connection) -> Option<(String, String)> {
    let jobs = as_array(raw(c, &["CLUSTER", "GETSLOTMIGRATIONS"]).expect("GETSLOTMIGRATIONS"));
    jobs.into_iter().find_map(|job| {
        let fields: HashMap<String, String> = info_pairs(job)
            .into_iter()
            .map(|(name, value)| (name, value_to_string(&value)))
            .collect();
        (fields.get("operation")? == "EXPORT").then(|| {
            let field = |name: &str| fields.get(name).cloned().unwrap_or_default();
            (field("state"), field("message"))
        })
    })
}

/// Moves the moved slots from `source` to `target` with CLUSTER MIGRATESLOTS and waits until the
/// export succeeded.
fn migrate(cl: &Cluster, source: usize, target: usize) {
    let mut c = cl.nodes[source].conn();
    let (first, last) = (MOVED_SLOTS.0.to_string(), MOVED_SLOTS.1.to_string());
    let id = cl.id(target);
    let args = [
        "CLUSTER",
        "MIGRATESLOTS",
        "SLOTSRANGE",
        &first,
        &last,
        "NODE",
        &id,
    ];
    assert_eq!(raw(&mut c, &args), Ok(Value::Okay), "{args:?}");
    let mut state = None;
    let finished = wait_until(MIGRATION_TIMEOUT, || {
        state = export_state(&mut c);
        matches!(&state, Some((s, _)) if ["success", "failed", "cancelled"].contains(&s.as_str()))
    });
    assert!(
        finished && matches!(&state, Some((s, _)) if s == "success"),
        "migration of slots {first}-{last}: {state:?}\nsource log:\n{}\ntarget log:\n{}",
        cl.nodes[source].log_tail(),
        cl.nodes[target].log_tail()
    );
}

/// `bf_filters` of node `i`'s `INFO bf`.
fn filter_count(cl: &Cluster, i: usize) -> u64 {
    let info = info_section(&mut cl.nodes[i].conn(), "bf");
    let count = info_field(&info, "bf_filters").expect("INFO bf without bf_filters");
    count.parse().expect("bf_filters is a count")
}

/// The source holds no key of the moved filters any more, and the module's filter gauge moved
/// with them from the source to the target.
fn assert_source_emptied(cl: &Cluster, moved: &[&Filter], gauges: [(usize, u64); 2]) {
    let [(source, source_filters), (target, target_filters)] = gauges;
    let mut c = cl.nodes[source].conn();
    for f in moved {
        let slot = slot(&f.key).to_string();
        let count = raw(&mut c, &["CLUSTER", "COUNTKEYSINSLOT", slot.as_str()]);
        assert_eq!(count, Ok(Value::Int(0)), "{} still on the source", f.key);
    }
    let filters = moved.iter().filter(|f| !f.descriptor).count() as u64;
    let gauges_moved = wait_until(Duration::from_secs(10), || {
        filter_count(cl, source) == source_filters - filters
            && filter_count(cl, target) == target_filters + filters
    });
    assert!(
        gauges_moved,
        "INFO bf filters: source {} (was {source_filters}), target {} (was {target_filters}), \
         {filters} moved",
        filter_count(cl, source),
        filter_count(cl, target)
    );
}

/// Every acknowledged item answers 1 on its filter's owner, every BF.INFO field adds do not
/// change is as before, and a filter that counts items counts exactly the acknowledged new ones.
fn assert_written_kept(
    cl: &Cluster,
    owners: &[usize],
    acked: &Acked,
    before: &HashMap<String, Vec<(String, Value)>>,
    filters: &[Filter],
) {
    for f in filters.iter().filter(|f| acked.items.contains_key(&f.key)) {
        let mut c = cl.nodes[owners[slot(&f.key)]].conn();
        assert_all_exist(&mut c, &f.key, &acked.items[&f.key]);
        let after = info_fields(&mut c, &f.key);
        let fixed = |info: &[(String, Value)]| -> Vec<(String, Value)> {
            let kept = info
                .iter()
                .filter(|(n, _)| !CHANGED_BY_ADDS.contains(&n.as_str()));
            kept.cloned().collect()
        };
        assert_eq!(
            fixed(&after),
            fixed(&before[&f.key]),
            "BF.INFO of {}",
            f.key
        );
        if f.counts_items {
            let count = |info: &[(String, Value)]| {
                let field = info.iter().find(|(n, _)| n == "Number of items inserted");
                as_int(&field.expect("BF.INFO without its item count").1) as usize
            };
            assert_eq!(
                count(&after),
                count(&before[&f.key]) + acked.new[&f.key],
                "items of {} after {} acknowledged as new",
                f.key,
                acked.new[&f.key]
            );
        }
    }
}

/// The test's filters: the quiet ones (not written during the move), the busy ones, and what the
/// writer adds to (the busy ones, a partitioned filter as its partitions).
fn test_filters() -> (Vec<Filter>, Vec<Filter>, Vec<Written>) {
    let busy_plain = plain_filters(4, "busy");
    let (_, quiet_parts) = partitioned_filter(8, "quiet");
    let (busy_name, busy_parts) = partitioned_filter(9, "busy");
    let mut written: Vec<Written> = busy_plain
        .iter()
        .map(|f| Written::Plain(f.key.clone()))
        .collect();
    let partitions = busy_parts.iter().filter(|f| !f.descriptor);
    written.push(Written::Partitioned {
        name: busy_name,
        keys: partitions.map(|f| f.key.clone()).collect(),
    });
    let quiet = plain_filters(0, "quiet").into_iter().chain(quiet_parts);
    let busy = busy_plain.into_iter().chain(busy_parts);
    (quiet.collect(), busy.collect(), written)
}

/// Slows the source's snapshot down, so that the writes go on while it is sent, and lowers the
/// target's limits below the big filters (after checking that they are below).
fn set_migration_configs(cl: &Cluster, owners: &[usize], source: usize, target: usize) {
    let busy = plain_filters(4, "busy");
    let big = &busy
        .iter()
        .find(|f| f.key.ends_with("big.busy"))
        .unwrap()
        .key;
    let big_bytes = memory_usage(&mut cl.nodes[owners[slot(big)]].conn(), big);
    assert!(
        big_bytes > TARGET_MAX_FILTER_BYTES,
        "{big}: {big_bytes} bytes"
    );
    let delay = [
        "CONFIG",
        "SET",
        "rdb-key-save-delay",
        SNAPSHOT_DELAY_PER_KEY,
    ];
    raw_ok(&mut cl.nodes[source].conn(), &delay);
    let (max_bulk, max_filter) = (
        TARGET_MAX_BULK.to_string(),
        TARGET_MAX_FILTER_BYTES.to_string(),
    );
    let limits = [
        "CONFIG",
        "SET",
        "proto-max-bulk-len",
        &max_bulk,
        "bf.max-filter-bytes",
        &max_filter,
    ];
    raw_ok(&mut cl.nodes[target].conn(), &limits);
}

/// Moves the slots while the writer writes; a server without the command keeps them.
fn move_while_written(cl: &Cluster, writer: &Writer, migrates: bool, [source, target]: [usize; 2]) {
    if migrates {
        let acks_before_move = writer.acks();
        migrate(cl, source, target);
        let acks_during_move = writer.acks() - acks_before_move;
        assert!(
            acks_during_move > 0,
            "no write acknowledged during the move"
        );
        eprintln!("{acks_during_move} BF.MADD acknowledged during the move");
    } else {
        eprintln!(
            "the server has no CLUSTER MIGRATESLOTS (Valkey 9's atomic slot migration): the \
             filters stay on their nodes, written and checked there"
        );
    }
}

#[test]
fn atomic_slot_migration_moves_every_kind_while_written() {
    let cl = Cluster::start(3, 0);
    let owners = cl.slot_owners(0);
    let source = owners[MOVED_SLOTS.0];
    assert!((MOVED_SLOTS.0..=MOVED_SLOTS.1).all(|s| owners[s] == source));
    let target = *Cluster::masters(&owners)
        .iter()
        .find(|&&m| m != source)
        .expect("a second master");

    let (quiet, busy, written) = test_filters();
    for f in quiet.iter().chain(&busy) {
        create(&cl, &owners, f);
    }
    let quiet_before: Vec<Seen> = quiet.iter().map(|f| seen(&cl, &owners, &f.key)).collect();
    let busy_before: HashMap<String, Vec<(String, Value)>> = busy
        .iter()
        .map(|f| (f.key.clone(), seen(&cl, &owners, &f.key).info))
        .collect();
    let gauges = [source, target].map(|node| (node, filter_count(&cl, node)));
    let migrates = has_migrateslots(&mut cl.nodes[source].conn());
    if migrates {
        set_migration_configs(&cl, &owners, source, target);
    }

    let per_round = round_batches(&written, 0).len();
    let writer = Writer::start(Router::new(&cl, &owners), written);
    writer.wait_acks(per_round);
    move_while_written(&cl, &writer, migrates, [source, target]);
    // A few more rounds, on the new owner when the slots moved.
    writer.wait_acks(writer.acks() + 3 * per_round);
    let acked = writer.finish();

    let owners_after = cl.slot_owners(target);
    if migrates {
        assert!((MOVED_SLOTS.0..=MOVED_SLOTS.1).all(|s| owners_after[s] == target));
        let moved = quiet.iter().chain(&busy);
        let moved: Vec<&Filter> = moved
            .filter(|f| (MOVED_SLOTS.0..=MOVED_SLOTS.1).contains(&slot(&f.key)))
            .collect();
        assert_source_emptied(&cl, &moved, gauges);
    }
    for (f, before) in quiet.iter().zip(&quiet_before) {
        let after = seen(&cl, &owners_after, &f.key);
        assert_eq!(&after, before, "{} after the move", f.key);
    }
    assert_written_kept(&cl, &owners_after, &acked, &busy_before, &busy);
}
