//! What the reports of `bfctl info` and `bfctl plan` share, whatever the filter's kind: reading
//! a filter's bits and showing a number of bytes.

use anyhow::{anyhow, bail, Context, Result};
use rustbloom_client::{scandump, Connection};

use crate::bar;

/// Reads the whole filter at `key` (`total` bytes of bits) with BF.SCANDUMP, calling `each` with
/// every data chunk's byte offset and bits, in order, behind a progress bar. A data chunk is the
/// bits followed by an 8-byte checksum; iterator − 1 after the chunk is the byte offset just past
/// it.
pub fn scan_bits(
    c: &mut Connection,
    key: &str,
    total: u64,
    show: bool,
    mut each: impl FnMut(u64, &[u8]) -> Result<()>,
) -> Result<()> {
    let pb = bar(
        show,
        Some(total),
        "{spinner} scanning [{wide_bar}] {bytes}/{total_bytes} ETA {eta}",
    );
    let (mut it, _) =
        scandump(c, key.as_bytes(), 0).with_context(|| format!("BF.SCANDUMP {key} 0"))?;
    loop {
        let (next, data) =
            scandump(c, key.as_bytes(), it).with_context(|| format!("BF.SCANDUMP {key} {it}"))?;
        if next == 0 {
            break;
        }
        let bits = data
            .len()
            .checked_sub(8)
            .ok_or_else(|| anyhow!("BF.SCANDUMP chunk too short"))?;
        let start = it - 1;
        if next - 1 - start != bits as u64 || next - 1 > total {
            bail!("BF.SCANDUMP chunk of {bits} bytes does not match its iterators {it}..{next}");
        }
        each(start, &data[..bits])?;
        pb.set_position(next - 1);
        it = next;
    }
    pb.finish_and_clear();
    Ok(())
}

pub fn human_bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    format!("{v:.1} {}", UNITS[u])
}
