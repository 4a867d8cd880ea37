//! A filter by its name, plain (one key) or partitioned (`docs/partitioning.md`: a descriptor at
//! the name and P partition keys), with the same operations on both: reserve, add, look up,
//! describe, delete.

use std::collections::BTreeMap;
use std::time::Duration;

use redis::{Cmd, Value};

use crate::connection::{Connection, Master};
use crate::delivery::{wait_answer, wait_cmd, wait_targets, Delivery, Step, WaitFailure};
use crate::error::{explain, server_error_text, server_text, Error, Result};
use crate::routing::{key_slot, partition_capacity, partition_keys, partition_of, MAX_PARTITIONS};
use crate::transport::{block, Transport};

/// How a filter grows once its capacity is reached.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Growth {
    /// Adds layers; `None` leaves the server's default expansion.
    Scaling { expansion: Option<u32> },
    /// Refuses items past its capacity.
    NonScaling,
    /// A sliding window of this many milliseconds.
    Window { ms: u64 },
}

/// What `BF.RESERVE` is asked for.
#[derive(Clone, Debug, PartialEq)]
pub struct ReserveOptions {
    pub error_rate: f64,
    /// Items in all (for a partitioned filter: spread over the partitions).
    pub capacity: u64,
    pub growth: Growth,
    /// Partitions; `None` reserves a plain filter.
    pub partitions: Option<u32>,
}

/// The command an add sends: `BF.INSERT key NOCREATE ITEMS …`, or for a window filter at a given
/// time `BF.ADDAT key at_ms …` (which never creates a filter either).
#[derive(Clone, Copy)]
pub(crate) enum AddCommand {
    Insert,
    At(u64),
}

/// How adds are sent.
#[derive(Clone, Debug)]
pub struct WriteOptions {
    /// Most items per BF.INSERT command.
    pub batch: usize,
    /// After each pipeline, `WAIT replicas timeout` on every master it wrote to; fewer
    /// acknowledgements than asked resend the pipeline.
    pub wait: Option<(u32, Duration)>,
    /// How long commands the server did not run (CLUSTERDOWN, TRYAGAIN, LOADING, …) and, with
    /// `resend_lost_replies`, commands whose reply was lost are sent again before giving up.
    pub retry_for: Duration,
    /// Resend commands whose reply was lost (a dropped connection, a failover): they may or may
    /// not have run, so an item the lost attempt added answers "not new" the second time. Adds
    /// never create the filter (BF.INSERT … NOCREATE), so a resend can add only to the filter
    /// it was meant for. Off for a caller whose output is the "new" answers (a dedup): a lost
    /// reply is then an error, since its items' answers cannot be known.
    pub resend_lost_replies: bool,
}

impl Default for WriteOptions {
    fn default() -> Self {
        WriteOptions {
            batch: 1000,
            wait: None,
            retry_for: Duration::from_secs(120),
            resend_lost_replies: true,
        }
    }
}

/// A partitioned filter's routing: P, the routing seed and the partition keys in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Partitioning {
    pub partitions: u32,
    pub routing_seed: u64,
    pub keys: Vec<Vec<u8>>,
}

/// A filter: its name, and its routing when it is partitioned.
#[derive(Clone, Debug)]
pub struct Filter {
    name: Vec<u8>,
    partitioning: Option<Partitioning>,
}

/// One key's BF.INFO, as far as a client needs it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct KeyInfo {
    pub capacity: u64,
    pub size: u64,
    pub filters: u64,
    pub items: u64,
    /// `None` when NONSCALING or WINDOW.
    pub expansion: Option<u64>,
    /// A window filter's window, in milliseconds.
    pub window_ms: Option<u64>,
    /// A window filter's generation (the unit in which it forgets), in milliseconds.
    pub generation_ms: Option<u64>,
    /// On a partition key: (index, partitions, routing seed).
    pub partition: Option<(u32, u32, u64)>,
}

/// A partition as [`Filter::info`] found it.
#[derive(Clone, Debug)]
pub struct PartitionInfo {
    pub index: u32,
    pub key: Vec<u8>,
    pub slot: u16,
    /// The master serving its slot (`host:port`), on a cluster or a single server.
    pub master: String,
    /// `None` when the key does not exist.
    pub info: Option<KeyInfo>,
}

/// Sums over some partitions.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    pub partitions: u64,
    pub capacity: u64,
    pub size: u64,
    pub items: u64,
}

/// What [`Filter::info`] reports.
#[derive(Clone, Debug)]
pub struct FilterInfo {
    /// BF.INFO of the name (the descriptor of a partitioned filter), field by field as text.
    pub fields: Vec<(String, String)>,
    /// The name's own BF.INFO numbers.
    pub key: KeyInfo,
    /// Every partition, in order (empty for a plain filter).
    pub partitions: Vec<PartitionInfo>,
    /// Every way the partitions fall short: missing, or disagreeing on index, P or seed.
    pub problems: Vec<String>,
}

