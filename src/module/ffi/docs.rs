//! Command docs (COMMAND DOCS, COMMAND INFO: summary, complexity, arguments and key specs) in
//! the C structs `RedisModule_SetCommandInfo` takes (Redis 7.0+).

use std::ffi::{c_char, c_int, CStr};
use std::mem::size_of;
use std::ptr::{null, null_mut};

use redis_module::raw;

use super::LoadCtx;

/// How an argument is typed in the docs.
#[derive(Clone, Copy)]
pub enum ArgKind {
    Key,
    Text,
    Integer,
    Double,
    /// A bare keyword such as NONSCALING.
    Token,
    /// Exactly one of its parts, the alternatives (`[NONSCALING | EXPANSION n]`).
    OneOf,
    /// All of its parts, in order, after its token (`SHAPE bits hashes layout`).
    Block,
}

/// One argument of a command's grammar.
#[derive(Clone, Copy)]
pub struct ArgDoc {
    pub name: &'static CStr,
    pub kind: ArgKind,
    /// The keyword that precedes the value (EXPANSION n), if any.
    pub token: Option<&'static CStr>,
    pub optional: bool,
    pub multiple: bool,
    /// The alternatives of a [`ArgKind::OneOf`], the parts of a [`ArgKind::Block`]; empty for
    /// the other kinds (Redis refuses parts on them, and a one-of or block without).
    pub parts: &'static [ArgDoc],
}

/// The keys a command reads besides its key at argument 1: the second key spec, so that a
/// cluster refuses keys of different slots (CROSSSLOT), ACLs check each key and COMMAND GETKEYS
/// names them.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum OtherKeys {
    None,
    /// Every argument from 2 on (BF.MERGE's sources).
    Rest,
    /// The one argument after this keyword, when it is given (BF.RESERVE's LIKE).
    After(&'static CStr),
}

/// The docs of a command whose key is argument 1, and whose [`OtherKeys`] are read.
pub struct CommandDoc {
    pub summary: &'static CStr,
    pub complexity: &'static CStr,
    pub arity: c_int,
    /// The key of argument 1 is written (else only read).
    pub writes: bool,
    pub other_keys: OtherKeys,
    pub args: &'static [ArgDoc],
}

impl LoadCtx<'_> {
    /// Sets a registered command's docs; Err when the command is unknown or Redis refuses. Redis
    /// copies what it is given; the arrays built here are zero-terminated, as the API wants, and
    /// freed on return.
    pub fn set_command_docs(&self, name: &CStr, doc: &CommandDoc) -> Result<(), ()> {
        let version = raw::RedisModuleCommandInfoVersion {
            version: 1,
            sizeof_historyentry: size_of::<raw::RedisModuleCommandHistoryEntry>(),
            sizeof_keyspec: size_of::<raw::RedisModuleCommandKeySpec>(),
            sizeof_arg: size_of::<raw::RedisModuleCommandArg>(),
        };
        let flags = if doc.writes {
            raw::REDISMODULE_CMD_KEY_RW | raw::REDISMODULE_CMD_KEY_UPDATE
        } else {
            raw::REDISMODULE_CMD_KEY_RO | raw::REDISMODULE_CMD_KEY_ACCESS
        };
        // SAFETY: all-zero is the documented terminator of these C arrays.
        let mut key_specs: [raw::RedisModuleCommandKeySpec; 3] = unsafe { std::mem::zeroed() };
        key_specs[0].flags = u64::from(flags);
        key_specs[0].begin_search_type =
            raw::RedisModuleKeySpecBeginSearchType_REDISMODULE_KSPEC_BS_INDEX;
        key_specs[0].bs.index.pos = 1;
        key_specs[0].find_keys_type =
            raw::RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_RANGE;
        key_specs[0].fk.range.lastkey = 0;
        key_specs[0].fk.range.keystep = 1;
        key_specs[0].fk.range.limit = 0;
        let others = &mut key_specs[1];
        match doc.other_keys {
            OtherKeys::None => {}
            OtherKeys::Rest => {
                others.begin_search_type =
                    raw::RedisModuleKeySpecBeginSearchType_REDISMODULE_KSPEC_BS_INDEX;
                others.bs.index.pos = 2;
                // -1: up to the last argument.
                others.fk.range.lastkey = -1;
            }
            OtherKeys::After(keyword) => {
                others.begin_search_type =
                    raw::RedisModuleKeySpecBeginSearchType_REDISMODULE_KSPEC_BS_KEYWORD;
                others.bs.keyword.keyword = ptr(keyword);
                others.bs.keyword.startfrom = 2;
                others.fk.range.lastkey = 0;
            }
        }
        if doc.other_keys != OtherKeys::None {
            others.flags = u64::from(raw::REDISMODULE_CMD_KEY_RO | raw::REDISMODULE_CMD_KEY_ACCESS);
            others.find_keys_type = raw::RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_RANGE;
            others.fk.range.keystep = 1;
            others.fk.range.limit = 0;
        }

        // The parts' arrays, kept until the call returns: a Vec's heap buffer stays where it is
        // when the Vec moves into `arrays`, so the `subargs` pointers into it stay valid.
        let mut arrays = Vec::new();
        let mut keys_seen = 0;
        let mut args = raw_args(doc.args, &mut arrays, &mut keys_seen);

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
        // arrays above (the parts' arrays in `arrays`), each zero-terminated, all alive during
        // the call (Redis copies them).
        unsafe { self.set_command_info(name, &info) }
    }
}

