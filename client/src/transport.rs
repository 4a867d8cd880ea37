//! What the synchronous and the async connections differ in: how commands travel. Every
//! operation of [`crate::Filter`] is written once, as an async fn over [`Transport`]; the
//! async API awaits it, the synchronous one runs it with [`block`].

use std::future::Future;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use redis::{Cmd, RedisResult, Value};

use crate::error::Result;
use crate::resp::Reply;
use crate::routing::{key_slot, Master};

/// A connection to a server or a cluster, as the operations use it.
pub(crate) trait Transport {
    /// One command (routed by its key); an error reply is [`crate::Error::Server`].
    fn send_one(&mut self, cmd: &Cmd) -> impl Future<Output = Result<Value>>;
    /// Commands `which` of `cmds` as a pipeline, whose replies a cluster may hide beside an
    /// error reply (`None`).
    fn send_replies<C: Commands + ?Sized>(
        &mut self,
        cmds: &C,
        which: &[usize],
    ) -> impl Future<Output = RedisResult<Vec<Option<Reply>>>>;
    /// One command to the master of `slot`.
    fn send_to_slot(&mut self, cmd: &Cmd, slot: u16) -> impl Future<Output = RedisResult<Value>>;
    /// The masters and their slots.
    fn slot_map(&mut self) -> impl Future<Output = Result<Vec<Master>>>;
    /// Waits `pause`, then reconnects (a failure is left for the next attempt to meet).
    fn pause_then_reconnect(&mut self, pause: Duration) -> impl Future<Output = ()>;
}

/// Commands sent by position: packed straight into a connection's own buffer, or built as
/// `redis::Cmd`s for a connection of the `redis` crate.
pub(crate) trait Commands {
    fn len(&self) -> usize;
    /// Appends command `i` packed in RESP.
    fn pack(&self, i: usize, out: &mut Vec<u8>);
    /// Command `i` for the `redis` crate.
    #[cfg(feature = "async")]
    fn cmd(&self, i: usize) -> Cmd;
    /// Command `i`'s key (every command this crate sends names its key first).
    fn key(&self, i: usize) -> &[u8];

    /// The slot of command `i`'s key.
    fn slot(&self, i: usize) -> u16 {
        key_slot(self.key(i))
    }

    /// Commands `which` for the `redis` crate.
    #[cfg(feature = "async")]
    fn cmds(&self, which: &[usize]) -> Vec<Cmd> {
        which.iter().map(|&i| self.cmd(i)).collect()
    }
}

impl Commands for [Cmd] {
    fn len(&self) -> usize {
        <[Cmd]>::len(self)
    }

    fn pack(&self, i: usize, out: &mut Vec<u8>) {
        self[i].write_packed_command(out);
    }

    #[cfg(feature = "async")]
    fn cmd(&self, i: usize) -> Cmd {
        self[i].clone()
    }

    fn key(&self, i: usize) -> &[u8] {
        match self[i].args_iter().nth(1) {
            Some(redis::Arg::Simple(key)) => key,
            _ => b"",
        }
    }
}

/// Runs `f` to its end on this thread. Meant for the futures of the synchronous transport,
/// which do their work when first polled and never wait on a waker; polling again is what any
/// other future would get.
pub(crate) fn block<F: Future>(f: F) -> F::Output {
    let mut f = std::pin::pin!(f);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(out) = f.as_mut().poll(&mut cx) {
            return out;
        }
        std::thread::yield_now();
    }
}
