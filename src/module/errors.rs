//! The one place errors become replies: the error type every command returns, every fixed error
//! reply of the commands, every composed one, and the reply to each of the core's errors (in the
//! core's own words, from its `Display`, after `ERR `); `ffi/reply.rs` only sends them. A
//! replayed write (from a primary or the AOF) that cannot be applied is no reply: the server stops
//! rather than hold less than its primary accepted.

use std::fmt::Display;

use rustbloom_core::budget::LimitError;
use rustbloom_core::partition::{Partition, MAX_PARTITION_NAME_BYTES};
use rustbloom_core::scalable::{CreateError, PushError};
use rustbloom_core::window::WindowError;
use rustbloom_core::{DecodeError, InsertError};

use super::ffi::{stop_server, Command};
use super::stats;

/// A command's failure, turned into exactly one error reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommandError {
    /// The server's own "wrong number of arguments" reply, which names the command.
    WrongArity,
    /// The standard WRONGTYPE reply.
    WrongType,
    /// A fixed message, with its `ERR ` prefix.
    Static(&'static str),
    /// A composed message, with its `ERR ` prefix.
    Owned(String),
}

pub type CommandResult = Result<(), CommandError>;

/// The server's reply to a command on a key of another type, word for word.
const WRONG_TYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

impl CommandError {
    /// The text of the reply; None for [`CommandError::WrongArity`], whose text the server
    /// composes (`RedisModule_WrongArity`).
    pub fn text(&self) -> Option<&str> {
        match self {
            CommandError::WrongArity => None,
            CommandError::WrongType => Some(WRONG_TYPE),
            CommandError::Static(text) => Some(text),
            CommandError::Owned(text) => Some(text),
        }
    }
}

/// The reply to a command that failed internally (a bug: it panicked, or the core answered what
/// it never should).
pub const INTERNAL: CommandError = CommandError::Static("ERR internal error in rustbloom");

// RedisBloom's replies, word for word, with the `ERR ` prefix added where RedisBloom has none:
// BF.RESERVE's (the range texts are those of RedisBloom 8, bundled with Redis 8), and BF.INSERT's
// own, which name the option (`Bad capacity`) whatever is wrong with its value.
pub const BAD_ERROR_RATE: CommandError = CommandError::Static("ERR bad error rate");
pub const ERROR_RATE_RANGE: CommandError =
    CommandError::Static("ERR error rate must be in the range (0.000000, 1.000000)");
pub const BAD_CAPACITY: CommandError = CommandError::Static("ERR bad capacity");
pub const CAPACITY_RANGE: CommandError =
    CommandError::Static("ERR capacity must be in the range [1, 1073741824]");
pub const BAD_EXPANSION: CommandError = CommandError::Static("ERR bad expansion");
/// BF.RESERVE's EXPANSION with no value after it.
pub const NO_EXPANSION: CommandError = CommandError::Static("ERR no expansion");
pub const INSERT_BAD_ERROR_RATE: CommandError = CommandError::Static("ERR Bad error rate");
pub const INSERT_BAD_CAPACITY: CommandError = CommandError::Static("ERR Bad capacity");
pub const INSERT_BAD_EXPANSION: CommandError = CommandError::Static("ERR Bad expansion");
/// EXPANSION below 1: BF.RESERVE's reply in RedisBloom 2.8, BF.INSERT's (whose 0 no longer means
/// non-scaling in RedisBloom 2.8, where it creates nothing).
pub const EXPANSION_TOO_SMALL: CommandError =
    CommandError::Static("ERR expansion should be greater or equal to 1");
pub const INSERT_BAD_ARGUMENT: CommandError = CommandError::Static("ERR Bad argument received");
pub const EXPANSION_RANGE: CommandError =
    CommandError::Static("ERR expansion must be in the range [1, 32768]");
pub const NONSCALING_EXPANSION: CommandError =
    CommandError::Static("ERR Nonscaling filters cannot expand");
pub const BAD_SEED: CommandError = CommandError::Static("ERR bad seed");
pub const UNKNOWN_ARGUMENT: CommandError = CommandError::Static("ERR Unknown argument received");
pub const BAD_ITERATOR: CommandError = CommandError::Static("ERR Second argument must be numeric");
pub const BAD_INFO_FIELD: CommandError = CommandError::Static("ERR Invalid information value");
pub const BAD_SHAPE: CommandError =
    CommandError::Static("ERR bad layer shape (expected bits, hashes and a layout code)");
