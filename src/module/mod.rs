//! The Redis glue: registration of the type and the commands, and module start-up.

// The parsers are public for the fuzz targets; the rest is glue that only Redis calls.
pub mod alloc;
pub mod args;
pub(crate) mod commands;
pub(crate) mod config;
pub(crate) mod datatype;
pub(crate) mod docs;
pub(crate) mod ffi;
pub(crate) mod memory;
pub(crate) mod stats;

use std::ffi::{c_int, CString};

use redis_module::{raw, Context, RedisString, Status};

use ffi::{api, log, run_command, OK};

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
entry_point!(bf_scandump, commands::scandump);
entry_point!(bf_loadchunk, commands::loadchunk);

type EntryPoint =
    extern "C" fn(*mut raw::RedisModuleCtx, *mut *mut raw::RedisModuleString, c_int) -> c_int;

/// Every command: name, entry point, flags. Each takes one key, at argument 1.
const COMMANDS: [(&str, EntryPoint, &str); 10] = [
    ("bf.reserve", bf_reserve, "write deny-oom"),
    ("bf.add", bf_add, "write deny-oom fast"),
    ("bf.madd", bf_madd, "write deny-oom"),
    ("bf.insert", bf_insert, "write deny-oom"),
    ("bf.exists", bf_exists, "readonly fast"),
    ("bf.mexists", bf_mexists, "readonly"),
    ("bf.info", bf_info, "readonly fast"),
    ("bf.card", bf_card, "readonly fast"),
    ("bf.scandump", bf_scandump, "readonly"),
    ("bf.loadchunk", bf_loadchunk, "write deny-oom"),
];

/// Module start-up, after the data type and the configs are registered.
pub fn init(ctx: &Context, args: &[RedisString]) -> Status {
    let raw_ctx = ctx.get_raw();
    let args: Vec<&[u8]> = args.iter().map(RedisString::as_slice).collect();
    if let Err(reason) = config::register(ctx).and_then(|()| config::apply_module_args(&args)) {
        log(raw_ctx, "warning", &format!("rustbloom: {reason}"));
        return Status::Err;
    }
    unsafe { api!(RedisModule_RegisterInfoFunc)(raw_ctx, Some(stats::info)) };
    unsafe {
        // Keys are signalled as modified only when a command changed them, so WATCH and
        // client-side caching are not disturbed by adds of items already present.
        api!(RedisModule_SetModuleOptions)(
            raw_ctx,
            (raw::REDISMODULE_OPTIONS_HANDLE_IO_ERRORS
                | raw::REDISMODULE_OPTION_NO_IMPLICIT_SIGNAL_MODIFIED) as c_int,
        )
    };
    for (name, entry, flags) in COMMANDS {
        let (c_name, c_flags) = (CString::new(name), CString::new(flags));
        let (Ok(c_name), Ok(c_flags)) = (c_name, c_flags) else {
            return Status::Err;
        };
        let status = unsafe {
            api!(RedisModule_CreateCommand)(
                raw_ctx,
                c_name.as_ptr(),
                Some(entry),
                c_flags.as_ptr(),
                1,
                1,
                1,
            )
        };
        if status != OK {
            log(
                raw_ctx,
                "warning",
                &format!("rustbloom: cannot register {name}"),
            );
            return Status::Err;
        }
    }
    if let Err(reason) = docs::register(raw_ctx).and_then(|()| docs::register_acl_category(raw_ctx))
    {
        log(raw_ctx, "warning", &format!("rustbloom: {reason}"));
        return Status::Err;
    }
    Status::Ok
}
