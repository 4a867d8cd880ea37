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
use rustbloom_client::error::quoted;
use rustbloom_client::{Client, Connection, Error, Filter, KeyInfo, ReserveOptions, WriteOptions};

use crate::count::count;
use crate::input::{timestamped, Line, LineBlocks};
use crate::reserve::Shape;
use crate::{bar, rate};

/// How long a load's or a dedup's round trip is resent through a failover before bfctl gives
/// up: longer than the client's 30 s (`rustbloom_client::DEFAULT_RETRY_FOR`, which lookups
/// keep), since a bulk load that gives up must be restarted by hand, while one that waits goes
/// on by itself once a restarted node or a slow election has brought the cluster back.
pub const BULK_RETRY_FOR: Duration = Duration::from_secs(120);

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
///
/// With --timestamped, each line is `unix_ms<TAB>item` (the item is everything after the first
/// tab) and is added to a window filter at that time with BF.ADDAT NAME unix_ms item …. One
/// BF.ADDAT carries one timestamp for all its items, and a window filter holds and forgets
/// items by generation (⌈window/3⌉ ms, BF.INFO's "Generation (ms)"): an item is held from its
/// generation for the window, whatever its millisecond within it. So a batch is cut wherever
/// the generation changes and is sent at its largest timestamp: every item lands in its own
/// generation, exactly as if it were sent alone — never a later one, which would hold it up to
/// a generation past its window, nor an earlier one, which would forget it early. Lines must
/// come in time order at that grain: a line whose time falls in an earlier generation than a
/// line before it is refused with its line number (the filter's time never goes back, so it
/// would be recorded in the later generation), while within a generation the order is free.
/// A filter already written later than the input's times records those items at its last
/// write, as the server does for any BF.ADDAT. The server refuses a time more than one window
/// ahead of its clock, and answers reads as of its clock: items whose window has passed by
/// the time they are loaded answer 0.
#[derive(Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct LoadArgs {
    /// Filter name.
    pub key: String,
    /// File with one item per line; `-` or nothing reads stdin.
    pub file: Option<PathBuf>,
    /// Items per BF.INSERT (BF.ADDAT with --timestamped).
    #[arg(long, default_value_t = 1000, value_parser = count::<u64>(1, u64::MAX))]
    pub batch: u64,
    /// Commands in flight per round trip.
    #[arg(long, default_value_t = 16, value_parser = count::<u64>(1, u64::MAX))]
    pub pipeline: u64,
    /// After each round trip, WAIT until R replicas of every master written to have it;
    /// fewer send the round trip again.
    #[arg(long, value_name = "R", value_parser = count::<u32>(0, u64::MAX))]
    pub wait: Option<u32>,
    /// Lines are `unix_ms<TAB>item`, added at that time to a window filter (see above).
    #[arg(long)]
    pub timestamped: bool,
    /// Build the items into a filter alike on this machine and merge it into the live one
    /// (BF.LOADCHUNK into a temporary key in the same slot, BF.MERGE, DEL), one partition at a
    /// time; see docs/bfctl.md.
    #[arg(long, conflicts_with_all = ["timestamped", "wait"])]
    pub offline: bool,
    /// With --offline: threads building (default: this machine's cores).
    #[arg(long, requires = "offline", value_parser = count::<usize>(0, u64::MAX))]
    pub jobs: Option<usize>,
    #[command(flatten)]
    pub reserve: ReserveIfMissing,
}

