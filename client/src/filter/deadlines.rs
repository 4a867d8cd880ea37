//! Tests of the contract's deadlines (docs/partitions.md, "One contract"): how long a lookup,
//! an add and a discover resend what a node down did not answer, over a transport whose nodes
//! are down for the first attempts.

use std::time::Duration;

use redis::{Cmd, RedisResult, Value};

use super::{Filter, ReadOptions, WriteOptions, DEFAULT_RETRY_FOR};
use crate::error::{Error, Result};
use crate::resp::Reply;
use crate::routing::{partition_keys, Master};
use crate::transport::{block, Commands, Transport};

const NAME: &[u8] = b"clicks";
const PARTITIONS: u32 = 4;
const SEED: u64 = 7;

/// A server that refuses connections for its first `down` pipelines (a master killed, its
/// replica not promoted yet), then answers: EXISTS 1, BF.MEXISTS and BF.INSERT 1 per item,
/// BF.INFO of [`NAME`] a descriptor of [`PARTITIONS`] partitions.
struct ComesBack {
    down: usize,
    /// Pipelines sent, answered or not.
    sent: usize,
}

impl ComesBack {
    fn answer(&self, cmd: &[u8]) -> Value {
        let Ok(Value::Array(args)) = redis::parse_redis_value(cmd) else {
            panic!("not a command: {:?}", String::from_utf8_lossy(cmd));
        };
        let arg = |v: &Value| match v {
            Value::BulkString(b) => b.clone(),
            other => panic!("argument {other:?}"),
        };
        let args: Vec<Vec<u8>> = args.iter().map(arg).collect();
        let ones = |n: usize| Value::Array(vec![Value::Int(1); n]);
        match args[0].as_slice() {
            b"EXISTS" => Value::Int(1),
            b"BF.MEXISTS" => ones(args.len() - 2),
            b"BF.INSERT" => ones(args.len() - 4),
            b"BF.INFO" => descriptor(),
            other => panic!("{}", String::from_utf8_lossy(other)),
        }
    }
}

/// BF.INFO of [`NAME`] as a descriptor answers it (the fields a discover reads).
fn descriptor() -> Value {
    let text = |s: &str| Value::BulkString(s.as_bytes().to_vec());
    let keys = partition_keys(NAME, PARTITIONS);
    Value::Array(vec![
        text("Partitions"),
        Value::Int(i64::from(PARTITIONS)),
        text("Routing seed"),
        text(&SEED.to_string()),
        text("Partition keys"),
        Value::Array(keys.into_iter().map(Value::BulkString).collect()),
    ])
}

impl Transport for ComesBack {
    async fn send_one(&mut self, cmd: &Cmd) -> Result<Value> {
        self.send_replies(&[cmd.clone()][..], &[0])
            .await
            .map(|mut replies| match replies.pop().flatten() {
                Some(reply) => reply.into_value(),
                None => Value::Nil,
            })
            .map_err(|e| Error::Connection(format!("connection error: {e}")))
    }

    async fn send_replies<C: Commands + ?Sized>(
        &mut self,
        cmds: &C,
        which: &[usize],
    ) -> RedisResult<Vec<Option<Reply>>> {
        self.sent += 1;
        if self.sent <= self.down {
            let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
            return Err(refused.into());
        }
        let mut replies = Vec::with_capacity(which.len());
        for &i in which {
            let mut packed = Vec::new();
            cmds.pack(i, &mut packed);
            replies.push(Some(Reply::Value(self.answer(&packed))));
        }
        Ok(replies)
    }

    async fn send_to_slot(&mut self, _: &Cmd, _: u16) -> RedisResult<Value> {
        unreachable!("no WAIT asked")
    }

    async fn slot_map(&mut self) -> Result<Vec<Master>> {
        unreachable!("no WAIT asked")
    }

    // Pauses are the transport's: none here, so that a test does not wait.
    async fn pause_then_reconnect(&mut self, _: Duration) {}
}

fn items() -> Vec<Vec<u8>> {
    (0..50).map(|i| format!("item-{i}").into_bytes()).collect()
}

fn filter() -> Filter {
    match block(Filter::discover_on(
        &mut ComesBack { down: 0, sent: 0 },
        NAME,
    )) {
        Ok(Some(f)) => f,
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_default_deadline_is_the_contracts_30_s_for_adds_and_lookups() {
    assert_eq!(DEFAULT_RETRY_FOR, Duration::from_secs(30));
    assert_eq!(WriteOptions::default().retry_for, DEFAULT_RETRY_FOR);
    assert_eq!(ReadOptions::default().retry_for, DEFAULT_RETRY_FOR);
}

#[test]
fn a_discover_whose_node_is_down_is_resent_until_it_answers() {
    let mut server = ComesBack { down: 3, sent: 0 };
    match block(Filter::discover_on(&mut server, NAME)) {
        Ok(Some(f)) => {
            let routing = f.partitioning().expect("a partitioned filter");
            assert_eq!(
                (routing.partitions, routing.routing_seed),
                (PARTITIONS, SEED)
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(server.sent, 4);
}

#[test]
fn a_lookup_is_resent_until_it_answers_within_its_deadline() {
    let filter = filter();
    let owned = items();
    let items: Vec<&[u8]> = owned.iter().map(Vec::as_slice).collect();
    let mut server = ComesBack { down: 3, sent: 0 };
    let found = block(filter.exists_on(&mut server, &items, &ReadOptions::default()));
    assert_eq!(found.expect("answered once back"), vec![true; items.len()]);
    assert_eq!(server.sent, 4);
}

#[test]
fn a_lookup_gives_up_at_the_deadline_it_was_given() {
    let filter = filter();
    let owned = items();
    let items: Vec<&[u8]> = owned.iter().map(Vec::as_slice).collect();
    let mut server = ComesBack {
        down: usize::MAX,
        sent: 0,
    };
    let opts = ReadOptions {
        retry_for: Duration::ZERO,
        ..ReadOptions::default()
    };
    match block(filter.exists_on(&mut server, &items, &opts)) {
        Err(Error::Connection(text)) => assert!(text.starts_with("gave up after 0s"), "{text}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(server.sent, 1);
}
