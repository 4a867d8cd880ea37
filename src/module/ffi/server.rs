//! The server's INFO: sections read from it, and the module's own section written into it.

use std::ffi::{c_int, CStr};
use std::marker::PhantomData;

use redis_module::raw;

use super::guard;

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

/// The `INFO` section being written by the module's info callback.
pub struct InfoCtx<'a> {
    ctx: *mut raw::RedisModuleInfoCtx,
    call: PhantomData<&'a ()>,
}

/// A module's `INFO` section, written by the callback registered with
/// [`LoadCtx::register_info`](super::LoadCtx::register_info).
pub trait InfoSection {
    fn write(info: &InfoCtx);
}

/// The info callback Redis calls: the section `S` writes.
pub(super) extern "C" fn info_callback<S: InfoSection>(
    ctx: *mut raw::RedisModuleInfoCtx,
    _for_crash_report: c_int,
) {
    guard("INFO", (), || {
        // SAFETY: the info context Redis passed this callback.
        S::write(&unsafe { InfoCtx::new(ctx) });
    })
}

impl InfoCtx<'_> {
    /// # Safety
    /// `ctx` is the live info context Redis passed the running callback.
    unsafe fn new(ctx: *mut raw::RedisModuleInfoCtx) -> Self {
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
