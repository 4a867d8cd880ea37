//! Testing and setting an item's probes in one 512-bit line, and the lines of a group of items
//! resolved to their addresses once.
//!
//! A line's probes are the top 9 bits of `seed · M[i]` for the first `per_line` (≤ 16) of
//! [`BLOCK_MULTIPLIERS`] (`seed` is the item's hash for that line, see
//! [`ItemHash::line_seed`](crate::hash::ItemHash::line_seed)): bit p of the line is bit p % 64 of
//! word p / 64. [`Portable`] does it probe by probe, `Bmi2` likewise with each product by `mulx`
//! from the multiplier in memory; `Avx512` eight probes at a time; all answer and set alike.

use std::marker::PhantomData;
use std::mem::MaybeUninit;

use super::BitStore;
use crate::hash::{ItemHash, BLOCK_MULTIPLIERS};

/// Items a [`GroupLines`] holds the lines of: a batch's group.
pub(crate) const GROUP: usize = 32;

/// How a line's probes are tested and set. Both answer alike; which is used depends on the CPU
/// ([`super::with_fast_shifts`]).
pub(crate) trait LineOps: Copy {
    /// Sets the probes of `seed` in `line`; true when a bit changed, i.e. when not every probe
    /// was set before.
    fn set(self, line: &mut [u64; 8], seed: u64, per_line: u32) -> bool;

    /// Sets the probes of `seed` in `line`, for an item already known to be new.
    fn or_in(self, line: &mut [u64; 8], seed: u64, per_line: u32);

    /// [`set`](Self::set) of `N` (1..=16) probes a line, for callers compiled per probe count.
    fn set_n<const N: usize>(self, line: &mut [u64; 8], seed: u64) -> bool {
        self.set(line, seed, N as u32)
    }

    /// [`or_in`](Self::or_in) of `N` (1..=16) probes a line, for callers compiled per probe
    /// count.
    fn or_in_n<const N: usize>(self, line: &mut [u64; 8], seed: u64) {
        self.or_in(line, seed, N as u32);
    }

    /// True when every probe of `seed` is set in `line`.
    fn test(self, line: &[u64; 8], seed: u64, per_line: u32) -> bool;
}

/// Probe by probe, on any CPU.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Portable {
    /// [`POSITION_SHIFT`], hidden from the optimiser: shifting by a register, which BMI2's
    /// `shrx` does without overwriting its source, spares the copy of the product that a shift
    /// by a constant needs beside the word's shift (6 instructions a probe instead of 7).
    shift: u32,
    /// [`BLOCK_MULTIPLIERS`], read from memory rather than folded into the code: multiplying by
    /// a memory operand takes one instruction, by a 64-bit constant two (it is loaded first).
    multipliers: &'static [u64; 16],
}

/// A probe's position is the top 9 bits of its product: `product >> POSITION_SHIFT`.
const POSITION_SHIFT: u32 = 55;

impl Portable {
    /// Made once per group of items, not per line: hiding the values costs a store and a load.
    #[inline(always)]
    pub(crate) fn new() -> Portable {
        Portable {
            shift: std::hint::black_box(POSITION_SHIFT),
            multipliers: std::hint::black_box(&BLOCK_MULTIPLIERS),
        }
    }

    /// With the values in plain sight: for a lone lookup, which usually stops at its first
    /// probe, so that hiding them (a store and a load each) costs more than it spares.
    #[inline(always)]
    pub(crate) fn unhidden() -> Portable {
        Portable {
            shift: POSITION_SHIFT,
            multipliers: &BLOCK_MULTIPLIERS,
        }
    }

    /// Sets the first `N` probes, unrolled: no loop counter or branch per probe.
    #[inline(always)]
    fn or_first<const N: usize>(self, line: &mut [u64; 8], seed: u64) {
        for &m in &self.multipliers[..N] {
            let product = seed.wrapping_mul(m);
            // The word is the position's top 3 bits; a shift by p takes p % 64.
            line[(product >> 61) as usize] |=
                1u64.wrapping_shl(product.wrapping_shr(self.shift) as u32);
        }
    }
}

