//! The memory budget: the one place that admits or refuses the bytes a filter allocates.
//!
//! Every allocation of filter bits — creating a filter, growing it, decoding one (RDB, DUMP,
//! BF.LOADCHUNK) and cloning one (COPY) — first asks a [`MemoryBudget`] for the bytes the
//! allocator will really hand out, and only then allocates, fallibly. The core never decides a
//! policy: the caller (the Redis glue, a tool, a test) supplies the budget for one operation.
//! A budget is charged cumulatively, so one operation that grows a filter by several layers is
//! checked against the sum, not layer by layer against the same headroom.

use std::sync::atomic::{AtomicBool, Ordering};

/// A memory limit that refused an allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LimitError {
    /// The filter would exceed the per-filter byte cap.
    FilterBytes { needed: u64, limit: u64 },
    /// The allocation would exceed what the server may still allocate.
    ServerMemory { needed: u64, available: u64 },
    /// The filter would hold more than the server's whole memory limit, which no eviction can
    /// make room for.
    MaxMemory { needed: u64, maxmemory: u64 },
    /// The system refused the allocation.
    Allocation { needed: u64 },
}

/// The refusal in words (the server adds how to raise its own limits).
impl std::fmt::Display for LimitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            LimitError::FilterBytes { needed, limit } => write!(
                f,
                "filter would use {needed} bytes, over the per-filter limit of {limit} bytes"
            ),
            LimitError::ServerMemory { needed, available } => write!(
                f,
                "filter needs {needed} more bytes but only {available} can be allocated \
                 (the least of what maxmemory leaves and the machine's available memory)"
            ),
            LimitError::MaxMemory { needed, maxmemory } => write!(
                f,
                "filter would use {needed} bytes, more than maxmemory ({maxmemory} bytes): \
                 no eviction can make room for it"
            ),
            LimitError::Allocation { needed } => write!(
                f,
                "out of memory: the system refused {needed} bytes for the filter"
            ),
        }
    }
}

/// Admits or refuses the bytes of one operation's allocations.
/// The bytes asked for are allocation sizes ([`allocation_size`]): what the allocator really hands
/// out, which is what `used_memory`, `maxmemory` and the machine pay.
pub trait MemoryBudget {
    /// Charges `bytes` (an allocation size) for a filter that will then hold `filter_bytes` in
    /// all; refused when a limit would be broken, in which case nothing is charged.
    fn charge(&mut self, filter_bytes: u64, bytes: u64) -> Result<(), LimitError>;
}

/// No limit: what an operation replaying admitted work uses (a replica applying its primary's
/// stream, AOF loading), and tools and tests.
#[derive(Clone, Copy, Debug, Default)]
pub struct Unlimited;

impl MemoryBudget for Unlimited {
    fn charge(&mut self, _filter_bytes: u64, _bytes: u64) -> Result<(), LimitError> {
        Ok(())
    }
}

/// Fixed limits: a per-filter cap and what the whole operation may still allocate.
///
/// ```
/// use rustbloom_core::budget::{Budget, MemoryBudget};
/// let mut budget = Budget::new(u64::MAX, 10 << 20);
/// assert!(budget.charge(6 << 20, 6 << 20).is_ok());
/// // A second layer of the same operation sees what the first one left.
/// assert!(budget.charge(12 << 20, 6 << 20).is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    max_filter_bytes: u64,
    available: u64,
}

impl Budget {
    pub fn new(max_filter_bytes: u64, available: u64) -> Budget {
        Budget {
            max_filter_bytes,
            available,
        }
    }

    /// What is left to allocate.
    pub fn available(&self) -> u64 {
        self.available
    }
}

impl MemoryBudget for Budget {
    fn charge(&mut self, filter_bytes: u64, bytes: u64) -> Result<(), LimitError> {
        if filter_bytes > self.max_filter_bytes {
            return Err(LimitError::FilterBytes {
                needed: filter_bytes,
                limit: self.max_filter_bytes,
            });
        }
        if bytes > self.available {
            return Err(LimitError::ServerMemory {
                needed: bytes,
                available: self.available,
            });
        }
        self.available -= bytes;
        Ok(())
    }
}

/// The allocators whose usable sizes [`allocation_size`] knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Allocator {
    /// jemalloc 5.x, the allocator of Redis' default build (Debian's redis-server among them).
    Jemalloc,
    /// The C library's malloc (a server built with `MALLOC=libc`, such as PyPI's valkey-server):
    /// glibc hands out the request rounded up to its 16-byte alignment, give or take the chunk
    /// header, and whole pages for the big blocks it maps (within a page of the request).
    Libc,
}

