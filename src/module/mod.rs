//! The Redis glue: registration of the type and the commands, and module start-up.

// The parsers are public for the fuzz targets; the rest is glue that only Redis calls.
pub mod alloc;
pub mod args;
pub(crate) mod commands;
pub(crate) mod config;
pub(crate) mod datatype;
pub(crate) mod errors;
pub(crate) mod ffi;
pub(crate) mod memory;
pub(crate) mod partition;
pub(crate) mod personality;
pub(crate) mod stats;
pub(crate) mod table;
pub(crate) mod valkey_type;

use std::ffi::c_int;

use redis_module::{raw, Context, RedisString, Status};

use ffi::{log, LoadCtx};

/// Valkey's `VALKEYMODULE_OPTIONS_HANDLE_ATOMIC_SLOT_MIGRATION` (valkeymodule.h, Valkey 9.0+):
/// without it Valkey refuses `CLUSTER MIGRATESLOTS` while the module is loaded. The migration
/// sends the moving slots' keys as the type's AOF rewrite (`BF.RESERVE ... PARTITIONS`,
/// `BF.LOADCHUNK`), then the commands replicated for the writes made meanwhile, to a target that
/// holds them unseen until it owns the slots; this module keeps no per-node index of keys,
/// subscribes to no keyspace event and every command names one key, so nothing here assumes
/// otherwise. Set only where Valkey's own option list has it: Redis' option bits are its own
/// (its redismodule.h, up to 8.4 and its own atomic slot migration, defines none past bit 3).
const VALKEY_OPTIONS_HANDLE_ATOMIC_SLOT_MIGRATION: c_int = 1 << 5;

/// Module start-up, after the data type and the configs are registered.
pub fn init(ctx: &Context, args: &[RedisString]) -> Status {
    let load = LoadCtx::new(ctx);
    let raw_ctx = load.raw();
    if !ffi::hot_api_present() {
        log(
            raw_ctx,
            "warning",
            "rustbloom: the server lacks a module API function every command needs",
        );
        return Status::Err;
    }
    let args: Vec<&[u8]> = args.iter().map(RedisString::as_slice).collect();
    let allocator_note = memory::use_server_allocator(raw_ctx);
    // First: the config defaults and the commands' names depend on the personality.
    let configured = personality::choose(&args)
        .and_then(|()| config::register(ctx, &load))
        .and_then(|mut notes| {
            notes.extend(allocator_note);
            notes.extend(ffi::defrag_unavailable(raw_ctx));
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
    load.register_info::<stats::BloomSection>();
    // Keys are signalled as modified only when a command changed them, so WATCH and
    // client-side caching are not disturbed by adds of items already present.
    let mut options = (raw::REDISMODULE_OPTIONS_HANDLE_IO_ERRORS
        | raw::REDISMODULE_OPTION_NO_IMPLICIT_SIGNAL_MODIFIED) as c_int;
    if load
        .valkey_module_options_all()
        .is_some_and(|known| known & VALKEY_OPTIONS_HANDLE_ATOMIC_SLOT_MIGRATION != 0)
    {
        options |= VALKEY_OPTIONS_HANDLE_ATOMIC_SLOT_MIGRATION;
    }
    load.set_module_options(options);
    if let Err(reason) = table::register(&load).and_then(|()| table::register_acl_category(&load)) {
        log(raw_ctx, "warning", &format!("rustbloom: {reason}"));
        return Status::Err;
    }
    Status::Ok
}
