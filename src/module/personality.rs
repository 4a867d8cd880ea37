//! The valkey-bloom personality (`loadmodule librustbloom.so personality valkey-bloom`): for
//! users whose code was written against valkey-bloom, the replies it gives where RedisBloom's
//! differ. Off by default: RedisBloom's behaviour stays the default.
//!
//! With it on, new filters are valkey-bloom objects (type `bloomfltr`, valkey-bloom's hashing,
//! sizing and growth, saved in its encodings), so they behave as valkey-bloom's would and their
//! DUMP, RDB and AOF go to valkey-bloom or to a rustbloom without the personality unchanged;
//! commands are registered under valkey-bloom's upper-case names (so `cmdstat_BF.ADD`) with its
//! arity -1; `BF.INFO key FIELD` answers a plain value; the default capacity is valkey-bloom's
//! 100000; a reservation larger than maxmemory is admitted under an evicting policy (the server
//! evicts); errors use valkey-bloom's texts. Names and arities are fixed when commands are
//! registered, so the personality is chosen at load and shown by `CONFIG GET bf.personality`.

use std::ffi::CStr;
use std::sync::atomic::{AtomicBool, Ordering};

use redis_module::raw;

use rustbloom_core::scalable::MAX_CAPACITY;

use super::errors::{CommandError, CommandResult};
use super::ffi::Command;
use super::ffi::{ConfigReply, StringConfig};

/// The module argument and config name (after the `bf.` prefix).
pub const NAME: &str = "personality";
const REDISBLOOM: &str = "redisbloom";
const VALKEY_BLOOM: &str = "valkey-bloom";

/// valkey-bloom's default capacity (its `bf.bloom-capacity`).
pub const VALKEY_BLOOM_CAPACITY: i64 = 100_000;

static VALKEY_BLOOM_ON: AtomicBool = AtomicBool::new(false);

/// True when the module was loaded with the valkey-bloom personality.
pub fn is_valkey_bloom() -> bool {
    VALKEY_BLOOM_ON.load(Ordering::Relaxed)
}

/// The chosen personality's name: the default value `bf.personality` is registered with, which
/// the server sets when the configuration file names none.
pub fn current_name() -> &'static CStr {
    if is_valkey_bloom() {
        c"valkey-bloom"
    } else {
        c"redisbloom"
    }
}

/// The personality `text` names, or why not.
fn parse(text: &[u8]) -> Result<bool, String> {
    match text.to_ascii_lowercase().as_slice() {
        b"redisbloom" => Ok(false),
        b"valkey-bloom" => Ok(true),
        _ => Err(format!(
            "{NAME} must be {REDISBLOOM} (the default) or {VALKEY_BLOOM}"
        )),
    }
}

/// Reads the `personality` module argument (any case) before anything is registered, since
/// command names, arities and config defaults depend on it; Err for an invalid value.
pub fn choose(args: &[&[u8]]) -> Result<(), String> {
    for pair in args.chunks(2) {
        if let [name, value] = pair {
            if name.eq_ignore_ascii_case(NAME.as_bytes()) {
                VALKEY_BLOOM_ON.store(parse(value)?, Ordering::Relaxed);
            }
        }
    }
    Ok(())
}

/// The string `bf.personality`'s getter handed out last.
static REPLY: ConfigReply = ConfigReply::new();

/// `bf.personality`: read-only, showing the personality chosen at load.
pub struct PersonalityConfig;

impl StringConfig for PersonalityConfig {
    const GET: &'static str = "CONFIG GET bf.personality";
    const SET: &'static str = "CONFIG SET bf.personality";

    fn get(_privdata: usize) -> *mut raw::RedisModuleString {
        REPLY.hand_out(&current_name().to_string_lossy())
    }

    /// Registered immutable, so only the configuration file reaches this (and the server's
    /// default at load): it may name the personality the module argument chose, nothing else,
    /// because the commands are registered by then.
    fn set(_privdata: usize, text: &[u8]) -> Result<(), String> {
        if parse(text)? == is_valkey_bloom() {
            Ok(())
        } else {
            Err(format!(
                "the personality is chosen when the module loads: loadmodule librustbloom.so \
                 {NAME} {}",
                String::from_utf8_lossy(text)
            ))
        }
    }
}

