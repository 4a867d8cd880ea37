//! The redis-cli transcripts of every page of the documentation (README.md and each
//! docs/*.md), replayed: every `127.0.0.1:6379> CMD` line of their ```text blocks is run against
//! a fresh server, its reply formatted as redis-cli shows it in a terminal (`(integer) N`,
//! `"bulk"` with redis-cli's escapes, arrays numbered `N) ` with the numbers padded to the
//! widest, `(error) ERR ...`), and compared with the lines below it. A figure a page shows that
//! the code does not give fails here, with a diff of the two.
//!
//! The pages mark what cannot be shown as it is, in ways a reader already reads that way:
//! - a quoted string ending in `..."` is cut short: a reply line matches when it begins with
//!   what is shown, and such an argument stands for the bulk string of an earlier reply that
//!   begins with it (SCANDUMP's chunks, given to LOADCHUNK);
//! - a `  # comment` after a command is not part of it; after a reply line, it says the figure
//!   is an example (the server's clock, or bytes as its allocator counts them): the line matches
//!   with any number in its place.
//!
//! The README's quick start runs on a server of its own; every page's other transcripts run in
//! order on a server of the page's own, as a reader following that page would type them. The
//! sizes a page's prose quotes in the form "N bytes (BF.INFO KEY SIZE)" are checked on the
//! filters its transcripts create. The links between the pages (and to BENCHMARKS.md) must lead
//! to a file that exists, and an anchor to one of its headings.
use redis::{Connection, Value};
use rustbloom_testkit::*;

const PROMPT: &str = "127.0.0.1:6379> ";
/// Where a comment starts on a transcript line: two spaces (at least) and `#`.
const COMMENT: &str = "  #";

const README: &str = "README.md";
/// The pages' transcripts and exchanges when the README was split into docs/ (the quick start
/// included): fewer means a page or a transcript went missing.
const AT_LEAST_TRANSCRIPTS: usize = 15;
const AT_LEAST_EXCHANGES: usize = 155;

/// A document of the repository, by its path there.
fn document(name: &str) -> String {
    let path = format!("{}/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {path}: {e}"))
}

/// The pages of the documentation, by their paths in the repository: README.md, then every
/// docs/*.md in name order.
fn pages() -> Vec<String> {
    let dir = format!("{}/docs", env!("CARGO_MANIFEST_DIR"));
    let mut docs: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("read {dir}: {e}"))
        .map(|entry| entry.unwrap_or_else(|e| panic!("read {dir}: {e}")))
        .filter_map(|entry| entry.file_name().into_string().ok())
        .filter(|name| name.ends_with(".md"))
        .map(|name| format!("docs/{name}"))
        .collect();
    docs.sort();
    let mut all = vec![README.to_string()];
    all.extend(docs);
    all
}

/// One command of a transcript and the reply lines the document shows below it.
struct Exchange {
    /// 1-based line of the document.
    line: usize,
    command: String,
    expected: Vec<String>,
}

/// The exchanges of one ```text block with at least one prompt.
struct Transcript {
    /// 1-based line of the block's opening fence.
    line: usize,
    exchanges: Vec<Exchange>,
}

fn transcripts(readme: &str) -> Vec<Transcript> {
    let mut out = Vec::new();
    let mut block: Option<Transcript> = None;
    let mut in_other_block = false;
    for (i, line) in readme.lines().enumerate() {
        if let Some(fence) = line.strip_prefix("```") {
            if let Some(t) = block.take() {
                if !t.exchanges.is_empty() {
                    out.push(t);
                }
            } else if in_other_block {
                in_other_block = false;
            } else if fence.trim() == "text" {
                block = Some(Transcript {
                    line: i + 1,
                    exchanges: Vec::new(),
                });
            } else {
                in_other_block = true;
            }
            continue;
        }
        let Some(t) = block.as_mut() else { continue };
        if let Some(command) = line.strip_prefix(PROMPT) {
            t.exchanges.push(Exchange {
                line: i + 1,
                command: without_comment(command).0.to_string(),
                expected: Vec::new(),
            });
        } else if let Some(e) = t.exchanges.last_mut() {
            e.expected.push(line.to_string());
        }
    }
    out
}

