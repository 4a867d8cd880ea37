//! How a pipeline of commands is delivered until every command is answered, whatever sends it:
//! the decisions (what to resend, when to pause, when to WAIT, when to give up) are made here,
//! and the synchronous and the async transports only carry them out.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::{Cmd, RedisResult, Value};

use crate::error::{
    explain, is_transient, is_transient_text, server_error_text, server_text, to_error, Error,
    Result,
};
use crate::filter::reply::as_u64;
use crate::resp::Reply;
use crate::routing::Master;

/// How long a command whose reply was lost (or that a cluster in a failover did not run) is sent
/// again before the call fails with [`Error::Connection`]: the contract's 30 s
/// (docs/partitions.md, "One contract"), as the Python, PHP and Node clients' `retry_for`.
pub const DEFAULT_RETRY_FOR: Duration = Duration::from_secs(30);

/// How lookups are sent ([`crate::Filter::exists_with`]).
#[derive(Clone, Debug)]
pub struct ReadOptions {
    /// Most items per BF.MEXISTS command.
    pub batch: usize,
    /// How long commands the server did not run or whose reply was lost are sent again (a
    /// lookup changes nothing, so it is always resent) before the call fails with
    /// [`Error::Connection`].
    pub retry_for: Duration,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            batch: 1000,
            retry_for: DEFAULT_RETRY_FOR,
        }
    }
}

/// How adds are sent.
#[derive(Clone, Debug)]
pub struct WriteOptions {
    /// Most items per BF.INSERT command.
    pub batch: usize,
    /// After each pipeline, `WAIT replicas timeout` on every master it wrote to; fewer
    /// acknowledgements than asked resend the pipeline.
    pub wait: Option<(u32, Duration)>,
    /// How long commands the server did not run (CLUSTERDOWN, TRYAGAIN, LOADING, …) and, with
    /// `resend_lost_replies`, commands whose reply was lost are sent again before giving up
    /// ([`DEFAULT_RETRY_FOR`] by default).
    pub retry_for: Duration,
    /// Resend commands whose reply was lost (a dropped connection, a failover): they may or may
    /// not have run, so an item the lost attempt added answers "not new" the second time. Adds
    /// never create the filter (BF.INSERT … NOCREATE), so a resend can add only to the filter
    /// it was meant for. Off for a caller whose output is the "new" answers (a dedup): a lost
    /// reply is then an error, since its items' answers cannot be known.
    pub resend_lost_replies: bool,
    /// Told when a call starts waiting (a node unreachable, a cluster down, a WAIT short of
    /// replicas) and before every retry while it waits; never while every command is answered
    /// at once. For a caller that shows progress: a wait of up to `retry_for` is otherwise
    /// silent.
    pub on_stall: Option<StallWatcher>,
}

/// What a call is waiting for, told to [`WriteOptions::on_stall`].
#[derive(Clone, Debug, PartialEq)]
pub struct Stall {
    /// The keys whose commands are not answered yet (the filter's name or partition keys),
    /// each once, in the order of the commands.
    pub keys: Vec<Vec<u8>>,
    /// The failure it waits to end: `CLUSTERDOWN The cluster is down`, a connection error,
    /// `WAIT 1: 0 replicas of host:port acknowledged`…
    pub reason: String,
    /// Since the call's first failure.
    pub waited: Duration,
    /// How much longer it waits at most: it gives up `retry_for` after the call began.
    pub gives_up_in: Duration,
}

/// The function [`WriteOptions::on_stall`] calls (shared, so that options stay cheap to clone).
#[derive(Clone)]
pub struct StallWatcher(Arc<dyn Fn(&Stall) + Send + Sync>);

impl StallWatcher {
    pub fn new(watch: impl Fn(&Stall) + Send + Sync + 'static) -> StallWatcher {
        StallWatcher(Arc::new(watch))
    }

    pub(crate) fn tell(&self, stall: &Stall) {
        (self.0)(stall);
    }
}

impl fmt::Debug for StallWatcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("StallWatcher")
    }
}

impl Default for WriteOptions {
    fn default() -> Self {
        WriteOptions {
            batch: 1000,
            wait: None,
            retry_for: DEFAULT_RETRY_FOR,
            resend_lost_replies: true,
            on_stall: None,
        }
    }
}

/// What the transport does next for a [`Delivery`].
pub(crate) enum Step {
    /// Send [`Delivery::pending`] again at once.
    Resend,
    /// `WAIT replicas timeout` on the masters of these slots, and tell [`Delivery::waited`].
    Wait((u32, Duration), Vec<u16>),
    /// Sleep this long, reconnect (for a cluster: a fresh slot map), then send again.
    Pause(Duration),
    /// Every command answered: the replies, in order.
    Done(Vec<Reply>),
}

