//! The client's errors.

use std::fmt;

/// Everything a client operation can fail with.
#[derive(Debug)]
pub enum Error {
    /// The URL could not be parsed or no node could be reached.
    Connect(String),
    /// The server refused a command, in its own words without Redis' `ERR ` prefix (`item
    /// exists`, `non scaling filter is full`; other codes stay: `WRONGTYPE …`), as the
    /// Python, PHP and Node clients report it (docs/partitions.md, "One contract").
    Server(String),
    /// The connection failed and retrying did not help within the deadline.
    Connection(String),
    /// A reply of an unexpected shape.
    Protocol(String),
    /// Partition `index` (key `key`) of the partitioned filter `name` does not exist, found by
    /// a lookup.
    MissingPartition {
        name: String,
        index: u32,
        key: String,
    },
    /// A key of the filter no longer exists while items were being added to it (deleted,
    /// expired, or lost in a restart or failover): adds never create a filter, so nothing was
    /// recreated. `index`: the partition whose key it is, `None` for a plain filter's own key.
    /// `acknowledged`: items of the failing call the server had added before.
    Vanished {
        name: String,
        index: Option<u32>,
        key: String,
        acknowledged: u64,
    },
    /// A partitioned filter's parts disagree (P, routing seed or index).
    Inconsistent(String),
    /// The caller asked for something impossible (a bad option).
    Usage(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Connect(s) | Error::Server(s) | Error::Connection(s) => f.write_str(s),
            Error::Protocol(s) => write!(f, "unexpected reply: {s}"),
            Error::MissingPartition { name, index, key } => missing(f, name, *index, key),
            Error::Vanished {
                name,
                index,
                key,
                acknowledged,
            } => {
                match index {
                    Some(index) => missing(f, name, *index, key)?,
                    // A plain filter has no partition to name; the same sentence otherwise.
                    None => write!(
                        f,
                        "{} is missing (deleted, expired, or lost in a restart or failover; adds \
                         never recreate it): restore it or recreate the filter",
                        quoted(name)
                    )?,
                }
                write!(
                    f,
                    "; {acknowledged} items of this call had been acknowledged"
                )
            }
            Error::Inconsistent(s) => write!(f, "inconsistent partitioned filter: {s}"),
            Error::Usage(s) => f.write_str(s),
        }
    }
}

impl std::error::Error for Error {}

/// The contract's sentence for a missing partition (docs/partitions.md, "One contract"), word
/// for word as the Python, PHP and Node clients write it.
fn missing(f: &mut fmt::Formatter<'_>, name: &str, index: u32, key: &str) -> fmt::Result {
    write!(
        f,
        "partition {index} of {} is missing (key {}): restore it or recreate the filter",
        quoted(name),
        quoted(key)
    )
}

/// A name or key as every client's messages show it: JSON-quoted text (what Python's
/// `json.dumps(…, ensure_ascii=False)` and JavaScript's `JSON.stringify` write), so that a name
/// holding a quote or a newline cannot be misread.
pub fn quoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if u32::from(c) < 0x20 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

pub type Result<T> = std::result::Result<T, Error>;

/// The text of a server's error reply as this crate reports it: without the generic `ERR`
/// code, which says nothing the text does not (`ERR item exists` is `item exists`); any other
/// code stays, as callers tell failures apart by it (`CLUSTERDOWN …`, `MOVED …`, `WRONGTYPE …`).
fn reply_text(code: &str, detail: Option<&str>) -> String {
    match (code, detail) {
        ("ERR", Some(d)) => d.to_string(),
        (c, Some(d)) => format!("{c} {d}"),
        (c, None) => c.to_string(),
    }
}

/// The text of an error the server sent (without `ERR `, see [`Error::Server`]), else the
/// client's description.
pub fn server_text(e: &redis::RedisError) -> String {
    match e.code() {
        Some(c) => reply_text(c, e.detail()),
        None => e.to_string(),
    }
}

/// The text of an error reply nested in a pipeline or array reply (without `ERR `).
pub fn server_error_text(e: &redis::ServerError) -> String {
    reply_text(e.code(), e.details())
}

/// A server error text made readable: an unknown BF.* command means the module is not loaded.
pub fn explain(text: String) -> Error {
    let lower = text.to_ascii_lowercase();
    if lower.contains("unknown command") && lower.contains("bf.") {
        Error::Server(format!(
            "the rustbloom module is not loaded on this server (it answered: {text}); load it with \
             `loadmodule /path/to/librustbloom.so` in redis.conf or `MODULE LOAD \
             /path/to/librustbloom.so`"
        ))
    } else {
        Error::Server(text)
    }
}

/// True for failures that a resend may cure: a lost connection, a timeout, a cluster in the
/// middle of a failover or a reshard.
pub fn is_transient(e: &redis::RedisError) -> bool {
    if e.is_io_error() || e.is_connection_dropped() || e.is_connection_refusal() || e.is_timeout() {
        return true;
    }
    if e.is_cluster_error() {
        return true;
    }
    matches!(
        e.code(),
        Some("CLUSTERDOWN" | "TRYAGAIN" | "LOADING" | "MASTERDOWN" | "MOVED" | "ASK" | "READONLY")
    )
}

/// Same as [`is_transient`] for an error text nested in a reply.
pub fn is_transient_text(text: &str) -> bool {
    let code = text.split(' ').next().unwrap_or("");
    matches!(
        code,
        "CLUSTERDOWN" | "TRYAGAIN" | "LOADING" | "MASTERDOWN" | "MOVED" | "ASK" | "READONLY"
    )
}

/// A redis crate error as this crate's: the server's words explained, or a connection error.
pub(crate) fn to_error(e: &redis::RedisError) -> Error {
    if e.code().is_some() {
        explain(server_text(e))
    } else {
        Error::Connection(format!("connection error: {e}"))
    }
}
