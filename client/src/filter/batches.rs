//! Items grouped by partition into batched commands (BF.INSERT, BF.ADDAT, BF.MEXISTS), which a
//! transport packs straight into its buffer or builds as `redis::Cmd`s.

use std::ops::Range;

#[cfg(feature = "async")]
use redis::Cmd;

use super::Filter;
use crate::pack::{array_header, bulk, decimal};
use crate::routing::partition_of;
use crate::transport::Commands;

/// The command of a batch, before its key and items.
#[derive(Clone, Copy)]
pub(crate) enum Head {
    /// `BF.INSERT key NOCREATE ITEMS …`: adds, never creating the filter.
    Insert,
    /// `BF.ADDAT key at_ms …`: adds to a window filter at a time (never creates either).
    At(u64),
    /// `BF.MEXISTS key …`.
    MExists,
}

/// `items` grouped by partition (input order within each), cut into commands of at most
/// `batch` items.
pub(crate) struct Batches<'a> {
    filter: &'a Filter,
    head: Head,
    items: &'a [&'a [u8]],
    /// Input positions, partition by partition.
    order: Vec<usize>,
    /// Each command's partition and its items' range of `order`.
    cmds: Vec<(Option<u32>, Range<usize>)>,
}

impl<'a> Batches<'a> {
    pub(crate) fn new(
        filter: &'a Filter,
        items: &'a [&'a [u8]],
        batch: usize,
        head: Head,
    ) -> Batches<'a> {
        let batch = batch.max(1);
        let (order, groups) = match filter.partitioning() {
            None => ((0..items.len()).collect(), vec![(None, 0..items.len())]),
            Some(r) => group_by_partition(items, |item| {
                partition_of(item, r.routing_seed, r.partitions)
            }),
        };
        let mut cmds = Vec::with_capacity(groups.len() + items.len() / batch);
        for (part, range) in groups {
            let mut from = range.start;
            while from < range.end {
                let to = range.end.min(from.saturating_add(batch));
                cmds.push((part, from..to));
                from = to;
            }
        }
        Batches {
            filter,
            head,
            items,
            order,
            cmds,
        }
    }

    /// The partition of command `i` (`None` on a plain filter).
    pub(crate) fn part(&self, i: usize) -> Option<u32> {
        self.cmds[i].0
    }

    /// The input positions of command `i`'s items, in order.
    pub(crate) fn positions(&self, i: usize) -> &[usize] {
        &self.order[self.cmds[i].1.clone()]
    }

    /// The key of partition `part` (the name when `None`).
    pub(crate) fn key(&self, part: Option<u32>) -> &'a [u8] {
        self.filter.key_of(part)
    }

    /// The partitions of the commands, each once, in order.
    pub(crate) fn parts(&self) -> impl Iterator<Item = Option<u32>> + '_ {
        let mut last = None;
        self.cmds.iter().filter_map(move |&(part, _)| {
            let first = last != Some(part);
            last = Some(part);
            first.then_some(part)
        })
    }

    /// The arguments of command `i` before its items.
    fn head_args<'s>(&'s self, i: usize, at: &'s mut [u8; 20]) -> [&'s [u8]; 4] {
        let key = self.key(self.part(i));
        match self.head {
            Head::Insert => [b"BF.INSERT", key, b"NOCREATE", b"ITEMS"],
            Head::At(ms) => {
                let n = decimal(at, ms);
                let at: &'s [u8; 20] = at;
                [b"BF.ADDAT", key, &at[..n], b""]
            }
            Head::MExists => [b"BF.MEXISTS", key, b"", b""],
        }
    }

    fn head_len(&self) -> usize {
        match self.head {
            Head::Insert => 4,
            Head::At(_) => 3,
            Head::MExists => 2,
        }
    }
}