/// A WAIT that fell short.
pub(crate) enum WaitFailure {
    Transient(String),
    Fatal(Error),
}

/// Sends `n` commands as one pipeline until every command is answered: a command the server did not
/// run (a transient error reply: CLUSTERDOWN, TRYAGAIN, LOADING, …) is sent again, the answered
/// ones are kept; commands whose replies were lost are sent again when
/// `opts.resend_lost_replies`, else that is an error. Each resend follows a reconnect, until
/// `opts.retry_for` has passed. With `opts.wait` and `wait_slots`, WAITs on the master of every
/// given slot (once per master) and resends the whole pipeline when fewer replicas than asked
/// acknowledged. An error reply a resend cannot cure ends it: the replies come back with it as
/// `Value::ServerError`. A cluster hides the other replies of a pipeline with an error; those
/// commands ran, and are sent again for their answers when `opts.resend_lost_replies`, else
/// come back as `Value::Nil`.
pub(crate) struct Delivery<'a> {
    wait: Option<((u32, Duration), &'a [u16])>,
    opts: &'a WriteOptions,
    deadline: Instant,
    pause: Duration,
    replies: Vec<Option<Reply>>,
    /// The positions [`Delivery::pending`] last gave out.
    sending: Vec<usize>,
    /// The first complete answer: when only the WAIT fell short, the pipeline is resent for
    /// durability, and its second answer would call every item already present.
    answered: Option<Vec<Reply>>,
    /// The answer waiting for its WAIT.
    waiting: Vec<Reply>,
    /// The first failure's time and the last failure, while it waits.
    stalled: Option<(Instant, String)>,
}

impl<'a> Delivery<'a> {
    pub(crate) fn new(
        n: usize,
        wait_slots: Option<&'a [u16]>,
        opts: &'a WriteOptions,
    ) -> Delivery<'a> {
        Delivery {
            wait: opts.wait.zip(wait_slots),
            opts,
            deadline: Instant::now() + opts.retry_for,
            pause: Duration::from_millis(50),
            replies: vec![None; n],
            sending: Vec::new(),
            answered: None,
            waiting: Vec::new(),
            stalled: None,
        }
    }

    /// The positions of the commands to send now: those not answered yet.
    pub(crate) fn pending(&mut self) -> &[usize] {
        self.sending = (0..self.replies.len())
            .filter(|&i| self.replies[i].is_none())
            .collect();
        &self.sending
    }

    /// Takes the result of sending [`Delivery::pending`]: a reply per command, `None` for one
    /// a cluster hid beside an error reply.
    pub(crate) fn received(&mut self, sent: RedisResult<Vec<Option<Reply>>>) -> Result<Step> {
        let pending = std::mem::take(&mut self.sending);
        // Replies lost with the connection, and replies a cluster hid beside an error reply.
        let (mut transient, mut lost, mut hidden) = (None, 0usize, 0usize);
        match sent {
            Ok(got) => {
                for (&i, reply) in pending.iter().zip(got) {
                    match reply {
                        Some(reply)
                            if reply
                                .server_error()
                                .is_some_and(|e| is_transient_text(&server_error_text(e))) =>
                        {
                            let text = reply.server_error().map(server_error_text);
                            transient.get_or_insert(text.unwrap_or_default());
                        }
                        Some(reply) => self.replies[i] = Some(reply),
                        None => hidden += 1,
                    }
                }
            }
            Err(e) if is_transient(&e) => {
                lost = pending.len();
                transient = Some(server_text(&e));
            }
            Err(e) => return Err(to_error(&e)),
        }
        let failed = self
            .replies
            .iter()
            .any(|r| r.as_ref().is_some_and(|r| r.server_error().is_some()));
        // The hidden replies of commands that ran are asked again at once (when resending is
        // harmless), so that the caller learns what the server acknowledged.
        if failed && hidden > 0 && self.opts.resend_lost_replies && transient.is_none() {
            return Ok(Step::Resend);
        }
        if failed {
            let replies = std::mem::take(&mut self.replies);
            return Ok(Step::Done(
                replies
                    .into_iter()
                    .map(|r| r.unwrap_or(Reply::Value(Value::Nil)))
                    .collect(),
            ));
        }
        lost += hidden;
        if lost > 0 && !self.opts.resend_lost_replies {
            return Err(Error::Connection(format!(
                "the replies to {lost} commands were lost, so whether they ran is unknown{}",
                transient.map(|t| format!(": {t}")).unwrap_or_default()
            )));
        }
        let last = match transient {
            Some(text) => text,
            None if lost > 0 => "replies lost".to_string(),
            None => {
                let done: Vec<Reply> = self.replies.iter_mut().filter_map(Option::take).collect();
                return Ok(match self.wait {
                    None => Step::Done(self.answered.take().unwrap_or(done)),
                    Some((wait, slots)) => {
                        self.waiting = done;
                        Step::Wait(wait, slots.to_vec())
                    }
                });
            }
        };
        self.pause_after(last)
    }

    /// Takes the outcome of the WAIT [`Step::Wait`] asked for.
    pub(crate) fn waited(&mut self, outcome: std::result::Result<(), WaitFailure>) -> Result<Step> {
        let done = std::mem::take(&mut self.waiting);
        match outcome {
            Ok(()) => Ok(Step::Done(self.answered.take().unwrap_or(done))),
            Err(WaitFailure::Transient(t)) => {
                self.answered.get_or_insert(done);
                self.pause_after(t)
            }
            Err(WaitFailure::Fatal(e)) => Err(e),
        }
    }

    /// A pause before the next attempt, growing up to a second, or the end after `last`
    /// failure once the deadline would pass.
    fn pause_after(&mut self, last: String) -> Result<Step> {
        if Instant::now() + self.pause > self.deadline {
            return Err(Error::Connection(format!(
                "gave up after {}s of retries: {last}",
                self.opts.retry_for.as_secs()
            )));
        }
        let pause = self.pause;
        self.pause = (pause * 2).min(Duration::from_secs(1));
        let since = self.stalled.take().map_or_else(Instant::now, |(at, _)| at);
        self.stalled = Some((since, last));
        Ok(Step::Pause(pause))
    }

    /// What it waits for, after a [`Step::Pause`]: the keys of `cmds` not answered yet.
    pub(crate) fn stall<C: crate::transport::Commands + ?Sized>(&self, cmds: &C) -> Stall {
        let mut keys: Vec<Vec<u8>> = Vec::new();
        for i in (0..self.replies.len()).filter(|&i| self.replies[i].is_none()) {
            let key = cmds.key(i);
            if !keys.iter().any(|k| k == key) {
                keys.push(key.to_vec());
            }
        }
        let (waited, reason) = match &self.stalled {
            Some((since, reason)) => (since.elapsed(), reason.clone()),
            None => (Duration::ZERO, String::new()),
        };
        Stall {
            keys,
            reason,
            waited,
            gives_up_in: self.deadline.saturating_duration_since(Instant::now()),
        }
    }
}

