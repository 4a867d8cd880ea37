//! How much memory a new filter may take: what `maxmemory` leaves, and what the machine has.

use std::ffi::c_int;

use redis_module::raw;

use super::ffi::api;

/// Allocations below this are left to Redis' own check: a deny-oom command is refused once
/// `used_memory` is over `maxmemory`. Reading the figures costs more than such a filter.
pub const SMALL_ALLOCATION: u64 = 1 << 20;

/// Bytes a new allocation may take: the least of what maxmemory leaves and what the kernel
/// reports available. The second matters because a filter's bits are zeroed (touched) when
/// allocated on Redis 7.0: a block bigger than the machine would be killed, not refused.
/// Reads INFO and /proc: call it before a big allocation, not per item.
pub fn headroom(ctx: *mut raw::RedisModuleCtx) -> u64 {
    maxmemory_headroom(ctx).min(available_physical_memory())
}

/// Bytes the server may still allocate under `maxmemory` (u64::MAX when maxmemory is off).
fn maxmemory_headroom(ctx: *mut raw::RedisModuleCtx) -> u64 {
    let info = unsafe { api!(RedisModule_GetServerInfo)(ctx, c"memory".as_ptr()) };
    if info.is_null() {
        return u64::MAX;
    }
    let field = |name: &std::ffi::CStr| {
        let mut err: c_int = 0;
        let value =
            unsafe { api!(RedisModule_ServerInfoGetFieldUnsigned)(info, name.as_ptr(), &mut err) };
        (err == 0).then_some(value)
    };
    let (maxmemory, used) = (field(c"maxmemory"), field(c"used_memory"));
    unsafe { api!(RedisModule_FreeServerInfo)(ctx, info) };
    match (maxmemory, used) {
        (Some(max), Some(used)) if max > 0 => max.saturating_sub(used),
        _ => u64::MAX,
    }
}

/// MemAvailable plus free swap from /proc/meminfo, or u64::MAX where it cannot be read.
fn available_physical_memory() -> u64 {
    let Ok(meminfo) = std::fs::read_to_string("/proc/meminfo") else {
        return u64::MAX;
    };
    let field = |name: &str| {
        meminfo
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| {
                rest.trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse::<u64>()
                    .ok()
            })
            .map(|kib| kib.saturating_mul(1024))
    };
    match field("MemAvailable:") {
        Some(available) => available.saturating_add(field("SwapFree:").unwrap_or(0)),
        None => u64::MAX,
    }
}
