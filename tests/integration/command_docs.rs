//! COMMAND DOCS, the parser and the documents agree.
//!
//! - Every form the parser accepts (one invocation per form, run for real against a server and
//!   answered without an error) matches the grammar COMMAND DOCS gives for its command, and every
//!   token COMMAND DOCS gives is used by one of them; forms the parser refuses for their shape
//!   (EXPANSION with NONSCALING on BF.RESERVE, ...) do not match it.
//! - Every markdown table whose header row is exactly `| command | reply |`, in README.md and in
//!   every docs/*.md, shows in its first cell a backticked form whose command COMMAND DOCS has and
//!   whose keywords (words in capitals of two letters or more: `EXPANSION`, not the placeholders
//!   `P` or `N`) are tokens COMMAND DOCS has for that command; and every command COMMAND DOCS lists
//!   has a row in one of them.
use std::collections::{BTreeMap, BTreeSet};

use redis::{Connection, Value};
use rustbloom_testkit::*;

/// One argument of a command's grammar, as COMMAND DOCS shows it.
#[derive(Debug)]
struct DocArg {
    name: String,
    /// `key`, `string`, `integer`, `double`, `pure-token`, `oneof`, `block`, ...
    kind: String,
    token: Option<String>,
    optional: bool,
    multiple: bool,
    /// A one-of's alternatives, a block's parts.
    parts: Vec<DocArg>,
}

/// The name/value pairs of a RESP2 flat array or a RESP3 map.
fn pairs(v: &Value) -> Vec<(String, &Value)> {
    match v {
        Value::Array(items) => items
            .chunks(2)
            .filter_map(|pair| match pair {
                [name, value] => Some((value_to_string(name), value)),
                _ => None,
            })
            .collect(),
        Value::Map(items) => items
            .iter()
            .map(|(name, value)| (value_to_string(name), value))
            .collect(),
        other => panic!("expected a map, got {other:?}"),
    }
}

fn doc_arg(v: &Value) -> DocArg {
    let mut arg = DocArg {
        name: String::new(),
        kind: String::new(),
        token: None,
        optional: false,
        multiple: false,
        parts: Vec::new(),
    };
    for (field, value) in pairs(v) {
        match field.as_str() {
            "name" => arg.name = value_to_string(value),
            "type" => arg.kind = value_to_string(value),
            "token" => arg.token = Some(value_to_string(value)),
            "flags" => {
                for flag in as_array(value.clone()) {
                    match value_to_string(&flag).as_str() {
                        "optional" => arg.optional = true,
                        "multiple" => arg.multiple = true,
                        _ => {}
                    }
                }
            }
            "arguments" => arg.parts = as_array(value.clone()).iter().map(doc_arg).collect(),
            _ => {}
        }
    }
    arg
}

/// Every command of the module (lower case) and its arguments, after the command's name.
fn command_docs(c: &mut Connection) -> BTreeMap<String, Vec<DocArg>> {
    let names = as_array(raw_ok(c, &["COMMAND", "LIST", "FILTERBY", "MODULE", "bf"]));
    assert!(
        !names.is_empty(),
        "COMMAND LIST FILTERBY MODULE bf is empty"
    );
    let mut docs = BTreeMap::new();
    for name in names.iter().map(value_to_string) {
        let reply = raw_ok(c, &["COMMAND", "DOCS", &name]);
        let (_, doc) = pairs(&reply)
            .into_iter()
            .next()
            .unwrap_or_else(|| panic!("COMMAND DOCS {name}: {reply:?}"));
        let args = pairs(doc)
            .into_iter()
            .find(|(field, _)| field == "arguments")
            .map(|(_, args)| as_array(args.clone()).iter().map(doc_arg).collect())
            .unwrap_or_default();
        docs.insert(name.to_lowercase(), args);
    }
    docs
}

