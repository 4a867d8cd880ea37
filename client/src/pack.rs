//! Commands packed in RESP straight from their arguments, into a buffer the caller reuses: a
//! load packs millions of items, and building a `redis::Cmd` first copied each one twice.

/// Appends `$len\r\ndata\r\n`; answers where `data` starts.
pub fn bulk(buf: &mut Vec<u8>, data: &[u8]) -> usize {
    let mut len = [0u8; 20];
    let n = decimal(&mut len, data.len() as u64);
    buf.reserve(n + data.len() + 5);
    buf.push(b'$');
    buf.extend_from_slice(&len[..n]);
    buf.extend_from_slice(b"\r\n");
    let at = buf.len();
    buf.extend_from_slice(data);
    buf.extend_from_slice(b"\r\n");
    at
}

/// Appends the header `*n\r\n` of a command of `n` arguments.
pub fn array_header(buf: &mut Vec<u8>, n: u64) {
    let mut digits = [0u8; 20];
    let len = decimal(&mut digits, n);
    buf.push(b'*');
    buf.extend_from_slice(&digits[..len]);
    buf.extend_from_slice(b"\r\n");
}

/// Writes `v` in decimal at the start of `out` (20 bytes hold any u64); answers its length.
pub fn decimal(out: &mut [u8], mut v: u64) -> usize {
    let mut digits = [0u8; 20];
    let mut n = 0;
    loop {
        digits[n] = b'0' + (v % 10) as u8;
        n += 1;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    for i in 0..n {
        out[i] = digits[n - 1 - i];
    }
    n
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
        for v in [0, 9, 10, 99, 100, u64::MAX] {
            let n = decimal(&mut out, v);
            assert_eq!(&out[..n], v.to_string().as_bytes());
        }
    }
}
