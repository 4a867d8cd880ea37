//! Click ids for the seeds' day (bench/seed_day.sh), written to stdout, never to a file.
//!
//! `clicks N [--from A] [--to B] [--stride S] [--progress FILE] [--timestamped] [--day-start MS]`
//!
//! Line n is `click:<user>:<ts>:<n>`: a user among ~10 million, a Unix-ms time spread over one
//! day in order (ts = MS + n·86,400,000/N, MS 1,795,000,000,000 unless --day-start says; a window
//! filter's reads go by the server's clock, so the window day ends near the clock), and n itself,
//! so every line is distinct and line n is the same in every run with the same MS.
//! Lines [A, B) are written (B defaults to N), every S-th; N sets the day's spread. Ids with
//! n >= N were never added by a load of lines [0, N): the false-positive probes. With
//! --progress, the number of lines written so far is rewritten into FILE (through a rename)
//! every 2^18 lines and at the end. With --timestamped, each line is `ts<TAB>id`, the input of
//! `bfctl load --timestamped`.

use std::io::{self, Write};
use std::process::ExitCode;

const DAY_MS: u64 = 86_400_000;
const DAY_START_MS: u64 = 1_795_000_000_000;
const USERS: u64 = 10_000_019;
const PROGRESS_EVERY: u64 = 1 << 18;

struct Args {
    n: u64,
    from: u64,
    to: Option<u64>,
    stride: u64,
    progress: Option<String>,
    timestamped: bool,
    day_start_ms: u64,
}

fn parse() -> Result<Args, String> {
    let mut args = std::env::args().skip(1);
    let number = |v: Option<String>, what: &str| -> Result<u64, String> {
        v.and_then(|v| v.parse().ok())
            .ok_or_else(|| format!("{what} needs a whole number"))
    };
    let mut out = Args {
        n: number(args.next(), "N")?,
        from: 0,
        to: None,
        stride: 1,
        progress: None,
        timestamped: false,
        day_start_ms: DAY_START_MS,
    };
    while let Some(a) = args.next() {
        match a.as_str() {
            "--from" => out.from = number(args.next(), "--from")?,
            "--to" => out.to = Some(number(args.next(), "--to")?),
            "--stride" => out.stride = number(args.next(), "--stride")?.max(1),
            "--progress" => out.progress = args.next(),
            "--timestamped" => out.timestamped = true,
            "--day-start" => out.day_start_ms = number(args.next(), "--day-start")?,
            other => return Err(format!("unknown argument {other}")),
        }
    }
    if out.n == 0 {
        return Err("N must be at least 1".into());
    }
    Ok(out)
}

fn note_progress(path: &str, written: u64) -> io::Result<()> {
    let tmp = format!("{path}.tmp");
    std::fs::write(&tmp, written.to_string())?;
    std::fs::rename(tmp, path)
}

/// Appends `v` in decimal: formatting through `write!` took most of the generator's time, and
/// at 10^9 lines the generator shares the machine with the load or build it feeds.
fn push_decimal(line: &mut Vec<u8>, mut v: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    line.extend_from_slice(&digits[at..]);
}

/// Milliseconds into the day of line `n` of `total`: n·DAY_MS/total, in 64 bits while the
/// product fits (any n below 2·10^11), which is several times faster than a 128-bit division.
fn day_offset(n: u64, total: u64) -> u64 {
    match n.checked_mul(DAY_MS) {
        Some(product) => product / total,
        None => (u128::from(n) * u128::from(DAY_MS) / u128::from(total)) as u64,
    }
}

fn write_lines(a: &Args) -> io::Result<()> {
    const FLUSH_AT: usize = 1 << 20;
    let mut out = io::stdout().lock();
    let mut buf: Vec<u8> = Vec::with_capacity(FLUSH_AT + 128);
    let mut written = 0u64;
    let mut n = a.from;
    let to = a.to.unwrap_or(a.n);
    while n < to {
        let user = n.wrapping_mul(2_654_435_761) % USERS;
        let ts = a.day_start_ms + day_offset(n, a.n);
        if a.timestamped {
            push_decimal(&mut buf, ts);
            buf.push(b'\t');
        }
        buf.extend_from_slice(b"click:");
        push_decimal(&mut buf, user);
        buf.push(b':');
        push_decimal(&mut buf, ts);
        buf.push(b':');
        push_decimal(&mut buf, n);
        buf.push(b'\n');
        written += 1;
        if buf.len() >= FLUSH_AT {
            out.write_all(&buf)?;
            buf.clear();
        }
        if written.is_multiple_of(PROGRESS_EVERY) {
            if let Some(p) = &a.progress {
                out.write_all(&buf)?;
                buf.clear();
                out.flush()?;
                note_progress(p, written)?;
            }
        }
        n = n.saturating_add(a.stride);
    }
    out.write_all(&buf)?;
    out.flush()?;
    if let Some(p) = &a.progress {
        note_progress(p, written)?;
    }
    Ok(())
}

fn main() -> ExitCode {
    let args = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("clicks: {e}");
            return ExitCode::from(2);
        }
    };
    match write_lines(&args) {
        Ok(()) => ExitCode::SUCCESS,
        // A reader that stopped early (head, a failed load) closed the pipe.
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("clicks: {e}");
            ExitCode::FAILURE
        }
    }
}
