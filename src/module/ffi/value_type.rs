//! A Rust type registered as a Redis module type: the type callbacks Redis calls, each a thin
//! shell around the type's safe [`ModuleValue`] methods.
//!
//! The invariant every cast below rests on: each value Redis holds under a [`ValueType<T>`] is a
//! `Box<T>` turned into a pointer. Values of the type enter the keyspace only through
//! [`Key::set_value`](super::Key::set_value) (with `T::value_type()`), `rdb_load::<T>` and
//! `copy::<T>`, all of which store a `Box<T>`; Redis frees each once, through `free::<T>`.
//!
//! A Rust type may be registered under a second name, its *alias* (rustbloom's values under
//! valkey-bloom's `bloomfltr` beside RedisBloom's `MBbloom--`): the same `Box<T>` values, the
//! callbacks told which registration they serve ([`Registration`]), so that each type's keys
//! are saved in that type's own encoding.

use std::ffi::{c_int, c_void};
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::ptr::null_mut;

use redis_module::native_types::RedisType;
use redis_module::raw;

use super::{guard, DefragCtx, Digest, Io};

/// Which of a value type's two registrations a callback serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Registration {
    /// The type new values get ([`ModuleValue::value_type`]).
    Own,
    /// The second name ([`ModuleValue::alias_type`]).
    Alias,
}

/// A Rust type stored as the values of a Redis module type, and what its type callbacks do.
pub trait ModuleValue: Sized + 'static {
    /// The registered type new values get.
    fn value_type() -> &'static ValueType<Self>;
    /// A second registered type whose values are also `Self`, if any.
    fn alias_type() -> Option<&'static ValueType<Self>> {
        None
    }
    /// Writes the value to an RDB stream (also DUMP, MIGRATE, full sync).
    fn rdb_save(&self, rdb: Io, registration: Registration);
    /// Reads a value of encoding `encver`; None refuses the payload (logged by the type).
    fn rdb_load(rdb: Io, encver: c_int, registration: Registration) -> Option<Self>;
    /// Writes the commands that rebuild the value at `key` to the AOF being rewritten.
    fn aof_rewrite(&self, aof: Io, key: *mut raw::RedisModuleString, registration: Registration);
    /// MEMORY USAGE, in bytes.
    fn mem_usage(&self) -> usize;
    /// DEBUG DIGEST-VALUE.
    fn digest(&self, md: Digest);
    /// The value leaves the keyspace.
    fn free(self);
    /// Redis' lazy-free effort units.
    fn free_effort(&self) -> usize;
    /// COPY of the key `from`; None refuses it (Redis answers the client an error).
    fn copy(&self, from: *mut raw::RedisModuleString) -> Option<Self>;
    /// Active defrag: offers the value's blocks, its own box included, to the server from
    /// position `from` of its walk (0 at first); the position to resume from when `defrag` said
    /// to stop, None when done.
    fn defrag(value: &mut Box<Self>, defrag: &DefragCtx, from: u64) -> Option<u64>;
}

/// A module type whose values are `Box<T>`.
pub struct ValueType<T> {
    redis_type: RedisType,
    values: PhantomData<fn() -> T>,
}

impl<T: ModuleValue> ValueType<T> {
    pub const fn new(name: &'static str, encoding_version: i32) -> Self {
        ValueType {
            redis_type: RedisType::new(name, encoding_version, methods::<T, false>()),
            values: PhantomData,
        }
    }

    /// The registration of `T`'s alias type (see [`ModuleValue::alias_type`]).
    pub const fn new_alias(name: &'static str, encoding_version: i32) -> Self {
        ValueType {
            redis_type: RedisType::new(name, encoding_version, methods::<T, true>()),
            values: PhantomData,
        }
    }

    /// Registers the type (at module load, from `redis_module!`'s `data_types`).
    pub fn create_data_type(&self, ctx: *mut raw::RedisModuleCtx) -> Result<(), &str> {
        self.redis_type.create_data_type(ctx)
    }

    /// The type Redis registered (null before registration). Read on every call that opens a
    /// key, so without the RefCell's borrow check.
    #[inline]
    pub(super) fn raw(&self) -> *mut raw::RedisModuleType {
        // SAFETY: the cell is written once, by `create_data_type` while the module loads, before
        // any command or type callback runs, and never borrowed mutably again: no write overlaps
        // this read.
        unsafe { *self.redis_type.raw_type.as_ptr() }
    }
}

const fn registration(alias: bool) -> Registration {
    if alias {
        Registration::Alias
    } else {
        Registration::Own
    }
}

const fn methods<T: ModuleValue, const ALIAS: bool>() -> raw::RedisModuleTypeMethods {
    raw::RedisModuleTypeMethods {
        version: 3,
        rdb_load: Some(rdb_load::<T, ALIAS>),
        rdb_save: Some(rdb_save::<T, ALIAS>),
        aof_rewrite: Some(aof_rewrite::<T, ALIAS>),
        mem_usage: Some(mem_usage::<T>),
        digest: Some(digest::<T>),
        free: Some(free::<T>),
        aux_load: None,
        aux_save: None,
        aux_save_triggers: 0,
        free_effort: Some(free_effort::<T>),
        unlink: None,
        copy: Some(copy::<T>),
        defrag: Some(defrag::<T>),
        mem_usage2: None,
        free_effort2: None,
        unlink2: None,
        copy2: None,
        aux_save2: None,
    }
}

