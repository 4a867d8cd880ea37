//! The thin, unsafe edge between Redis' C module API and the handlers: raw arguments without
//! copies, keys, replies, replication, logging, and the panic guard every entry point goes through.

use std::ffi::{c_char, c_int, c_long, c_void, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

use redis_module::raw;

/// Calls a Redis module API function, which exists once `RedisModule_Init` has run.
macro_rules! api {
    ($name:ident) => {{
        #[allow(unused_unsafe)]
        let function =
            unsafe { raw::$name }.expect(concat!("Redis module API ", stringify!($name)));
        function
    }};
}
pub(crate) use api;

pub const OK: c_int = raw::REDISMODULE_OK as c_int;

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

/// The context of one command call, with its arguments borrowed from Redis without copying.
pub struct Command {
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: usize,
}

impl Command {
    pub fn ctx(&self) -> *mut raw::RedisModuleCtx {
        self.ctx
    }

    /// Number of arguments, the command name included.
    pub fn argc(&self) -> usize {
        self.argc
    }

    /// The raw Redis string of argument `index`.
    pub fn raw_arg(&self, index: usize) -> *mut raw::RedisModuleString {
        assert!(index < self.argc);
        unsafe { *self.argv.add(index) }
    }

    /// The bytes of argument `index` (0 is the command name), valid for the whole call.
    pub fn arg(&self, index: usize) -> &[u8] {
        let mut len = 0usize;
        let ptr = unsafe { api!(RedisModule_StringPtrLen)(self.raw_arg(index), &mut len) };
        if len == 0 {
            return &[];
        }
        unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) }
    }

    /// The bytes of arguments `from..`.
    pub fn args_from(&self, from: usize) -> impl ExactSizeIterator<Item = &[u8]> + '_ {
        (from.min(self.argc)..self.argc).map(move |i| self.arg(i))
    }

    /// Context flags (REDISMODULE_CTX_FLAGS_*).
    pub fn flags(&self) -> u32 {
        unsafe { api!(RedisModule_GetContextFlags)(self.ctx) as u32 }
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

    /// Opens the key at argument 1.
    pub fn open_key(&self, writable: bool) -> Key {
        let mode = if writable {
            raw::REDISMODULE_READ | raw::REDISMODULE_WRITE
        } else {
            raw::REDISMODULE_READ
        };
        let key = unsafe { api!(RedisModule_OpenKey)(self.ctx, self.raw_arg(1), mode as c_int) };
        Key {
            key: key.cast(),
            ctx: self.ctx,
            name: self.raw_arg(1),
        }
    }

    pub fn reply_integer(&self, value: i64) {
        unsafe { api!(RedisModule_ReplyWithLongLong)(self.ctx, value) };
    }

    /// A count or size, saturated at i64::MAX (RESP integers are signed).
    pub fn reply_count(&self, value: u64) {
        self.reply_integer(i64::try_from(value).unwrap_or(i64::MAX));
    }

    /// 1/0 in RESP2, true/false in RESP3.
    pub fn reply_bool(&self, value: bool) {
        unsafe { api!(RedisModule_ReplyWithBool)(self.ctx, c_int::from(value)) };
    }

    pub fn reply_ok(&self) {
        unsafe { api!(RedisModule_ReplyWithSimpleString)(self.ctx, c"OK".as_ptr()) };
    }

    /// A simple string; `text` must not contain NUL or line breaks (callers pass constants).
    pub fn reply_simple(&self, text: &str) {
        let text = CString::new(text).unwrap_or_default();
        unsafe { api!(RedisModule_ReplyWithSimpleString)(self.ctx, text.as_ptr()) };
    }

    /// A double in RESP3, its text as a bulk string in RESP2.
    pub fn reply_double(&self, value: f64) {
        unsafe { api!(RedisModule_ReplyWithDouble)(self.ctx, value) };
    }

    pub fn reply_null(&self) {
        unsafe { api!(RedisModule_ReplyWithNull)(self.ctx) };
    }

    pub fn reply_bulk(&self, bytes: &[u8]) {
        unsafe {
            api!(RedisModule_ReplyWithStringBuffer)(self.ctx, bytes.as_ptr().cast(), bytes.len())
        };
    }

    /// Starts an array of `len` elements.
    pub fn reply_array(&self, len: usize) {
        unsafe { api!(RedisModule_ReplyWithArray)(self.ctx, len as c_long) };
    }

    /// Starts an array whose length is set later with [`set_array_length`](Self::set_array_length).
    pub fn reply_array_postponed(&self) {
        unsafe {
            api!(RedisModule_ReplyWithArray)(self.ctx, raw::REDISMODULE_POSTPONED_LEN as c_long)
        };
    }

    pub fn set_array_length(&self, len: usize) {
        unsafe { api!(RedisModule_ReplySetArrayLength)(self.ctx, len as c_long) };
    }

    /// Starts a map of `pairs` entries (a flat array of 2·pairs in RESP2).
    pub fn reply_map(&self, pairs: usize) {
        unsafe { api!(RedisModule_ReplyWithMap)(self.ctx, pairs as c_long) };
    }

    /// Replies with an error element (inside an array too).
    pub fn reply_error(&self, error: &CommandError) {
        match error {
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
        unsafe { api!(RedisModule_ReplyWithError)(self.ctx, message.as_ptr()) };
    }

    /// Replicates this call as it was received.
    pub fn replicate_verbatim(&self) {
        unsafe { api!(RedisModule_ReplicateVerbatim)(self.ctx) };
    }

    /// Replicates `command` with `args` (the key first, as raw bytes). Several calls in one
    /// command reach replicas and the AOF wrapped in MULTI/EXEC.
    pub fn replicate<'a>(&self, command: &str, args: impl IntoIterator<Item = &'a [u8]>) {
        let strings: Vec<*mut raw::RedisModuleString> = args
            .into_iter()
            .map(|bytes| unsafe {
                api!(RedisModule_CreateString)(self.ctx, bytes.as_ptr().cast(), bytes.len())
            })
            .collect();
        let name = CString::new(command).expect("command names have no NUL");
        unsafe {
            api!(RedisModule_Replicate)(
                self.ctx,
                name.as_ptr(),
                c"v".as_ptr(),
                strings.as_ptr(),
                strings.len(),
            );
            for string in strings {
                api!(RedisModule_FreeString)(self.ctx, string);
            }
        }
    }

    /// Fires a keyspace event of the generic class for the key at argument 1.
    pub fn notify(&self, event: &std::ffi::CStr) {
        unsafe {
            api!(RedisModule_NotifyKeyspaceEvent)(
                self.ctx,
                raw::REDISMODULE_NOTIFY_GENERIC as c_int,
                event.as_ptr(),
                self.raw_arg(1),
            )
        };
    }
}

