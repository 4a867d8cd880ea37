//! Module settings: the defaults of new filters and the memory limits.

use std::sync::atomic::{AtomicI64, Ordering};

use crate::bloom::scalable::LimitError;
use crate::bloom::Limits;

/// Error rate of filters created without one.
pub const DEFAULT_ERROR_RATE: f64 = 0.01;
/// Capacity of filters created without one.
pub const DEFAULT_CAPACITY: u64 = 100;
/// Expansion of filters created without one.
pub const DEFAULT_EXPANSION: u32 = 2;
/// The per-filter byte cap unless configured: enough for ~900M items at 1%.
pub const DEFAULT_MAX_FILTER_BYTES: i64 = 1 << 30;

/// `bf.max-filter-bytes`: the most bytes of bits one filter may hold.
pub static MAX_FILTER_BYTES: AtomicI64 = AtomicI64::new(DEFAULT_MAX_FILTER_BYTES);

/// The limits a client's command must respect.
pub fn limits() -> Limits {
    Limits {
        max_filter_bytes: MAX_FILTER_BYTES.load(Ordering::Relaxed).max(0) as u64,
        max_new_bytes: u64::MAX,
    }
}

/// The error reply for a limit that refused an allocation: what was hit and how to raise it.
pub fn limit_message(limit: LimitError) -> String {
    match limit {
        LimitError::FilterBytes { needed, limit } => format!(
            "ERR filter would use {needed} bytes, over the per-filter limit of {limit} bytes \
             (raise it with CONFIG SET bf.max-filter-bytes)"
        ),
        LimitError::ServerMemory { needed, available } => format!(
            "ERR filter needs {needed} more bytes but maxmemory leaves {available} \
             (raise maxmemory or free memory)"
        ),
    }
}
