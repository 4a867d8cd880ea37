//! bfctl's integration tests, one binary: each file is a module (one link for all of them).

mod build;
mod cli;
mod cluster;
mod common;
mod connect;
mod contract;
mod long_line;
mod merge;
mod migrate;
mod migrate_valkey;
mod offline;
mod readme;
mod reserve_like;
mod restore;
mod timestamped;
mod url_node_failover;
mod vanish;
