//! The copy of one key: streamed into a temporary key beside its destination, checked, then
//! renamed onto it; and a partitioned filter's descriptor created once its partitions are copied.

use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use redis::Value;
use rustbloom_client::filter::as_u64;
use rustbloom_client::routing::{key_slot, slot_tag};
use rustbloom_client::{scandump, Connection, Filter, KeyInfo};

use super::filter::{bf_shape, describe, same_filter};
use super::keys::Kind;
use super::probes::{Mismatch, Probes};
use super::{show, Options, QUIET_REPORT};
use crate::dump::descriptor_args;

pub(super) struct Copied {
    chunks: u64,
    bytes: u64,
    /// Copied whole with DUMP / RESTORE rather than streamed chunk by chunk.
    whole: bool,
}

/// A copy that answers like its source.
struct Checked {
    copied: Copied,
    /// The source's BF.INFO during the copy.
    snapshot: KeyInfo,
    /// Probes the source (and so the copy) answered present.
    positives: u64,
    attempts: u32,
}

pub(super) struct Migrator<'a> {
    pub(super) src: &'a mut Connection,
    pub(super) dst: &'a mut Connection,
    pub(super) opts: &'a Options,
    /// A bar is drawn (otherwise a line about a long copy now and then).
    pub(super) progress: bool,
    pub(super) pb: indicatif::ProgressBar,
    pub(super) probes: Probes,
    /// Bytes copied by the keys done so far (for the bar).
    pub(super) done_bytes: u64,
}

