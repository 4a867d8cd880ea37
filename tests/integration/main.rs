//! The integration tests of the module, one binary: each file is a module (one link for all of
//! them). Each test starts its own servers (rustbloom_testkit::Server), so they run in parallel.

mod atomic_slot_migration;
mod cluster;
mod command_docs;
mod command_plan;
mod commands;
mod compat;
mod config;
mod defrag;
mod descriptors;
mod differential;
mod dump_restore_copy;
mod durability_aof;
mod durability_big;
mod durability_rdb;
mod durability_replication;
mod errors;
mod golden;
mod hostile_arguments;
mod hostile_limits;
mod hostile_loadchunk;
mod hostile_restore;
mod keyspace;
mod limits_paths;
mod maxmemory_policy;
mod memory_slack;
mod partitions;
mod readme;
mod redisbloom_compat;
mod redisbloom_encodings;
mod replication_effects;
mod scaling;
mod scandump;
mod soundness_redisbloom;
mod valkeybloom_data;
mod window;
