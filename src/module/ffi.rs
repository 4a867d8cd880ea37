//! The thin, unsafe edge between Redis' C module API and the rest of the glue: raw arguments
//! without copies, keys and their values, replies, replication, logging, server info, RDB and AOF
//! streams, registration, and the panic guard every entry point goes through. Every call of a
//! `RedisModule_*` function is here (or in the allocator), behind a safe function.
//!
//! Redis runs commands and type callbacks on its main thread, one at a time; the pointers Redis
//! hands a callback (context, arguments, IO) are valid until the callback returns. The wrappers
//! take those pointers from Redis only and keep them no longer than the call.

use std::cell::Cell;
use std::ffi::{c_char, c_int, c_long, c_longlong, c_void, CStr, CString};
use std::marker::PhantomData;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicPtr, Ordering};

use redis_module::raw;

/// A Redis module API function, which exists once `RedisModule_Init` has run. Used inside the
/// `unsafe` block of the call: reading the pointer is sound because Redis sets it once, in
/// RedisModule_Init, before any callback of this module runs.
macro_rules! api {
    ($name:ident) => {
        raw::$name.expect(concat!("Redis module API ", stringify!($name)))
    };
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

/// The context flags of `ctx` (REDISMODULE_CTX_FLAGS_*); `ctx` may be null (then only the
/// server's own flags: loading, replica, in a script or transaction, maxmemory set).
pub fn context_flags(ctx: *mut raw::RedisModuleCtx) -> u32 {
    // SAFETY: GetContextFlags accepts a null context and otherwise a live one from Redis.
    unsafe { api!(RedisModule_GetContextFlags)(ctx) as u32 }
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

/// The text of a Redis string, borrowed for as long as the string lives.
///
/// # Safety
/// `string` is null or a live Redis string that outlives `'a` unchanged.
unsafe fn string_bytes<'a>(string: *const raw::RedisModuleString) -> &'a [u8] {
    if string.is_null() {
        return &[];
    }
    let mut len = 0usize;
    // SAFETY: a live Redis string (the caller's contract).
    let ptr = unsafe { api!(RedisModule_StringPtrLen)(string, &mut len) };
    if ptr.is_null() || len == 0 {
        return &[];
    }
    // SAFETY: StringPtrLen returns `len` bytes owned by the string, alive for 'a.
    unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) }
}

/// The text of a Redis string Redis handed a callback (lossy), for log lines and messages.
pub fn string_text(string: *const raw::RedisModuleString) -> String {
    // SAFETY: callers pass strings Redis gave the running callback; the bytes are copied here.
    String::from_utf8_lossy(unsafe { string_bytes(string) }).into_owned()
}

/// The context of one command call, with its arguments borrowed from Redis without copying.
pub struct Command {
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: usize,
    /// A [`Key`] of this call is open: a second handle would alias its value.
    key_open: Cell<bool>,
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
    fn raw_arg(&self, index: usize) -> *mut raw::RedisModuleString {
        assert!(index < self.argc);
        // SAFETY: Redis passes `argc` live argument pointers; index < argc.
        unsafe { *self.argv.add(index) }
    }

    /// The bytes of argument `index` (0 is the command name), valid for the whole call.
    pub fn arg(&self, index: usize) -> &[u8] {
        // SAFETY: the arguments live, unchanged, until the command returns, longer than &self.
        unsafe { string_bytes(self.raw_arg(index)) }
    }