impl Commands for Batches<'_> {
    fn len(&self) -> usize {
        self.cmds.len()
    }

    fn pack(&self, i: usize, out: &mut Vec<u8>) {
        let positions = self.positions(i);
        let mut at = [0u8; 20];
        let head = self.head_args(i, &mut at);
        array_header(out, (self.head_len() + positions.len()) as u64);
        for arg in &head[..self.head_len()] {
            bulk(out, arg);
        }
        for &p in positions {
            bulk(out, self.items[p]);
        }
    }

    fn key(&self, i: usize) -> &[u8] {
        Batches::key(self, self.part(i))
    }

    #[cfg(feature = "async")]
    fn cmd(&self, i: usize) -> Cmd {
        let mut at = [0u8; 20];
        let head = &self.head_args(i, &mut at)[..self.head_len()];
        let positions = self.positions(i);
        let data: usize = head.iter().map(|a| a.len()).sum::<usize>()
            + positions
                .iter()
                .map(|&p| self.items[p].len())
                .sum::<usize>();
        let mut cmd = Cmd::with_capacity(head.len() + positions.len(), data);
        for arg in head {
            cmd.arg(*arg);
        }
        for &p in positions {
            cmd.arg(self.items[p]);
        }
        cmd
    }
}

/// The input positions of `items` ordered by `partition` (a counting sort, input order kept
/// within each), and each partition's range of them, by partition.
#[allow(clippy::type_complexity)]
fn group_by_partition(
    items: &[&[u8]],
    partition: impl Fn(&[u8]) -> u32,
) -> (Vec<usize>, Vec<(Option<u32>, Range<usize>)>) {
    let parts: Vec<u32> = items.iter().map(|item| partition(item)).collect();
    let count = parts.iter().max().map_or(0, |&m| m as usize + 1);
    // starts[p]: where partition p's positions begin, then where the next one goes.
    let mut starts = vec![0usize; count + 1];
    for &p in &parts {
        starts[p as usize + 1] += 1;
    }
    for p in 1..=count {
        starts[p] += starts[p - 1];
    }
    let groups = (0..count)
        .filter(|&p| starts[p] < starts[p + 1])
        .map(|p| (Some(p as u32), starts[p]..starts[p + 1]))
        .collect();
    let mut order = vec![0usize; items.len()];
    for (i, &p) in parts.iter().enumerate() {
        order[starts[p as usize]] = i;
        starts[p as usize] += 1;
    }
    (order, groups)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filter::Partitioning;
    use crate::routing::partition_keys;

    fn partitioned(partitions: u32) -> Filter {
        Filter {
            name: b"f".to_vec(),
            partitioning: Some(Partitioning {
                partitions,
                routing_seed: 42,
                keys: partition_keys(b"f", partitions),
            }),
        }
    }

    #[test]
    fn every_item_once_in_its_partition_in_input_order() {
        let words: Vec<Vec<u8>> = (0..2000).map(|i| format!("w{i}").into_bytes()).collect();
        let items: Vec<&[u8]> = words.iter().map(Vec::as_slice).collect();
        let filter = partitioned(7);
        let batches = Batches::new(&filter, &items, 100, Head::Insert);
        let mut seen = vec![false; items.len()];
        let mut last: Option<(Option<u32>, usize)> = None;
        for i in 0..batches.len() {
            let part = batches.part(i);
            assert!(batches.positions(i).len() <= 100);
            for &p in batches.positions(i) {
                assert_eq!(part, Some(partition_of(items[p], 42, 7)));
                assert!(!std::mem::replace(&mut seen[p], true));
                if let Some((q, prev)) = last.filter(|(q, _)| *q == part) {
                    assert!(prev < p, "partition {q:?}: {prev} before {p}");
                }
                last = Some((part, p));
            }
        }
        assert!(seen.iter().all(|&s| s));
        let parts: Vec<Option<u32>> = batches.parts().collect();
        assert_eq!(parts, (0..7).map(Some).collect::<Vec<_>>());
    }

    #[test]
    fn packed_as_the_commands_built_for_the_redis_crate() {
        let items: Vec<&[u8]> = vec![b"a", b"", b"ccc", b"a", b"dd\r\n"];
        for filter in [Filter::plain(b"plain"), partitioned(3)] {
            for head in [Head::Insert, Head::At(1_700_000_000_123), Head::MExists] {
                let batches = Batches::new(&filter, &items, 2, head);
                for i in 0..batches.len() {
                    let mut packed = Vec::new();
                    batches.pack(i, &mut packed);
                    assert_eq!(packed, batches.cmd(i).get_packed_command());
                }
            }
        }
    }
}