/// The allocator of the process the core runs in; jemalloc until told otherwise.
static LIBC: AtomicBool = AtomicBool::new(false);

/// Tells [`allocation_size`] which allocator hands out the bytes (the Redis glue reads the
/// server's `mem_allocator` at load).
/// The parts of one value (layers, links), made only after `budget` admits their `bytes` at
/// once: a refusal allocates nothing, and every kind's COPY and load charge the same way.
pub(crate) fn admitted_parts<B: MemoryBudget + ?Sized, T>(
    budget: &mut B,
    bytes: u64,
    parts: impl Iterator<Item = Result<T, LimitError>>,
) -> Result<Vec<T>, LimitError> {
    budget.charge(bytes, bytes)?;
    parts.collect()
}

pub fn set_allocator(allocator: Allocator) {
    LIBC.store(allocator == Allocator::Libc, Ordering::Relaxed);
}

pub fn allocator() -> Allocator {
    if LIBC.load(Ordering::Relaxed) {
        Allocator::Libc
    } else {
        Allocator::Jemalloc
    }
}

/// The usable size the allocator of this process ([`set_allocator`]) gives a request of
/// `requested` bytes: see [`usable_size`].
pub fn allocation_size(requested: u64) -> u64 {
    usable_size(allocator(), requested)
}

/// The usable size `allocator` gives a request of `requested` bytes.
///
/// jemalloc (5.x, 16-byte quantum, 4 KiB pages): up to 128 bytes, multiples of 16; above, four
/// size classes per power of two, i.e. the request rounded up to a multiple of a quarter of the
/// power of two below it. A 143.8 MB block therefore takes 167.8 MB (the class 5·2^25), which is
/// what `used_memory` shows (why layers above 1 MiB come in pieces: see
/// [`crate::layer::layer_allocation_size`]).
/// The C library's malloc: the request rounded up to 16 bytes.
///
/// ```
/// use rustbloom_core::budget::{usable_size, Allocator};
/// assert_eq!(usable_size(Allocator::Jemalloc, 100), 112);
/// assert_eq!(usable_size(Allocator::Jemalloc, 143_800_000), 5 << 25);
/// assert_eq!(usable_size(Allocator::Jemalloc, 1 << 30), 1 << 30);
/// assert_eq!(usable_size(Allocator::Libc, 143_800_000), 143_800_000);
/// ```
pub fn usable_size(allocator: Allocator, requested: u64) -> u64 {
    if allocator == Allocator::Libc {
        return requested.max(1).saturating_add(15) & !15;
    }
    if requested <= 8 {
        return 8;
    }
    if requested <= 128 {
        return requested.next_multiple_of(16);
    }
    let lg = 63 - (requested - 1).leading_zeros();
    let spacing = 1u64 << (lg - 2);
    requested.saturating_add(spacing - 1) / spacing * spacing
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_classes_round_up_to_a_quarter_of_the_power_of_two_below() {
        let jemalloc = |requested| usable_size(Allocator::Jemalloc, requested);
        assert_eq!(jemalloc(129), 160);
        assert_eq!(jemalloc(160), 160);
        assert_eq!(jemalloc(161), 192);
        assert_eq!(jemalloc(4097), 5120);
        assert_eq!(jemalloc((1 << 20) + 1), (1 << 20) + (1 << 18));
        for requested in [1u64, 8, 100, 1000, 123_457, 1 << 33, (1 << 40) + 3] {
            let size = jemalloc(requested);
            assert!(size >= requested && size <= requested + requested / 4 + 16);
        }
    }

    #[test]
    fn libc_sizes_are_the_request_aligned_to_16_bytes() {
        let libc = |requested| usable_size(Allocator::Libc, requested);
        assert_eq!(libc(0), 16);
        assert_eq!(libc(1), 16);
        assert_eq!(libc(129), 144);
        assert_eq!(libc(143_800_000), 143_800_000);
        assert_eq!(libc(u64::MAX), u64::MAX - 15);
    }

    #[test]
    fn jemalloc_until_told_otherwise() {
        assert_eq!(allocator(), Allocator::Jemalloc);
        assert_eq!(allocation_size(129), 160);
    }

    #[test]
    fn a_refused_charge_takes_nothing() {
        let mut budget = Budget::new(100, 50);
        assert!(budget.charge(101, 1).is_err());
        assert!(budget.charge(60, 60).is_err());
        assert_eq!(budget.available(), 50);
        assert!(budget.charge(50, 50).is_ok());
        assert_eq!(budget.available(), 0);
    }
}