/// The tokens of a grammar, at every depth, in capitals.
fn tokens(args: &[DocArg], out: &mut BTreeSet<String>) {
    for arg in args {
        if let Some(token) = &arg.token {
            out.insert(token.to_uppercase());
        }
        tokens(&arg.parts, out);
    }
}

/// A grammar as Redis writes a synopsis: `key [EXPANSION expansion | NONSCALING] ...`.
fn synopsis(args: &[DocArg]) -> String {
    args.iter().map(shown).collect::<Vec<_>>().join(" ")
}

fn shown(arg: &DocArg) -> String {
    let body = match arg.kind.as_str() {
        "pure-token" => String::new(),
        "oneof" => arg.parts.iter().map(shown).collect::<Vec<_>>().join(" | "),
        "block" => synopsis(&arg.parts),
        _ => arg.name.clone(),
    };
    let mut once = match &arg.token {
        Some(token) if body.is_empty() => token.clone(),
        Some(token) => format!("{token} {body}"),
        None => body,
    };
    if arg.kind == "oneof" && !arg.optional {
        once = format!("<{once}>");
    }
    let repeated = if arg.multiple {
        format!("{once} [{} ...]", arg.name)
    } else {
        once
    };
    if arg.optional {
        format!("[{repeated}]")
    } else {
        repeated
    }
}

/// Whether the argument starts with a keyword wherever it appears, so that, optional, it may come
/// in any order among its kind (as Redis' own options do, and as the parser reads them).
fn keyword_led(arg: &DocArg) -> bool {
    arg.token.is_some() || (arg.kind == "oneof" && arg.parts.iter().all(keyword_led))
}

/// Where a match of `args` (in order, but optional keyword-led ones in any order among
/// themselves) against `words[at..]` can end.
fn match_sequence(args: &[&DocArg], words: &[String], at: usize) -> BTreeSet<usize> {
    let mut ends = BTreeSet::new();
    let free = args
        .iter()
        .take_while(|arg| arg.optional && keyword_led(arg))
        .count();
    // The options at the front are all used (or skipped): on to the argument after them.
    match args.get(free) {
        Some(next) => {
            for end in match_one(next, words, at) {
                ends.extend(match_sequence(&args[free + 1..], words, end));
            }
        }
        None => {
            ends.insert(at);
        }
    }
    // Or one of those options comes now.
    for i in 0..free {
        for end in match_present(args[i], words, at) {
            let mut rest: Vec<&DocArg> = args.to_vec();
            rest.remove(i);
            ends.extend(match_sequence(&rest, words, end));
        }
    }
    ends
}

/// Where `arg` (optional, repeated, as its flags say) can end, starting at `at`.
fn match_one(arg: &DocArg, words: &[String], at: usize) -> BTreeSet<usize> {
    let mut ends = match_present(arg, words, at);
    if arg.optional {
        ends.insert(at);
    }
    ends
}

/// Where `arg`, present (repeated if its flags say so), can end, starting at `at`.
fn match_present(arg: &DocArg, words: &[String], at: usize) -> BTreeSet<usize> {
    let mut ends = BTreeSet::new();
    let mut frontier = match_once(arg, words, at);
    while !frontier.is_empty() {
        let new: Vec<usize> = frontier.difference(&ends).copied().collect();
        ends.extend(new.iter().copied());
        frontier = if arg.multiple {
            new.iter()
                // Again its value, not its token: `ITEMS item [item ...]`.
                .flat_map(|&end| match_value(arg, words, end))
                .collect()
        } else {
            BTreeSet::new()
        };
    }
    ends
}

/// One occurrence of `arg`, its token included.
fn match_once(arg: &DocArg, words: &[String], at: usize) -> BTreeSet<usize> {
    match &arg.token {
        Some(token) => match words.get(at) {
            Some(word) if word.eq_ignore_ascii_case(token) => match_value(arg, words, at + 1),
            _ => BTreeSet::new(),
        },
        None => match_value(arg, words, at),
    }
}

