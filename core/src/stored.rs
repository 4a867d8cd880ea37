//! What a key holds: a filter that answers, or one still arriving by BF.LOADCHUNK.

use crate::scalable::BloomFilter;

/// The value stored at a key. A filter whose bits are still arriving is its own state, so no
/// command can forget that it must not answer from it: only [`ready`](Self::ready) gives a
/// filter to query or add to.
#[derive(Debug, PartialEq)]
pub enum StoredFilter {
    Ready(BloomFilter),
    /// Being loaded by BF.LOADCHUNK: the first `loaded` bytes of its bits have arrived, in order;
    /// the rest are zero.
    Loading {
        filter: BloomFilter,
        loaded: u64,
    },
}

impl StoredFilter {
    /// The filter, complete or not: for what is about its shape and bytes (saving, digest,
    /// memory usage), never for answers.
    pub fn filter(&self) -> &BloomFilter {
        match self {
            StoredFilter::Ready(filter) | StoredFilter::Loading { filter, .. } => filter,
        }
    }

    /// The filter when it is complete.
    pub fn ready(&self) -> Option<&BloomFilter> {
        match self {
            StoredFilter::Ready(filter) => Some(filter),
            StoredFilter::Loading { .. } => None,
        }
    }

    pub fn ready_mut(&mut self) -> Option<&mut BloomFilter> {
        match self {
            StoredFilter::Ready(filter) => Some(filter),
            StoredFilter::Loading { .. } => None,
        }
    }

    /// Turns a filter whose last chunk arrived into a ready one.
    pub(crate) fn finish_loading(&mut self) {
        if let StoredFilter::Loading { filter, .. } = self {
            *self = StoredFilter::Ready(filter.take());
        }
    }

    /// Bytes of bits that are valid: all of them once complete.
    pub fn loaded_bytes(&self) -> u64 {
        match self {
            StoredFilter::Ready(filter) => filter.bytes(),
            StoredFilter::Loading { loaded, .. } => *loaded,
        }
    }
}
