//! The one command table: every BF.* command's name, handler, flags and docs. It drives both the
//! registration and COMMAND DOCS / COMMAND INFO (summary, complexity, arguments and key specs, set
//! with `RedisModule_SetCommandInfo`, Redis 7.0+), so that cluster clients route by key specs and
//! `COMMAND DOCS bf.add` tells users the grammar.

use std::ffi::{c_char, c_int, CStr};
use std::mem::size_of;
use std::ptr::{null, null_mut};

use redis_module::raw;

use super::commands;
use super::ffi::{run_command, LoadCtx};

/// Declares the C entry point of a command handler.
macro_rules! entry_point {
    ($name:ident, $handler:path) => {
        extern "C" fn $name(
            ctx: *mut raw::RedisModuleCtx,
            argv: *mut *mut raw::RedisModuleString,
            argc: c_int,
        ) -> c_int {
            run_command(ctx, argv, argc, $handler)
        }
    };
}

entry_point!(bf_reserve, commands::reserve);
entry_point!(bf_add, commands::add);
entry_point!(bf_madd, commands::madd);
entry_point!(bf_insert, commands::insert);
entry_point!(bf_exists, commands::exists);
entry_point!(bf_mexists, commands::mexists);
entry_point!(bf_info, commands::info);
entry_point!(bf_card, commands::card);
entry_point!(bf_debug, commands::debug);
entry_point!(bf_scandump, commands::scandump);
entry_point!(bf_loadchunk, commands::loadchunk);
entry_point!(bf_grow, commands::grow);
entry_point!(bf_addat, commands::addat);

type EntryPoint =
    extern "C" fn(*mut raw::RedisModuleCtx, *mut *mut raw::RedisModuleString, c_int) -> c_int;

/// How an argument is typed in the docs.
#[derive(Clone, Copy)]
enum Kind {
    Key,
    Text,
    Integer,
    Double,
    /// A bare keyword such as NONSCALING.
    Token,
}

/// One argument of a command's grammar.
struct Arg {
    name: &'static CStr,
    kind: Kind,
    /// The keyword that precedes the value (EXPANSION n), if any.
    token: Option<&'static CStr>,
    optional: bool,
    multiple: bool,
}

const fn arg(name: &'static CStr, kind: Kind) -> Arg {
    Arg {
        name,
        kind,
        token: None,
        optional: false,
        multiple: false,
    }
}

const fn option(name: &'static CStr, kind: Kind, token: &'static CStr) -> Arg {
    Arg {
        name,
        kind,
        token: Some(token),
        optional: true,
        multiple: false,
    }
}

const fn items(name: &'static CStr) -> Arg {
    Arg {
        name,
        kind: Kind::Text,
        token: None,
        optional: false,
        multiple: true,
    }
}

/// One command: what registers it and what documents it. Each takes one key, at argument 1.
struct CommandSpec {
    name: &'static CStr,
    entry: EntryPoint,
    /// Redis command flags.
    flags: &'static CStr,
    summary: &'static CStr,
    complexity: &'static CStr,
    arity: c_int,
    writes: bool,
    args: &'static [Arg],
}

const KEY: Arg = arg(c"key", Kind::Key);
const SEED: Arg = option(c"seed", Kind::Integer, c"SEED");
const EXPANSION: Arg = option(c"expansion", Kind::Integer, c"EXPANSION");
const NONSCALING: Arg = option(c"nonscaling", Kind::Token, c"NONSCALING");
const WINDOW: Arg = option(c"window", Kind::Integer, c"WINDOW");

