//! Module start-up: options, commands and their docs, ACL categories, configs.

use std::ffi::{c_int, c_void, CStr};
use std::marker::PhantomData;

use redis_module::{raw, Context};

use super::config::{config_get, config_set};
use super::server::info_callback;
use super::{InfoSection, StringConfig, OK};

/// Module start-up calls, made in the context of `RedisModule_OnLoad` (the server refuses the
/// registrations in any other context) and borrowed from it.
pub struct LoadCtx<'a>(*mut raw::RedisModuleCtx, PhantomData<&'a Context>);

impl LoadCtx<'_> {
    /// The calls of module start-up, in the live context of `RedisModule_OnLoad`.
    pub fn new(ctx: &Context) -> LoadCtx<'_> {
        LoadCtx(ctx.get_raw(), PhantomData)
    }

    /// The raw context, for calls that take a null or live one (logging, flags).
    pub fn raw(&self) -> *mut raw::RedisModuleCtx {
        self.0
    }

    /// Registers the callback that writes the module's `INFO` section, `S`.
    pub fn register_info<S: InfoSection>(&self) {
        // SAFETY: a live context and a callback that stays valid (a function).
        unsafe { api!(RedisModule_RegisterInfoFunc)(self.0, Some(info_callback::<S>)) };
    }

    pub fn set_module_options(&self, options: c_int) {
        // SAFETY: a live context.
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
        last_key: c_int,
    ) -> Result<(), ()> {
        // The key positions for servers without key specs (before 7.0): from argument 1 to
        // `last_key` (-1: up to the last argument).
        // SAFETY: a live context, NUL-terminated name and flags, a function entry point, and
        // key positions that match the command's grammar.
        let created = unsafe {
            api!(RedisModule_CreateCommand)(
                self.0,
                name.as_ptr(),
                Some(entry),
                flags.as_ptr(),
                1,
                last_key,
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
    pub(super) unsafe fn set_command_info(
        &self,
        name: &CStr,
        info: &raw::RedisModuleCommandInfo,
    ) -> Result<(), ()> {
        // SAFETY: a live context and a NUL-terminated name.
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
        // SAFETY: a live context and a NUL-terminated name.
        if unsafe { add_category(self.0, category.as_ptr()) } != OK {
            return Err(format!(
                "cannot add the ACL category {}",
                category.to_string_lossy()
            ));
        }
        for name in names {
            // SAFETY: a live context and a NUL-terminated name.
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
        // SAFETY: a live context, after the configs were registered.
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

    /// Registers a string config whose value lives in this module: `C`'s getter and setter are
    /// called with `privdata`. Err when the server refuses it.
    pub fn register_string_config<C: StringConfig>(
        &self,
        name: &CStr,
        default: &CStr,
        flags: u32,
        privdata: usize,
    ) -> Result<(), ()> {
        let register = optional_api!(RedisModule_RegisterStringConfig).ok_or(())?;
        // SAFETY: a live context, NUL-terminated name and default, functions as callbacks,
        // and a privdata that is an integer tag, never dereferenced.
        let registered = unsafe {
            register(
                self.0,
                name.as_ptr(),
                default.as_ptr(),
                flags,
                Some(config_get::<C>),
                Some(config_set::<C>),
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
