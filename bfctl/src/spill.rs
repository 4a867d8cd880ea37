//! The input of a partitioned `load --offline` split by partition in one pass: each partition's
//! lines into a file of its own in a temporary directory, so that each partition is then built
//! from its own items alone (one read of the input in all, stdin included) and never more than
//! one partition is held in memory.
//!
//! Every item is written followed by `\r\n`, whatever its own end was: reading a line drops
//! exactly one `\r\n` (or `\n`), so an item that itself ends in `\r` comes back whole.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use rustbloom_core::partition::route;

use crate::fill::Routing;
use crate::input::LineBlocks;

/// Buffer per partition file while splitting (4096 partitions: 256 MiB at most).
const SPILL_BUFFER: usize = 64 << 10;
/// Lines taken from the input per step.
const STEP_LINES: usize = 1 << 16;

/// A temporary directory of one file per partition, removed when dropped.
pub struct Spill {
    dir: PathBuf,
    pub lines: u64,
}

impl Spill {
    /// Splits `file` (stdin for `-`) by `routing` into a new directory under the system's
    /// temporary directory ($TMPDIR, else /tmp).
    pub fn split(file: &Path, routing: Routing) -> Result<Spill> {
        let dir = std::env::temp_dir().join(format!(
            "bfctl-offline-{}-{}",
            std::process::id(),
            crate::build::random_seed()
        ));
        std::fs::create_dir(&dir).with_context(|| format!("create {}", dir.display()))?;
        let mut spill = Spill { dir, lines: 0 };
        spill.lines = spill.write(file, routing)?;
        Ok(spill)
    }

    fn write(&self, file: &Path, routing: Routing) -> Result<u64> {
        let mut writers = (0..routing.count)
            .map(|i| {
                let path = self.path(i);
                File::create(&path)
                    .map(|f| BufWriter::with_capacity(SPILL_BUFFER, f))
                    .with_context(|| format!("create {}", path.display()))
            })
            .collect::<Result<Vec<_>>>()?;
        let mut input = LineBlocks::open(Some(file))?;
        let mut lines = 0u64;
        let mut failed = None;
        loop {
            let taken = input
                .take(STEP_LINES, |line| {
                    if failed.is_some() {
                        return;
                    }
                    let partition = route(line.item, routing.count, routing.routing_seed);
                    let w = &mut writers[partition as usize];
                    if let Err(e) = w.write_all(line.item).and_then(|()| w.write_all(b"\r\n")) {
                        failed = Some(e);
                    }
                })
                .context("reading the items")?;
            if let Some(e) = failed {
                return Err(e).context(format!("writing under {}", self.dir.display()));
            }
            if taken == 0 {
                break;
            }
            lines += taken as u64;
        }
        for w in &mut writers {
            w.flush()
                .with_context(|| format!("writing under {}", self.dir.display()))?;
        }
        Ok(lines)
    }

    /// The file of partition `index`'s lines.
    pub fn path(&self, index: u32) -> PathBuf {
        self.dir.join(format!("partition-{index}"))
    }

    /// Removes partition `index`'s file once it is merged (its disk space back at once).
    pub fn done(&self, index: u32) {
        let _ = std::fs::remove_file(self.path(index));
    }
}

impl Drop for Spill {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Items as `bfctl load` reads them from `path`.
    fn items(path: &Path) -> Vec<Vec<u8>> {
        let mut input = LineBlocks::open(Some(path)).unwrap();
        let mut out = Vec::new();
        while input
            .take(100, |line| out.push(line.item.to_vec()))
            .unwrap()
            > 0
        {}
        out
    }

    #[test]
    fn every_item_comes_back_whole_in_its_partition() {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("in");
        // CRLF and LF ends, an item ending in \r, an empty item, a last line without an end.
        std::fs::write(&input, b"a\r\r\nb\n\nc\r\nx\ry\nlast").unwrap();
        let routing = Routing {
            count: 3,
            routing_seed: 7,
        };
        let spill = Spill::split(&input, routing).unwrap();
        assert_eq!(spill.lines, 6);
        let want = items(&input);
        assert_eq!(want.len(), 6);
        let mut got = Vec::new();
        for i in 0..3 {
            let part = items(&spill.path(i));
            assert!(part.iter().all(|item| route(item, 3, 7) == i));
            got.extend(part);
        }
        got.sort();
        let mut want = want;
        want.sort();
        assert_eq!(got, want);
        let dir_of_spill = spill.dir.clone();
        drop(spill);
        assert!(!dir_of_spill.exists(), "the directory is removed");
    }
}