    /// The bytes of arguments `from..`.
    pub fn args_from(&self, from: usize) -> impl ExactSizeIterator<Item = &[u8]> + '_ {
        (from.min(self.argc)..self.argc).map(move |i| self.arg(i))
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
        // SAFETY: a live context and argument; Redis returns a key handle (never null for
        // these modes) that stays valid until CloseKey.
        let key = unsafe { api!(RedisModule_OpenKey)(self.ctx, self.raw_arg(1), mode as c_int) };
        Key {
            key: key.cast(),
            command: self,
        }
    }

    pub fn reply_integer(&self, value: i64) {
        // SAFETY: a live context (as for every reply below).
        unsafe { api!(RedisModule_ReplyWithLongLong)(self.ctx, value) };
    }

    /// A count or size, saturated at i64::MAX (RESP integers are signed).
    pub fn reply_count(&self, value: u64) {
        self.reply_integer(i64::try_from(value).unwrap_or(i64::MAX));
    }

    /// 1/0 in RESP2, true/false in RESP3.
    pub fn reply_bool(&self, value: bool) {
        // SAFETY: a live context.
        unsafe { api!(RedisModule_ReplyWithBool)(self.ctx, c_int::from(value)) };
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

    /// Replicates this call as it was received.
    pub fn replicate_verbatim(&self) {
        // SAFETY: a live context.
        unsafe { api!(RedisModule_ReplicateVerbatim)(self.ctx) };
    }

    /// Replicates `command` with `args` (the key first, as raw bytes). Several calls in one
    /// command reach replicas and the AOF wrapped in MULTI/EXEC.
    pub fn replicate<'a>(&self, command: &str, args: impl IntoIterator<Item = &'a [u8]>) {
        let Ok(name) = CString::new(command) else {
            return;
        };
        // SAFETY: a live context.
        let strings = unsafe { StringVector::new(self.ctx, args) };
        // SAFETY: a live context, a NUL-terminated name, the "v" format with a vector of
        // `strings.len()` live strings, which Redis copies.
        unsafe {
            api!(RedisModule_Replicate)(
                self.ctx,
                name.as_ptr(),
                c"v".as_ptr(),
                strings.as_ptr(),
                strings.len(),
            );
        }
    }

    /// Replicates `command` with the key (argument 1), then `made` (strings made from these
    /// bytes), then this call's arguments at `received`, passed as Redis holds them: Redis takes
    /// a reference to each, no copy, whatever their number. Several calls in one command reach
    /// replicas and the AOF wrapped in MULTI/EXEC.
    pub fn replicate_received(
        &self,
        command: &CStr,
        made: &[&[u8]],
        received: impl ExactSizeIterator<Item = usize>,
    ) {
        let mut argv = Vec::with_capacity(1 + made.len() + received.len());
        argv.push(self.raw_arg(1));
        argv.extend(made.iter().map(|bytes| {
            // SAFETY: a live context; Redis copies `bytes.len()` bytes into a new string, freed
            // below.
            unsafe { api!(RedisModule_CreateString)(self.ctx, bytes.as_ptr().cast(), bytes.len()) }
        }));
        argv.extend(received.map(|index| self.raw_arg(index)));
        // SAFETY: a live context, a NUL-terminated name, the "v" format with a vector of
        // `argv.len()` live strings, each of which Redis references (its count raised) or
        // copies, never frees.
        unsafe {
            api!(RedisModule_Replicate)(
                self.ctx,
                command.as_ptr(),
                c"v".as_ptr(),
                argv.as_ptr(),
                argv.len(),
            );
        }
        for &string in &argv[1..=made.len()] {
            // SAFETY: a string made in this live context above, freed only here.
            unsafe { api!(RedisModule_FreeString)(self.ctx, string) };
        }
    }

    /// Fires a keyspace event of the generic class for the key at argument 1.
    pub fn notify(&self, event: &CStr) {
        // SAFETY: a live context, a NUL-terminated event name and a live argument.
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

/// A Rust type stored as the values of a Redis module type.
///
/// # Safety
/// Every value of [`module_type`](Self::module_type) in the keyspace is a `Box<Self>` turned
/// into a pointer (as [`Key::set_value`] stores it).
pub unsafe trait ModuleValue: Sized {
    /// The registered type.
    fn module_type() -> *mut raw::RedisModuleType;
}

/// Redis strings made from bytes for one call that takes a vector of them (the 'v' format of
/// Replicate and EmitAOF), each freed once when dropped, in the context it was made in.
struct StringVector {
    ctx: *mut raw::RedisModuleCtx,
    strings: Vec<*mut raw::RedisModuleString>,
}

impl StringVector {
    /// # Safety
    /// `ctx` is null or a live context that outlives the vector.
    unsafe fn new<'a>(
        ctx: *mut raw::RedisModuleCtx,
        args: impl IntoIterator<Item = &'a [u8]>,
    ) -> StringVector {
        let strings = args
            .into_iter()
            // SAFETY: a null or live context (the caller's contract); Redis copies
            // `bytes.len()` bytes into a new string.
            .map(|bytes| unsafe {
                api!(RedisModule_CreateString)(ctx, bytes.as_ptr().cast(), bytes.len())
            })
            .collect();
        StringVector { ctx, strings }
    }

    fn as_ptr(&self) -> *const *mut raw::RedisModuleString {
        self.strings.as_ptr()
    }

    fn len(&self) -> usize {
        self.strings.len()
    }
}