impl FilterInfo {
    /// Totals over the partitions present.
    pub fn totals(&self) -> Totals {
        let mut t = Totals::default();
        for p in &self.partitions {
            add_to(&mut t, p);
        }
        t
    }

    /// Totals per master, by address.
    pub fn per_master(&self) -> BTreeMap<String, Totals> {
        let mut m: BTreeMap<String, Totals> = BTreeMap::new();
        for p in &self.partitions {
            add_to(m.entry(p.master.clone()).or_default(), p);
        }
        m
    }
}

impl KeyInfo {
    /// BF.INFO of one key (routed by the key on a cluster).
    pub fn read(conn: &mut Connection, key: &[u8]) -> Result<KeyInfo> {
        let reply = conn.query(redis::cmd("BF.INFO").arg(key))?;
        Ok(key_info(&info_pairs(reply)?))
    }
}

/// One BF.SCANDUMP step of `key` from iterator `it`: the next iterator (0 once the filter has
/// been read) and the chunk.
pub fn scandump(conn: &mut Connection, key: &[u8], it: u64) -> Result<(u64, Vec<u8>)> {
    let reply = conn.query(redis::cmd("BF.SCANDUMP").arg(key).arg(it))?;
    let Value::Array(v) = reply else {
        return Err(Error::Protocol(format!("BF.SCANDUMP answered {reply:?}")));
    };
    let [next, data] = v.as_slice() else {
        return Err(Error::Protocol(format!(
            "BF.SCANDUMP answered {} values",
            v.len()
        )));
    };
    let next =
        as_u64(next).ok_or_else(|| Error::Protocol(format!("BF.SCANDUMP iterator {next:?}")))?;
    let data = match data {
        Value::Nil => Vec::new(),
        other => {
            as_bytes(other).ok_or_else(|| Error::Protocol(format!("BF.SCANDUMP data {other:?}")))?
        }
    };
    Ok((next, data))
}

fn add_to(t: &mut Totals, p: &PartitionInfo) {
    t.partitions += 1;
    if let Some(i) = &p.info {
        t.capacity = t.capacity.saturating_add(i.capacity);
        t.size = t.size.saturating_add(i.size);
        t.items = t.items.saturating_add(i.items);
    }
}

fn growth_args(cmd: &mut Cmd, growth: Growth) {
    match growth {
        Growth::Scaling { expansion: Some(x) } => {
            cmd.arg("EXPANSION").arg(x);
        }
        Growth::Scaling { expansion: None } => {}
        Growth::NonScaling => {
            cmd.arg("NONSCALING");
        }
        Growth::Window { ms } => {
            cmd.arg("WINDOW").arg(ms);
        }
    }
}

/// The commands of [`Filter::reserve`], for any transport.
enum ReservePlan {
    Plain(Cmd),
    Partitioned(PartitionedReserve),
}

/// A partitioned filter's reservation: the partitions first, then the descriptor.
struct PartitionedReserve {
    partitions: Vec<Cmd>,
    descriptor: Cmd,
    /// The filter once reserved.
    filter: Filter,
}

impl ReservePlan {
    /// Checks `opts` and builds the commands, with a new random routing seed.
    fn new(name: &[u8], opts: &ReserveOptions) -> Result<ReservePlan> {
        if !(opts.error_rate > 0.0 && opts.error_rate < 1.0) {
            return Err(Error::Usage(
                "the error rate must be strictly between 0 and 1".into(),
            ));
        }
        if opts.capacity == 0 {
            return Err(Error::Usage("the capacity must be at least 1".into()));
        }
        let error_rate = opts.error_rate.to_string();
        let Some(partitions) = opts.partitions else {
            let mut cmd = redis::cmd("BF.RESERVE");
            cmd.arg(name).arg(&error_rate).arg(opts.capacity);
            growth_args(&mut cmd, opts.growth);
            return Ok(ReservePlan::Plain(cmd));
        };
        if !(1..=MAX_PARTITIONS).contains(&partitions) {
            return Err(Error::Usage(format!(
                "partitions must be in [1, {MAX_PARTITIONS}]"
            )));
        }
        let seed: u64 = rand::random();
        let keys = partition_keys(name, partitions);
        let capacity =
            partition_capacity(opts.capacity, partitions, opts.growth == Growth::NonScaling);
        let cmds: Vec<Cmd> = keys
            .iter()
            .enumerate()
            .map(|(i, key)| {
                let mut cmd = redis::cmd("BF.RESERVE");
                cmd.arg(key.as_slice()).arg(&error_rate).arg(capacity);
                growth_args(&mut cmd, opts.growth);
                cmd.arg("PARTITION")
                    .arg(i)
                    .arg(partitions)
                    .arg(seed.to_string());
                cmd
            })
            .collect();
        let mut descriptor = redis::cmd("BF.RESERVE");
        descriptor
            .arg(name)
            .arg(&error_rate)
            .arg(opts.capacity)
            .arg("PARTITIONS")
            .arg(partitions)
            .arg(seed.to_string());
        growth_args(&mut descriptor, opts.growth);
        Ok(ReservePlan::Partitioned(PartitionedReserve {
            partitions: cmds,
            descriptor,
            filter: Filter {
                name: name.to_vec(),
                partitioning: Some(Partitioning {
                    partitions,
                    routing_seed: seed,
                    keys,
                }),
            },
        }))
    }
}

