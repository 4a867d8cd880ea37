//! Active defrag: the context Redis hands a type's defrag callback, and whether the server can
//! defrag at all.
//!
//! Redis (7.0+) and Valkey call the callback for each key of the type while `activedefrag` runs.
//! A value whose free effort is at most `active-defrag-max-scan-fields` (1000 by default) is done
//! in one call with no time limit and no cursor; a bigger one is called again and again with a
//! deadline (`RedisModule_DefragShouldStop`) and a cursor to resume from, until the callback
//! says it is done.

use std::ffi::CStr;
use std::marker::PhantomData;
use std::ptr::NonNull;

use redis_module::raw;

use super::ServerInfo;

/// The defrag context of one callback.
pub struct DefragCtx<'a> {
    ctx: *mut raw::RedisModuleDefragCtx,
    call: PhantomData<&'a ()>,
}

impl DefragCtx<'_> {
    /// # Safety
    /// `ctx` is the live context Redis passed the running defrag callback.
    pub(super) unsafe fn new(ctx: *mut raw::RedisModuleDefragCtx) -> Self {
        DefragCtx {
            ctx,
            call: PhantomData,
        }
    }

    /// True when the callback's time is up (never in a call without a deadline).
    pub fn should_stop(&self) -> bool {
        optional_api!(RedisModule_DefragShouldStop)
            // SAFETY: the live context of this callback.
            .is_some_and(|should_stop| unsafe { should_stop(self.ctx) } != 0)
    }

    /// Where a stepped walk stopped last time; None in a call without a cursor (or a server
    /// without the call).
    pub fn cursor(&self) -> Option<u64> {
        let get = optional_api!(RedisModule_DefragCursorGet)?;
        let mut cursor: std::ffi::c_ulong = 0;
        // SAFETY: the live context of this callback and a place for the cursor.
        let status = unsafe { get(self.ctx, &mut cursor) };
        // A c_ulong: 64 bits on the LP64 systems Redis runs on, never more.
        (status == super::OK).then_some(cursor as u64)
    }

    /// Saves where to resume; false in a call without a cursor (the walk must then finish).
    pub fn set_cursor(&self, cursor: u64) -> bool {
        let (Some(set), Ok(cursor)) = (
            optional_api!(RedisModule_DefragCursorSet),
            std::ffi::c_ulong::try_from(cursor),
        ) else {
            return false;
        };
        // SAFETY: the live context of this callback.
        unsafe { set(self.ctx, cursor) == super::OK }
    }

    /// Asks the server to move `block`: its new address when it did (the old one is then
    /// freed), None when moving it would not help (or the server lacks the call).
    ///
    /// # Safety
    /// `block` is the address the server's allocator returned for a live block the caller owns,
    /// which the caller no longer uses once this returns Some.
    pub unsafe fn move_block(&self, block: NonNull<u8>) -> Option<NonNull<u8>> {
        let defrag_alloc = optional_api!(RedisModule_DefragAlloc)?;
        // SAFETY: the live context of this callback and a block of the server's allocator (the
        // caller's contract).
        NonNull::new(unsafe { defrag_alloc(self.ctx, block.as_ptr().cast()) }.cast())
    }
}

/// Why the server behind `ctx` can never run the defrag callback, for the log; None when it can.
///
/// Redis defrags only on its own jemalloc, patched with `je_get_defrag_hint` (Debian's
/// redis-server links the system's jemalloc and refuses `activedefrag yes`); Valkey (8.1+) asks
/// any jemalloc from 5.2.1 through its `experimental.utilization` queries; neither can with the
/// C library's malloc.
pub fn defrag_unavailable(ctx: *mut raw::RedisModuleCtx) -> Option<String> {
    let allocator = ServerInfo::read(ctx, c"memory")?.text(c"mem_allocator")?;
    if !allocator.starts_with("jemalloc") {
        return Some(format!(
            "rustbloom: the server allocates with {allocator}: active defrag cannot run, and \
             filters are never defragmented"
        ));
    }
    let valkey = ServerInfo::read(ctx, c"server")
        .and_then(|server| server.text(c"server_name"))
        .is_some_and(|name| name == "valkey");
    if valkey || server_symbol(c"je_get_defrag_hint") {
        return None;
    }
    Some(String::from(
        "rustbloom: the server's jemalloc lacks the defrag hint of the one Redis ships (a \
         distribution build): active defrag cannot run, and filters are never defragmented",
    ))
}

/// True when the running process exports the symbol `name`.
fn server_symbol(name: &CStr) -> bool {
    // SAFETY: dlsym with RTLD_DEFAULT looks a NUL-terminated name up in the loaded objects and
    // only returns an address, which is not used.
    !unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) }.is_null()
}
