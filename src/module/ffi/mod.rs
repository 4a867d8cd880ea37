//! The thin, unsafe edge between Redis' C module API and the rest of the glue: raw arguments
//! without copies, keys and their values, replies, replication, logging, server info, RDB and AOF
//! streams, registration, the type, config, INFO and defrag callbacks, and the panic guard every entry
//! point goes through. Every call of a `RedisModule_*` function, and every callback that is handed
//! raw pointers to read, is here (or in the allocator), behind a safe function.
//!
//! Redis runs commands and type callbacks on its main thread, one at a time; the pointers Redis
//! hands a callback (context, arguments, IO) are valid until the callback returns. The wrappers
//! take those pointers from Redis only and keep them no longer than the call.

use std::ffi::{c_int, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

use redis_module::raw;

/// A Redis module API function, which exists once `RedisModule_Init` has run. Used inside the
/// `unsafe` block of the call: reading the pointer is sound because Redis sets it once, in
/// RedisModule_Init, before any callback of this module runs.
macro_rules! api {
    ($name:ident) => {
        raw::$name.expect(concat!("Redis module API ", stringify!($name)))
    };
}

/// The API functions every BF.ADD and BF.EXISTS calls, as [`api!`] does but without checking on
/// each call that the server provided it: [`hot_api_present`] checks that once, before any
/// command is registered, and the module refuses to load without them. Used inside the `unsafe`
/// block of the call: the pointer is Some (checked at load) and Redis never clears it.
macro_rules! hot_api {
    (RedisModule_OpenKey) => { hot_api!(@checked_at_load RedisModule_OpenKey) };
    (RedisModule_CloseKey) => { hot_api!(@checked_at_load RedisModule_CloseKey) };
    (RedisModule_KeyType) => { hot_api!(@checked_at_load RedisModule_KeyType) };
    (RedisModule_ModuleTypeGetType) => { hot_api!(@checked_at_load RedisModule_ModuleTypeGetType) };
    (RedisModule_ModuleTypeGetValue) => { hot_api!(@checked_at_load RedisModule_ModuleTypeGetValue) };
    (RedisModule_StringPtrLen) => { hot_api!(@checked_at_load RedisModule_StringPtrLen) };
    (RedisModule_ReplyWithBool) => { hot_api!(@checked_at_load RedisModule_ReplyWithBool) };
    (RedisModule_ReplicateVerbatim) => { hot_api!(@checked_at_load RedisModule_ReplicateVerbatim) };
    (RedisModule_NotifyKeyspaceEvent) => { hot_api!(@checked_at_load RedisModule_NotifyKeyspaceEvent) };
    (RedisModule_SignalModifiedKey) => { hot_api!(@checked_at_load RedisModule_SignalModifiedKey) };
    (RedisModule_GetContextFlags) => { hot_api!(@checked_at_load RedisModule_GetContextFlags) };
    (@checked_at_load $name:ident) => {
        raw::$name.unwrap_unchecked()
    };
}

/// True when the server provided every function [`hot_api!`] calls unchecked (the same list).
pub fn hot_api_present() -> bool {
    // By value: the statics are copied, never borrowed.
    fn provided<F>(function: Option<F>) -> bool {
        function.is_some()
    }
    // SAFETY: reading the pointers, which Redis sets once in RedisModule_Init, before this runs.
    unsafe {
        provided(raw::RedisModule_OpenKey)
            && provided(raw::RedisModule_CloseKey)
            && provided(raw::RedisModule_KeyType)
            && provided(raw::RedisModule_ModuleTypeGetType)
            && provided(raw::RedisModule_ModuleTypeGetValue)
            && provided(raw::RedisModule_StringPtrLen)
            && provided(raw::RedisModule_ReplyWithBool)
            && provided(raw::RedisModule_ReplicateVerbatim)
            && provided(raw::RedisModule_NotifyKeyspaceEvent)
            && provided(raw::RedisModule_SignalModifiedKey)
            && provided(raw::RedisModule_GetContextFlags)
    }
}

/// An optional Redis module API function (absent on older servers): None when missing.
macro_rules! optional_api {
    ($name:ident) => {{
        #[allow(unused_unsafe)]
        // SAFETY: as in `api!`.
        let function = unsafe { raw::$name };
        function
    }};
}

pub const OK: c_int = raw::REDISMODULE_OK as c_int;

mod command;
mod config;
mod defrag;
mod docs;
mod io;
mod key;
mod load;
mod replicate;
mod reply;
mod server;
mod strings;
mod value_type;

pub use command::{run_command, Command};
pub use config::{ConfigReply, StringConfig};
pub use defrag::{defrag_unavailable, DefragCtx};
pub use docs::{ArgDoc, ArgKind, CommandDoc, OtherKeys};
pub use io::{Digest, Io};
pub use key::Key;
pub use load::LoadCtx;
pub use server::{InfoCtx, InfoSection, ServerInfo};
pub use strings::{string_text, RedisBuffer};
pub use value_type::{ModuleValue, Registration, ValueType};

/// The context flags of `ctx` (REDISMODULE_CTX_FLAGS_*); `ctx` may be null (then only the
/// server's own flags: loading, replica, in a script or transaction, maxmemory set).
pub fn context_flags(ctx: *mut raw::RedisModuleCtx) -> u32 {
    // SAFETY: GetContextFlags accepts a null context and otherwise a live one from Redis.
    unsafe { hot_api!(RedisModule_GetContextFlags)(ctx) as u32 }
}

/// True when the call in `ctx` comes from the primary's replication stream or from AOF loading.
pub fn is_replayed(ctx: *mut raw::RedisModuleCtx) -> bool {
    context_flags(ctx)
        & (raw::REDISMODULE_CTX_FLAGS_REPLICATED | raw::REDISMODULE_CTX_FLAGS_LOADING)
        != 0
}

/// `used_memory` over `maxmemory` as Redis counts it for its own out-of-memory check (0 when
/// maxmemory is not set); None on a server without the call. Cheap: no INFO is built.
pub fn used_memory_ratio() -> Option<f32> {
    let ratio = optional_api!(RedisModule_GetUsedMemoryRatio)?;
    // SAFETY: a function without arguments, valid on the main thread where callbacks run.
    Some(unsafe { ratio() })
}

/// The server's clock, Unix milliseconds (0 for a clock before 1970).
pub fn now_ms() -> u64 {
    // SAFETY: Milliseconds has no arguments and only reads the clock.
    u64::try_from(unsafe { api!(RedisModule_Milliseconds)() }).unwrap_or(0)
}

/// Runs a type callback, returning `fallback` if it panicked.
pub fn guard<T>(what: &str, fallback: T, callback: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(callback)).unwrap_or_else(|_| {
        log(
            std::ptr::null_mut(),
            "warning",
            &format!("rustbloom: internal error in {what}"),
        );
        fallback
    })
}

/// Stops the server after logging why: for a write the primary (or the AOF) accepted that this
/// server cannot apply. Serving on would leave it with different data from its primary — items
/// that answer 0 here and 1 there — which is worse than stopping loudly. Redis stops the same way
/// when its own allocator fails.
pub fn stop_server(message: &str) -> ! {
    log(
        std::ptr::null_mut(),
        "warning",
        &format!("rustbloom: {message}; stopping the server so it never serves less than its primary or AOF accepted"),
    );
    std::process::exit(1)
}

/// Logs `message` verbatim (passed as a `%s` argument: a `%` in it is never a format directive).
pub fn log(ctx: *mut raw::RedisModuleCtx, level: &str, message: &str) {
    let (Ok(level), Ok(message)) = (
        CString::new(level),
        CString::new(message.replace('\0', " ")),
    ) else {
        return;
    };
    if let Some(log) = optional_api!(RedisModule_Log) {
        // SAFETY: a null or live context, NUL-terminated level and message, and a "%s" format
        // with exactly that one string argument.
        unsafe { log(ctx, level.as_ptr(), c"%s".as_ptr(), message.as_ptr()) };
    }
}
