//! Replies to the client of a command call.

use std::ffi::{c_int, c_long, CString};

use redis_module::raw;

use super::Command;

/// A command's failure, turned into exactly one error reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommandError {
    /// The standard "wrong number of arguments" reply.
    WrongArity,
    /// The standard WRONGTYPE reply.
    WrongType,
    /// A fixed message, with its `ERR ` prefix.
    Static(&'static str),
    /// A composed message, with its `ERR ` prefix.
    Owned(String),
}

pub type CommandResult = Result<(), CommandError>;

/// The reply to a command that failed internally (a bug: it panicked, or the core answered what
/// it never should).
pub const INTERNAL: CommandError = CommandError::Static("ERR internal error in rustbloom");

impl Command {
    pub fn reply_integer(&self, value: i64) {
        // SAFETY: a live context (as for every reply below).
        unsafe { api!(RedisModule_ReplyWithLongLong)(self.ctx, value) };
    }

    /// A count or size, saturated at i64::MAX (RESP integers are signed).
    pub fn reply_count(&self, value: u64) {
        self.reply_integer(i64::try_from(value).unwrap_or(i64::MAX));
    }

    /// 1/0 in RESP2, true/false in RESP3.
    #[inline]
    pub fn reply_bool(&self, value: bool) {
        // SAFETY: a live context.
        unsafe { hot_api!(RedisModule_ReplyWithBool)(self.ctx, c_int::from(value)) };
    }

    pub fn reply_ok(&self) {
        // SAFETY: a live context and a NUL-terminated constant.
        unsafe { api!(RedisModule_ReplyWithSimpleString)(self.ctx, c"OK".as_ptr()) };
    }

    /// A simple string; `text` must not contain NUL or line breaks (callers pass constants).
    pub fn reply_simple(&self, text: &str) {
        let text = CString::new(text).unwrap_or_default();
        // SAFETY: a live context and a NUL-terminated string that outlives the call.
        unsafe { api!(RedisModule_ReplyWithSimpleString)(self.ctx, text.as_ptr()) };
    }

    /// A double in RESP3, its text as a bulk string in RESP2.
    pub fn reply_double(&self, value: f64) {
        // SAFETY: a live context.
        unsafe { api!(RedisModule_ReplyWithDouble)(self.ctx, value) };
    }

    pub fn reply_null(&self) {
        // SAFETY: a live context.
        unsafe { api!(RedisModule_ReplyWithNull)(self.ctx) };
    }

    pub fn reply_bulk(&self, bytes: &[u8]) {
        // SAFETY: a live context; Redis copies `bytes.len()` bytes from the slice.
        unsafe {
            api!(RedisModule_ReplyWithStringBuffer)(self.ctx, bytes.as_ptr().cast(), bytes.len())
        };
    }

    /// Starts an array of `len` elements.
    #[inline]
    pub fn reply_array(&self, len: usize) {
        // SAFETY: a live context.
        unsafe { api!(RedisModule_ReplyWithArray)(self.ctx, len as c_long) };
    }

    /// Starts a map of `pairs` entries (a flat array of 2·pairs in RESP2).
    pub fn reply_map(&self, pairs: usize) {
        // SAFETY: a live context.
        unsafe { api!(RedisModule_ReplyWithMap)(self.ctx, pairs as c_long) };
    }

    /// Replies with an error element (inside an array too).
    pub fn reply_error(&self, error: &CommandError) {
        match error {
            // SAFETY: a live context.
            CommandError::WrongArity => unsafe {
                api!(RedisModule_WrongArity)(self.ctx);
            },
            CommandError::WrongType => self.reply_error_text(
                "WRONGTYPE Operation against a key holding the wrong kind of value",
            ),
            CommandError::Static(message) => self.reply_error_text(message),
            CommandError::Owned(message) => self.reply_error_text(message),
        }
    }

    fn reply_error_text(&self, message: &str) {
        let message = CString::new(message.replace('\0', " ")).unwrap_or_default();
        // SAFETY: a live context and a NUL-terminated string that outlives the call.
        unsafe { api!(RedisModule_ReplyWithError)(self.ctx, message.as_ptr()) };
    }
}
