//! `bfctl`: bulk work on rustbloom filters (load, dedup, dump, restore, info, plan, migrate).
//!
//! Every subcommand but `plan` and `migrate` talks to a server given by `--url` (default
//! `redis://127.0.0.1:6379`; `redis+unix:///path/to/sock` works too); `migrate` talks to the two
//! given by `--from` and `--to`.

use std::fs::File;
use std::io::{self, BufReader, BufWriter, IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use redis::{Connection, RedisError, Value};

mod dedup;
mod drop;
mod dumpfile;
mod exists;
mod input;
mod load;
mod migrate;
mod reserve;

use rustbloom_core::encoding::parse_header;

mod window;

#[derive(Parser)]
#[command(
    name = "bfctl",
    version,
    about = "Bulk work on rustbloom (BF.*) filters"
)]
struct Cli {
    /// Server to talk to: redis://[user:password@]host:port[/db] or redis+unix:///path/to.sock
    #[arg(
        long,
        global = true,
        default_value = "redis://127.0.0.1:6379",
        env = "BFCTL_URL"
    )]
    url: String,
    /// Never draw a progress bar (it is drawn only when stderr is a terminal anyway).
    #[arg(long, short, global = true)]
    quiet: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Create a filter (plain, or partitioned with --partitions) with BF.RESERVE.
    Reserve(reserve::ReserveArgs),
    /// Add every line of FILE (or stdin) to the filter, in pipelined batches (each item to its
    /// partition on a partitioned filter).
    Load(load::LoadArgs),
    /// Print 1 or 0 for every line of FILE (or stdin), in order: whether the filter has it.
    Exists(exists::ExistsArgs),
    /// Delete a filter (every partition of a partitioned one included).
    Drop(drop::DropArgs),
    Dedup(dedup::DedupArgs),
    /// Save a filter to FILE with BF.SCANDUMP (works for filters of any size).
    Dump {
        key: String,
        /// Output file; `-` writes to stdout.
        file: PathBuf,
    },
    /// Recreate a filter from a `bfctl dump` file with BF.LOADCHUNK.
    Restore {
        key: String,
        /// Input file; `-` reads stdin.
        file: PathBuf,
        /// Delete KEY first if it exists.
        #[arg(long)]
        force: bool,
    },
    /// Capacity, items, layers, bytes, bits per item and the estimated false-positive rate.
    Info {
        key: String,
        /// Count the set bits of every layer (reads the whole filter with BF.SCANDUMP) and estimate
        /// the rate from the measured fill instead of from the item counts.
        #[arg(long)]
        scan: bool,
        /// Error rate the filter was reserved with; used only when the server's dump header cannot
        /// be read (rustbloom's own header carries the exact value).
        #[arg(long, default_value_t = 0.01)]
        error: f64,
    },
    /// Bytes, hashes and the false-positive rate table of a filter before you reserve it.
    Plan {
        /// Capacity you would reserve.
        #[arg(long)]
        items: u64,
        /// Error rate you would reserve.
        #[arg(long)]
        error: f64,
        /// Plan a sliding-window filter of this window in ms (BF.RESERVE ... WINDOW ms): ITEMS
        /// is then the capacity per window.
        #[arg(long, value_name = "MS", conflicts_with_all = ["expansion", "nonscaling"])]
        window: Option<u64>,
        /// Expansion (default 2).
        #[arg(long, default_value_t = 2)]
        expansion: u32,
        /// Plan a NONSCALING filter.
        #[arg(long, conflicts_with = "expansion")]
        nonscaling: bool,
    },
    /// Copy Bloom filters from a live RedisBloom or rustbloom server to a rustbloom server.
    ///
    /// Each filter is streamed with BF.SCANDUMP / BF.LOADCHUNK (one chunk in memory at a time,
    /// any size) into a temporary key beside its destination key, checked against the source
    /// (BF.INFO capacity, items, layers and expansion; BF.CARD; BF.MEXISTS of --sample random
    /// probes answered alike), and only then renamed onto the destination key, with the
    /// source's TTL. A source that changes during its copy is copied again (--retries). Nothing
    /// is copied when a destination key already exists, unless --replace. A filter that fails
    /// is reported and left out (its destination key unchanged); the others are still copied,
    /// and the exit code is 1. `--url` is not used: give both servers.
    #[command(verbatim_doc_comment)]
    Migrate {
        /// Source server: redis://[user:password@]host:port[/db] or redis+unix:///path/to.sock
        #[arg(long)]
        from: String,
        /// Destination server (rustbloom), same forms.
        #[arg(long)]
        to: String,
        /// Keys to copy; an argument with a glob character (* ? [ \) is a pattern matched with
        /// SCAN MATCH … TYPE MBbloom--. None: every Bloom filter of the source database.
        #[arg(value_name = "KEY|PATTERN")]
        keys: Vec<String>,
        /// Overwrite destination keys that already exist (each is replaced only once its copy is
        /// complete and checked).
        #[arg(long)]
        replace: bool,
        /// Random probes asked of both copies with BF.MEXISTS; 0 compares BF.INFO and BF.CARD
        /// only.
        #[arg(long, default_value_t = 10000)]
        sample: u64,
        /// Fresh copies of a filter that changed while it was copied, before giving up on it.
        #[arg(long, default_value_t = 3)]
        retries: u32,
    },
}

