//! rustbloom: scalable Bloom filters as a native Redis data type, serving RedisBloom's BF.* API.
//!
//! The filter core is its own crate, `rustbloom_core` (pure Rust, no Redis types); this crate is
//! the Redis glue around it.

pub mod module;

use module::datatype::BLOOM_TYPE;
use module::init;

redis_module::redis_module! {
    name: "bf",
    version: 1,
    allocator: (crate::module::alloc::ModuleAlloc, crate::module::alloc::ModuleAlloc),
    data_types: [BLOOM_TYPE],
    init: init,
}
