//! rustbloom's client: one API over plain and partitioned Bloom filters (`docs/partitions.md`),
//! on a single server or a Redis Cluster reached through any node. With the cargo feature
//! `async`, the same operations run on tokio as `*_async` methods over an async connection
//! (module `aio`; `client/examples/quickstart.rs`); the program brings tokio's runtime itself:
//!
//! ```toml
//! rustbloom-client = { path = "../rustbloom/client", features = ["async"] }
//! tokio = { version = "1", features = ["macros", "rt-multi-thread"] }
//! ```
//!
//! Built on the `redis` crate 1.8, which needs Rust 1.88 or later. The server's refusals are
//! [`Error::Server`], its text without Redis' `ERR ` (`item exists`), as in the Python, PHP and
//! Node clients.
//!
//! ```no_run
//! use rustbloom_client::{Client, Filter, Growth, ReserveOptions, WriteOptions};
//! # fn main() -> rustbloom_client::Result<()> {
//! let mut conn = Client::open("redis://127.0.0.1:7000")?.connect()?;
//! let opts = ReserveOptions {
//!     error_rate: 0.01,
//!     capacity: 1_000_000,
//!     growth: Growth::Scaling { expansion: None },
//!     partitions: Some(16),
//! };
//! let filter = Filter::reserve(&mut conn, b"clicks", &opts)?;
//! filter.add(&mut conn, &[b"a".as_slice(), b"b"], &WriteOptions::default())?;
//! let seen = filter.exists(&mut conn, &[b"a".as_slice(), b"z"], 1000)?;
//! # let _ = seen;
//! // Later, anywhere: everything needed is in the descriptor.
//! let again = Filter::discover(&mut conn, b"clicks")?;
//! # let _ = again;
//! # Ok(())
//! # }
//! ```

#[cfg(feature = "async")]
pub mod aio;
pub mod connection;
mod delivery;
pub mod error;
pub mod filter;
mod nodes;
pub mod pack;
mod resp;
pub mod routing;
mod single;
mod transport;

pub use connection::{Client, Connection};
pub use error::{Error, Result};
pub use filter::{
    scandump, Filter, FilterInfo, Growth, KeyInfo, MergeReport, PartitionInfo, Partitioning,
    ReadOptions, ReserveOptions, Stall, StallWatcher, Totals, WriteOptions, DEFAULT_RETRY_FOR,
};
pub use routing::Master;
pub use single::SingleConnection;
