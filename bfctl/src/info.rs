//! `bfctl info NAME`: what a filter holds and its estimated false-positive rate; for a
//! partitioned filter, every partition, the masters they live on, the totals, and a check that
//! all P partitions exist and agree with the descriptor.

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use rustbloom_client::{scandump, Client, Connection, Filter, FilterInfo, KeyInfo};
use rustbloom_core::partition::decode_identity;
use rustbloom_core::scalable::encoding::{parse_header, FilterShape};

use crate::report::{human_bytes, scan_bits};
use crate::window;

/// Capacity, items, layers, bytes, bits per item and the estimated false-positive rate.
///
/// For a partitioned filter: the descriptor, one row per partition (its key, master, capacity,
/// items and bytes), the totals per master and in all, and a check that all P partitions exist
/// and say they are partition i of P with the descriptor's routing seed; a failed check is
/// printed and the exit code is 1. A partition key given as NAME is reported as a plain filter.
#[derive(Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct InfoArgs {
    /// Filter name.
    pub name: String,
    /// Count the set bits of every layer (reads the whole filter with BF.SCANDUMP) and estimate
    /// the rate from the measured fill instead of from the item counts.
    #[arg(long)]
    pub scan: bool,
    /// Error rate the filter was reserved with; used only when the server's dump header cannot
    /// be read (rustbloom's own header carries the exact value).
    #[arg(long, default_value_t = 0.01)]
    pub error: f64,
}

pub fn run(url: &str, args: &InfoArgs, show: bool) -> Result<()> {
    let mut conn = Client::open(url)?.connect()?;
    let Some(filter) = Filter::discover(&mut conn, args.name.as_bytes())? else {
        bail!("{}: not found", args.name);
    };
    if filter.partitioning().is_none() {
        return plain(&mut conn, &args.name, args.scan, args.error, show);
    }
    if args.scan {
        bail!(
            "--scan reads one filter: give it a partition key (`bfctl info` of {} lists them)",
            args.name
        );
    }
    let info = filter.info(&mut conn)?;
    partitioned(&args.name, &info)
}

fn partitioned(name: &str, info: &FilterInfo) -> Result<()> {
    println!("name:              {name} (partitioned)");
    print_descriptor_fields(info);
    println!();
    print_partitions(info);
    println!();
    print_masters(info);
    println!();
    if info.problems.is_empty() {
        println!(
            "check:             all {} partitions exist and agree with the descriptor",
            info.partitions.len()
        );
        return Ok(());
    }
    for p in &info.problems {
        println!("problem:           {p}");
    }
    bail!(
        "{name}: {} of its partitions are missing or disagree with the descriptor",
        info.problems.len()
    )
}

/// The descriptor's BF.INFO fields but its partition keys (listed by [`print_partitions`]).
fn print_descriptor_fields(info: &FilterInfo) {
    for (field, value) in &info.fields {
        if field == "Partition keys" {
            continue;
        }
        // The server's double reply carries 17 digits (1e-9 arrives as 1.0000000000000001e-09);
        // show the shortest form that reads back as the same rate.
        let shown = match field.as_str() {
            "Error rate" => value
                .parse::<f64>()
                .map_or_else(|_| value.clone(), |r| r.to_string()),
            _ => value.clone(),
        };
        println!("{:<18} {shown}", format!("{}:", field.to_lowercase()));
    }
}

/// A row per partition: its slot, master, capacity, items and bytes, or that it is missing.
fn print_partitions(info: &FilterInfo) {
    println!("partition  slot   master                   capacity     items        bytes");
    for p in &info.partitions {
        let key = String::from_utf8_lossy(&p.key);
        match &p.info {
            Some(i) => println!(
                "{:<10} {:<6} {:<24} {:<12} {:<12} {:<12} {key}",
                p.index, p.slot, p.master, i.capacity, i.items, i.size
            ),
            None => println!(
                "{:<10} {:<6} {:<24} {:<12} {:<12} {:<12} {key}",
                p.index, p.slot, p.master, "-", "-", "(missing)"
            ),
        }
    }
}