/// A transcript line without its `  # comment`, and whether it had one.
fn without_comment(line: &str) -> (&str, bool) {
    match line.find(COMMENT) {
        Some(at) => (line[..at].trim_end(), true),
        None => (line, false),
    }
}

/// One argument as a document writes it.
#[derive(Debug)]
enum Arg {
    Bytes(Vec<u8>),
    /// `"prefix..."`: the bulk string of an earlier reply that begins with `prefix`.
    Elided(Vec<u8>),
}

/// Splits a command line as redis-cli does: words, `"..."` with `\xHH`, `\n`, `\r`, `\t`, `\b`,
/// `\a` and `\<char>` escapes, and `'...'` with `\'`.
fn split_args(line: &str) -> Result<Vec<Arg>, String> {
    let b = line.as_bytes();
    let mut args = Vec::new();
    let mut i = 0;
    loop {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        if i == b.len() {
            return Ok(args);
        }
        let mut word = Vec::new();
        match b[i] {
            b'"' => {
                i += 1;
                let start = i;
                loop {
                    match b.get(i) {
                        None => return Err(format!("unbalanced quotes in {line:?}")),
                        Some(b'"') => break,
                        Some(b'\\') => {
                            let hex = b
                                .get(i + 2..i + 4)
                                .and_then(|h| std::str::from_utf8(h).ok())
                                .and_then(|h| u8::from_str_radix(h, 16).ok());
                            match (b.get(i + 1), hex) {
                                (Some(b'x'), Some(v)) => {
                                    word.push(v);
                                    i += 4;
                                    continue;
                                }
                                (Some(&c), _) => word.push(match c {
                                    b'n' => b'\n',
                                    b'r' => b'\r',
                                    b't' => b'\t',
                                    b'b' => 8,
                                    b'a' => 7,
                                    other => other,
                                }),
                                (None, _) => return Err(format!("unbalanced quotes in {line:?}")),
                            }
                            i += 2;
                        }
                        Some(&c) => {
                            word.push(c);
                            i += 1;
                        }
                    }
                }
                let elided = line[start..i].ends_with("...");
                i += 1;
                if elided {
                    word.truncate(word.len() - 3);
                    args.push(Arg::Elided(word));
                } else {
                    args.push(Arg::Bytes(word));
                }
            }
            b'\'' => {
                i += 1;
                loop {
                    match (b.get(i), b.get(i + 1)) {
                        (None, _) => return Err(format!("unbalanced quotes in {line:?}")),
                        (Some(b'\\'), Some(b'\'')) => {
                            word.push(b'\'');
                            i += 2;
                        }
                        (Some(b'\''), _) => break,
                        (Some(&c), _) => {
                            word.push(c);
                            i += 1;
                        }
                    }
                }
                i += 1;
                args.push(Arg::Bytes(word));
            }
            _ => {
                while i < b.len() && !b[i].is_ascii_whitespace() {
                    word.push(b[i]);
                    i += 1;
                }
                args.push(Arg::Bytes(word));
            }
        }
    }
}

/// A bulk string as redis-cli prints it: quoted, with `\\`, `\"`, `\n`, `\r`, `\t`, `\a`, `\b`
/// and `\xHH` for any other byte outside printable ASCII.
fn quoted(bytes: &[u8]) -> String {
    let mut s = String::from("\"");
    for &b in bytes {
        match b {
            b'\\' => s.push_str("\\\\"),
            b'"' => s.push_str("\\\""),
            b'\n' => s.push_str("\\n"),
            b'\r' => s.push_str("\\r"),
            b'\t' => s.push_str("\\t"),
            7 => s.push_str("\\a"),
            8 => s.push_str("\\b"),
            0x20..=0x7e => s.push(char::from(b)),
            _ => s.push_str(&format!("\\x{b:02x}")),
        }
    }
    s.push('"');
    s
}

