//! The one command table: every BF.* command's name, handler, flags and docs. It drives both the
//! registration and COMMAND DOCS / COMMAND INFO (summary, complexity, arguments and key specs, set
//! with `RedisModule_SetCommandInfo`, Redis 7.0+), so that cluster clients route by key specs and
//! `COMMAND DOCS bf.add` tells users the grammar.

use std::ffi::{c_int, CStr, CString};

use redis_module::raw;

use super::commands;
use super::ffi::{run_command, ArgDoc as Arg, ArgKind as Kind, CommandDoc, LoadCtx, OtherKeys};
use super::personality;

/// Declares the C entry points of a command handler: as registered by default, and with the
/// valkey-bloom personality (its error texts; see [`personality`]).
macro_rules! entry_point {
    ($name:ident, $valkey_bloom_name:ident, $handler:path) => {
        extern "C" fn $name(
            ctx: *mut raw::RedisModuleCtx,
            argv: *mut *mut raw::RedisModuleString,
            argc: c_int,
        ) -> c_int {
            run_command(ctx, argv, argc, $handler)
        }

        extern "C" fn $valkey_bloom_name(
            ctx: *mut raw::RedisModuleCtx,
            argv: *mut *mut raw::RedisModuleString,
            argc: c_int,
        ) -> c_int {
            run_command(ctx, argv, argc, |command| {
                // Asked only where the keys are (getkeys-api): the handler tells, and nothing
                // may be checked or answered (there is no client to answer).
                if command.is_keys_position_request() {
                    return $handler(command);
                }
                personality::run(command, $handler).map_err(personality::error)
            })
        }
    };
}

entry_point!(bf_reserve, vb_reserve, commands::reserve);
entry_point!(bf_add, vb_add, commands::add);
entry_point!(bf_madd, vb_madd, commands::madd);
entry_point!(bf_insert, vb_insert, commands::insert);
entry_point!(bf_exists, vb_exists, commands::exists);
entry_point!(bf_mexists, vb_mexists, commands::mexists);
entry_point!(bf_info, vb_info, commands::info);
entry_point!(bf_card, vb_card, commands::card);
entry_point!(bf_debug, vb_debug, commands::debug);
entry_point!(bf_scandump, vb_scandump, commands::scandump);
entry_point!(bf_loadchunk, vb_loadchunk, commands::loadchunk);
entry_point!(bf_load, vb_load, commands::load);
entry_point!(bf_grow, vb_grow, commands::grow);
entry_point!(bf_addat, vb_addat, commands::addat);
entry_point!(bf_merge, vb_merge, commands::merge);

type EntryPoint =
    extern "C" fn(*mut raw::RedisModuleCtx, *mut *mut raw::RedisModuleString, c_int) -> c_int;

/// A required argument (an item, a number) or, with a token, a keyword and its value.
const fn arg(name: &'static CStr, kind: Kind) -> Arg {
    Arg {
        name,
        kind,
        token: None,
        optional: false,
        multiple: false,
        parts: &[],
    }
}

/// A keyword, with its value unless `kind` is [`Kind::Token`]: required as such, so as one of
/// the alternatives of a [`one_of`].
const fn keyword(name: &'static CStr, kind: Kind, token: &'static CStr) -> Arg {
    Arg {
        token: Some(token),
        ..arg(name, kind)
    }
}

/// An optional keyword (`[NONSCALING]`), with its value unless `kind` is [`Kind::Token`]
/// (`[EXPANSION n]`).
const fn option(name: &'static CStr, kind: Kind, token: &'static CStr) -> Arg {
    Arg {
        optional: true,
        ..keyword(name, kind, token)
    }
}

/// One or more items (`item [item ...]`), after a keyword if `token` is given.
const fn items(name: &'static CStr, token: Option<&'static CStr>) -> Arg {
    Arg {
        token,
        multiple: true,
        ..arg(name, Kind::Text)
    }
}

/// At most one of `alternatives` (`[EXPANSION n | NONSCALING]`).
const fn one_of(name: &'static CStr, alternatives: &'static [Arg]) -> Arg {
    Arg {
        optional: true,
        parts: alternatives,
        ..arg(name, Kind::OneOf)
    }
}

/// A keyword followed by several values (`SHAPE bits hashes layout`), all of them or none.
const fn block(name: &'static CStr, token: &'static CStr, values: &'static [Arg]) -> Arg {
    Arg {
        token: Some(token),
        parts: values,
        ..arg(name, Kind::Block)
    }
}

/// An optional [`block`].
const fn optional_block(name: &'static CStr, token: &'static CStr, values: &'static [Arg]) -> Arg {
    Arg {
        optional: true,
        ..block(name, token, values)
    }
}

