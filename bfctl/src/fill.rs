//! Filters filled on this machine from a file of items, in parallel: the reader cuts the input
//! into blocks of lines and hands every block to each worker; a worker keeps the items that
//! route to its own partitions and adds them in input order. Each partition is so filled by
//! one thread with its items in the order `bfctl load` sends them, which is the order the
//! server adds them in: the bits, counts and layers are the server's, byte for byte.

use std::path::Path;
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::{Arc, OnceLock};

use anyhow::{anyhow, bail, Context, Result};
use rustbloom_core::partition::route;
use rustbloom_core::{Filter, InsertError, StoredFilter, Unlimited};

use crate::input::LineBlocks;

/// Lines per block handed to the workers.
const BLOCK_LINES: usize = 1 << 16;
/// Blocks read ahead of the slowest worker.
const READ_AHEAD: usize = 4;

/// Lines of input, their items packed one after another.
struct Block {
    bytes: Vec<u8>,
    /// The end of each item in `bytes`.
    ends: Vec<usize>,
    /// The partition of each item, routed by the first worker that takes the block and read by
    /// the others (each routing every item cost a quarter of a 10^8-item build on two cores).
    partitions: OnceLock<Vec<u32>>,
}

impl Block {
    fn items(&self) -> impl Iterator<Item = &[u8]> {
        let mut start = 0;
        self.ends.iter().map(move |&end| {
            let item = &self.bytes[start..end];
            start = end;
            item
        })
    }
}

/// How the items are spread: over `count` partitions by `routing_seed`, or none.
#[derive(Clone, Copy, Debug)]
pub struct Routing {
    pub count: u32,
    pub routing_seed: u64,
}

/// A filter to fill: its partition index (0 for a plain filter) and its value.
pub struct Target {
    pub index: u32,
    pub stored: StoredFilter,
    /// Items routed to it.
    pub items: u64,
    /// Of them, the ones that were new (counted).
    pub added: u64,
}

impl Target {
    pub fn new(index: u32, stored: StoredFilter) -> Target {
        Target {
            index,
            stored,
            items: 0,
            added: 0,
        }
    }
}

/// Adds every line of `file` (stdin for `-`) to the targets its item routes to (all to the one
/// target when `routing` is None); items of partitions not among the targets are skipped. Up to
/// `jobs` threads add; answers the targets and the number of lines read.
pub fn fill(
    file: &Path,
    targets: Vec<Target>,
    routing: Option<Routing>,
    jobs: usize,
) -> Result<(Vec<Target>, u64)> {
    let mut input = LineBlocks::open(Some(file))?;
    let workers = jobs.clamp(1, targets.len().max(1));
    let mut shares: Vec<Vec<Target>> = (0..workers).map(|_| Vec::new()).collect();
    for (n, target) in targets.into_iter().enumerate() {
        shares[n % workers].push(target);
    }
    std::thread::scope(|scope| {
        let mut senders = Vec::with_capacity(workers);
        let mut handles = Vec::with_capacity(workers);
        for share in shares {
            let (tx, rx) = sync_channel::<Arc<Block>>(READ_AHEAD);
            senders.push(tx);
            handles.push(scope.spawn(move || work(share, routing, rx)));
        }
        let read = read_blocks(&mut input, |block| {
            let block = Arc::new(block);
            // A worker that stopped (an error) has dropped its receiver: its error is reported
            // when it is joined below.
            senders.iter().all(|tx| tx.send(Arc::clone(&block)).is_ok())
        });
        drop(senders);
        let mut filled = Vec::new();
        let mut failure = None;
        for handle in handles {
            match handle.join() {
                Ok(Ok(share)) => filled.extend(share),
                Ok(Err(e)) => failure = failure.or(Some(e)),
                Err(_) => failure = failure.or(Some(anyhow!("a worker thread panicked"))),
            }
        }
        if let Some(e) = failure {
            return Err(e);
        }
        let lines = read?;
        filled.sort_by_key(|t| t.index);
        Ok((filled, lines))
    })
}

/// Reads the input in blocks, passing each to `each` until it answers false; the lines read.
fn read_blocks(input: &mut LineBlocks, mut each: impl FnMut(Block) -> bool) -> Result<u64> {
    let mut lines = 0u64;
    loop {
        let mut block = Block {
            bytes: Vec::with_capacity(BLOCK_LINES * 16),
            ends: Vec::with_capacity(BLOCK_LINES),
            partitions: OnceLock::new(),
        };
        let taken = input
            .take(BLOCK_LINES, |line| {
                block.bytes.extend_from_slice(line.item);
                block.ends.push(block.bytes.len());
            })
            .context("reading the items")?;
        if taken == 0 {
            return Ok(lines);
        }
        lines += taken as u64;
        if !each(block) {
            return Ok(lines);
        }
    }
}

/// One worker: adds the items of each block that route to its targets, in order.
fn work(
    mut targets: Vec<Target>,
    routing: Option<Routing>,
    blocks: Receiver<Arc<Block>>,
) -> Result<Vec<Target>> {
    // Which of this worker's targets each partition is, if any.
    let count = routing.map_or(1, |r| r.count) as usize;
    let mut slot_of: Vec<Option<usize>> = vec![None; count];
    for (n, t) in targets.iter().enumerate() {
        if let Some(slot) = slot_of.get_mut(t.index as usize) {
            *slot = Some(n);
        }
    }
    for block in blocks {
        // The items of this block for each target (they borrow the block, so per block).
        let mut per_target: Vec<Vec<&[u8]>> = targets.iter().map(|_| Vec::new()).collect();
        match routing {
            Some(r) => {
                let partitions = block.partitions.get_or_init(|| {
                    block
                        .items()
                        .map(|item| route(item, r.count, r.routing_seed))
                        .collect()
                });
                for (item, &partition) in block.items().zip(partitions) {
                    if let Some(Some(n)) = slot_of.get(partition as usize) {
                        per_target[*n].push(item);
                    }
                }
            }
            None => {
                if let Some(Some(n)) = slot_of.first() {
                    per_target[*n].extend(block.items());
                }
            }
        }
        for (target, items) in targets.iter_mut().zip(&per_target) {
            add(target, items)?;
        }
    }
    Ok(targets)
}

/// Adds `items` to `target` in order, as one BF.INSERT would.
fn add(target: &mut Target, items: &[&[u8]]) -> Result<()> {
    if items.is_empty() {
        return Ok(());
    }
    let filter: &mut Filter = target
        .stored
        .ready_mut()
        .ok_or_else(|| anyhow!("partition {} is not complete", target.index))?;
    let mut outcome = filter.new_outcome(|| 0);
    outcome.reserve(items.len());
    filter.insert_many(items.iter().copied(), &mut Unlimited, &mut outcome);
    let added = outcome.added();
    target.items += added.len() as u64;
    target.added += added.iter().filter(|&&new| new).count() as u64;
    match outcome.error() {
        None => Ok(()),
        Some(InsertError::NonScalingFull) => bail!(
            "the non-scaling filter{} is full after {} items: give a larger --capacity",
            partition_text(target),
            target.added
        ),
        Some(e) => bail!("adding to the filter{}: {e}", partition_text(target)),
    }
}

fn partition_text(target: &Target) -> String {
    match target.stored.partition() {
        Some(p) => format!(" (partition {} of {})", p.index(), p.count()),
        None => String::new(),
    }
}
