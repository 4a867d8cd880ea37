//! `bfctl exists NAME [FILE]`: prints 1 or 0 for every input line, in order.

use std::io::{self, BufWriter, Write};
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;
use rustbloom_client::{Client, Filter};

use crate::count::count;
use crate::input::LineBlocks;

#[derive(Args, Debug)]
pub struct ExistsArgs {
    /// Filter name.
    pub name: String,
    /// File with one item per line; `-` or nothing reads stdin.
    pub file: Option<PathBuf>,
    /// Lines asked per round trip.
    #[arg(long, default_value_t = 1000, value_parser = count::<u64>(1, u64::MAX))]
    pub batch: u64,
}

pub fn run(url: &str, args: &ExistsArgs) -> Result<()> {
    let mut conn = Client::open(url)?.connect()?;
    let Some(filter) = Filter::discover(&mut conn, args.name.as_bytes())? else {
        bail!("{}: not found", args.name);
    };
    let mut input = LineBlocks::open(args.file.as_deref())?;
    let mut out = BufWriter::new(io::stdout().lock());
    let batch = usize::try_from(args.batch).unwrap_or(usize::MAX);
    loop {
        let lines = input.round(batch, true).context("read input")?;
        if lines.is_empty() {
            break;
        }
        let items: Vec<&[u8]> = lines.iter().map(|l| l.item).collect();
        for present in filter.exists(&mut conn, &items, batch)? {
            out.write_all(if present { b"1\n" } else { b"0\n" })?;
        }
        if !input.ready() {
            out.flush()?;
        }
    }
    out.flush()?;
    Ok(())
}