/// How to reserve the filter when it does not exist yet.
#[derive(Args, Debug)]
pub struct ReserveIfMissing {
    /// When the filter does not exist yet, reserve it for this many items first (1000000,
    /// 1e6, 2.5e6).
    #[arg(long, value_parser = count::<u64>(0, u64::MAX))]
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
        index,
        key,
        acknowledged,
    } = e
    else {
        return None;
    };
    // The contract's sentence (docs/partitions.md, "One contract"), with bfctl's count: the
    // whole run's, not the last call's.
    let gone = match index {
        Some(i) => format!(
            "partition {i} of {} is missing (key {})",
            quoted(name),
            quoted(key)
        ),
        None => format!("{} is missing", quoted(name)),
    };
    Some(anyhow!(
        "{gone}: restore it or recreate the filter; stopped after {} {what} acknowledged (it was \
         deleted, expired, or lost in a restart or failover; bfctl never recreates a filter \
         mid-run, so those {what} are gone with it unless it comes back from a backup)",
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
            index,
            key,
            acknowledged,
        }) => {
            return Err(Error::Vanished {
                name,
                index,
                key,
                acknowledged: acknowledged + answers.len() as u64,
            })
        }
        Err(e) => return Err(e),
    }
    Ok(answers)
}

/// Where a timestamped load stands: the window filter's generation length, and the latest
/// generation a line was in (with that line's number and time).
struct EventClock {
    generation_ms: u64,
    latest: Option<(u64, u64, u64)>,
}

impl EventClock {
    /// The clock of the window filter `filter` (its first partition's, when partitioned).
    fn open(conn: &mut Connection, filter: &Filter) -> Result<EventClock> {
        let key = match filter.partitioning() {
            Some(p) => p.keys.first().map(Vec::as_slice).unwrap_or(filter.name()),
            None => filter.name(),
        };
        let info = KeyInfo::read(conn, key)
            .with_context(|| format!("BF.INFO {}", String::from_utf8_lossy(key)))?;
        let generation_ms = info.generation_ms.filter(|&g| g > 0).ok_or_else(|| {
            anyhow!(
                "{} is not a window filter: --timestamped sends BF.ADDAT, which applies to \
                 window filters only (reserve one with --window MS)",
                String::from_utf8_lossy(filter.name())
            )
        })?;
        Ok(EventClock {
            generation_ms,
            latest: None,
        })
    }

    /// The generation of line `number` at `ms`, or why it is refused: its generation is
    /// earlier than a line's before it.
    fn place(&mut self, number: u64, ms: u64) -> Result<u64> {
        let generation = ms / self.generation_ms;
        match self.latest {
            Some((latest, line, at)) if generation < latest => Err(anyhow!(
                "line {number}: timestamp {ms} is a generation ({} ms) earlier than line \
                 {line}'s {at}: the filter's time never goes back, so it would be recorded \
                 later than its time and held past its window; sort the input by time",
                self.generation_ms
            )),
            Some((latest, ..)) if generation == latest => Ok(generation),
            _ => {
                self.latest = Some((generation, number, ms));
                Ok(generation)
            }
        }
    }
}

/// Why a round stopped short.
enum Stop {
    /// The server or the connection.
    Client(Error),
    /// A line of the input.
    Input(anyhow::Error),
}

