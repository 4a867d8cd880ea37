//! `bfctl load NAME [FILE]`: adds every line to the filter, plain or partitioned, on a single
//! server or a cluster. A round trip carries `--pipeline` commands of up to `--batch` items;
//! on a partitioned filter the items are grouped by partition and each node gets its own
//! pipeline. Every add is `BF.INSERT … NOCREATE`, so a filter that vanishes mid-run (DEL, expiry,
//! a restart without persistence, a failover that lost writes) stops the load instead of being
//! recreated empty with the server's defaults. That makes a round trip whose reply is lost (a
//! failover, a reshard, a dropped connection) safe to send again — it can only add to the filter
//! that was there — and `--wait R` has every master confirm R replicas hold the round trip's
//! items before the next one.
//!
//! One thread serves every master: the cluster pipeline writes to all of them before reading
//! any reply, so they work in parallel. A thread and a connection per master was measured
//! (3M items into 16 partitions on 3 masters, 2 cores): the same items/s for 30–40% more
//! bfctl CPU, so it was left out.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use clap::Args;
use rustbloom_client::{Client, Connection, Error, Filter, ReserveOptions, WriteOptions};

use crate::input::LineBlocks;
use crate::reserve::Shape;
use crate::{bar, rate};

/// Add every line of FILE (or stdin) to the filter, in pipelined batches (each item to its
/// partition on a partitioned filter).
///
/// A missing filter is reserved first from --capacity (with --error and the shape options);
/// with none of them given, the first item's add (BF.INSERT NAME ITEMS item) creates it with
/// the server's defaults (its bf.error-rate and bf.initial-capacity). Every other add is
/// BF.INSERT NAME NOCREATE ITEMS …, which never creates: a filter that vanishes during the load
/// (DEL, expiry, a restart without persistence, a failover) stops it with exit code 1 and the
/// number of items acknowledged before, instead of a new empty filter. A round trip whose reply
/// is lost is sent again (it can only add to the filter that is there); its items that the lost
/// attempt had added are then counted as "already present", not "new".
#[derive(Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct LoadArgs {
    /// Filter name.
    pub key: String,
    /// File with one item per line; `-` or nothing reads stdin.
    pub file: Option<PathBuf>,
    /// Items per BF.INSERT.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
    pub batch: u64,
    /// Commands in flight per round trip.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u64).range(1..))]
    pub pipeline: u64,
    /// After each round trip, WAIT until R replicas of every master written to have it;
    /// fewer send the round trip again.
    #[arg(long, value_name = "R")]
    pub wait: Option<u32>,
    #[command(flatten)]
    pub reserve: ReserveIfMissing,
}

/// How to reserve the filter when it does not exist yet.
#[derive(Args, Debug)]
pub struct ReserveIfMissing {
    /// When the filter does not exist yet, reserve it for this many items first.
    #[arg(long)]
    pub capacity: Option<u64>,
    /// Error rate for that reservation (default 0.01).
    #[arg(long)]
    pub error: Option<f64>,
    #[command(flatten)]
    pub shape: Shape,
}

impl ReserveIfMissing {
    pub fn given(&self) -> bool {
        self.capacity.is_some() || self.error.is_some() || self.shape.given()
    }

    /// The filter at `name`: the existing one, else one reserved from these options; `None`
    /// when it does not exist and no option was given.
    pub fn open(&self, conn: &mut Connection, name: &str) -> Result<Option<Filter>> {
        if let Some(f) = Filter::discover(conn, name.as_bytes())? {
            return Ok(Some(f));
        }
        // Shape options without a capacity would reserve a filter for an arbitrary number of
        // items: refuse, as for a missing filter that must be sized.
        let capacity = match self.capacity {
            Some(c) => c,
            None if self.shape.partitions.is_some() => {
                return Err(anyhow!(
                    "{name} does not exist: a partitioned filter needs --capacity"
                ))
            }
            None if !self.given() => return Ok(None),
            None => return Err(needs_capacity(name)),
        };
        let opts = ReserveOptions {
            error_rate: self.error.unwrap_or(0.01),
            capacity,
            growth: self.shape.growth(),
            partitions: self.shape.partitions,
        };
        match Filter::reserve(conn, name.as_bytes(), &opts) {
            Ok(f) => Ok(Some(f)),
            // Somebody else created it in between: add to theirs.
            Err(Error::Server(t)) if t.contains("item exists") => {
                Filter::discover(conn, name.as_bytes())?
                    .map(Some)
                    .ok_or_else(|| anyhow!("{name} vanished right after it was created"))
            }
            Err(e) => Err(anyhow::Error::new(e).context(format!("BF.RESERVE {name}"))),
        }
    }
}

/// The refusal of a missing filter that the options cannot size.
pub fn needs_capacity(name: &str) -> anyhow::Error {
    anyhow!(
        "{name} does not exist: give --capacity (and --error, default 0.01) to reserve it, or \
         create it first with `bfctl reserve`"
    )
}

