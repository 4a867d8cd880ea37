//! A timed pass: every batch sent down one TCP connection by one thread while another reads every
//! reply, with the server's CPU read from /proc before the first command and after the last
//! reply. The replies are only counted (zeros, ones, errors), so that reading them never holds the
//! server back; every other command goes through the testkit's connection.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::workload::Batches;
use crate::Target;

/// USER_HZ: 100 on every Linux configuration Debian ships.
const TICKS_PER_SECOND: f64 = 100.0;

/// Zeros and ones among the integers of a pass's replies, and its error replies.
#[derive(Default, Debug, Clone, Copy)]
pub struct Tally {
    pub zeros: u64,
    pub ones: u64,
    errors: u64,
}

/// The TCP connection the timed passes stream their commands down.
pub struct Pipe {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Pipe {
    pub fn connect(port: u16) -> std::io::Result<Pipe> {
        let stream = TcpStream::connect(("127.0.0.1", port))?;
        stream.set_nodelay(true)?;
        Ok(Pipe {
            reader: BufReader::with_capacity(1 << 16, stream.try_clone()?),
            writer: stream,
        })
    }

    /// Sends `command key <batch>` for every batch, `per_write` commands per write, from one
    /// thread while this one reads every reply; returns the replies' tally.
    fn send_all(&mut self, command: &str, key: &str, batches: &Batches, per_write: usize) -> Tally {
        let writer = self.writer.try_clone().expect("clone the TCP stream");
        let reader = &mut self.reader;
        std::thread::scope(|scope| {
            let sender =
                scope.spawn(move || write_batches(writer, command, key, batches, per_write));
            let mut tally = Tally::default();
            let mut line = Vec::new();
            for _ in 0..batches.batches.len() {
                tally_reply(reader, &mut line, &mut tally);
            }
            sender.join().expect("writer thread");
            tally
        })
    }
}

fn write_batches(
    mut writer: TcpStream,
    command: &str,
    key: &str,
    batches: &Batches,
    per_write: usize,
) {
    let mut out = Vec::with_capacity(1 << 17);
    let mut start = 0;
    for (i, &(end, items)) in batches.batches.iter().enumerate() {
        write!(
            out,
            "*{}\r\n${}\r\n{command}\r\n${}\r\n{key}\r\n",
            items + 2,
            command.len(),
            key.len()
        )
        .expect("write to a Vec");
        out.extend_from_slice(&batches.body[start..end]);
        start = end;
        if (i + 1) % per_write == 0 || out.len() >= 1 << 16 {
            writer.write_all(&out).expect("send commands");
            out.clear();
        }
    }
    writer.write_all(&out).expect("send commands");
}

fn read_line(reader: &mut impl BufRead, line: &mut Vec<u8>) {
    line.clear();
    reader.read_until(b'\n', line).expect("read reply");
    assert!(line.ends_with(b"\r\n"), "connection closed or bad reply");
    line.truncate(line.len() - 2);
}

/// Reads one reply, counting its integers (an array's elements one by one) into `tally`.
fn tally_reply(reader: &mut impl BufRead, line: &mut Vec<u8>, tally: &mut Tally) {
    read_line(reader, line);
    match line[0] {
        b':' => match &line[1..] {
            b"0" => tally.zeros += 1,
            b"1" => tally.ones += 1,
            _ => {}
        },
        b'*' => {
            let len: i64 = std::str::from_utf8(&line[1..])
                .ok()
                .and_then(|n| n.parse().ok())
                .expect("array length");
            for _ in 0..len {
                tally_reply(reader, line, tally);
            }
        }
        b'-' => {
            if tally.errors == 0 {
                eprintln!("error reply: {}", String::from_utf8_lossy(line));
            }
            tally.errors += 1;
        }
        _ => {}
    }
}

/// One timed pass on one server.
#[derive(Clone, Copy, Debug)]
pub struct Pass {
    pub ticks: u64,
    sched_ns: u64,
    pub wall: Duration,
    calls: usize,
    pub tally: Tally,
}

impl Pass {
    pub fn cpu_s(&self) -> f64 {
        self.ticks as f64 / TICKS_PER_SECOND
    }

    pub fn us_per_call(&self) -> f64 {
        self.cpu_s() * 1e6 / self.calls as f64
    }