pub const BAD_LAYER_INDEX: CommandError = CommandError::Static("ERR bad layer index");
pub const BAD_WINDOW: CommandError = CommandError::Static("ERR bad window");
pub const WINDOW_RANGE: CommandError = CommandError::Static(
    "ERR window must be a whole number of milliseconds in the range [4, 1099511627776]",
);
pub const WINDOW_EXPANSION: CommandError = CommandError::Static(
    "ERR window filters do not expand: WINDOW excludes EXPANSION and NONSCALING",
);
pub const BAD_TIMESTAMP: CommandError = CommandError::Static("ERR bad timestamp");
pub const BAD_PARTITION: CommandError =
    CommandError::Static("ERR bad partition (expected index, partitions and routing seed)");
pub const PARTITIONS_RANGE: CommandError =
    CommandError::Static("ERR partitions must be in the range [1, 4096]");
pub const PARTITION_AND_PARTITIONS: CommandError =
    CommandError::Static("ERR PARTITION and PARTITIONS exclude each other");

// valkey-bloom's replies to its options, word for word (a user of both modules sees one text).
pub const BAD_TIGHTENING: CommandError = CommandError::Static("ERR bad tightening ratio");
pub const TIGHTENING_RANGE: CommandError =
    CommandError::Static("ERR (0 < tightening ratio range < 1)");
pub const NONSCALING_VALIDATE_SCALE_TO: CommandError =
    CommandError::Static("ERR cannot use NONSCALING and VALIDATESCALETO options together");
/// VALIDATESCALETO n where the filter's bits would pass `bf.max-filter-bytes` before n.
pub const SCALE_TO_MEMORY: CommandError =
    CommandError::Static("ERR provided VALIDATESCALETO causes bloom object to exceed memory limit");
/// VALIDATESCALETO n where the growth rule stops before n (error rates too small to size, or
/// the layer cap).
pub const SCALE_TO_RATE: CommandError =
    CommandError::Static("ERR provided VALIDATESCALETO causes false positive to degrade to 0");
pub const WINDOW_TIGHTENING: CommandError = CommandError::Static(
    "ERR window filters do not scale: WINDOW excludes TIGHTENING and VALIDATESCALETO",
);
/// A 32-byte SEED (valkey-bloom's) with options only rustbloom's own filters have.
pub const VALKEY_SEED_OPTIONS: CommandError = CommandError::Static(
    "ERR a 32-byte SEED creates a valkey-bloom filter: WINDOW, SHAPE and PARTITION do not apply",
);

/// An option given twice (BF.RESERVE, BF.INSERT).
pub fn duplicate_option(name: &str) -> CommandError {
    CommandError::Owned(format!("ERR duplicate option {name}"))
}

// The commands' own.
pub const NOT_FOUND: CommandError = CommandError::Static("ERR not found");
pub const ITEM_EXISTS: CommandError = CommandError::Static("ERR item exists");
pub const LOADING: CommandError =
    CommandError::Static("ERR filter is being loaded by BF.LOADCHUNK");
pub const BAD_DATA: CommandError = CommandError::Static("ERR received bad data");
pub const NOT_SCALABLE: CommandError =
    CommandError::Static("ERR BF.GROW applies to rustbloom's scalable filters only");
pub const NOT_WINDOW: CommandError =
    CommandError::Static("ERR BF.ADDAT applies to window filters only");
/// BF.LOAD onto an existing key: valkey-bloom's reply, word for word.
pub const BUSY_KEY: CommandError = CommandError::Static("BUSYKEY Target key name already exists.");
/// BF.LOAD of a blob that is not a valkey-bloom object: valkey-bloom's reply.
pub const BLOB_DECODE_FAILED: CommandError =
    CommandError::Static("ERR bloom object decoding failed");
pub const TIMESTAMP_AHEAD: CommandError =
    CommandError::Static("ERR timestamp more than one window ahead of the server's clock");

// Partitioned filters'.
/// A partitioned filter's name too long for its P partition keys to be listed.
pub fn names_too_long(partitions: u32) -> CommandError {
    CommandError::Owned(format!(
        "ERR name too long for {partitions} partitions: the name's length times the partitions \
         must be at most {MAX_PARTITION_NAME_BYTES} bytes (BF.INFO lists every partition key)"
    ))
}

/// Non-item commands on a descriptor (BF.CARD, BF.SCANDUMP, ...).
pub const DESCRIPTOR: CommandError = CommandError::Static(
    "ERR key is a partitioned filter: its items live in its partitions (BF.INFO lists them)",
);
pub const SEED_REUSED: CommandError =
    CommandError::Static("ERR a partition's SEED must differ from its routing seed");