impl Drop for StringVector {
    fn drop(&mut self) {
        for &string in &self.strings {
            // SAFETY: a string made in `ctx` (null or still live) by `new`, freed only here.
            unsafe { api!(RedisModule_FreeString)(self.ctx, string) };
        }
    }
}

/// An open key, closed on drop. A borrow of its value lives no longer than the handle, and a
/// mutable one excludes every other use of it, so the value cannot be replaced (and freed) while
/// borrowed.
pub struct Key<'a> {
    key: *mut raw::RedisModuleKey,
    command: &'a Command,
}

impl Key<'_> {
    /// True when the key does not exist.
    pub fn is_empty(&self) -> bool {
        // SAFETY: an open key handle.
        unsafe { api!(RedisModule_KeyType)(self.key) == raw::REDISMODULE_KEYTYPE_EMPTY as c_int }
    }

    /// The value as a pointer: Ok(None) for a missing key, WrongType for a key of another type.
    fn value_ptr<T: ModuleValue>(&self) -> Result<Option<*mut T>, CommandError> {
        // One call answers the common case (a key of our type); the key type is asked only
        // when it is not.
        // SAFETY: an open key handle (as below).
        if unsafe { api!(RedisModule_ModuleTypeGetType)(self.key) } == T::module_type() {
            // SAFETY: an open key handle.
            let value = unsafe { api!(RedisModule_ModuleTypeGetValue)(self.key) }.cast::<T>();
            return Ok((!value.is_null()).then_some(value));
        }
        if self.is_empty() {
            Ok(None)
        } else {
            Err(CommandError::WrongType)
        }
    }

    /// The value stored here, to read: Ok(None) for a missing key, WrongType for a key of any
    /// other type.
    pub fn value<T: ModuleValue>(&self) -> Result<Option<&T>, CommandError> {
        // SAFETY: a value of T's type is a live Box<T> (ModuleValue's contract), owned by the
        // keyspace; it is replaced or freed only through `&mut self` or after this handle
        // closes, so it outlives the shared borrow of the handle.
        Ok(self.value_ptr::<T>()?.map(|value| unsafe { &*value }))
    }

    /// The value stored here, to change: as [`value`](Self::value).
    pub fn value_mut<T: ModuleValue>(&mut self) -> Result<Option<&mut T>, CommandError> {
        // SAFETY: as in `value`; the exclusive borrow of the only handle (see Command::open_key)
        // makes this the only reference to the value.
        Ok(self.value_ptr::<T>()?.map(|value| unsafe { &mut *value }))
    }

    /// Stores `value` as the key's value (the key must have been opened writable).
    pub fn set_value<T: ModuleValue>(&mut self, value: Box<T>) {
        let ptr = Box::into_raw(value);
        // SAFETY: an open key handle, T's registered type and a Box<T> pointer, which Redis
        // owns from now on (and frees with the type's free callback).
        let status =
            unsafe { api!(RedisModule_ModuleTypeSetValue)(self.key, T::module_type(), ptr.cast()) };
        if status != OK {
            // SAFETY: not stored, so still ours: take it back so it is freed.
            drop(unsafe { Box::from_raw(ptr) });
        }
    }

    /// Tells Redis the value changed in place (WATCH, client-side caching).
    pub fn signal_modified(&self) {
        // SAFETY: a live context and key name argument.
        unsafe { api!(RedisModule_SignalModifiedKey)(self.command.ctx, self.command.raw_arg(1)) };
    }
}