fn main() {
    // Rust ignores SIGPIPE, so `bfctl plan | head` would panic on the closed pipe; like any
    // Unix filter, bfctl should just stop when its reader goes away.
    // SAFETY: restoring the default disposition of a signal before any thread starts.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    let cli = Cli::parse();
    if let Err(e) = run(cli) {
        eprintln!("bfctl: {e:#}");
        std::process::exit(1);
    }
}

fn run(cli: Cli) -> Result<()> {
    let progress = !cli.quiet && io::stderr().is_terminal();
    match cli.command {
        Command::Plan {
            items,
            error,
            window: Some(window_ms),
            ..
        } => window::plan(items, error, window_ms),
        Command::Plan {
            items,
            error,
            expansion,
            nonscaling,
            window: None,
        } => plan(
            items,
            error,
            if nonscaling { None } else { Some(expansion) },
        ),
        Command::Reserve(args) => reserve::run(&cli.url, &args),
        Command::Load(args) => load::run(&cli.url, &args, progress),
        Command::Exists(args) => exists::run(&cli.url, &args),
        Command::Drop(args) => drop::run(&cli.url, &args),
        Command::Dedup(args) => dedup::run(&cli.url, &args),
        Command::Dump { key, file } => {
            let mut c = connect(&cli.url)?;
            dump(&mut c, &key, &file, progress)
        }
        Command::Restore { key, file, force } => {
            let mut c = connect(&cli.url)?;
            restore(&mut c, &key, &file, force, progress)
        }
        Command::Info { key, scan, error } => {
            let mut c = connect(&cli.url)?;
            info(&mut c, &key, scan, error, progress)
        }
        Command::Migrate {
            from,
            to,
            keys,
            replace,
            sample,
            retries,
        } => migrate::migrate(&migrate::Options {
            from,
            to,
            keys,
            replace,
            sample,
            retries,
            progress,
        }),
    }
}

// ---------------------------------------------------------------------------------------------
// Connection and errors
// ---------------------------------------------------------------------------------------------

fn connect(url: &str) -> Result<Connection> {
    let client = redis::Client::open(url).with_context(|| format!("invalid server URL {url:?}"))?;
    let mut c = client
        .get_connection_with_timeout(Duration::from_secs(5))
        .map_err(|e| anyhow!("cannot connect to {url}: {e} (is redis-server running there?)"))?;
    let _: () = redis::cmd("PING")
        .query(&mut c)
        .map_err(|e| anyhow!("{url} does not answer PING: {}", server_text(&e)))?;
    Ok(c)
}

/// The full text of an error as the server sent it (`ERR ...`, `WRONGTYPE ...`).
fn server_text(e: &RedisError) -> String {
    match (e.code(), e.detail()) {
        (Some(c), Some(d)) => format!("{c} {d}"),
        (Some(c), None) => c.to_string(),
        _ => e.to_string(),
    }
}

fn server_error_text(e: &redis::ServerError) -> String {
    match e.details() {
        Some(d) => format!("{} {}", e.code(), d),
        None => e.code().to_string(),
    }
}

/// Turns a server error text into a message for people: an unknown BF.* command means the module
/// is not loaded.
fn explain(text: String) -> anyhow::Error {
    let lower = text.to_ascii_lowercase();
    if lower.contains("unknown command") && lower.contains("bf.") {
        anyhow!(
            "the rustbloom module is not loaded on this server (it answered: {text}); load it with \
             `loadmodule /path/to/librustbloom.so` in redis.conf or `MODULE LOAD /path/to/librustbloom.so`"
        )
    } else {
        anyhow!("{text}")
    }
}