static COMMANDS: [CommandSpec; 13] = [
    CommandSpec {
        name: c"bf.reserve",
        entry: bf_reserve,
        flags: c"write deny-oom",
        summary: c"Creates an empty Bloom filter sized for a capacity at an error rate",
        complexity: c"O(1)",
        arity: -4,
        writes: true,
        args: &[
            KEY,
            arg(c"error_rate", Kind::Double),
            arg(c"capacity", Kind::Integer),
            EXPANSION,
            NONSCALING,
            WINDOW,
            SEED,
            Arg {
                name: c"shape",
                kind: Kind::Integer,
                token: Some(c"SHAPE"),
                optional: true,
                multiple: true,
            },
        ],
    },
    CommandSpec {
        name: c"bf.add",
        entry: bf_add,
        flags: c"write deny-oom fast",
        summary: c"Adds an item, creating the filter if missing; 1 if the item was new",
        complexity: c"O(k + layers)",
        arity: 3,
        writes: true,
        args: &[KEY, arg(c"item", Kind::Text)],
    },
    CommandSpec {
        name: c"bf.madd",
        entry: bf_madd,
        flags: c"write deny-oom",
        summary: c"Adds items, creating the filter if missing; 1 per item that was new",
        complexity: c"O(n * (k + layers))",
        arity: -3,
        writes: true,
        args: &[KEY, items(c"item")],
    },
    CommandSpec {
        name: c"bf.insert",
        entry: bf_insert,
        flags: c"write deny-oom",
        summary: c"Adds items, creating the filter with the given parameters unless NOCREATE",
        complexity: c"O(n * (k + layers))",
        arity: -4,
        writes: true,
        args: &[
            KEY,
            option(c"capacity", Kind::Integer, c"CAPACITY"),
            option(c"error", Kind::Double, c"ERROR"),
            EXPANSION,
            option(c"nocreate", Kind::Token, c"NOCREATE"),
            NONSCALING,
            WINDOW,
            SEED,
            Arg {
                name: c"items",
                kind: Kind::Token,
                token: Some(c"ITEMS"),
                optional: false,
                multiple: false,
            },
            items(c"item"),
        ],
    },
    CommandSpec {
        name: c"bf.exists",
        entry: bf_exists,
        flags: c"readonly fast",
        summary: c"1 if the item may have been added, 0 if it certainly was not",
        complexity: c"O(k * layers)",
        arity: 3,
        writes: false,
        args: &[KEY, arg(c"item", Kind::Text)],
    },
    CommandSpec {
        name: c"bf.mexists",
        entry: bf_mexists,
        flags: c"readonly",
        summary: c"BF.EXISTS for several items",
        complexity: c"O(n * k * layers)",
        arity: -3,
        writes: false,
        args: &[KEY, items(c"item")],
    },
    CommandSpec {
        name: c"bf.info",
        entry: bf_info,
        flags: c"readonly fast",
        summary: c"Capacity, size, layers, items and expansion of a filter",
        complexity: c"O(1)",
        arity: -2,
        writes: false,
        args: &[
            KEY,
            Arg {
                name: c"field",
                kind: Kind::Text,
                token: None,
                optional: true,
                multiple: false,
            },
        ],
    },
    CommandSpec {
        name: c"bf.card",
        entry: bf_card,
        flags: c"readonly fast",
        summary: c"Number of items added to a filter",
        complexity: c"O(1)",
        arity: 2,
        writes: false,
        args: &[KEY],
    },
    CommandSpec {
        name: c"bf.debug",
        entry: bf_debug,
        flags: c"readonly",
        summary: c"RedisBloom's per-layer report of a filter: items, then bytes, bits, hashes, capacity, items and error rate of each layer",
        complexity: c"O(layers)",
        arity: 2,
        writes: false,
        args: &[KEY],
    },
    CommandSpec {
        name: c"bf.scandump",
        entry: bf_scandump,
        flags: c"readonly",
        summary: c"Returns the next chunk of a filter's dump, for BF.LOADCHUNK",
        complexity: c"O(chunk size)",
        arity: 3,
        writes: false,
        args: &[KEY, arg(c"iterator", Kind::Integer)],
    },
    CommandSpec {
        name: c"bf.loadchunk",
        entry: bf_loadchunk,
        flags: c"write deny-oom",
        summary: c"Restores a filter from the chunks BF.SCANDUMP returned, in order",
        complexity: c"O(chunk size)",
        arity: 4,
        writes: true,
        args: &[
            KEY,
            arg(c"iterator", Kind::Integer),
            arg(c"data", Kind::Text),
        ],
    },
    CommandSpec {
        name: c"bf.grow",
        entry: bf_grow,
        flags: c"write deny-oom",
        summary: c"Adds the next layer with an exact shape; what primaries send replicas and the AOF when a filter grows",
        complexity: c"O(1)",
        arity: 6,
        writes: true,
        args: &[
            KEY,
            arg(c"index", Kind::Integer),
            arg(c"bits", Kind::Integer),
            arg(c"hashes", Kind::Integer),
            arg(c"layout", Kind::Integer),
        ],
    },
    CommandSpec {
        name: c"bf.addat",
        entry: bf_addat,
        flags: c"write deny-oom",
        summary: c"Adds items to a window filter at a given time; what primaries send replicas and the AOF for every write to a window filter",
        complexity: c"O(k * n), n the number of items",
        arity: -4,
        writes: true,
        args: &[KEY, arg(c"timestamp", Kind::Integer), items(c"item")],
    },
];

