//! The README's bfctl transcripts, replayed: every ```text block of README.md with a
//! `$ target/release/bfctl` line is run, command by command, against test servers, and what each
//! command prints (its stdout, then its stderr) is compared line by line with the lines the
//! README shows below it. A figure the README shows that bfctl no longer prints fails here, with
//! a diff of the two.
//!
//! How a README command runs here:
//! - each `$ ` line (with the lines a trailing `\` continues) runs in `sh -c`, in README order,
//!   sharing the servers and one scratch directory; `$ cargo …` lines (the build) are not run;
//! - `target/release/bfctl` is the bfctl cargo built for this test, `redis-cli` talks to the
//!   first server, and `/tmp/` is the scratch directory;
//! - the README's hosts are test servers: `127.0.0.1:6379` (bfctl's default URL, given to it as
//!   `BFCTL_URL`) the first, `old-host:6379` and `new-host:6379` two more; in what bfctl prints,
//!   the test servers' addresses and the scratch directory read back as the README's names;
//! - the servers run `bf.seed-mode fixed`, so the counts that depend on a filter's seed (false
//!   positives: "already present") are those of the run the README shows.
//!
//! What varies by run, and the README says so next to its transcripts: timings (a number before
//! ` s,` or ` s)`, as in `(0.04 s)`, and before ` items/s`) and the count of migrate's random
//! probes that happen to be present (a number before ` of them present`). Those numbers are
//! masked on both sides; everything else must match byte for byte.

use std::process::{Command, Stdio};

use rustbloom_testkit::*;

const BFCTL: &str = env!("CARGO_BIN_EXE_bfctl");
/// How the README runs bfctl: the binary `cargo build --release` leaves.
const README_BFCTL: &str = "target/release/bfctl";
const PROMPT: &str = "$ ";
/// Where a README `/tmp/` stands while the rest of a command is rewritten: no README has it.
const SCRATCH_MARK: &str = "\u{0}scratch\u{0}";

/// Numbers followed by one of these vary by run: timings, rates, random probes present.
const VARYING_BEFORE: [&str; 4] = [" s,", " s)", " items/s", " of them present"];

fn readme() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md");
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {path}: {e}"))
}

/// One shell command of a transcript and the lines the README shows it printing.
struct Step {
    /// 1-based line of README.md.
    line: usize,
    command: String,
    expected: Vec<String>,
}

/// The steps of every ```text block that runs `target/release/bfctl`, in README order.
fn bfctl_transcripts(readme: &str) -> Vec<Step> {
    let mut steps = Vec::new();
    let mut block: Option<Vec<Step>> = None;
    let mut in_other_block = false;
    let mut continued = false;
    for (i, line) in readme.lines().enumerate() {
        if let Some(fence) = line.strip_prefix("```") {
            if let Some(b) = block.take() {
                let runs_bfctl = b.iter().any(|s| s.command.contains(README_BFCTL));
                if runs_bfctl {
                    steps.extend(b);
                }
            } else if in_other_block {
                in_other_block = false;
            } else if fence.trim() == "text" {
                block = Some(Vec::new());
            } else {
                in_other_block = true;
            }
            continue;
        }
        let Some(b) = block.as_mut() else { continue };
        if let Some(step) = b.last_mut().filter(|_| continued) {
            step.command.push('\n');
            step.command.push_str(line);
            continued = line.ends_with('\\');
        } else if let Some(command) = line.strip_prefix(PROMPT) {
            b.push(Step {
                line: i + 1,
                command: command.to_string(),
                expected: Vec::new(),
            });
            continued = line.ends_with('\\');
        } else if let Some(step) = b.last_mut() {
            step.expected.push(line.to_string());
        }
    }
    steps
}

/// `line` with every number that varies by run (see [`VARYING_BEFORE`]) replaced by `#`.
fn masked(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(start) = rest.find(|c: char| c.is_ascii_digit()) {
        let len = rest[start..]
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len() - start);
        let (number, after) = (&rest[start..start + len], &rest[start + len..]);
        out.push_str(&rest[..start]);
        if VARYING_BEFORE.iter().any(|v| after.starts_with(v)) {
            out.push('#');
        } else {
            out.push_str(number);
        }
        rest = after;
    }
    out.push_str(rest);
    out
}

/// A README host and the test server that stands for it.
struct Host {
    readme: &'static str,
    actual: String,
}

/// The servers and scratch directory the README's names stand for.
struct Stage {
    hosts: Vec<Host>,
    scratch: tempfile::TempDir,
    default_url: String,
    cli_port: u16,
}

