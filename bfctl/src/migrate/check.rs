//! The check of a copy against its source: BF.INFO, BF.CARD and random probes answered alike.

use anyhow::{bail, Context, Result};
use rustbloom_client::KeyInfo;

use super::copy::Migrator;
use super::filter::{bf_shape, card, describe, mexists, same_filter};
use super::probes::Mismatch;
use super::PROBE_BATCH;

impl Migrator<'_> {
    /// Checks the copy in `tmp` against the source (`snapshot`: its BF.INFO during the copy).
    /// Ok(Ok(probes the source answered 1)) when the copy answers alike.
    pub(super) fn check(
        &mut self,
        key: &[u8],
        tmp: &[u8],
        snapshot: &KeyInfo,
    ) -> Result<std::result::Result<u64, Mismatch>> {
        let copy = bf_shape(self.dst, tmp).context("BF.INFO of the copy")?;
        if !same_filter(&copy, snapshot) {
            return Ok(Err(Mismatch::Differs(format!(
                "BF.INFO differs: source {}; copy {}",
                describe(snapshot),
                describe(&copy)
            ))));
        }
        let (sc, dc) = (
            card(self.src, key).context("BF.CARD on the source")?,
            card(self.dst, tmp).context("BF.CARD of the copy")?,
        );
        if sc != dc {
            return self.changed_or(
                key,
                snapshot,
                format!("BF.CARD differs: source {sc}, copy {dc}"),
            );
        }
        self.compare_probes(key, tmp, snapshot)
    }

    /// BF.MEXISTS of --sample random probes on the source and on the copy, answer by answer.
    /// Ok(Ok(probes the source answered 1)) when every answer is alike.
    fn compare_probes(
        &mut self,
        key: &[u8],
        tmp: &[u8],
        snapshot: &KeyInfo,
    ) -> Result<std::result::Result<u64, Mismatch>> {
        let mut left = self.opts.sample;
        let mut positives = 0u64;
        while left > 0 {
            let n = left.min(PROBE_BATCH as u64) as usize;
            let batch: Vec<Vec<u8>> = (0..n).map(|_| self.probes.item_for(snapshot)).collect();
            let a = mexists(self.src, key, &batch).context("BF.MEXISTS on the source")?;
            let b = mexists(self.dst, tmp, &batch).context("BF.MEXISTS of the copy")?;
            if a.len() != n || b.len() != n {
                bail!(
                    "BF.MEXISTS answered {} and {} answers for {n} probes",
                    a.len(),
                    b.len()
                );
            }
            if let Some(i) = (0..n).find(|&i| a[i] != b[i]) {
                return self.changed_or(
                    key,
                    snapshot,
                    format!(
                        "probe {:?} answers {} on the source and {} on the copy",
                        batch[i].escape_ascii().to_string(),
                        a[i],
                        b[i]
                    ),
                );
            }
            positives += a.iter().filter(|&&x| x == 1).count() as u64;
            left -= n as u64;
        }
        Ok(Ok(positives))
    }

    /// A difference is the copy's fault only when the source is still as it was copied.
    pub(super) fn changed_or(
        &mut self,
        key: &[u8],
        snapshot: &KeyInfo,
        what: String,
    ) -> Result<std::result::Result<u64, Mismatch>> {
        let now = bf_shape(self.src, key).context("BF.INFO on the source")?;
        if same_filter(&now, snapshot) {
            Ok(Err(Mismatch::Differs(what)))
        } else {
            Ok(Err(Mismatch::SourceChanged(format!(
                "{what}; the source changed meanwhile ({})",
                describe(&now)
            ))))
        }
    }
}
