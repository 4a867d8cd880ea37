//! Counters behind `INFO bf`: what the module holds and what it served.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use rustbloom_core::{BloomFilter, Filter, StoredValue};

use super::ffi::{InfoCtx, InfoSection};

/// What the module holds, across all databases: changed whenever a filter is stored, grown,
/// filled or freed (free can run on a background thread, hence atomics).
static FILTERS: AtomicI64 = AtomicI64::new(0);
static LAYERS: AtomicI64 = AtomicI64::new(0);
static BYTES: AtomicI64 = AtomicI64::new(0);
static ITEMS: AtomicI64 = AtomicI64::new(0);
/// What the module served since start.
pub static ADDS: AtomicU64 = AtomicU64::new(0);
pub static LOOKUPS: AtomicU64 = AtomicU64::new(0);
pub static REFUSED_BY_LIMITS: AtomicU64 = AtomicU64::new(0);
/// Blocks active defrag offered the server: moved, and left where they were (the allocator saw
/// no gain, or the block was not one it can move).
pub static DEFRAG_HITS: AtomicU64 = AtomicU64::new(0);
pub static DEFRAG_MISSES: AtomicU64 = AtomicU64::new(0);

/// A snapshot of a filter's size, to account for what a command changed.
#[derive(Clone, Copy, Default)]
pub struct Footprint {
    layers: i64,
    bytes: i64,
    items: i64,
}

impl Footprint {
    pub fn of(filter: &Filter) -> Footprint {
        Footprint::new(
            filter.layer_count(),
            filter.allocated_bytes(),
            filter.counted_items(),
        )
    }

    pub fn of_scalable(filter: &BloomFilter) -> Footprint {
        Footprint::new(
            filter.layers().len() as u64,
            filter.allocated_bytes(),
            filter.items(),
        )
    }

    fn new(layers: u64, bytes: u64, items: u64) -> Footprint {
        let gauge = |value: u64| i64::try_from(value).unwrap_or(i64::MAX);
        Footprint {
            layers: gauge(layers),
            bytes: gauge(bytes),
            items: gauge(items),
        }
    }
}

/// What an add may change of a filter's footprint, taken before it: the items, and layers
/// pushed, whose bytes alone are then summed (a full [`Footprint`] before and after summed every
/// layer's allocation twice per add: ~25 ns of a BF.ADD).
pub struct BeforeAdd {
    layers: u64,
    items: u64,
}

impl BeforeAdd {
    pub fn of(filter: &Filter) -> BeforeAdd {
        BeforeAdd {
            layers: filter.layer_count(),
            items: filter.counted_items(),
        }
    }

    /// Accounts for what the add did to `filter`: its items, and the layers it pushed with their
    /// bytes (counted from zero before, since the add changed no other layer's).
    pub fn record(self, filter: &Filter) {
        let layers = filter.layer_count();
        let pushed_bytes = if layers == self.layers {
            0
        } else {
            filter.allocated_bytes_from(self.layers)
        };
        changed(
            Footprint::new(self.layers, 0, self.items),
            Footprint::new(layers, pushed_bytes, filter.counted_items()),
        );
    }
}

/// A value came into being (created, loaded, restored, copied); a partitioned filter's
/// descriptor is not a filter, and counts nothing.
pub fn filter_added(value: &StoredValue) {
    if let StoredValue::Filter(stored) = value {
        FILTERS.fetch_add(1, Ordering::Relaxed);
        changed(Footprint::default(), Footprint::of(stored.filter()));
    }
}

/// A value was freed.
pub fn filter_freed(value: &StoredValue) {
    if let StoredValue::Filter(stored) = value {
        FILTERS.fetch_sub(1, Ordering::Relaxed);
        changed(Footprint::of(stored.filter()), Footprint::default());
    }
}

/// Bytes the allocator handed out for the bits of every filter the server holds.
pub fn filter_bytes() -> u64 {
    BYTES.load(Ordering::Relaxed).max(0) as u64
}

/// A filter went from `before` to `after`.
pub fn changed(before: Footprint, after: Footprint) {
    // Most adds change only the item count: skip the other atomic updates on the hot path.
    for (gauge, delta) in [
        (&LAYERS, after.layers - before.layers),
        (&BYTES, after.bytes - before.bytes),
        (&ITEMS, after.items - before.items),
    ] {
        if delta != 0 {
            gauge.fetch_add(delta, Ordering::Relaxed);
        }
    }
}

/// One item was counted by a filter that changed in nothing else (the single-item add).
pub fn item_counted() {
    ITEMS.fetch_add(1, Ordering::Relaxed);
}

/// Adds to one of the served counters (ADDS, LOOKUPS, REFUSED_BY_LIMITS, DEFRAG_*). Only
/// commands and the COPY and defrag callbacks count them, and those run one at a time under the
/// server's lock, so a plain load and store adds without a lost count, and without the locked read-modify-write that a
/// `fetch_add` costs every BF.EXISTS (~20 cycles). The gauges above stay `fetch_add`: a filter
/// can be freed on a lazy-free thread while a command runs.
pub fn count(counter: &AtomicU64, by: usize) {
    counter.store(
        counter.load(Ordering::Relaxed).wrapping_add(by as u64),
        Ordering::Relaxed,
    );
}

/// The `INFO bf` section (field names come out prefixed: `bf_filters`, ...).
pub struct BloomSection;

impl InfoSection for BloomSection {
    fn write(info: &InfoCtx) {
        let add_field = |name, value| info.add_field(name, value);
        let gauge = |counter: &AtomicI64| counter.load(Ordering::Relaxed).max(0) as u64;
        info.add_section(c"");
        add_field(c"filters", gauge(&FILTERS));
        add_field(c"layers", gauge(&LAYERS));
        add_field(c"bytes", gauge(&BYTES));
        add_field(c"items", gauge(&ITEMS));
        add_field(c"adds", ADDS.load(Ordering::Relaxed));
        add_field(c"lookups", LOOKUPS.load(Ordering::Relaxed));
        add_field(
            c"refused_by_limits",
            REFUSED_BY_LIMITS.load(Ordering::Relaxed),
        );
        add_field(c"defrag_hits", DEFRAG_HITS.load(Ordering::Relaxed));
        add_field(c"defrag_misses", DEFRAG_MISSES.load(Ordering::Relaxed));
    }
}
