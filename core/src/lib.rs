//! The filter core: scalable Bloom filters in pure Rust, with no Redis types.
//!
//! # The idea
//!
//! A Bloom filter (Bloom, 1970) answers "have I seen this item?" with no false negatives and a
//! tunable rate ε of false positives, in about 1.44·log2(1/ε) bits per item whatever the item's
//! size. An item is hashed to k bit positions; adding sets them, a lookup reports "present" when all
//! k are set. A filter is sized for a `capacity`: past it the false-positive rate climbs quickly.
//!
//! A *scalable* Bloom filter (Almeida, Baquero, Preguiça, Hutchison: "Scalable Bloom Filters",
//! Information Processing Letters 101, 2007) removes the need to know the final size up front: it
//! is a stack of plain filters ("layers"). When the newest layer is full, a bigger one is pushed,
//! sized for `capacity × expansion` items at half the previous layer's error rate, so the summed
//! rate of all layers stays under ε (ε/2 + ε/4 + ... < ε). This is RedisBloom's rule, which users of
//! the BF.* API already rely on.
//!
//! # Hashing ([`hash`])
//!
//! One xxh3-128 of the item under the filter's 64-bit seed gives two 64-bit values h1, h2; the k
//! positions are `g_i = h1 + i·h2` (Kirsch and Mitzenmacher, "Less Hashing, Same Performance",
//! ESA 2006: two hashes give the same asymptotic false-positive rate as k independent ones). Each
//! `g_i` is reduced to `[0, bits)` by the multiply-shift `(g_i · bits) >> 64` (Lemire, "A fast
//! alternative to the modulo reduction", 2016), which avoids a division per probe. The hash is
//! computed once per item and reused for every layer: each layer only differs in `bits` and k.
//!
//! The seed is chosen at random when a filter is created (unless the user fixes it), so nobody can
//! precompute items that collide in somebody else's filter; it is part of the filter's state and
//! travels with it through RDB, DUMP, SCANDUMP and replication.
//!
//! # Sizing ([`sizing`])
//!
//! For n items in m bits with k hashes the false-positive rate is p = (1 − e^(−k·n/m))^k. For each
//! integer k near the optimum log2(1/ε) we solve for the smallest m with p ≤ ε, i.e.
//! `m = −k·n / ln(1 − ε^(1/k))`, and keep the k that needs the fewest bits (RedisBloom rounds k up
//! from the real optimum instead, and delivers 1.01% when asked for 1% without scaling). m is
//! rounded up to whole 64-bit words. A non-scaling filter is sized for 0.9·ε: its single layer
//! carries the whole budget, and the margin keeps the rate a user *measures* at full capacity at
//! or below what they asked for, double-hashing correlation and sampling noise included.
//!
//! # Two layouts ([`layer`])
//!
//! A *classic* layer spreads an item's k bits over the whole layer: optimal in bits, but k cache
//! misses per item once the layer outgrows the CPU caches. A *blocked* layer (Putze, Sanders and
//! Singler, "Cache-, Hash- and Space-Efficient Bloom Filters", 2007) puts all k bits of an item in
//! one 512-bit block, one cache line: the block is chosen from h1 by multiply-shift, the bits inside
//! it are the top 9 bits of h2 times k fixed odd constants. Blocks fill unevenly (Poisson), so a
//! blocked layer needs more bits for the same rate; we size it exactly by summing over the Poisson
//! distribution of items per block, and use it only for layers of 8 MiB and more (smaller ones sit
//! in the caches) where it costs at most 6% more bits (about 3.5% at 1%, 4.3% at 0.5%; at 0.1% and
//! below the layer stays classic).
//!
//! ```text
//!   classic:  | word 0 | word 1 | ... | word m/64-1 |     k probes anywhere
//!   blocked:  | block 0 (8 words) | block 1 | ... |       k probes in block (h1·B) >> 64
//! ```
//!
//! # Memory layout of one layer ([`layer`])
//!
//! ```text
//!   bit index:   0 ......... 63 | 64 ........ 127 | ... | bits-64 ..... bits-1
//!                +--------------+-----------------+-----+---------------------+
//!   storage:     |   word 0     |     word 1      | ... |   word bits/64 - 1  |
//!                +--------------+-----------------+-----+---------------------+
//!   bit b lives in word b / 64 at bit (b % 64), least significant first (bitvec's Lsb0 on u64);
//!   encoded, word w is written as 8 little-endian bytes, so byte j holds bits 8j .. 8j+7.
//!   In a blocked layer, bit p of block b is bit 512·b + p.
//! ```
//!
//! # The scalable filter ([`scalable`])
//!
//! ```text
//!   layer 0: capacity c,      error ε/2,  k0 hashes     (non-scaling: 0.9·ε, and no more layers)
//!   layer 1: capacity c·x,    error ε/4,  k1 hashes     x = expansion
//!   layer i: capacity c·x^i,  error ε/2^(i+1)
//! ```
//! An add hashes once, tests every layer (an item present anywhere is not added again and not
//! counted), and sets bits only in the newest layer, pushing a new one first if the newest holds
//! `capacity` items. A lookup tests every layer, newest first.
//!
//! # Encoding ([`encoding`])
//!
//! One versioned format serves RDB, DUMP/RESTORE, AOF rewrite and SCANDUMP/LOADCHUNK: a
//! checksummed header describing every layer (see the picture in [`encoding`]), followed by the
//! layers' bits in order as little-endian bytes, cut into chunks. The decoder validates every field
//! and the consistency between them before it trusts any size.
//!
//! # Sliding windows ([`window`])
//!
//! A [`WindowFilter`] forgets: an item added at time t answers present through t + W whatever
//! the load and is gone from the start of the fourth generation after its own (at most
//! t + 4⌈W/3⌉ ≤ t + 2W). It is a ring of four slots, one per generation of ⌈W/3⌉ ms, each a layer
//! sized for N/3 items at 0.9·ε/4; blocked slots are interleaved so one item's four blocks are
//! adjacent cache lines. Time is always passed in by the caller (absolute Unix ms) and the ring
//! advances lazily on writes, reproducibly; it has its own encoding ([`window::encoding`]). The
//! module documentation compares it with Age-Partitioned Bloom Filters.

pub mod encoding;
pub mod hash;
pub mod layer;
mod math;
pub mod scalable;
pub mod sizing;
pub mod window;

pub use encoding::DecodeError;
pub use hash::ItemHash;
pub use layer::Layer;
pub use scalable::{BloomFilter, FilterParams, Growth, InsertError, Limits};
pub use sizing::{LayerSize, SizingError};
pub use window::{WindowFilter, WindowParams};

#[cfg(test)]
mod tests;