/// A reply as redis-cli prints it in a terminal (RESP2): every line ends with `\n`; an array's
/// elements are numbered from 1, the numbers right-aligned to the widest, and a nested array's
/// lines indented by that width and two.
fn format_reply(reply: &Result<Value, String>, prefix: &str) -> String {
    let v = match reply {
        Ok(v) => v,
        Err(e) => return format!("(error) {e}\n"),
    };
    match v {
        Value::Okay => "OK\n".into(),
        Value::SimpleString(s) => format!("{s}\n"),
        Value::Int(n) => format!("(integer) {n}\n"),
        Value::BulkString(b) => format!("{}\n", quoted(b)),
        Value::Nil => "(nil)\n".into(),
        Value::ServerError(e) => format!("(error) {}\n", server_err_text(e)),
        Value::Array(items) if items.is_empty() => "(empty array)\n".into(),
        Value::Array(items) => {
            let width = items.len().to_string().len();
            let inner = format!("{prefix}{}", " ".repeat(width + 2));
            let mut out = String::new();
            for (i, item) in items.iter().enumerate() {
                let lead = if i == 0 { "" } else { prefix };
                out.push_str(&format!("{lead}{:>width$}) ", i + 1));
                out.push_str(&format_reply(&Ok(item.clone()), &inner));
            }
            out
        }
        other => format!("<a reply redis-cli 7 does not print in RESP2: {other:?}>\n"),
    }
}

/// Every bulk string in a reply, nested ones included.
fn bulk_strings(v: &Value, out: &mut Vec<Vec<u8>>) {
    match v {
        Value::BulkString(b) => out.push(b.clone()),
        Value::Array(items) => items.iter().for_each(|i| bulk_strings(i, out)),
        _ => {}
    }
}

/// `text` with every run of digits replaced by one `0`: the shape of a line.
fn digits_as_zero(text: &str) -> String {
    let mut out = String::new();
    let mut in_number = false;
    for c in text.chars() {
        if c.is_ascii_digit() {
            if !in_number {
                out.push('0');
            }
            in_number = true;
        } else {
            out.push(c);
            in_number = false;
        }
    }
    out
}

/// Whether a reply line matches the document's line (see the module's comment for the marks).
fn line_matches(expected: &str, got: &str) -> bool {
    let (text, example) = without_comment(expected);
    if example {
        digits_as_zero(text) == digits_as_zero(got)
    } else if let Some(prefix) = expected.strip_suffix("...\"") {
        got.starts_with(prefix) && got.ends_with('"') && got.len() > prefix.len()
    } else {
        expected == got
    }
}

/// Replays `t` of the document `doc` on `c`; returns a readable difference per exchange whose
/// reply does not match.
fn replay(c: &mut Connection, doc: &str, t: &Transcript) -> Vec<String> {
    let mut failures = Vec::new();
    let mut earlier_bulks: Vec<Vec<u8>> = Vec::new();
    for e in &t.exchanges {
        let args = match split_args(&e.command) {
            Ok(a) => a,
            Err(why) => {
                failures.push(format!("{doc}:{}: {why}", e.line));
                continue;
            }
        };
        let mut resolved = Vec::new();
        let mut unresolved = Vec::new();
        for a in args {
            match a {
                Arg::Bytes(b) => resolved.push(b),
                Arg::Elided(prefix) => {
                    match earlier_bulks.iter().rev().find(|b| b.starts_with(&prefix)) {
                        Some(b) => resolved.push(b.clone()),
                        None => unresolved.push(quoted(&prefix)),
                    }
                }
            }
        }
        if !unresolved.is_empty() {
            failures.push(format!(
                "{doc}:{}: {PROMPT}{}\n  the cut-short {} begins no earlier reply",
                e.line,
                e.command,
                unresolved.join(", ")
            ));
            continue;
        }
        let reply = raw(c, &resolved);
        if let Ok(v) = &reply {
            bulk_strings(v, &mut earlier_bulks);
        }
        let formatted = format_reply(&reply, "");
        let got: Vec<&str> = formatted.lines().collect();
        let same = got.len() == e.expected.len()
            && e.expected.iter().zip(&got).all(|(x, g)| line_matches(x, g));
        if !same {
            let mut diff = format!("{doc}:{}: {PROMPT}{}\n", e.line, e.command);
            for n in 0..e.expected.len().max(got.len()) {
                let x = e.expected.get(n).map(String::as_str);
                let g = got.get(n).copied();
                match (x, g) {
                    (Some(x), Some(g)) if line_matches(x, g) => {
                        diff.push_str(&format!("    {g}\n"))
                    }
                    _ => {
                        if let Some(x) = x {
                            diff.push_str(&format!("  - {x}\n"));
                        }
                        if let Some(g) = g {
                            diff.push_str(&format!("  + {g}\n"));
                        }
                    }
                }
            }
            failures.push(diff);
        }
    }
    failures
}

