//! `bfctl dump NAME FILE` and `bfctl restore NAME FILE`: a filter saved with BF.SCANDUMP and
//! recreated with BF.LOADCHUNK, in the format of [`crate::dumpfile`]. A partitioned filter is
//! saved as its descriptor's BF.RESERVE arguments and every partition's dump; it is restored
//! partition by partition (each to its key under the new name, on whichever master holds it)
//! and then the descriptor, so that a descriptor always has its partitions.

use std::fs::File;
use std::io::{self, BufReader, Read, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;
use indicatif::ProgressBar;
use rustbloom_client::routing::partition_keys;
use rustbloom_client::{scandump, Client, Connection, Filter, FilterInfo, KeyInfo};

use crate::bar;
use crate::dumpfile::{self, Dump, Reader, Writer};
use crate::outfile::write_file;

/// Save a filter to FILE with BF.SCANDUMP (any size; every partition of a partitioned one).
#[derive(Args, Debug)]
pub struct DumpArgs {
    /// Filter name.
    pub name: String,
    /// Output file; `-` writes to stdout.
    pub file: PathBuf,
}

/// Recreate a filter from a `bfctl dump` file with BF.LOADCHUNK (a partitioned one under NAME).
#[derive(Args, Debug)]
pub struct RestoreArgs {
    /// Filter name to restore to.
    pub name: String,
    /// Input file; `-` reads stdin.
    pub file: PathBuf,
    /// Delete the filter (and, for a partitioned dump, the partition keys) first if they exist.
    #[arg(long)]
    pub force: bool,
}

const BAR: &str =
    "{spinner} [{elapsed_precise}] [{wide_bar}] {bytes}/{total_bytes} {bytes_per_sec} ETA {eta}";

pub fn dump(url: &str, args: &DumpArgs, show: bool) -> Result<()> {
    let mut conn = Client::open(url)?.connect()?;
    let Some(filter) = Filter::discover(&mut conn, args.name.as_bytes())? else {
        bail!("{}: not found", args.name);
    };
    let file = args.file.as_path();
    let (chunks, bytes) = write_file(file, |mut sink| {
        write_dump(&mut conn, &filter, &args.name, &mut sink, show)
    })?;
    eprintln!(
        "{}: dumped {chunks} chunks, {bytes} bytes{} to {}",
        args.name,
        match filter.partitioning() {
            Some(p) => format!(" of {} partitions", p.partitions),
            None => String::new(),
        },
        file.display()
    );
    Ok(())
}

/// Writes `filter` (named `name`) to `sink`: a partitioned filter's head first, then every
/// key's dump. Answers the chunks and bytes written.
fn write_dump(
    conn: &mut Connection,
    filter: &Filter,
    name: &str,
    sink: &mut impl Write,
    show: bool,
) -> Result<(u64, u64)> {
    let keys: Vec<Vec<u8>> = match filter.partitioning() {
        None => vec![filter.name().to_vec()],
        Some(p) => {
            let info = filter.info(conn)?;
            if let Some(problem) = info.problems.first() {
                bail!("{name}: {problem}");
            }
            dumpfile::write_partitioned_head(sink, &descriptor_args(&info)?, p.partitions)?;
            p.keys.clone()
        }
    };
    let mut totals = Vec::with_capacity(keys.len());
    for key in &keys {
        totals.push(KeyInfo::read(conn, key)?.size);
    }
    let pb = bar(show, Some(totals.iter().sum()), BAR);
    let (mut chunks, mut bytes) = (0, 0);
    for key in &keys {
        let mut w = Writer::new(&mut *sink, key)?;
        let mut it = 0;
        loop {
            let (next, data) = scandump(conn, key, it)
                .with_context(|| format!("BF.SCANDUMP {} {it}", String::from_utf8_lossy(key)))?;
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
    }
    sink.flush()?;
    pb.finish_and_clear();
    Ok((chunks, bytes))
}

/// The descriptor's BF.RESERVE arguments after its name, from its BF.INFO (docs/partitions.md
/// §4): ε N PARTITIONS P routing_seed, then its growth.
pub fn descriptor_args(info: &FilterInfo) -> Result<Vec<Vec<u8>>> {
    let field = |name: &str| {
        info.fields
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .filter(|v| *v != "(nil)")
    };
    let needed =
        |name: &str| field(name).with_context(|| format!("the descriptor's BF.INFO has no {name}"));
    let mut args: Vec<String> = vec![
        needed("Error rate")?.to_string(),
        needed("Capacity")?.to_string(),
        "PARTITIONS".into(),
        needed("Partitions")?.to_string(),
        needed("Routing seed")?.to_string(),
    ];
    match (field("Window (ms)"), field("Expansion rate")) {
        (Some(ms), _) => args.extend(["WINDOW".to_string(), ms.to_string()]),
        (None, Some(x)) => args.extend(["EXPANSION".to_string(), x.to_string()]),
        (None, None) => args.push("NONSCALING".into()),
    }
    Ok(args.into_iter().map(String::into_bytes).collect())
}

pub fn restore(url: &str, args: &RestoreArgs, show: bool) -> Result<()> {
    let file = args.file.as_path();
    let (src, total): (Box<dyn Read>, Option<u64>) = if file == Path::new("-") {
        (Box::new(io::stdin().lock()), None)
    } else {
        let f = File::open(file).with_context(|| format!("open {}", file.display()))?;
        let len = f.metadata().ok().map(|m| m.len());
        (Box::new(f), len)
    };
    let dump = dumpfile::open(BufReader::with_capacity(1 << 20, src))
        .with_context(|| format!("read {}", file.display()))?;
    let mut conn = Client::open(url)?.connect()?;
    let name = args.name.as_str();
    if let Some(existing) = Filter::discover(&mut conn, name.as_bytes())? {
        if !args.force {
            bail!("{name} already exists: delete it first or pass --force");
        }
        existing.drop(&mut conn)?;
    }
    let pb = bar(show, total, BAR);
    let mut loaded = Loaded::default();
    match dump {
        Dump::Plain(r) => {
            let from = String::from_utf8_lossy(&r.key).into_owned();
            if let Err(e) = load(&mut conn, name.as_bytes(), r, &pb, &mut loaded) {
                pb.finish_and_clear();
                delete(&mut conn, &loaded.keys);
                return Err(e).with_context(|| format!("read {}", file.display()));
            }
            pb.finish_and_clear();
            eprintln!(
                "{name}: restored {} chunks, {} bytes from {} (dumped from key {from})",
                loaded.chunks,
                loaded.bytes,
                file.display()
            );
        }
        Dump::Partitioned {
            args: reserve,
            parts,
            r,
        } => {
            let result = load_partitioned(&mut conn, args, (&reserve, parts), r, &pb, &mut loaded);
            pb.finish_and_clear();
            if let Err(e) = result {
                delete(&mut conn, &loaded.keys);
                return Err(e);
            }
            eprintln!(
                "{name}: restored {parts} partitions, {} chunks, {} bytes from {}",
                loaded.chunks,
                loaded.bytes,
                file.display()
            );
        }
    }
    Ok(())
}

/// Loads every partition's dump from `r` into its key under the new name (replacing a key there
/// only with --force), then creates the descriptor with its BF.RESERVE arguments `reserve`.
fn load_partitioned<R: Read>(
    conn: &mut Connection,
    args: &RestoreArgs,
    (reserve, parts): (&[Vec<u8>], u32),
    mut r: R,
    pb: &ProgressBar,
    loaded: &mut Loaded,
) -> Result<()> {
    let name = args.name.as_str();
    let keys = partition_keys(name.as_bytes(), parts);
    for (i, key) in keys.iter().enumerate() {
        let shown = String::from_utf8_lossy(key);
        if conn.query(redis::cmd("EXISTS").arg(key.as_slice()))? == redis::Value::Int(1) {
            if !args.force {
                bail!("partition key {shown} already exists: delete it first or pass --force");
            }
            conn.query(redis::cmd("DEL").arg(key.as_slice()))?;
        }
        let section = Reader::section(&mut r, i + 1 == keys.len())
            .with_context(|| format!("read partition {i} of {}", args.file.display()))?;
        load(conn, key, section, pb, loaded).with_context(|| format!("partition {i} ({shown})"))?;
    }
    let mut cmd = redis::cmd("BF.RESERVE");
    cmd.arg(name);
    for a in reserve {
        cmd.arg(a.as_slice());
    }
    conn.query(&cmd)
        .with_context(|| format!("creating the descriptor {name}"))?;
    Ok(())
}

/// What a restore has written so far.
#[derive(Default)]
struct Loaded {
    chunks: u64,
    bytes: u64,
    /// Read from the file before the current dump.
    position: u64,
    /// Keys written to (a failure deletes them: a half-loaded filter answers nothing but errors).
    keys: Vec<Vec<u8>>,
}

/// BF.LOADCHUNKs every record of `r` into `key`.
fn load<R: Read>(
    conn: &mut Connection,
    key: &[u8],
    mut r: Reader<R>,
    pb: &ProgressBar,
    loaded: &mut Loaded,
) -> Result<()> {
    let shown = String::from_utf8_lossy(key);
    while let Some((it, data)) = r.next_record()? {
        if it != 0 && !loaded.keys.iter().any(|k| k == key) {
            loaded.keys.push(key.to_vec());
        }
        conn.query(redis::cmd("BF.LOADCHUNK").arg(key).arg(it).arg(&data[..]))
            .with_context(|| format!("BF.LOADCHUNK {shown} {it} (chunk {})", loaded.chunks + 1))?;
        loaded.chunks += 1;
        loaded.bytes += data.len() as u64;
        pb.set_position(loaded.position + r.position());
    }
    loaded.position += r.position();
    Ok(())
}

fn delete(conn: &mut Connection, keys: &[Vec<u8>]) {
    for k in keys {
        // Best effort: the error that stopped the restore is the one reported.
        let _ = conn.query(redis::cmd("DEL").arg(k.as_slice()));
    }
}