impl PartitionedReserve {
    /// Which partitions the pipeline of their BF.RESERVEs created.
    fn created(&self, sent: redis::RedisResult<Vec<Value>>) -> Vec<Result<()>> {
        match sent {
            Ok(replies) => replies
                .iter()
                .map(|r| match r {
                    Value::ServerError(e) => Err(explain(server_error_text(e))),
                    _ => Ok(()),
                })
                .collect(),
            Err(e) => vec![Err(to_error(&e))],
        }
    }

    /// The error that stops the reservation before its descriptor, if any.
    fn failure(&self, created: &[Result<()>]) -> Option<Error> {
        let first = created
            .iter()
            .find_map(|r| r.as_ref().err().map(|e| e.to_string()))?;
        Some(Error::Server(format!(
            "reserving the partitions of {}: {first}",
            self.filter.name_text()
        )))
    }

    /// The DELs of the partitions this reservation created, after it failed: a key that
    /// already existed made its BF.RESERVE fail, and stays.
    fn undo(&self, created: &[Result<()>]) -> Vec<Cmd> {
        let keys = self.filter.keys();
        let partitions = &keys[1..];
        if created.len() != partitions.len() {
            return Vec::new();
        }
        partitions
            .iter()
            .zip(created)
            .filter(|(_, r)| r.is_ok())
            .map(|(k, _)| key_cmd("DEL", k))
            .collect()
    }
}

/// The commands of a lookup: BF.MEXISTS commands with the EXISTS checks of their partitions.
struct ExistsPlan {
    cmds: Vec<Cmd>,
    /// Position in `cmds` and partition of each EXISTS.
    checks: Vec<(usize, u32)>,
    /// Partition and input positions of each BF.MEXISTS, in order.
    placed: Vec<(Option<u32>, Vec<usize>)>,
}

/// A command of one key (`DEL key`, `EXISTS key`, `BF.INFO key`).
fn key_cmd(name: &str, key: &[u8]) -> Cmd {
    let mut c = redis::cmd(name);
    c.arg(key);
    c
}

/// `BF.INFO key`.
fn info_cmd(key: &[u8]) -> Cmd {
    key_cmd("BF.INFO", key)
}

impl Filter {
    /// A plain filter at `name` (nothing is asked of the server; adds fail with
    /// [`Error::Vanished`] while the key does not exist).
    pub fn plain(name: &[u8]) -> Filter {
        Filter {
            name: name.to_vec(),
            partitioning: None,
        }
    }

    pub fn name(&self) -> &[u8] {
        &self.name
    }

    fn name_text(&self) -> String {
        String::from_utf8_lossy(&self.name).into_owned()
    }

    /// The routing, when partitioned.
    pub fn partitioning(&self) -> Option<&Partitioning> {
        self.partitioning.as_ref()
    }

    /// Every key the filter is made of: the name, then the partitions.
    pub fn keys(&self) -> Vec<Vec<u8>> {
        let mut keys = vec![self.name.clone()];
        if let Some(p) = &self.partitioning {
            keys.extend(p.keys.iter().cloned());
        }
        keys
    }

    /// Looks `name` up with one BF.INFO: a descriptor gives the partitioned filter's routing,
    /// any other filter is plain. `None` when the key does not exist.
    pub fn discover(conn: &mut Connection, name: &[u8]) -> Result<Option<Filter>> {
        block(Filter::discover_on(conn, name))
    }

    pub(crate) async fn discover_on(
        conn: &mut impl Transport,
        name: &[u8],
    ) -> Result<Option<Filter>> {
        Filter::from_info(name, conn.send_one(&info_cmd(name)).await)
    }

