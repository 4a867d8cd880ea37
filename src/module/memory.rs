//! The server's side of the memory budget: what one command may allocate under the per-filter
//! cap, `maxmemory`, and the machine's memory.

use std::cell::Cell;

use redis_module::raw;
use rustbloom_core::budget::LimitError;
use rustbloom_core::budget::{self, Allocator};
use rustbloom_core::MemoryBudget;

use super::alloc;
use super::config;
use super::errors::Replayable;
use super::ffi::{self, ServerInfo};
use super::personality;
use super::stats;

/// Below this many bytes in one command the figures are not read: Redis' own check (a deny-oom
/// command is refused once `used_memory` is over `maxmemory`) covers such allocations, and
/// reading INFO and /proc costs more than they do (~70 µs for INFO memory, 7x a BF.RESERVE).
/// Redis checks a script or a transaction only once, before it starts, so inside one (context
/// flags LUA, MULTI) the module repeats that check itself, per allocation, when maxmemory is set.
const SMALL_ALLOCATION: u64 = 1 << 20;

/// The budget of one command (or one RESTORE, COPY or chunk load), charged for everything it
/// allocates: a command that grows a filter by several layers is checked against their sum.
///
/// Work the primary already admitted (its replication stream, the AOF, loading the dataset) is
/// never refused by policy; if the allocation itself fails the server stops (see
/// [`super::ffi::stop_server`]) rather than serve less than its primary accepted. A client's
/// command gets the per-filter cap and the server's room ([`ServerRoom`]).
///
/// Everything is read when first needed: most adds allocate nothing, and reading the context
/// flags alone (`RedisModule_GetContextFlags`, which computes the maxmemory state) was ~45 ns of
/// BF.ADD's ~0.7 µs.
pub struct CommandBudget {
    ctx: *mut raw::RedisModuleCtx,
    replayed: Cell<Option<bool>>,
    max_filter_bytes: Option<u64>,
    room: Option<ServerRoom>,
    charged: u64,
}

impl CommandBudget {
    /// The budget for a call in `ctx` (may be null, e.g. in COPY), replayed or from a client.
    pub fn new(ctx: *mut raw::RedisModuleCtx, replayed: bool) -> CommandBudget {
        let budget = CommandBudget::for_command(ctx);
        budget.replayed.set(Some(replayed));
        budget
    }

    /// The budget for a command called in `ctx` (not null): replayed or not by its context flags.
    pub fn for_command(ctx: *mut raw::RedisModuleCtx) -> CommandBudget {
        CommandBudget {
            ctx,
            replayed: Cell::new(None),
            max_filter_bytes: None,
            room: None,
            charged: 0,
        }
    }

    pub fn is_replayed(&self) -> bool {
        if let Some(replayed) = self.replayed.get() {
            return replayed;
        }
        let replayed = ffi::is_replayed(self.ctx);
        self.replayed.set(Some(replayed));
        replayed
    }
}

impl Replayable for CommandBudget {
    fn is_replayed(&self) -> bool {
        CommandBudget::is_replayed(self)
    }
}

impl MemoryBudget for CommandBudget {
    fn charge(&mut self, filter_bytes: u64, bytes: u64) -> Result<(), LimitError> {
        if self.is_replayed() {
            return Ok(());
        }
        let max_filter_bytes = *self
            .max_filter_bytes
            .get_or_insert_with(config::filter_limit);
        if filter_bytes > max_filter_bytes {
            return Err(LimitError::FilterBytes {
                needed: filter_bytes,
                limit: max_filter_bytes,
            });
        }
        let total = self.charged.saturating_add(bytes);
        if total >= SMALL_ALLOCATION {
            let ctx = self.ctx;
            let room = *self.room.get_or_insert_with(|| ServerRoom::read(ctx));
            // valkey-bloom admits it and lets the server evict to make room (its personality).
            let evicting_maxmemory = room
                .evicting_maxmemory
                .filter(|_| !personality::is_valkey_bloom());
            if let Some(maxmemory) = evicting_maxmemory {
                if filter_bytes > maxmemory {
                    return Err(LimitError::MaxMemory {
                        needed: filter_bytes,
                        maxmemory,
                    });
                }
            }
            if total > room.headroom {
                return Err(LimitError::ServerMemory {
                    needed: bytes,
                    available: room.headroom.saturating_sub(self.charged),
                });
            }
        } else if unchecked_by_redis(self.ctx) && over_maxmemory() {
            // Redis' own check, per call: refused once over maxmemory, so a script or a
            // transaction ends at most one small allocation over it.
            return Err(LimitError::ServerMemory {
                needed: bytes,
                available: 0,
            });
        }
        self.charged = total;
        Ok(())
    }
}

/// Tells the core which allocator the server allocates with (`mem_allocator` of `INFO memory`),
/// so that the sizes it charges and reports (MEMORY USAGE) are those `used_memory` counts:
/// jemalloc's size classes on Redis' default build, the request itself on a server built with the
/// C library's malloc (PyPI's valkey-server is). Returns a line for the log when not jemalloc.
///
/// It also tells the allocator whether blocks aligned to a cache line can come from jemalloc's
/// size classes (see [`alloc`]).
pub fn use_server_allocator(ctx: *mut raw::RedisModuleCtx) -> Option<String> {
    let name = ServerInfo::read(ctx, c"memory")?.text(c"mem_allocator")?;
    if name.starts_with("jemalloc") {
        budget::set_allocator(Allocator::Jemalloc);
        alloc::use_size_classes();
        None
    } else {
        budget::set_allocator(Allocator::Libc);
        Some(format!(
            "rustbloom: the server allocates with {name}, not jemalloc: filter memory is counted \
             as the bytes requested"
        ))
    }
}