/// `$body` with the constant `$n` (a `usize`, usable as a const generic argument) equal to
/// `$count` when that is 1..=16, `$other` for any other count: code compiled per probe count
/// (unrolled, no loop or dispatch per probe), chosen by one jump.
macro_rules! by_probe_count {
    ($count:expr, $n:ident => $body:expr, _ => $other:expr) => {
        match $count {
            1 => {
                const $n: usize = 1;
                $body
            }
            2 => {
                const $n: usize = 2;
                $body
            }
            3 => {
                const $n: usize = 3;
                $body
            }
            4 => {
                const $n: usize = 4;
                $body
            }
            5 => {
                const $n: usize = 5;
                $body
            }
            6 => {
                const $n: usize = 6;
                $body
            }
            7 => {
                const $n: usize = 7;
                $body
            }
            8 => {
                const $n: usize = 8;
                $body
            }
            9 => {
                const $n: usize = 9;
                $body
            }
            10 => {
                const $n: usize = 10;
                $body
            }
            11 => {
                const $n: usize = 11;
                $body
            }
            12 => {
                const $n: usize = 12;
                $body
            }
            13 => {
                const $n: usize = 13;
                $body
            }
            14 => {
                const $n: usize = 14;
                $body
            }
            15 => {
                const $n: usize = 15;
                $body
            }
            16 => {
                const $n: usize = 16;
                $body
            }
            _ => $other,
        }
    };
}
pub(crate) use by_probe_count;

impl LineOps for Portable {
    /// Tests first (a new item nearly always fails at its first probe), then sets without
    /// reading back: cheaper than tracking a change probe by probe.
    #[inline(always)]
    fn set(self, line: &mut [u64; 8], seed: u64, per_line: u32) -> bool {
        if self.test(line, seed, per_line) {
            return false;
        }
        self.or_in(line, seed, per_line);
        true
    }

    #[inline(always)]
    fn or_in(self, line: &mut [u64; 8], seed: u64, per_line: u32) {
        by_probe_count!(
            per_line,
            N => self.or_first::<N>(line, seed),
            // No shape has more than 16 probes a line (a slice past 16 panics, as indexing does).
            _ => for &m in &self.multipliers[..per_line as usize] {
                let p = seed.wrapping_mul(m) >> POSITION_SHIFT;
                line[(p / 64) as usize] |= 1 << (p % 64);
            }
        )
    }

    #[inline(always)]
    fn or_in_n<const N: usize>(self, line: &mut [u64; 8], seed: u64) {
        self.or_first::<N>(line, seed);
    }

    #[inline(always)]
    fn set_n<const N: usize>(self, line: &mut [u64; 8], seed: u64) -> bool {
        if self.test(line, seed, N as u32) {
            return false;
        }
        self.or_first::<N>(line, seed);
        true
    }

    #[inline(always)]
    fn test(self, line: &[u64; 8], seed: u64, per_line: u32) -> bool {
        self.multipliers[..per_line as usize].iter().all(|&m| {
            let product = seed.wrapping_mul(m);
            line[(product >> 61) as usize]
                & 1u64.wrapping_shl(product.wrapping_shr(self.shift) as u32)
                != 0
        })
    }
}

/// `$body` for each constant `$i` = `$from`, … `$n - 1` (`$n` ≤ 16, both constants), written
/// out.
#[cfg(target_arch = "x86_64")]
macro_rules! each_probe {
    ($from:expr, $n:expr, $i:ident => $body:block) => {
        each_probe!(@ $from, $n, $i, $body, 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15)
    };
    (@ $from:expr, $n:expr, $i:ident, $body:block, $($k:literal)*) => {{
        const { assert!($n <= 16) };
        $(
            if $k >= $from && $n > $k {
                const $i: usize = $k;
                $body
            }
        )*
    }};
}

/// [`BLOCK_MULTIPLIERS`] at a fixed address, which [`Bmi2`]'s `mulx` reads relative to the
/// instruction: no register holds where they are.
#[cfg(target_arch = "x86_64")]
static PROBE_MULTIPLIERS: [u64; 16] = BLOCK_MULTIPLIERS;

/// Probe by probe as [`Portable`], but each product by BMI2's `mulx` straight from the multiplier
/// in memory: one instruction where a multiplication takes two (a load or a copy first, as it
/// overwrites its operand). Only made where the CPU has BMI2 ([`Bmi2::detect`]).
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy, Debug)]
pub(crate) struct Bmi2(Portable);