    /// The filter at `name` from its BF.INFO reply ([`Filter::discover`]).
    fn from_info(name: &[u8], reply: Result<Value>) -> Result<Option<Filter>> {
        let reply = match reply {
            Ok(v) => v,
            Err(Error::Server(t)) if t.contains("not found") => return Ok(None),
            Err(e) => return Err(e),
        };
        let pairs = info_pairs(reply)?;
        let partitions = field(&pairs, "Partitions").and_then(as_u64);
        let keys = field(&pairs, "Partition keys");
        let is_partition_key = field(&pairs, "Partition").is_some();
        let (Some(partitions), Some(keys), false) = (partitions, keys, is_partition_key) else {
            return Ok(Some(Filter::plain(name)));
        };
        let seed = field(&pairs, "Routing seed")
            .and_then(as_u64)
            .ok_or_else(|| Error::Protocol("descriptor without a routing seed".into()))?;
        let keys: Vec<Vec<u8>> = match keys {
            Value::Array(a) => a.iter().filter_map(as_bytes).collect(),
            other => return Err(Error::Protocol(format!("Partition keys: {other:?}"))),
        };
        let partitions = u32::try_from(partitions)
            .ok()
            .filter(|p| (1..=MAX_PARTITIONS).contains(p))
            .ok_or_else(|| Error::Protocol(format!("{partitions} partitions")))?;
        if keys.len() != partitions as usize {
            return Err(Error::Inconsistent(format!(
                "{partitions} partitions but {} partition keys",
                keys.len()
            )));
        }
        let expected = partition_keys(name, partitions);
        if keys != expected {
            return Err(Error::Inconsistent(
                "the descriptor's partition keys are not the ones docs/partitioning.md gives"
                    .into(),
            ));
        }
        Ok(Some(Filter {
            name: name.to_vec(),
            partitioning: Some(Partitioning {
                partitions,
                routing_seed: seed,
                keys,
            }),
        }))
    }

    /// Creates the filter: a plain BF.RESERVE, or every partition and then the descriptor (so
    /// that a descriptor always has its partitions). On failure the partitions it created are
    /// deleted again.
    pub fn reserve(conn: &mut Connection, name: &[u8], opts: &ReserveOptions) -> Result<Filter> {
        block(Filter::reserve_on(conn, name, opts))
    }

    pub(crate) async fn reserve_on(
        conn: &mut impl Transport,
        name: &[u8],
        opts: &ReserveOptions,
    ) -> Result<Filter> {
        let plan = match ReservePlan::new(name, opts)? {
            ReservePlan::Plain(cmd) => {
                conn.send_one(&cmd).await?;
                return Ok(Filter::plain(name));
            }
            ReservePlan::Partitioned(plan) => plan,
        };
        let created = plan.created(conn.send_pipeline(&plan.partitions).await);
        let result = match plan.failure(&created) {
            Some(e) => Err(e),
            None => conn.send_one(&plan.descriptor).await.map(|_| ()),
        };
        if result.is_err() {
            let undo = plan.undo(&created);
            if !undo.is_empty() {
                let _ = conn.send_pipeline(&undo).await;
            }
        }
        result.map(|()| plan.filter)
    }

    /// Adds `items`, answering for each whether it was new. Items go to their keys (the name,
    /// or each item's partition) in `BF.INSERT key NOCREATE ITEMS …` commands of up to `batch`
    /// items, all in one pipeline per node: an add never creates a filter, so a key that no
    /// longer exists is [`Error::Vanished`] (with the items of this call that were added before)
    /// rather than a new, empty filter with the server's defaults. Commands whose reply was lost
    /// are resent as `opts.resend_lost_replies` says: their items may then answer "not new".
    pub fn add(
        &self,
        conn: &mut Connection,
        items: &[&[u8]],
        opts: &WriteOptions,
    ) -> Result<Vec<bool>> {
        block(self.add_on(conn, items, opts, AddCommand::Insert))
    }

    /// Adds `items` to a window filter at the time `at_ms` (Unix ms), as [`Filter::add`] does,
    /// in `BF.ADDAT key at_ms …` commands: the item is held for the window from `at_ms`'s
    /// generation on. BF.ADDAT never creates a filter, so a key that no longer exists is
    /// [`Error::Vanished`] and a resend can only add to the filter it was meant for.
    pub fn add_at(
        &self,
        conn: &mut Connection,
        at_ms: u64,
        items: &[&[u8]],
        opts: &WriteOptions,
    ) -> Result<Vec<bool>> {
        block(self.add_on(conn, items, opts, AddCommand::At(at_ms)))
    }

    pub(crate) async fn add_on(
        &self,
        conn: &mut impl Transport,
        items: &[&[u8]],
        opts: &WriteOptions,
        command: AddCommand,
    ) -> Result<Vec<bool>> {
        let (cmds, placed) = self.add_commands(items, opts, command);
        let slots = self.write_slots(&placed);
        let replies = send_until_answered(conn, &cmds, Some(&slots), opts).await?;
        self.add_answers(&replies, &placed, items.len())
    }

    /// The add commands of [`Filter::add`] / [`Filter::add_at`] and where their items are.
    #[allow(clippy::type_complexity)]
    fn add_commands(
        &self,
        items: &[&[u8]],
        opts: &WriteOptions,
        command: AddCommand,
    ) -> (Vec<Cmd>, Vec<(Option<u32>, Vec<usize>)>) {
        self.commands(items, opts.batch.max(1), |cmd, key, _| match command {
            AddCommand::Insert => {
                cmd.arg("BF.INSERT").arg(key).arg("NOCREATE").arg("ITEMS");
            }
            AddCommand::At(at_ms) => {
                cmd.arg("BF.ADDAT").arg(key).arg(at_ms);
            }
        })
    }

