//! `bfctl drop NAME`: deletes a filter, every partition of a partitioned one included.

use anyhow::{bail, Result};
use clap::Args;
use rustbloom_client::{Client, Filter};

#[derive(Args, Debug)]
pub struct DropArgs {
    /// Filter name.
    pub name: String,
}

pub fn run(url: &str, args: &DropArgs) -> Result<()> {
    let mut conn = Client::open(url)?.connect()?;
    let Some(filter) = Filter::discover(&mut conn, args.name.as_bytes())? else {
        bail!("{}: not found", args.name);
    };
    let deleted = filter.drop(&mut conn)?;
    println!("{}: deleted {deleted} keys", args.name);
    Ok(())
}