#[track_caller]
fn assert_no_failures(failures: &[String], what: &str) {
    assert!(
        failures.is_empty(),
        "{what}: the server does not answer what the document shows (- document, + server):\n{}",
        failures.join("\n")
    );
}

/// The quick start: the first transcript after "In another terminal:".
fn quick_start(readme: &str, all: &[Transcript]) -> usize {
    let intro = readme
        .lines()
        .position(|l| l.contains("In another terminal:"))
        .expect("README.md has a quick start (\"In another terminal:\")")
        + 1;
    all.iter()
        .position(|t| t.line > intro)
        .expect("a transcript after \"In another terminal:\"")
}

#[test]
fn quick_start_replays_as_the_readme_shows() {
    let text = document(README);
    let all = transcripts(&text);
    let quick = &all[quick_start(&text, &all)];
    let s = Server::start();
    let mut c = s.conn();
    assert_no_failures(&replay(&mut c, README, quick), "the quick start");
    // "then each data chunk in order": the rest of the dump completes the copy LOADCHUNK began.
    let word = |name: &str, n: usize| {
        quick
            .exchanges
            .iter()
            .find_map(|e| {
                let mut words = e.command.split_whitespace();
                words
                    .next()
                    .filter(|w| w.eq_ignore_ascii_case(name))
                    .and_then(|_| words.nth(n))
                    .map(str::to_string)
            })
            .unwrap_or_else(|| panic!("the quick start has no {name}"))
    };
    let (source, copy) = (word("BF.SCANDUMP", 0), word("BF.LOADCHUNK", 0));
    let chunks = scandump(&mut c, &source);
    loadchunks(&mut c, &copy, &chunks[1..]);
    assert_eq!(
        digest(&mut c, &copy),
        digest(&mut c, &source),
        "{copy} after every chunk of {source}"
    );
}

/// Checks on `c` the sizes `text` (the page `doc`) quotes as "N bytes (`BF.INFO KEY SIZE`)";
/// returns how many it quotes.
fn check_quoted_sizes(
    c: &mut Connection,
    doc: &str,
    text: &str,
    failures: &mut Vec<String>,
) -> usize {
    let mut quoted_sizes = 0;
    for (at, _) in text.match_indices(" bytes (`BF.INFO ") {
        let figure = text[..at]
            .split_whitespace()
            .next_back()
            .expect("a figure before \"bytes\"");
        let rest = &text[at + " bytes (`BF.INFO ".len()..];
        let mut words = rest.split_whitespace();
        let key = words.next().expect("a key after BF.INFO");
        let field = words.next().expect("a field after the key");
        if !field.starts_with("SIZE`") {
            continue;
        }
        quoted_sizes += 1;
        let want = figure.replace(',', "");
        let got = format_reply(&raw(c, &["BF.INFO", key, "SIZE"]), "");
        if got.trim_end() != format!("1) (integer) {want}") {
            let line = text[..at].lines().count();
            failures.push(format!(
                "{doc}:{line}: {figure} bytes (`BF.INFO {key} SIZE`), the server answers {}",
                got.trim_end()
            ));
        }
    }
    quoted_sizes
}

