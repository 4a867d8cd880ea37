//! Adds and lookups: items grouped by partition into batched commands, and their answers.

use std::time::Duration;

use redis::{Cmd, Value};

use super::reply::as_u64;
use super::reply::{bool_array, is_not_found};
use super::send::send_raw;
use super::send::send_until_answered;
use super::{key_cmd, AddCommand, Filter, WriteOptions};
use crate::connection::Connection;
use crate::error::{explain, server_error_text, Error, Result};
use crate::routing::key_slot;
use crate::transport::{block, Transport};

/// The commands of a lookup: BF.MEXISTS commands with the EXISTS checks of their partitions.
struct ExistsPlan {
    cmds: Vec<Cmd>,
    /// Position in `cmds` and partition of each EXISTS.
    checks: Vec<(usize, u32)>,
    /// Partition and input positions of each BF.MEXISTS, in order.
    placed: Vec<(Option<u32>, Vec<usize>)>,
}

impl Filter {
    /// Adds `items`, answering for each whether it was new. Items go to their keys (the name,
    /// or each item's partition) in `BF.INSERT key NOCREATE ITEMS …` commands of up to `batch`
    /// items, all in one pipeline per node: an add never creates a filter, so a key that no
    /// longer exists is [`Error::Vanished`] (with the items of this call that were added before)
    /// rather than a new, empty filter with the server's defaults. Commands whose reply was lost
    /// are resent as `opts.resend_lost_replies` says: their items may then answer "not new".
    pub fn add(
        &self,
        conn: &mut Connection,
        items: &[&[u8]],
        opts: &WriteOptions,
    ) -> Result<Vec<bool>> {
        block(self.add_on(conn, items, opts, AddCommand::Insert))
    }

    /// Adds `items` to a window filter at the time `at_ms` (Unix ms), as [`Filter::add`] does,
    /// in `BF.ADDAT key at_ms …` commands: the item is held for the window from `at_ms`'s
    /// generation on. BF.ADDAT never creates a filter, so a key that no longer exists is
    /// [`Error::Vanished`] and a resend can only add to the filter it was meant for.
    pub fn add_at(
        &self,
        conn: &mut Connection,
        at_ms: u64,
        items: &[&[u8]],
        opts: &WriteOptions,
    ) -> Result<Vec<bool>> {
        block(self.add_on(conn, items, opts, AddCommand::At(at_ms)))
    }

    pub(crate) async fn add_on(
        &self,
        conn: &mut impl Transport,
        items: &[&[u8]],
        opts: &WriteOptions,
        command: AddCommand,
    ) -> Result<Vec<bool>> {
        let (cmds, placed) = self.add_commands(items, opts, command);
        let slots = self.write_slots(&placed);
        let replies = send_until_answered(conn, &cmds, Some(&slots), opts).await?;
        self.add_answers(&replies, &placed, items.len())
    }

    /// The add commands of [`Filter::add`] / [`Filter::add_at`] and where their items are.
    #[allow(clippy::type_complexity)]
    fn add_commands(
        &self,
        items: &[&[u8]],
        opts: &WriteOptions,
        command: AddCommand,
    ) -> (Vec<Cmd>, Vec<(Option<u32>, Vec<usize>)>) {
        self.commands(items, opts.batch.max(1), |cmd, key, _| match command {
            AddCommand::Insert => {
                cmd.arg("BF.INSERT").arg(key).arg("NOCREATE").arg("ITEMS");
            }
            AddCommand::At(at_ms) => {
                cmd.arg("BF.ADDAT").arg(key).arg(at_ms);
            }
        })
    }

    /// [`Filter::add`]'s answers from the replies to [`Filter::add_commands`]: a key that no
    /// longer exists is [`Error::Vanished`] with the items acknowledged beside it.
    fn add_answers(
        &self,
        replies: &[Value],
        placed: &[(Option<u32>, Vec<usize>)],
        n: usize,
    ) -> Result<Vec<bool>> {
        let mut out = vec![false; n];
        let mut acknowledged = 0u64;
        let mut vanished = None;
        for (reply, (part, idx)) in replies.iter().zip(placed) {
            match reply {
                Value::ServerError(e) if is_not_found(&server_error_text(e)) => {
                    vanished.get_or_insert(*part);
                }
                // Ran beside a failed command, its reply unknown: not counted as acknowledged.
                Value::Nil => {}
                Value::ServerError(e) => return Err(explain(server_error_text(e))),
                reply => {
                    let answers = bool_array(reply, idx.len())?;
                    for (&i, a) in idx.iter().zip(answers) {
                        out[i] = a;
                    }
                    acknowledged += idx.len() as u64;
                }
            }
        }
        match vanished {
            Some(part) => Err(Error::Vanished {
                name: self.name_text(),
                key: String::from_utf8_lossy(self.key_of(part)).into_owned(),
                acknowledged,
            }),
            None => Ok(out),
        }
    }