fn cmd_err(e: RedisError) -> anyhow::Error {
    if e.code().is_some() {
        explain(server_text(&e))
    } else {
        anyhow!("connection error: {e}")
    }
}

/// Runs a command, returning the raw reply; a top-level server error becomes an error.
fn query(c: &mut Connection, cmd: &redis::Cmd) -> Result<Value> {
    use redis::ConnectionLike;
    match c.req_command(cmd) {
        Ok(Value::ServerError(e)) => Err(explain(server_error_text(&e))),
        Ok(v) => Ok(v),
        Err(e) => Err(cmd_err(e)),
    }
}

fn as_int(v: &Value) -> Option<i64> {
    match v {
        Value::Int(i) => Some(*i),
        Value::Boolean(b) => Some(i64::from(*b)),
        Value::BulkString(s) => std::str::from_utf8(s).ok()?.parse().ok(),
        Value::SimpleString(s) => s.parse().ok(),
        _ => None,
    }
}

fn key_exists(c: &mut Connection, key: &str) -> Result<bool> {
    let v = query(c, redis::cmd("EXISTS").arg(key))?;
    Ok(as_int(&v) == Some(1))
}

// ---------------------------------------------------------------------------------------------
// Progress
// ---------------------------------------------------------------------------------------------

fn bar(show: bool, total: Option<u64>, template: &str) -> ProgressBar {
    if !show {
        return ProgressBar::hidden();
    }
    let pb = match total {
        Some(t) => ProgressBar::new(t),
        None => ProgressBar::new_spinner(),
    };
    pb.set_style(
        ProgressStyle::with_template(template)
            .expect("valid template")
            .progress_chars("=> "),
    );
    pb.enable_steady_tick(Duration::from_millis(200));
    pb
}

fn rate(count: u64, elapsed: Duration) -> f64 {
    count as f64 / elapsed.as_secs_f64().max(1e-9)
}

// ---------------------------------------------------------------------------------------------
// dump and restore
// ---------------------------------------------------------------------------------------------

/// One BF.SCANDUMP step: (next iterator, data).
fn scandump(c: &mut Connection, key: &str, it: u64) -> Result<(u64, Vec<u8>)> {
    let reply = query(c, redis::cmd("BF.SCANDUMP").arg(key).arg(it))
        .with_context(|| format!("BF.SCANDUMP {key} {it}"))?;
    match reply {
        Value::Array(v) if v.len() == 2 => {
            let next = as_int(&v[0])
                .and_then(|i| u64::try_from(i).ok())
                .ok_or_else(|| anyhow!("bad BF.SCANDUMP iterator {:?}", v[0]))?;
            let data = match &v[1] {
                Value::BulkString(b) => b.clone(),
                Value::SimpleString(s) => s.clone().into_bytes(),
                Value::Nil => Vec::new(),
                other => bail!("bad BF.SCANDUMP data {other:?}"),
            };
            Ok((next, data))
        }
        other => bail!("unexpected BF.SCANDUMP reply {other:?}"),
    }
}

fn info_size(c: &mut Connection, key: &str) -> Result<u64> {
    let v = query(c, redis::cmd("BF.INFO").arg(key).arg("SIZE"))
        .with_context(|| format!("BF.INFO {key} SIZE"))?;
    match v {
        Value::Array(a) if a.len() == 1 => as_int(&a[0])
            .and_then(|i| u64::try_from(i).ok())
            .ok_or_else(|| anyhow!("bad BF.INFO SIZE reply")),
        other => bail!("unexpected BF.INFO SIZE reply {other:?}"),
    }
}

