//! The bfctl transcripts of every page of the documentation (README.md and each docs/*.md),
//! replayed: every ```text block of a page with a `$ target/release/bfctl` line is run, command
//! by command, against test servers, and what each command prints (its stdout, then its stderr)
//! is compared line by line with the lines the page shows below it. A figure a page shows that
//! bfctl no longer prints fails here, with a diff of the two.
//!
//! How a page's command runs here:
//! - each `$ ` line (with the lines a trailing `\` continues) runs in `sh -c`, in the page's
//!   order, sharing the page's own servers and scratch directory (each page gets new ones);
//!   `$ cargo …` lines (the build) are not run;
//! - `target/release/bfctl` is the bfctl cargo built for this test, `redis-cli` talks to the
//!   first server, and `/tmp/` is the scratch directory;
//! - the pages' hosts are test servers: `127.0.0.1:6379` (bfctl's default URL, given to it as
//!   `BFCTL_URL`) the first, `old-host:6379` and `new-host:6379` two more; in what bfctl prints,
//!   the test servers' addresses and the scratch directory read back as the pages' names;
//! - the servers run `bf.seed-mode fixed`, so the counts that depend on a filter's seed (false
//!   positives: "already present") are those of the run the page shows.
//!
//! What varies by run, and the pages say so next to their transcripts: timings (a number before
//! ` s,` or ` s)`, as in `(0.04 s)`, and before ` items/s`) and the count of migrate's random
//! probes that happen to be present (a number before ` of them present`). Those numbers are
//! masked on both sides; everything else must match byte for byte.

use std::process::{Command, Stdio};

use rustbloom_testkit::*;

const BFCTL: &str = env!("CARGO_BIN_EXE_bfctl");
/// How the pages run bfctl: the binary `cargo build --release` leaves.
const README_BFCTL: &str = "target/release/bfctl";
const PROMPT: &str = "$ ";
/// Where a page's `/tmp/` stands while the rest of a command is rewritten: no page has it.
const SCRATCH_MARK: &str = "\u{0}scratch\u{0}";
/// The pages' `$ ` steps in bfctl transcripts, and their `target/release/bfctl` commands, when
/// the README was split into docs/: fewer means a page or a transcript went missing.
const AT_LEAST_STEPS: usize = 14;
const AT_LEAST_BFCTL_COMMANDS: usize = 10;

/// Numbers followed by one of these vary by run: timings, rates, random probes present.
const VARYING_BEFORE: [&str; 4] = [" s,", " s)", " items/s", " of them present"];

/// The repository's root.
const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

/// The pages of the documentation, by their paths in the repository, each with its text:
/// README.md, then every docs/*.md in name order.
fn pages() -> Vec<(String, String)> {
    let dir = format!("{ROOT}/docs");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("read {dir}: {e}"))
        .map(|entry| entry.unwrap_or_else(|e| panic!("read {dir}: {e}")))
        .filter_map(|entry| entry.file_name().into_string().ok())
        .filter(|name| name.ends_with(".md"))
        .map(|name| format!("docs/{name}"))
        .collect();
    names.sort();
    names.insert(0, "README.md".to_string());
    names
        .into_iter()
        .map(|name| {
            let path = format!("{ROOT}/{name}");
            let text =
                std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {path}: {e}"));
            (name, text)
        })
        .collect()
}

/// One shell command of a transcript and the lines the page shows it printing.
struct Step {
    /// 1-based line of the page.
    line: usize,
    command: String,
    expected: Vec<String>,
}

/// The steps of every ```text block that runs `target/release/bfctl`, in the page's order.
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

/// A page's host and the test server that stands for it.
struct Host {
    readme: &'static str,
    actual: String,
}

/// The servers and scratch directory a page's names stand for.
struct Stage {
    /// The page, as its path in the repository.
    page: String,
    hosts: Vec<Host>,
    scratch: tempfile::TempDir,
    default_url: String,
    cli_port: u16,
}

impl Stage {
    /// The command as it runs here.
    /// The page's own names are replaced before any path of this machine goes in, so a
    /// checkout or scratch directory whose path holds `/tmp/` or a page's host is left whole;
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

    /// What a command printed, as the page would show it.
    fn as_readme(&self, printed: &str) -> String {
        let mut p = printed.replace(&format!("{}/", self.scratch.path().display()), "/tmp/");
        for h in &self.hosts {
            p = p.replace(&h.actual, h.readme);
        }
        p
    }

    /// Runs one step; a readable difference when its output is not the page's.
    fn replay(&self, step: &Step) -> Option<String> {
        let head = format!("{}:{}: {PROMPT}{}", self.page, step.line, step.command);
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
/// and reopened. A word of only path characters goes as it is, so commands read as the page's.
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

/// A server as the pages' runs had it: the module, and seeds fixed (see the module comment).
fn seeded_server() -> Server {
    let s = Server::start();
    raw_ok(&mut s.conn(), &["CONFIG", "SET", "bf.seed-mode", "fixed"]);
    s
}

#[test]
fn bfctl_transcripts_replay_as_the_pages_show() {
    assert!(
        on_path("redis-cli"),
        "redis-cli is needed to replay the pages (make deps installs redis-tools)"
    );
    let mut failures = Vec::new();
    let (mut steps_seen, mut bfctl_seen) = (0, 0);
    for (page, text) in pages() {
        let steps = bfctl_transcripts(&text);
        if steps.is_empty() {
            continue;
        }
        steps_seen += steps.len();
        bfctl_seen += steps
            .iter()
            .filter(|s| s.command.contains(README_BFCTL))
            .count();
        failures.extend(replay_page(page, &steps));
    }
    assert!(
        steps_seen >= AT_LEAST_STEPS && bfctl_seen >= AT_LEAST_BFCTL_COMMANDS,
        "the pages show {steps_seen} steps with {bfctl_seen} `$ {README_BFCTL}` commands in \
         ```text blocks, fewer than the {AT_LEAST_STEPS} with {AT_LEAST_BFCTL_COMMANDS} they \
         had: was a page deleted?"
    );
    assert!(
        failures.is_empty(),
        "bfctl does not print what the pages show (- page, + bfctl):\n{}",
        failures.join("\n")
    );
}

/// Replays one page's steps on servers and a scratch directory of its own; the differences.
fn replay_page(page: String, steps: &[Step]) -> Vec<String> {
    let (main, old, new) = (seeded_server(), seeded_server(), seeded_server());
    let stage = Stage {
        page,
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
    steps
        .iter()
        .filter(|s| !s.command.starts_with("cargo "))
        .filter_map(|s| stage.replay(s))
        .collect()
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
