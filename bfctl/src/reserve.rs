//! `bfctl reserve NAME ERROR CAPACITY`: creates a filter, plain or partitioned, and the reserve
//! options that `load` and `dedup` share.

use anyhow::{anyhow, bail, Result};
use clap::Args;
use rustbloom_client::routing::MAX_PARTITIONS;
use rustbloom_client::{Client, Error, Filter, Growth, ReserveOptions};

use crate::count::count;

/// How a filter is reserved: growth and partitions.
#[derive(Args, Clone, Debug)]
pub struct Shape {
    /// Split the filter into P partitions (docs/partitions.md): one key per partition,
    /// spread over a cluster's masters, and a descriptor at NAME.
    #[arg(long, value_name = "P", value_parser = count::<u32>(1, u64::from(MAX_PARTITIONS)))]
    pub partitions: Option<u32>,
    /// Refuse items past the capacity instead of adding layers.
    #[arg(long, conflicts_with_all = ["expansion", "window"])]
    pub nonscaling: bool,
    /// Each new layer is X times the previous one (server default 2).
    #[arg(long, value_name = "X", conflicts_with = "window", value_parser = count::<u32>(0, u64::MAX))]
    pub expansion: Option<u32>,
    /// A sliding-window filter forgetting items after MS milliseconds.
    #[arg(long, value_name = "MS", value_parser = count::<u64>(0, u64::MAX))]
    pub window: Option<u64>,
}

impl Shape {
    pub fn growth(&self) -> Growth {
        match (self.nonscaling, self.window) {
            (true, _) => Growth::NonScaling,
            (false, Some(ms)) => Growth::Window { ms },
            (false, None) => Growth::Scaling {
                expansion: self.expansion,
            },
        }
    }

    /// True when any option was given.
    pub fn given(&self) -> bool {
        self.partitions.is_some()
            || self.nonscaling
            || self.expansion.is_some()
            || self.window.is_some()
    }
}

#[derive(Args, Debug)]
pub struct ReserveArgs {
    /// Filter name (for a partitioned filter, the descriptor's key).
    pub name: String,
    /// Error rate, strictly between 0 and 1.
    pub error: f64,
    /// Items the filter is sized for (all partitions together): 1000000, 1e6 or 2.5e6.
    #[arg(value_parser = count::<u64>(0, u64::MAX))]
    pub capacity: u64,
    #[command(flatten)]
    pub shape: Shape,
}

pub fn run(url: &str, args: &ReserveArgs) -> Result<()> {
    if !(args.error > 0.0 && args.error < 1.0) {
        bail!("ERROR must be strictly between 0 and 1");
    }
    let mut conn = Client::open(url)?.connect()?;
    let opts = ReserveOptions {
        error_rate: args.error,
        capacity: args.capacity,
        growth: args.shape.growth(),
        partitions: args.shape.partitions,
    };
    let filter = Filter::reserve(&mut conn, args.name.as_bytes(), &opts)
        .map_err(|e| refused(&args.name, e))?;
    match filter.partitioning() {
        Some(p) => println!(
            "{}: reserved {} partitions of {} items each (routing seed {})",
            args.name,
            p.partitions,
            rustbloom_client::routing::partition_capacity(
                args.capacity,
                p.partitions,
                args.shape.nonscaling
            ),
            p.routing_seed
        ),
        None => println!("{}: reserved", args.name),
    }
    Ok(())
}

/// Why reserving `name` failed, naming it. A name already taken is the server's `item exists`
/// (the words of the other clients), said plainly: the client removed any partition it had
/// created, and the filter that is there was not touched.
fn refused(name: &str, e: Error) -> anyhow::Error {
    match e {
        Error::Server(text) if text == "item exists" => anyhow!(
            "{name}: item exists (a filter of that name, or a key its partitions need, is \
             already there; nothing was created or changed)"
        ),
        e => anyhow::Error::new(e).context(format!("reserving {name}")),
    }
}