#[test]
fn every_page_replays_with_its_quoted_sizes() {
    let mut failures = Vec::new();
    let (mut transcripts_seen, mut exchanges_seen, mut quoted_sizes) = (0, 0, 0);
    for doc in pages() {
        let text = document(&doc);
        let mut all = transcripts(&text);
        transcripts_seen += all.len();
        exchanges_seen += all.iter().map(|t| t.exchanges.len()).sum::<usize>();
        if doc == README {
            // The quick start runs on its own server (the test above).
            all.remove(quick_start(&text, &all));
        }
        let quotes_sizes = text.contains(" bytes (`BF.INFO ");
        if all.is_empty() && !quotes_sizes {
            continue;
        }
        let s = Server::start();
        let mut c = s.conn();
        for t in &all {
            failures.extend(replay(&mut c, &doc, t));
        }
        quoted_sizes += check_quoted_sizes(&mut c, &doc, &text, &mut failures);
    }
    assert!(
        transcripts_seen >= AT_LEAST_TRANSCRIPTS && exchanges_seen >= AT_LEAST_EXCHANGES,
        "the pages hold {transcripts_seen} transcripts of {exchanges_seen} commands, fewer than \
         the {AT_LEAST_TRANSCRIPTS} of {AT_LEAST_EXCHANGES} they had: was a page deleted?"
    );
    assert!(quoted_sizes > 0, "no page quotes a BF.INFO size");
    assert_no_failures(&failures, "the pages' transcripts");
}

/// The anchor GitHub gives a heading: lower case, every character but letters, digits, `_`,
/// `-` and spaces dropped, spaces made `-`.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | ' '))
        .flat_map(char::to_lowercase)
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a markdown text's headings (outside fenced blocks), a repeated one numbered
/// `-1`, `-2`, … as GitHub numbers them.
fn anchors(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut seen: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
            continue;
        }
        let Some(heading) = line.strip_prefix('#').filter(|_| !fenced) else {
            continue;
        };
        let base = anchor(heading.trim_start_matches('#'));
        let repeats = seen.entry(base.clone()).or_insert(0);
        out.push(match *repeats {
            0 => base,
            n => format!("{base}-{n}"),
        });
        *repeats += 1;
    }
    out
}

/// The relative link targets of a markdown text (outside fenced blocks), with their lines.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut fenced = false;
    for (i, line) in text.lines().enumerate() {
        if line.starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        for (at, _) in line.match_indices("](") {
            let rest = &line[at + 2..];
            let Some(end) = rest.find(')') else { continue };
            let target = &rest[..end];
            if !target.contains("://") && !target.starts_with("mailto:") {
                out.push((i + 1, target.to_string()));
            }
        }
    }
    out
}

#[test]
fn links_between_pages_resolve() {
    let root = env!("CARGO_MANIFEST_DIR");
    let mut sources = pages();
    sources.extend(["BENCHMARKS.md", "clients/python/README.md"].map(String::from));
    let mut failures = Vec::new();
    let mut checked = 0;
    for doc in &sources {
        let text = document(doc);
        let dir = std::path::Path::new(doc)
            .parent()
            .unwrap_or(std::path::Path::new(""));
        for (line, target) in links(&text) {
            checked += 1;
            let (path, fragment) = match target.split_once('#') {
                Some((p, f)) => (p, Some(f)),
                None => (target.as_str(), None),
            };
            let file = if path.is_empty() {
                std::path::PathBuf::from(doc)
            } else {
                dir.join(path)
            };
            let on_disk = std::path::Path::new(root).join(&file);
            if !on_disk.exists() {
                failures.push(format!("{doc}:{line}: ]({target}): no {}", file.display()));
                continue;
            }
            if let Some(fragment) = fragment {
                let heads = std::fs::read_to_string(&on_disk)
                    .map(|t| anchors(&t))
                    .unwrap_or_default();
                if !heads.iter().any(|h| h == fragment) {
                    failures.push(format!(
                        "{doc}:{line}: ]({target}): {} has no heading #{fragment}",
                        file.display()
                    ));
                }
            }
        }
    }
    assert!(checked > 20, "only {checked} links found in {sources:?}");
    assert!(
        failures.is_empty(),
        "links that lead nowhere:\n{}",
        failures.join("\n")
    );
}

#[test]
fn anchors_are_githubs() {
    assert_eq!(
        anchor(" The seeds' day: 10^9 clicks at 1e-9 through a replicated cluster, 2026-11-25"),
        "the-seeds-day-109-clicks-at-1e-9-through-a-replicated-cluster-2026-11-25"
    );
    assert_eq!(anchor(" make bench of `eeb1f68`"), "make-bench-of-eeb1f68");
    assert_eq!(
        anchors("# A\n## Setup\n```text\n# not a heading\n```\n## Setup\n"),
        ["a", "setup", "setup-1"]
    );
}