/// Adds the timestamped `lines` (the first is line `first_line` of the input) in runs of one
/// generation, each at its largest timestamp: the answers of the lines sent, and why it
/// stopped before the end, if it did (a bad line stops it after the runs before it).
fn add_timestamped(
    conn: &mut Connection,
    filter: &Filter,
    clock: &mut EventClock,
    lines: &[Line<'_>],
    first_line: u64,
    opts: &WriteOptions,
) -> (Vec<bool>, Option<Stop>) {
    let mut answers = Vec::with_capacity(lines.len());
    let mut run: Vec<&[u8]> = Vec::new();
    // The run's generation, and its latest time with that line's number.
    let mut run_at: Option<(u64, u64, u64)> = None;
    let mut stop = None;
    for (number, line) in (first_line..).zip(lines) {
        let placed = timestamped(line.item)
            .map_err(|why| anyhow!("line {number}: {why}"))
            .and_then(|(ms, item)| Ok((clock.place(number, ms)?, ms, item)));
        let (generation, ms, item) = match placed {
            Ok(p) => p,
            Err(e) => {
                stop = Some(Stop::Input(e));
                break;
            }
        };
        match run_at {
            Some((g, latest, at_line)) if g == generation => {
                run_at = Some(if ms > latest {
                    (g, ms, number)
                } else {
                    (g, latest, at_line)
                });
            }
            Some((_, latest, at_line)) => {
                if let Err(e) = send_run(conn, filter, latest, &run, opts, &mut answers) {
                    return (answers, Some(run_refused(e, latest, at_line)));
                }
                run.clear();
                run_at = Some((generation, ms, number));
            }
            None => run_at = Some((generation, ms, number)),
        }
        run.push(item);
    }
    if let Some((_, latest, at_line)) = run_at {
        if let Err(e) = send_run(conn, filter, latest, &run, opts, &mut answers) {
            return (answers, Some(run_refused(e, latest, at_line)));
        }
    }
    (answers, stop)
}

/// Why a run sent at `at_ms` (line `line`'s time, the run's latest) stopped: a refusal of the
/// server (a time more than one window ahead of its clock) names that line, as the input's
/// own refusals do; any other failure stays the client's.
fn run_refused(e: Error, at_ms: u64, line: u64) -> Stop {
    match e {
        Error::Server(text) => Stop::Input(anyhow!(
            "line {line}: timestamp {at_ms} refused by the server: {text}"
        )),
        e => Stop::Client(e),
    }
}

/// Adds one generation's run of items at `at_ms`, appending their answers.
fn send_run(
    conn: &mut Connection,
    filter: &Filter,
    at_ms: u64,
    run: &[&[u8]],
    opts: &WriteOptions,
    answers: &mut Vec<bool>,
) -> rustbloom_client::Result<()> {
    answers.extend(filter.add_at(conn, at_ms, run, opts)?);
    Ok(())
}

pub fn run(url: &str, args: &LoadArgs, show: bool) -> Result<()> {
    if args.offline {
        return crate::offline::run(url, args);
    }
    let mut conn = Client::open(url)?.connect()?;
    let mut filter = args.reserve.open(&mut conn, &args.key)?;
    let mut clock = match (&filter, args.timestamped) {
        (Some(f), true) => Some(EventClock::open(&mut conn, f)?),
        (None, true) => {
            return Err(anyhow!(
                "{} does not exist: --timestamped adds to a window filter; reserve it first \
                 (--capacity and --window, or `bfctl reserve … --window MS`)",
                args.key
            ))
        }
        (_, false) => None,
    };
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
        on_stall: Some(crate::stall::watcher(&args.key, show.then(|| pb.clone()))),
        retry_for: BULK_RETRY_FOR,
        ..WriteOptions::default()
    };
    let start = Instant::now();
    let (mut new, mut present, mut read_bytes) = (0u64, 0u64, 0u64);
    let mut lines_read = 0u64;
    let mut outcome = Ok(());
    loop {
        let lines = input.round(round, false).context("read input")?;
        if lines.is_empty() {
            break;
        }
        read_bytes += lines.iter().map(|l| l.len() as u64).sum::<u64>();
        let first_line = lines_read + 1;
        lines_read += lines.len() as u64;
        let (answers, stop) = match (&mut clock, &filter) {
            (Some(clock), Some(f)) => {
                add_timestamped(&mut conn, f, clock, &lines, first_line, &opts)
            }
            _ => {
                let items: Vec<&[u8]> = lines.iter().map(|l| l.item).collect();
                match add_round(&mut conn, &mut filter, &args.key, &items, &opts) {
                    Ok(answers) => (answers, None),
                    Err(e) => (Vec::new(), Some(Stop::Client(e))),
                }
            }
        };
        let n = answers.iter().filter(|&&a| a).count() as u64;
        new += n;
        present += answers.len() as u64 - n;
        match stop {
            None => {}
            Some(Stop::Client(e)) => {
                pb.finish_and_clear();
                if let Some(gone) = vanished(&e, new + present, "items") {
                    return Err(gone);
                }
                outcome = Err(anyhow::Error::new(e));
                break;
            }
            Some(Stop::Input(e)) => {
                outcome = Err(e);
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