/// One command: what registers it and what documents it. Each takes its key at argument 1;
/// BF.MERGE takes more, its sources, after it ([`OtherKeys`]).
struct CommandSpec {
    name: &'static CStr,
    entry: EntryPoint,
    /// The entry point under the valkey-bloom personality.
    valkey_bloom_entry: EntryPoint,
    /// Redis command flags.
    flags: &'static CStr,
    summary: &'static CStr,
    complexity: &'static CStr,
    arity: c_int,
    writes: bool,
    other_keys: OtherKeys,
    args: &'static [Arg],
}

// The grammar each command's parser in args.rs accepts, as COMMAND DOCS shows it; the
// integration test command_docs checks the two against each other and against the docs' tables.
const KEY: Arg = arg(c"key", Kind::Key);
/// Our seed, an integer; valkey-bloom's form, exactly 32 bytes, makes a valkey-bloom object.
const SEED: Arg = option(c"seed", Kind::Text, c"SEED");
/// valkey-bloom's options: each new layer's error rate over the previous one's, and the capacity
/// the filter must be able to reach.
const TIGHTENING: Arg = option(c"tightening", Kind::Double, c"TIGHTENING");
const VALIDATESCALETO: Arg = option(c"validatescaleto", Kind::Integer, c"VALIDATESCALETO");
const EXPANSION: Arg = keyword(c"expansion", Kind::Integer, c"EXPANSION");
const NONSCALING: Arg = keyword(c"nonscaling", Kind::Token, c"NONSCALING");
const WINDOW: Arg = keyword(c"window_ms", Kind::Integer, c"WINDOW");
/// A layer's exact shape: bits, hashes and layout code (BF.RESERVE's SHAPE, BF.GROW).
const SHAPE: [Arg; 3] = [
    arg(c"bits", Kind::Integer),
    arg(c"hashes", Kind::Integer),
    arg(c"layout", Kind::Integer),
];

/// BF.RESERVE's parameters, the form without LIKE.
const RESERVE_PARAMETERS: [Arg; 8] = [
    arg(c"error_rate", Kind::Double),
    arg(c"capacity", Kind::Integer),
    // RESERVE refuses EXPANSION with NONSCALING, and WINDOW with either.
    one_of(c"growth", &[EXPANSION, NONSCALING, WINDOW]),
    SEED,
    TIGHTENING,
    VALIDATESCALETO,
    optional_block(c"shape", c"SHAPE", &SHAPE),
    one_of(
        c"partitioning",
        &[
            block(
                c"partition",
                c"PARTITION",
                &[
                    arg(c"index", Kind::Integer),
                    arg(c"partitions", Kind::Integer),
                    arg(c"routing_seed", Kind::Integer),
                ],
            ),
            block(
                c"partitions",
                c"PARTITIONS",
                &[
                    arg(c"partitions", Kind::Integer),
                    arg(c"routing_seed", Kind::Integer),
                ],
            ),
        ],
    ),
];