/// valkey-bloom's text for an error of ours whose meaning is the same, else the error itself.
/// The texts are those valkey-bloom 1.0 replies (its `utils.rs` and command handler).
pub fn error(error: CommandError) -> CommandError {
    let Some(text) = error.text() else {
        return error;
    };
    let theirs = match text {
        "ERR Invalid information value" => "ERR invalid information value",
        "ERR Unknown argument received" => "ERR unknown argument received",
        "ERR Bad error rate" => "ERR bad error rate",
        "ERR Bad capacity" => "ERR bad capacity",
        "ERR Bad expansion" => "ERR bad expansion",
        "ERR error rate must be in the range (0.000000, 1.000000)" => {
            "ERR (0 < error rate range < 1)"
        }
        "ERR capacity must be in the range [1, 1073741824]" => "ERR bad capacity",
        // Over bf.max-filter-bytes, which valkey-bloom calls bf.bloom-memory-usage-limit.
        text if text.ends_with("(raise it with CONFIG SET bf.max-filter-bytes)") => {
            "ERR operation exceeds bloom object memory limit"
        }
        _ => return error,
    };
    CommandError::Static(theirs)
}

/// valkey-bloom's largest expansion (its `BLOOM_EXPANSION_MAX`).
const VALKEY_BLOOM_MAX_EXPANSION: u64 = 10;

/// valkey-bloom 1.0's checks of a BF.RESERVE or BF.INSERT written in its grammar, before ours
/// parse it: the same refusals, in its words (its texts, and "wrong number of arguments" where
/// an option lacks its value or the items are missing). A call using an option only rustbloom
/// has (WINDOW, SHAPE, PARTITION, a numeric SEED, as our primaries replicate creations) is left
/// to our parser alone.
pub fn check_create_args(args: &[&[u8]], insert: bool) -> Result<(), CommandError> {
    const OURS: [&str; 4] = ["WINDOW", "SHAPE", "PARTITION", "PARTITIONS"];
    let is = |arg: &[u8], token: &str| arg.eq_ignore_ascii_case(token.as_bytes());
    if args
        .iter()
        .any(|arg| OURS.iter().any(|token| is(arg, token)))
    {
        return Ok(());
    }
    if !insert {
        // BF.RESERVE key error_rate capacity [EXPANSION e | NONSCALING]
        if !(4..=6).contains(&args.len()) {
            return Err(CommandError::WrongArity);
        }
        error_rate(args[2])?;
        capacity(args[3])?;
        return match &args[4..] {
            [] => Ok(()),
            [token] if is(token, "NONSCALING") => Ok(()),
            [token, value] if is(token, "EXPANSION") => expansion(value),
            [token, ..] if is(token, "SEED") || is(token, "TIGHTENING") => Ok(()),
            _ => Err(CommandError::WrongArity),
        };
    }
    // BF.INSERT key [CAPACITY c] [ERROR e] [EXPANSION x] [NOCREATE] [NONSCALING] ... ITEMS item...
    if args.len() < 4 {
        return Err(CommandError::WrongArity);
    }
    let mut at = 2;
    while at < args.len() {
        let token = args[at];
        let value = args.get(at + 1);
        if is(token, "NOCREATE") || is(token, "NONSCALING") {
            at += 1;
            continue;
        }
        if is(token, "ITEMS") {
            return if value.is_some() {
                Ok(())
            } else {
                Err(CommandError::WrongArity)
            };
        }
        let check: fn(&[u8]) -> Result<(), CommandError> = if is(token, "CAPACITY") {
            capacity
        } else if is(token, "ERROR") {
            error_rate
        } else if is(token, "EXPANSION") {
            expansion
        } else if ["TIGHTENING", "SEED", "VALIDATESCALETO"]
            .iter()
            .any(|option| is(token, option))
        {
            |_| Ok(())
        } else {
            return Err(CommandError::Static("ERR unknown argument received"));
        };
        check(value.ok_or(CommandError::WrongArity)?)?;
        at += 2;
    }
    // No ITEMS: valkey-bloom counts it as missing arguments.
    Err(CommandError::WrongArity)
}

fn error_rate(text: &[u8]) -> Result<(), CommandError> {
    let rate: f64 = std::str::from_utf8(text)
        .ok()
        .and_then(|text| text.parse().ok())
        .ok_or(CommandError::Static("ERR bad error rate"))?;
    // valkey-bloom's suite expects a rate that is 1 as a 32-bit float (0.999999999) to be out
    // of range, as valkey-bloom 0.1 parsed it; no useful rate is refused by the rounding.
    let rounded = rate as f32;
    if rate > 0.0 && rounded > 0.0 && rounded < 1.0 {
        Ok(())
    } else {
        Err(CommandError::Static("ERR (0 < error rate range < 1)"))
    }
}

