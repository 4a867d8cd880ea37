//! `bfctl plan`: bytes, hashes and the false-positive rate table of a filter before it is
//! reserved; with `--partitions P`, of each partition and of all of them.

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use rustbloom_client::routing::{partition_capacity, MAX_PARTITIONS};
use rustbloom_core::scalable::{MAX_CAPACITY, MAX_EXPANSION};
use rustbloom_core::sizing::expected_error_rate;
use rustbloom_core::{FilterParams, Growth};

use crate::count::count;
use crate::report::human_bytes;
use crate::window;

/// bf.max-filter-bytes' default: the most bytes of bits one filter (one partition) may hold.
const DEFAULT_MAX_FILTER_BYTES: u64 = 1 << 30;

#[derive(Args, Debug)]
pub struct PlanArgs {
    /// Capacity you would reserve (all partitions together): 1000000, 1e6 or 2.5e6.
    #[arg(long, value_parser = count::<u64>(0, u64::MAX))]
    pub items: u64,
    /// Error rate you would reserve.
    #[arg(long)]
    pub error: f64,
    /// Plan a sliding-window filter of this window in ms (BF.RESERVE ... WINDOW ms): ITEMS
    /// is then the capacity per window.
    #[arg(long, value_name = "MS", conflicts_with_all = ["expansion", "nonscaling"], value_parser = count::<u64>(0, u64::MAX))]
    pub window: Option<u64>,
    /// Expansion (default 2).
    #[arg(long, value_parser = count::<u32>(0, u64::MAX))]
    pub expansion: Option<u32>,
    /// Plan a NONSCALING filter.
    #[arg(long, conflicts_with = "expansion")]
    pub nonscaling: bool,
    /// Plan a filter split into P partitions (docs/partitions.md): each partition's table,
    /// and the memory of all of them.
    #[arg(long, value_name = "P", value_parser = count::<u32>(0, u64::MAX))]
    pub partitions: Option<u32>,
}

pub fn run(args: &PlanArgs) -> Result<()> {
    let error = args.error;
    if !(error > 0.0 && error < 1.0) {
        bail!("--error must be strictly between 0 and 1");
    }
    let expansion = expansion(args)?;
    let growth_args = match (args.window, expansion) {
        (Some(ms), _) => format!(" WINDOW {ms}"),
        (None, Some(2)) => String::new(),
        (None, Some(x)) => format!(" EXPANSION {x}"),
        (None, None) => " NONSCALING".to_string(),
    };
    let Some(partitions) = args.partitions else {
        match args.window {
            Some(ms) => window::plan(args.items, error, ms)?,
            None => table(
                args.items,
                error,
                expansion,
                &format!("BF.RESERVE key {error} {}{growth_args}", args.items),
                "--items ",
            )?,
        };
        return Ok(());
    };
    partitioned(args, expansion, &growth_args, partitions)
}

/// The expansion planned: None for a NONSCALING filter, else --expansion (default 2), checked.
fn expansion(args: &PlanArgs) -> Result<Option<u32>> {
    let expansion = match (args.nonscaling, args.expansion) {
        (true, _) => None,
        (false, x) => Some(x.unwrap_or(2)),
    };
    if let Some(x) = expansion {
        if !(1..=MAX_EXPANSION).contains(&x) {
            bail!("--expansion must be in [1, {MAX_EXPANSION}]");
        }
    }
    Ok(expansion)
}

/// The plan of a filter split into `partitions`: one partition's table, then the memory of all.
fn partitioned(
    args: &PlanArgs,
    expansion: Option<u32>,
    growth_args: &str,
    partitions: u32,
) -> Result<()> {
    let error = args.error;
    if !(1..=MAX_PARTITIONS).contains(&partitions) {
        bail!("--partitions must be in [1, {MAX_PARTITIONS}]");
    }
    if args.items == 0 {
        bail!("--items must be at least 1");
    }
    let each = partition_capacity(args.items, partitions, args.nonscaling);
    println!(
        "BF.RESERVE key {error} {} PARTITIONS {partitions} <routing seed>{growth_args}",
        args.items
    );
    println!(
        "{partitions} partitions of {each} items each{}; every partition:",
        if args.nonscaling {
            " (N/P and six standard deviations of the spread, so that N random items never fill one)"
        } else {
            ""
        }
    );
    println!();
    let reserve = format!(
        "BF.RESERVE {{T_i}}key/i {error} {each}{growth_args} PARTITION i {partitions} <routing seed>"
    );
    let per_partition = match args.window {
        Some(ms) => {
            println!("{reserve}");
            window::plan(each, error, ms)?
        }
        None => table(each, error, expansion, &reserve, "a partition's capacity ")?,
    };
    print_partition_totals(per_partition, partitions)
}