#[cfg(target_arch = "x86_64")]
impl Bmi2 {
    /// The token, when the CPU has BMI2.
    #[inline]
    pub(crate) fn detect() -> Option<Bmi2> {
        std::arch::is_x86_feature_detected!("bmi2").then(|| Bmi2(Portable::new()))
    }

    /// Probe `I`'s product (`mulx` from the multiplier in memory).
    #[inline(always)]
    fn product<const I: usize>(self, seed: u64) -> u64 {
        const { assert!(I < 16) };
        let product: u64;
        // SAFETY: the token exists only where the CPU has BMI2; the operand is multiplier I
        // (< 16) of the 16, read only; `mulx` changes no flags.
        unsafe {
            std::arch::asm!(
                "mulx {high}, {low}, qword ptr [rip + {multipliers} + {offset}]",
                multipliers = sym PROBE_MULTIPLIERS,
                offset = const I * 8,
                in("rdx") seed,
                // Not `lateout`: sharing `rdx` would take a copy of the seed a probe.
                low = out(reg) product,
                high = out(reg) _,
                options(pure, readonly, nostack, preserves_flags),
            )
        };
        product
    }

    /// Sets probes `FROM..N` as [`Portable::or_first`] does, each in five instructions written
    /// out: the product by `mulx` from the multiplier in memory, the bit's index in its word
    /// by `rorx` (bits 55..61 of the product are the low 6 of it rotated: no shift count held
    /// in a register, and no copy of the product, which the optimiser makes of a rotation it
    /// sees).
    #[inline(always)]
    fn or_probes<const FROM: usize, const N: usize>(self, line: &mut [u64; 8], seed: u64) {
        let line = line.as_mut_ptr();
        each_probe!(FROM, N, I => {
            // SAFETY: the token exists only where the CPU has BMI2; the operand is multiplier
            // I (< 16) of the 16, read only; the word written is word product >> 61 (< 8) of
            // the line's 8, which `line` borrows exclusively.
            unsafe {
                std::arch::asm!(
                    "mulx {bit}, {word}, qword ptr [rip + {multipliers} + {offset}]",
                    "rorx {bit}, {word}, {position_shift}",
                    "shr {word}, 61",
                    "shlx {bit}, {one}, {bit}",
                    "or qword ptr [{line} + {word} * 8], {bit}",
                    multipliers = sym PROBE_MULTIPLIERS,
                    offset = const I * 8,
                    position_shift = const POSITION_SHIFT,
                    line = in(reg) line,
                    one = in(reg) 1u64,
                    in("rdx") seed,
                    word = out(reg) _,
                    bit = out(reg) _,
                    options(nostack),
                )
            };
        });
    }
}

#[cfg(target_arch = "x86_64")]
impl LineOps for Bmi2 {
    #[inline(always)]
    fn set(self, line: &mut [u64; 8], seed: u64, per_line: u32) -> bool {
        by_probe_count!(
            per_line,
            N => self.set_n::<N>(line, seed),
            _ => self.0.set(line, seed, per_line)
        )
    }

    #[inline(always)]
    fn or_in(self, line: &mut [u64; 8], seed: u64, per_line: u32) {
        by_probe_count!(
            per_line,
            N => self.or_probes::<0, N>(line, seed),
            _ => self.0.or_in(line, seed, per_line)
        )
    }

    #[inline(always)]
    fn or_in_n<const N: usize>(self, line: &mut [u64; 8], seed: u64) {
        self.or_probes::<0, N>(line, seed);
    }

    /// A new item's line nearly always lacks its first probe: that probe, found unset, is set
    /// from the product that tested it, and the others without a test.
    #[inline(always)]
    fn set_n<const N: usize>(self, line: &mut [u64; 8], seed: u64) -> bool {
        let product = self.product::<0>(seed);
        let (word, bit) = (
            (product >> 61) as usize,
            1u64.wrapping_shl(product.wrapping_shr(self.0.shift) as u32),
        );
        if line[word] & bit == 0 {
            line[word] |= bit;
            self.or_probes::<1, N>(line, seed);
            return true;
        }
        if self.0.test(line, seed, N as u32) {
            return false;
        }
        self.or_probes::<1, N>(line, seed);
        true
    }

    #[inline(always)]
    fn test(self, line: &[u64; 8], seed: u64, per_line: u32) -> bool {
        self.0.test(line, seed, per_line)
    }
}

