//! Reading items, one per line, from a file or stdin.

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, RawFd};
use std::path::Path;

use anyhow::{Context, Result};

/// A file or stdin read in large blocks and cut into lines in place: no copy and no allocation
/// per line. A line's item is the line without its end (`\n`, or `\r\n`: a CRLF file holds the
/// same items as its LF copy); the last line counts even without an end.
pub struct LineBlocks {
    input: Box<dyn Read>,
    fd: RawFd,
    buf: Vec<u8>,
    /// The unread part is `buf[start..end]`.
    start: usize,
    end: usize,
    eof: bool,
}

/// One line of input: its item and its end as it was (`\n`, `\r\n`, or empty for a last line
/// without one), both in the input's own buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Line<'a> {
    pub item: &'a [u8],
    pub end: &'a [u8],
}

impl Line<'_> {
    /// Bytes of input the line took.
    pub fn len(&self) -> usize {
        self.item.len() + self.end.len()
    }
}

/// Bytes asked of the input per read.
const BLOCK: usize = 1 << 20;

impl LineBlocks {
    /// `file`, or stdin for `-` or none.
    pub fn open(file: Option<&Path>) -> Result<LineBlocks> {
        let (input, fd): (Box<dyn Read>, RawFd) = match file {
            Some(p) if p != Path::new("-") => {
                let f = File::open(p).with_context(|| format!("open {}", p.display()))?;
                let fd = f.as_raw_fd();
                (Box::new(f), fd)
            }
            _ => {
                let stdin = io::stdin().lock();
                let fd = stdin.as_raw_fd();
                widen_pipe(fd);
                (Box::new(stdin), fd)
            }
        };
        Ok(LineBlocks {
            input,
            fd,
            buf: vec![0; BLOCK],
            start: 0,
            end: 0,
            eof: false,
        })
    }

    /// True once the input has ended and every line was taken.
    pub fn done(&self) -> bool {
        self.eof && self.start == self.end
    }

    /// True when a read would not wait: input is buffered, waiting in the pipe or file, or the
    /// input has ended. A slow stream (`tail -f`) is answered line by line when the caller
    /// finishes its work in hand before reading on.
    pub fn ready(&self) -> bool {
        self.eof
            || memchr::memchr(b'\n', &self.buf[self.start..self.end]).is_some()
            || self.readable()
    }

