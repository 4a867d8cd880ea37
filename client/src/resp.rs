//! Reading the server's replies off a byte stream: each RESP2/RESP3 reply is framed here (its
//! whole extent found without building anything), then decoded. The replies a load or a dedup
//! reads by the thousand — arrays of integers or booleans, one per item of a BF.INSERT,
//! BF.MADD, BF.ADDAT or BF.MEXISTS — are decoded here in one pass; every other shape (errors,
//! maps, strings, nested arrays) goes to the `redis` crate's parser, which then sees exactly
//! one complete reply.
//!
//! Memory follows the bytes that arrived, never a length or count a reply declares: a reply
//! that declares more than it sends only waits for the rest.

use std::io::{self, Read};

use redis::{ErrorKind, RedisError, RedisResult, Value};

/// Bytes asked of the stream per read (more while a reply longer than the buffer arrives).
const READ_SIZE: usize = 64 * 1024;

/// A stream's unread replies: `buf[start..end]` holds bytes read but not yet taken.
#[derive(Default)]
pub(crate) struct ReplyReader {
    buf: Vec<u8>,
    start: usize,
    end: usize,
}

/// Why bytes are not a reply.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Malformed(String);

impl From<Malformed> for RedisError {
    fn from(m: Malformed) -> RedisError {
        RedisError::from((ErrorKind::Parse, "malformed reply", m.0))
    }
}

/// A reply to a command of adds or lookups: its answers when it is an array of 0/1 integers
/// or booleans (read without building a value per answer), else the reply as a value.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Reply {
    Answers(Vec<bool>),
    Value(Value),
}

impl Reply {
    /// The error reply this is, if it is one.
    pub(crate) fn server_error(&self) -> Option<&redis::ServerError> {
        match self {
            Reply::Value(Value::ServerError(e)) => Some(e),
            _ => None,
        }
    }

    /// The reply as the `redis` crate's value (answers as integers).
    pub(crate) fn into_value(self) -> Value {
        match self {
            Reply::Answers(a) => {
                Value::Array(a.into_iter().map(|b| Value::Int(b.into())).collect())
            }
            Reply::Value(v) => v,
        }
    }
}

impl ReplyReader {
    /// The next reply, reading from `src` as long as it is incomplete. An end of stream inside
    /// a reply is an I/O error (`UnexpectedEof`); bytes that cannot be a reply are a parse
    /// error, after which the stream is out of step and must not be read again.
    pub(crate) fn read_reply(&mut self, src: &mut impl Read) -> RedisResult<Value> {
        self.read_with(src, answer_array, |v| v)
    }

    /// [`ReplyReader::read_reply`] for a reply to adds or lookups.
    pub(crate) fn read_answers(&mut self, src: &mut impl Read) -> RedisResult<Reply> {
        self.read_with(
            src,
            |bytes| answer_bools(bytes).map(|(a, len)| (Reply::Answers(a), len)),
            Reply::Value,
        )
    }

    /// The next reply: `fast`'s reading of it when it has one, else the `redis` crate's value
    /// as `other` makes it.
    fn read_with<T>(
        &mut self,
        src: &mut impl Read,
        fast: impl Fn(&[u8]) -> Option<(T, usize)>,
        other: impl Fn(Value) -> T,
    ) -> RedisResult<T> {
        loop {
            let unread = &self.buf[self.start..self.end];
            let (reply, len) = match fast(unread) {
                Some((answers, len)) => (Ok(answers), len),
                None => match frame(unread)? {
                    Some(len) => (decode(&unread[..len]).map(&other), len),
                    None => {
                        self.fill(src)?;
                        continue;
                    }
                },
            };
            self.start += len;
            if self.start == self.end {
                self.start = 0;
                self.end = 0;
            }
            return reply;
        }
    }