/// Eight probes at a time with AVX-512 (F and DQ). Only made where the CPU has them
/// ([`Avx512::detect`]), so its safe methods may use them.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy, Debug)]
pub(crate) struct Avx512(());

#[cfg(target_arch = "x86_64")]
impl Avx512 {
    /// The token, when the CPU has AVX-512 F and DQ.
    #[inline]
    pub(crate) fn detect() -> Option<Avx512> {
        (std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512dq"))
        .then_some(Avx512(()))
    }
}

/// Lanes of the probes among 8 from probe `first` (0 or 8) of `per_line`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn lanes(per_line: u32, first: u32) -> u8 {
    let count = per_line.saturating_sub(first).min(8);
    ((1u32 << count) - 1) as u8
}

#[cfg(target_arch = "x86_64")]
impl LineOps for Avx512 {
    #[inline(always)]
    fn set(self, line: &mut [u64; 8], seed: u64, per_line: u32) -> bool {
        // SAFETY: the token exists only where the CPU has AVX-512 F and DQ.
        unsafe { avx512::set(line, seed, per_line) }
    }

    #[inline(always)]
    fn or_in(self, line: &mut [u64; 8], seed: u64, per_line: u32) {
        // SAFETY: as in `set`.
        unsafe { avx512::or_in(line, seed, per_line) }
    }