fn capacity(text: &[u8]) -> Result<(), CommandError> {
    match std::str::from_utf8(text)
        .ok()
        .and_then(|text| text.parse::<i64>().ok())
    {
        Some(0) => Err(CommandError::Static(
            "ERR (capacity should be larger than 0)",
        )),
        Some(capacity) if capacity > 0 && capacity <= MAX_CAPACITY as i64 => Ok(()),
        _ => Err(CommandError::Static("ERR bad capacity")),
    }
}

fn expansion(text: &[u8]) -> Result<(), CommandError> {
    match std::str::from_utf8(text)
        .ok()
        .and_then(|text| text.parse::<u64>().ok())
    {
        Some(expansion) if (1..=VALKEY_BLOOM_MAX_EXPANSION).contains(&expansion) => Ok(()),
        _ => Err(CommandError::Static("ERR bad expansion")),
    }
}

/// Runs a command's handler under the personality: BF.RESERVE and BF.INSERT from a client are
/// first held to valkey-bloom's checks ([`check_create_args`]).
pub fn run(command: &Command, handler: impl FnOnce(&Command) -> CommandResult) -> CommandResult {
    let name = command.arg(0);
    let reserve = name.eq_ignore_ascii_case(b"BF.RESERVE");
    if (reserve || name.eq_ignore_ascii_case(b"BF.INSERT")) && !command.is_replayed() {
        let args: Vec<&[u8]> = command.args_from(0).collect();
        check_create_args(&args, !reserve)?;
    }
    handler(command)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(line: &str) -> Result<(), CommandError> {
        let args: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
        let insert = line.starts_with("BF.INSERT");
        check_create_args(&args, insert)
    }

    fn text(line: &str) -> String {
        match check(line) {
            Ok(()) => "ok".to_string(),
            Err(CommandError::WrongArity) => "arity".to_string(),
            Err(error) => error.text().unwrap_or_default().to_string(),
        }
    }

    #[test]
    fn valkey_bloom_argument_checks() {
        for (line, want) in [
            ("BF.RESERVE k 0.01 100", "ok"),
            ("BF.RESERVE k 0.01 100 NONSCALING", "ok"),
            ("BF.RESERVE k 0.01 100 EXPANSION 10", "ok"),
            ("BF.RESERVE k 0.01 100 EXPANSION 11", "ERR bad expansion"),
            ("BF.RESERVE k 0.01 100 NONSCALING EXPANSION 2", "arity"),
            ("BF.RESERVE k x 100", "ERR bad error rate"),
            ("BF.RESERVE k 1 100", "ERR (0 < error rate range < 1)"),
            (
                "BF.RESERVE k 0.999999999 100",
                "ERR (0 < error rate range < 1)",
            ),
            (
                "BF.RESERVE k 0.01 0",
                "ERR (capacity should be larger than 0)",
            ),
            ("BF.RESERVE k 0.01 -1", "ERR bad capacity"),
            ("BF.RESERVE k 0.01 1.5", "ERR bad capacity"),
            ("BF.RESERVE k", "arity"),
            ("BF.INSERT k ITEMS a b", "ok"),
            (
                "BF.INSERT k CAPACITY 10 ERROR 0.1 NOCREATE NONSCALING ITEMS a",
                "ok",
            ),
            (
                "BF.INSERT k TIGHTENING 0.5 SEED s VALIDATESCALETO 9 ITEMS a",
                "ok",
            ),
            ("BF.INSERT k HELLO", "arity"),
            ("BF.INSERT k HELLO WORLD", "ERR unknown argument received"),
            ("BF.INSERT k EXPANSION 2 EXPANSION", "arity"),
            ("BF.INSERT k EXPANSION 2 ITEMS", "arity"),
            ("BF.INSERT k EXPANSION 2 NOCREATE", "arity"),
            (
                "BF.INSERT k CAPACITY 0 ITEMS a",
                "ERR (capacity should be larger than 0)",
            ),
            // Options only rustbloom has are left to its own parser.
            ("BF.RESERVE k 0.01 100 WINDOW 1000 SEED 1", "ok"),
            ("BF.INSERT k WINDOW 1000 ITEMS a", "ok"),
        ] {
            assert_eq!(text(line), want, "{line}");
        }
    }

    #[test]
    fn error_texts() {
        let theirs =
            |ours: &'static str| error(CommandError::Static(ours)).text().map(String::from);
        assert_eq!(
            theirs("ERR Invalid information value").as_deref(),
            Some("ERR invalid information value")
        );
        assert_eq!(theirs("ERR not found").as_deref(), Some("ERR not found"));
        assert_eq!(error(CommandError::WrongArity), CommandError::WrongArity);
    }
}
