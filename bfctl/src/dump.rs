//! `bfctl dump NAME FILE`: a filter saved with BF.SCANDUMP in the format of
//! [`crate::dumpfile`], for `bfctl restore` ([`crate::restore`]). A partitioned filter is saved
//! as its descriptor's BF.RESERVE arguments and every partition's dump.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;
use rustbloom_client::{scandump, Client, Connection, Filter, FilterInfo, KeyInfo};

use crate::bar;
use crate::dumpfile::{self, Writer};
use crate::outfile::write_file;

/// Save a filter to FILE with BF.SCANDUMP (any size; every partition of a partitioned one).
#[derive(Args, Debug)]
pub struct DumpArgs {
    /// Filter name.
    pub name: String,
    /// Output file; `-` writes to stdout.
    pub file: PathBuf,
}

pub const BAR: &str =
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
