//! rustbloom: scalable Bloom filters as a native Redis data type, serving RedisBloom's BF.* API.
//!
//! The filter core is its own crate, `rustbloom_core` (pure Rust, no Redis types); this crate is
//! the Redis glue around it.

pub mod module;

use module::datatype::BLOOM_TYPE;
use module::init;
use module::valkey_type::VALKEY_BLOOM_TYPE;

/// The version `MODULE LIST` reports, computed from the crate's as RedisBloom computes its own
/// (major·10000 + minor·100 + patch: 2.8.2 is 20802), so tools that read the `bf` module's
/// version read ours the same way.
pub const MODULE_VERSION: i32 = module_version(
    env!("CARGO_PKG_VERSION_MAJOR"),
    env!("CARGO_PKG_VERSION_MINOR"),
    env!("CARGO_PKG_VERSION_PATCH"),
);

const fn decimal(text: &str) -> i32 {
    let bytes = text.as_bytes();
    assert!(!bytes.is_empty(), "empty version number");
    let mut value = 0i32;
    let mut i = 0;
    while i < bytes.len() {
        assert!(bytes[i].is_ascii_digit(), "version numbers are decimal");
        value = value * 10 + (bytes[i] - b'0') as i32;
        i += 1;
    }
    value
}

const fn module_version(major: &str, minor: &str, patch: &str) -> i32 {
    let (major, minor, patch) = (decimal(major), decimal(minor), decimal(patch));
    // Two decimal digits each for minor and patch, as in RedisBloom's numbering.
    assert!(
        minor < 100 && patch < 100,
        "minor and patch must be below 100"
    );
    major * 10000 + minor * 100 + patch
}

redis_module::redis_module! {
    name: "bf",
    version: MODULE_VERSION,
    allocator: (crate::module::alloc::ModuleAlloc, crate::module::alloc::ModuleAlloc),
    data_types: [BLOOM_TYPE, VALKEY_BLOOM_TYPE],
    init: init,
}

#[cfg(test)]
mod tests {
    use super::module_version;

    #[test]
    fn version_is_numbered_as_redisbloom_numbers_its_own() {
        assert_eq!(module_version("2", "8", "2"), 20802);
        assert_eq!(module_version("0", "1", "0"), 100);
        assert_eq!(module_version("1", "12", "7"), 11207);
    }
}
