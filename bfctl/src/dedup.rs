//! `bfctl dedup NAME [FILE]`: copies the input to stdout, dropping the lines the filter has
//! already seen and adding the new ones, in order.
//!
//! On a single server and a plain filter the lines go out as BF.MADD commands packed straight
//! from the input block (no allocation per line), several in flight, so the server adds one
//! batch while bfctl reads the answers of the one before and packs the next: the two work on
//! two cores at once. A partitioned filter, or a cluster, goes through [`Filter::add`] a round
//! of `--batch` × `--pipeline` lines at a time.

use std::collections::VecDeque;
use std::io::{self, BufWriter, Write};
use std::path::PathBuf;

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use redis::Value;
use rustbloom_client::error::{explain, server_error_text, server_text};
use rustbloom_client::{Client, Filter, WriteOptions};

use crate::input::{LineBlocks, Round};
use crate::load::{Missing, ReserveIfMissing};

/// Copy the input to stdout, dropping lines the filter has already seen (and adding the new ones).
///
/// The output is exactly the lines not seen before, in input order (a line repeated within the
/// input is printed once). A filter that does not exist yet is reserved first from --capacity,
/// which is then required (with --error, default 0.01, and the shape options); nothing is ever
/// created with a default size. A line is answered as soon as no more input is waiting, so
/// `tail -f log | bfctl dedup seen` prints new lines as they come.
#[derive(Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct DedupArgs {
    /// Filter name.
    pub name: String,
    /// File with one item per line; `-` or nothing reads stdin.
    pub file: Option<PathBuf>,
    /// Most lines per BF.MADD (BF.INSERT on a partition).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub batch: u64,
    /// Commands in flight at once.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub pipeline: u64,
    #[command(flatten)]
    pub reserve: ReserveIfMissing,
}

pub fn run(url: &str, args: &DedupArgs) -> Result<()> {
    let mut conn = Client::open(url)?.connect()?;
    let filter = args
        .reserve
        .open(&mut conn, &args.name, Missing::RequireCapacity)?;
    let mut input = LineBlocks::open(args.file.as_deref())?;
    let mut out = BufWriter::with_capacity(1 << 20, io::stdout().lock());
    let batch = usize::try_from(args.batch).unwrap_or(usize::MAX);
    let depth = usize::try_from(args.pipeline).unwrap_or(usize::MAX);
    match (filter.partitioning(), conn.single()) {
        (None, Some(single)) => streamed(single, filter.name(), &mut input, &mut out, batch, depth),
        _ => in_rounds(&mut conn, &filter, &mut input, &mut out, batch, depth),
    }?;
    out.flush().context("write stdout")
}

/// Room kept before a packed command for its `*N\r\n` header, written once N is known.
const HEAD_ROOM: usize = 24;

/// One BF.MADD packed in RESP, and where each line sits in it.
struct Packed {
    buf: Vec<u8>,
    /// Start and end of every line in `buf`.
    lines: Vec<(usize, usize)>,
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

    fn start(&mut self, key: &[u8]) {
        self.buf.clear();
        self.lines.clear();
        self.buf.resize(HEAD_ROOM, 0);
        self.buf.extend_from_slice(b"$7\r\nBF.MADD\r\n");
        bulk(&mut self.buf, key);
    }

    fn push(&mut self, line: &[u8]) {
        let at = bulk(&mut self.buf, line);
        self.lines.push((at, at + line.len()));
    }

    /// Writes the header in front; the command is then `buf[head..]`.
    fn seal(&mut self) {
        let mut head = [0u8; HEAD_ROOM];
        let mut n = decimal(&mut head[1..], self.lines.len() as u64 + 2) + 1;
        head[0] = b'*';
        head[n..n + 2].copy_from_slice(b"\r\n");
        n += 2;
        self.head = HEAD_ROOM - n;
        self.buf[self.head..HEAD_ROOM].copy_from_slice(&head[..n]);
    }

    fn command(&self) -> &[u8] {
        &self.buf[self.head..]
    }
}

