//! Sending a filter's commands until every one is answered, as [`Delivery`] decides, with
//! the WAITs it asks for.

use std::time::Duration;

use redis::Value;

use super::WriteOptions;
use crate::delivery::{
    wait_answer, wait_cmd, wait_targets, Delivery, Step, WaitFailure, DEFAULT_RETRY_FOR,
};
use crate::error::{explain, server_error_text, Result};
use crate::resp::Reply;
use crate::transport::{Commands, Transport};

/// How long reads and deletes retry: the contract's deadline.
pub(super) const INFO_RETRY: Duration = DEFAULT_RETRY_FOR;

/// Sends `cmds` as one pipeline (reads and deletes: resent whole after any transient failure)
/// and answers the replies; the first error reply is the error.
pub(super) async fn send_raw<C: Commands + ?Sized>(
    conn: &mut impl Transport,
    cmds: &C,
    retry_for: Duration,
) -> Result<Vec<Value>> {
    let replies = send_reads(conn, cmds, retry_for).await?;
    Ok(replies.into_iter().map(Reply::into_value).collect())
}

/// [`send_raw`] with answer arrays left as answers.
pub(super) async fn send_reads<C: Commands + ?Sized>(
    conn: &mut impl Transport,
    cmds: &C,
    retry_for: Duration,
) -> Result<Vec<Reply>> {
    let opts = WriteOptions {
        retry_for,
        ..WriteOptions::default()
    };
    let replies = send_until_answered(conn, cmds, None, &opts).await?;
    match replies.iter().find_map(Reply::server_error) {
        Some(e) => Err(explain(server_error_text(e))),
        None => Ok(replies),
    }
}

/// Sends `cmds` until every one is answered, as [`Delivery`] decides: resending what the
/// server did not run, reconnecting and pausing between attempts, WAITing when asked.
pub(super) async fn send_until_answered<C: Commands + ?Sized>(
    conn: &mut impl Transport,
    cmds: &C,
    wait_slots: Option<&[u16]>,
    opts: &WriteOptions,
) -> Result<Vec<Reply>> {
    if cmds.len() == 0 {
        return Ok(Vec::new());
    }
    let mut delivery = Delivery::new(cmds.len(), wait_slots, opts);
    loop {
        let sent = conn.send_replies(cmds, delivery.pending()).await;
        let mut step = delivery.received(sent)?;
        if let Step::Wait(wait, slots) = step {
            step = delivery.waited(wait_for_replicas(conn, wait, &slots).await)?;
        }
        match step {
            Step::Done(replies) => return Ok(replies),
            Step::Resend | Step::Wait(..) => {}
            Step::Pause(pause) => {
                if let Some(watcher) = &opts.on_stall {
                    watcher.tell(&delivery.stall(cmds));
                }
                conn.pause_then_reconnect(pause).await
            }
        }
    }
}

/// `WAIT replicas timeout` once on the master of each slot.
pub(super) async fn wait_for_replicas(
    conn: &mut impl Transport,
    (replicas, timeout): (u32, Duration),
    slots: &[u16],
) -> std::result::Result<(), WaitFailure> {
    let masters = conn
        .slot_map()
        .await
        .map_err(|e| WaitFailure::Transient(e.to_string()))?;
    for (slot, addr) in wait_targets(&masters, slots) {
        let reply = conn.send_to_slot(&wait_cmd(replicas, timeout), slot).await;
        wait_answer(reply, replicas, &addr)?;
    }
    Ok(())
}
