//! The shared client scenario's driver for this crate (tests/clients/scenario/test_scenario.py
//! runs it beside the Python, PHP, Node and bfctl ones and describes the protocol): reads one
//! JSON request a line on stdin, runs it with the synchronous API (or, with `--async`, the async
//! one on tokio) and writes one JSON answer a line on stdout.
//!
//! `cargo build --release -p rustbloom-client --example scenario_driver`, then
//! `scenario_driver [--async] redis://127.0.0.1:PORT`.
//!
//! Items are `&[u8]`, so the scenario's non-string items (a float, a boolean, null) cannot be
//! expressed here: the orchestrator never sends them to this driver.

use std::io::{self, BufRead, Write};
use std::time::Duration;

use rustbloom_client::{
    aio, Client, Error, Filter, Growth, ReadOptions, ReserveOptions, WriteOptions,
    DEFAULT_RETRY_FOR,
};
use serde_json::{json, Value};

/// The operations of the scenario over one of the two APIs.
trait Api {
    fn reserve(&mut self, name: &[u8], opts: &ReserveOptions) -> Result<(), Error>;
    fn discover(&mut self, name: &[u8]) -> Result<Option<Filter>, Error>;
    fn add(&mut self, f: &Filter, items: &[&[u8]], opts: &WriteOptions)
        -> Result<Vec<bool>, Error>;
    fn exists(
        &mut self,
        f: &Filter,
        items: &[&[u8]],
        opts: &ReadOptions,
    ) -> Result<Vec<bool>, Error>;
    fn drop_filter(&mut self, f: &Filter) -> Result<u64, Error>;
}

struct Sync(rustbloom_client::Connection);

impl Api for Sync {
    fn reserve(&mut self, name: &[u8], opts: &ReserveOptions) -> Result<(), Error> {
        Filter::reserve(&mut self.0, name, opts).map(|_| ())
    }
    fn discover(&mut self, name: &[u8]) -> Result<Option<Filter>, Error> {
        Filter::discover(&mut self.0, name)
    }
    fn add(
        &mut self,
        f: &Filter,
        items: &[&[u8]],
        opts: &WriteOptions,
    ) -> Result<Vec<bool>, Error> {
        f.add(&mut self.0, items, opts)
    }
    fn exists(
        &mut self,
        f: &Filter,
        items: &[&[u8]],
        opts: &ReadOptions,
    ) -> Result<Vec<bool>, Error> {
        f.exists_with(&mut self.0, items, opts)
    }
    fn drop_filter(&mut self, f: &Filter) -> Result<u64, Error> {
        f.drop(&mut self.0)
    }
}

struct Async {
    runtime: tokio::runtime::Runtime,
    conn: aio::Connection,
}

impl Api for Async {
    fn reserve(&mut self, name: &[u8], opts: &ReserveOptions) -> Result<(), Error> {
        let conn = &mut self.conn;
        self.runtime
            .block_on(Filter::reserve_async(conn, name, opts))
            .map(|_| ())
    }
    fn discover(&mut self, name: &[u8]) -> Result<Option<Filter>, Error> {
        self.runtime
            .block_on(Filter::discover_async(&mut self.conn, name))
    }
    fn add(
        &mut self,
        f: &Filter,
        items: &[&[u8]],
        opts: &WriteOptions,
    ) -> Result<Vec<bool>, Error> {
        self.runtime
            .block_on(f.add_async(&mut self.conn, items, opts))
    }
    fn exists(
        &mut self,
        f: &Filter,
        items: &[&[u8]],
        opts: &ReadOptions,
    ) -> Result<Vec<bool>, Error> {
        self.runtime
            .block_on(f.exists_with_async(&mut self.conn, items, opts))
    }
    fn drop_filter(&mut self, f: &Filter) -> Result<u64, Error> {
        self.runtime.block_on(f.drop_async(&mut self.conn))
    }
}

/// The contract's class name for an error of this crate (docs/partitions.md, "One contract"):
/// a missing partition, on an add or a lookup, is PartitionMissing; a node not answered within
/// the deadline NodeUnavailable; the server's refusal Server.
fn error_class(e: &Error) -> &'static str {
    match e {
        Error::MissingPartition { .. } | Error::Vanished { .. } => "PartitionMissing",
        Error::Connection(_) => "NodeUnavailable",
        Error::Server(_) => "Server",
        Error::Inconsistent(_) => "Descriptor",
        Error::Connect(_) => "Connect",
        Error::Protocol(_) => "Protocol",
        Error::Usage(_) => "Usage",
    }
}

fn failure(e: &Error) -> Value {
    json!({"error": {"class": error_class(e), "message": e.to_string()}})
}

/// A request's problem, not the client's: the driver stops with it.
type Fault = Box<dyn std::error::Error>;

fn text<'a>(request: &'a Value, field: &str) -> Result<&'a str, Fault> {
    request[field]
        .as_str()
        .ok_or_else(|| format!("request without {field}: {request}").into())
}

fn number(request: &Value, field: &str) -> Result<u64, Fault> {
    request[field]
        .as_u64()
        .ok_or_else(|| format!("request without {field}: {request}").into())
}

fn hex(digits: &str) -> Result<Vec<u8>, Fault> {
    let pair = |i: usize| u8::from_str_radix(digits.get(i..i + 2).unwrap_or("?"), 16);
    (0..digits.len())
        .step_by(2)
        .map(|i| pair(i).map_err(|e| format!("bad hex item {digits}: {e}").into()))
        .collect()
}