impl Drop for Key<'_> {
    fn drop(&mut self) {
        // SAFETY: the handle is open and closed once, here.
        unsafe { api!(RedisModule_CloseKey)(self.key) };
        self.command.key_open.set(false);
    }
}

/// The server's clock, Unix milliseconds (0 for a clock before 1970).
pub fn now_ms() -> u64 {
    // SAFETY: Milliseconds has no arguments and only reads the clock.
    u64::try_from(unsafe { api!(RedisModule_Milliseconds)() }).unwrap_or(0)
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
        key_open: Cell::new(false),
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
    if let Some(log) = optional_api!(RedisModule_Log) {
        // SAFETY: a null or live context, NUL-terminated level and message, and a "%s" format
        // with exactly that one string argument.
        unsafe { log(ctx, level.as_ptr(), c"%s".as_ptr(), message.as_ptr()) };
    }
}

/// A buffer Redis allocated, freed on drop.
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
    /// The buffer's address and length (None when empty), for an owner that takes it over and
    /// then forgets this buffer (see [`super::alloc::keep_loaded_bits`]).
    pub fn block(&self) -> Option<(std::ptr::NonNull<u8>, usize)> {
        std::ptr::NonNull::new(self.ptr.cast::<u8>()).map(|block| (block, self.len))
    }

    pub fn bytes(&self) -> Option<&[u8]> {
        if self.ptr.is_null() {
            None
        } else {
            // SAFETY: Redis allocated `len` bytes at `ptr`, owned by this buffer until drop.
            Some(unsafe { std::slice::from_raw_parts(self.ptr.cast::<u8>(), self.len) })
        }
    }
}

impl Drop for RedisBuffer {
    fn drop(&mut self) {
        if !self.ptr.is_null() {
            // SAFETY: a buffer from Redis' allocator, freed once, here.
            unsafe { api!(RedisModule_Free)(self.ptr.cast::<c_void>()) };
        }
    }
}

/// One section of `INFO`, read through `RedisModule_GetServerInfo`, freed on drop.
pub struct ServerInfo {
    ctx: *mut raw::RedisModuleCtx,
    info: *mut raw::RedisModuleServerInfoData,
}

impl ServerInfo {
    /// The section `section` as `ctx` (may be null) sees it; None where the server cannot say.
    pub fn read(ctx: *mut raw::RedisModuleCtx, section: &CStr) -> Option<ServerInfo> {
        let (Some(get_info), Some(_), Some(_), Some(_)) = (
            optional_api!(RedisModule_GetServerInfo),
            optional_api!(RedisModule_ServerInfoGetFieldUnsigned),
            optional_api!(RedisModule_ServerInfoGetFieldC),
            optional_api!(RedisModule_FreeServerInfo),
        ) else {
            return None;
        };
        // SAFETY: a null or live context and a NUL-terminated section name.
        let info = unsafe { get_info(ctx, section.as_ptr()) };
        (!info.is_null()).then_some(ServerInfo { ctx, info })
    }

    /// An unsigned field, None when missing or not a number.
    pub fn unsigned(&self, name: &CStr) -> Option<u64> {
        let mut err: c_int = 0;
        // SAFETY: live info data and a NUL-terminated name.
        let value = unsafe {
            api!(RedisModule_ServerInfoGetFieldUnsigned)(self.info, name.as_ptr(), &mut err)
        };
        (err == 0).then_some(value)
    }

