//! `bfctl merge DEST SOURCE [SOURCE …]`: DEST becomes the union of itself and the sources, as
//! `BF.MERGE` makes it, for filters whose keys are anywhere on a cluster: plain filters, or
//! partitioned ones partition by partition, each source key copied first to a temporary key in
//! DEST's slot where the slots differ ([`rustbloom_client::Filter::merge`]).

use std::time::Instant;

use anyhow::{Context, Result};
use clap::Args;
use rustbloom_client::{Client, Filter, MergeReport};

/// Merge filters into DEST with BF.MERGE (created from the first source when missing).
///
/// The filters must be alike, as BF.MERGE requires (made with `BF.RESERVE new LIKE old`, one
/// seed, or `bfctl build … --seed S --routing-seed R` and `bfctl restore`); partitioned ones
/// need the same partitions and routing seed, and merge partition i into partition i. On a
/// cluster a source key in another slot than DEST's is copied to a temporary key there first
/// (BF.SCANDUMP → BF.LOADCHUNK), merged and deleted, one at a time. Unlike filters and missing
/// partitions are refused before anything changes; a source that does not exist counts as
/// empty, as in BF.MERGE. A merge only sets bits: after a failure half way, the same command
/// run again finishes it.
#[derive(Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct MergeArgs {
    /// The filter merged into (created when missing).
    pub dest: String,
    /// The filters merged in.
    #[arg(required = true)]
    pub sources: Vec<String>,
}

pub fn run(url: &str, args: &MergeArgs) -> Result<()> {
    let mut conn = Client::open(url)?.connect()?;
    let sources: Vec<&[u8]> = args.sources.iter().map(String::as_bytes).collect();
    let started = Instant::now();
    let report = Filter::merge(&mut conn, args.dest.as_bytes(), &sources)
        .with_context(|| format!("merging into {}", args.dest))?;
    for missing in &report.missing {
        eprintln!(
            "bfctl: {} does not exist: merged as an empty filter",
            String::from_utf8_lossy(missing)
        );
    }
    if report.sources == 0 {
        // BF.MERGE's answer too: nothing changes, and a missing DEST is not created (there are
        // no parameters to create it from).
        eprintln!("bfctl: none of the sources exists: nothing merged");
    }
    println!(
        "{}: {} ({:.2} s)",
        args.dest,
        summary(&report),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// What the merge did, in a line: filters merged, keys merged into, copies and their bytes.
fn summary(r: &MergeReport) -> String {
    let into = if r.partitioned {
        format!(" into {} partitions", r.partitions)
    } else {
        String::new()
    };
    let created = if r.created { " (created)" } else { "" };
    let copies = match r.copies {
        1 => "1 key".to_string(),
        n => format!("{n} keys"),
    };
    format!(
        "merged {} filter{}{into}{created}; {copies} copied across slots, {} bytes",
        r.sources,
        if r.sources == 1 { "" } else { "s" },
        r.bytes_copied
    )
}