/// The items a request lists: text as its UTF-8 bytes, hex as the bytes it spells.
fn items(request: &Value) -> Result<Vec<Vec<u8>>, Fault> {
    let specs = request["items"]
        .as_array()
        .ok_or_else(|| format!("request without items: {request}"))?;
    specs
        .iter()
        .map(|spec| match (spec["text"].as_str(), spec["hex"].as_str()) {
            (Some(t), _) => Ok(t.as_bytes().to_vec()),
            (None, Some(h)) => hex(h),
            _ => Err(format!("an item this driver cannot express: {spec}").into()),
        })
        .collect()
}

/// The filter a request names; an absent one is the FilterNotFound answer.
fn filter(api: &mut dyn Api, name: &[u8]) -> Result<Filter, Value> {
    match api.discover(name) {
        Ok(Some(f)) => Ok(f),
        Ok(None) => Err(json!({"error": {"class": "FilterNotFound",
            "message": format!("no filter named {}", String::from_utf8_lossy(name))}})),
        Err(e) => Err(failure(&e)),
    }
}

fn answer(result: Result<Value, Error>) -> Value {
    match result {
        Ok(v) => json!({ "ok": v }),
        Err(e) => failure(&e),
    }
}

/// The request's deadline (`retry_for`, seconds), else the client's default.
fn retry_for(request: &Value) -> Duration {
    request["retry_for"]
        .as_f64()
        .and_then(|s| Duration::try_from_secs_f64(s).ok())
        .unwrap_or(DEFAULT_RETRY_FOR)
}

/// Adds `count` items `prefix<i>` in batches; after `pause_after` batches says how many were
/// acknowledged and waits for the go-ahead. Answers how many were acknowledged in all.
fn load(
    api: &mut dyn Api,
    f: &Filter,
    request: &Value,
    lines: &mut impl Iterator<Item = io::Result<String>>,
) -> Result<Value, Fault> {
    let (count, batch) = (number(request, "count")?, number(request, "batch")?.max(1));
    let pause_after = number(request, "pause_after")?;
    let prefix = text(request, "prefix")?;
    let opts = WriteOptions {
        retry_for: retry_for(request),
        ..WriteOptions::default()
    };
    let mut acknowledged = 0u64;
    for (n, start) in (0..count).step_by(batch as usize).enumerate() {
        if n as u64 == pause_after {
            say(&json!({ "paused": acknowledged }))?;
            lines.next().transpose()?;
        }
        let end = count.min(start + batch);
        let owned: Vec<Vec<u8>> = (start..end)
            .map(|i| format!("{prefix}{i}").into_bytes())
            .collect();
        let refs: Vec<&[u8]> = owned.iter().map(Vec::as_slice).collect();
        if let Err(e) = api.add(f, &refs, &opts) {
            let mut out = failure(&e);
            out["acknowledged"] = json!(acknowledged);
            return Ok(out);
        }
        acknowledged += end - start;
    }
    Ok(json!({"ok": {"acknowledged": acknowledged}}))
}

fn run(
    api: &mut dyn Api,
    request: &Value,
    lines: &mut impl Iterator<Item = io::Result<String>>,
) -> Result<Value, Fault> {
    let name = text(request, "name")?.as_bytes();
    let op = text(request, "op")?;
    if op == "reserve" {
        let opts = ReserveOptions {
            error_rate: request["error_rate"].as_f64().ok_or("no error_rate")?,
            capacity: number(request, "capacity")?,
            growth: Growth::Scaling { expansion: None },
            partitions: Some(u32::try_from(number(request, "partitions")?)?),
        };
        return Ok(answer(api.reserve(name, &opts).map(|()| Value::Null)));
    }
    let f = match filter(api, name) {
        Ok(f) => f,
        Err(answer) => return Ok(answer),
    };
    Ok(match op {
        "add" => {
            let owned = items(request)?;
            let refs: Vec<&[u8]> = owned.iter().map(Vec::as_slice).collect();
            let opts = WriteOptions {
                retry_for: retry_for(request),
                ..WriteOptions::default()
            };
            answer(api.add(&f, &refs, &opts).map(|a| json!(a)))
        }
        "exists" => {
            let owned = items(request)?;
            let refs: Vec<&[u8]> = owned.iter().map(Vec::as_slice).collect();
            let opts = ReadOptions {
                retry_for: retry_for(request),
                ..ReadOptions::default()
            };
            answer(api.exists(&f, &refs, &opts).map(|a| json!(a)))
        }
        "drop" => answer(api.drop_filter(&f).map(|n| json!(n))),
        "load" => load(api, &f, request, lines)?,
        other => return Err(format!("unknown op {other}").into()),
    })
}

fn say(answer: &Value) -> io::Result<()> {
    let mut out = io::stdout().lock();
    writeln!(out, "{answer}")?;
    out.flush()
}

fn main() -> Result<(), Fault> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (asynchronous, url) = match args.as_slice() {
        [flag, url] if flag == "--async" => (true, url),
        [url] => (false, url),
        _ => return Err("usage: scenario_driver [--async] URL".into()),
    };
    let mut api: Box<dyn Api> = if asynchronous {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let conn =
            runtime.block_on(async { Client::open_async(url).await?.connect_async().await })?;
        Box::new(Async { runtime, conn })
    } else {
        Box::new(Sync(Client::open(url)?.connect()?))
    };
    let mut lines = io::stdin().lock().lines();
    while let Some(line) = lines.next().transpose()? {
        let request: Value = serde_json::from_str(&line)?;
        let answer = run(api.as_mut(), &request, &mut lines)?;
        say(&answer)?;
    }
    Ok(())
}