    /// This pass's server CPU over `other`'s.
    pub fn ratio_to(&self, other: &Pass) -> f64 {
        self.ticks as f64 / other.ticks as f64
    }
}

/// (utime+stime in ticks, run time in ns from schedstat) of process `pid`.
fn server_cpu(pid: u32) -> (u64, u64) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("read /proc/PID/stat");
    let rest = stat.rsplit_once(") ").map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |i: usize| -> u64 { fields[i].parse().expect("a tick count in /proc/PID/stat") };
    let ticks = field(11) + field(12);
    let mut ns = 0;
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for task in tasks.flatten() {
            if let Ok(s) = std::fs::read_to_string(task.path().join("schedstat")) {
                ns += s
                    .split_whitespace()
                    .next()
                    .and_then(|f| f.parse::<u64>().ok())
                    .unwrap_or(0);
            }
        }
    }
    (ticks, ns)
}

/// Runs the passes and writes each one's raw figures to target/bench/server-table.tsv.
pub struct Recorder {
    raw: std::fs::File,
    /// PERF_DIR: `perf record -g` of the server during every pass of `perf_commands`.
    perf_dir: Option<PathBuf>,
    /// PERF_COMMANDS: the commands whose passes are recorded (default BF.MADD).
    perf_commands: String,
}

impl Recorder {
    pub fn create(raw_path: &std::path::Path) -> Recorder {
        let mut raw = std::fs::File::create(raw_path).expect("create the raw figures' file");
        writeln!(
            raw,
            "server\tkey\tround\tcommand\tcalls\titems\tticks\tsched_s\twall_s\tzeros\tones"
        )
        .expect("write the raw figures");
        Recorder {
            raw,
            perf_dir: std::env::var_os("PERF_DIR").map(PathBuf::from),
            perf_commands: std::env::var("PERF_COMMANDS").unwrap_or_else(|_| "BF.MADD".into()),
        }
    }

    /// One timed pass of `command key <batch>` over every batch, `per_write` commands per write;
    /// `label` names it in the raw figures.
    pub fn pass(
        &mut self,
        target: &mut Target,
        label: &str,
        command: &str,
        key: &str,
        (batches, per_write): (&Batches, usize),
    ) -> Pass {
        let perf = self.start_perf(target, label, command, key, batches);
        let pid = target.pid();
        let (t0, n0) = server_cpu(pid);
        let started = Instant::now();
        let tally = target.pipe.send_all(command, key, batches, per_write);
        let wall = started.elapsed();
        let (t1, n1) = server_cpu(pid);
        if let Some(child) = perf {
            stop_perf(child);
        }
        let pass = Pass {
            ticks: t1 - t0,
            sched_ns: n1 - n0,
            wall,
            calls: batches.batches.len(),
            tally,
        };
        self.write_raw(target.name, key, label, command, batches.items(), &pass);
        pass
    }

    fn write_raw(
        &mut self,
        server: &str,
        key: &str,
        label: &str,
        command: &str,
        items: usize,
        pass: &Pass,
    ) {
        writeln!(
            self.raw,
            "{server}\t{key}\t{label}\t{command}\t{}\t{items}\t{}\t{:.3}\t{}\t{}\t{}",
            pass.calls,
            pass.ticks,
            pass.sched_ns as f64 / 1e9,
            pass.wall.as_secs_f64(),
            pass.tally.zeros,
            pass.tally.ones
        )
        .expect("write the raw figures");
    }

    /// `perf record -g` of the server, when PERF_DIR is set and PERF_COMMANDS names `command`.
    fn start_perf(
        &self,
        target: &Target,
        label: &str,
        command: &str,
        key: &str,
        batches: &Batches,
    ) -> Option<Child> {
        let dir = self
            .perf_dir
            .as_ref()
            .filter(|_| self.perf_commands.split(',').any(|c| c == command))?;
        let out = dir.join(format!(
            "{}-{command}-{key}-{label}-{}.data",
            target.name,
            batches.items()
        ));
        let child = Command::new("perf")
            .args(["record", "-g", "-p", &target.pid().to_string(), "-o"])
            .arg(&out)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("perf");
        std::thread::sleep(Duration::from_millis(300));
        Some(child)
    }
}

/// Stops `perf record` the way it writes its file: SIGINT, then waits for it.
fn stop_perf(mut child: Child) {
    let _ = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status();
    let _ = child.wait();
}
