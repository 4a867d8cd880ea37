//! `bfctl build FILE OUT`: a filter built on this machine from a file of items, written as a
//! `bfctl dump` file that `bfctl restore` loads. The filter is made by rustbloom's own core with
//! the parameters the server would use, and filled in the order the server would fill it, so it
//! is byte for byte the filter a server builds from the same items (with the same seed).

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Result};
use clap::Args;
use rustbloom_core::partition::{partition_capacity, partition_key, Partition};
use rustbloom_core::{BloomFilter, Filter, FilterParams, Growth, StoredFilter, Unlimited};

use crate::count::count;
use crate::dumpfile::{self, Writer};
use crate::fill::{fill, Routing, Target};
use crate::outfile::write_file;
use crate::rate;

/// The expansion of a scaling filter when none is given: the server's default `bf.expansion`.
pub const DEFAULT_EXPANSION: u32 = 2;
/// Most partitions (as BF.RESERVE … PARTITIONS).
const MAX_PARTITIONS: u32 = 4096;

/// Build a filter from FILE (one item per line) on this machine, in parallel, and write it to
/// OUT in the format `bfctl restore` reads.
///
/// The filter is what a server running rustbloom would hold after `bfctl load` of the same
/// lines into a filter reserved with the same parameters and seed: the same bits, counts and
/// layers, byte for byte (BF.SCANDUMP and DEBUG DIGEST-VALUE agree). Give --seed to get the
/// server's filter exactly: a server in `bf.seed-mode fixed` uses seed 0 (and, for partitions
/// whose routing seed is 0, its complement); without --seed a random one is drawn, as a server
/// in the default `bf.seed-mode random` does. With --partitions P the items are routed as the
/// module routes them and OUT holds the descriptor and P partition dumps, restored with
/// `bfctl restore NAME OUT` as one partitioned filter. The whole filter is held in memory
/// (`bfctl plan` tells its size); up to --jobs threads fill it, one partition each at a time.
#[derive(Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct BuildArgs {
    /// File with one item per line; `-` reads stdin.
    pub file: PathBuf,
    /// Output dump file; `-` writes to stdout.
    pub out: PathBuf,
    #[command(flatten)]
    pub params: BuildParams,
    /// Threads filling the filter (default: this machine's cores).
    #[arg(long, value_parser = count::<usize>(0, u64::MAX))]
    pub jobs: Option<usize>,
}

/// What a filter built offline is made from: as `bfctl reserve`, plus its seeds.
#[derive(Args, Debug)]
pub struct BuildParams {
    /// Items the filter is sized for (all partitions together): 1000000, 1e6 or 2.5e6.
    #[arg(long, value_parser = count::<u64>(0, u64::MAX))]
    pub capacity: u64,
    /// Error rate, strictly between 0 and 1.
    #[arg(long, default_value_t = 0.01)]
    pub error: f64,
    /// Split the filter into P partitions (docs/partitions.md).
    #[arg(long, value_name = "P", value_parser = count::<u32>(1, u64::from(MAX_PARTITIONS)))]
    pub partitions: Option<u32>,
    /// Refuse items past the capacity instead of adding layers.
    #[arg(long, conflicts_with = "expansion")]
    pub nonscaling: bool,
    /// Each new layer is X times the previous one (default 2, the server's bf.expansion).
    #[arg(long, value_name = "X", value_parser = count::<u32>(0, u64::MAX))]
    pub expansion: Option<u32>,
    /// The hash seed of the filter (of every partition), as BF.RESERVE … SEED s.
    #[arg(long, value_name = "S")]
    pub seed: Option<u64>,
    /// The routing seed of a partitioned filter (default: a random one).
    #[arg(long, value_name = "R", requires = "partitions")]
    pub routing_seed: Option<u64>,
}

impl BuildParams {
    pub fn growth(&self) -> Growth {
        if self.nonscaling {
            Growth::NonScaling
        } else {
            Growth::Scaling {
                expansion: self.expansion.unwrap_or(DEFAULT_EXPANSION),
            }
        }
    }

    fn check(&self) -> Result<()> {
        if !(self.error > 0.0 && self.error < 1.0) {
            bail!("--error must be strictly between 0 and 1");
        }
        if self.capacity == 0 {
            bail!("--capacity must be at least 1");
        }
        if self.expansion == Some(0) {
            bail!("--expansion must be at least 1");
        }
        Ok(())
    }
}

/// A filter's layout once its seeds are drawn.
pub struct Layout {
    pub params: FilterParams,
    pub routing: Option<Routing>,
    /// Items in all (the descriptor's capacity).
    pub capacity: u64,
}

