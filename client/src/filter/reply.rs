//! Reading reply values: answer arrays, BF.INFO's pairs, numbers and text.

use redis::Value;

use crate::error::{explain, server_error_text, Error, Result};
use crate::resp::Reply;

/// True for the error reply to an add to a key that does not exist (BF.INSERT … NOCREATE).
pub(super) fn is_not_found(text: &str) -> bool {
    text == "not found"
}

/// Writes the answers of a BF.MADD / BF.INSERT / BF.MEXISTS reply to the items at `positions`
/// of `out`; an error inside it (a full NONSCALING filter, an item of another partition) is
/// the error, before a count that differs from the items'.
pub(super) fn fill_answers(reply: &Reply, positions: &[usize], out: &mut [bool]) -> Result<()> {
    let a = match reply {
        Reply::Answers(answers) => {
            if answers.len() != positions.len() {
                return Err(answer_count(answers.len(), positions.len()));
            }
            for (&p, &answer) in positions.iter().zip(answers) {
                out[p] = answer;
            }
            return Ok(());
        }
        Reply::Value(Value::Array(a)) => a,
        Reply::Value(other) => {
            return Err(Error::Protocol(format!("expected an array, got {other:?}")))
        }
    };
    for (j, v) in a.iter().enumerate() {
        let answer = match v {
            Value::Int(1) | Value::Boolean(true) => true,
            Value::Int(0) | Value::Boolean(false) => false,
            v => match as_u64(v) {
                Some(1) => true,
                Some(0) => false,
                // BF.MADD stops at its first failing item, so an error may end a short reply.
                _ => {
                    return Err(first_error_in(&a[j..])
                        .unwrap_or_else(|| Error::Protocol(format!("answer {v:?}"))))
                }
            },
        };
        if let Some(&p) = positions.get(j) {
            out[p] = answer;
        }
    }
    if a.len() != positions.len() {
        return Err(answer_count(a.len(), positions.len()));
    }
    Ok(())
}

fn answer_count(answers: usize, items: usize) -> Error {
    Error::Protocol(format!("{answers} answers for {items} items"))
}

/// The first error reply among `values`, explained.
fn first_error_in(values: &[Value]) -> Option<Error> {
    values.iter().find_map(|v| match v {
        Value::ServerError(e) => Some(explain(server_error_text(e))),
        _ => None,
    })
}

/// BF.INFO's field/value pairs, from a RESP2 array or a RESP3 map.
pub fn info_pairs(reply: Value) -> Result<Vec<(Value, Value)>> {
    match reply {
        Value::Array(a) => {
            let mut out = Vec::with_capacity(a.len() / 2);
            let mut it = a.into_iter();
            while let (Some(k), Some(v)) = (it.next(), it.next()) {
                out.push((k, v));
            }
            Ok(out)
        }
        Value::Map(m) => Ok(m),
        other => Err(Error::Protocol(format!("BF.INFO answered {other:?}"))),
    }
}

pub(super) fn field<'a>(pairs: &'a [(Value, Value)], name: &str) -> Option<&'a Value> {
    pairs
        .iter()
        .find(|(k, _)| as_text(k).as_deref() == Some(name))
        .map(|(_, v)| v)
}

/// An integer reply (or a number sent as text) that fits in a u64.
pub fn as_u64(v: &Value) -> Option<u64> {
    match v {
        Value::Int(i) => u64::try_from(*i).ok(),
        Value::Boolean(b) => Some(u64::from(*b)),
        Value::BulkString(s) => std::str::from_utf8(s).ok()?.parse().ok(),
        Value::SimpleString(s) => s.parse().ok(),
        _ => None,
    }
}

pub(super) fn as_bytes(v: &Value) -> Option<Vec<u8>> {
    match v {
        Value::BulkString(b) => Some(b.clone()),
        Value::SimpleString(s) => Some(s.as_bytes().to_vec()),
        _ => None,
    }
}

pub(super) fn as_text(v: &Value) -> Option<String> {
    as_bytes(v).map(|b| String::from_utf8_lossy(&b).into_owned())
}

/// A reply value as a person reads it.
pub(super) fn display(v: &Value) -> String {
    match v {
        Value::Nil => "(nil)".into(),
        Value::Int(i) => i.to_string(),
        Value::Double(d) => d.to_string(),
        Value::Boolean(b) => b.to_string(),
        Value::Array(a) => format!("{} entries", a.len()),
        other => as_text(other).unwrap_or_else(|| format!("{other:?}")),
    }
}