fn dump(c: &mut Connection, key: &str, file: &Path, show: bool) -> Result<()> {
    let total = info_size(c, key)?;
    let to_stdout = file == Path::new("-");
    // Write to a temporary file beside the target and rename at the end, so a failed dump never
    // leaves a truncated file under the real name.
    let tmp = if to_stdout {
        None
    } else {
        let mut name = file.as_os_str().to_owned();
        name.push(format!(".bfctl-tmp-{}", std::process::id()));
        Some(PathBuf::from(name))
    };
    let sink: Box<dyn Write> = match &tmp {
        None => Box::new(io::stdout().lock()),
        Some(t) => Box::new(File::create(t).with_context(|| format!("create {}", t.display()))?),
    };
    let result = (|| -> Result<(u64, u64)> {
        let mut w = dumpfile::Writer::new(BufWriter::with_capacity(1 << 20, sink), key.as_bytes())?;
        let pb = bar(
            show,
            Some(total),
            "{spinner} [{elapsed_precise}] [{wide_bar}] {bytes}/{total_bytes} {bytes_per_sec} ETA {eta}",
        );
        let mut it = 0;
        let mut chunks = 0u64;
        let mut bytes = 0u64;
        loop {
            let (next, data) = scandump(c, key, it)?;
            if next == 0 {
                break;
            }
            w.record(next, &data)?;
            chunks += 1;
            bytes += data.len() as u64;
            pb.set_position(bytes);
            it = next;
        }
        w.finish()?;
        pb.finish_and_clear();
        Ok((chunks, bytes))
    })();
    match result {
        Ok((chunks, bytes)) => {
            if let Some(t) = &tmp {
                std::fs::rename(t, file)
                    .with_context(|| format!("rename {} to {}", t.display(), file.display()))?;
            }
            eprintln!(
                "{key}: dumped {chunks} chunks, {bytes} bytes to {}",
                file.display()
            );
            Ok(())
        }
        Err(e) => {
            if let Some(t) = &tmp {
                let _ = std::fs::remove_file(t);
            }
            Err(e)
        }
    }
}