impl Layout {
    /// The parameters' layout: seeds as given, else drawn at random (a filter seed that differs
    /// from the routing seed, as the module requires of a partition).
    pub fn new(p: &BuildParams) -> Result<Layout> {
        p.check()?;
        let routing = p.partitions.map(|count| Routing {
            count,
            routing_seed: p.routing_seed.unwrap_or_else(random_seed),
        });
        let seed = match (p.seed, routing) {
            (Some(seed), Some(r)) if seed == r.routing_seed => {
                bail!("--seed must differ from the routing seed ({seed})")
            }
            (Some(seed), _) => seed,
            (None, Some(r)) => std::iter::repeat_with(random_seed)
                .find(|&s| s != r.routing_seed)
                .unwrap_or(!r.routing_seed),
            (None, None) => random_seed(),
        };
        let capacity = match routing {
            Some(r) => partition_capacity(p.capacity, r.count, p.nonscaling),
            None => p.capacity,
        };
        Ok(Layout {
            params: FilterParams {
                capacity,
                error_rate: p.error,
                growth: p.growth(),
                seed,
                tightening: rustbloom_core::scalable::TIGHTENING_RATIO,
            },
            routing,
            capacity: p.capacity,
        })
    }

    /// An empty filter: partition `index` of a partitioned layout, else the plain filter.
    pub fn empty(&self, index: u32) -> Result<StoredFilter> {
        let filter = BloomFilter::new(self.params, &mut Unlimited)
            .map_err(|e| anyhow::anyhow!("cannot make the filter: {e}"))?;
        let stored = StoredFilter::ready_filter(Filter::Scalable(filter));
        match self.routing {
            None => Ok(stored),
            Some(r) => {
                let partition = Partition::new(index, r.count, r.routing_seed)
                    .map_err(|e| anyhow::anyhow!("partition {index}: {e:?}"))?;
                stored
                    .with_partition(partition)
                    .map_err(|e| anyhow::anyhow!("partition {index}: {e:?}"))
            }
        }
    }

    /// The descriptor's BF.RESERVE arguments after its name (as `bfctl dump` writes them).
    fn descriptor_args(&self, r: Routing) -> Vec<Vec<u8>> {
        let mut args = vec![
            self.params.error_rate.to_string(),
            self.capacity.to_string(),
            "PARTITIONS".into(),
            r.count.to_string(),
            r.routing_seed.to_string(),
        ];
        match self.params.growth {
            Growth::NonScaling => args.push("NONSCALING".into()),
            Growth::Scaling { expansion } => {
                args.extend(["EXPANSION".into(), expansion.to_string()])
            }
        }
        args.into_iter().map(String::into_bytes).collect()
    }
}

/// A seed nobody can predict: std's hasher is keyed from the OS's randomness.
pub fn random_seed() -> u64 {
    use std::collections::hash_map::RandomState;
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    hasher.finish()
}

/// Threads to fill with: --jobs, else the machine's cores.
pub fn jobs(given: Option<usize>) -> usize {
    given.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// Writes the filled `targets` as a dump file to `sink`; the bytes of bits written.
fn write_out(
    mut sink: &mut dyn Write,
    name: &[u8],
    layout: &Layout,
    targets: &[Target],
) -> Result<u64> {
    let mut bytes = 0;
    if let Some(r) = layout.routing {
        dumpfile::write_partitioned_head(&mut sink, &layout.descriptor_args(r), r.count)?;
    }
    for target in targets {
        let key = match layout.routing {
            Some(r) => partition_key(name, target.index, r.count),
            None => name.to_vec(),
        };
        let mut w = Writer::new(&mut *sink, &key)?;
        let mut it = 0;
        loop {
            let (next, data) = target.stored.scandump_step(it);
            if next == 0 {
                break;
            }
            w.record(next, &data)?;
            bytes += data.len() as u64;
            it = next;
        }
        w.finish()?;
    }
    sink.flush()?;
    Ok(bytes)
}

pub fn run(args: &BuildArgs) -> Result<()> {
    let layout = Layout::new(&args.params)?;
    let started = Instant::now();
    let count = layout.routing.map_or(1, |r| r.count);
    let targets = (0..count)
        .map(|i| layout.empty(i).map(|stored| Target::new(i, stored)))
        .collect::<Result<Vec<_>>>()?;
    let (targets, lines) = fill(&args.file, targets, layout.routing, jobs(args.jobs))?;
    // The name the dump records (informational: `bfctl restore` names the filter).
    let name = args
        .out
        .file_stem()
        .map_or_else(|| b"filter".to_vec(), |s| s.as_encoded_bytes().to_vec());
    let out = args.out.as_path();
    let bytes = write_file(out, |sink| write_out(sink, &name, &layout, &targets))?;
    let added: u64 = targets.iter().map(|t| t.added).sum();
    eprintln!(
        "{}: {lines} items, {added} new, {} already present; {}seed {}, {bytes} bytes ({:.2} s, {:.0} items/s)",
        out.display(),
        lines - added,
        match layout.routing {
            Some(r) => format!("{} partitions, routing seed {}, ", r.count, r.routing_seed),
            None => String::new(),
        },
        layout.params.seed,
        started.elapsed().as_secs_f64(),
        rate(lines, started.elapsed())
    );
    Ok(())
}
