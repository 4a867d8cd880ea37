//! A filter as the migration compares it: the BF.INFO fields a copy keeps, and the source's and
//! the copy's answers.

use anyhow::{anyhow, bail, Result};
use redis::Value;
use rustbloom_client::filter::as_u64;
use rustbloom_client::{Connection, KeyInfo};

/// The BF.INFO fields a faithful copy keeps (Size is left out: it is each module's own
/// accounting of memory).
pub(super) fn same_filter(a: &KeyInfo, b: &KeyInfo) -> bool {
    a.capacity == b.capacity
        && a.items == b.items
        && a.filters == b.filters
        && a.expansion == b.expansion
        && a.window_ms == b.window_ms
        && a.partition == b.partition
}

pub(super) fn describe(s: &KeyInfo) -> String {
    format!(
        "capacity {}, items {}, layers {}, {}{}",
        s.capacity,
        s.items,
        s.filters,
        match (s.window_ms, s.expansion) {
            (Some(ms), _) => format!("window filter of {ms} ms"),
            (None, Some(x)) => format!("expansion {x}"),
            (None, None) => "expansion none (non-scaling)".into(),
        },
        match s.partition {
            Some((i, p, _)) => format!(", partition {i} of {p}"),
            None => String::new(),
        }
    )
}

pub(super) fn bf_shape(c: &mut Connection, key: &[u8]) -> Result<KeyInfo> {
    let shape = KeyInfo::read(c, key)?;
    if shape.filters == 0 {
        bail!("BF.INFO did not report capacity, items and number of filters");
    }
    Ok(shape)
}

pub(super) fn card(c: &mut Connection, key: &[u8]) -> Result<u64> {
    let v = c.query(redis::cmd("BF.CARD").arg(key))?;
    as_u64(&v).ok_or_else(|| anyhow!("unexpected BF.CARD reply {v:?}"))
}

pub(super) fn mexists(c: &mut Connection, key: &[u8], items: &[Vec<u8>]) -> Result<Vec<u64>> {
    let mut cmd = redis::cmd("BF.MEXISTS");
    cmd.arg(key);
    for i in items {
        cmd.arg(&i[..]);
    }
    match c.query(&cmd)? {
        Value::Array(a) => a
            .iter()
            .map(|v| as_u64(v).ok_or_else(|| anyhow!("unexpected BF.MEXISTS answer {v:?}")))
            .collect(),
        other => bail!("unexpected BF.MEXISTS reply {other:?}"),
    }
}
