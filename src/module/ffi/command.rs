//! One command call: its context, its arguments, and the panic guard it runs in.

use std::cell::Cell;
use std::ffi::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};

use redis_module::raw;

use super::strings::live_string_bytes;
use super::{context_flags, is_replayed, log, now_ms, Key, OK};
use crate::module::errors::{CommandResult, INTERNAL};

/// The context of one command call, with its arguments borrowed from Redis without copying.
pub struct Command {
    pub(super) ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: usize,
    /// A [`Key`] of this call is open: a second handle would alias its value.
    pub(super) key_open: Cell<bool>,
}

impl Command {
    pub fn ctx(&self) -> *mut raw::RedisModuleCtx {
        self.ctx
    }

    /// Number of arguments, the command name included.
    #[inline]
    pub fn argc(&self) -> usize {
        self.argc
    }

    /// The raw Redis string of argument `index`.
    #[inline]
    pub(super) fn raw_arg(&self, index: usize) -> *mut raw::RedisModuleString {
        assert!(index < self.argc);
        // SAFETY: Redis passes `argc` live argument pointers; index < argc.
        unsafe { *self.argv.add(index) }
    }

    /// The raw Redis strings of arguments `from..from + count`, as one vector in Redis' own
    /// argument array.
    pub(super) fn raw_args(&self, from: usize, count: usize) -> *mut *mut raw::RedisModuleString {
        assert!(from.checked_add(count).is_some_and(|end| end <= self.argc));
        // SAFETY: Redis passes `argc` live argument pointers; from + count <= argc.
        unsafe { self.argv.add(from) }
    }

    /// The bytes of argument `index` (0 is the command name), valid for the whole call.
    #[inline]
    pub fn arg(&self, index: usize) -> &[u8] {
        // SAFETY: the arguments live, unchanged, until the command returns, longer than &self.
        unsafe { live_string_bytes(self.raw_arg(index)) }
    }

    /// The bytes of arguments `from..`.
    pub fn args_from(&self, from: usize) -> impl ExactSizeIterator<Item = &[u8]> + '_ {
        // SAFETY: Redis passes `argc` live argument pointers, unchanged until the command returns.
        let argv = unsafe { std::slice::from_raw_parts(self.argv, self.argc) };
        argv[from.min(self.argc)..].iter().map(|&string| {
            // SAFETY: a live argument, alive and unchanged until the command returns, longer
            // than &self.
            unsafe { live_string_bytes(string) }
        })
    }

    /// Context flags (REDISMODULE_CTX_FLAGS_*).
    pub fn flags(&self) -> u32 {
        context_flags(self.ctx)
    }

    /// True when the client speaks RESP3.
    pub fn is_resp3(&self) -> bool {
        self.flags() & raw::REDISMODULE_CTX_FLAGS_RESP3 != 0
    }

    /// The server's clock, Unix milliseconds (0 for a clock before 1970).
    pub fn now_ms(&self) -> u64 {
        now_ms()
    }

    /// True when this call comes from the primary's replication stream or from AOF loading:
    /// its effects were admitted where it first ran and must be applied as they are.
    pub fn is_replayed(&self) -> bool {
        is_replayed(self.ctx)
    }

    /// Opens the key at argument 1. One key handle at a time (like a RefCell: a second open while
    /// one lives is a bug, and panics into the guard's error reply), so a value borrowed through
    /// one handle cannot be replaced through another.
    #[inline]
    pub fn open_key(&self, writable: bool) -> Key<'_> {
        assert!(
            !self.key_open.replace(true),
            "a key of this command is already open"
        );
        let mode = if writable {
            raw::REDISMODULE_READ | raw::REDISMODULE_WRITE
        } else {
            raw::REDISMODULE_READ
        };
        // SAFETY: a live context and argument; Redis returns a key handle that stays valid
        // until CloseKey, or null for a missing key opened only to read (Redis 7.0), which
        // every key call takes as an empty key (KeyType EMPTY, no value, CloseKey a no-op).
        let key =
            unsafe { hot_api!(RedisModule_OpenKey)(self.ctx, self.raw_arg(1), mode as c_int) };
        Key {
            key: key.cast(),
            command: self,
            guarded: true,
        }
    }

    /// True when Redis asks only where this call's keys are (a command registered with the
    /// `getkeys-api` flag: cluster routing, ACLs, COMMAND GETKEYS), to be told by
    /// [`declare_key`](Self::declare_key) and answered with nothing else.
    pub fn is_keys_position_request(&self) -> bool {
        // SAFETY: a live context.
        unsafe { api!(RedisModule_IsKeysPositionRequest)(self.ctx) != 0 }
    }

    /// Tells Redis, in a keys position request, that argument `index` is a key.
    pub fn declare_key(&self, index: usize) {
        let Ok(position) = c_int::try_from(index) else {
            return;
        };
        // SAFETY: a live context, in a keys position request (the only caller's condition).
        unsafe { api!(RedisModule_KeyAtPos)(self.ctx, position) };
    }

    /// Opens the key at argument `index` (2 or more) to read, beside the key of argument 1
    /// (BF.MERGE's sources). Panics when it names the key of argument 1: that value may be
    /// borrowed mutably through its own handle. Two read handles of one key share only reads.
    pub fn open_source_key(&self, index: usize) -> Key<'_> {
        assert!(index >= 2, "argument {index} is not a source key");
        assert!(
            self.arg(index) != self.arg(1),
            "a source key that is the destination"
        );
        // SAFETY: a live context and argument; as in `open_key`, a handle or null (an empty key).
        let key = unsafe {
            hot_api!(RedisModule_OpenKey)(
                self.ctx,
                self.raw_arg(index),
                raw::REDISMODULE_READ as c_int,
            )
        };
        Key {
            key: key.cast(),
            command: self,
            guarded: false,
        }
    }
}

/// Runs `handler` for a command call: its error becomes the reply, and a panic becomes an error
/// reply instead of taking the server down. Compiled into each command's entry point, with
/// the handler, so that a single-item command runs in one frame.
#[inline(always)]
pub fn run_command(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
    handler: impl FnOnce(&Command) -> CommandResult,
) -> c_int {
    let command = Command {
        ctx,
        argv,
        argc: usize::try_from(argc).unwrap_or(0),
        key_open: Cell::new(false),
    };
    match catch_unwind(AssertUnwindSafe(|| handler(&command))) {
        Ok(Ok(())) => OK,
        Ok(Err(error)) => {
            command.reply_error(&error);
            OK
        }
        Err(_) => handler_panicked(&command),
    }
}

/// A handler panicked (a bug): logged, and answered as an internal error.
#[cold]
fn handler_panicked(command: &Command) -> c_int {
    log(
        command.ctx,
        "warning",
        "a BF.* command failed internally; its key may be unchanged",
    );
    command.reply_error(&INTERNAL);
    OK
}
