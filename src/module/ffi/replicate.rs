//! What a command call sends on: replication to replicas and the AOF, and keyspace events.

use std::ffi::{c_int, CStr, CString};

use redis_module::raw;

use super::strings::StringVector;
use super::Command;

impl Command {
    /// Replicates this call as it was received.
    #[inline]
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
    #[inline(always)]
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