    /// A text field, None when missing.
    pub fn text(&self, name: &CStr) -> Option<String> {
        // SAFETY: live info data and a NUL-terminated name.
        let value = unsafe { api!(RedisModule_ServerInfoGetFieldC)(self.info, name.as_ptr()) };
        (!value.is_null()).then(|| {
            // SAFETY: a NUL-terminated string owned by the info data, copied before it is freed.
            unsafe { CStr::from_ptr(value) }
                .to_string_lossy()
                .into_owned()
        })
    }
}

impl Drop for ServerInfo {
    fn drop(&mut self) {
        // SAFETY: the data GetServerInfo returned for this context, freed once, here.
        unsafe { api!(RedisModule_FreeServerInfo)(self.ctx, self.info) };
    }
}

/// The RDB stream of one `rdb_load`/`rdb_save` call (or a RESTORE's, or an AOF rewrite's).
#[derive(Clone, Copy)]
pub struct Io<'a> {
    io: *mut raw::RedisModuleIO,
    call: PhantomData<&'a ()>,
}

impl Io<'_> {
    /// The stream Redis passed a type callback.
    ///
    /// # Safety
    /// `io` is the live stream Redis passed the running callback; the `Io` stays inside it.
    pub unsafe fn new(io: *mut raw::RedisModuleIO) -> Self {
        Io {
            io,
            call: PhantomData,
        }
    }

    pub fn save_buffer(&self, bytes: &[u8]) {
        // SAFETY: a live stream; Redis copies the bytes.
        unsafe { api!(RedisModule_SaveStringBuffer)(self.io, bytes.as_ptr().cast(), bytes.len()) };
    }

    /// The next string, None on a read error (a short or corrupt stream).
    pub fn load_buffer(&self) -> Option<RedisBuffer> {
        let mut len = 0usize;
        // SAFETY: a live stream; the buffer Redis returns (or null) is ours to free.
        let ptr = unsafe { api!(RedisModule_LoadStringBuffer)(self.io, &mut len) };
        let buffer = RedisBuffer { ptr, len };
        (!self.failed() && buffer.bytes().is_some()).then_some(buffer)
    }

    pub fn load_unsigned(&self) -> Option<u64> {
        // SAFETY: a live stream.
        let value = unsafe { api!(RedisModule_LoadUnsigned)(self.io) };
        (!self.failed()).then_some(value)
    }

    pub fn load_double(&self) -> Option<f64> {
        // SAFETY: a live stream.
        let value = unsafe { api!(RedisModule_LoadDouble)(self.io) };
        (!self.failed()).then_some(value)
    }

    /// True once a read failed (the module sets HANDLE_IO_ERRORS, so Redis reports instead of
    /// stopping).
    fn failed(&self) -> bool {
        // SAFETY: a live stream.
        unsafe { api!(RedisModule_IsIOError)(self.io) != 0 }
    }

    /// The stream's context (a context without a client on Redis 7.0).
    pub fn ctx(&self) -> *mut raw::RedisModuleCtx {
        // SAFETY: a live stream; the context lives as long as the stream.
        unsafe { api!(RedisModule_GetContextFromIO)(self.io) }
    }

    /// The name of the key being loaded (lossy), for messages.
    pub fn key_name(&self) -> String {
        // SAFETY: a live stream; the key name (or null) lives as long as the stream.
        string_text(unsafe { api!(RedisModule_GetKeyNameFromIO)(self.io) })
    }

    /// Writes `BF.RESERVE key` and `args` (a descriptor's, see `partition::descriptor_args`) to
    /// the AOF being rewritten.
    pub fn emit_reserve(&self, key: *mut raw::RedisModuleString, args: &[String]) {
        // SAFETY: no context: strings that are not auto-memory managed.
        let strings =
            unsafe { StringVector::new(std::ptr::null_mut(), args.iter().map(String::as_bytes)) };
        // SAFETY: a live AOF stream, the key Redis passed the callback, and the "sv" format
        // with one string and then a vector of `strings.len()` live strings (Redis takes a
        // reference to each for the call, Redis 7.0's module.c).
        unsafe {
            api!(RedisModule_EmitAOF)(
                self.io,
                c"BF.RESERVE".as_ptr(),
                c"sv".as_ptr(),
                key,
                strings.as_ptr(),
                strings.len(),
            );
        }
    }

    /// Writes `BF.LOADCHUNK key iterator data` to the AOF being rewritten.
    pub fn emit_loadchunk(&self, key: *mut raw::RedisModuleString, iterator: i64, data: &[u8]) {
        // SAFETY: a live AOF stream, the key Redis passed the callback, and the "slb" format
        // with exactly a string, a long long and a buffer with its length.
        unsafe {
            api!(RedisModule_EmitAOF)(
                self.io,
                c"BF.LOADCHUNK".as_ptr(),
                c"slb".as_ptr(),
                key,
                iterator as c_longlong,
                data.as_ptr(),
                data.len(),
            )
        };
    }
}