/// What follows an argument's token: its value, alternatives or parts.
fn match_value(arg: &DocArg, words: &[String], at: usize) -> BTreeSet<usize> {
    let word = words.get(at);
    let one_word = |fits: bool| {
        if fits {
            BTreeSet::from([at + 1])
        } else {
            BTreeSet::new()
        }
    };
    match arg.kind.as_str() {
        "pure-token" => BTreeSet::from([at]),
        "oneof" => arg
            .parts
            .iter()
            .flat_map(|alternative| match_one(alternative, words, at))
            .collect(),
        "block" => match_sequence(&arg.parts.iter().collect::<Vec<_>>(), words, at),
        "integer" => one_word(word.is_some_and(|w| w.parse::<i64>().is_ok())),
        "double" => one_word(word.is_some_and(|w| w.parse::<f64>().is_ok())),
        _ => one_word(word.is_some()),
    }
}

/// Whether `words` (the command's name first) is a form of the grammar `args`.
fn matches(args: &[DocArg], words: &[String]) -> bool {
    match_sequence(&args.iter().collect::<Vec<_>>(), words, 1).contains(&words.len())
}

fn words(line: &str) -> Vec<String> {
    line.split_whitespace().map(str::to_string).collect()
}

/// A layer's bits and hashes, from the first `bits:b hashes:k` line of `BF.DEBUG key` (layer
/// `layer`).
fn layer_shape(c: &mut Connection, key: &str, layer: usize) -> (String, String) {
    let lines = as_array(raw_ok(c, &["BF.DEBUG", key]));
    let line = value_to_string(&lines[1 + layer]);
    let field = |name: &str| {
        line.split_whitespace()
            .find_map(|f| f.strip_prefix(name))
            .unwrap_or_else(|| panic!("no {name} in BF.DEBUG {key}: {line}"))
            .to_string()
    };
    (field("bits:"), field("hashes:"))
}

