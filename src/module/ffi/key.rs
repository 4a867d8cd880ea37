//! Keys opened by a command call and the module values they hold.

use std::ffi::c_int;

use redis_module::raw;

use super::{Command, ModuleValue, ValueType, OK};
use crate::module::errors::CommandError;

/// An open key, closed on drop. A borrow of its value lives no longer than the handle, and a
/// mutable one excludes every other use of it, so the value cannot be replaced (and freed) while
/// borrowed.
pub struct Key<'a> {
    pub(super) key: *mut raw::RedisModuleKey,
    pub(super) command: &'a Command,
    /// This is the handle of argument 1, whose opening [`Command::open_key`] guards.
    pub(super) guarded: bool,
}

impl Key<'_> {
    /// True when the key does not exist.
    pub fn is_empty(&self) -> bool {
        // SAFETY: an open key handle.
        unsafe {
            hot_api!(RedisModule_KeyType)(self.key) == raw::REDISMODULE_KEYTYPE_EMPTY as c_int
        }
    }

    /// The value as a pointer: Ok(None) for a missing key, WrongType for a key of another type.
    #[inline]
    fn value_ptr<T: ModuleValue>(&self) -> Result<Option<*mut T>, CommandError> {
        // One call answers the common case (a key of our type); the key type is asked only
        // when it is not.
        // SAFETY: an open key handle (as below).
        if unsafe { hot_api!(RedisModule_ModuleTypeGetType)(self.key) } == T::value_type().raw() {
            // SAFETY: an open key handle.
            let value = unsafe { hot_api!(RedisModule_ModuleTypeGetValue)(self.key) }.cast::<T>();
            return Ok((!value.is_null()).then_some(value));
        }
        if let Some(alias) = T::alias_type() {
            // SAFETY: an open key handle.
            if unsafe { hot_api!(RedisModule_ModuleTypeGetType)(self.key) } == alias.raw() {
                // SAFETY: an open key handle.
                let value =
                    unsafe { hot_api!(RedisModule_ModuleTypeGetValue)(self.key) }.cast::<T>();
                return Ok((!value.is_null()).then_some(value));
            }
        }
        if self.is_empty() {
            Ok(None)
        } else {
            Err(CommandError::WrongType)
        }
    }

    /// The value stored here, to read: Ok(None) for a missing key, WrongType for a key of any
    /// other type.
    #[inline]
    pub fn value<T: ModuleValue>(&self) -> Result<Option<&T>, CommandError> {
        // SAFETY: a value of T's type is a live Box<T> (the invariant of `ValueType`), owned by the
        // keyspace; it is replaced or freed only through `&mut self` or after this handle
        // closes, so it outlives the shared borrow of the handle.
        Ok(self.value_ptr::<T>()?.map(|value| unsafe { &*value }))
    }

    /// The value stored here, to change: as [`value`](Self::value).
    #[inline]
    pub fn value_mut<T: ModuleValue>(&mut self) -> Result<Option<&mut T>, CommandError> {
        // SAFETY: as in `value`; the exclusive borrow of the only handle (see Command::open_key)
        // makes this the only reference to the value.
        Ok(self.value_ptr::<T>()?.map(|value| unsafe { &mut *value }))
    }

    /// Stores `value` as the key's value (the key must have been opened writable).
    pub fn set_value<T: ModuleValue>(&mut self, value: Box<T>) {
        self.set_value_as(value, T::value_type());
    }

    /// Stores `value` as the key's value under `value_type`, one of T's registrations.
    pub fn set_value_as<T: ModuleValue>(&mut self, value: Box<T>, value_type: &ValueType<T>) {
        let ptr = Box::into_raw(value);
        // SAFETY: an open key handle, one of T's registered types and a Box<T> pointer, which
        // Redis owns from now on (and frees with the type's free callback).
        let status =
            unsafe { api!(RedisModule_ModuleTypeSetValue)(self.key, value_type.raw(), ptr.cast()) };
        if status != OK {
            // SAFETY: not stored, so still ours: take it back so it is freed.
            drop(unsafe { Box::from_raw(ptr) });
        }
    }

    /// Tells Redis the value changed in place (WATCH, client-side caching).
    #[inline(always)]
    pub fn signal_modified(&self) {
        // SAFETY: a live context and key name argument.
        unsafe {
            hot_api!(RedisModule_SignalModifiedKey)(self.command.ctx, self.command.raw_arg(1))
        };
    }
}

impl Drop for Key<'_> {
    fn drop(&mut self) {
        // SAFETY: the handle is open and closed once, here.
        unsafe { hot_api!(RedisModule_CloseKey)(self.key) };
        if self.guarded {
            self.command.key_open.set(false);
        }
    }
}