    /// [`Filter::add`]'s answers from the replies to [`Filter::add_commands`]: a key that no
    /// longer exists is [`Error::Vanished`] with the items acknowledged beside it.
    fn add_answers(
        &self,
        replies: &[Value],
        placed: &[(Option<u32>, Vec<usize>)],
        n: usize,
    ) -> Result<Vec<bool>> {
        let mut out = vec![false; n];
        let mut acknowledged = 0u64;
        let mut vanished = None;
        for (reply, (part, idx)) in replies.iter().zip(placed) {
            match reply {
                Value::ServerError(e) if is_not_found(&server_error_text(e)) => {
                    vanished.get_or_insert(*part);
                }
                // Ran beside a failed command, its reply unknown: not counted as acknowledged.
                Value::Nil => {}
                Value::ServerError(e) => return Err(explain(server_error_text(e))),
                reply => {
                    let answers = bool_array(reply, idx.len())?;
                    for (&i, a) in idx.iter().zip(answers) {
                        out[i] = a;
                    }
                    acknowledged += idx.len() as u64;
                }
            }
        }
        match vanished {
            Some(part) => Err(Error::Vanished {
                name: self.name_text(),
                key: String::from_utf8_lossy(self.key_of(part)).into_owned(),
                acknowledged,
            }),
            None => Ok(out),
        }
    }

    /// Adds `first` to the plain filter at `name` with `BF.INSERT name ITEMS first`, which
    /// creates the filter with the server's defaults (`bf.error-rate`, `bf.initial-capacity`,
    /// `bf.expansion`) when the key does not exist: the one add that may create, for a
    /// caller asked to create a missing filter with the defaults. Every later add goes through
    /// [`Filter::add`], which never creates. Answers the filter and whether `first` was new.
    /// A lost reply is resent: before this call nothing was acknowledged, so a filter that
    /// vanished in between is created as asked.
    pub fn create_with_defaults(
        conn: &mut Connection,
        name: &[u8],
        first: &[u8],
        opts: &WriteOptions,
    ) -> Result<(Filter, bool)> {
        block(Filter::create_with_defaults_on(conn, name, first, opts))
    }

    pub(crate) async fn create_with_defaults_on(
        conn: &mut impl Transport,
        name: &[u8],
        first: &[u8],
        opts: &WriteOptions,
    ) -> Result<(Filter, bool)> {
        let filter = Filter::plain(name);
        let mut cmd = redis::cmd("BF.INSERT");
        cmd.arg(name).arg("ITEMS").arg(first);
        let policy = WriteOptions {
            resend_lost_replies: true,
            ..opts.clone()
        };
        let slots = vec![key_slot(name)];
        let replies = send_until_answered(conn, &[cmd], Some(&slots), &policy).await?;
        let reply = replies
            .first()
            .ok_or_else(|| Error::Protocol("no reply to BF.INSERT".into()))?;
        if let Value::ServerError(e) = reply {
            return Err(explain(server_error_text(e)));
        }
        let new = bool_array(reply, 1)?.first().copied().unwrap_or(false);
        Ok((filter, new))
    }

    /// Looks `items` up, answers in order. On a partitioned filter every partition consulted is
    /// checked to exist first (EXISTS in the same pipeline): a missing one is an error, never a 0.
    pub fn exists(
        &self,
        conn: &mut Connection,
        items: &[&[u8]],
        batch: usize,
    ) -> Result<Vec<bool>> {
        block(self.exists_on(conn, items, batch))
    }

    pub(crate) async fn exists_on(
        &self,
        conn: &mut impl Transport,
        items: &[&[u8]],
        batch: usize,
    ) -> Result<Vec<bool>> {
        let plan = self.exists_plan(items, batch);
        let replies = send_raw(conn, &plan.cmds, Duration::from_secs(120)).await?;
        self.exists_answers(&plan, &replies, items.len())
    }

    /// The commands of [`Filter::exists`]: BF.MEXISTS of up to `batch` items, each partition's
    /// first one preceded by the EXISTS of its key.
    fn exists_plan(&self, items: &[&[u8]], batch: usize) -> ExistsPlan {
        let (cmds, placed) = self.commands(items, batch.max(1), |cmd, key, _| {
            cmd.arg("BF.MEXISTS").arg(key);
        });
        let mut with_checks: Vec<Cmd> = Vec::with_capacity(cmds.len() * 2);
        let mut checks = Vec::new();
        let mut checked: Vec<u32> = Vec::new();
        for (cmd, (part, _)) in cmds.into_iter().zip(&placed) {
            if let Some(p) = part {
                if !checked.contains(p) {
                    checked.push(*p);
                    checks.push((with_checks.len(), *p));
                    with_checks.push(key_cmd("EXISTS", self.key_of(Some(*p))));
                }
            }
            with_checks.push(cmd);
        }
        ExistsPlan {
            cmds: with_checks,
            checks,
            placed,
        }
    }