    #[inline(always)]
    fn test(self, line: &[u64; 8], seed: u64, per_line: u32) -> bool {
        // SAFETY: as in `set`.
        unsafe { avx512::test(line, seed, per_line) }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use std::arch::x86_64::*;

    use super::{lanes, BLOCK_MULTIPLIERS};

    /// Eight probes: each lane's word index (< 8) in the line and its bit in that word (0 in
    /// the lanes outside `lanes`).
    #[target_feature(enable = "avx512f,avx512dq")]
    #[inline]
    fn probes(seed: u64, first: usize, lanes: u8) -> (__m512i, __m512i) {
        // SAFETY: 8 multipliers from `first` (0 or 8) of 16, read unaligned.
        let multipliers =
            unsafe { _mm512_loadu_si512(BLOCK_MULTIPLIERS[first..first + 8].as_ptr().cast()) };
        let positions = _mm512_srli_epi64::<55>(_mm512_mullo_epi64(
            _mm512_set1_epi64(seed as i64),
            multipliers,
        ));
        // A rotation takes its count mod 64: 1 << (p % 64) in one step.
        let bits = _mm512_maskz_rolv_epi64(lanes, _mm512_set1_epi64(1), positions);
        (_mm512_srli_epi64::<6>(positions), bits)
    }

    /// Of the probes in `lanes`, those whose bit is set in the line (`current`): each lane's
    /// word brought into it by a permutation of the line.
    #[target_feature(enable = "avx512f,avx512dq")]
    #[inline]
    fn present(current: __m512i, words: __m512i, bits: __m512i) -> u8 {
        _mm512_test_epi64_mask(_mm512_permutexvar_epi64(words, current), bits)
    }

    /// Eight probes from `first` of [`super::LineOps::set`].
    #[target_feature(enable = "avx512f,avx512dq")]
    #[inline]
    fn set_eight(line: &mut [u64; 8], seed: u64, first: usize, lanes: u8) -> bool {
        let (words, bits) = probes(seed, first, lanes);
        // SAFETY: the line's 64 bytes, read unaligned.
        let current = unsafe { _mm512_loadu_si512(line.as_ptr().cast()) };
        if present(current, words, bits) == lanes {
            return false;
        }
        or_eight(line, words, bits);
        true
    }

    /// Ors each lane's bit into its word of the line.
    #[target_feature(enable = "avx512f,avx512dq")]
    #[inline]
    fn or_eight(line: &mut [u64; 8], words: __m512i, bits: __m512i) {
        let (mut at, mut masks) = ([0u64; 8], [0u64; 8]);
        // SAFETY: 64 bytes each, written unaligned into the arrays.
        unsafe {
            _mm512_storeu_si512(at.as_mut_ptr().cast(), words);
            _mm512_storeu_si512(masks.as_mut_ptr().cast(), bits);
        }
        // Probes may share a word: or them in one by one (lanes outside `lanes` add 0).
        for (&word, &mask) in at.iter().zip(&masks) {
            // SAFETY: a word index is the top 3 bits of a 64-bit product (>> 55 >> 6): < 8.
            unsafe { *line.get_unchecked_mut(word as usize) |= mask };
        }
    }

    /// [`super::LineOps::or_in`].
    #[target_feature(enable = "avx512f,avx512dq")]
    #[inline]
    pub(super) fn or_in(line: &mut [u64; 8], seed: u64, per_line: u32) {
        let (words, bits) = probes(seed, 0, lanes(per_line, 0));
        or_eight(line, words, bits);
        if per_line > 8 {
            let (words, bits) = probes(seed, 8, lanes(per_line, 8));
            or_eight(line, words, bits);
        }
    }

    /// [`super::LineOps::set`].
    #[target_feature(enable = "avx512f,avx512dq")]
    #[inline]
    pub(super) fn set(line: &mut [u64; 8], seed: u64, per_line: u32) -> bool {
        // A second eight that finds its bits set sees them as they were before the first
        // eight, unless the first changed a bit: either way the answer is the line's.
        let changed = set_eight(line, seed, 0, lanes(per_line, 0));
        if per_line > 8 {
            return set_eight(line, seed, 8, lanes(per_line, 8)) | changed;
        }
        changed
    }

    /// [`super::LineOps::test`].
    #[target_feature(enable = "avx512f,avx512dq")]
    #[inline]
    pub(super) fn test(line: &[u64; 8], seed: u64, per_line: u32) -> bool {
        // SAFETY: the line's 64 bytes, read unaligned.
        let current = unsafe { _mm512_loadu_si512(line.as_ptr().cast()) };
        let low = lanes(per_line, 0);
        let (words, bits) = probes(seed, 0, low);
        if present(current, words, bits) != low {
            return false;
        }
        if per_line <= 8 {
            return true;
        }
        let high = lanes(per_line, 8);
        let (words, bits) = probes(seed, 8, high);
        present(current, words, bits) == high
    }
}

/// `$body` for `$j` = 0, 1, … `$c - 1` (`$c` ≤ [`MAX_LINES`](crate::sizing::MAX_LINES), a constant), written out rather
/// than looped (nor a closure the optimiser might leave a call), so that an item's lines are
/// straight-line code.
macro_rules! each_line {
    ($c:expr, $j:ident => $body:block) => {{
        const { assert!($c as u32 <= $crate::sizing::MAX_LINES) };
        if $c > 0 {
            let $j = 0;
            $body
        }
        if $c > 1 {
            let $j = 1;
            $body
        }
        if $c > 2 {
            let $j = 2;
            $body
        }
        if $c > 3 {
            let $j = 3;
            $body
        }
    }};
}
pub(crate) use each_line;

/// `$body` with the constant `$c` (a `usize`) equal to `$count`, an item's lines in a layout in
/// lines (1..=[`MAX_LINES`](crate::sizing::MAX_LINES)): code compiled per line count, chosen by one jump. Panics on any
/// other count, which no layout in lines has.
macro_rules! by_line_count {
    ($count:expr, $c:ident => $body:expr) => {
        match $count {
            1 => {
                const $c: usize = 1;
                $body
            }
            2 => {
                const $c: usize = 2;
                $body
            }
            3 => {
                const $c: usize = 3;
                $body
            }
            4 => {
                const $c: usize = 4;
                $body
            }
            count => panic!("a layout in lines has 1 to 4 lines, not {count}"),
        }
    };
}
pub(crate) use by_line_count;

/// Room for the `C` lines of each item of a group ([`GroupLines`]): left uninitialised rather
/// than zeroed (1 KB at 4 lines an item), and made by the caller, so that the table is filled
/// where it stays rather than filled and then moved (copied whole).
pub(crate) struct LineTable<const C: usize>([[MaybeUninit<*mut [u64; 8]>; C]; GROUP]);

impl<const C: usize> LineTable<C> {
    #[inline(always)]
    pub(crate) fn new() -> LineTable<C> {
        LineTable([[MaybeUninit::uninit(); C]; GROUP])
    }
}

/// The `C` lines of each item of a group in one store, each found (and its loading started)
/// once, then tested and set through [`item`](Self::item) without computing where it lives
/// again. Borrows the store exclusively while it lives.
pub(crate) struct GroupLines<'a, 'g, const C: usize> {
    group: &'g [ItemHash],
    /// Line j of item i: 8 words of one block of the store, written for every item of `group`
    /// (at most [`GROUP`]); the rows past them are never read.
    lines: &'a mut [[MaybeUninit<*mut [u64; 8]>; C]; GROUP],
    store: PhantomData<&'a mut BitStore>,
}

impl<'a, 'g, const C: usize> GroupLines<'a, 'g, C> {
    /// Finds lines 0..C ([`ItemHash::line`]) of each item of `group` (at most [`GROUP`]) in
    /// `store`, a layout in lines' bits, into `table`, and starts loading them into the CPU's
    /// caches.
    #[inline(always)]
    pub(crate) fn resolve(
        table: &'a mut LineTable<C>,
        store: &'a mut BitStore,
        group: &'g [ItemHash],
    ) -> GroupLines<'a, 'g, C> {
        assert!(group.len() <= GROUP, "a group of {} items", group.len());
        let total = store.len() as u64 / 8;
        assert!(total > 0, "a layout in lines has a line");
        let lines = &mut table.0;
        // Which block holds a line is decided once for the group, not per line.
        match store.pieces() {
            // SAFETY: a line index below `total` (see `find`) starts a word below len - 7; the
            // store is borrowed, unchanged, meanwhile.
            Some(pieces) => find(lines, group, total, |word| unsafe { pieces.word_ptr(word) }),
            None => {
                let block = store.ptr.as_ptr();
                // SAFETY: as above, within the one block of `len` words.
                find(lines, group, total, |word| unsafe { block.add(word) });
            }
        }
        GroupLines {
            group,
            lines,
            store: PhantomData,
        }
    }

