//! `bfctl dedup NAME [FILE]`: copies the input to stdout, dropping the lines the filter has
//! already seen and adding the new ones, in order.
//!
//! On a single server and a plain filter the lines go out as `BF.INSERT NAME NOCREATE ITEMS …`
//! commands packed straight from the input block (no allocation per line), several in flight,
//! so the server adds one batch while bfctl reads the answers of the one before and packs the
//! next: the two work on two cores at once. A partitioned filter, or a cluster, goes through
//! [`Filter::add`] a round of `--batch` × `--pipeline` lines at a time. No add ever creates the
//! filter and no command whose reply was lost is sent again (its lines' answers would be
//! lost), so a line is printed at most once: a filter that vanishes mid-run, or a lost
//! connection, stops the run.

use std::collections::VecDeque;
use std::io::{self, BufWriter, Write};
use std::path::PathBuf;

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use redis::Value;
use rustbloom_client::error::{explain, server_error_text, server_text};
use rustbloom_client::pack::{bulk, decimal};
use rustbloom_client::{Client, Error, Filter, SingleConnection, WriteOptions};

use crate::count::count;
use crate::input::{Line, LineBlocks};
use crate::load::{needs_capacity, vanished, ReserveIfMissing, BULK_RETRY_FOR};

/// Copy the input to stdout, dropping lines the filter has already seen (and adding the new ones).
///
/// The output is exactly the lines not seen before, in input order (a line repeated within the
/// input is printed once), byte for byte: each with its own end (LF or CRLF), and the last one
/// without an end if the input had none. A line's item is the line without its end, so
/// "a\r\n" and "a\n" are the same item (a \r not followed by \n is part of the item).
/// A filter that does not exist yet is reserved first from --capacity, which is then required
/// (with --error, default 0.01, and the shape options); nothing is ever created with a default
/// size, and every add is BF.INSERT … NOCREATE: a filter that vanishes mid-run (DEL, expiry, a
/// restart without persistence, a failover), or a lost connection, stops the run with exit
/// code 1 and the count of lines answered, so no line is ever printed twice. A line is
/// answered as soon as no more input is waiting, so `tail -f log | bfctl dedup seen` prints
/// new lines as they come.
#[derive(Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct DedupArgs {
    /// Filter name.
    pub name: String,
    /// File with one item per line; `-` or nothing reads stdin.
    pub file: Option<PathBuf>,
    /// Most lines per BF.INSERT.
    #[arg(long, default_value_t = 1000, value_parser = count::<u64>(1, 1_000_000))]
    pub batch: u64,
    /// Commands in flight at once.
    #[arg(long, default_value_t = 8, value_parser = count::<u64>(1, 1024))]
    pub pipeline: u64,
    #[command(flatten)]
    pub reserve: ReserveIfMissing,
}

/// Lines answered by the server so far, and those of them printed.
#[derive(Default)]
struct Tally {
    answered: u64,
    printed: u64,
}

pub fn run(url: &str, args: &DedupArgs) -> Result<()> {
    let mut conn = Client::open(url)?.connect()?;
    let filter = args
        .reserve
        .open(&mut conn, &args.name)?
        .ok_or_else(|| needs_capacity(&args.name))?;
    let mut input = LineBlocks::open(args.file.as_deref())?;
    let mut out = BufWriter::with_capacity(1 << 20, io::stdout().lock());
    let batch = usize::try_from(args.batch).unwrap_or(usize::MAX);
    let depth = usize::try_from(args.pipeline).unwrap_or(usize::MAX);
    let mut tally = Tally::default();
    let outcome = match (filter.partitioning(), conn.single()) {
        (None, Some(single)) => streamed(
            single,
            filter.name(),
            &mut input,
            &mut out,
            batch,
            depth,
            &mut tally,
        ),
        _ => in_rounds(
            &mut conn, &filter, &mut input, &mut out, batch, depth, &mut tally,
        ),
    };
    // What was printed stays printed, whatever stopped the run.
    let flushed = out.flush().context("write stdout");
    outcome.map_err(|e| stopped(e, &args.name, &tally))?;
    flushed
}