/// The digest being computed by one `digest` call (DEBUG DIGEST-VALUE).
pub struct Digest<'a> {
    md: *mut raw::RedisModuleDigest,
    call: PhantomData<&'a ()>,
}

impl Digest<'_> {
    /// # Safety
    /// `md` is the live digest Redis passed the running callback; the `Digest` stays inside it.
    pub unsafe fn new(md: *mut raw::RedisModuleDigest) -> Self {
        Digest {
            md,
            call: PhantomData,
        }
    }

    pub fn add(&self, bytes: &[u8]) {
        // SAFETY: a live digest; Redis reads `bytes.len()` bytes.
        unsafe {
            api!(RedisModule_DigestAddStringBuffer)(self.md, bytes.as_ptr().cast(), bytes.len())
        };
    }

    pub fn end_sequence(&self) {
        // SAFETY: a live digest.
        unsafe { api!(RedisModule_DigestEndSequence)(self.md) };
    }
}

/// The `INFO` section being written by the module's info callback.
pub struct InfoCtx<'a> {
    ctx: *mut raw::RedisModuleInfoCtx,
    call: PhantomData<&'a ()>,
}

impl InfoCtx<'_> {
    /// # Safety
    /// `ctx` is the live info context Redis passed the running callback.
    pub unsafe fn new(ctx: *mut raw::RedisModuleInfoCtx) -> Self {
        InfoCtx {
            ctx,
            call: PhantomData,
        }
    }

    /// Starts the module's section (`name` empty: named after the module).
    pub fn add_section(&self, name: &CStr) {
        // SAFETY: a live info context and a NUL-terminated name.
        unsafe { api!(RedisModule_InfoAddSection)(self.ctx, name.as_ptr()) };
    }

    pub fn add_field(&self, name: &CStr, value: u64) {
        // SAFETY: a live info context and a NUL-terminated name.
        unsafe { api!(RedisModule_InfoAddFieldULongLong)(self.ctx, name.as_ptr(), value) };
    }
}

/// Module start-up calls, valid in the load context (`RedisModule_OnLoad`'s) only.
pub struct LoadCtx(*mut raw::RedisModuleCtx);

impl LoadCtx {
    /// # Safety
    /// `ctx` is the context of the running `RedisModule_OnLoad`.
    pub unsafe fn new(ctx: *mut raw::RedisModuleCtx) -> Self {
        LoadCtx(ctx)
    }

    /// Registers the `INFO` callback of the module's section.
    pub fn register_info(&self, info: extern "C" fn(*mut raw::RedisModuleInfoCtx, c_int)) {
        // SAFETY: the load context and a callback that stays valid (a function).
        unsafe { api!(RedisModule_RegisterInfoFunc)(self.0, Some(info)) };
    }

    pub fn set_module_options(&self, options: c_int) {
        // SAFETY: the load context.
        unsafe { api!(RedisModule_SetModuleOptions)(self.0, options) };
    }