    /// Items in the group.
    #[inline(always)]
    pub(crate) fn len(&self) -> usize {
        self.group.len()
    }

    /// Item `item`'s hash and its lines, as [`resolve`](Self::resolve) found them. Panics past
    /// the group's items.
    #[inline(always)]
    pub(crate) fn item(&mut self, item: usize) -> (&'g ItemHash, ItemLines<'_, C>) {
        let hash = &self.group[item];
        // SAFETY: item < the group's length (checked just above) ≤ GROUP (`resolve` checks).
        let lines = unsafe { self.lines.get_unchecked(item) };
        (hash, ItemLines { lines })
    }
}

/// One item's `C` lines of a [`GroupLines`], which it borrows exclusively: no other item's
/// lines (which may be the same lines) are reachable meanwhile.
pub(crate) struct ItemLines<'b, const C: usize> {
    /// A row of the group's table that [`GroupLines::resolve`] wrote: [`GroupLines::item`]
    /// hands out only the rows of the group's items.
    lines: &'b [MaybeUninit<*mut [u64; 8]>; C],
}

impl<const C: usize> ItemLines<'_, C> {
    /// Line `j` (< C).
    #[inline(always)]
    pub(crate) fn line_mut(&mut self, j: usize) -> &mut [u64; 8] {
        // SAFETY: the row was written (see `lines`): 8 initialised words of one block of the
        // store (a piece is whole lines), which the group's table borrows exclusively and
        // `self` borrows from it mutably; the reference borrows `self` mutably, so no other
        // reference into the store lives meanwhile.
        unsafe { &mut *self.lines[j].assume_init() }
    }
}

