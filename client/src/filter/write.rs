//! Adds and lookups: items grouped by partition into batched commands, and their answers.

#[cfg(feature = "async")]
use redis::Cmd;
use redis::Value;

#[cfg(feature = "async")]
use super::key_cmd;
use super::reply::as_u64;
use super::reply::{fill_answers, is_not_found};
use super::send::{send_reads, send_until_answered};
use super::{Batches, Filter, Head, ReadOptions, WriteOptions};
use crate::connection::Connection;
use crate::error::{explain, server_error_text, Error, Result};
use crate::pack::{array_header, bulk};
use crate::resp::Reply;
use crate::routing::key_slot;
use crate::transport::{block, Commands, Transport};

/// A command of a lookup.
enum Lookup {
    /// `EXISTS key` of a partition, before its first BF.MEXISTS.
    Check(u32),
    /// BF.MEXISTS command `i` of the batches.
    Batch(usize),
}

/// The commands of a lookup: BF.MEXISTS commands with the EXISTS checks of their partitions.
struct ExistsPlan<'a> {
    batches: Batches<'a>,
    lookups: Vec<Lookup>,
}

impl Commands for ExistsPlan<'_> {
    fn len(&self) -> usize {
        self.lookups.len()
    }

    fn pack(&self, i: usize, out: &mut Vec<u8>) {
        match self.lookups[i] {
            Lookup::Check(p) => {
                array_header(out, 2);
                bulk(out, b"EXISTS");
                bulk(out, self.batches.key(Some(p)));
            }
            Lookup::Batch(j) => self.batches.pack(j, out),
        }
    }

    fn key(&self, i: usize) -> &[u8] {
        match self.lookups[i] {
            Lookup::Check(p) => self.batches.key(Some(p)),
            Lookup::Batch(j) => self.batches.key(self.batches.part(j)),
        }
    }

    #[cfg(feature = "async")]
    fn cmd(&self, i: usize) -> Cmd {
        match self.lookups[i] {
            Lookup::Check(p) => key_cmd("EXISTS", self.batches.key(Some(p))),
            Lookup::Batch(j) => self.batches.cmd(j),
        }
    }
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
        block(self.add_on(conn, items, opts, Head::Insert))
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
        block(self.add_on(conn, items, opts, Head::At(at_ms)))
    }

    pub(crate) async fn add_on(
        &self,
        conn: &mut impl Transport,
        items: &[&[u8]],
        opts: &WriteOptions,
        head: Head,
    ) -> Result<Vec<bool>> {
        let batches = Batches::new(self, items, opts.batch, head);
        let slots = self.write_slots(&batches);
        let replies = send_until_answered(conn, &batches, Some(&slots), opts).await?;
        self.add_answers(&replies, &batches, items.len())
    }

    /// [`Filter::add`]'s answers from the replies to `batches`: a key that no longer exists is
    /// [`Error::Vanished`] with the items acknowledged beside it.
    fn add_answers(&self, replies: &[Reply], batches: &Batches, n: usize) -> Result<Vec<bool>> {
        let mut out = vec![false; n];
        let mut acknowledged = 0u64;
        let mut vanished = None;
        for (i, reply) in replies.iter().enumerate() {
            match reply {
                Reply::Value(Value::ServerError(e)) if is_not_found(&server_error_text(e)) => {
                    vanished.get_or_insert(batches.part(i));
                }
                // Ran beside a failed command, its reply unknown: not counted as acknowledged.
                Reply::Value(Value::Nil) => {}
                Reply::Value(Value::ServerError(e)) => return Err(explain(server_error_text(e))),
                reply => {
                    let positions = batches.positions(i);
                    fill_answers(reply, positions, &mut out)?;
                    acknowledged += positions.len() as u64;
                }
            }
        }
        match vanished {
            Some(part) => Err(Error::Vanished {
                name: self.name_text(),
                index: part,
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
        let replies = send_until_answered(conn, &[cmd][..], Some(&slots), &policy).await?;
        let reply = replies
            .first()
            .ok_or_else(|| Error::Protocol("no reply to BF.INSERT".into()))?;
        if let Some(e) = reply.server_error() {
            return Err(explain(server_error_text(e)));
        }
        let mut new = [false];
        fill_answers(reply, &[0], &mut new)?;
        Ok((filter, new[0]))
    }

    /// Looks `items` up in BF.MEXISTS commands of up to `batch` items, answers in order; a
    /// lost reply is resent for up to [`DEFAULT_RETRY_FOR`](crate::DEFAULT_RETRY_FOR) ([`Filter::exists_with`] sets it).
    /// On a partitioned filter every partition consulted is checked to exist first (EXISTS in
    /// the same pipeline): a missing one is an error, never a 0.
    pub fn exists(
        &self,
        conn: &mut Connection,
        items: &[&[u8]],
        batch: usize,
    ) -> Result<Vec<bool>> {
        let opts = ReadOptions {
            batch,
            ..ReadOptions::default()
        };
        self.exists_with(conn, items, &opts)
    }

    /// [`Filter::exists`] with the batch and the deadline of `opts`.
    pub fn exists_with(
        &self,
        conn: &mut Connection,
        items: &[&[u8]],
        opts: &ReadOptions,
    ) -> Result<Vec<bool>> {
        block(self.exists_on(conn, items, opts))
    }

    pub(crate) async fn exists_on(
        &self,
        conn: &mut impl Transport,
        items: &[&[u8]],
        opts: &ReadOptions,
    ) -> Result<Vec<bool>> {
        let plan = self.exists_plan(items, opts.batch);
        let replies = send_reads(conn, &plan, opts.retry_for).await?;
        self.exists_answers(&plan, &replies, items.len())
    }

    /// The commands of [`Filter::exists`]: BF.MEXISTS of up to `batch` items, each partition's
    /// first one preceded by the EXISTS of its key.
    fn exists_plan<'a>(&'a self, items: &'a [&'a [u8]], batch: usize) -> ExistsPlan<'a> {
        let batches = Batches::new(self, items, batch, Head::MExists);
        let mut lookups = Vec::with_capacity(batches.len() * 2);
        let mut last = None;
        for i in 0..batches.len() {
            let part = batches.part(i);
            if let Some(p) = part.filter(|_| last != Some(part)) {
                lookups.push(Lookup::Check(p));
            }
            last = Some(part);
            lookups.push(Lookup::Batch(i));
        }
        ExistsPlan { batches, lookups }
    }

    /// [`Filter::exists`]'s answers from the replies to [`Filter::exists_plan`]'s commands: a
    /// partition that does not exist is [`Error::MissingPartition`], never a 0.
    fn exists_answers(&self, plan: &ExistsPlan, replies: &[Reply], n: usize) -> Result<Vec<bool>> {
        for (lookup, reply) in plan.lookups.iter().zip(replies) {
            if let Lookup::Check(p) = lookup {
                let exists = match reply {
                    Reply::Value(v) => as_u64(v),
                    Reply::Answers(_) => None,
                };
                if exists != Some(1) {
                    return Err(Error::MissingPartition {
                        name: self.name_text(),
                        index: *p,
                        key: String::from_utf8_lossy(self.key_of(Some(*p))).into_owned(),
                    });
                }
            }
        }
        let mut out = vec![false; n];
        for (lookup, reply) in plan.lookups.iter().zip(replies) {
            if let Lookup::Batch(i) = lookup {
                fill_answers(reply, plan.batches.positions(*i), &mut out)?;
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{HashMap, HashSet};
    use std::time::Duration;

    use redis::{RedisResult, Value};

    use super::*;
    use crate::filter::Partitioning;
    use crate::resp::ReplyReader;
    use crate::routing::{partition_keys, partition_of, Master};

    /// A server in memory: a set per key, and error replies scripted by the commands' order
    /// of arrival (the n-th command sent gets `faults[n]` instead of running).
    struct FakeServer {
        sets: HashMap<Vec<u8>, HashSet<Vec<u8>>>,
        faults: HashMap<usize, &'static [u8]>,
        /// Every command received, as its arguments, in order.
        received: Vec<Vec<Vec<u8>>>,
    }

    impl FakeServer {
        fn new(keys: &[Vec<u8>], faults: &[(usize, &'static [u8])]) -> FakeServer {
            FakeServer {
                sets: keys.iter().map(|k| (k.clone(), HashSet::new())).collect(),
                faults: faults.iter().copied().collect(),
                received: Vec::new(),
            }
        }

        fn run(&mut self, packed: &[u8]) -> Value {
            let Ok(Value::Array(args)) = redis::parse_redis_value(packed) else {
                panic!("not a command: {:?}", String::from_utf8_lossy(packed));
            };
            let args: Vec<Vec<u8>> = args
                .into_iter()
                .map(|a| match a {
                    Value::BulkString(b) => b,
                    other => panic!("argument {other:?}"),
                })
                .collect();
            self.received.push(args.clone());
            if let Some(fault) = self.faults.get(&(self.received.len() - 1)) {
                return redis::parse_redis_value(fault).expect("a scripted reply");
            }
            let (name, key) = (&args[0], &args[1]);
            assert_eq!(
                &args[2..4],
                [b"NOCREATE".to_vec(), b"ITEMS".to_vec()],
                "{name:?}"
            );
            let Some(set) = self.sets.get_mut(key) else {
                return redis::parse_redis_value(b"-ERR not found\r\n").expect("an error");
            };
            Value::Array(
                args[4..]
                    .iter()
                    .map(|item| Value::Int(i64::from(set.insert(item.clone()))))
                    .collect(),
            )
        }
    }

    impl Transport for FakeServer {
        async fn send_one(&mut self, _: &Cmd) -> Result<Value> {
            unreachable!("adds send pipelines")
        }

        async fn send_replies<C: Commands + ?Sized>(
            &mut self,
            cmds: &C,
            which: &[usize],
        ) -> RedisResult<Vec<Option<Reply>>> {
            let mut replies = Vec::new();
            for &i in which {
                let mut packed = Vec::new();
                cmds.pack(i, &mut packed);
                replies.push(Some(Reply::Value(self.run(&packed))));
            }
            Ok(replies)
        }

        async fn send_to_slot(&mut self, _: &Cmd, _: u16) -> RedisResult<Value> {
            unreachable!("no WAIT asked")
        }

        async fn slot_map(&mut self) -> Result<Vec<Master>> {
            unreachable!("no WAIT asked")
        }

        async fn pause_then_reconnect(&mut self, _: Duration) {}
    }

    fn partitioned(partitions: u32) -> Filter {
        Filter {
            name: b"f".to_vec(),
            partitioning: Some(Partitioning {
                partitions,
                routing_seed: 9,
                keys: partition_keys(b"f", partitions),
            }),
        }
    }

    fn words() -> Vec<Vec<u8>> {
        // Every tenth word comes again later in the same call.
        (0..300u32)
            .map(|i| format!("w{}", if i % 10 == 9 { i - 5 } else { i }).into_bytes())
            .collect()
    }

    #[test]
    fn commands_redirected_mid_batch_are_resent_alone_and_every_item_answered_once() {
        let filter = partitioned(4);
        let words = words();
        let items: Vec<&[u8]> = words.iter().map(Vec::as_slice).collect();
        let opts = WriteOptions {
            batch: 20,
            ..WriteOptions::default()
        };
        let faults: [(usize, &'static [u8]); 2] = [
            (2, b"-MOVED 866 127.0.0.1:7001\r\n"),
            (5, b"-ASK 866 127.0.0.1:7002\r\n"),
        ];
        let keys = filter.keys();
        let mut server = FakeServer::new(&keys[1..], &faults);
        let answers = block(filter.add_on(&mut server, &items, &opts, Head::Insert))
            .expect("the redirected commands resent");
        // Every distinct item answers "new" exactly once: a redirected command ran after the
        // commands behind it, so a repeated item may be new at its later place.
        let mut new_at: HashMap<&[u8], usize> = HashMap::new();
        for (item, new) in items.iter().zip(&answers) {
            *new_at.entry(item).or_default() += usize::from(*new);
        }
        assert_eq!(answers.len(), items.len());
        assert!(new_at.values().all(|&n| n == 1), "{new_at:?}");
        // The first round sent every command once; the second only the two redirected ones,
        // as they were.
        let sent = &server.received;
        let first_round = sent.len() - 2;
        assert_eq!(&sent[first_round..], [sent[2].clone(), sent[5].clone()]);
        for command in sent {
            let part = partition_of(&command[4], 9, 4);
            assert_eq!(command[1], keys[1 + part as usize]);
            assert!(command[4..].iter().all(|i| partition_of(i, 9, 4) == part));
            assert!(command.len() - 4 <= 20);
        }
    }

    #[test]
    fn a_partition_gone_mid_batch_counts_exactly_the_items_acknowledged() {
        let filter = partitioned(4);
        let words = words();
        let items: Vec<&[u8]> = words.iter().map(Vec::as_slice).collect();
        let opts = WriteOptions {
            batch: 20,
            ..WriteOptions::default()
        };
        let keys = filter.keys();
        // Partition 2 does not exist.
        let present: Vec<Vec<u8>> = keys[1..]
            .iter()
            .filter(|k| **k != keys[3])
            .cloned()
            .collect();
        let mut server = FakeServer::new(&present, &[]);
        let got = block(filter.add_on(&mut server, &items, &opts, Head::Insert));
        let elsewhere = items.iter().filter(|i| partition_of(i, 9, 4) != 2).count() as u64;
        match got {
            Err(Error::Vanished {
                key, acknowledged, ..
            }) => {
                assert_eq!(key.as_bytes(), keys[3]);
                assert_eq!(acknowledged, elsewhere);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_error_inside_an_answer_array_is_the_servers_error() {
        let mut out = [false; 3];
        let reply = redis::parse_redis_value(b"*2\r\n:1\r\n-ERR non scaling filter is full\r\n")
            .expect("valid");
        match fill_answers(&Reply::Value(reply), &[0, 1, 2], &mut out) {
            Err(Error::Server(t)) => assert_eq!(t, "non scaling filter is full"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_reply_of_the_wrong_shape_is_refused_with_what_came() {
        for (reply, says) in [
            (&b"+OK\r\n"[..], "expected an array, got"),
            (b"*2\r\n:1\r\n$1\r\nx\r\n", "answer"),
            (b"*2\r\n:1\r\n:2\r\n", "answer"),
            (b"*3\r\n:1\r\n:0\r\n:1\r\n", "3 answers for 2 items"),
            (b"*1\r\n:1\r\n", "1 answers for 2 items"),
        ] {
            let mut out = [false; 2];
            // As read off the connection: answer arrays as answers, the rest as values.
            let reply = ReplyReader::default()
                .read_answers(&mut &reply[..])
                .expect("valid");
            match fill_answers(&reply, &[0, 1], &mut out) {
                Err(e @ Error::Protocol(_)) => {
                    let text = e.to_string();
                    assert!(text.contains(says), "{text}");
                }
                other => panic!("{reply:?}: {other:?}"),
            }
        }
    }
}