    /// Every module option bit the server knows, asked under Valkey's own API name
    /// (`ValkeyModule_GetModuleOptionsAll`): None on Redis, whose option bits are its own, and
    /// on a server without the call.
    pub fn valkey_module_options_all(&self) -> Option<c_int> {
        let get_api = optional_api!(RedisModule_GetApi)?;
        let mut function: *mut c_void = std::ptr::null_mut();
        // SAFETY: GetApi looks the name (NUL-terminated) up in the server's API table and, when
        // found, writes the function's address into the pointer-sized `function`.
        let status = unsafe {
            get_api(
                c"ValkeyModule_GetModuleOptionsAll".as_ptr(),
                (&mut function as *mut *mut c_void).cast(),
            )
        };
        if status != OK || function.is_null() {
            return None;
        }
        // SAFETY: the server's GetModuleOptionsAll is `int (*)(void)` (valkeymodule.h), and a
        // non-null function address from its API table.
        let options_all: extern "C" fn() -> c_int = unsafe { std::mem::transmute(function) };
        Some(options_all())
    }

    /// Registers a command; Err when Redis refuses it.
    pub fn create_command(
        &self,
        name: &CStr,
        entry: extern "C" fn(
            *mut raw::RedisModuleCtx,
            *mut *mut raw::RedisModuleString,
            c_int,
        ) -> c_int,
        flags: &CStr,
    ) -> Result<(), ()> {
        // SAFETY: the load context, NUL-terminated name and flags, a function entry point; the
        // key positions (1, 1, 1) match every command's grammar.
        let created = unsafe {
            api!(RedisModule_CreateCommand)(
                self.0,
                name.as_ptr(),
                Some(entry),
                flags.as_ptr(),
                1,
                1,
                1,
            )
        };
        if created == OK {
            Ok(())
        } else {
            Err(())
        }
    }

    /// Sets a registered command's docs; Err when the command is unknown or Redis refuses.
    ///
    /// # Safety
    /// Every pointer in `info` is null or valid for the call, and its arrays are terminated as
    /// the API requires.
    pub unsafe fn set_command_info(
        &self,
        name: &CStr,
        info: &raw::RedisModuleCommandInfo,
    ) -> Result<(), ()> {
        // SAFETY: the load context and a NUL-terminated name.
        let command = unsafe { api!(RedisModule_GetCommand)(self.0, name.as_ptr()) };
        // SAFETY: a command Redis returned, and `info` as the caller guarantees; Redis copies it.
        if !command.is_null() && unsafe { api!(RedisModule_SetCommandInfo)(command, info) } == OK {
            Ok(())
        } else {
            Err(())
        }
    }

    /// Adds the ACL category `category` and puts the commands `names` in it, where the server
    /// supports module categories (Redis 7.4+); Ok(false) where it does not.
    pub fn set_acl_category(&self, category: &CStr, names: &[&CStr]) -> Result<bool, String> {
        let (Some(add_category), Some(set_categories)) = (
            optional_api!(RedisModule_AddACLCategory),
            optional_api!(RedisModule_SetCommandACLCategories),
        ) else {
            return Ok(false);
        };
        // SAFETY: the load context and a NUL-terminated name.
        if unsafe { add_category(self.0, category.as_ptr()) } != OK {
            return Err(format!(
                "cannot add the ACL category {}",
                category.to_string_lossy()
            ));
        }
        for name in names {
            // SAFETY: the load context and a NUL-terminated name.
            let command = unsafe { api!(RedisModule_GetCommand)(self.0, name.as_ptr()) };
            // SAFETY: a command Redis returned and a NUL-terminated category list.
            if command.is_null() || unsafe { set_categories(command, category.as_ptr()) } != OK {
                return Err(format!(
                    "cannot put {} in the ACL category {}",
                    name.to_string_lossy(),
                    category.to_string_lossy()
                ));
            }
        }
        Ok(true)
    }