fn raw_kind(kind: Kind) -> raw::RedisModuleCommandArgType {
    match kind {
        Kind::Key => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_KEY,
        Kind::Text => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_STRING,
        Kind::Integer => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_INTEGER,
        Kind::Double => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_DOUBLE,
        Kind::Token => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_PURE_TOKEN,
    }
}

fn ptr(text: &'static CStr) -> *const c_char {
    text.as_ptr()
}

/// Puts every command in the ACL category `bloom` where the server supports module categories
/// (Redis 7.4+); on older servers this does nothing.
pub fn register_acl_category(load: &LoadCtx) -> Result<(), String> {
    let names: Vec<&CStr> = COMMANDS.iter().map(|doc| doc.name).collect();
    load.set_acl_category(c"bloom", &names).map(|_| ())
}

/// Registers every command and sets its docs. Redis copies what it is given; the arrays built
/// here are zero-terminated, as the API wants, and freed on return.
pub fn register(load: &LoadCtx) -> Result<(), String> {
    let version = raw::RedisModuleCommandInfoVersion {
        version: 1,
        sizeof_historyentry: size_of::<raw::RedisModuleCommandHistoryEntry>(),
        sizeof_keyspec: size_of::<raw::RedisModuleCommandKeySpec>(),
        sizeof_arg: size_of::<raw::RedisModuleCommandArg>(),
    };
    for doc in &COMMANDS {
        load.create_command(doc.name, doc.entry, doc.flags)
            .map_err(|()| format!("cannot register {}", doc.name.to_string_lossy()))?;
        let flags = if doc.writes {
            raw::REDISMODULE_CMD_KEY_RW | raw::REDISMODULE_CMD_KEY_UPDATE
        } else {
            raw::REDISMODULE_CMD_KEY_RO | raw::REDISMODULE_CMD_KEY_ACCESS
        };
        // SAFETY: all-zero is the documented terminator of these C arrays.
        let mut key_specs: [raw::RedisModuleCommandKeySpec; 2] = unsafe { std::mem::zeroed() };
        key_specs[0].flags = u64::from(flags);
        key_specs[0].begin_search_type =
            raw::RedisModuleKeySpecBeginSearchType_REDISMODULE_KSPEC_BS_INDEX;
        key_specs[0].bs.index.pos = 1;
        key_specs[0].find_keys_type =
            raw::RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_RANGE;
        key_specs[0].fk.range.lastkey = 0;
        key_specs[0].fk.range.keystep = 1;
        key_specs[0].fk.range.limit = 0;

        let mut args: Vec<raw::RedisModuleCommandArg> = doc
            .args
            .iter()
            .map(|a| {
                // SAFETY: every field of the C struct is a pointer or an integer.
                let mut out: raw::RedisModuleCommandArg = unsafe { std::mem::zeroed() };
                out.name = ptr(a.name);
                out.type_ = raw_kind(a.kind);
                out.key_spec_index = if matches!(a.kind, Kind::Key) { 0 } else { -1 };
                out.token = a.token.map_or(null(), ptr);
                let mut flags = raw::REDISMODULE_CMD_ARG_NONE;
                if a.optional {
                    flags |= raw::REDISMODULE_CMD_ARG_OPTIONAL;
                }
                if a.multiple {
                    flags |= raw::REDISMODULE_CMD_ARG_MULTIPLE;
                }
                out.flags = flags as c_int;
                out
            })
            .collect();
        // SAFETY: all-zero is the documented terminator of the C array.
        args.push(unsafe { std::mem::zeroed() });

        let info = raw::RedisModuleCommandInfo {
            version: &version,
            summary: ptr(doc.summary),
            complexity: ptr(doc.complexity),
            since: ptr(c"1.0.0"),
            history: null_mut(),
            tips: null(),
            arity: doc.arity,
            key_specs: key_specs.as_mut_ptr(),
            args: args.as_mut_ptr(),
        };
        // SAFETY: `info` points to `version`, static strings, and the key spec and argument
        // arrays above, each zero-terminated, all alive during the call (Redis copies them).
        unsafe { load.set_command_info(doc.name, &info) }
            .map_err(|()| format!("cannot set the docs of {}", doc.name.to_string_lossy()))?;
    }
    Ok(())
}