    /// True when the input has bytes waiting (or has ended): a read would not wait.
    fn readable(&self) -> bool {
        let mut pfd = libc::pollfd {
            fd: self.fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: `pfd` is one valid pollfd that outlives the call; a zero timeout never blocks.
        let n = unsafe { libc::poll(&mut pfd, 1, 0) };
        n != 0
    }

    /// Reads once more (waiting for input), keeping the unread part. The buffer grows only when
    /// the unread part leaves less than half a block free (a line longer than the buffer, or a
    /// round of many lines), and then by one block: only what is read is ever written, so a
    /// long line costs its own length once (the vector's spare capacity is never touched).
    fn fill(&mut self) -> io::Result<()> {
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.buf.len() - self.end < BLOCK / 2 {
            self.buf.resize(self.end.saturating_add(BLOCK), 0);
        }
        loop {
            match self.input.read(&mut self.buf[self.end..]) {
                Ok(0) => {
                    self.eof = true;
                    return Ok(());
                }
                Ok(n) => {
                    self.end += n;
                    return Ok(());
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// The whole line at the start of the unread part, if one is buffered (a last line without
    /// an end once the input has ended): the line and the bytes it takes.
    fn next_line(&self, from: usize) -> Option<(usize, usize, usize)> {
        let rest = &self.buf[from..self.end];
        match memchr::memchr(b'\n', rest) {
            Some(i) => {
                let item = if i > 0 && rest[i - 1] == b'\r' {
                    i - 1
                } else {
                    i
                };
                Some((from, from + item, from + i + 1))
            }
            None if self.eof && !rest.is_empty() => Some((from, self.end, self.end)),
            None => None,
        }
    }

    /// Passes up to `most` lines to `each`, reading (and so perhaps waiting) only when no
    /// whole line is buffered; answers how many were passed (0 only at the end of input).
    pub fn take(&mut self, most: usize, mut each: impl FnMut(Line<'_>)) -> io::Result<usize> {
        let mut taken = 0;
        while taken < most {
            match self.next_line(self.start) {
                Some((from, item_end, line_end)) => {
                    each(Line {
                        item: &self.buf[from..item_end],
                        end: &self.buf[item_end..line_end],
                    });
                    self.start = line_end;
                    taken += 1;
                }
                None if self.eof || taken > 0 => break,
                None => self.fill()?,
            }
        }
        Ok(taken)
    }

    /// The next up to `most` lines, in the input's own buffer (no copy): waits for the first
    /// line, then with `idle_stops` stops early when no more input is waiting (so a slow stream
    /// is answered as it comes). Empty only at the end of input.
    pub fn round(&mut self, most: usize, idle_stops: bool) -> io::Result<Vec<Line<'_>>> {
        // Bounds of the lines found so far, as offsets from `start` (a read moves the buffer).
        let mut bounds: Vec<(usize, usize, usize)> = Vec::new();
        let mut scanned = 0;
        while bounds.len() < most {
            match self.next_line(self.start + scanned) {
                Some((from, item_end, line_end)) => {
                    let base = self.start;
                    bounds.push((from - base, item_end - base, line_end - base));
                    scanned = line_end - base;
                }
                None if self.eof => break,
                None if idle_stops && !bounds.is_empty() && !self.readable() => break,
                None => self.fill()?,
            }
        }
        let base = self.start;
        self.start += scanned;
        let buf = &self.buf;
        Ok(bounds
            .into_iter()
            .map(|(from, item_end, line_end)| Line {
                item: &buf[base + from..base + item_end],
                end: &buf[base + item_end..base + line_end],
            })
            .collect())
    }
}

/// Bytes a pipe on stdin is asked to hold: what an unprivileged process may ask by default
/// (`/proc/sys/fs/pipe-max-size`).
const PIPE_BYTES: libc::c_int = 1 << 20;

/// Widens the pipe `fd` reads from, when it is one: a generator feeding `bfctl build` through
/// the default 64 KiB had both processes sleeping and waking every 64 KiB, tens of thousands
/// of times a second. A hint: a refusal (not a pipe, a lower limit) changes nothing else.
fn widen_pipe(fd: RawFd) {
    // SAFETY: F_SETPIPE_SZ only resizes the kernel's buffer of a pipe (EBADF or EINVAL, and
    // nothing changed, for anything else); `fd` is open for the call.
    unsafe { libc::fcntl(fd, libc::F_SETPIPE_SZ, PIPE_BYTES) };
}

/// A timestamped line, `unix_ms<TAB>item`: its time and its item (everything after the first
/// tab, tabs included), or why the line is not one.
pub fn timestamped(line: &[u8]) -> std::result::Result<(u64, &[u8]), String> {
    let Some(tab) = memchr::memchr(b'\t', line) else {
        return Err("no tab: a timestamped line is unix_ms<TAB>item".into());
    };
    let (time, item) = (&line[..tab], &line[tab + 1..]);
    let ms = std::str::from_utf8(time)
        .ok()
        .filter(|t| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|t| t.parse::<u64>().ok())
        .ok_or_else(|| {
            format!(
                "bad timestamp {:?}: expected Unix milliseconds (digits only) before the tab",
                String::from_utf8_lossy(&time[..time.len().min(40)])
            )
        })?;
    Ok((ms, item))
}

#[cfg(test)]
mod tests {
    use super::timestamped;

    #[test]
    fn timestamped_lines() {
        assert_eq!(
            timestamped(b"1700000000000\tclick:1"),
            Ok((1_700_000_000_000, &b"click:1"[..]))
        );
        assert_eq!(timestamped(b"5\ta\tb"), Ok((5, &b"a\tb"[..])));
        assert_eq!(timestamped(b"5\t"), Ok((5, &b""[..])));
        assert!(timestamped(b"click:1").unwrap_err().contains("no tab"));
        for bad in [
            &b"\tx"[..],
            b"-5\tx",
            b"+5\tx",
            b"1.5\tx",
            b"99999999999999999999\tx",
        ] {
            assert!(
                timestamped(bad).unwrap_err().contains("bad timestamp"),
                "{bad:?}"
            );
        }
    }
}