/// One invocation per form the parser accepts, each preceded by what it needs, each answered
/// without an error by the server of `c`.
fn accepted_forms(c: &mut Connection) -> Vec<String> {
    // The exact shape of a 1000-item filter's first layer (classic layout: code 0), and of the
    // second layer of a filter of capacity 1, for SHAPE and BF.GROW.
    raw_ok(c, &words("BF.RESERVE probe 0.01 1000 SEED 1"));
    let (bits, hashes) = layer_shape(c, "probe", 0);
    raw_ok(c, &words("BF.RESERVE grown 0.01 1 EXPANSION 2 SEED 1"));
    raw_ok(c, &words("BF.MADD grown a b c d"));
    let (grow_bits, grow_hashes) = layer_shape(c, "grown", 1);
    let now_ms = {
        let time = as_array(raw_ok(c, &["TIME"]));
        let seconds: u64 = value_to_string(&time[0]).parse().unwrap();
        seconds * 1000
    };
    let forms = vec![
        "BF.RESERVE plain 0.01 1000".to_string(),
        "BF.RESERVE expanding 0.01 1000 EXPANSION 4".into(),
        "BF.RESERVE seeded 0.01 1000 SEED 7 expansion 4".into(),
        "BF.RESERVE fixed 0.01 1000 NONSCALING SEED 7".into(),
        "BF.RESERVE tightened 0.01 1000 TIGHTENING 0.8 VALIDATESCALETO 100000".into(),
        "BF.RESERVE window 0.01 1000 WINDOW 60000 SEED 7".into(),
        format!("BF.RESERVE shaped 0.01 1000 SEED 1 SHAPE {bits} {hashes} 0"),
        "BF.RESERVE part 0.01 1000 PARTITION 0 4 99".into(),
        "BF.RESERVE part-window 0.01 1000 WINDOW 60000 PARTITION 1 4 99".into(),
        "BF.RESERVE whole 0.01 4000 PARTITIONS 4 99".into(),
        "BF.RESERVE whole-fixed 0.01 4000 NONSCALING PARTITIONS 4 99".into(),
        "BF.ADD plain a".into(),
        "BF.MADD plain a b c".into(),
        // A copy of `plain`, then the union of the copy with it again.
        "BF.MERGE merged plain".into(),
        "BF.MERGE merged plain merged plain".into(),
        "BF.RESERVE like-plain LIKE plain".into(),
        "BF.INSERT made CAPACITY 100 ERROR 0.01 EXPANSION 2 SEED 5 ITEMS a b".into(),
        "BF.INSERT made-fixed ERROR 0.01 EXPANSION 2 NONSCALING ITEMS a".into(),
        "BF.INSERT plain NOCREATE ITEMS a".into(),
        "BF.INSERT made-tight TIGHTENING 0.25 VALIDATESCALETO 5000 ITEMS a".into(),
        // valkey-bloom's replicated creation: a 32-byte seed, and no ITEMS.
        "BF.INSERT made-vb CAPACITY 100 ERROR 0.01 TIGHTENING 0.5 SEED 0123456789abcdef0123456789abcdef EXPANSION 2".into(),
        "BF.INSERT made-window WINDOW 60000 ITEMS a b".into(),
        "BF.EXISTS plain a".into(),
        "BF.MEXISTS plain a b".into(),
        "BF.INFO plain".into(),
        "BF.INFO plain CAPACITY".into(),
        "BF.INFO plain SIZE".into(),
        "BF.INFO plain FILTERS".into(),
        "BF.INFO plain ITEMS".into(),
        "BF.INFO plain EXPANSION".into(),
        "BF.INFO plain ERROR".into(),
        "BF.INFO plain TIGHTENING".into(),
        "BF.INFO plain MAXSCALEDCAPACITY".into(),
        "BF.CARD plain".into(),
        "BF.DEBUG plain".into(),
        "BF.SCANDUMP plain 0".into(),
        format!("BF.ADDAT window {now_ms} a b"),
        "BF.RESERVE to-grow 0.01 1 EXPANSION 2 SEED 1".into(),
        // BF.GROW adds a layer once the newest is full, as on a replica.
        "BF.ADD to-grow a".into(),
        format!("BF.GROW to-grow 1 {grow_bits} {grow_hashes} 0"),
    ];
    for form in &forms {
        if let Err(e) = raw(c, &words(form)) {
            panic!("the parser refuses `{form}`, listed as one of its forms: {e}");
        }
    }
    // BF.LOADCHUNK with the header chunk of a dump.
    let header = as_array(raw_ok(c, &["BF.SCANDUMP", "plain", "0"]));
    let iterator = value_to_string(&header[0]);
    let chunk = match &header[1] {
        Value::BulkString(bytes) => bytes.clone(),
        other => panic!("BF.SCANDUMP chunk: {other:?}"),
    };
    raw_ok(
        c,
        &[
            b"BF.LOADCHUNK".as_slice(),
            b"loaded",
            iterator.as_bytes(),
            &chunk,
        ],
    );
    let mut forms = forms;
    forms.push(format!("BF.LOADCHUNK loaded {iterator} data"));
    // BF.LOAD with a valkey-bloom object's blob, as valkey-bloom's AOF rewrite writes it.
    let object = rustbloom_testkit::valkeybloom::VbObject::new(1000, 0.01, 2, 0.5, None);
    raw_ok(
        c,
        &[b"BF.LOAD".as_slice(), b"valkey-loaded", &object.load_blob()],
    );
    forms.push("BF.LOAD valkey-loaded data".into());
    forms
}