/// The slots to WAIT on, one per master that serves any of `slots`, with its address.
pub(crate) fn wait_targets(masters: &[Master], slots: &[u16]) -> Vec<(u16, String)> {
    let mut targets: Vec<(u16, String)> = Vec::new();
    for &slot in slots {
        let addr = masters
            .iter()
            .find(|m| m.owns(slot))
            .map(|m| m.addr.clone())
            .unwrap_or_default();
        if !targets.iter().any(|(_, a)| *a == addr) {
            targets.push((slot, addr));
        }
    }
    targets
}

/// `WAIT replicas timeout`.
pub(crate) fn wait_cmd(replicas: u32, timeout: Duration) -> Cmd {
    let mut cmd = redis::cmd("WAIT");
    cmd.arg(replicas).arg(timeout.as_millis() as u64);
    cmd
}

/// Whether master `addr`'s answer to [`wait_cmd`] counts `replicas` acknowledgements.
pub(crate) fn wait_answer(
    reply: RedisResult<Value>,
    replicas: u32,
    addr: &str,
) -> std::result::Result<(), WaitFailure> {
    match reply {
        Ok(v) => match as_u64(&v) {
            Some(n) if n >= u64::from(replicas) => Ok(()),
            Some(n) => Err(WaitFailure::Transient(format!(
                "WAIT {replicas}: {n} replicas of {addr} acknowledged"
            ))),
            None => match v {
                Value::ServerError(e) => Err(WaitFailure::Fatal(explain(server_error_text(&e)))),
                other => Err(WaitFailure::Fatal(Error::Protocol(format!(
                    "WAIT answered {other:?}"
                )))),
            },
        },
        Err(e) if is_transient(&e) => Err(WaitFailure::Transient(server_text(&e))),
        Err(e) => Err(WaitFailure::Fatal(to_error(&e))),
    }
}