    /// Reads once more, keeping the unread part; the buffer grows only by what a reply longer
    /// than it needs, and only as its bytes arrive.
    fn fill(&mut self, src: &mut impl Read) -> io::Result<()> {
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        let want = self.end + READ_SIZE.max(self.end);
        if self.buf.len() < want {
            self.buf.resize(want, 0);
        }
        loop {
            match src.read(&mut self.buf[self.end..]) {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the server closed the connection",
                    ))
                }
                Ok(n) => {
                    self.end += n;
                    return Ok(());
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}

/// The length of the complete reply at the start of `bytes`, `None` while it is incomplete.
pub(crate) fn frame(bytes: &[u8]) -> Result<Option<usize>, Malformed> {
    let mut pos = 0usize;
    // Values still to read: aggregates add their elements as their headers are read.
    let mut remaining: u64 = 1;
    while remaining > 0 {
        let Some((kind, line, next)) = line_at(bytes, pos) else {
            return Ok(None);
        };
        remaining -= 1;
        pos = next;
        match kind {
            b'+' | b'-' | b':' | b'_' | b'#' | b',' | b'(' => {}
            b'$' | b'=' | b'!' => {
                let Some(len) = length(line)? else { continue };
                let end = pos
                    .checked_add(len)
                    .and_then(|e| e.checked_add(2))
                    .ok_or_else(|| Malformed(format!("string of {len} bytes")))?;
                if bytes.len() < end {
                    return Ok(None);
                }
                if &bytes[end - 2..end] != b"\r\n" {
                    return Err(Malformed("a string not ended by CRLF".into()));
                }
                pos = end;
            }
            b'*' | b'~' | b'>' | b'%' | b'|' => {
                let Some(n) = length(line)? else { continue };
                let n = n as u64;
                let elements = match kind {
                    b'%' => n.checked_mul(2),
                    // An attribute's pairs come before the value they describe.
                    b'|' => n.checked_mul(2).and_then(|m| m.checked_add(1)),
                    _ => Some(n),
                };
                remaining = elements
                    .and_then(|e| remaining.checked_add(e))
                    .ok_or_else(|| Malformed(format!("an aggregate of {n} elements")))?;
            }
            other => return Err(Malformed(format!("type byte {other:#04x}"))),
        }
    }
    Ok(Some(pos))
}

/// The line starting at `pos`: its type byte, its text without the type and CRLF, and where
/// the next one starts; `None` until its CRLF has arrived.
fn line_at(bytes: &[u8], pos: usize) -> Option<(u8, &[u8], usize)> {
    let rest = bytes.get(pos..)?;
    let (&kind, _) = rest.split_first()?;
    let cr = memchr_crlf(rest)?;
    Some((kind, rest.get(1..cr).unwrap_or_default(), pos + cr + 2))
}

/// The position of the first CRLF in `bytes`.
fn memchr_crlf(bytes: &[u8]) -> Option<usize> {
    let mut from = 0;
    loop {
        let cr = from + memchr::memchr(b'\r', &bytes[from..])?;
        match bytes.get(cr + 1) {
            Some(b'\n') => return Some(cr),
            Some(_) => from = cr + 1,
            None => return None,
        }
    }
}

/// A string's or an aggregate's declared length; `None` for `-1` (RESP2's nil).
fn length(line: &[u8]) -> Result<Option<usize>, Malformed> {
    if line == b"-1" {
        return Ok(None);
    }
    decimal(line)
        .and_then(|n| usize::try_from(n).ok())
        .map(Some)
        .ok_or_else(|| Malformed(format!("length {:?}", String::from_utf8_lossy(line))))
}

/// A non-negative decimal of at most 18 digits (no sign, no leading `+`).
fn decimal(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || digits.len() > 18 {
        return None;
    }
    digits.iter().try_fold(0u64, |n, &d| {
        d.is_ascii_digit().then(|| n * 10 + u64::from(d - b'0'))
    })
}

/// One complete reply ([`frame`]'s extent) as a value: the `redis` crate's parser, for the
/// shapes [`answer_array`] leaves.
fn decode(reply: &[u8]) -> RedisResult<Value> {
    redis::parse_redis_value(reply)
}

/// The array of integers and booleans complete at the start of `bytes`, decoded in one pass,
/// and its length; `None` for an incomplete reply or any other shape.
fn answer_array(bytes: &[u8]) -> Option<(Value, usize)> {
    let (b'*', header, mut pos) = line_at(bytes, 0)? else {
        return None;
    };
    let n = usize::try_from(decimal(header)?).ok()?;
    // Every element takes at least 4 bytes, and the reply is read only once it has arrived.
    if bytes.len() - pos < n.checked_mul(4)? {
        return None;
    }
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let answer = match bytes.get(pos..pos + 4)? {
            b":0\r\n" => Value::Int(0),
            b":1\r\n" => Value::Int(1),
            b"#t\r\n" => Value::Boolean(true),
            b"#f\r\n" => Value::Boolean(false),
            _ => {
                let (kind, line, next) = line_at(bytes, pos)?;
                pos = next - 4;
                match (kind, line) {
                    (b':', [b'-', digits @ ..]) => {
                        Value::Int(-i64::try_from(decimal(digits)?).ok()?)
                    }
                    (b':', digits) => Value::Int(i64::try_from(decimal(digits)?).ok()?),
                    _ => return None,
                }
            }
        };
        out.push(answer);
        pos += 4;
    }
    Some((Value::Array(out), pos))
}

