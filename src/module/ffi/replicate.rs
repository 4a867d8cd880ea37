//! What a command call sends on: replication to replicas and the AOF, and keyspace events.

use std::ffi::{c_int, CStr, CString};

use redis_module::raw;

use super::strings::StringVector;
use super::Command;

impl Command {
    /// Replicates this call as it was received.
    #[inline]
    pub fn replicate_verbatim(&self) {
        // SAFETY: a live context.
        unsafe { hot_api!(RedisModule_ReplicateVerbatim)(self.ctx) };
    }

    /// Replicates `command` with `args` (the key first, as raw bytes). Several calls in one
    /// command reach replicas and the AOF wrapped in MULTI/EXEC.
    pub fn replicate<'a>(&self, command: &str, args: impl IntoIterator<Item = &'a [u8]>) {
        let Ok(name) = CString::new(command) else {
            return;
        };
        // SAFETY: a live context.
        let strings = unsafe { StringVector::new(self.ctx, args) };
        // SAFETY: a live context, a NUL-terminated name, the "v" format with a vector of
        // `strings.len()` live strings, which Redis copies.
        unsafe {
            api!(RedisModule_Replicate)(
                self.ctx,
                name.as_ptr(),
                c"v".as_ptr(),
                strings.as_ptr(),
                strings.len(),
            );
        }
    }

    /// Replicates `command` with the key (argument 1), then `made` (strings made from these
    /// bytes), then this call's arguments at `received`, passed as Redis holds them: Redis takes
    /// a reference to each, no copy, whatever their number. Several calls in one command reach
    /// replicas and the AOF wrapped in MULTI/EXEC.
    pub fn replicate_received(
        &self,
        command: &CStr,
        made: &[&[u8]],
        received: impl ExactSizeIterator<Item = usize>,
    ) {
        let mut argv = Vec::with_capacity(1 + made.len() + received.len());
        argv.push(self.raw_arg(1));
        argv.extend(made.iter().map(|bytes| {
            // SAFETY: a live context; Redis copies `bytes.len()` bytes into a new string, freed
            // below.
            unsafe { api!(RedisModule_CreateString)(self.ctx, bytes.as_ptr().cast(), bytes.len()) }
        }));
        argv.extend(received.map(|index| self.raw_arg(index)));
        // SAFETY: a live context, a NUL-terminated name, the "v" format with a vector of
        // `argv.len()` live strings, each of which Redis references (its count raised) or
        // copies, never frees.
        unsafe {
            api!(RedisModule_Replicate)(
                self.ctx,
                command.as_ptr(),
                c"v".as_ptr(),
                argv.as_ptr(),
                argv.len(),
            );
        }
        for &string in &argv[1..=made.len()] {
            // SAFETY: a string made in this live context above, freed only here.
            unsafe { api!(RedisModule_FreeString)(self.ctx, string) };
        }
    }

    /// Replicates `command` as `command key at_ms` followed by this call's `count` arguments
    /// from `first`: the form of a write at a given time. The arguments are passed as Redis
    /// holds them (the vector of the 'v' format points into its own argument array: no vector
    /// made, each string referenced, none copied) and the timestamp as bytes formatted here (the
    /// 'b' format makes one string of them; 'l' would make two objects, and cannot carry a
    /// timestamp past i64::MAX).
    pub fn replicate_at(&self, command: &CStr, at_ms: u64, first: usize, count: usize) {
        let key = self.raw_arg(1);
        let args = self.raw_args(first, count);
        let mut digits = [0u8; 20];
        let at = decimal(at_ms, &mut digits);
        // SAFETY: a live context, a NUL-terminated name and format; "sbs" with a live key
        // string, `at.len()` bytes at `at` (copied by Redis) and one live argument string; "sbv"
        // with the same and a vector of `count` live argument strings. Redis references each
        // string (its count raised, lowered when the command's propagation is done) or copies
        // it, never frees it, and copies the vector.
        unsafe {
            if count == 1 {
                api!(RedisModule_Replicate)(
                    self.ctx,
                    command.as_ptr(),
                    c"sbs".as_ptr(),
                    key,
                    at.as_ptr(),
                    at.len(),
                    *args,
                );
            } else {
                api!(RedisModule_Replicate)(
                    self.ctx,
                    command.as_ptr(),
                    c"sbv".as_ptr(),
                    key,
                    at.as_ptr(),
                    at.len(),
                    args,
                    count,
                );
            }
        }
    }

    /// Fires a keyspace event of the generic class for the key at argument 1.
    #[inline(always)]
    pub fn notify(&self, event: &CStr) {
        // SAFETY: a live context, a NUL-terminated event name and a live argument.
        unsafe {
            hot_api!(RedisModule_NotifyKeyspaceEvent)(
                self.ctx,
                raw::REDISMODULE_NOTIFY_GENERIC as c_int,
                event.as_ptr(),
                self.raw_arg(1),
            )
        };
    }
}

/// `value` in decimal, at the end of `digits` (20 digits hold every u64), two digits a step.
fn decimal(value: u64, digits: &mut [u8; 20]) -> &[u8] {
    const PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819\
        2021222324252627282930313233343536373839\
        4041424344454647484950515253545556575859\
        6061626364656667686970717273747576777879\
        8081828384858687888990919293949596979899";
    let mut start = digits.len();
    let mut rest = value;
    while rest >= 10 {
        let pair = (rest % 100) as usize * 2;
        rest /= 100;
        start -= 2;
        digits[start..start + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
    }
    if rest > 0 || start == digits.len() {
        start -= 1;
        digits[start] = b'0' + rest as u8;
    }
    &digits[start..]
}

#[cfg(test)]
mod tests {
    use super::decimal;

    #[test]
    fn decimal_writes_every_u64_as_display_does() {
        let around_powers = (0..20).flat_map(|exp| {
            let power = 10u64.pow(exp);
            [power - 1, power, power + 1]
        });
        let values = [
            0,
            1_764_000_000_123,
            1_764_000_000_001,
            u64::MAX - 1,
            u64::MAX,
        ];
        for value in around_powers.chain(values) {
            let mut digits = [0u8; 20];
            assert_eq!(decimal(value, &mut digits), value.to_string().as_bytes());
        }
    }
}