    /// Loads the registered module configs from the configuration file; Err with the reason.
    pub fn load_configs(&self) -> Result<(), &'static str> {
        let load = optional_api!(RedisModule_LoadConfigs)
            .ok_or("this server cannot load module configs")?;
        // SAFETY: the load context, after the configs were registered.
        if unsafe { load(self.0) } == OK {
            Ok(())
        } else {
            Err("invalid bf.* value in the configuration file")
        }
    }

    /// True when the server has Redis 8's APIs for configs (unprefixed names among them).
    pub fn has_unprefixed_configs(&self) -> bool {
        optional_api!(RedisModule_RegisterStringConfig).is_some()
            && optional_api!(RedisModule_LoadDefaultConfigs).is_some()
    }

    /// Registers a string config whose value lives in this module: `get` and `set` are called
    /// with `privdata`. Err when the server refuses it.
    pub fn register_string_config(
        &self,
        name: &CStr,
        default: &CStr,
        flags: u32,
        callbacks: StringConfigCallbacks,
        privdata: usize,
    ) -> Result<(), ()> {
        let register = optional_api!(RedisModule_RegisterStringConfig).ok_or(())?;
        // SAFETY: the load context, NUL-terminated name and default, functions as callbacks,
        // and a privdata that is an integer tag, never dereferenced.
        let registered = unsafe {
            register(
                self.0,
                name.as_ptr(),
                default.as_ptr(),
                flags,
                Some(callbacks.get),
                Some(callbacks.set),
                None,
                privdata as *mut c_void,
            )
        };
        if registered == OK {
            Ok(())
        } else {
            Err(())
        }
    }
}

/// The getter and setter of a string config, as Redis calls them.
pub struct StringConfigCallbacks {
    pub get: unsafe extern "C" fn(*const c_char, *mut c_void) -> *mut raw::RedisModuleString,
    pub set: unsafe extern "C" fn(
        *const c_char,
        *mut raw::RedisModuleString,
        *mut c_void,
        *mut *mut raw::RedisModuleString,
    ) -> c_int,
}

/// What a string config's setter does with the value Redis passes it: the text of `value`
/// (may be null: empty), and the reason of a refusal stored where Redis reads it.
pub fn string_config_set<E: AsRef<str>>(
    value: *mut raw::RedisModuleString,
    err: *mut *mut raw::RedisModuleString,
    set: impl FnOnce(&[u8]) -> Result<(), E>,
) -> c_int {
    // SAFETY: the value Redis passed the running setter, alive during the call.
    match set(unsafe { string_bytes(value) }) {
        Ok(()) => OK,
        Err(reason) => {
            let reason = reason.as_ref();
            if !err.is_null() {
                // SAFETY: Redis passes a writable slot and takes the string it finds there.
                unsafe {
                    *err = api!(RedisModule_CreateString)(
                        std::ptr::null_mut(),
                        reason.as_ptr().cast(),
                        reason.len(),
                    )
                };
            }
            raw::REDISMODULE_ERR as c_int
        }
    }
}

/// The string a config getter returned last. Redis copies the string a getter returns but never
/// frees it, so each getter keeps its last one here and frees it at its next call: one string per
/// config stays allocated, instead of one per CONFIG GET.
pub struct ConfigReply(AtomicPtr<raw::RedisModuleString>);

impl ConfigReply {
    pub const fn new() -> ConfigReply {
        ConfigReply(AtomicPtr::new(std::ptr::null_mut()))
    }

    /// A string of `text` for Redis to copy, replacing (and freeing) the previous one.
    pub fn hand_out(&self, text: &str) -> *mut raw::RedisModuleString {
        // SAFETY: no context (a string Redis does not free automatically); Redis copies
        // `text.len()` bytes.
        let string = unsafe {
            api!(RedisModule_CreateString)(std::ptr::null_mut(), text.as_ptr().cast(), text.len())
        };
        let previous = self.0.swap(string, Ordering::Relaxed);
        if !previous.is_null() {
            // SAFETY: a string created above at an earlier call, which Redis copied and no
            // longer reads (config getters run on the main thread, one at a time).
            unsafe { api!(RedisModule_FreeString)(std::ptr::null_mut(), previous) };
        }
        string
    }
}
