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
}

/// One argument of a command's grammar.
pub struct ArgDoc {
    pub name: &'static CStr,
    pub kind: ArgKind,
    /// The keyword that precedes the value (EXPANSION n), if any.
    pub token: Option<&'static CStr>,
    pub optional: bool,
    pub multiple: bool,
}

/// The docs of a command that takes one key, at argument 1.
pub struct CommandDoc {
    pub summary: &'static CStr,
    pub complexity: &'static CStr,
    pub arity: c_int,
    /// The key is written (else only read).
    pub writes: bool,
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
                out.key_spec_index = if matches!(a.kind, ArgKind::Key) {
                    0
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
        unsafe { self.set_command_info(name, &info) }
    }
}

fn raw_kind(kind: ArgKind) -> raw::RedisModuleCommandArgType {
    match kind {
        ArgKind::Key => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_KEY,
        ArgKind::Text => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_STRING,
        ArgKind::Integer => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_INTEGER,
        ArgKind::Double => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_DOUBLE,
        ArgKind::Token => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_PURE_TOKEN,
    }
}

fn ptr(text: &'static CStr) -> *const c_char {
    text.as_ptr()
}