static COMMANDS: [CommandSpec; 15] = [
    CommandSpec {
        name: c"bf.reserve",
        entry: bf_reserve,
        valkey_bloom_entry: vb_reserve,
        // getkeys-api: LIKE's key is found by the command itself (Redis 7.0 routes by that, not
        // by the keyword key spec, which COMMAND DOCS and later servers read).
        flags: c"write deny-oom getkeys-api",
        summary: c"Creates an empty Bloom filter sized for a capacity at an error rate, or made as another filter was (LIKE)",
        complexity: c"O(1)",
        arity: -4,
        writes: true,
        other_keys: OtherKeys::After(c"LIKE"),
        args: &[
            KEY,
            // Either the parameters, or LIKE another filter.
            Arg {
                optional: false,
                ..one_of(
                    c"form",
                    &[
                        Arg {
                            parts: &RESERVE_PARAMETERS,
                            ..arg(c"parameters", Kind::Block)
                        },
                        keyword(c"like", Kind::Key, c"LIKE"),
                    ],
                )
            },
        ],
    },
    CommandSpec {
        name: c"bf.add",
        entry: bf_add,
        valkey_bloom_entry: vb_add,
        flags: c"write deny-oom fast",
        summary: c"Adds an item, creating the filter if missing; 1 if the item was new",
        complexity: c"O(k + layers)",
        arity: 3,
        writes: true,
        other_keys: OtherKeys::None,
        args: &[KEY, arg(c"item", Kind::Text)],
    },
    CommandSpec {
        name: c"bf.madd",
        entry: bf_madd,
        valkey_bloom_entry: vb_madd,
        flags: c"write deny-oom",
        summary: c"Adds items, creating the filter if missing; 1 per item that was new",
        complexity: c"O(n * (k + layers))",
        arity: -3,
        writes: true,
        other_keys: OtherKeys::None,
        args: &[KEY, items(c"item", None)],
    },
    CommandSpec {
        name: c"bf.insert",
        entry: bf_insert,
        valkey_bloom_entry: vb_insert,
        flags: c"write deny-oom",
        summary: c"Adds items, creating the filter with the given parameters unless NOCREATE",
        complexity: c"O(n * (k + layers))",
        arity: -4,
        writes: true,
        other_keys: OtherKeys::None,
        args: &[
            KEY,
            // INSERT takes EXPANSION with NONSCALING (a non-scaling filter), WINDOW with neither.
            option(c"capacity", Kind::Integer, c"CAPACITY"),
            option(c"error_rate", Kind::Double, c"ERROR"),
            Arg {
                optional: true,
                ..EXPANSION
            },
            option(c"nocreate", Kind::Token, c"NOCREATE"),
            Arg {
                optional: true,
                ..NONSCALING
            },
            Arg {
                optional: true,
                ..WINDOW
            },
            SEED,
            TIGHTENING,
            VALIDATESCALETO,
            // Optional in valkey-bloom's form only (a 32-byte SEED): its replicated creation.
            Arg {
                optional: true,
                ..items(c"item", Some(c"ITEMS"))
            },
        ],
    },
    CommandSpec {
        name: c"bf.exists",
        entry: bf_exists,
        valkey_bloom_entry: vb_exists,
        flags: c"readonly fast",
        summary: c"1 if the item may have been added, 0 if it certainly was not",
        complexity: c"O(k * layers)",
        arity: 3,
        writes: false,
        other_keys: OtherKeys::None,
        args: &[KEY, arg(c"item", Kind::Text)],
    },
    CommandSpec {
        name: c"bf.mexists",
        entry: bf_mexists,
        valkey_bloom_entry: vb_mexists,
        flags: c"readonly",
        summary: c"BF.EXISTS for several items",
        complexity: c"O(n * k * layers)",
        arity: -3,
        writes: false,
        other_keys: OtherKeys::None,
        args: &[KEY, items(c"item", None)],
    },
    CommandSpec {
        name: c"bf.info",
        entry: bf_info,
        valkey_bloom_entry: vb_info,
        flags: c"readonly fast",
        summary: c"Capacity, size, layers, items and expansion of a filter",
        complexity: c"O(1)",
        arity: -2,
        writes: false,
        other_keys: OtherKeys::None,
        args: &[
            KEY,
            one_of(
                c"field",
                &[
                    keyword(c"capacity", Kind::Token, c"CAPACITY"),
                    keyword(c"size", Kind::Token, c"SIZE"),
                    keyword(c"filters", Kind::Token, c"FILTERS"),
                    keyword(c"items", Kind::Token, c"ITEMS"),
                    keyword(c"expansion", Kind::Token, c"EXPANSION"),
                    keyword(c"error", Kind::Token, c"ERROR"),
                    keyword(c"tightening", Kind::Token, c"TIGHTENING"),
                    keyword(c"maxscaledcapacity", Kind::Token, c"MAXSCALEDCAPACITY"),
                ],
            ),
        ],
    },
    CommandSpec {
        name: c"bf.card",
        entry: bf_card,
        valkey_bloom_entry: vb_card,
        flags: c"readonly fast",
        summary: c"Number of items added to a filter",
        complexity: c"O(1)",
        arity: 2,
        writes: false,
        other_keys: OtherKeys::None,
        args: &[KEY],
    },
    CommandSpec {
        name: c"bf.debug",
        entry: bf_debug,
        valkey_bloom_entry: vb_debug,
        flags: c"readonly",
        summary: c"RedisBloom's per-layer report of a filter: items, then bytes, bits, hashes, capacity, items and error rate of each layer",
        complexity: c"O(layers)",
        arity: 2,
        writes: false,
        other_keys: OtherKeys::None,
        args: &[KEY],
    },
    CommandSpec {
        name: c"bf.scandump",
        entry: bf_scandump,
        valkey_bloom_entry: vb_scandump,
        flags: c"readonly",
        summary: c"Returns the next chunk of a filter's dump, for BF.LOADCHUNK",
        complexity: c"O(chunk size)",
        arity: 3,
        writes: false,
        other_keys: OtherKeys::None,
        args: &[KEY, arg(c"iterator", Kind::Integer)],
    },
    CommandSpec {
        name: c"bf.loadchunk",
        entry: bf_loadchunk,
        valkey_bloom_entry: vb_loadchunk,
        flags: c"write deny-oom",
        summary: c"Restores a filter from the chunks BF.SCANDUMP returned, in order",
        complexity: c"O(chunk size)",
        arity: 4,
        writes: true,
        other_keys: OtherKeys::None,
        args: &[
            KEY,
            arg(c"iterator", Kind::Integer),
            arg(c"data", Kind::Text),
        ],
    },
    CommandSpec {
        name: c"bf.load",
        entry: bf_load,
        valkey_bloom_entry: vb_load,
        flags: c"write deny-oom",
        summary: c"Creates a key from a valkey-bloom object's blob, as valkey-bloom's AOF rewrite writes it",
        complexity: c"O(n), n the blob's size",
        arity: 3,
        writes: true,
        other_keys: OtherKeys::None,
        args: &[KEY, arg(c"data", Kind::Text)],
    },
    CommandSpec {
        name: c"bf.grow",
        entry: bf_grow,
        valkey_bloom_entry: vb_grow,
        flags: c"write deny-oom",
        summary: c"Adds the next layer with an exact shape; what primaries send replicas and the AOF when a filter grows",
        complexity: c"O(1)",
        arity: 6,
        writes: true,
        other_keys: OtherKeys::None,
        args: &[
            KEY,
            arg(c"index", Kind::Integer),
            SHAPE[0],
            SHAPE[1],
            SHAPE[2],
        ],
    },
    CommandSpec {
        name: c"bf.addat",
        entry: bf_addat,
        valkey_bloom_entry: vb_addat,
        flags: c"write deny-oom",
        summary: c"Adds items to a window filter at a given time; what primaries send replicas and the AOF for every write to a window filter",
        complexity: c"O(k * n), n the number of items",
        arity: -4,
        writes: true,
        other_keys: OtherKeys::None,
        args: &[KEY, arg(c"timestamp_ms", Kind::Integer), items(c"item", None)],
    },
    CommandSpec {
        name: c"bf.merge",
        entry: bf_merge,
        valkey_bloom_entry: vb_merge,
        flags: c"write deny-oom",
        summary: c"Makes the first filter the union of itself and the others, alike filters; creates it as a copy of the first other when missing",
        complexity: c"O(bits of the filters)",
        arity: -3,
        writes: true,
        other_keys: OtherKeys::Rest,
        args: &[
            arg(c"destkey", Kind::Key),
            Arg {
                multiple: true,
                ..arg(c"sourcekey", Kind::Key)
            },
        ],
    },
];