/// Appends `$len\r\ndata\r\n`; answers where `data` starts.
fn bulk(buf: &mut Vec<u8>, data: &[u8]) -> usize {
    let mut len = [0u8; 20];
    let n = decimal(&mut len, data.len() as u64);
    buf.push(b'$');
    buf.extend_from_slice(&len[..n]);
    buf.extend_from_slice(b"\r\n");
    let at = buf.len();
    buf.extend_from_slice(data);
    buf.extend_from_slice(b"\r\n");
    at
}

/// Writes `v` in decimal at the start of `out` (20 bytes hold any u64); answers its length.
fn decimal(out: &mut [u8], mut v: u64) -> usize {
    let mut digits = [0u8; 20];
    let mut n = 0;
    loop {
        digits[n] = b'0' + (v % 10) as u8;
        n += 1;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    for i in 0..n {
        out[i] = digits[n - 1 - i];
    }
    n
}

/// The single-server path: up to `depth` packed BF.MADDs in flight; the oldest is answered
/// (its new lines printed) before another is sent once `depth` are out, and all of them before
/// bfctl waits for more input.
fn streamed(
    conn: &mut redis::Connection,
    key: &[u8],
    input: &mut LineBlocks,
    out: &mut impl Write,
    batch: usize,
    depth: usize,
) -> Result<()> {
    let mut in_flight: VecDeque<Packed> = VecDeque::with_capacity(depth);
    let mut spare: Vec<Packed> = Vec::with_capacity(depth + 1);
    let mut packing = Packed::new();
    packing.start(key);
    loop {
        // Nothing more to read for now (or ever): everything packed is sent and answered
        // before bfctl waits.
        let waiting = input.done() || !input.ready();
        if !packing.lines.is_empty() && (packing.lines.len() >= batch || waiting) {
            packing.seal();
            conn.send_packed_command(packing.command())
                .map_err(|e| anyhow!("sending BF.MADD: {}", server_text(&e)))?;
            let next = spare.pop().unwrap_or_else(Packed::new);
            in_flight.push_back(std::mem::replace(&mut packing, next));
            packing.start(key);
            if in_flight.len() > depth {
                if let Some(oldest) = in_flight.pop_front() {
                    answer(conn, &oldest, out)?;
                    spare.push(oldest);
                }
            }
        }
        if waiting && !in_flight.is_empty() {
            while let Some(oldest) = in_flight.pop_front() {
                answer(conn, &oldest, out)?;
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
fn answer(conn: &mut redis::Connection, sent: &Packed, out: &mut impl Write) -> Result<()> {
    let reply = match conn.recv_response() {
        Ok(v) => v,
        Err(e) if e.code().is_some() => return Err(explain(server_text(&e)).into()),
        Err(e) => bail!("connection error: {e}"),
    };
    let answers = match reply {
        Value::Array(a) => a,
        Value::ServerError(e) => return Err(explain(server_error_text(&e)).into()),
        other => bail!("unexpected BF.MADD reply {other:?}"),
    };
    // BF.MADD answers item by item, in order: a line repeated within the batch answers 0 the
    // second time, exactly as if it had come in a later command. It stops at a failing item
    // (a full NONSCALING filter), whose error ends the reply.
    for (&(from, to), a) in sent.lines.iter().zip(&answers) {
        match a {
            Value::Int(1) => {
                out.write_all(&sent.buf[from..to])?;
                out.write_all(b"\n")?;
            }
            Value::Int(0) => {}
            Value::ServerError(e) => {
                out.flush().context("write stdout")?;
                return Err(explain(server_error_text(e)).into());
            }
            other => bail!("unexpected BF.MADD answer {other:?}"),
        }
    }
    if answers.len() != sent.lines.len() {
        bail!(
            "BF.MADD answered {} of {} items",
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
) -> Result<()> {
    let opts = WriteOptions {
        batch,
        ..WriteOptions::default()
    };
    let mut round = Round::default();
    while round.fill(input, batch.saturating_mul(depth), true)? > 0 {
        let items = round.items();
        let answers = filter.add(conn, &items, &opts)?;
        for (line, new) in items.iter().zip(answers) {
            if new {
                out.write_all(line)?;
                out.write_all(b"\n")?;
            }
        }
        out.flush().context("write stdout")?;
    }
    Ok(())
}
