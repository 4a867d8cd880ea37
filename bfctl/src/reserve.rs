//! `bfctl reserve NAME ERROR CAPACITY`: creates a filter, plain or partitioned, and the reserve
//! options that `load` and `dedup` share; `bfctl reserve NAME --like OLD` creates an empty one
//! made as OLD was, so that `bfctl merge` takes the two.

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
    #[arg(required_unless_present = "like")]
    pub error: Option<f64>,
    /// Items the filter is sized for (all partitions together): 1000000, 1e6 or 2.5e6.
    #[arg(required_unless_present = "like", value_parser = count::<u64>(0, u64::MAX))]
    pub capacity: Option<u64>,
    #[command(flatten)]
    pub shape: Shape,
    /// An empty filter made as OLD was (kind, error rate, capacity, growth, seed, layer shape;
    /// a partitioned OLD's partitions and routing seed), so that `bfctl merge` takes the two,
    /// on a cluster too. Takes no other parameter.
    #[arg(long, value_name = "OLD")]
    pub like: Option<String>,
}

pub fn run(url: &str, args: &ReserveArgs) -> Result<()> {
    let (error, capacity) = match (&args.like, args.error, args.capacity) {
        (Some(model), None, None) if !args.shape.given() => return run_like(url, args, model),
        (Some(_), ..) => bail!(
            "--like takes every parameter from its filter: ERROR, CAPACITY, --partitions, \
             --nonscaling, --expansion and --window go without it"
        ),
        (None, Some(error), Some(capacity)) => (error, capacity),
        (None, ..) => bail!("ERROR and CAPACITY are needed without --like"),
    };
    if !(error > 0.0 && error < 1.0) {
        bail!("ERROR must be strictly between 0 and 1");
    }
    let mut conn = Client::open(url)?.connect()?;
    let opts = ReserveOptions {
        error_rate: error,
        capacity,
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
                capacity,
                p.partitions,
                args.shape.nonscaling
            ),
            p.routing_seed
        ),
        None => println!("{}: reserved", args.name),
    }
    Ok(())
}

/// `bfctl reserve NAME --like OLD`.
fn run_like(url: &str, args: &ReserveArgs, model: &str) -> Result<()> {
    let mut conn = Client::open(url)?.connect()?;
    let filter = match Filter::reserve_like(&mut conn, args.name.as_bytes(), model.as_bytes()) {
        Ok(filter) => filter,
        Err(Error::Server(text)) if text == "not found" => {
            bail!(
                "{model}: not found (there is no filter to reserve {} like)",
                args.name
            )
        }
        Err(e) => return Err(refused(&args.name, e)),
    };
    match filter.partitioning() {
        Some(p) => println!(
            "{}: reserved like {model}: {} partitions (routing seed {})",
            args.name, p.partitions, p.routing_seed
        ),
        None => println!("{}: reserved like {model}", args.name),
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
