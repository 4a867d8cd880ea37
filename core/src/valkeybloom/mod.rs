//! Reading valkey-bloom's Bloom filters, so that a filter written by valkey-bloom 1.0 answers
//! exactly as it did there, grows as it would have there, and can be handed back to it.
//!
//! # The idea
//!
//! As with RedisBloom's filters ([`crate::redisbloom`]), valkey-bloom's bits were set at its own
//! positions from its own hashes, and a Bloom filter does not keep its items: an object stays
//! what it was, a stack of the `bloomfilter` crate's filters ([`object`], [`layer`]), probed
//! with that crate's SipHash-1-3 under the object's seed ([`siphash`]) and grown by
//! valkey-bloom's rule ([`shape`]). It arrives as an RDB value of valkey-bloom's type
//! `bloomfltr` ([`rdb`]; RDB files, DUMP/RESTORE, a full sync from a valkey-bloom primary) or as
//! the blob of its AOF's `BF.LOAD` ([`blob`]), and leaves the same two ways, in valkey-bloom's
//! own encodings. The paths every kind shares (SCANDUMP, LOADCHUNK) carry it in an envelope of
//! ours ([`envelope`]).
//!
//! ```text
//!   bloomfltr RDB value (encver 1) ──rdb::load──┐              ┌──> rdb::save (encver 1)
//!                                               ├──> VbFilter ──┼──> blob::encode (BF.LOAD)
//!   BF.LOAD blob ─────────────────blob::decode──┘              └──> contains / insert (its rules)
//! ```
//!
//! Every decoder validates each field before it sizes anything and charges the bitmaps'
//! allocation to the caller's [`MemoryBudget`](crate::MemoryBudget); an add reports what it did
//! in a [`RbAddOutcome`](crate::redisbloom::RbAddOutcome) (the layers it pushed follow from the
//! items by valkey-bloom's deterministic rule, so a replica given the same items pushes the
//! same layers).
//!
//! The facts come from valkey-bloom 1.0's sources and the `bloomfilter` crate 3.0; the tests
//! check hashing, sizing and answers against that crate itself.

pub mod blob;
pub mod envelope;
pub mod layer;
pub mod object;
pub mod rdb;
pub mod shape;
pub mod siphash;

pub use layer::{VbHash, VbLayer};
pub use object::VbFilter;
pub use shape::{LayerShape, ObjectParams, ObjectShape, FIXED_SEED};

#[cfg(test)]
mod tests;