/// What the server's memory allows one command, read once, when it first allocates 1 MiB.
///
/// Under `noeviction` (or a server that does not say its policy) a command may allocate what
/// maxmemory leaves. Under an evicting policy (`allkeys-*`, `volatile-*`) Redis' own rule
/// applies: a write is refused only when memory cannot be freed, which Redis checks before the
/// command runs (evicting what its policy allows) and after which it evicts again; so a filter
/// is admitted when it fits within maxmemory itself, and Redis makes the room. In every case
/// the command may allocate no more than the machine has not already promised: a filter's pages
/// are zeroed lazily, reserving them does not lower MemAvailable until they are written, and
/// forty 860 MB reservations on a 23 GiB machine all looked free until filling them got the
/// server killed.
#[derive(Clone, Copy, Debug)]
struct ServerRoom {
    /// What the command may allocate in all.
    headroom: u64,
    /// Under an evicting policy with maxmemory set, maxmemory: the most one filter may hold.
    evicting_maxmemory: Option<u64>,
}

impl ServerRoom {
    fn read(ctx: *mut raw::RedisModuleCtx) -> ServerRoom {
        let memory = MemoryInfo::read(ctx);
        let machine = machine_headroom(&memory);
        match memory.maxmemory {
            0 => ServerRoom {
                headroom: machine,
                evicting_maxmemory: None,
            },
            max if memory.evicting => ServerRoom {
                headroom: machine,
                evicting_maxmemory: Some(max),
            },
            max => ServerRoom {
                headroom: max.saturating_sub(memory.used_memory).min(machine),
                evicting_maxmemory: None,
            },
        }
    }
}

/// Whether `policy` (INFO memory's `maxmemory_policy`) evicts keys to make room for writes.
fn is_evicting_policy(policy: &str) -> bool {
    policy.starts_with("allkeys-") || policy.starts_with("volatile-")
}

/// True when used_memory has reached maxmemory, as Redis' out-of-memory check counts it. Reading
/// the ratio costs well under a microsecond where building INFO memory costs ~70 µs.
fn over_maxmemory() -> bool {
    ffi::used_memory_ratio().is_some_and(|ratio| ratio >= 1.0)
}

/// True when the call in `ctx` runs inside a script or a transaction (which Redis checked against
/// maxmemory once, at its start) and maxmemory applies to this server.
fn unchecked_by_redis(ctx: *mut raw::RedisModuleCtx) -> bool {
    let flags = ffi::context_flags(ctx);
    flags & raw::REDISMODULE_CTX_FLAGS_MAXMEMORY != 0
        && flags & (raw::REDISMODULE_CTX_FLAGS_LUA | raw::REDISMODULE_CTX_FLAGS_MULTI) != 0
}

/// MemAvailable plus free swap, less the filter bytes reserved but not yet resident. Those are
/// estimated from the process: what it has resident beyond its non-filter allocations is filter
/// pages that have been touched; the rest of the filters' bytes are promised but not yet taken.
fn machine_headroom(memory: &MemoryInfo) -> u64 {
    let Some(available) = available_physical_memory() else {
        return u64::MAX;
    };
    let filters = stats::filter_bytes();
    let other_allocations = memory.used_memory.saturating_sub(filters);
    let filters_resident = resident_bytes()
        .unwrap_or(u64::MAX)
        .saturating_sub(other_allocations)
        .min(filters);
    available.saturating_sub(filters - filters_resident)
}

/// The fields of `INFO memory` the budget needs.
struct MemoryInfo {
    maxmemory: u64,
    used_memory: u64,
    /// `maxmemory_policy` evicts keys.
    evicting: bool,
}

impl MemoryInfo {
    /// 0 (no limit known) and not evicting where the server cannot say.
    fn read(ctx: *mut raw::RedisModuleCtx) -> MemoryInfo {
        let info = ServerInfo::read(ctx, c"memory");
        let field = |name| {
            info.as_ref()
                .and_then(|info| info.unsigned(name))
                .unwrap_or(0)
        };
        MemoryInfo {
            maxmemory: field(c"maxmemory"),
            used_memory: field(c"used_memory"),
            evicting: info
                .as_ref()
                .and_then(|info| info.text(c"maxmemory_policy"))
                .is_some_and(|policy| is_evicting_policy(&policy)),
        }
    }
}

/// MemAvailable plus free swap from /proc/meminfo, None where it cannot be read.
fn available_physical_memory() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
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
    Some(field("MemAvailable:")?.saturating_add(field("SwapFree:").unwrap_or(0)))
}

/// This process's resident bytes, from /proc/self/statm (pages).
fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    let page = u64::try_from(alloc::page_bytes()?).ok()?;
    Some(pages.saturating_mul(page))
}
