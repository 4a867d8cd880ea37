//! The client's integration tests, one binary (one link for all of them).

mod async_api;
mod discover_failover;
mod docs;
mod reserve_taken;
mod vectors;