fn restore(c: &mut Connection, key: &str, file: &Path, force: bool, show: bool) -> Result<()> {
    let (src, total): (Box<dyn Read>, Option<u64>) = if file == Path::new("-") {
        (Box::new(io::stdin().lock()), None)
    } else {
        let f = File::open(file).with_context(|| format!("open {}", file.display()))?;
        let len = f.metadata().ok().map(|m| m.len());
        (Box::new(f), len)
    };
    let mut r = dumpfile::Reader::new(BufReader::with_capacity(1 << 20, src))
        .with_context(|| format!("read {}", file.display()))?;
    if key_exists(c, key)? {
        if force {
            query(c, redis::cmd("DEL").arg(key))?;
        } else {
            bail!("key {key} already exists: delete it first or pass --force");
        }
    }
    let pb = bar(
        show,
        total,
        "{spinner} [{elapsed_precise}] [{wide_bar}] {bytes}/{total_bytes} {bytes_per_sec} ETA {eta}",
    );
    let mut chunks = 0u64;
    let mut bytes = 0u64;
    let result = (|| -> Result<()> {
        while let Some((it, data)) = r
            .next_record()
            .with_context(|| format!("read {}", file.display()))?
        {
            query(
                c,
                redis::cmd("BF.LOADCHUNK").arg(key).arg(it).arg(&data[..]),
            )
            .with_context(|| format!("BF.LOADCHUNK {key} {it} (chunk {})", chunks + 1))?;
            chunks += 1;
            bytes += data.len() as u64;
            pb.set_position(r.position());
        }
        Ok(())
    })();
    pb.finish_and_clear();
    if let Err(e) = result {
        // A half-loaded filter answers nothing but errors: remove what we started.
        if chunks > 0 {
            let _ = query(c, redis::cmd("DEL").arg(key));
        }
        return Err(e);
    }
    eprintln!(
        "{key}: restored {chunks} chunks, {bytes} bytes from {} (dumped from key {})",
        file.display(),
        String::from_utf8_lossy(&r.key)
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// info
// ---------------------------------------------------------------------------------------------

struct BfInfo {
    capacity: u64,
    size: u64,
    filters: u64,
    items: u64,
    expansion: Option<u64>,
}

/// BF.INFO's field/value pairs, from a RESP2 array or a RESP3 map.
fn info_pairs(reply: Value) -> Result<Vec<(Value, Value)>> {
    match reply {
        Value::Array(a) => {
            let mut out = Vec::new();
            let mut it = a.into_iter();
            while let (Some(k), Some(v)) = (it.next(), it.next()) {
                out.push((k, v));
            }
            Ok(out)
        }
        Value::Map(m) => Ok(m),
        other => bail!("unexpected BF.INFO reply {other:?}"),
    }
}

fn bf_info(c: &mut Connection, key: &str) -> Result<BfInfo> {
    let v = query(c, redis::cmd("BF.INFO").arg(key)).with_context(|| format!("BF.INFO {key}"))?;
    let pairs = info_pairs(v)?;
    let mut info = BfInfo {
        capacity: 0,
        size: 0,
        filters: 0,
        items: 0,
        expansion: None,
    };
    for (k, v) in pairs {
        let name = match k {
            Value::BulkString(b) => String::from_utf8_lossy(&b).into_owned(),
            Value::SimpleString(s) => s,
            _ => continue,
        };
        let n = as_int(&v).and_then(|i| u64::try_from(i).ok());
        match name.as_str() {
            "Capacity" => info.capacity = n.unwrap_or(0),
            "Size" => info.size = n.unwrap_or(0),
            "Number of filters" => info.filters = n.unwrap_or(0),
            "Number of items inserted" => info.items = n.unwrap_or(0),
            "Expansion rate" => info.expansion = n,
            _ => {}
        }
    }
    Ok(info)
}

/// One layer as `info` shows it.
struct LayerView {
    capacity: u64,
    error_rate: f64,
    items: u64,
    bits: u64,
    hashes: u32,
    layout: rustbloom_core::sizing::Layout,
    /// Set bits, when counted (--scan).
    ones: Option<u64>,
}

impl LayerView {
    fn estimated_rate(&self) -> f64 {
        let k = i32::try_from(self.hashes).unwrap_or(i32::MAX);
        match self.ones {
            Some(ones) => (ones as f64 / self.bits as f64).powi(k),
            None => rustbloom_core::sizing::expected_error_rate(
                rustbloom_core::LayerSize {
                    bits: self.bits,
                    num_hashes: self.hashes,
                    layout: self.layout,
                },
                self.items,
            ),
        }
    }
}

fn info(c: &mut Connection, key: &str, scan: bool, error: f64, show: bool) -> Result<()> {
    let bi = bf_info(c, key)?;
    // rustbloom's BF.SCANDUMP header (iterator 0) describes every layer exactly: error rate,
    // capacity, items, bits and hashes. Only when it cannot be read (another module) do we rebuild
    // the layers from BF.INFO and the growth rule, with the error rate from --error.
    let (header_bytes, source) = match scandump(c, key, 0) {
        Ok((_, h)) => (Some(h), None),
        Err(e) => (None, Some(e)),
    };
    // A window filter is a ring of slots, not layers: its own report.
    if let Some(h) = header_bytes.as_deref().and_then(window::header) {
        return window::info(c, key, &bi, &h, scan, show);
    }
    let header = header_bytes.as_deref().and_then(|h| parse_header(h).ok());
    let (mut layers, error_rate, exact) = match &header {
        Some(h) => {
            let layers = h
                .layers
                .iter()
                .map(|l| LayerView {
                    capacity: l.capacity,
                    error_rate: l.error_rate,
                    items: l.items,
                    bits: l.size.bits,
                    hashes: l.size.num_hashes,
                    layout: l.size.layout,
                    ones: None,
                })
                .collect::<Vec<_>>();
            (layers, h.params.error_rate, true)
        }
        None => {
            if let Some(e) = &source {
                if e.to_string().contains("being loaded") {
                    bail!("{key} is being loaded by BF.LOADCHUNK; try again when the load is done");
                }
            }
            (layers_from_info(&bi, error)?, error, false)
        }
    };
    if scan {
        if !exact {
            bail!("--scan needs rustbloom's dump format, which this server does not answer");
        }
        count_ones(c, key, &mut layers, show)?;
    }
    let bits: u64 = layers.iter().map(|l| l.bits).sum();
    let fpr = 1.0
        - layers
            .iter()
            .map(|l| 1.0 - l.estimated_rate())
            .product::<f64>();
    println!("key:               {key}");
    println!("capacity:          {}", bi.capacity);
    println!("items:             {}", bi.items);
    println!(
        "layers:            {}{}",
        bi.filters,
        match bi.expansion {
            Some(x) => format!(" (expansion {x})"),
            None => " (non-scaling)".to_string(),
        }
    );
    println!("bytes:             {} ({} of them bits)", bi.size, bits / 8);
    if bi.items > 0 {
        println!("bits per item:     {:.2}", bits as f64 / bi.items as f64);
    } else {
        println!("bits per item:     - (empty)");
    }
    println!(
        "error rate:        {error_rate}{}",
        if exact {
            " (from the filter's header)"
        } else {
            " (assumed, --error; the server's dump header could not be read)"
        }
    );
    println!(
        "estimated FPR now: {:.3e} = {:.4}% ({})",
        fpr,
        fpr * 100.0,
        if scan {
            "from the measured fill of each layer"
        } else {
            "from the items in each layer"
        }
    );
    println!("layer  capacity     items        bits          hashes  error-rate  fill     est-FPR");
    for (i, l) in layers.iter().enumerate() {
        let fill = match l.ones {
            Some(o) => o as f64 / l.bits as f64,
            None => 1.0 - (-(f64::from(l.hashes)) * l.items as f64 / l.bits as f64).exp(),
        };
        println!(
            "{i:<6} {:<12} {:<12} {:<13} {:<7} {:<11.3e} {:<8.4} {:.3e}",
            l.capacity,
            l.items,
            l.bits,
            l.hashes,
            l.error_rate,
            fill,
            l.estimated_rate()
        );
    }
    Ok(())
}

/// Layers rebuilt from BF.INFO alone: capacity c of layer 0 from the summed capacity, every layer
/// but the newest full (the module pushes a layer only when the newest is full), the newest holds
/// the rest.
fn layers_from_info(bi: &BfInfo, error: f64) -> Result<Vec<LayerView>> {
    use rustbloom_core::{FilterParams, Growth};
    if bi.filters == 0 {
        bail!("BF.INFO reports no layers");
    }
    let growth = match bi.expansion {
        Some(x) => Growth::Scaling {
            expansion: u32::try_from(x).context("expansion")?,
        },
        None => Growth::NonScaling,
    };
    let x = bi.expansion.unwrap_or(1) as u128;
    let sum: u128 = (0..bi.filters).map(|i| x.pow(i as u32)).sum();
    let c0 = (bi.capacity as u128 / sum.max(1)) as u64;
    let params = FilterParams {
        capacity: c0.max(1),
        error_rate: error,
        growth,
        seed: 0,
    };
    let mut left = bi.items;
    let mut out = Vec::new();
    for i in 0..bi.filters as usize {
        let cap = params
            .layer_capacity(i)
            .context("layer capacity overflows")?;
        let size = params
            .layer_size(i)
            .map_err(|e| anyhow!("cannot size layer {i}: {e:?}"))?;
        let newest = i + 1 == bi.filters as usize;
        let items = if newest { left } else { cap.min(left) };
        left -= items;
        out.push(LayerView {
            capacity: cap,
            error_rate: params.layer_error_rate(i),
            items,
            bits: size.bits,
            hashes: size.num_hashes,
            layout: size.layout,
            ones: None,
        });
    }
    Ok(out)
}

/// Reads the whole filter at `key` (`total` bytes of bits) with BF.SCANDUMP, calling `each` with
/// every data chunk's byte offset and bits, in order, behind a progress bar. A data chunk is the
/// bits followed by an 8-byte checksum; iterator − 1 after the chunk is the byte offset just past
/// it.
fn scan_bits(
    c: &mut Connection,
    key: &str,
    total: u64,
    show: bool,
    mut each: impl FnMut(u64, &[u8]) -> Result<()>,
) -> Result<()> {
    let pb = bar(
        show,
        Some(total),
        "{spinner} scanning [{wide_bar}] {bytes}/{total_bytes} ETA {eta}",
    );
    let (mut it, _) = scandump(c, key, 0)?;
    loop {
        let (next, data) = scandump(c, key, it)?;
        if next == 0 {
            break;
        }
        let bits = data
            .len()
            .checked_sub(8)
            .ok_or_else(|| anyhow!("BF.SCANDUMP chunk too short"))?;
        let start = it - 1;
        if next - 1 - start != bits as u64 || next - 1 > total {
            bail!("BF.SCANDUMP chunk of {bits} bytes does not match its iterators {it}..{next}");
        }
        each(start, &data[..bits])?;
        pb.set_position(next - 1);
        it = next;
    }
    pb.finish_and_clear();
    Ok(())
}

/// Counts the set bits of every layer (layers concatenated, oldest first) by reading the whole
/// filter ([`scan_bits`]).
fn count_ones(c: &mut Connection, key: &str, layers: &mut [LayerView], show: bool) -> Result<()> {
    let ends: Vec<u64> = layers
        .iter()
        .scan(0u64, |acc, l| {
            *acc += l.bits / 8;
            Some(*acc)
        })
        .collect();
    let total = *ends.last().unwrap_or(&0);
    let mut ones = vec![0u64; layers.len()];
    scan_bits(c, key, total, show, |start, bits| {
        let mut off = start;
        let mut layer = ends.partition_point(|&e| e <= off);
        let mut rest = bits;
        while !rest.is_empty() {
            let layer_end = *ends
                .get(layer)
                .ok_or_else(|| anyhow!("chunk past the end"))?;
            let take = rest.len().min((layer_end - off) as usize);
            ones[layer] += rest[..take]
                .iter()
                .map(|b| u64::from(b.count_ones()))
                .sum::<u64>();
            rest = &rest[take..];
            off += take as u64;
            layer += 1;
        }
        Ok(())
    })?;
    for (l, o) in layers.iter_mut().zip(ones) {
        l.ones = Some(o);
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// plan
// ---------------------------------------------------------------------------------------------

fn plan(items: u64, error: f64, expansion: Option<u32>) -> Result<()> {
    use rustbloom_core::sizing::expected_error_rate;
    use rustbloom_core::{FilterParams, Growth};
    if !(error > 0.0 && error < 1.0) {
        bail!("--error must be strictly between 0 and 1");
    }
    if !(1..=1 << 30).contains(&items) {
        bail!("--items must be in [1, 1073741824] (BF.RESERVE's capacity range); a scaling filter grows past it");
    }
    if let Some(x) = expansion {
        if !(1..=32768).contains(&x) {
            bail!("--expansion must be in [1, 32768]");
        }
    }
    let params = FilterParams {
        capacity: items,
        error_rate: error,
        growth: match expansion {
            Some(x) => Growth::Scaling { expansion: x },
            None => Growth::NonScaling,
        },
        seed: 0,
    };
    let l0 = params
        .layer_size(0)
        .map_err(|e| anyhow!("cannot size this filter: {e:?}"))?;
    println!(
        "BF.RESERVE key {error} {items}{}",
        match expansion {
            Some(2) => String::new(),
            Some(x) => format!(" EXPANSION {x}"),
            None => " NONSCALING".to_string(),
        }
    );
    println!(
        "first layer:   {} bytes ({}), {} hashes, {:.2} bits per item, sized for {:.3e}",
        l0.bytes(),
        human_bytes(l0.bytes()),
        l0.num_hashes,
        l0.bits as f64 / items as f64,
        params.layer_error_rate(0)
    );
    println!();
    println!("items          layers  bytes           bits/item  expected FPR");
    // Rows: fractions of the first layer, then (for a scaling filter) every layer boundary up to
    // 6 layers.
    let mut rows: Vec<u64> = [0.1, 0.25, 0.5, 0.75, 1.0]
        .iter()
        .map(|f| ((items as f64 * f).round() as u64).max(1))
        .collect();
    rows.dedup();
    let mut boundaries = vec![items];
    if expansion.is_some() {
        let mut total = items;
        for i in 1..6usize {
            let Some(cap) = params.layer_capacity(i) else {
                break;
            };
            let Some(t) = total.checked_add(cap) else {
                break;
            };
            rows.push(total + cap / 2);
            rows.push(t);
            total = t;
            boundaries.push(t);
        }
    }
    for n in rows {
        // Fill the layers as the module does: each full before the next is pushed.
        let mut left = n;
        let mut bytes = 0u64;
        let mut bits = 0u64;
        let mut pass = 1.0f64;
        let mut layers = 0;
        for i in 0.. {
            let cap = params.layer_capacity(i).context("capacity overflow")?;
            let size = params
                .layer_size(i)
                .map_err(|e| anyhow!("cannot size layer {i}: {e:?}"))?;
            let here = left.min(cap);
            bytes += size.bytes();
            bits += size.bits;
            pass *= 1.0 - expected_error_rate(size, here);
            layers += 1;
            left -= here;
            if left == 0 {
                break;
            }
        }
        println!(
            "{n:<14} {layers:<7} {:<15} {:<10.2} {:.3e}{}",
            bytes,
            bits as f64 / n as f64,
            1.0 - pass,
            if boundaries.contains(&n) {
                "  (layers full)"
            } else {
                ""
            }
        );
    }
    if expansion.is_none() {
        println!(
            "(non-scaling: items past {items} are refused with `ERR non scaling filter is full`)"
        );
    }
    Ok(())
}

fn human_bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    format!("{v:.1} {}", UNITS[u])
}