    /// [`Filter::exists`]'s answers from the replies to [`Filter::exists_plan`]'s commands: a
    /// partition that does not exist is [`Error::MissingPartition`], never a 0.
    fn exists_answers(&self, plan: &ExistsPlan, replies: &[Value], n: usize) -> Result<Vec<bool>> {
        let mut out = vec![false; n];
        for (at, p) in &plan.checks {
            if replies.get(*at).and_then(as_u64) != Some(1) {
                return Err(Error::MissingPartition {
                    name: self.name_text(),
                    key: String::from_utf8_lossy(self.key_of(Some(*p))).into_owned(),
                });
            }
        }
        let check_positions: Vec<usize> = plan.checks.iter().map(|(at, _)| *at).collect();
        let answers = replies
            .iter()
            .enumerate()
            .filter(|(i, _)| !check_positions.contains(i))
            .map(|(_, r)| r);
        for (reply, (_, idx)) in answers.zip(&plan.placed) {
            for (&i, a) in idx.iter().zip(bool_array(reply, idx.len())?) {
                out[i] = a;
            }
        }
        Ok(out)
    }

    /// The key holding partition `part`, or the name.
    fn key_of(&self, part: Option<u32>) -> &[u8] {
        match (part, &self.partitioning) {
            (Some(p), Some(routing)) => &routing.keys[p as usize],
            _ => &self.name,
        }
    }

    /// Groups items by partition (in input order within each) and builds one command per
    /// `batch` of them with `head` writing the command name and key: the commands, and for each
    /// its partition and the input positions of its items.
    #[allow(clippy::type_complexity)]
    fn commands(
        &self,
        items: &[&[u8]],
        batch: usize,
        head: impl Fn(&mut Cmd, &[u8], Option<u32>),
    ) -> (Vec<Cmd>, Vec<(Option<u32>, Vec<usize>)>) {
        let groups: Vec<(Option<u32>, Vec<usize>)> = match &self.partitioning {
            None => vec![(None, (0..items.len()).collect())],
            Some(r) => {
                let mut by_part: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
                for (i, item) in items.iter().enumerate() {
                    by_part
                        .entry(partition_of(item, r.routing_seed, r.partitions))
                        .or_default()
                        .push(i);
                }
                by_part.into_iter().map(|(p, v)| (Some(p), v)).collect()
            }
        };
        let mut cmds = Vec::new();
        let mut placed = Vec::new();
        for (part, idx) in groups {
            for chunk in idx.chunks(batch) {
                let mut cmd = Cmd::new();
                head(&mut cmd, self.key_of(part), part);
                for &i in chunk {
                    cmd.arg(items[i]);
                }
                cmds.push(cmd);
                placed.push((part, chunk.to_vec()));
            }
        }
        (cmds, placed)
    }

    /// The slots [`Filter::add`] WAITs on: those of every key its commands write to.
    fn write_slots(&self, placed: &[(Option<u32>, Vec<usize>)]) -> Vec<u16> {
        let mut slots: Vec<u16> = placed
            .iter()
            .map(|(p, _)| key_slot(self.key_of(*p)))
            .collect();
        slots.sort_unstable();
        slots.dedup();
        slots
    }

    /// BF.INFO of the name and, for a partitioned filter, of every partition with the master it
    /// lives on, and every way the partitions fall short.
    pub fn info(&self, conn: &mut Connection) -> Result<FilterInfo> {
        block(self.info_on(conn))
    }

    pub(crate) async fn info_on(&self, conn: &mut impl Transport) -> Result<FilterInfo> {
        let head = conn.send_one(&info_cmd(&self.name)).await?;
        let Some(routing) = &self.partitioning else {
            return self.info_from(head, &[], Vec::new(), &[]);
        };
        let present = send_raw(conn, &exists_cmds(routing), INFO_RETRY).await?;
        let asked = partition_info_cmds(routing, &present);
        let infos = send_raw(conn, &asked, INFO_RETRY).await?;
        let masters = conn.slot_map().await?;
        self.info_from(head, &present, infos, &masters)
    }

    /// [`Filter::info`] from the name's BF.INFO reply, the EXISTS replies of the partitions,
    /// the BF.INFO replies of those present ([`partition_info_cmds`]) and the slot map.
    fn info_from(
        &self,
        head: Value,
        present: &[Value],
        infos: Vec<Value>,
        masters: &[Master],
    ) -> Result<FilterInfo> {
        let pairs = info_pairs(head)?;
        let fields = pairs
            .iter()
            .filter_map(|(k, v)| Some((as_text(k)?, display(v))))
            .collect();
        let key = key_info(&pairs);
        let mut out = FilterInfo {
            fields,
            key,
            partitions: Vec::new(),
            problems: Vec::new(),
        };
        let Some(routing) = &self.partitioning else {
            return Ok(out);
        };
        let mut replies = infos.into_iter();
        for (i, k) in routing.keys.iter().enumerate() {
            let index = i as u32;
            let slot = key_slot(k);
            let info = if present.get(i).and_then(as_u64) == Some(1) {
                let reply = replies
                    .next()
                    .ok_or_else(|| Error::Protocol("fewer BF.INFO replies than asked".into()))?;
                Some(key_info(&info_pairs(reply)?))
            } else {
                None
            };
            if let Some(problem) = partition_problem(routing, index, k, info.as_ref()) {
                out.problems.push(problem);
            }
            let master = masters
                .iter()
                .find(|m| m.owns(slot))
                .map(|m| m.addr.clone())
                .unwrap_or_else(|| "(no master)".to_string());
            out.partitions.push(PartitionInfo {
                index,
                key: k.clone(),
                slot,
                master,
                info,
            });
        }
        Ok(out)
    }