/// An open key, closed on drop.
pub struct Key {
    key: *mut raw::RedisModuleKey,
    ctx: *mut raw::RedisModuleCtx,
    name: *mut raw::RedisModuleString,
}

impl Key {
    /// True when the key does not exist.
    pub fn is_empty(&self) -> bool {
        unsafe { api!(RedisModule_KeyType)(self.key) == raw::REDISMODULE_KEYTYPE_EMPTY as c_int }
    }

    /// The module value of type `ty` stored here: Ok(None) for a missing key, WrongType for a key
    /// of any other type.
    // The value lives in Redis' keyspace, not in this handle; Redis runs one command at a time.
    #[allow(clippy::mut_from_ref)]
    pub fn value<T>(&self, ty: *mut raw::RedisModuleType) -> Result<Option<&mut T>, CommandError> {
        // One call answers the common case (a key of our type); the key type is asked only
        // when it is not.
        if unsafe { api!(RedisModule_ModuleTypeGetType)(self.key) } == ty {
            let value = unsafe { api!(RedisModule_ModuleTypeGetValue)(self.key) }.cast::<T>();
            return Ok(unsafe { value.as_mut() });
        }
        if self.is_empty() {
            Ok(None)
        } else {
            Err(CommandError::WrongType)
        }
    }

