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
//! A layer in h cache lines (below) is sized from its own model: the bits per item by regula
//! falsi between the classic optimum ln(1/ε)/ln²2 and 1.05× the classic bits, for each k/h near
//! log2(1/ε)/h, keeping the cheapest. The model's Poisson sum starts at its mode and walks
//! outwards by ratios, so a whole layer is sized in tens of microseconds. Layers are sized once, when created; every machine gets the same bits because only
//! IEEE basic operations and the crate's own ln and exp (`math.rs`) are used.
//!
//! # Layouts: classic, or in h cache lines ([`layer`], [`sizing`])
//!
//! A *classic* layer spreads an item's k bits over the whole layer: optimal in bits, but k cache
//! misses per item once the layer outgrows the CPU caches, and k grows as ε falls (7 at 1e-2, 30
//! at 1e-9). A layer *in h lines* (Putze, Sanders and Singler, "Cache-, Hash- and Space-Efficient
//! Bloom Filters", WEA 2007, §3 "blocked Bloom filters" with several blocks per item) puts k/h
//! probes in each of h 512-bit lines, one 64-byte cache line each, chosen per item: an item costs
//! h misses whatever k is, every error rate at the cost of one to four. Lines fill unevenly (the
//! items per line are Poisson), so the same rate needs more bits, less with every line added.
//! Bits per item by the model, sized exactly (see [`sizing`]):
//!
//! ```text
//!   ε       classic   1 line        2 lines       3 lines       4 lines       chosen
//!   1e-2     9.59      9.90 +3.2%    9.66 +0.7%    9.63 +0.4%    9.69 +1.0%   1 line
//!   1e-3    14.38     15.49 +7.7%   14.60 +1.6%   14.49 +0.8%   14.56 +1.3%   2 lines
//!   1e-4    19.17     21.91 +14%    19.79 +3.2%   19.44 +1.4%   19.33 +0.8%   2 lines
//!   1e-5    23.97     29.48 +23%    25.19 +5.1%   24.49 +2.2%   24.20 +1.0%   3 lines
//!   1e-7    33.55       —           37.17 +11%    35.06 +4.5%   34.34 +2.3%   3 lines
//!   1e-9    43.13       —           51.06 +18%    46.47 +7.7%   44.89 +4.1%   4 lines
//! ```
//!
//! Each layer takes the fewest lines, 1 to 4, whose bits stay within 5% of classic; below about
//! 1e-10 none does. Layers under 512 KiB stay classic too: measured here (see
//! [`sizing::LINES_MIN_BYTES`]), lines are as fast or faster than classic from 1 MB up at every
//! rate (non-member lookups up to 2.8× faster), while at 100 KB, inside L2, they lose up to 18%
//! on inserts at 1e-2 and 1e-4. Either way a layer stays classic only while double hashing can
//! reach its rate: one pair (h1, h2) places all k probes, and for about one item in m/c the step
//! lands near a multiple of m/c, so its probes share a handful of bits, a false-positive floor
//! near 0.3/m whatever ε (see [`sizing::CLASSIC_FLOOR`]). Where that exceeds ε (m < 0.3/ε: small
//! layers at low rates, any layer below about 1e-10) the layer goes in the lines with the fewest
//! bits, whose probes each have their own multiplier and show no floor. The one-line case is the *blocked* layout of format
//! version 1, bit for bit, and keeps its name and encoding code.
//!
//! ```text
//!   classic:     | word 0 | word 1 | ... | word m/64 - 1 |               k probes anywhere
//!   in h lines:  | line 0 (8 words) | line 1 | ... | line m/512 - 1 |    k/h probes in each of h
//!
//!   for an item with hash (h1, h2), in a layer of L = m/512 lines, for j in 0..h and i in 0..k/h:
//!     line  l_j  = ((h1·A_j mod 2^64) · L) >> 64          A = 1, 0xd1b5…, 0xdb4f…, 0x9fb2…
//!     probe p_ji = ((h2·S_j·M_i) mod 2^64) >> 55          S = 1, 0xaef1…, 0x8cb9…, 0xf135…
//!     bit        = 512·l_j + p_ji                         M = 16 odd constants ([`hash`])
//! ```
//!
//! Multiply-shift picks each line and each position with one multiplication; the per-line
//! multipliers A_j and S_j make an item's lines and its positions in each line different hashes,
//! so items that share one line are no likelier to share another (tested).
//!
//! Worked example: a layer for 1,000,000 items at 1e-9 takes 4 lines, k = 28 (7 per line),
//! 44,885,504 bits = L = 87,667 lines (44.89 bits per item; classic: 43.13 bits and k = 30
//! misses). The item "apple" under seed 7 hashes to h1 = 0xdb1d_ef1a_8275_1875,
//! h2 = 0xcc11_85c7_6f5b_06fb. Its lines are l_0 = (h1·L) >> 64 = 75036, l_1 = 37325,
//! l_2 = 43748, l_3 = 67414; in line 0 it probes bits 156, 222, 237, 278, 382, 495 and 501, so
//! layer bits 512·75036 + 156 = 38,418,588 and so on: words 600,290 to 600,295, one cache line.
//! Adding "apple" sets 28 bits in 4 lines; looking it up reads the same 4 lines; looking up an
//! absent item stops at its first line with a clear probe, usually line 0.
//!
//! ```
//! use rustbloom_core::{sizing::{layer_size, Layout}, ItemHash};
//! let size = layer_size(1_000_000, 1e-9).unwrap();
//! assert_eq!((size.layout, size.num_hashes, size.bits), (Layout::Lines(4), 28, 44_885_504));
//! let apple = ItemHash::new(b"apple", 7);
//! let lines: Vec<u64> = (0..4).map(|j| apple.line(j, size.bits / 512)).collect();
//! assert_eq!(lines, [75036, 37325, 43748, 67414]);
//! let mask = apple.line_mask(0, 7);
//! let probes: Vec<usize> = (0..512).filter(|p| mask[p / 64] >> (p % 64) & 1 == 1).collect();
//! assert_eq!(probes, [156, 222, 237, 278, 382, 495, 501]);
//! ```
//!
//! # Memory layout of one layer ([`layer`])
//!
//! ```text
//!   bit index:   0 ......... 63 | 64 ........ 127 | ... | bits-64 ..... bits-1
//!                +--------------+-----------------+-----+---------------------+
//!   storage:     |   word 0     |     word 1      | ... |   word bits/64 - 1  |
//!                +--------------+-----------------+-----+---------------------+
//!   bit b lives in word b / 64 at bit (b % 64), least significant first;
//!   encoded, word w is written as 8 little-endian bytes, so byte j holds bits 8j .. 8j+7.
//!   In a layout in lines, bit p of line l is bit 512·l + p: word 8·l + p/64, bit p % 64.
//!
//!   in memory ([`bits`]): one block, or pieces of 2^s words (s per layer) and a tail
//!           | piece 0: words 0 .. 2^s-1 | piece 1: 2^s .. 2^(s+1)-1 | ... | tail: the rest |
//!           word w in piece w >> s at w & (2^s - 1), found through a table of the pieces
//! ```
//!
//! The pieces (whole lines, so no line spans two) change nothing of the above, only what the
//! allocator hands out: one block is rounded up to jemalloc's size class, up to 25% more (12.68 MB
//! takes 14.68 MB); a layer whose block would waste more than 1/32 of its bits comes in pieces,
//! and only the tail and the table are rounded up ([`layer::layer_allocation_size`]).
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
//! # One operation per command, one budget ([`budget`], [`scalable::AddOutcome`])
//!
//! A caller (the Redis module, a tool) runs one operation per command and gets back everything it
//! needs to answer and to replicate: [`BloomFilter::insert_many`] fills an [`AddOutcome`] with one
//! result per item, the error that stopped it, and every layer it pushed with its exact shape and
//! the item that first needed it. Replicas and the AOF receive those shapes
//! ([`BloomFilter::push_layer`], [`BloomFilter::with_first_layer`]) and never size a layer
//! themselves, so the sizing code is not part of the replication protocol.
//!
//! Every allocation of bits — creating, growing, decoding, cloning — first asks the operation's
//! [`MemoryBudget`] for its allocation size ([`budget::allocation_size`], what the allocator really
//! hands out), charged cumulatively over the whole operation, and then allocates fallibly.
//! Sizing a layer is computed once per shape: a filter memoises the shape of its next layer, so
//! an add refused by a limit costs a lookup, not a sizing search.
//!
//! ```text
//!   insert_many(items, budget, outcome)
//!     item 0..: contains? -> added[i] = false
//!               newest full? -> size next layer (memoised) -> budget.charge -> push -> grown[]
//!               set bits    -> added[i] = true
//!     error    -> outcome.error, stop
//! ```
//!
//! A key holds a [`StoredFilter`]: a [`Filter`] of one of three kinds (this scalable filter, a
//! sliding-window filter, or a filter migrated from RedisBloom), ready, or with its bits still
//! arriving by BF.LOADCHUNK, when it answers nothing until complete. [`Filter`] gives the
//! commands one interface; only creation differs by kind. What replicas and the AOF must apply
//! after an add is computed here too, from its [`Outcome`] ([`replication::Effect`]: the creation
//! with its exact shape, the items up to where the operation stopped, each layer pushed), so the
//! caller only sends it.
//!
//! # Encoding ([`scalable::encoding`], [`stored`], [`transfer`])
//!
//! One versioned format serves RDB, DUMP/RESTORE, AOF rewrite and SCANDUMP/LOADCHUNK: a
//! checksummed header describing every layer (see the picture in [`scalable::encoding`]),
//! followed by the layers' bits in order as little-endian bytes. The decoder validates every field
//! and the consistency between them before it trusts any size. A layer's layout is stored as its
//! number of cache lines (0 classic, 1 blocked, 2–4); headers with a layer in 2–4 lines are format
//! version 2, all others stay version 1 and readable by releases before. [`stored`] tells the
//! kinds' headers apart; [`transfer`] cuts the bits into checksummed chunks for SCANDUMP,
//! BF.LOADCHUNK and the AOF rewrite; what every kind's decoder shares is in [`encoding`].
//!
//! # RedisBloom's filters ([`redisbloom`])
//!
//! Filters migrated from RedisBloom keep RedisBloom's own layout, hashes and growth rule, so they
//! answer exactly as they did there; they are read from its RDB values (encodings 0–4) and
//! SCANDUMP streams, created as RedisBloom creates them when a replica of a RedisBloom primary
//! or a RedisBloom AOF asks ([`redisbloom::RbFilter::new`]), saved in our encoding inside an
//! envelope that keeps what RedisBloom's own header cannot say ([`redisbloom::envelope`]), and
//! SCANDUMPed in RedisBloom's format, so that their stream loads back into RedisBloom.
//!
//! ```text
//!   first 4 bytes of a saved header:  "RBLM" scalable   "RBLW" window   "RBLR" RedisBloom
//!   BF.LOADCHUNK header (iterator 1): one of ours, else RedisBloom's SCANDUMP header
//! ```
//!
//! # Partitioned filters ([`partition`])
//!
//! One logical filter can be split by item over P keys (and so over a cluster's nodes): an item
//! goes to partition `(xxh3_64(item, routing seed) × P) >> 64`, each partition is an ordinary
//! filter that also records its identity (i, P, routing seed) in its saved header ("RBLP" in
//! front of its own), and the logical name holds a descriptor ("RBLD"), a [`StoredValue`] of
//! the same type. The module refuses an item sent to the wrong partition.
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
//!
//! # Map of the crate
//!
//! ```text
//!   hash, sizing, math   an item's probe positions; a layer's bits and hashes for (n, ε)
//!   bits, layer          a layer's words in memory (one block or pieces; bits/cut.rs how a
//!                        store is cut and what it takes; bits/lines.rs a line's probes tested
//!                        and set, AVX-512 or BMI2 where the CPU has them), the crate's only
//!                        unsafe code; one layer
//!   scalable             the scalable filter; scalable/batch.rs its batch adds and lookups,
//!                        scalable/params.rs its parameters and growth rule,
//!                        scalable/outcome.rs what its operations report,
//!                        scalable/encoding.rs its header ("RBLM")
//!   window               the sliding-window ring and its record; window/regions.rs the lazy
//!                        clearing by region, window/probes.rs an item's probes (test, set,
//!                        prefetch), window/bytes.rs the bits as encoded bytes,
//!                        window/params.rs its parameters and shape, window/encoding.rs its
//!                        header ("RBLW")
//!   redisbloom           filters migrated from RedisBloom: links, hashes, RDB, SCANDUMP, envelope
//!   filter               the three kinds behind one interface (Filter, Outcome)
//!   partition            partitioned filters: routing, identity ("RBLP"), descriptor ("RBLD")
//!   stored               what a key holds (StoredValue) and its saved header, of any kind
//!   transfer             SCANDUMP, BF.LOADCHUNK and the AOF rewrite: a header, then chunks
//!   encoding             what every kind's decoder shares (DecodeError, ChunkError, field reader, pieces)
//!   replication          what replicas and the AOF must apply after an operation
//!   budget               the memory budget every allocation asks first
//! ```

pub mod bits;
pub mod budget;
pub mod encoding;
pub mod filter;
pub mod hash;
pub mod layer;
mod math;
pub mod merge;
pub mod partition;
pub mod redisbloom;
pub mod relocate;
pub mod replication;
pub mod scalable;
pub mod sizing;
pub mod stored;
pub mod transfer;
pub mod valkeybloom;
pub mod window;

pub use budget::{Budget, LimitError, MemoryBudget, Unlimited};
pub use encoding::{ChunkError, DecodeError};
pub use filter::{Filter, Outcome};
pub use hash::ItemHash;
pub use layer::Layer;
pub use replication::{Creation, Effect};
pub use scalable::{AddOutcome, BloomFilter, FilterParams, GrownLayer, Growth, InsertError};
pub use sizing::{LayerSize, SizingError};
pub use stored::{StoredFilter, StoredValue};
pub use window::{WindowFilter, WindowParams};

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_plan;
