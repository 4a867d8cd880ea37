//! Module start-up: options, commands and their docs, ACL categories, configs.

use std::ffi::{c_int, c_void, CStr};

use redis_module::raw;

use super::{StringConfigCallbacks, OK};

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