/// Fills `lines` with the address of each line of each item of `group`, `word` giving the
/// address of a word below the store's length, and starts loading them.
#[inline(always)]
fn find<const C: usize>(
    lines: &mut [[MaybeUninit<*mut [u64; 8]>; C]; GROUP],
    group: &[ItemHash],
    total: u64,
    word: impl Fn(usize) -> *mut u64,
) {
    for (item, hash) in lines.iter_mut().zip(group) {
        each_line!(C, j => {
            // (x · total) >> 64 < total for any 64-bit x: words 8·line .. 8·line + 7 are
            // inside the store.
            let line = word(hash.line(j, total) as usize * 8);
            #[cfg(target_arch = "x86_64")]
            // SAFETY: prefetching is a hint on an address inside the store; it never faults.
            unsafe {
                std::arch::x86_64::_mm_prefetch(line.cast::<i8>(), std::arch::x86_64::_MM_HINT_T0)
            };
            item[j].write(line.cast());
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(target_arch = "x86_64")]
    use crate::hash::ItemHash;
    #[cfg(target_arch = "x86_64")]
    use crate::sizing::MAX_LINES;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// Lines of sparse to dense bits, so that tests pass and fail and sets change and do not.
    fn random_line(rng: &mut ChaCha8Rng) -> [u64; 8] {
        let density = rng.random_range(0..4);
        std::array::from_fn(|_| (0..density).fold(u64::MAX, |word, _| word & rng.random::<u64>()))
            .map(|word| if density == 0 { 0 } else { word })
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn avx512_lines_answer_and_set_as_the_portable_ones() {
        let Some(avx512) = Avx512::detect() else {
            eprintln!("no AVX-512 on this CPU: nothing to compare");
            return;
        };
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let (mut passed, mut changed) = (0, 0);
        for per_line in 1..=16 {
            for _ in 0..300 {
                let hash = ItemHash::new(&rng.random::<[u8; 8]>(), 1);
                for j in 0..MAX_LINES as usize {
                    let seed = hash.line_seed(j);
                    let line = random_line(&mut rng);
                    // A line holding exactly this seed's probes: tests pass, a set changes
                    // nothing.
                    let mut own = [0u64; 8];
                    Portable::new().set(&mut own, seed, per_line);
                    for line in [line, own, own.map(|w| w | line[0])] {
                        let context =
                            format!("{per_line} probes of line {j} {seed:#x} in {line:x?}");
                        assert_eq!(
                            avx512.test(&line, seed, per_line),
                            Portable::new().test(&line, seed, per_line),
                            "{context}"
                        );
                        let (mut simd, mut portable) = (line, line);
                        let answer = Portable::new().set(&mut portable, seed, per_line);
                        assert_eq!(avx512.set(&mut simd, seed, per_line), answer, "{context}");
                        assert_eq!(simd, portable, "{context}");
                        let (mut simd, mut portable) = (line, line);
                        avx512.or_in(&mut simd, seed, per_line);
                        Portable::new().or_in(&mut portable, seed, per_line);
                        assert_eq!(simd, portable, "{context}");
                        passed += usize::from(!answer);
                        changed += usize::from(answer);
                    }
                }
            }
        }
        assert!(passed > 20_000 && changed > 15_000, "{passed} {changed}");
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn bmi2_lines_set_as_the_portable_ones() {
        let Some(bmi2) = Bmi2::detect() else {
            eprintln!("no BMI2 on this CPU: nothing to compare");
            return;
        };
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let (mut passed, mut changed) = (0, 0);
        for per_line in 1..=16 {
            for _ in 0..500 {
                let seed: u64 = rng.random();
                let line = random_line(&mut rng);
                let mut own = [0u64; 8];
                Portable::new().set(&mut own, seed, per_line);
                for line in [line, own] {
                    let (mut fast, mut portable) = (line, line);
                    let answer = Portable::new().set(&mut portable, seed, per_line);
                    assert_eq!(bmi2.set(&mut fast, seed, per_line), answer, "{per_line}");
                    assert_eq!(
                        fast, portable,
                        "{per_line} probes of {seed:#x} in {line:x?}"
                    );
                    let (mut fast, mut portable) = (line, line);
                    bmi2.or_in(&mut fast, seed, per_line);
                    Portable::new().or_in(&mut portable, seed, per_line);
                    assert_eq!(
                        fast, portable,
                        "{per_line} probes of {seed:#x} in {line:x?}"
                    );
                    passed += usize::from(!answer);
                    changed += usize::from(answer);
                }
            }
        }
        assert!(passed > 8_000 && changed > 5_000, "{passed} {changed}");
    }

    #[test]
    fn a_portable_set_changes_exactly_the_unset_probes() {
        let mut rng = ChaCha8Rng::seed_from_u64(6);
        for per_line in 1..=16 {
            for _ in 0..500 {
                let seed: u64 = rng.random();
                let line = random_line(&mut rng);
                let mut reference = line;
                for &m in &BLOCK_MULTIPLIERS[..per_line as usize] {
                    let p = seed.wrapping_mul(m) >> 55;
                    reference[(p / 64) as usize] |= 1 << (p % 64);
                }
                let mut set = line;
                assert_eq!(
                    Portable::new().set(&mut set, seed, per_line),
                    reference != line
                );
                assert_eq!(set, reference);
                assert_eq!(
                    Portable::new().test(&line, seed, per_line),
                    reference == line
                );
            }
        }
    }
}
