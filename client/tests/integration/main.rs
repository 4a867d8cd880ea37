//! The client's integration tests, one binary (one link for all of them).

mod async_api;
mod vectors;