pub const PARTITIONS_TOO_LARGE: CommandError =
    CommandError::Static("ERR capacity too large for this many partitions");
pub const DESCRIPTOR_OPTIONS: CommandError = CommandError::Static(
    "ERR PARTITIONS creates a descriptor: SEED, SHAPE, TIGHTENING and VALIDATESCALETO apply to \
     its partitions only",
);

/// The refusal of items sent to a descriptor.
pub fn items_to_descriptor(command: &Command) -> CommandError {
    CommandError::Owned(format!(
        "ERR {} is a partitioned filter: send each item to its partition (BF.INFO {} lists them)",
        String::from_utf8_lossy(command.arg(1)),
        String::from_utf8_lossy(command.arg(1)),
    ))
}

/// The refusal of an item that belongs to another partition.
pub fn misrouted(partition: &Partition, routed: u32) -> CommandError {
    CommandError::Owned(format!(
        "ERR item routed to partition {routed} of {}, not {}",
        partition.count(),
        partition.index()
    ))
}

/// What tells whether the running command replays a write from the primary or the AOF (which must
/// never be refused, so a refusal stops the server); the command's memory budget knows it.
pub trait Replayable {
    fn is_replayed(&self) -> bool;
}

/// The error reply for a limit that refused an allocation: what was hit and how to raise it.
pub fn limit_message(limit: LimitError) -> String {
    match limit {
        LimitError::FilterBytes { .. } => {
            format!("ERR {limit} (raise it with CONFIG SET bf.max-filter-bytes)")
        }
        _ => format!("ERR {limit}"),
    }
}

/// The reply to a memory limit: an error for a client; for a replayed write, which must not be
/// dropped, the server stops.
pub fn limit_error(command: &Command, budget: &impl Replayable, limit: LimitError) -> CommandError {
    if budget.is_replayed() {
        let key = String::from_utf8_lossy(command.arg(1));
        stop_server(&format!(
            "cannot apply a replicated or AOF write to key '{key}': {}",
            limit_message(limit)
        ));
    }
    stats::count(&stats::REFUSED_BY_LIMITS, 1);
    CommandError::Owned(limit_message(limit))
}

/// A replayed write that this server cannot apply as the primary did: stop.
pub fn replay_mismatch(command: &Command, why: &str) -> ! {
    let key = String::from_utf8_lossy(command.arg(1));
    stop_server(&format!(
        "cannot apply a replicated or AOF write to key '{key}': {why}"
    ))
}

/// The error an add stopped at, as users see it.
pub fn insert_error(
    command: &Command,
    budget: &impl Replayable,
    error: InsertError,
) -> CommandError {
    match error {
        InsertError::Limit(limit) => limit_error(command, budget, limit),
        error => core_error(error),
    }
}

/// The reply to a filter that cannot be created: a shape a replayed write named that this server
/// cannot make stops it (see [`replay_mismatch`]).
pub fn create_error(
    command: &Command,
    budget: &impl Replayable,
    error: CreateError,
) -> CommandError {
    match error {
        CreateError::Shape(why) if budget.is_replayed() => replay_mismatch(command, why),
        CreateError::Limit(limit) => limit_error(command, budget, limit),
        error => core_error(error),
    }
}

/// The reply to a window filter that cannot be created, as [`create_error`].
pub fn window_error(
    command: &Command,
    budget: &impl Replayable,
    error: WindowError,
) -> CommandError {
    match error {
        WindowError::Shape(why) if budget.is_replayed() => replay_mismatch(command, why),
        WindowError::Limit(limit) => limit_error(command, budget, limit),
        error => core_error(error),
    }
}

/// The reply to a BF.GROW refused, as [`create_error`].
pub fn push_error(command: &Command, budget: &impl Replayable, error: PushError) -> CommandError {
    match error {
        PushError::Shape(why) if budget.is_replayed() => replay_mismatch(command, why),
        PushError::Limit(limit) => limit_error(command, budget, limit),
        error => core_error(error),
    }
}

/// The reply to a BF.LOADCHUNK header that cannot be loaded: RedisBloom's for corrupt data.
pub fn header_error(
    command: &Command,
    budget: &impl Replayable,
    error: DecodeError,
) -> CommandError {
    match error {
        DecodeError::Corrupt(_) => BAD_DATA,
        DecodeError::Limit(limit) => limit_error(command, budget, limit),
    }
}

/// A core error whose own words are the reply.
pub fn core_error(error: impl Display) -> CommandError {
    CommandError::Owned(format!("ERR {error}"))
}
