//! The one command table: every BF.* command's name, handler, flags and docs. It drives both the
//! registration and COMMAND DOCS / COMMAND INFO (summary, complexity, arguments and key specs, set
//! with `RedisModule_SetCommandInfo`, Redis 7.0+), so that cluster clients route by key specs and
//! `COMMAND DOCS bf.add` tells users the grammar.

use std::ffi::{c_int, CStr};

use redis_module::raw;

use super::commands;
use super::ffi::{run_command, ArgDoc as Arg, ArgKind as Kind, CommandDoc, LoadCtx};

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
entry_point!(bf_load, commands::load);
entry_point!(bf_grow, commands::grow);
entry_point!(bf_addat, commands::addat);

type EntryPoint =
    extern "C" fn(*mut raw::RedisModuleCtx, *mut *mut raw::RedisModuleString, c_int) -> c_int;

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

static COMMANDS: [CommandSpec; 14] = [
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
        name: c"bf.load",
        entry: bf_load,
        flags: c"write deny-oom",
        summary: c"Creates a key from a valkey-bloom object's blob, as valkey-bloom's AOF rewrite writes it",
        complexity: c"O(n), n the blob's size",
        arity: 3,
        writes: true,
        args: &[KEY, arg(c"data", Kind::Text)],
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

/// Puts every command in the ACL category `bloom` where the server supports module categories
/// (Redis 7.4+); on older servers this does nothing.
pub fn register_acl_category(load: &LoadCtx) -> Result<(), String> {
    let names: Vec<&CStr> = COMMANDS.iter().map(|doc| doc.name).collect();
    load.set_acl_category(c"bloom", &names).map(|_| ())
}

/// Registers every command and sets its docs.
pub fn register(load: &LoadCtx) -> Result<(), String> {
    for spec in &COMMANDS {
        load.create_command(spec.name, spec.entry, spec.flags)
            .map_err(|()| format!("cannot register {}", spec.name.to_string_lossy()))?;
        let doc = CommandDoc {
            summary: spec.summary,
            complexity: spec.complexity,
            arity: spec.arity,
            writes: spec.writes,
            args: spec.args,
        };
        load.set_command_docs(spec.name, &doc)
            .map_err(|()| format!("cannot set the docs of {}", spec.name.to_string_lossy()))?;
    }
    Ok(())
}