/// A row per master holding partitions, then the totals.
fn print_masters(info: &FilterInfo) {
    println!("master                   partitions  capacity     items        bytes");
    for (master, t) in info.per_master() {
        println!(
            "{master:<24} {:<11} {:<12} {:<12} {} ({})",
            t.partitions,
            t.capacity,
            t.items,
            t.size,
            human_bytes(t.size)
        );
    }
    let t = info.totals();
    println!(
        "{:<24} {:<11} {:<12} {:<12} {} ({})",
        "total",
        t.partitions,
        t.capacity,
        t.items,
        t.size,
        human_bytes(t.size)
    );
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

/// The report of one plain filter (or one partition key).
fn plain(c: &mut Connection, key: &str, scan: bool, error: f64, show: bool) -> Result<()> {
    let bi = KeyInfo::read(c, key.as_bytes()).with_context(|| format!("BF.INFO {key}"))?;
    // rustbloom's BF.SCANDUMP header (iterator 0) describes every layer exactly: error rate,
    // capacity, items, bits and hashes. Only when it cannot be read (another module) do we rebuild
    // the layers from BF.INFO and the growth rule, with the error rate from --error.
    let (header_bytes, source) = match scandump(c, key.as_bytes(), 0) {
        Ok((_, h)) => (Some(h), None),
        Err(e) => (None, Some(e)),
    };
    // A partition's header is its identity, then its filter's own header.
    let filter_header = header_bytes
        .as_deref()
        .map(|h| decode_identity(h).map_or(h, |(_, inner)| inner));
    // A window filter is a ring of slots, not layers: its own report.
    if let Some(h) = filter_header.and_then(window::header) {
        return window::info(c, key, &bi, &h, scan, show);
    }
    let mut layers = match filter_header.and_then(|h| parse_header(h).ok()) {
        Some(h) => Layers::from_header(&h),
        None => {
            if let Some(e) = &source {
                if e.to_string().contains("being loaded") {
                    bail!("{key} is being loaded by BF.LOADCHUNK; try again when the load is done");
                }
            }
            Layers {
                views: layers_from_info(&bi, error)?,
                error_rate: error,
                exact: false,
            }
        }
    };
    if scan {
        if !layers.exact {
            bail!("--scan needs rustbloom's dump format, which this server does not answer");
        }
        count_ones(c, key, &mut layers.views, show)?;
    }
    print_layers(key, &bi, &layers, scan);
    Ok(())
}

/// A plain filter's layers and the error rate it was reserved with.
struct Layers {
    views: Vec<LayerView>,
    error_rate: f64,
    /// Read from the filter's own header (otherwise rebuilt from BF.INFO and --error).
    exact: bool,
}

impl Layers {
    fn from_header(header: &FilterShape) -> Layers {
        let views = header
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
            .collect();
        Layers {
            views,
            error_rate: header.params.error_rate,
            exact: true,
        }
    }
}

/// Prints the report of a plain filter: BF.INFO's figures, the estimated rate and a row per layer.
fn print_layers(key: &str, bi: &KeyInfo, layers: &Layers, scan: bool) {
    let bits: u64 = layers.views.iter().map(|l| l.bits).sum();
    let fpr = 1.0
        - layers
            .views
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
        "error rate:        {}{}",
        layers.error_rate,
        if layers.exact {
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
    for (i, l) in layers.views.iter().enumerate() {
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
}

/// Layers rebuilt from BF.INFO alone: capacity c of layer 0 from the summed capacity, every layer
/// but the newest full (the module pushes a layer only when the newest is full), the newest holds
/// the rest.
fn layers_from_info(bi: &KeyInfo, error: f64) -> Result<Vec<LayerView>> {
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
        tightening: rustbloom_core::scalable::TIGHTENING_RATIO,
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