    /// Stores `value` as the key's value (the key must have been opened writable).
    pub fn set_value<T>(&self, ty: *mut raw::RedisModuleType, value: Box<T>) {
        let ptr = Box::into_raw(value);
        let status = unsafe { api!(RedisModule_ModuleTypeSetValue)(self.key, ty, ptr.cast()) };
        if status != OK {
            // Not stored: take it back so it is freed.
            drop(unsafe { Box::from_raw(ptr) });
        }
    }

    /// Tells Redis the value changed in place (WATCH, client-side caching).
    pub fn signal_modified(&self) {
        unsafe { api!(RedisModule_SignalModifiedKey)(self.ctx, self.name) };
    }
}

impl Drop for Key {
    fn drop(&mut self) {
        unsafe { api!(RedisModule_CloseKey)(self.key) };
    }
}

/// The server's clock, Unix milliseconds (0 for a clock before 1970).
pub fn now_ms() -> u64 {
    u64::try_from(unsafe { api!(RedisModule_Milliseconds)() }).unwrap_or(0)
}

/// True when the call in `ctx` (not null) comes from the primary's replication stream or from
/// AOF loading.
pub fn is_replayed(ctx: *mut raw::RedisModuleCtx) -> bool {
    let flags = unsafe { api!(RedisModule_GetContextFlags)(ctx) } as u32;
    flags & (raw::REDISMODULE_CTX_FLAGS_REPLICATED | raw::REDISMODULE_CTX_FLAGS_LOADING) != 0
}

/// The shape of every command handler.
pub type Handler = fn(&Command) -> CommandResult;

/// Runs `handler` for a command call: its error becomes the reply, and a panic becomes an error
/// reply instead of taking the server down.
pub fn run_command(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
    handler: Handler,
) -> c_int {
    let command = Command {
        ctx,
        argv,
        argc: usize::try_from(argc).unwrap_or(0),
    };
    match catch_unwind(AssertUnwindSafe(|| handler(&command))) {
        Ok(Ok(())) => OK,
        Ok(Err(error)) => {
            command.reply_error(&error);
            OK
        }
        Err(_) => {
            log(
                ctx,
                "warning",
                "a BF.* command failed internally; its key may be unchanged",
            );
            command.reply_error(&CommandError::Static("ERR internal error in rustbloom"));
            OK
        }
    }
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
    if let Some(log) = unsafe { raw::RedisModule_Log } {
        unsafe { log(ctx, level.as_ptr(), c"%s".as_ptr(), message.as_ptr()) };
    }
}

/// Borrows a buffer Redis allocated, and frees it on drop.
pub struct RedisBuffer {
    ptr: *mut c_char,
    len: usize,
}

impl AsRef<[u8]> for RedisBuffer {
    fn as_ref(&self) -> &[u8] {
        self.bytes().unwrap_or_default()
    }
}

impl RedisBuffer {
    /// Takes ownership of `ptr` (may be null) holding `len` bytes.
    pub unsafe fn new(ptr: *mut c_char, len: usize) -> RedisBuffer {
        RedisBuffer { ptr, len }
    }

    pub fn bytes(&self) -> Option<&[u8]> {
        if self.ptr.is_null() {
            None
        } else {
            Some(unsafe { std::slice::from_raw_parts(self.ptr.cast::<u8>(), self.len) })
        }
    }
}

impl Drop for RedisBuffer {
    fn drop(&mut self) {
        if !self.ptr.is_null() {
            unsafe { api!(RedisModule_Free)(self.ptr.cast::<c_void>()) };
        }
    }
}