/// Puts every command in the ACL category `bloom` where the server supports module categories
/// (Redis 7.4+); on older servers this does nothing.
pub fn register_acl_category(load: &LoadCtx) -> Result<(), String> {
    let names: Vec<CString> = COMMANDS.iter().map(registered_name).collect();
    let names: Vec<&CStr> = names.iter().map(CString::as_c_str).collect();
    load.set_acl_category(c"bloom", &names).map(|_| ())
}

/// The name a command is registered under, which the server shows in its command stats
/// (`cmdstat_bf.add`) and its arity errors: valkey-bloom registers upper-case names
/// (`cmdstat_BF.ADD`), so the valkey-bloom personality does too. Lookups ignore case either way.
fn registered_name(spec: &CommandSpec) -> CString {
    let name = spec.name.to_bytes();
    let name = if personality::is_valkey_bloom() {
        name.to_ascii_uppercase()
    } else {
        name.to_vec()
    };
    CString::new(name).expect("a command name has no NUL")
}

/// Registers every command and sets its docs. Under the valkey-bloom personality every command
/// declares arity -1, as valkey-bloom's do: the server then leaves the argument count to the
/// handlers, which check it themselves and answer the same "wrong number of arguments" reply.
pub fn register(load: &LoadCtx) -> Result<(), String> {
    let valkey_bloom = personality::is_valkey_bloom();
    for spec in &COMMANDS {
        let last_key = match spec.other_keys {
            // Servers with key specs (7.0+) find LIKE's key by its keyword.
            OtherKeys::None | OtherKeys::After(_) => 1,
            OtherKeys::Rest => -1,
        };
        let name = registered_name(spec);
        let entry = if valkey_bloom {
            spec.valkey_bloom_entry
        } else {
            spec.entry
        };
        load.create_command(&name, entry, spec.flags, last_key)
            .map_err(|()| format!("cannot register {}", name.to_string_lossy()))?;
        let doc = CommandDoc {
            summary: spec.summary,
            complexity: spec.complexity,
            arity: if valkey_bloom { -1 } else { spec.arity },
            writes: spec.writes,
            other_keys: spec.other_keys,
            args: spec.args,
        };
        load.set_command_docs(&name, &doc)
            .map_err(|()| format!("cannot set the docs of {}", name.to_string_lossy()))?;
    }
    Ok(())
}
