//! A filter by its name, plain (one key) or partitioned (`docs/partitioning.md`: a descriptor at
//! the name and P partition keys), with the same operations on both: reserve, add, look up,
//! describe, delete.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use redis::{Cmd, Value};

use crate::connection::{Connection, Master};
use crate::error::{
    explain, is_transient, is_transient_text, server_error_text, server_text, Error, Result,
};
use crate::routing::{key_slot, partition_capacity, partition_keys, partition_of, MAX_PARTITIONS};

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

/// The cluster slot map, fetched when first needed.
struct SlotMap<'a> {
    masters: Option<Vec<Master>>,
    conn: &'a mut Connection,
}

impl SlotMap<'_> {
    fn master_of(&mut self, slot: u16) -> Result<String> {
        if self.masters.is_none() {
            self.masters = Some(self.conn.masters()?);
        }
        let masters = self.masters.as_deref().unwrap_or(&[]);
        Ok(masters
            .iter()
            .find(|m| m.owns(slot))
            .map(|m| m.addr.clone())
            .unwrap_or_else(|| "(no master)".to_string()))
    }
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
        let reply = match conn.query(redis::cmd("BF.INFO").arg(name)) {
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
            conn.query(&cmd)?;
            return Ok(Filter::plain(name));
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
        let created = match conn.pipeline(&cmds) {
            Ok(replies) => replies
                .iter()
                .map(|r| match r {
                    Value::ServerError(e) => Err(explain(server_error_text(e))),
                    _ => Ok(()),
                })
                .collect::<Vec<_>>(),
            Err(e) => vec![Err(to_error(&e))],
        };
        let first_error = created
            .iter()
            .find_map(|r| r.as_ref().err().map(|e| e.to_string()));
        let result = match first_error {
            Some(e) => Err(Error::Server(format!(
                "reserving the partitions of {}: {e}",
                String::from_utf8_lossy(name)
            ))),
            None => {
                let mut cmd = redis::cmd("BF.RESERVE");
                cmd.arg(name)
                    .arg(&error_rate)
                    .arg(opts.capacity)
                    .arg("PARTITIONS")
                    .arg(partitions)
                    .arg(seed.to_string());
                growth_args(&mut cmd, opts.growth);
                conn.query(&cmd).map(|_| ())
            }
        };
        match result {
            Ok(()) => Ok(Filter {
                name: name.to_vec(),
                partitioning: Some(Partitioning {
                    partitions,
                    routing_seed: seed,
                    keys,
                }),
            }),
            Err(e) => {
                // Only the partitions this call created: a key that already existed made its
                // BF.RESERVE fail, and stays.
                let ours: Vec<Cmd> = keys
                    .iter()
                    .zip(&created)
                    .filter(|(_, r)| r.is_ok())
                    .map(|(k, _)| {
                        let mut cmd = redis::cmd("DEL");
                        cmd.arg(k.as_slice());
                        cmd
                    })
                    .collect();
                if created.len() == keys.len() && !ours.is_empty() {
                    let _ = conn.pipeline(&ours);
                }
                Err(e)
            }
        }
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
        self.add_with(conn, items, opts, |cmd, key| {
            cmd.arg("BF.INSERT").arg(key).arg("NOCREATE").arg("ITEMS");
        })
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
        self.add_with(conn, items, opts, |cmd, key| {
            cmd.arg("BF.ADDAT").arg(key).arg(at_ms);
        })
    }

    /// Adds `items` in commands whose name and key `head` writes (the items follow).
    fn add_with(
        &self,
        conn: &mut Connection,
        items: &[&[u8]],
        opts: &WriteOptions,
        head: impl Fn(&mut Cmd, &[u8]),
    ) -> Result<Vec<bool>> {
        let batch = opts.batch.max(1);
        let (cmds, placed) = self.commands(items, batch, |cmd, key, _| head(cmd, key));
        let replies = self.send(conn, &cmds, &placed, opts)?;
        let mut out = vec![false; items.len()];
        let mut acknowledged = 0u64;
        let mut vanished = None;
        for (reply, (part, idx)) in replies.iter().zip(&placed) {
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
        let filter = Filter::plain(name);
        let mut cmd = redis::cmd("BF.INSERT");
        cmd.arg(name).arg("ITEMS").arg(first);
        let policy = WriteOptions {
            resend_lost_replies: true,
            ..opts.clone()
        };
        let slots = vec![key_slot(name)];
        let replies = filter.send_until_answered(conn, &[cmd], Some(&slots), &policy)?;
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
        let batch = batch.max(1);
        let (cmds, placed) = self.commands(items, batch, |cmd, key, _| {
            cmd.arg("BF.MEXISTS").arg(key);
        });
        let mut with_checks: Vec<Cmd> = Vec::with_capacity(cmds.len() * 2);
        let mut checks = Vec::new();
        let mut checked: Vec<Option<u32>> = Vec::new();
        for (cmd, (part, _)) in cmds.iter().zip(&placed) {
            if let Some(p) = part {
                if !checked.contains(&Some(*p)) {
                    checked.push(Some(*p));
                    let mut e = redis::cmd("EXISTS");
                    e.arg(self.key_of(Some(*p)));
                    checks.push((with_checks.len(), *p));
                    with_checks.push(e);
                }
            }
            with_checks.push(cmd.clone());
        }
        let replies = self.send_raw(conn, &with_checks, Duration::from_secs(120))?;
        let mut out = vec![false; items.len()];
        for (at, p) in &checks {
            if replies.get(*at).and_then(as_u64) != Some(1) {
                return Err(Error::MissingPartition {
                    name: self.name_text(),
                    key: String::from_utf8_lossy(self.key_of(Some(*p))).into_owned(),
                });
            }
        }
        let check_positions: Vec<usize> = checks.iter().map(|(at, _)| *at).collect();
        let answers = replies
            .iter()
            .enumerate()
            .filter(|(i, _)| !check_positions.contains(i))
            .map(|(_, r)| r);
        for (reply, (_, idx)) in answers.zip(&placed) {
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

    /// Sends `cmds` (placed as [`Filter::commands`] says) as [`Filter::send_until_answered`]
    /// does, WAITing (when asked) on every master written to.
    fn send(
        &self,
        conn: &mut Connection,
        cmds: &[Cmd],
        placed: &[(Option<u32>, Vec<usize>)],
        opts: &WriteOptions,
    ) -> Result<Vec<Value>> {
        let mut slots: Vec<u16> = placed
            .iter()
            .map(|(p, _)| key_slot(self.key_of(*p)))
            .collect();
        slots.sort_unstable();
        slots.dedup();
        self.send_until_answered(conn, cmds, Some(&slots), opts)
    }

    /// Sends `cmds` as one pipeline (reads and deletes: resent whole after any transient
    /// failure) and answers the replies; the first error reply is the error.
    fn send_raw(
        &self,
        conn: &mut Connection,
        cmds: &[Cmd],
        retry_for: Duration,
    ) -> Result<Vec<Value>> {
        let opts = WriteOptions {
            retry_for,
            ..WriteOptions::default()
        };
        let replies = self.send_until_answered(conn, cmds, None, &opts)?;
        match first_server_error(&replies) {
            Some(text) => Err(explain(text)),
            None => Ok(replies),
        }
    }

    /// Sends `cmds` as one pipeline until every command is answered: a command the server did
    /// not run (a transient error reply: CLUSTERDOWN, TRYAGAIN, LOADING, …) is sent again, the
    /// answered ones are kept; commands whose replies were lost are sent again when
    /// `opts.resend_lost_replies`, else that is an error. Each resend reconnects first
    /// (refreshing a cluster's slot map), until `opts.retry_for` has passed. With `opts.wait` and
    /// `wait_slots`, WAITs on the master of every given slot (once per master) and resends the
    /// whole pipeline when fewer replicas than asked acknowledged. An error reply a resend cannot
    /// cure ends it: the replies come back with it as `Value::ServerError`. A cluster hides the
    /// other replies of a pipeline with an error; those commands ran, and are sent again for
    /// their answers when `opts.resend_lost_replies`, else come back as `Value::Nil`.
    fn send_until_answered(
        &self,
        conn: &mut Connection,
        cmds: &[Cmd],
        wait_slots: Option<&[u16]>,
        opts: &WriteOptions,
    ) -> Result<Vec<Value>> {
        if cmds.is_empty() {
            return Ok(Vec::new());
        }
        let deadline = Instant::now() + opts.retry_for;
        let mut pause = Duration::from_millis(50);
        let mut replies: Vec<Option<Value>> = vec![None; cmds.len()];
        // The first complete answer: when only the WAIT fell short, the pipeline is resent for
        // durability, and its second answer would call every item already present.
        let mut answered: Option<Vec<Value>> = None;
        loop {
            let pending: Vec<usize> = (0..cmds.len()).filter(|&i| replies[i].is_none()).collect();
            let sent = if pending.len() == cmds.len() {
                conn.pipeline_replies(cmds)
            } else {
                let subset: Vec<Cmd> = pending.iter().map(|&i| cmds[i].clone()).collect();
                conn.pipeline_replies(&subset)
            };
            // Replies lost with the connection, and replies a cluster hid beside an error reply.
            let (mut transient, mut lost, mut hidden) = (None, 0usize, 0usize);
            match sent {
                Ok(got) => {
                    for (&i, reply) in pending.iter().zip(got) {
                        match reply {
                            Some(Value::ServerError(e))
                                if is_transient_text(&server_error_text(&e)) =>
                            {
                                transient.get_or_insert_with(|| server_error_text(&e));
                            }
                            Some(reply) => replies[i] = Some(reply),
                            None => hidden += 1,
                        }
                    }
                }
                Err(e) if is_transient(&e) => {
                    lost = pending.len();
                    transient = Some(server_text(&e));
                }
                Err(e) => return Err(to_error(&e)),
            }
            let failed = replies
                .iter()
                .any(|r| matches!(r, Some(Value::ServerError(_))));
            // The hidden replies of commands that ran are asked again at once (when resending
            // is harmless), so that the caller learns what the server acknowledged.
            if failed && hidden > 0 && opts.resend_lost_replies && transient.is_none() {
                continue;
            }
            if failed {
                return Ok(replies
                    .into_iter()
                    .map(|r| r.unwrap_or(Value::Nil))
                    .collect());
            }
            lost += hidden;
            if lost > 0 && !opts.resend_lost_replies {
                return Err(Error::Connection(format!(
                    "the replies to {lost} commands were lost, so whether they ran is unknown{}",
                    transient.map(|t| format!(": {t}")).unwrap_or_default()
                )));
            }
            let last = match transient {
                Some(text) => text,
                None if lost > 0 => "replies lost".to_string(),
                None => {
                    let done: Vec<Value> = replies.iter_mut().filter_map(Option::take).collect();
                    let (Some(w), Some(slots)) = (opts.wait, wait_slots) else {
                        return Ok(answered.unwrap_or(done));
                    };
                    match wait_for_replicas(conn, w, slots) {
                        Ok(()) => return Ok(answered.unwrap_or(done)),
                        Err(WaitFailure::Transient(t)) => {
                            answered.get_or_insert(done);
                            t
                        }
                        Err(WaitFailure::Fatal(e)) => return Err(e),
                    }
                }
            };
            if Instant::now() + pause > deadline {
                return Err(Error::Connection(format!(
                    "gave up after {}s of retries: {last}",
                    opts.retry_for.as_secs()
                )));
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_secs(1));
            // A failed reconnect is retried at the next turn, within the deadline.
            let _ = conn.reconnect();
        }
    }

    /// BF.INFO of the name and, for a partitioned filter, of every partition with the master it
    /// lives on, and every way the partitions fall short.
    pub fn info(&self, conn: &mut Connection) -> Result<FilterInfo> {
        let reply = conn.query(redis::cmd("BF.INFO").arg(self.name.as_slice()))?;
        let pairs = info_pairs(reply)?;
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
        let exists: Vec<Cmd> = routing
            .keys
            .iter()
            .map(|k| {
                let mut c = redis::cmd("EXISTS");
                c.arg(k.as_slice());
                c
            })
            .collect();
        let present = self.send_raw(conn, &exists, Duration::from_secs(30))?;
        let present: Vec<bool> = present.iter().map(|v| as_u64(v) == Some(1)).collect();
        let infos: Vec<Cmd> = routing
            .keys
            .iter()
            .zip(&present)
            .filter(|(_, p)| **p)
            .map(|(k, _)| {
                let mut c = redis::cmd("BF.INFO");
                c.arg(k.as_slice());
                c
            })
            .collect();
        let mut replies = self
            .send_raw(conn, &infos, Duration::from_secs(30))?
            .into_iter();
        let mut map = SlotMap {
            masters: None,
            conn,
        };
        for (i, (k, here)) in routing.keys.iter().zip(&present).enumerate() {
            let index = i as u32;
            let slot = key_slot(k);
            let info = if *here {
                let reply = replies
                    .next()
                    .ok_or_else(|| Error::Protocol("fewer BF.INFO replies than asked".into()))?;
                Some(key_info(&info_pairs(reply)?))
            } else {
                None
            };
            let key_text = String::from_utf8_lossy(k).into_owned();
            match &info {
                None => out
                    .problems
                    .push(format!("partition {key_text} is missing")),
                Some(ki) => match ki.partition {
                    None => out.problems.push(format!(
                        "{key_text} is not a partition (no Partition field)"
                    )),
                    Some((pi, pp, ps)) => {
                        if pi != index || pp != routing.partitions || ps != routing.routing_seed {
                            out.problems.push(format!(
                                "{key_text} says it is partition {pi} of {pp} with seed {ps}; \
                                 the descriptor says {index} of {} with seed {}",
                                routing.partitions, routing.routing_seed
                            ));
                        }
                    }
                },
            }
            out.partitions.push(PartitionInfo {
                index,
                key: k.clone(),
                slot,
                master: map.master_of(slot)?,
                info,
            });
        }
        Ok(out)
    }

    /// Deletes the filter: the descriptor first (a descriptor implies its partitions), then the
    /// partitions. Answers how many keys were deleted.
    pub fn drop(&self, conn: &mut Connection) -> Result<u64> {
        let cmds: Vec<Cmd> = self
            .keys()
            .iter()
            .map(|k| {
                let mut c = redis::cmd("DEL");
                c.arg(k.as_slice());
                c
            })
            .collect();
        let first = self.send_raw(conn, &cmds[..1], Duration::from_secs(30))?;
        let rest = self.send_raw(conn, &cmds[1..], Duration::from_secs(30))?;
        Ok(first.iter().chain(&rest).filter_map(as_u64).sum())
    }
}

enum WaitFailure {
    Transient(String),
    Fatal(Error),
}

/// `WAIT replicas timeout` once on the master of each slot's master.
fn wait_for_replicas(
    conn: &mut Connection,
    (replicas, timeout): (u32, Duration),
    slots: &[u16],
) -> std::result::Result<(), WaitFailure> {
    let masters = conn
        .masters()
        .map_err(|e| WaitFailure::Transient(e.to_string()))?;
    let mut done: Vec<&str> = Vec::new();
    for &slot in slots {
        let addr = masters
            .iter()
            .find(|m| m.owns(slot))
            .map(|m| m.addr.as_str())
            .unwrap_or("");
        if done.contains(&addr) {
            continue;
        }
        done.push(addr);
        let mut cmd = redis::cmd("WAIT");
        cmd.arg(replicas).arg(timeout.as_millis() as u64);
        match conn.to_slot(&cmd, slot) {
            Ok(v) => match as_u64(&v) {
                Some(n) if n >= u64::from(replicas) => {}
                Some(n) => {
                    return Err(WaitFailure::Transient(format!(
                        "WAIT {replicas}: {n} replicas of {addr} acknowledged"
                    )))
                }
                None => match v {
                    Value::ServerError(e) => {
                        return Err(WaitFailure::Fatal(explain(server_error_text(&e))))
                    }
                    other => {
                        return Err(WaitFailure::Fatal(Error::Protocol(format!(
                            "WAIT answered {other:?}"
                        ))))
                    }
                },
            },
            Err(e) if is_transient(&e) => return Err(WaitFailure::Transient(server_text(&e))),
            Err(e) => return Err(WaitFailure::Fatal(to_error(&e))),
        }
    }
    Ok(())
}

fn to_error(e: &redis::RedisError) -> Error {
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