/// The zero-terminated C array of `args`; the arrays of their parts go to `arrays`, which must
/// outlive the use of the result. The first key argument is described by key spec 0 (argument
/// 1), every later one by key spec 1 (the other keys); `keys_seen` counts them.
fn raw_args(
    args: &[ArgDoc],
    arrays: &mut Vec<Vec<raw::RedisModuleCommandArg>>,
    keys_seen: &mut c_int,
) -> Vec<raw::RedisModuleCommandArg> {
    let mut out: Vec<raw::RedisModuleCommandArg> = args
        .iter()
        .map(|a| {
            // SAFETY: every field of the C struct is a pointer or an integer.
            let mut out: raw::RedisModuleCommandArg = unsafe { std::mem::zeroed() };
            out.name = ptr(a.name);
            out.type_ = raw_kind(a.kind);
            out.key_spec_index = if matches!(a.kind, ArgKind::Key) {
                *keys_seen += 1;
                (*keys_seen - 1).min(1)
            } else {
                -1
            };
            out.token = a.token.map_or(null(), ptr);
            let mut flags = raw::REDISMODULE_CMD_ARG_NONE;
            if a.optional {
                flags |= raw::REDISMODULE_CMD_ARG_OPTIONAL;
            }
            if a.multiple {
                flags |= raw::REDISMODULE_CMD_ARG_MULTIPLE;
            }
            out.flags = flags as c_int;
            if !a.parts.is_empty() {
                let mut parts = raw_args(a.parts, arrays, keys_seen);
                out.subargs = parts.as_mut_ptr();
                arrays.push(parts);
            }
            out
        })
        .collect();
    // SAFETY: all-zero is the documented terminator of the C array.
    out.push(unsafe { std::mem::zeroed() });
    out
}

fn raw_kind(kind: ArgKind) -> raw::RedisModuleCommandArgType {
    match kind {
        ArgKind::Key => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_KEY,
        ArgKind::Text => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_STRING,
        ArgKind::Integer => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_INTEGER,
        ArgKind::Double => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_DOUBLE,
        ArgKind::Token => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_PURE_TOKEN,
        ArgKind::OneOf => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_ONEOF,
        ArgKind::Block => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_BLOCK,
    }
}

fn ptr(text: &'static CStr) -> *const c_char {
    text.as_ptr()
}