    /// Deletes the filter: the descriptor first (a descriptor implies its partitions), then the
    /// partitions. Answers how many keys were deleted.
    pub fn drop(&self, conn: &mut Connection) -> Result<u64> {
        block(self.drop_on(conn))
    }

    pub(crate) async fn drop_on(&self, conn: &mut impl Transport) -> Result<u64> {
        let mut dels: Vec<Cmd> = self.keys().iter().map(|k| key_cmd("DEL", k)).collect();
        let partitions = dels.split_off(1);
        let first = send_raw(conn, &dels, INFO_RETRY).await?;
        let rest = send_raw(conn, &partitions, INFO_RETRY).await?;
        Ok(first.iter().chain(&rest).filter_map(as_u64).sum())
    }
}

/// How long reads and deletes retry.
const INFO_RETRY: Duration = Duration::from_secs(30);

/// The EXISTS of every partition key, in order.
fn exists_cmds(routing: &Partitioning) -> Vec<Cmd> {
    routing.keys.iter().map(|k| key_cmd("EXISTS", k)).collect()
}

/// The BF.INFO of every partition key whose EXISTS (`present`) answered 1.
fn partition_info_cmds(routing: &Partitioning, present: &[Value]) -> Vec<Cmd> {
    routing
        .keys
        .iter()
        .zip(present)
        .filter(|(_, p)| as_u64(p) == Some(1))
        .map(|(k, _)| info_cmd(k))
        .collect()
}

/// How partition `index` (key `k`, BF.INFO `info`) falls short of the descriptor, if it does.
fn partition_problem(
    routing: &Partitioning,
    index: u32,
    k: &[u8],
    info: Option<&KeyInfo>,
) -> Option<String> {
    let key_text = String::from_utf8_lossy(k);
    let Some(info) = info else {
        return Some(format!("partition {key_text} is missing"));
    };
    match info.partition {
        None => Some(format!(
            "{key_text} is not a partition (no Partition field)"
        )),
        Some((pi, pp, ps)) => {
            (pi != index || pp != routing.partitions || ps != routing.routing_seed).then(|| {
                format!(
                    "{key_text} says it is partition {pi} of {pp} with seed {ps}; the \
                     descriptor says {index} of {} with seed {}",
                    routing.partitions, routing.routing_seed
                )
            })
        }
    }
}

/// Sends `cmds` as one pipeline (reads and deletes: resent whole after any transient failure)
/// and answers the replies; the first error reply is the error.
async fn send_raw(
    conn: &mut impl Transport,
    cmds: &[Cmd],
    retry_for: Duration,
) -> Result<Vec<Value>> {
    let opts = WriteOptions {
        retry_for,
        ..WriteOptions::default()
    };
    let replies = send_until_answered(conn, cmds, None, &opts).await?;
    match first_server_error(&replies) {
        Some(text) => Err(explain(text)),
        None => Ok(replies),
    }
}

/// Sends `cmds` until every one is answered, as [`Delivery`] decides: resending what the
/// server did not run, reconnecting and pausing between attempts, WAITing when asked.
async fn send_until_answered(
    conn: &mut impl Transport,
    cmds: &[Cmd],
    wait_slots: Option<&[u16]>,
    opts: &WriteOptions,
) -> Result<Vec<Value>> {
    if cmds.is_empty() {
        return Ok(Vec::new());
    }
    let mut delivery = Delivery::new(cmds, wait_slots, opts);
    loop {
        let sent = conn.send_replies(&delivery.pending_cmds()).await;
        let mut step = delivery.received(sent)?;
        if let Step::Wait(wait, slots) = step {
            step = delivery.waited(wait_for_replicas(conn, wait, &slots).await)?;
        }
        match step {
            Step::Done(replies) => return Ok(replies),
            Step::Resend | Step::Wait(..) => {}
            Step::Pause(pause) => conn.pause_then_reconnect(pause).await,
        }
    }
}

/// `WAIT replicas timeout` once on the master of each slot.
async fn wait_for_replicas(
    conn: &mut impl Transport,
    (replicas, timeout): (u32, Duration),
    slots: &[u16],
) -> std::result::Result<(), WaitFailure> {
    let masters = conn
        .slot_map()
        .await
        .map_err(|e| WaitFailure::Transient(e.to_string()))?;
    for (slot, addr) in wait_targets(&masters, slots) {
        let reply = conn.send_to_slot(&wait_cmd(replicas, timeout), slot).await;
        wait_answer(reply, replicas, &addr)?;
    }
    Ok(())
}

