//! Persistence: AOF rewrites.

use std::time::Duration;

use redis::Connection;

use crate::keyspace::info_section;
use crate::server::wait_until;

/// Waits until a BGREWRITEAOF (started or scheduled) has finished, and checks it succeeded.
pub fn wait_rewrite_done(c: &mut Connection) {
    let ok = wait_until(Duration::from_secs(120), || {
        let p = info_section(c, "persistence");
        p.contains("aof_rewrite_in_progress:0") && p.contains("aof_rewrite_scheduled:0")
    });
    assert!(
        ok,
        "AOF rewrite did not finish: {}",
        info_section(c, "persistence")
    );
    let p = info_section(c, "persistence");
    assert!(
        p.contains("aof_last_bgrewrite_status:ok"),
        "rewrite failed: {p}"
    );
}
