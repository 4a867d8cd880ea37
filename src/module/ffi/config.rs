//! String configs: the callbacks' shapes, the setter's reply and the getter's strings.

use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicPtr, Ordering};

use redis_module::raw;

use super::strings::string_bytes;
use super::OK;

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