/// The array of 0/1 integers and booleans complete at the start of `bytes`, and its length;
/// `None` for an incomplete reply or any other shape.
fn answer_bools(bytes: &[u8]) -> Option<(Vec<bool>, usize)> {
    let (b'*', header, mut pos) = line_at(bytes, 0)? else {
        return None;
    };
    let n = usize::try_from(decimal(header)?).ok()?;
    // Every answer takes 4 bytes, and the reply is read only once it has arrived.
    let end = n.checked_mul(4)?.checked_add(pos)?;
    let body = bytes.get(pos..end)?;
    let mut out = Vec::with_capacity(n);
    for answer in body.chunks_exact(4) {
        out.push(match answer {
            b":1\r\n" | b"#t\r\n" => true,
            b":0\r\n" | b"#f\r\n" => false,
            _ => return None,
        });
    }
    pos = end;
    Some((out, pos))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Replies of every shape the server sends on the add and lookup paths, and around them.
    const STREAM: &[&[u8]] = &[
        b"*3\r\n:1\r\n:0\r\n:1\r\n",
        b"*2\r\n#t\r\n#f\r\n",
        b"*0\r\n",
        b"*3\r\n:1\r\n:0\r\n-ERR non scaling filter is full\r\n",
        b"-MOVED 866 127.0.0.1:7001\r\n",
        b"*2\r\n:0\r\n:1\r\n",
        b"-ASK 866 127.0.0.1:7002\r\n",
        b"-CLUSTERDOWN The cluster is down\r\n",
        b"-ERR not found\r\n",
        b"*-1\r\n",
        b"$-1\r\n",
        b"_\r\n",
        b":-7\r\n",
        b"+OK\r\n",
        b"$5\r\nab\r\nc\r\n",
        b"%2\r\n+Capacity\r\n:100\r\n$4\r\nSize\r\n,1.5\r\n",
        b"*2\r\n*1\r\n:1\r\n~1\r\n#t\r\n",
        b"|1\r\n+ttl\r\n:3\r\n*1\r\n:1\r\n",
        b"=8\r\ntxt:abcd\r\n",
        b"!9\r\nERR bad x\r\n",
        b"(12345678901234567890\r\n",
        b">2\r\n+message\r\n:1\r\n",
    ];

    /// A stream that hands out its pieces of bytes in as many reads.
    struct Two<'a>(Vec<&'a [u8]>);

    impl Read for Two<'_> {
        fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
            self.0.retain(|p| !p.is_empty());
            let Some(first) = self.0.first_mut() else {
                return Ok(0);
            };
            let n = first.len().min(out.len());
            out[..n].copy_from_slice(&first[..n]);
            *first = &first[n..];
            Ok(n)
        }
    }

    fn replies_read(bytes: &[u8], cut: usize) -> Vec<RedisResult<Value>> {
        let mut pieces = vec![&bytes[..cut], &bytes[cut..]];
        pieces.retain(|p| !p.is_empty());
        let mut src = Two(pieces);
        let mut reader = ReplyReader::default();
        let mut out = Vec::new();
        loop {
            match reader.read_reply(&mut src) {
                Err(e) if e.is_io_error() => return out,
                Err(e) => {
                    out.push(Err(e));
                    return out;
                }
                r => out.push(r),
            }
        }
    }

    #[test]
    fn every_shape_read_whole_whatever_the_reads_split() {
        let bytes: Vec<u8> = STREAM.concat();
        let expected: Vec<Value> = STREAM
            .iter()
            .map(|r| redis::parse_redis_value(r).expect("a valid reply"))
            .collect();
        for cut in 0..=bytes.len() {
            let got: Vec<Value> = replies_read(&bytes, cut)
                .into_iter()
                .map(|r| r.expect("a valid reply"))
                .collect();
            assert_eq!(got, expected, "split at {cut}");
        }
    }

    #[test]
    fn answers_decoded_as_the_redis_crate_does() {
        for reply in [
            &b"*4\r\n:1\r\n:0\r\n:-3\r\n:922337203685477580\r\n"[..],
            b"*3\r\n#t\r\n#f\r\n#t\r\n",
            b"*2\r\n:1\r\n#f\r\n",
        ] {
            assert_eq!(
                answer_array(reply),
                Some((redis::parse_redis_value(reply).expect("valid"), reply.len()))
            );
            // Incomplete: left for more bytes.
            for cut in 0..reply.len() {
                assert_eq!(answer_array(&reply[..cut]), None);
            }
        }
        // Errors inside, nested values and odd integers are left to the redis crate.
        assert_eq!(answer_array(b"*2\r\n:1\r\n-ERR x\r\n"), None);
        assert_eq!(answer_array(b"*1\r\n:+1\r\n"), None);
    }

    #[test]
    fn answers_read_as_answers_whatever_the_reads_split() {
        // Answers, errors and other shapes between them: each reply whole and in order, the
        // 0/1 arrays as answers and everything else as the redis crate's value.
        let bytes: Vec<u8> = STREAM.concat();
        let expected: Vec<Reply> = STREAM
            .iter()
            .map(|r| {
                let value = redis::parse_redis_value(r).expect("a valid reply");
                let Value::Array(a) = &value else {
                    return Reply::Value(value);
                };
                let answers: Option<Vec<bool>> = a
                    .iter()
                    .map(|v| match v {
                        Value::Int(0) | Value::Boolean(false) => Some(false),
                        Value::Int(1) | Value::Boolean(true) => Some(true),
                        _ => None,
                    })
                    .collect();
                answers.map_or(Reply::Value(value), Reply::Answers)
            })
            .collect();
        assert!(matches!(&expected[0], Reply::Answers(a) if a == &[true, false, true]));
        assert!(matches!(&expected[3], Reply::Value(Value::Array(_))));
        for cut in 0..=bytes.len() {
            let mut src = Two(vec![&bytes[..cut], &bytes[cut..]]);
            let mut reader = ReplyReader::default();
            let got: Vec<Reply> = (0..STREAM.len())
                .map(|_| reader.read_answers(&mut src).expect("a valid reply"))
                .collect();
            assert_eq!(got, expected, "split at {cut}");
        }
    }

    #[test]
    fn only_arrays_of_zeros_and_ones_are_answers() {
        assert_eq!(
            answer_bools(b"*4\r\n:1\r\n#f\r\n:0\r\n#t\r\n"),
            Some((vec![true, false, false, true], 20))
        );
        assert_eq!(answer_bools(b"*0\r\n"), Some((vec![], 4)));
        for other in [
            &b"*2\r\n:1\r\n:2\r\n"[..],
            b"*2\r\n:1\r\n-ERR x\r\n",
            b"*1\r\n:10\r\n",
            b"*1\r\n$1\r\n1\r\n",
            b"*-1\r\n",
            b"%1\r\n:1\r\n:1\r\n",
            b":1\r\n",
        ] {
            assert_eq!(
                answer_bools(other),
                None,
                "{:?}",
                String::from_utf8_lossy(other)
            );
        }
        // Incomplete: left for more bytes, and a declared count allocates nothing until its
        // answers have arrived.
        let reply = b"*3\r\n:1\r\n:0\r\n:1\r\n";
        for cut in 0..reply.len() {
            assert_eq!(answer_bools(&reply[..cut]), None);
        }
        assert_eq!(answer_bools(b"*100000000000000000\r\n:1\r\n"), None);
        assert_eq!(answer_bools(b"*999999999999999999\r\n"), None);
        let mut reader = ReplyReader::default();
        let got = reader.read_answers(&mut &b"*100000000000000000\r\n:1\r\n:0\r\n"[..]);
        assert!(matches!(got, Err(e) if e.is_io_error()));
        assert!(reader.buf.len() <= 2 * READ_SIZE);
    }

    #[test]
    fn a_stream_that_ends_inside_a_reply_is_an_io_error() {
        let bytes = b"*3\r\n:1\r\n:0\r\n";
        for cut in 0..=bytes.len() {
            let got = replies_read(bytes, cut);
            assert!(got.is_empty(), "split at {cut}: {got:?}");
        }
    }

    #[test]
    fn malformed_bytes_are_an_error_value() {
        for bad in [
            &b"?3\r\n"[..],
            b"*x\r\n",
            b"*-2\r\n",
            b"$-5\r\n",
            b"$3\r\nabcde\r\n",
            b"*99999999999999999999\r\n",
            b"$+3\r\nabc\r\n",
            b"*1\r\n\r\n",
        ] {
            assert!(frame(bad).is_err(), "{:?}", String::from_utf8_lossy(bad));
            let got = replies_read(bad, bad.len());
            assert!(
                matches!(got.first(), Some(Err(e)) if !e.is_io_error()),
                "{:?}: {got:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn a_declared_length_allocates_nothing_before_its_bytes() {
        // A string of 2^59 bytes and an array of 10^17 elements, of which a few bytes came.
        let mut reader = ReplyReader::default();
        for huge in [
            &b"$576460752303423488\r\nab"[..],
            b"*100000000000000000\r\n:1\r\n",
            b"%999999999999999999\r\n",
        ] {
            assert_eq!(frame(huge), Ok(None));
            let got = reader.read_reply(&mut &huge[..]);
            assert!(matches!(got, Err(e) if e.is_io_error()));
            assert!(reader.buf.len() <= 2 * READ_SIZE);
            reader = ReplyReader::default();
        }
    }
}