/// The report of a filter that vanished mid-run: which key, and how many items the server had
/// acknowledged before (`what`: "items" or "lines").
pub fn vanished(e: &Error, earlier: u64, what: &str) -> Option<anyhow::Error> {
    let Error::Vanished {
        name,
        key,
        acknowledged,
    } = e
    else {
        return None;
    };
    let gone = if name == key {
        format!("filter {name} no longer exists")
    } else {
        format!("partition {key} of filter {name} no longer exists")
    };
    Some(anyhow!(
        "{gone} (deleted, expired, or lost in a restart or failover): stopped after {} {what} \
         acknowledged; bfctl never recreates a filter mid-run, so those {what} are gone with it \
         unless it comes back from a backup",
        earlier.saturating_add(*acknowledged)
    ))
}

/// Adds `items`, first creating the plain filter `name` with the server's defaults when
/// `filter` is `None` (the first item's add creates it; the rest never create).
fn add_round(
    conn: &mut Connection,
    filter: &mut Option<Filter>,
    name: &str,
    items: &[&[u8]],
    opts: &WriteOptions,
) -> rustbloom_client::Result<Vec<bool>> {
    let (rest, first) = match (filter.as_ref(), items.split_first()) {
        (None, Some((first, rest))) => {
            let (created, new) = Filter::create_with_defaults(conn, name.as_bytes(), first, opts)?;
            *filter = Some(created);
            (rest, Some(new))
        }
        _ => (items, None),
    };
    let Some(f) = filter.as_ref() else {
        return Ok(Vec::new());
    };
    let mut answers = Vec::with_capacity(items.len());
    answers.extend(first);
    match f.add(conn, rest, opts) {
        Ok(more) => answers.extend(more),
        Err(Error::Vanished {
            name,
            key,
            acknowledged,
        }) => {
            return Err(Error::Vanished {
                name,
                key,
                acknowledged: acknowledged + answers.len() as u64,
            })
        }
        Err(e) => return Err(e),
    }
    Ok(answers)
}

pub fn run(url: &str, args: &LoadArgs, show: bool) -> Result<()> {
    let mut conn = Client::open(url)?.connect()?;
    let mut filter = args.reserve.open(&mut conn, &args.key)?;
    let total = match args.file.as_deref() {
        Some(p) if p != std::path::Path::new("-") => std::fs::metadata(p).ok().map(|m| m.len()),
        _ => None,
    };
    let mut input = LineBlocks::open(args.file.as_deref())?;
    let pb = match total {
        Some(_) => bar(
            show,
            total,
            "{spinner} [{elapsed_precise}] [{wide_bar}] {bytes}/{total_bytes} {msg} ETA {eta}",
        ),
        None => bar(
            show,
            None,
            "{spinner} [{elapsed_precise}] {bytes} read {msg}",
        ),
    };
    let batch = usize::try_from(args.batch).unwrap_or(usize::MAX);
    let round = batch.saturating_mul(usize::try_from(args.pipeline).unwrap_or(usize::MAX));
    let opts = WriteOptions {
        batch,
        wait: args.wait.map(|r| (r, Duration::from_secs(10))),
        ..WriteOptions::default()
    };
    let start = Instant::now();
    let (mut new, mut present, mut read_bytes) = (0u64, 0u64, 0u64);
    let mut outcome = Ok(());
    loop {
        let lines = input.round(round, false).context("read input")?;
        if lines.is_empty() {
            break;
        }
        read_bytes += lines.iter().map(|l| l.len() as u64).sum::<u64>();
        let items: Vec<&[u8]> = lines.iter().map(|l| l.item).collect();
        match add_round(&mut conn, &mut filter, &args.key, &items, &opts) {
            Ok(answers) => {
                let n = answers.iter().filter(|&&a| a).count() as u64;
                new += n;
                present += answers.len() as u64 - n;
            }
            Err(e) => {
                pb.finish_and_clear();
                if let Some(gone) = vanished(&e, new + present, "items") {
                    return Err(gone);
                }
                outcome = Err(anyhow::Error::new(e));
                break;
            }
        }
        pb.set_position(read_bytes);
        pb.set_message(format!(
            "{} items, {:.0} items/s",
            new + present,
            rate(new + present, start.elapsed())
        ));
    }
    pb.finish_and_clear();
    let elapsed = start.elapsed();
    if outcome.is_err() && new + present == 0 {
        return outcome.with_context(|| "load stopped after 0 items".to_string());
    }
    println!(
        "{}: {} items, {new} new, {present} already present ({:.2} s, {:.0} items/s)",
        args.key,
        new + present,
        elapsed.as_secs_f64(),
        rate(new + present, elapsed)
    );
    outcome.with_context(|| format!("load stopped after {} items", new + present))
}
