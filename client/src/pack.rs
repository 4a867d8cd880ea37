//! Commands packed in RESP straight from their arguments, into a buffer the caller reuses: a
//! load packs millions of items, and building a `redis::Cmd` first copied each one twice.

/// Appends `$len\r\ndata\r\n`; answers where `data` starts.
pub fn bulk(buf: &mut Vec<u8>, data: &[u8]) -> usize {
    buf.reserve(data.len() + 25);
    prefixed(buf, b'$', data.len() as u64);
    let at = buf.len();
    buf.extend_from_slice(data);
    buf.extend_from_slice(b"\r\n");
    at
}

/// Appends the header `*n\r\n` of a command of `n` arguments.
pub fn array_header(buf: &mut Vec<u8>, n: u64) {
    prefixed(buf, b'*', n);
}

/// Appends `kind`, `n` in decimal and CRLF, with one copy.
fn prefixed(buf: &mut Vec<u8>, kind: u8, n: u64) {
    let mut line = [0u8; 23];
    line[0] = kind;
    let len = decimal(&mut line[1..21], n) + 1;
    line[len..len + 2].copy_from_slice(b"\r\n");
    buf.extend_from_slice(&line[..len + 2]);
}

/// Writes `v` in decimal at the start of `out` (20 bytes hold any u64); answers its length.
pub fn decimal(out: &mut [u8], v: u64) -> usize {
    let digits = match v {
        0..=9 => 1,
        10..=99 => 2,
        100..=999 => 3,
        _ => v.ilog10() as usize + 1,
    };
    let mut rest = v;
    for d in out[..digits].iter_mut().rev() {
        *d = b'0' + (rest % 10) as u8;
        rest /= 10;
    }
    digits
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_as_the_redis_crate_packs() {
        let args: [&[u8]; 4] = [b"BF.INSERT", b"k{7}", b"", &[0u8; 1234]];
        let mut ours = Vec::new();
        array_header(&mut ours, args.len() as u64);
        for a in args {
            bulk(&mut ours, a);
        }
        let mut cmd = redis::Cmd::new();
        for a in args {
            cmd.arg(a);
        }
        assert_eq!(ours, cmd.get_packed_command());
        let mut out = [0u8; 20];
        for v in [0, 9, 10, 99, 100, 999, 1000, 123_456_789, u64::MAX] {
            let n = decimal(&mut out, v);
            assert_eq!(&out[..n], v.to_string().as_bytes());
        }
    }
}
