//! Raw commands and their replies: error texts, conversions of `redis::Value`.

use redis::{Connection, RedisError, Value};

/// Full server error text, e.g. `ERR bad capacity` or `WRONGTYPE Operation against ...`.
pub fn err_text(e: &RedisError) -> String {
    match (e.code(), e.detail()) {
        (Some(c), Some(d)) => format!("{c} {d}"),
        (Some(c), None) => c.to_string(),
        _ => format!("<non-server error: {e}>"),
    }
}

/// Full text of a server error nested in a reply.
pub fn server_err_text(e: &redis::ServerError) -> String {
    match e.details() {
        Some(d) => format!("{} {}", e.code(), d),
        None => e.code().to_string(),
    }
}

/// Run a raw command; returns the reply (nested errors kept as `Value::ServerError`) or the
/// full error text of a top-level error.
pub fn raw<T: redis::ToRedisArgs>(c: &mut Connection, args: &[T]) -> Result<Value, String> {
    use redis::ConnectionLike;
    let mut cmd = redis::Cmd::new();
    for a in args {
        cmd.arg(a);
    }
    match c.req_command(&cmd) {
        Ok(Value::ServerError(e)) => Err(server_err_text(&e)),
        Ok(v) => Ok(v),
        Err(e) => Err(err_text(&e)),
    }
}

/// Run a raw command built from byte-string args.
pub fn rawb(c: &mut Connection, args: &[&[u8]]) -> Result<Value, String> {
    raw(c, args)
}

/// Run a raw command that must fail; returns the full error text.
#[track_caller]
pub fn raw_err<T: redis::ToRedisArgs + std::fmt::Debug>(c: &mut Connection, args: &[T]) -> String {
    match raw(c, args) {
        Err(e) => e,
        Ok(v) => panic!("expected an error from {args:?}, got {v:?}"),
    }
}

/// Assert that a command fails with exactly `expected`.
#[track_caller]
pub fn assert_err<T: redis::ToRedisArgs + std::fmt::Debug>(
    c: &mut Connection,
    args: &[T],
    expected: &str,
) {
    match raw(c, args) {
        Err(e) => assert_eq!(e, expected, "wrong error for {args:?}"),
        Ok(v) => panic!("expected error {expected:?} from {args:?}, got reply {v:?}"),
    }
}

/// Run a raw command that must succeed.
#[track_caller]
pub fn raw_ok<T: redis::ToRedisArgs + std::fmt::Debug>(c: &mut Connection, args: &[T]) -> Value {
    match raw(c, args) {
        Ok(v) => v,
        Err(e) => panic!("{args:?} failed: {e}"),
    }
}

pub fn value_to_string(v: &Value) -> String {
    match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        Value::Okay => "OK".into(),
        Value::Int(i) => i.to_string(),
        Value::VerbatimString { text, .. } => text.clone(),
        Value::Nil => "(nil)".into(),
        other => format!("{other:?}"),
    }
}

/// Integer value of a reply that is an integer (or a RESP3 boolean).
#[track_caller]
pub fn as_int(v: &Value) -> i64 {
    match v {
        Value::Int(i) => *i,
        Value::Boolean(b) => *b as i64,
        other => panic!("expected integer, got {other:?}"),
    }
}

/// Elements of an array reply.
#[track_caller]
pub fn as_array(v: Value) -> Vec<Value> {
    match v {
        Value::Array(a) => a,
        Value::Set(a) => a,
        other => panic!("expected array, got {other:?}"),
    }
}

/// A MADD/MEXISTS/INSERT reply as integers.
#[track_caller]
pub fn as_ints(v: Value) -> Vec<i64> {
    as_array(v).iter().map(as_int).collect()
}