/// The value Redis passes a callback of `T`'s type.
///
/// # Safety
/// `value` is a value of `T`'s type (a `Box<T>`, the module's invariant), alive and unchanged
/// for `'a`: Redis does not change or free a value during a callback given it.
unsafe fn value_ref<'a, T>(value: *const c_void) -> &'a T {
    // SAFETY: the caller's contract.
    unsafe { &*value.cast::<T>() }
}

/// A value handed to Redis, which owns it from then on.
fn into_redis<T>(value: Option<T>) -> *mut c_void {
    value.map_or(null_mut(), |value| Box::into_raw(Box::new(value)).cast())
}

extern "C" fn rdb_save<T: ModuleValue, const ALIAS: bool>(
    rdb: *mut raw::RedisModuleIO,
    value: *mut c_void,
) {
    guard("rdb_save", (), || {
        // SAFETY: the stream and the value Redis passed this callback.
        let (rdb, value) = unsafe { (Io::new(rdb), value_ref::<T>(value)) };
        value.rdb_save(rdb, registration(ALIAS));
    })
}

extern "C" fn rdb_load<T: ModuleValue, const ALIAS: bool>(
    rdb: *mut raw::RedisModuleIO,
    encver: c_int,
) -> *mut c_void {
    guard("rdb_load", null_mut(), || {
        // SAFETY: the stream Redis passed this callback.
        let rdb = unsafe { Io::new(rdb) };
        into_redis(T::rdb_load(rdb, encver, registration(ALIAS)))
    })
}

extern "C" fn aof_rewrite<T: ModuleValue, const ALIAS: bool>(
    aof: *mut raw::RedisModuleIO,
    key: *mut raw::RedisModuleString,
    value: *mut c_void,
) {
    guard("aof_rewrite", (), || {
        // SAFETY: the stream and the value Redis passed this callback.
        let (aof, value) = unsafe { (Io::new(aof), value_ref::<T>(value)) };
        value.aof_rewrite(aof, key, registration(ALIAS));
    })
}

extern "C" fn mem_usage<T: ModuleValue>(value: *const c_void) -> usize {
    guard("mem_usage", 0, || {
        // SAFETY: the value Redis passed this callback.
        unsafe { value_ref::<T>(value) }.mem_usage()
    })
}

extern "C" fn digest<T: ModuleValue>(md: *mut raw::RedisModuleDigest, value: *mut c_void) {
    guard("digest", (), || {
        // SAFETY: the digest and the value Redis passed this callback.
        let (md, value) = unsafe { (Digest::new(md), value_ref::<T>(value)) };
        value.digest(md);
    })
}

extern "C" fn free<T: ModuleValue>(value: *mut c_void) {
    guard("free", (), || {
        if !value.is_null() {
            // SAFETY: Redis frees each value of this type once, through this callback, and the
            // value is a Box<T> (the module's invariant).
            unsafe { Box::from_raw(value.cast::<T>()) }.free();
        }
    })
}

extern "C" fn free_effort<T: ModuleValue>(
    _key: *mut raw::RedisModuleString,
    value: *const c_void,
) -> usize {
    guard("free_effort", 1, || {
        // SAFETY: the value Redis passed this callback.
        unsafe { value_ref::<T>(value) }.free_effort()
    })
}

extern "C" fn copy<T: ModuleValue>(
    from: *mut raw::RedisModuleString,
    _to: *mut raw::RedisModuleString,
    value: *const c_void,
) -> *mut c_void {
    guard("copy", null_mut(), || {
        // SAFETY: the value Redis passed this callback.
        into_redis(unsafe { value_ref::<T>(value) }.copy(from))
    })
}

/// A value Redis holds, lent as the `Box` it is to a callback that may move it: its address is
/// put back in Redis' slot when this is dropped, after a panic too, so Redis never keeps the
/// address of a block that moved.
struct Lent<'a, T> {
    slot: &'a mut *mut T,
    value: ManuallyDrop<Box<T>>,
}

impl<T> Drop for Lent<'_, T> {
    fn drop(&mut self) {
        // SAFETY: taken once, here, and never used again.
        let value = unsafe { ManuallyDrop::take(&mut self.value) };
        *self.slot = Box::into_raw(value);
    }
}

/// Returns nonzero when more work remains, its position saved in the context's cursor (a call
/// without a cursor never stops: the context's deadline applies only where there is one).
extern "C" fn defrag<T: ModuleValue>(
    ctx: *mut raw::RedisModuleDefragCtx,
    _key: *mut raw::RedisModuleString,
    value: *mut *mut c_void,
) -> c_int {
    guard("defrag", 0, || {
        // SAFETY: the defrag context Redis passed this callback.
        let defrag = unsafe { DefragCtx::new(ctx) };
        // SAFETY: Redis passes the address of its slot holding the value, which it does not
        // touch during the callback.
        let slot = unsafe { &mut *value.cast::<*mut T>() };
        if slot.is_null() {
            return 0;
        }
        // SAFETY: the slot holds a value of T's type, a Box<T> (the module's invariant), lent
        // for the call and put back by `Lent`'s drop.
        let value = unsafe { Box::from_raw(*slot) };
        let mut lent = Lent {
            slot,
            value: ManuallyDrop::new(value),
        };
        let from = defrag.cursor().unwrap_or(0);
        match T::defrag(&mut lent.value, &defrag, from) {
            Some(next) if defrag.set_cursor(next) => 1,
            _ => 0,
        }
    })
}
