//! rustbloom: scalable Bloom filters as a native Redis data type, serving RedisBloom's BF.* API.
//!
//! [`bloom`] is the filter core, pure Rust with no Redis types; [`module`] is the Redis glue.

pub mod bloom;
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