/// A stopped run's error with the filter's name and how far it got.
fn stopped(e: anyhow::Error, name: &str, tally: &Tally) -> anyhow::Error {
    let counts = format!(
        "{} lines answered, {} printed",
        tally.answered, tally.printed
    );
    match e
        .downcast_ref::<Error>()
        .and_then(|ce| vanished(ce, tally.answered, "lines"))
    {
        Some(gone) => anyhow!("{gone} ({counts})"),
        None => e.context(format!("dedup of {name} stopped after {counts}")),
    }
}

/// Room kept before a packed command for its `*N\r\n` header, written once N is known.
const HEAD_ROOM: usize = 24;

/// The line ends a line can have, as stored per packed line.
const ENDS: [&[u8]; 3] = [b"", b"\n", b"\r\n"];

/// One `BF.INSERT key NOCREATE ITEMS …` packed in RESP, and where each line sits in it.
struct Packed {
    buf: Vec<u8>,
    /// Start and end of every line's item in `buf`, and its end (an index into [`ENDS`]).
    lines: Vec<(usize, usize, u8)>,
    /// Where the header starts once [`Packed::seal`] wrote it.
    head: usize,
}

impl Packed {
    fn new() -> Packed {
        Packed {
            buf: Vec::new(),
            lines: Vec::new(),
            head: 0,
        }
    }

    /// Starts a command after `prefix` (the command's name, key and flags, packed once).
    fn start(&mut self, prefix: &[u8]) {
        self.buf.clear();
        self.lines.clear();
        self.buf.resize(HEAD_ROOM, 0);
        self.buf.extend_from_slice(prefix);
    }

    fn push(&mut self, line: Line<'_>) {
        let at = bulk(&mut self.buf, line.item);
        let end = match line.end {
            b"\r\n" => 2,
            b"\n" => 1,
            _ => 0,
        };
        self.lines.push((at, at + line.item.len(), end));
    }

    /// Writes the header in front; the command is then `buf[head..]`.
    fn seal(&mut self) {
        let mut head = [0u8; HEAD_ROOM];
        let mut n = decimal(&mut head[1..], self.lines.len() as u64 + PREFIX_ARGS) + 1;
        head[0] = b'*';
        head[n..n + 2].copy_from_slice(b"\r\n");
        n += 2;
        self.head = HEAD_ROOM - n;
        self.buf[self.head..HEAD_ROOM].copy_from_slice(&head[..n]);
    }

    fn command(&self) -> &[u8] {
        &self.buf[self.head..]
    }

    /// Writes line `i` as it was read: its item and its end.
    fn write_line(&self, i: usize, out: &mut impl Write) -> io::Result<()> {
        let Some(&(from, to, end)) = self.lines.get(i) else {
            return Ok(());
        };
        out.write_all(&self.buf[from..to])?;
        out.write_all(ENDS[usize::from(end)])
    }
}

/// Arguments before the items: BF.INSERT, the key, NOCREATE, ITEMS.
const PREFIX_ARGS: u64 = 4;

/// `BF.INSERT key NOCREATE ITEMS` packed in RESP (without the `*N` header).
fn insert_prefix(key: &[u8]) -> Vec<u8> {
    let mut prefix = Vec::with_capacity(key.len() + 64);
    bulk(&mut prefix, b"BF.INSERT");
    bulk(&mut prefix, key);
    bulk(&mut prefix, b"NOCREATE");
    bulk(&mut prefix, b"ITEMS");
    prefix
}

