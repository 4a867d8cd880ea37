//! Reading items, one per line, from a file or stdin.

use std::fs::File;
use std::io::{self, BufRead, Read};
use std::path::Path;

use anyhow::{Context, Result};

/// The input to read (a file, or stdin for `-` or none) and its length when known.
pub fn open_input(file: Option<&Path>) -> Result<(Box<dyn Read>, Option<u64>)> {
    Ok(match file {
        None => (Box::new(io::stdin().lock()), None),
        Some(p) if p == Path::new("-") => (Box::new(io::stdin().lock()), None),
        Some(p) => {
            let f = File::open(p).with_context(|| format!("open {}", p.display()))?;
            let len = f.metadata().ok().map(|m| m.len());
            (Box::new(f), len)
        }
    })
}

/// Reads one line without its `\n` (and a `\r` before it); None at the end of input.
pub fn read_line(r: &mut impl BufRead, buf: &mut Vec<u8>) -> io::Result<Option<usize>> {
    buf.clear();
    let n = r.read_until(b'\n', buf)?;
    if n == 0 {
        return Ok(None);
    }
    if buf.last() == Some(&b'\n') {
        buf.pop();
        if buf.last() == Some(&b'\r') {
            buf.pop();
        }
    }
    Ok(Some(n))
}
