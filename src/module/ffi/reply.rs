//! Replies to the client of a command call. Error replies are sent as `errors.rs` words them.

use std::ffi::{c_int, c_long, CString};

use redis_module::raw;

use super::Command;
use crate::module::errors::CommandError;

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

    /// Replies with an error element (inside an array too): the error's text, or the server's
    /// own wrong-arity reply.
    pub fn reply_error(&self, error: &CommandError) {
        match error.text() {
            Some(message) => self.reply_error_text(message),
            // SAFETY: a live context.
            None => unsafe {
                api!(RedisModule_WrongArity)(self.ctx);
            },
        }
    }

    fn reply_error_text(&self, message: &str) {
        let message = CString::new(message.replace('\0', " ")).unwrap_or_default();
        // SAFETY: a live context and a NUL-terminated string that outlives the call.
        unsafe { api!(RedisModule_ReplyWithError)(self.ctx, message.as_ptr()) };
    }
}