/// The single-server path: up to `depth` packed BF.INSERTs in flight; the oldest is answered
/// (its new lines printed) before another is sent once `depth` are out, and all of them before
/// bfctl waits for more input.
fn streamed(
    conn: &mut SingleConnection,
    key: &[u8],
    input: &mut LineBlocks,
    out: &mut impl Write,
    batch: usize,
    depth: usize,
    tally: &mut Tally,
) -> Result<()> {
    let prefix = insert_prefix(key);
    let mut in_flight: VecDeque<Packed> = VecDeque::with_capacity(depth);
    let mut spare: Vec<Packed> = Vec::with_capacity(depth + 1);
    let mut packing = Packed::new();
    packing.start(&prefix);
    loop {
        // Nothing more to read for now (or ever): everything packed is sent and answered
        // before bfctl waits.
        let waiting = input.done() || !input.ready();
        if !packing.lines.is_empty() && (packing.lines.len() >= batch || waiting) {
            packing.seal();
            conn.send_packed(packing.command())
                .map_err(|e| anyhow!("sending BF.INSERT: {}", server_text(&e)))?;
            let next = spare.pop().unwrap_or_else(Packed::new);
            in_flight.push_back(std::mem::replace(&mut packing, next));
            packing.start(&prefix);
            if in_flight.len() > depth {
                if let Some(oldest) = in_flight.pop_front() {
                    answer(conn, key, &oldest, out, tally)?;
                    spare.push(oldest);
                }
            }
        }
        if waiting && !in_flight.is_empty() {
            while let Some(oldest) = in_flight.pop_front() {
                answer(conn, key, &oldest, out, tally)?;
                spare.push(oldest);
            }
            out.flush().context("write stdout")?;
        }
        if input.done() && packing.lines.is_empty() && in_flight.is_empty() {
            return Ok(());
        }
        let room = batch - packing.lines.len();
        input
            .take(room, |line| packing.push(line))
            .context("read input")?;
    }
}

/// Reads the reply to `sent` and prints its lines that were new.
fn answer(
    conn: &mut SingleConnection,
    key: &[u8],
    sent: &Packed,
    out: &mut impl Write,
    tally: &mut Tally,
) -> Result<()> {
    let reply = match conn.recv() {
        Ok(v) => v,
        Err(e) if e.code().is_some() => return Err(explain(server_text(&e)).into()),
        Err(e) => bail!("connection error: {e}"),
    };
    let answers = match reply {
        Value::Array(a) => a,
        Value::ServerError(e) if server_error_text(&e) == "not found" => {
            let name = String::from_utf8_lossy(key).into_owned();
            return Err(Error::Vanished {
                key: name.clone(),
                name,
                index: None,
                acknowledged: 0,
            }
            .into());
        }
        Value::ServerError(e) => return Err(explain(server_error_text(&e)).into()),
        other => bail!("unexpected BF.INSERT reply {other:?}"),
    };
    // BF.INSERT answers item by item, in order: a line repeated within the batch answers 0 the
    // second time, exactly as if it had come in a later command. It stops at a failing item
    // (a full NONSCALING filter), whose error ends the reply.
    for (i, a) in answers.iter().enumerate().take(sent.lines.len()) {
        match a {
            Value::Int(1) | Value::Boolean(true) => {
                sent.write_line(i, out)?;
                tally.printed += 1;
            }
            Value::Int(0) | Value::Boolean(false) => {}
            Value::ServerError(e) => return Err(explain(server_error_text(e)).into()),
            other => bail!("unexpected BF.INSERT answer {other:?}"),
        }
        tally.answered += 1;
    }
    if answers.len() != sent.lines.len() {
        bail!(
            "BF.INSERT answered {} of {} items",
            answers.len(),
            sent.lines.len()
        );
    }
    Ok(())
}

/// Any filter on any server: rounds of up to `batch` × `depth` lines through [`Filter::add`],
/// each answered in full before the next.
fn in_rounds(
    conn: &mut rustbloom_client::Connection,
    filter: &Filter,
    input: &mut LineBlocks,
    out: &mut impl Write,
    batch: usize,
    depth: usize,
    tally: &mut Tally,
) -> Result<()> {
    let opts = WriteOptions {
        batch,
        resend_lost_replies: false,
        retry_for: BULK_RETRY_FOR,
        ..WriteOptions::default()
    };
    loop {
        let lines = input
            .round(batch.saturating_mul(depth), true)
            .context("read input")?;
        if lines.is_empty() {
            return Ok(());
        }
        let items: Vec<&[u8]> = lines.iter().map(|l| l.item).collect();
        let answers = filter.add(conn, &items, &opts)?;
        for (line, new) in lines.iter().zip(answers) {
            if new {
                out.write_all(line.item)?;
                out.write_all(line.end)?;
                tally.printed += 1;
            }
        }
        tally.answered += lines.len() as u64;
        out.flush().context("write stdout")?;
    }
}