impl Migrator<'_> {
    /// Streams the filter (a valkey-bloom object: copies it whole) into `tmp` on the
    /// destination; returns the source's BF.INFO from before the copy when it was unchanged
    /// after it.
    fn copy(
        &mut self,
        key: &[u8],
        tmp: &[u8],
        kind: Kind,
    ) -> Result<(Copied, std::result::Result<KeyInfo, Mismatch>)> {
        let before = bf_shape(self.src, key).context("BF.INFO on the source")?;
        // A leftover temporary key of an earlier, interrupted run: ours to remove.
        self.dst
            .query(redis::cmd("DEL").arg(tmp))
            .context("DEL of the temporary key")?;
        let copied = match kind {
            Kind::ValkeyBloom => self.dump_restore(key, tmp)?,
            Kind::Filter | Kind::Descriptor => self.stream(key, tmp)?,
        };
        let after = bf_shape(self.src, key).context("BF.INFO on the source after the copy")?;
        if !same_filter(&after, &before) {
            return Ok((
                copied,
                Err(Mismatch::SourceChanged(format!(
                    "before the copy: {}; after: {}",
                    describe(&before),
                    describe(&after)
                ))),
            ));
        }
        Ok((copied, Ok(before)))
    }

    /// BF.SCANDUMP of `key` on the source, chunk by chunk into BF.LOADCHUNK of `tmp` on the
    /// destination: one chunk in memory at a time, whatever the filter's size.
    fn stream(&mut self, key: &[u8], tmp: &[u8]) -> Result<Copied> {
        let mut it: u64 = 0;
        let mut copied = Copied {
            chunks: 0,
            bytes: 0,
            whole: false,
        };
        let mut last_report = Instant::now();
        loop {
            let (next, data) = scandump(self.src, key, it)
                .with_context(|| format!("BF.SCANDUMP {it} on the source"))?;
            if next == 0 {
                break;
            }
            if next <= it && it != 0 {
                bail!("BF.SCANDUMP on the source went back from iterator {it} to {next}");
            }
            self.load_chunk(tmp, next, &data, copied.chunks)?;
            copied.chunks += 1;
            copied.bytes += data.len() as u64;
            self.pb.set_position(self.done_bytes + copied.bytes);
            if !self.progress && last_report.elapsed() >= QUIET_REPORT {
                last_report = Instant::now();
                eprintln!(
                    "  {}: {} bytes in {} chunks so far",
                    show(key),
                    copied.bytes,
                    copied.chunks
                );
            }
            it = next;
        }
        Ok(copied)
    }

    /// DUMP of `key` on the source, RESTORE into `tmp` on the destination: valkey-bloom has no
    /// BF.SCANDUMP, and its DUMP payload is its own encoding of the object (the `bloomfltr` RDB
    /// value), which rustbloom restores as the very same object — same seed, bits and layers,
    /// so every item answers as before. The payload is held whole (valkey-bloom caps an object
    /// at bf.bloom-memory-usage-limit, 128 MiB by default).
    fn dump_restore(&mut self, key: &[u8], tmp: &[u8]) -> Result<Copied> {
        let payload = match self
            .src
            .query(redis::cmd("DUMP").arg(key))
            .context("DUMP on the source")?
        {
            Value::BulkString(bytes) => bytes,
            Value::Nil => bail!("the key is gone from the source"),
            other => bail!("unexpected DUMP reply {other:?}"),
        };
        self.dst
            .query(redis::cmd("RESTORE").arg(tmp).arg(0).arg(&payload[..]))
            .context(
                "RESTORE of the source's DUMP on the destination (it must be a rustbloom that \
                 reads valkey-bloom's values, on a server that reads the source's RDB version: \
                 the same server family, as new as the source)",
            )?;
        self.pb.set_position(self.done_bytes + payload.len() as u64);
        Ok(Copied {
            chunks: 1,
            bytes: payload.len() as u64,
            whole: true,
        })
    }

    /// BF.LOADCHUNK of the chunk `data` at iterator `next` into `tmp`, after `loaded` chunks.
    fn load_chunk(&mut self, tmp: &[u8], next: u64, data: &[u8], loaded: u64) -> Result<()> {
        self.dst
            .query(redis::cmd("BF.LOADCHUNK").arg(tmp).arg(next).arg(data))
            .map_err(|e| {
                let e = anyhow::Error::new(e);
                if loaded == 0 {
                    // The header: the destination does not read this dump format.
                    e.context(
                        "the destination refused the filter's header: it must be a rustbloom \
                         that reads the source's format (RedisBloom's or its own)",
                    )
                } else {
                    e
                }
            })
            .with_context(|| {
                format!(
                    "BF.LOADCHUNK {next} ({} bytes, chunk {}) on the destination",
                    data.len(),
                    loaded + 1
                )
            })?;
        Ok(())
    }

    /// Creates a partitioned filter's descriptor on the destination from the source's, once
    /// every one of its partitions was copied (`failed`: the keys that were not).
    fn migrate_descriptor(&mut self, key: &[u8], failed: &[(Vec<u8>, String)]) -> Result<String> {
        let filter = Filter::discover(self.src, key)?
            .filter(|f| f.partitioning().is_some())
            .ok_or_else(|| anyhow!("no longer a partitioned filter on the source"))?;
        let parts = filter.partitioning().map_or(0, |p| p.partitions);
        if let Some((k, _)) = failed
            .iter()
            .find(|(k, _)| filter.keys().iter().skip(1).any(|p| p == k))
        {
            bail!(
                "its partition {} was not copied; the descriptor is left out",
                show(k)
            );
        }
        let args = descriptor_args(&filter.info(self.src)?)?;
        if self.opts.replace {
            self.dst
                .query(redis::cmd("DEL").arg(key))
                .context("DEL of the destination's descriptor")?;
        }
        let mut cmd = redis::cmd("BF.RESERVE");
        cmd.arg(key);
        for a in &args {
            cmd.arg(a.as_slice());
        }
        self.dst
            .query(&cmd)
            .context("BF.RESERVE of the descriptor on the destination")?;
        Ok(format!("the descriptor of its {parts} partitions"))
    }

    /// Copies every key in order, a line for each; the keys that failed, with why.
    pub(super) fn migrate_all(&mut self, keys: &[(Vec<u8>, Kind)]) -> Vec<(Vec<u8>, String)> {
        let mut failed: Vec<(Vec<u8>, String)> = Vec::new();
        let n = keys.len();
        for (i, (key, kind)) in keys.iter().enumerate() {
            self.pb.set_message(format!("{}/{n} {}", i + 1, show(key)));
            let outcome = match kind {
                Kind::Filter | Kind::ValkeyBloom => self.migrate_key(key, *kind),
                Kind::Descriptor => self.migrate_descriptor(key, &failed),
            };
            match outcome {
                Ok(line) => self
                    .pb
                    .suspend(|| eprintln!("[{}/{n}] {}: copied, {line}", i + 1, show(key))),
                Err(e) => {
                    let msg = format!("{e:#}");
                    self.pb
                        .suspend(|| eprintln!("[{}/{n}] {}: FAILED: {msg}", i + 1, show(key)));
                    failed.push((key.clone(), msg));
                }
            }
        }
        failed
    }

    /// Copies one key; Ok(summary line) or the reason it was not copied. The destination key is
    /// written only by the final rename.
    fn migrate_key(&mut self, key: &[u8], kind: Kind) -> Result<String> {
        let start = Instant::now();
        // The hash tag of the key's own slot keeps the temporary key on the key's node, where
        // RENAME can move it (a cluster refuses a RENAME across slots).
        let tag = slot_tag(key_slot(key)).unwrap_or_default();
        let mut tmp = format!("{{{tag}}}bfctl-migrate-tmp-{}:", std::process::id()).into_bytes();
        tmp.extend_from_slice(key);
        let result = self.migrate_via(key, &tmp, kind, start);
        if result.is_err() {
            // A reply the client could not read leaves its connection out of step with the
            // server: fresh connections, so that the next key fails (or not) for its own reason.
            let _ = self.src.reconnect();
            let _ = self.dst.reconnect();
            // Never leave the temporary key behind (the destination key was not touched).
            let _ = self.dst.query(redis::cmd("DEL").arg(&tmp[..]));
        }
        result
    }

    /// The checked copy of `key` in `tmp` renamed onto `key`, with the source's TTL: its
    /// summary line.
    fn migrate_via(
        &mut self,
        key: &[u8],
        tmp: &[u8],
        kind: Kind,
        start: Instant,
    ) -> Result<String> {
        let checked = self.checked_copy(key, tmp, kind)?;
        // The source's TTL, taken after the copy: the key must not outlive it.
        let pttl = match self.src.query(redis::cmd("PTTL").arg(key))? {
            Value::Int(ms) => ms,
            _ => -1,
        };
        self.rename_onto(key, tmp)?;
        if pttl > 0 {
            self.dst
                .query(redis::cmd("PEXPIRE").arg(key).arg(pttl))
                .context("PEXPIRE of the destination key")?;
        }
        self.done_bytes += checked.copied.bytes;
        Ok(self.summary(&checked, pttl, start))
    }

    /// Copies `key` into `tmp` until a copy is taken from a source that did not change during
    /// it (at most 1 + --retries times), and checks it.
    fn checked_copy(&mut self, key: &[u8], tmp: &[u8], kind: Kind) -> Result<Checked> {
        let mut attempts = 0;
        loop {
            attempts += 1;
            let (copied, outcome) = self.copy(key, tmp, kind)?;
            let outcome = match outcome {
                Ok(snapshot) => match self.check(key, tmp, &snapshot)? {
                    Ok(positives) => Ok((snapshot, positives)),
                    Err(m) => Err(m),
                },
                Err(m) => Err(m),
            };
            match outcome {
                Ok((snapshot, positives)) => {
                    return Ok(Checked {
                        copied,
                        snapshot,
                        positives,
                        attempts,
                    })
                }
                Err(Mismatch::Differs(what)) => {
                    bail!("the copy does not answer like the source: {what}")
                }
                Err(Mismatch::SourceChanged(what)) => {
                    if attempts > self.opts.retries {
                        bail!(
                            "the source kept changing during the copy ({what}); tried {attempts} \
                             times: stop writes to it or raise --retries"
                        );
                    }
                    eprintln!(
                        "  {}: the source changed during the copy ({what}); copying again",
                        show(key)
                    );
                }
            }
        }
    }

    /// Moves the copy in `tmp` onto `key`: RENAME with --replace, else RENAMENX, refused when the
    /// key appeared on the destination meanwhile.
    fn rename_onto(&mut self, key: &[u8], tmp: &[u8]) -> Result<()> {
        if self.opts.replace {
            self.dst
                .query(redis::cmd("RENAME").arg(tmp).arg(key))
                .context("RENAME of the copy onto the destination key")?;
        } else {
            let v = self
                .dst
                .query(redis::cmd("RENAMENX").arg(tmp).arg(key))
                .context("RENAMENX of the copy onto the destination key")?;
            if as_u64(&v) != Some(1) {
                bail!("the key was created on the destination during the copy; left as it is (use --replace to overwrite)");
            }
        }
        Ok(())
    }

    /// The line printed for a key copied: its bytes, shape, probes, TTL and attempts.
    fn summary(&self, checked: &Checked, pttl: i64, start: Instant) -> String {
        let Checked {
            copied,
            snapshot,
            positives,
            attempts,
        } = checked;
        format!(
            "{} bytes {}; {}; {} random probes answered alike ({} of them present){}{} ({:.2} s)",
            copied.bytes,
            if copied.whole {
                "by DUMP/RESTORE (a valkey-bloom object)".to_string()
            } else {
                format!("in {} chunks", copied.chunks)
            },
            describe(snapshot),
            self.opts.sample,
            positives,
            if pttl > 0 {
                format!("; TTL {pttl} ms carried over")
            } else {
                String::new()
            },
            if *attempts > 1 {
                format!("; {attempts} attempts")
            } else {
                String::new()
            },
            start.elapsed().as_secs_f64()
        )
    }
}
