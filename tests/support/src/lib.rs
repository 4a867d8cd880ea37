//! Shared harness for the rustbloom integration tests (`tests/*.rs`), a library crate so that
//! every helper is compiled once and checked like any other code.
//!
//! - [`server`]: [`Server`], a `redis-server` of its own per test with the module loaded.
//! - [`reply`]: raw commands, error texts, reply conversions.
//! - [`keyspace`]: keys, types, `DEBUG DIGEST`, `INFO` sections.
//! - [`bloom`]: parsed BF.INFO, SCANDUMP/LOADCHUNK round trips, bulk adds and membership checks.
//! - [`replication`]: replicas attached and caught up, datasets compared.
//! - [`persistence`]: AOF servers and rewrites; [`VariedFilters`], filters of every shape to
//!   persist and compare.
//!
//! The modules above are re-exported at the root (`use rustbloom_testkit::*;`). Two more are
//! imported by path where needed:
//!
//! - [`payload`]: CRC64-sealed DUMP payloads, filter headers with a correct xxh3 checksum.
//! - [`cluster`]: [`cluster::Cluster`], masters and replicas on loopback created with
//!   `redis-cli --cluster create` (the `rustbloom-cluster` binary starts one for other languages).
//! - [`hostile`]: the hostile-input harness ([`hostile::Barrage`]) of `tests/hostile_*.rs`.
//! - [`valkeybloom`]: valkey-bloom 1.0's objects made with the real `bloomfilter` crate.
//! - [`redisbloom`]: the real RedisBloom as the reference: a corpus of its filters, what it wrote
//!   and answered, and the comparison of migrated filters with it.

pub mod bloom;
pub mod cluster;
pub mod hostile;
pub mod keyspace;
pub mod payload;
pub mod persistence;
pub mod redisbloom;
pub mod replication;
pub mod reply;
pub mod server;
pub mod valkeybloom;

pub use bloom::*;
pub use keyspace::*;
pub use persistence::*;
pub use replication::*;
pub use reply::*;
pub use server::*;
