//! Reading RedisBloom's Bloom filters, so that a filter migrated from RedisBloom answers exactly
//! as it did there, grows as it would have there, and can be SCANDUMPed back.
//!
//! # The idea
//!
//! RedisBloom's filters cannot be converted into ours: their bits were set by its hashes at its
//! positions, and re-hashing needs the items, which a Bloom filter does not keep. So a migrated
//! filter stays what it was, a chain of RedisBloom links ([`chain`], [`link`], [`shape`]), probed and grown by
//! RedisBloom's rules, hashed by its MurmurHash variants ([`hash`], [`murmur`]). It arrives either as an RDB
//! value of RedisBloom's type `MBbloom--` ([`rdb`]) or as a BF.SCANDUMP stream ([`scandump`]),
//! and leaves as a SCANDUMP stream in the same format or as the same RDB fields (for the glue to
//! persist it). A SCANDUMP header cannot say that a filter came from encoding 1 (see
//! [`shape::Arithmetic`]); only `rdb::save` keeps that.
//!
//! ```text
//!   RDB value (encver 0..4) ──rdb::load──┐                ┌──> rdb::save (encver 4, or 1)
//!                                         ├──> RbFilter ──┼──> scandump::scandump_step
//!   SCANDUMP header + chunks ─scandump────┘                └──> contains / insert (its rules)
//!
//!   RbFilter:  link 0 (oldest) | link 1 | ... | link n-1 (newest, takes new items)
//!   one link:  entries, error, hashes, bpe, bits, n2, items + bit array (byte 0 first, LSB first)
//! ```
//!
//! Every decoder validates each count before it sizes anything (see [`shape::LinkShape`] and
//! [`shape::ChainShape`] for the rules) and charges the arrays' allocation sizes to the caller's
//! [`MemoryBudget`](crate::MemoryBudget), one budget per operation. Growth is charged the same
//! way and reports a refused allocation as a value; an add operation records which items were new
//! ([`RbAddOutcome`]); the links it pushed follow from them by RedisBloom's own rule, so a
//! replica given the same items pushes the same links. A copy is fallible too
//! ([`RbFilter::try_clone`]).
//!
//! The facts come from RedisBloom's formats as documented for this project and were checked
//! against RedisBloom 2.8.2 itself: `core/tests/fixtures/redisbloom/` holds streams, DUMP
//! payloads and BF.EXISTS answers recorded from it, and the script that recorded them.

pub mod chain;
pub mod envelope;
pub mod hash;
pub mod link;
pub mod murmur;
pub mod rdb;
pub mod scandump;
pub mod shape;

pub use chain::{RbAddOutcome, RbFilter};
pub use hash::{Hashing, RbHash};
pub use link::Link;
pub use rdb::{RdbError, RdbSink, RdbSource};
pub use shape::{Arithmetic, ChainHeader, ChainShape, LinkShape};

#[cfg(test)]
mod tests;