pub(crate) fn to_error(e: &redis::RedisError) -> Error {
    if e.code().is_some() {
        explain(server_text(e))
    } else {
        Error::Connection(format!("connection error: {e}"))
    }
}

/// True for the error reply to an add to a key that does not exist (BF.INSERT … NOCREATE).
fn is_not_found(text: &str) -> bool {
    text == "ERR not found" || text == "not found"
}

/// The first top-level error reply of a pipeline.
fn first_server_error(replies: &[Value]) -> Option<String> {
    replies.iter().find_map(|r| match r {
        Value::ServerError(e) => Some(server_error_text(e)),
        _ => None,
    })
}

/// A BF.MADD / BF.INSERT / BF.MEXISTS reply of `n` answers; an error inside it (a full
/// NONSCALING filter, an item of another partition) is the error.
fn bool_array(reply: &Value, n: usize) -> Result<Vec<bool>> {
    let Value::Array(a) = reply else {
        return Err(Error::Protocol(format!("expected an array, got {reply:?}")));
    };
    // BF.MADD stops at its first failing item, so an error may end a short reply.
    if let Some(e) = a.iter().find_map(|v| match v {
        Value::ServerError(e) => Some(explain(server_error_text(e))),
        _ => None,
    }) {
        return Err(e);
    }
    if a.len() != n {
        return Err(Error::Protocol(format!(
            "{} answers for {n} items",
            a.len()
        )));
    }
    a.iter()
        .map(|v| match v {
            Value::ServerError(e) => Err(explain(server_error_text(e))),
            v => match as_u64(v) {
                Some(1) => Ok(true),
                Some(0) => Ok(false),
                _ => Err(Error::Protocol(format!("answer {v:?}"))),
            },
        })
        .collect()
}

/// BF.INFO's field/value pairs, from a RESP2 array or a RESP3 map.
pub fn info_pairs(reply: Value) -> Result<Vec<(Value, Value)>> {
    match reply {
        Value::Array(a) => {
            let mut out = Vec::with_capacity(a.len() / 2);
            let mut it = a.into_iter();
            while let (Some(k), Some(v)) = (it.next(), it.next()) {
                out.push((k, v));
            }
            Ok(out)
        }
        Value::Map(m) => Ok(m),
        other => Err(Error::Protocol(format!("BF.INFO answered {other:?}"))),
    }
}

fn field<'a>(pairs: &'a [(Value, Value)], name: &str) -> Option<&'a Value> {
    pairs
        .iter()
        .find(|(k, _)| as_text(k).as_deref() == Some(name))
        .map(|(_, v)| v)
}

fn key_info(pairs: &[(Value, Value)]) -> KeyInfo {
    let n = |name| field(pairs, name).and_then(as_u64);
    let partition = match (n("Partition"), n("Partitions"), n("Routing seed")) {
        (Some(i), Some(p), Some(s)) => match (u32::try_from(i), u32::try_from(p)) {
            (Ok(i), Ok(p)) => Some((i, p, s)),
            _ => None,
        },
        _ => None,
    };
    KeyInfo {
        capacity: n("Capacity").unwrap_or(0),
        size: n("Size").unwrap_or(0),
        filters: n("Number of filters").unwrap_or(0),
        items: n("Number of items inserted").unwrap_or(0),
        expansion: n("Expansion rate"),
        window_ms: n("Window (ms)"),
        generation_ms: n("Generation (ms)"),
        partition,
    }
}

/// An integer reply (or a number sent as text) that fits in a u64.
pub fn as_u64(v: &Value) -> Option<u64> {
    match v {
        Value::Int(i) => u64::try_from(*i).ok(),
        Value::Boolean(b) => Some(u64::from(*b)),
        Value::BulkString(s) => std::str::from_utf8(s).ok()?.parse().ok(),
        Value::SimpleString(s) => s.parse().ok(),
        _ => None,
    }
}

fn as_bytes(v: &Value) -> Option<Vec<u8>> {
    match v {
        Value::BulkString(b) => Some(b.clone()),
        Value::SimpleString(s) => Some(s.as_bytes().to_vec()),
        _ => None,
    }
}

fn as_text(v: &Value) -> Option<String> {
    as_bytes(v).map(|b| String::from_utf8_lossy(&b).into_owned())
}

/// A reply value as a person reads it.
fn display(v: &Value) -> String {
    match v {
        Value::Nil => "(nil)".into(),
        Value::Int(i) => i.to_string(),
        Value::Double(d) => d.to_string(),
        Value::Boolean(b) => b.to_string(),
        Value::Array(a) => format!("{} entries", a.len()),
        other => as_text(other).unwrap_or_else(|| format!("{other:?}")),
    }
}
