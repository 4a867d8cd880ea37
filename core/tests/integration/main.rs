//! The core's integration tests, one binary (one link for all of them).

mod partitioning;
mod redisbloom;
mod small_filters;
