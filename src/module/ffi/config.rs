//! String configs: the callbacks' shapes, the setter's reply and the getter's strings.

use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicPtr, Ordering};

use redis_module::raw;

use super::strings::string_bytes;
use super::{guard, OK};

/// A string config whose value lives in this module. `privdata` is the integer tag it was
/// registered with.
pub trait StringConfig {
    /// What a getter call is called in the log, should it fail.
    const GET: &'static str;
    /// What a setter call is called in the log, should it fail.
    const SET: &'static str;
    /// The value's text, handed out through a [`ConfigReply`]; null when there is none.
    fn get(privdata: usize) -> *mut raw::RedisModuleString;
    /// Validates and stores `text`; Err with the reason of a refusal.
    fn set(privdata: usize, text: &[u8]) -> Result<(), String>;
}

/// The getter Redis calls for `C`.
pub(super) extern "C" fn config_get<C: StringConfig>(
    _name: *const c_char,
    privdata: *mut c_void,
) -> *mut raw::RedisModuleString {
    guard(C::GET, std::ptr::null_mut(), || C::get(privdata as usize))
}

/// The setter Redis calls for `C`.
pub(super) extern "C" fn config_set<C: StringConfig>(
    _name: *const c_char,
    value: *mut raw::RedisModuleString,
    privdata: *mut c_void,
    err: *mut *mut raw::RedisModuleString,
) -> c_int {
    guard(C::SET, raw::REDISMODULE_ERR as c_int, || {
        string_config_set(value, err, |text| C::set(privdata as usize, text))
    })
}

/// What a string config's setter does with the value Redis passes it: the text of `value`
/// (may be null: empty), and the reason of a refusal stored where Redis reads it.
fn string_config_set<E: AsRef<str>>(
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
