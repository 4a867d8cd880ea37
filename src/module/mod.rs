//! The Redis glue: registration of the type and the commands, and module start-up.

// The parsers are public for the fuzz targets; the rest is glue that only Redis calls.
pub mod alloc;
pub mod args;
pub(crate) mod commands;
pub(crate) mod config;
pub(crate) mod datatype;
pub(crate) mod ffi;
pub(crate) mod memory;
pub(crate) mod partition;
pub(crate) mod stats;
pub(crate) mod table;

use std::ffi::c_int;

use redis_module::{raw, Context, RedisString, Status};

use ffi::{log, LoadCtx};

/// Module start-up, after the data type and the configs are registered.
pub fn init(ctx: &Context, args: &[RedisString]) -> Status {
    let raw_ctx = ctx.get_raw();
    // SAFETY: init runs inside RedisModule_OnLoad, with its context.
    let load = unsafe { LoadCtx::new(raw_ctx) };
    let args: Vec<&[u8]> = args.iter().map(RedisString::as_slice).collect();
    let allocator_note = memory::use_server_allocator(raw_ctx);
    let configured = config::register(ctx, &load).and_then(|mut notes| {
        notes.extend(allocator_note);
        notes.extend(config::apply_module_args(&args)?);
        Ok(notes)
    });
    match configured {
        Ok(notes) => notes.iter().for_each(|line| log(raw_ctx, "notice", line)),
        Err(reason) => {
            log(raw_ctx, "warning", &format!("rustbloom: {reason}"));
            return Status::Err;
        }
    }
    load.register_info(stats::info);
    // Keys are signalled as modified only when a command changed them, so WATCH and
    // client-side caching are not disturbed by adds of items already present.
    load.set_module_options(
        (raw::REDISMODULE_OPTIONS_HANDLE_IO_ERRORS
            | raw::REDISMODULE_OPTION_NO_IMPLICIT_SIGNAL_MODIFIED) as c_int,
    );
    if let Err(reason) = table::register(&load).and_then(|()| table::register_acl_category(&load)) {
        log(raw_ctx, "warning", &format!("rustbloom: {reason}"));
        return Status::Err;
    }
    Status::Ok
}