/// The bytes of one partition and of all, against the default bf.max-filter-bytes.
fn print_partition_totals(per_partition: u64, partitions: u32) -> Result<()> {
    let total = per_partition
        .checked_mul(u64::from(partitions))
        .context("total bytes overflow")?;
    println!();
    println!(
        "per partition: {per_partition} bytes ({}) at capacity",
        human_bytes(per_partition)
    );
    println!(
        "all {partitions}:        {total} bytes ({}) at capacity",
        human_bytes(total)
    );
    if per_partition <= DEFAULT_MAX_FILTER_BYTES {
        println!(
            "each partition is under the default bf.max-filter-bytes ({})",
            human_bytes(DEFAULT_MAX_FILTER_BYTES)
        );
    } else {
        println!(
            "each partition is over the default bf.max-filter-bytes ({}): raise it, or use more \
             partitions",
            human_bytes(DEFAULT_MAX_FILTER_BYTES)
        );
    }
    Ok(())
}

/// The table of one filter (or one partition) of `items` items.
///
/// `reserve` is the command shown first; `prefix` names the count in errors. Answers the bytes
/// of the first layer.
fn table(
    items: u64,
    error: f64,
    expansion: Option<u32>,
    reserve: &str,
    prefix: &str,
) -> Result<u64> {
    if !(1..=MAX_CAPACITY).contains(&items) {
        bail!(
            "{prefix}must be in [1, {MAX_CAPACITY}] (BF.RESERVE's capacity range); a scaling \
             filter grows past it"
        );
    }
    let params = FilterParams {
        capacity: items,
        error_rate: error,
        growth: match expansion {
            Some(x) => Growth::Scaling { expansion: x },
            None => Growth::NonScaling,
        },
        seed: 0,
        tightening: rustbloom_core::scalable::TIGHTENING_RATIO,
    };
    let l0 = params
        .layer_size(0)
        .map_err(|e| anyhow!("cannot size this filter: {e:?}"))?;
    println!("{reserve}");
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
    let (rows, boundaries) = table_rows(&params, items, expansion.is_some());
    for n in rows {
        let filled = fill(&params, n)?;
        println!(
            "{n:<14} {:<7} {:<15} {:<10.2} {:.3e}{}",
            filled.layers,
            filled.bytes,
            filled.bits as f64 / n as f64,
            filled.error_rate,
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
    Ok(l0.bytes())
}

/// The item counts of the table's rows: fractions of the first layer, then (for a scaling
/// filter) the middle and the end of every further layer up to 6 layers; and the counts at which
/// the layers are full.
fn table_rows(params: &FilterParams, items: u64, scaling: bool) -> (Vec<u64>, Vec<u64>) {
    let mut rows: Vec<u64> = [0.1, 0.25, 0.5, 0.75, 1.0]
        .iter()
        .map(|f| ((items as f64 * f).round() as u64).max(1))
        .collect();
    rows.dedup();
    let mut boundaries = vec![items];
    if scaling {
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
    (rows, boundaries)
}

/// A filter holding some items: its layers, their bytes and bits, and its expected error rate.
struct Filled {
    layers: usize,
    bytes: u64,
    bits: u64,
    error_rate: f64,
}

/// The filter of `params` once `n` items are in, its layers filled as the module does: each
/// full before the next is pushed.
fn fill(params: &FilterParams, n: u64) -> Result<Filled> {
    let mut left = n;
    let mut filled = Filled {
        layers: 0,
        bytes: 0,
        bits: 0,
        error_rate: 0.0,
    };
    let mut pass = 1.0f64;
    for i in 0.. {
        let cap = params.layer_capacity(i).context("capacity overflow")?;
        let size = params
            .layer_size(i)
            .map_err(|e| anyhow!("cannot size layer {i}: {e:?}"))?;
        let here = left.min(cap);
        filled.bytes += size.bytes();
        filled.bits += size.bits;
        pass *= 1.0 - expected_error_rate(size, here);
        filled.layers += 1;
        left -= here;
        if left == 0 {
            break;
        }
    }
    filled.error_rate = 1.0 - pass;
    Ok(filled)
}
