//! Reading items, one per line, from a file or stdin.

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, RawFd};
use std::path::Path;

use anyhow::{Context, Result};

/// A file or stdin read in large blocks and cut into lines in place: no copy and no allocation
/// per line. A line is given without its `\n` (and a `\r` before it); the last one counts even
/// without its `\n`.
pub struct LineBlocks {
    input: Box<dyn Read>,
    fd: RawFd,
    buf: Vec<u8>,
    /// The unread part is `buf[start..end]`.
    start: usize,
    end: usize,
    eof: bool,
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
        if self.eof || memchr::memchr(b'\n', &self.buf[self.start..self.end]).is_some() {
            return true;
        }
        let mut pfd = libc::pollfd {
            fd: self.fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: `pfd` is one valid pollfd that outlives the call; a zero timeout never blocks.
        let n = unsafe { libc::poll(&mut pfd, 1, 0) };
        n != 0
    }

    /// Reads once more (waiting for input), keeping the unfinished last line.
    fn fill(&mut self) -> io::Result<()> {
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.buf.len() - self.end < BLOCK / 2 {
            // A line longer than the buffer: make room for it.
            let grown = self.buf.len().saturating_mul(2);
            self.buf.resize(grown, 0);
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

    /// Passes up to `most` lines to `each`, reading (and so perhaps waiting) only when no
    /// whole line is buffered; answers how many were passed (0 only at the end of input).
    pub fn take(&mut self, most: usize, mut each: impl FnMut(&[u8])) -> io::Result<usize> {
        let mut taken = 0;
        while taken < most {
            let rest = &self.buf[self.start..self.end];
            let line_end = match memchr::memchr(b'\n', rest) {
                Some(i) => i,
                None if self.eof => {
                    if rest.is_empty() {
                        break;
                    }
                    rest.len()
                }
                None if taken > 0 => break,
                None => {
                    self.fill()?;
                    continue;
                }
            };
            let mut line = &rest[..line_end];
            if rest.get(line_end) == Some(&b'\n') {
                if let Some(stripped) = line.strip_suffix(b"\r") {
                    line = stripped;
                }
                self.start += line_end + 1;
            } else {
                self.start += line_end;
            }
            each(line);
            taken += 1;
        }
        Ok(taken)
    }
}

/// A round of lines gathered into one buffer (no allocation per line), passed on as slices.
#[derive(Default)]
pub struct Round {
    text: Vec<u8>,
    ends: Vec<usize>,
}

impl Round {
    /// Replaces the round with up to `most` lines of `input`; with `idle_stops`, stops early
    /// when no more input is waiting (so a slow stream is answered as it comes). Answers how
    /// many lines it holds (0 only at the end of input).
    pub fn fill(
        &mut self,
        input: &mut LineBlocks,
        most: usize,
        idle_stops: bool,
    ) -> io::Result<usize> {
        self.text.clear();
        self.ends.clear();
        while self.ends.len() < most {
            let got = input.take(most - self.ends.len(), |line| {
                self.text.extend_from_slice(line);
                self.ends.push(self.text.len());
            })?;
            if got == 0 || (idle_stops && !input.ready()) {
                break;
            }
        }
        Ok(self.ends.len())
    }

    /// The lines, in order.
    pub fn items(&self) -> Vec<&[u8]> {
        let mut out = Vec::with_capacity(self.ends.len());
        let mut from = 0;
        for &to in &self.ends {
            out.push(&self.text[from..to]);
            from = to;
        }
        out
    }

    /// Bytes of input the round took (each line with one byte for its end).
    pub fn input_bytes(&self) -> u64 {
        (self.text.len() + self.ends.len()) as u64
    }
}