    /// Adds `first` to the plain filter at `name` with `BF.INSERT name ITEMS first`, which
    /// creates the filter with the server's defaults (`bf.error-rate`, `bf.initial-capacity`,
    /// `bf.expansion`) when the key does not exist: the one add that may create, for a
    /// caller asked to create a missing filter with the defaults. Every later add goes through
    /// [`Filter::add`], which never creates. Answers the filter and whether `first` was new.
    /// A lost reply is resent: before this call nothing was acknowledged, so a filter that
    /// vanished in between is created as asked.
    pub fn create_with_defaults(
        conn: &mut Connection,
        name: &[u8],
        first: &[u8],
        opts: &WriteOptions,
    ) -> Result<(Filter, bool)> {
        block(Filter::create_with_defaults_on(conn, name, first, opts))
    }

    pub(crate) async fn create_with_defaults_on(
        conn: &mut impl Transport,
        name: &[u8],
        first: &[u8],
        opts: &WriteOptions,
    ) -> Result<(Filter, bool)> {
        let filter = Filter::plain(name);
        let mut cmd = redis::cmd("BF.INSERT");
        cmd.arg(name).arg("ITEMS").arg(first);
        let policy = WriteOptions {
            resend_lost_replies: true,
            ..opts.clone()
        };
        let slots = vec![key_slot(name)];
        let replies = send_until_answered(conn, &[cmd], Some(&slots), &policy).await?;
        let reply = replies
            .first()
            .ok_or_else(|| Error::Protocol("no reply to BF.INSERT".into()))?;
        if let Value::ServerError(e) = reply {
            return Err(explain(server_error_text(e)));
        }
        let new = bool_array(reply, 1)?.first().copied().unwrap_or(false);
        Ok((filter, new))
    }

    /// Looks `items` up, answers in order. On a partitioned filter every partition consulted is
    /// checked to exist first (EXISTS in the same pipeline): a missing one is an error, never a 0.
    pub fn exists(
        &self,
        conn: &mut Connection,
        items: &[&[u8]],
        batch: usize,
    ) -> Result<Vec<bool>> {
        block(self.exists_on(conn, items, batch))
    }

    pub(crate) async fn exists_on(
        &self,
        conn: &mut impl Transport,
        items: &[&[u8]],
        batch: usize,
    ) -> Result<Vec<bool>> {
        let plan = self.exists_plan(items, batch);
        let replies = send_raw(conn, &plan.cmds, Duration::from_secs(120)).await?;
        self.exists_answers(&plan, &replies, items.len())
    }

    /// The commands of [`Filter::exists`]: BF.MEXISTS of up to `batch` items, each partition's
    /// first one preceded by the EXISTS of its key.
    fn exists_plan(&self, items: &[&[u8]], batch: usize) -> ExistsPlan {
        let (cmds, placed) = self.commands(items, batch.max(1), |cmd, key, _| {
            cmd.arg("BF.MEXISTS").arg(key);
        });
        let mut with_checks: Vec<Cmd> = Vec::with_capacity(cmds.len() * 2);
        let mut checks = Vec::new();
        let mut checked: Vec<u32> = Vec::new();
        for (cmd, (part, _)) in cmds.into_iter().zip(&placed) {
            if let Some(p) = part {
                if !checked.contains(p) {
                    checked.push(*p);
                    checks.push((with_checks.len(), *p));
                    with_checks.push(key_cmd("EXISTS", self.key_of(Some(*p))));
                }
            }
            with_checks.push(cmd);
        }
        ExistsPlan {
            cmds: with_checks,
            checks,
            placed,
        }
    }

    /// [`Filter::exists`]'s answers from the replies to [`Filter::exists_plan`]'s commands: a
    /// partition that does not exist is [`Error::MissingPartition`], never a 0.
    fn exists_answers(&self, plan: &ExistsPlan, replies: &[Value], n: usize) -> Result<Vec<bool>> {
        let mut out = vec![false; n];
        for (at, p) in &plan.checks {
            if replies.get(*at).and_then(as_u64) != Some(1) {
                return Err(Error::MissingPartition {
                    name: self.name_text(),
                    key: String::from_utf8_lossy(self.key_of(Some(*p))).into_owned(),
                });
            }
        }
        let check_positions: Vec<usize> = plan.checks.iter().map(|(at, _)| *at).collect();
        let answers = replies
            .iter()
            .enumerate()
            .filter(|(i, _)| !check_positions.contains(i))
            .map(|(_, r)| r);
        for (reply, (_, idx)) in answers.zip(&plan.placed) {
            for (&i, a) in idx.iter().zip(bool_array(reply, idx.len())?) {
                out[i] = a;
            }
        }
        Ok(out)
    }
}
