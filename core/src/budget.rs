//! The memory budget: the one place that admits or refuses the bytes a filter allocates.
//!
//! Every allocation of filter bits — creating a filter, growing it, decoding one (RDB, DUMP,
//! BF.LOADCHUNK) and cloning one (COPY) — first asks a [`MemoryBudget`] for the bytes the
//! allocator will really hand out, and only then allocates, fallibly. The core never decides a
//! policy: the caller (the Redis glue, a tool, a test) supplies the budget for one operation.
//! A budget is charged cumulatively, so one operation that grows a filter by several layers is
//! checked against the sum, not layer by layer against the same headroom.

use crate::scalable::LimitError;

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

/// The usable size jemalloc (5.x, 16-byte quantum, 4 KiB pages) gives a request of `requested`
/// bytes: up to 128 bytes, multiples of 16; above, four size classes per power of two, i.e. the
/// request rounded up to a multiple of a quarter of the power of two below it. A 143.8 MB filter
/// therefore takes 167.8 MB (the class 5·2^25), which is what `used_memory` shows; counting the
/// requested bytes under-reported such a filter by 17%.
///
/// ```
/// use rustbloom_core::budget::allocation_size;
/// assert_eq!(allocation_size(100), 112);
/// assert_eq!(allocation_size(143_800_000), 5 << 25);
/// assert_eq!(allocation_size(1 << 30), 1 << 30);
/// ```
pub fn allocation_size(requested: u64) -> u64 {
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
        assert_eq!(allocation_size(129), 160);
        assert_eq!(allocation_size(160), 160);
        assert_eq!(allocation_size(161), 192);
        assert_eq!(allocation_size(4097), 5120);
        assert_eq!(allocation_size((1 << 20) + 1), (1 << 20) + (1 << 18));
        for requested in [1u64, 8, 100, 1000, 123_457, 1 << 33, (1 << 40) + 3] {
            let size = allocation_size(requested);
            assert!(size >= requested && size <= requested + requested / 4 + 16);
        }
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