/// Forms the parser refuses for their shape, not their values: the grammar must not admit them.
const REFUSED_FORMS: &[&str] = &[
    "BF.RESERVE k 0.01 1000 EXPANSION 2 NONSCALING",
    "BF.RESERVE k 0.01 1000 WINDOW 60000 EXPANSION 2",
    "BF.RESERVE k 0.01 1000 NONSCALING WINDOW 60000",
    "BF.RESERVE k 0.01 1000 PARTITION 0 4 99 PARTITIONS 4 99",
    "BF.RESERVE k 0.01 1000 SHAPE 64 7",
    "BF.RESERVE k 0.01 1000 SEED 1 SEED 2",
    "BF.RESERVE k 0.01 1000 ITEMS a",
    "BF.INSERT k CAPACITY 100 a b",
    "BF.INSERT k ITEMS",
    "BF.INFO k CAPACITY SIZE",
    "BF.INFO k NONSCALING",
    "BF.GROW k 1 64 7",
    "BF.ADDAT k 1000",
    "BF.MERGE k",
    "BF.RESERVE k LIKE",
    "BF.RESERVE k 0.01 1000 LIKE other",
];

#[test]
fn command_docs_show_every_form_the_parser_accepts() {
    let s = Server::start();
    let mut c = s.conn();
    let docs = command_docs(&mut c);
    let mut failures = Vec::new();
    let mut used: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for form in accepted_forms(&mut c) {
        let words = words(&form);
        let name = words[0].to_lowercase();
        let Some(args) = docs.get(&name) else {
            failures.push(format!("COMMAND DOCS has no {name}, which `{form}` runs"));
            continue;
        };
        let mut documented = BTreeSet::new();
        tokens(args, &mut documented);
        let missing: Vec<&String> = words[1..]
            .iter()
            .filter(|w| w.len() > 1 && w.chars().all(|ch| ch.is_ascii_alphabetic()))
            .filter(|w| w.chars().all(|ch| ch.is_ascii_uppercase()))
            .filter(|w| !documented.contains(*w))
            .collect();
        if !missing.is_empty() {
            failures.push(format!(
                "COMMAND DOCS {name} lacks the token(s) {missing:?} of `{form}`, which the parser accepts"
            ));
        } else if !matches(args, &words) {
            failures.push(format!(
                "`{form}`, which the parser accepts, is not a form of COMMAND DOCS {name}: {}",
                synopsis(args)
            ));
        }
        let used = used.entry(name).or_default();
        used.extend(words[1..].iter().map(|w| w.to_uppercase()));
    }
    for (name, args) in &docs {
        let mut documented = BTreeSet::new();
        tokens(args, &mut documented);
        let exercised = used.get(name);
        if exercised.is_none() {
            failures.push(format!(
                "COMMAND DOCS lists {name}, which no accepted form runs"
            ));
        }
        for token in documented {
            if !exercised.is_some_and(|used| used.contains(&token)) {
                failures.push(format!(
                    "COMMAND DOCS {name} has the token {token}, which no accepted form uses"
                ));
            }
        }
    }
    for form in REFUSED_FORMS {
        let words = words(form);
        let name = words[0].to_lowercase();
        assert!(
            raw(&mut c, &words).is_err(),
            "`{form}` is listed as refused, yet the parser accepts it"
        );
        if docs.get(&name).is_some_and(|args| matches(args, &words)) {
            failures.push(format!(
                "COMMAND DOCS {name} admits `{form}`, which the parser refuses: {}",
                synopsis(&docs[&name])
            ));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

/// A page of the repository and its text.
fn pages() -> Vec<(String, String)> {
    let root = env!("CARGO_MANIFEST_DIR");
    let mut names = vec!["README.md".to_string()];
    let mut docs: Vec<String> = std::fs::read_dir(format!("{root}/docs"))
        .expect("read docs/")
        .map(|entry| entry.expect("docs/ entry").file_name())
        .filter_map(|name| name.to_str().map(str::to_string))
        .filter(|name| name.ends_with(".md"))
        .map(|name| format!("docs/{name}"))
        .collect();
    docs.sort();
    names.extend(docs);
    names
        .into_iter()
        .map(|name| {
            let text = std::fs::read_to_string(format!("{root}/{name}"))
                .unwrap_or_else(|e| panic!("read {name}: {e}"));
            (name, text)
        })
        .collect()
}

/// The cells of a table row, split at the pipes markdown does not escape (`\|` is a pipe inside a
/// cell).
fn cells(row: &str) -> Vec<String> {
    let mut cells = Vec::new();
    let mut cell = String::new();
    let mut chars = row.trim().trim_start_matches('|').chars().peekable();
    while let Some(ch) = chars.next() {
        match ch {
            '\\' if chars.peek() == Some(&'|') => {
                cell.push('|');
                chars.next();
            }
            '|' => cells.push(std::mem::take(&mut cell).trim().to_string()),
            _ => cell.push(ch),
        }
    }
    if !cell.trim().is_empty() {
        cells.push(cell.trim().to_string());
    }
    cells
}

/// A row of a `| command | reply |` table: page, 1-based line, first cell.
struct Row {
    page: String,
    line: usize,
    first_cell: String,
}

fn command_table_rows(pages: &[(String, String)]) -> Vec<Row> {
    let mut rows = Vec::new();
    for (page, text) in pages {
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            if line.trim() != "| command | reply |" {
                continue;
            }
            // The delimiter row, then the body until the first line that is not a row.
            for (j, row) in lines.iter().enumerate().skip(i + 2) {
                if !row.trim_start().starts_with('|') {
                    break;
                }
                rows.push(Row {
                    page: page.clone(),
                    line: j + 1,
                    first_cell: cells(row).into_iter().next().unwrap_or_default(),
                });
            }
        }
    }
    rows
}

/// A word a form shows as a keyword: capitals (and `_`), two characters or more.
fn is_keyword(word: &str) -> bool {
    word.len() > 1
        && word.starts_with(|ch: char| ch.is_ascii_uppercase())
        && word
            .chars()
            .all(|ch| ch.is_ascii_uppercase() || ch == '_' || ch.is_ascii_digit())
}

#[test]
fn command_tables_of_the_documents_match_command_docs() {
    let s = Server::start();
    let mut c = s.conn();
    let docs = command_docs(&mut c);
    let rows = command_table_rows(&pages());
    assert!(
        !rows.is_empty(),
        "no `| command | reply |` table in README.md or docs/*.md"
    );
    let mut failures = Vec::new();
    let mut shown = BTreeSet::new();
    for row in &rows {
        let at = format!("{}:{}", row.page, row.line);
        let Some(form) = row
            .first_cell
            .strip_prefix('`')
            .and_then(|cell| cell.strip_suffix('`'))
            .filter(|form| !form.contains('`'))
        else {
            failures.push(format!(
                "{at}: the first cell is not one backticked form: {}",
                row.first_cell
            ));
            continue;
        };
        let words: Vec<&str> = form
            .split(|ch: char| ch.is_whitespace() || "[]|<>{}".contains(ch))
            .filter(|word| !word.is_empty())
            .collect();
        let Some(command) = words.first() else {
            failures.push(format!("{at}: an empty form"));
            continue;
        };
        let name = command.to_lowercase();
        let Some(args) = docs.get(&name) else {
            failures.push(format!("{at}: COMMAND DOCS has no command {command}"));
            continue;
        };
        shown.insert(name.clone());
        let mut documented = BTreeSet::new();
        tokens(args, &mut documented);
        for word in &words[1..] {
            if is_keyword(word) && !documented.contains(*word) {
                failures.push(format!(
                    "{at}: {command} shows {word}, which is not a token of COMMAND DOCS {name} \
                     ({})",
                    synopsis(args)
                ));
            }
        }
    }
    for name in docs.keys() {
        if !shown.contains(name) {
            failures.push(format!(
                "COMMAND DOCS lists {name}, which no `| command | reply |` row of README.md or \
                 docs/*.md shows"
            ));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}