impl Stage {
    /// The command as it runs here.
    /// The README's own names are replaced before any path of this machine goes in, so a
    /// checkout or scratch directory whose path holds `/tmp/` or a README host is left whole;
    /// both paths go in shell-quoted (a checkout's path may hold spaces).
    fn command(&self, readme_command: &str) -> String {
        let mut c = readme_command.replace("/tmp/", SCRATCH_MARK);
        for h in &self.hosts {
            c = c.replace(h.readme, &h.actual);
        }
        c.replace(README_BFCTL, &shell_quoted(BFCTL))
            .replace(
                "redis-cli ",
                &format!("redis-cli --no-raw -h 127.0.0.1 -p {} ", self.cli_port),
            )
            .replace(
                SCRATCH_MARK,
                &shell_quoted(&format!("{}/", self.scratch.path().display())),
            )
    }

    /// What a command printed, as the README would show it.
    fn as_readme(&self, printed: &str) -> String {
        let mut p = printed.replace(&format!("{}/", self.scratch.path().display()), "/tmp/");
        for h in &self.hosts {
            p = p.replace(&h.actual, h.readme);
        }
        p
    }

    /// Runs one step; a readable difference when its output is not the README's.
    fn replay(&self, step: &Step) -> Option<String> {
        let head = format!("README.md:{}: {PROMPT}{}", step.line, step.command);
        let command = self.command(&step.command);
        let out = Command::new("sh")
            .arg("-c")
            .arg(&command)
            .current_dir(self.scratch.path())
            .env("BFCTL_URL", &self.default_url)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("{head}: run sh: {e}"));
        let printed = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let printed = self.as_readme(&printed);
        let got: Vec<&str> = printed.lines().collect();
        let same = got.len() == step.expected.len()
            && step
                .expected
                .iter()
                .zip(&got)
                .all(|(x, g)| masked(x) == masked(g));
        if same {
            return None;
        }
        let mut diff = format!("{head}\n  ({})\n", out.status);
        for n in 0..step.expected.len().max(got.len()) {
            match (step.expected.get(n), got.get(n)) {
                (Some(x), Some(g)) if masked(x) == masked(g) => {
                    diff.push_str(&format!("    {g}\n"))
                }
                (x, g) => {
                    if let Some(x) = x {
                        diff.push_str(&format!("  - {x}\n"));
                    }
                    if let Some(g) = g {
                        diff.push_str(&format!("  + {g}\n"));
                    }
                }
            }
        }
        Some(diff)
    }
}

/// `text` as one word for `sh`, whatever it holds: in single quotes, each `'` closed, escaped
/// and reopened. A word of only path characters goes as it is, so commands read as the README's.
fn shell_quoted(text: &str) -> String {
    if text
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"/._-+:,=@".contains(&b))
    {
        return text.to_string();
    }
    format!("'{}'", text.replace('\'', "'\\''"))
}

fn url(s: &Server) -> String {
    format!("127.0.0.1:{}", s.port())
}

/// A server as the README's runs had it: the module, and seeds fixed (see the module comment).
fn seeded_server() -> Server {
    let s = Server::start();
    raw_ok(&mut s.conn(), &["CONFIG", "SET", "bf.seed-mode", "fixed"]);
    s
}

#[test]
fn bfctl_transcripts_replay_as_the_readme_shows() {
    assert!(
        on_path("redis-cli"),
        "redis-cli is needed to replay the README (make deps installs redis-tools)"
    );
    let text = readme();
    let steps = bfctl_transcripts(&text);
    let bfctl_steps = steps
        .iter()
        .filter(|s| s.command.contains(README_BFCTL))
        .count();
    assert!(
        bfctl_steps >= 5,
        "README.md shows only {bfctl_steps} `$ {README_BFCTL}` commands in ```text blocks"
    );
    let (main, old, new) = (seeded_server(), seeded_server(), seeded_server());
    let stage = Stage {
        hosts: vec![
            Host {
                readme: "127.0.0.1:6379",
                actual: url(&main),
            },
            Host {
                readme: "old-host:6379",
                actual: url(&old),
            },
            Host {
                readme: "new-host:6379",
                actual: url(&new),
            },
        ],
        scratch: tempfile::Builder::new()
            .prefix("bfctl-readme")
            .tempdir()
            .expect("scratch directory"),
        default_url: format!("redis://{}", url(&main)),
        cli_port: main.port(),
    };
    let failures: Vec<String> = steps
        .iter()
        .filter(|s| !s.command.starts_with("cargo "))
        .filter_map(|s| stage.replay(s))
        .collect();
    assert!(
        failures.is_empty(),
        "bfctl does not print what README.md shows (- README, + bfctl):\n{}",
        failures.join("\n")
    );
}

fn on_path(name: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(name).is_file()))
}

#[test]
fn only_timings_and_probe_counts_are_masked() {
    assert_eq!(
        masked("urls: 1000000 items, 999946 new, 54 already present (0.28 s, 3615482 items/s)"),
        "urls: 1000000 items, 999946 new, 54 already present (# s, # items/s)"
    );
    assert_eq!(
        masked("probes answered alike (21 of them present) (0.04 s)"),
        "probes answered alike (# of them present) (# s)"
    );
    assert_eq!(
        masked("bytes: 2019424 (2019328 of them bits)"),
        "bytes: 2019424 (2019328 of them bits)"
    );
}
