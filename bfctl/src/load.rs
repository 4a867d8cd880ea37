//! `bfctl load NAME [FILE]`: adds every line to the filter, plain or partitioned, on a single
//! server or a cluster. A round trip carries `--pipeline` commands of up to `--batch` items;
//! on a partitioned filter the items are grouped by partition and each node gets its own
//! pipeline. A round trip whose reply is lost (a failover, a reshard, a dropped connection) is
//! sent again — adding an item twice is harmless — and `--wait R` has every master confirm R
//! replicas hold the round trip's items before the next one.
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

use crate::input::{LineBlocks, Round};
use crate::reserve::Shape;
use crate::{bar, rate};

#[derive(Args, Debug)]
pub struct LoadArgs {
    /// Filter name.
    pub key: String,
    /// File with one item per line; `-` or nothing reads stdin.
    pub file: Option<PathBuf>,
    /// Items per BF.MADD (BF.INSERT on a partition).
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

/// What to do when the filter does not exist and no --capacity was given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Missing {
    /// With no reserve option given, let BF.MADD create it with the server's defaults
    /// (`bf.initial-size`, `bf.error-rate`); options without --capacity are refused.
    ServerDefaults,
    /// Refuse: the caller must size it.
    RequireCapacity,
}

impl ReserveIfMissing {
    pub fn given(&self) -> bool {
        self.capacity.is_some() || self.error.is_some() || self.shape.given()
    }

    /// The filter at `name`: the existing one, else one reserved from these options, else
    /// what `missing` says.
    pub fn open(&self, conn: &mut Connection, name: &str, missing: Missing) -> Result<Filter> {
        if let Some(f) = Filter::discover(conn, name.as_bytes())? {
            return Ok(f);
        }
        // Shape options without a capacity would reserve a filter for an arbitrary number of
        // items: refuse, as for a missing filter that must be sized.
        let capacity = match (self.capacity, missing) {
            (Some(c), _) => c,
            (None, _) if self.shape.partitions.is_some() => {
                return Err(anyhow!(
                    "{name} does not exist: a partitioned filter needs --capacity"
                ))
            }
            (None, Missing::ServerDefaults) if !self.given() => {
                return Ok(Filter::plain(name.as_bytes()))
            }
            (None, _) => {
                return Err(anyhow!(
                    "{name} does not exist: give --capacity (and --error, default 0.01) to \
                     reserve it, or create it first with `bfctl reserve`"
                ))
            }
        };
        let opts = ReserveOptions {
            error_rate: self.error.unwrap_or(0.01),
            capacity,
            growth: self.shape.growth(),
            partitions: self.shape.partitions,
        };
        match Filter::reserve(conn, name.as_bytes(), &opts) {
            Ok(f) => Ok(f),
            // Somebody else created it in between: add to theirs.
            Err(Error::Server(t)) if t.contains("item exists") => {
                Filter::discover(conn, name.as_bytes())?
                    .ok_or_else(|| anyhow!("{name} vanished right after it was created"))
            }
            Err(e) => Err(anyhow::Error::new(e).context(format!("BF.RESERVE {name}"))),
        }
    }
}

pub fn run(url: &str, args: &LoadArgs, show: bool) -> Result<()> {
    let mut conn = Client::open(url)?.connect()?;
    let filter = args
        .reserve
        .open(&mut conn, &args.key, Missing::ServerDefaults)?;
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
    let mut lines = Round::default();
    let mut outcome = Ok(());
    while lines.fill(&mut input, round, false).context("read input")? > 0 {
        read_bytes += lines.input_bytes();
        let items = lines.items();
        match filter.add(&mut conn, &items, &opts) {
            Ok(answers) => {
                let n = answers.iter().filter(|&&a| a).count() as u64;
                new += n;
                present += answers.len() as u64 - n;
            }
            Err(e) => {
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
