//! Sizing math: layout, bits and hash count of a layer from (capacity, error rate).
//!
//! Only the crate's own ln and exp (`math.rs`) are used, never libm's, so a shape is the same on
//! every machine. Replicas and the AOF receive every layer's shape explicitly (BF.GROW), but an
//! AOF or replication stream written by an older release replays its growth by sizing here.
//! Everything else is IEEE basic operations in a fixed order.

use std::f64::consts::LN_2;

use super::math;

/// The most hash functions a layer may use. Enough for error rates around 1e-70, far below what
/// any scaling filter reaches before it hits the layer cap.
pub const MAX_HASHES: u32 = 255;

/// Bits in one cache line of a [`Layout::Blocked`] or [`Layout::Lines`] layer: 64 bytes.
pub const BLOCK_BITS: u64 = 512;

/// The most probes an item makes inside one cache line (one per entry of the hash module's
/// multiplier table; error rates that would need more get more lines or the classic layout).
pub const MAX_BLOCKED_HASHES: u32 = 16;

/// The most cache lines an item's probes spread over. Four lines come within 2–4% of the classic
/// bits down to 1e-9 (see [`LINES_MAX_COST`]); more would only buy back a few percent for more
/// misses.
pub const MAX_LINES: u32 = 4;

/// A layer uses h cache lines per item for the smallest h whose bits per item stay within this
/// factor of the classic layout's: at most 5% more memory, for h cache misses per item instead of
/// k (Putze, Sanders, Singler, "Cache-, Hash- and Space-Efficient Bloom Filters", WEA 2007, §3).
/// When no h up to [`MAX_LINES`] qualifies (rates somewhat below 1e-9: 4 lines cost +4.1% at 1e-9,
/// +7.7% at 1e-12), the layer stays classic unless that misses its rate ([`CLASSIC_FLOOR`]).
pub const LINES_MAX_COST: f64 = 1.05;

/// Layers whose classic size is below this stay classic; from here up they go in lines. Measured
/// (`cargo bench -p rustbloom-core --bench core -- layout`, the `# ab` lines: this thread's CPU
/// ns per item, batches of 100 with prefetch, classic vs the chosen lines, fastest of 11
/// alternating rounds; AMD EPYC, 1 MB L2 per core, 32 MB L3, shared and loaded while measured):
///
/// ```text
///   ε     layer   member lookup    non-member lookup   insert
///   1e-2  100 KB   20.5 →  20.2     22.2 →  18.7        24.3 →  28.9
///         1 MB     44.7 →  32.8     33.3 →  26.9        53.6 →  48.4
///         10 MB    92.0 →  69.1     59.9 →  58.7       104.9 →  51.1
///         100 MB  107.7 →  96.8     85.7 →  88.9       114.6 → 119.3
///   1e-4  100 KB   28.4 →  33.5     26.1 →  19.8        34.1 →  40.2
///         1 MB     48.5 →  45.0     31.4 →  20.4        54.1 →  42.5
///         10 MB   117.8 → 116.0     61.0 →  59.3       129.6 →  79.5
///         100 MB  188.6 → 184.4    137.3 → 106.6       197.1 → 195.5
///   1e-7  100 KB   55.7 →  56.0     35.8 →  21.8        56.1 →  58.0
///         1 MB     75.0 →  70.8     39.0 →  23.6        60.4 →  58.8
///         10 MB   214.9 → 183.7    119.2 →  77.8       235.8 → 233.8
///         100 MB  321.3 → 250.9    249.0 → 107.1       380.8 → 309.1
///   1e-9  100 KB   69.2 →  66.6     40.2 →  22.2        68.3 →  65.0
///         1 MB     87.6 →  74.4     45.0 →  23.7        79.6 →  70.8
///         10 MB   216.2 → 224.0    127.3 →  69.6       235.9 → 127.9
///         100 MB  378.1 → 326.3    299.5 → 108.7       416.5 → 339.5
/// ```
///
/// From 1 MB up lines are as fast or faster everywhere (up to 2.8× on non-member lookups, which
/// usually stop in the first line); at 100 KB, inside L2, they still win non-member lookups but
/// lose up to 18% on inserts and member lookups at 1e-2 and 1e-4, where k is small anyway. So the
/// line is drawn between the two, at half this machine's L2: a byte threshold, but one set by
/// measurement and far below the 8 MiB of the blocked layout before. Layers below it stay
/// classic where classic reaches their rate (see [`CLASSIC_FLOOR`]).
pub const LINES_MIN_BYTES: u64 = 512 << 10;

/// The false-positive floor of a classic layer times its bits, measured: double hashing's
/// probes `h1 + i·h2` are all reduced by the same multiply-shift, so for about one item in m/c
/// the step h2·m/2^64 lies near 0 or near a multiple of m/c for a small c, and the item's k
/// probes fall on a handful of bits; such items read as present far more often than ε, and
/// their share, about this constant / m, is a floor whatever ε. Measured with never-added
/// random items against classic layers at their capacity ((rate − ε) × m, 10⁷ items): 0.09–0.10
/// at 1e-9 (k = 30) for 100 to 1,000 items, 0.09–0.21 at 1e-6 (k = 20), 0.24–0.27 at 1e-4
/// (k = 13) and 0.24–0.27 at 1e-3 (k = 10); rounded up. Layouts in lines place an item's probes
/// with a separate multiplier each and show no such floor (their rate stayed within ε at every
/// size measured, down to one line).
pub const CLASSIC_FLOOR: f64 = 0.3;

/// A layer's bits per item are searched to this relative width: the exact bits of the model for
/// any layer below 10¹² bits, the same ones the 50-step bisection on [1, 200] of releases before
/// found for the one-line layout (so those layers stay bit-identical), always on the safe side.
const SEARCH_TOLERANCE: f64 = 1e-14;

/// Most steps of that search; it takes about 10 evaluations, at most 40 over the 1 to 4 lines
/// and 1 to 16 probes per line tried from 1e-2 to 1e-12 (tested); the cap only bounds a
/// pathological case.
const SEARCH_STEPS: u32 = 64;

/// Poisson terms smaller than this fraction of the sum so far are past the edge of the sum (once
/// they are shrinking), so the sum stops there.
const NEGLIGIBLE_TERM: f64 = 1e-18;

/// Where an item's bits go in a layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// k positions anywhere in the layer.
    Classic,
    /// k positions inside one 512-bit line chosen per item: the one-line case of
    /// [`Layout::Lines`], bit for bit, under the name and encoding code it had first.
    Blocked,
    /// k/h positions in each of h 512-bit lines chosen per item, h in `2..=MAX_LINES`. A byte:
    /// the layout is kept in every layer, whose bookkeeping (counted in BF.INFO's Size and in
    /// MEMORY USAGE) must not grow.
    Lines(u8),
}

impl Layout {
    /// Cache lines an item's probes touch: 0 for classic (k lines anywhere), else h.
    pub fn lines(self) -> u32 {
        match self {
            Layout::Classic => 0,
            Layout::Blocked => 1,
            Layout::Lines(lines) => u32::from(lines),
        }
    }

    /// The layout with `lines` cache lines per item (0: classic); None past [`MAX_LINES`].
    pub fn with_lines(lines: u32) -> Option<Layout> {
        match lines {
            0 => Some(Layout::Classic),
            1 => Some(Layout::Blocked),
            2..=MAX_LINES => Some(Layout::Lines(lines as u8)),
            _ => None,
        }
    }
}

/// The shape of one layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LayerSize {
    /// Number of bits, a positive multiple of 64 (of 512 for a layout in lines).
    pub bits: u64,
    /// Number of hash probes per item, in `1..=MAX_HASHES`; for a layout in h lines a multiple of
    /// h with at most [`MAX_BLOCKED_HASHES`] per line.
    pub num_hashes: u32,
    pub layout: Layout,
}

impl LayerSize {
    /// Bytes of bit storage.
    pub fn bytes(&self) -> u64 {
        self.bits / 8
    }

    /// Probes per cache line for a layout in lines; 0 for classic.
    pub fn hashes_per_line(&self) -> u32 {
        self.num_hashes
            .checked_div(self.layout.lines())
            .unwrap_or(0)
    }

    /// Whether this shape is one the layer code can run, else the field that is not: the decoder
    /// checks every stored layer with it before trusting it.
    pub fn check(&self) -> Result<(), &'static str> {
        let lines = self.layout.lines();
        if Layout::with_lines(lines) != Some(self.layout) {
            return Err("layout");
        }
        let unit = if lines == 0 { 64 } else { BLOCK_BITS };
        if self.bits == 0 || !self.bits.is_multiple_of(unit) {
            return Err("bit count");
        }
        let hashes_ok = if lines == 0 {
            (1..=MAX_HASHES).contains(&self.num_hashes)
        } else {
            self.num_hashes.is_multiple_of(lines)
                && (1..=MAX_BLOCKED_HASHES).contains(&(self.num_hashes / lines))
        };
        if hashes_ok {
            Ok(())
        } else {
            Err("hash count")
        }
    }
}

/// Why a layer cannot be sized.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SizingError {
    /// The error rate is not strictly between 0 and 1, or so small it needs more than
    /// [`MAX_HASHES`] hashes.
    ErrorRate,
    /// Capacity zero, or a size beyond 2^60 bits.
    Capacity,
}

impl std::fmt::Display for SizingError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SizingError::ErrorRate => "error rate too small for a Bloom filter",
            SizingError::Capacity => "capacity too large for a Bloom filter",
        })
    }
}

/// Sizes a layer so that `capacity` items give a false-positive rate of at most `error_rate`:
/// in the fewest cache lines per item (1 to [`MAX_LINES`]) that cost at most [`LINES_MAX_COST`]
/// in bits over the classic layout, or classic when the layer is small (see [`LINES_MIN_BYTES`])
/// or no number of lines is cheap enough; but never classic where double hashing's floor would
/// take more than its share of ε (see [`CLASSIC_FLOOR`]): there the layout in lines with the
/// fewest bits, whatever it costs over classic.
///
/// ```
/// use rustbloom_core::sizing::{layer_size, Layout};
/// let small = layer_size(1_000, 0.01).unwrap();
/// assert_eq!((small.layout, small.num_hashes), (Layout::Classic, 7));
/// // 1%: one cache line per item; 1e-4: two; 1e-9: four.
/// assert_eq!(layer_size(10_000_000, 1e-2).unwrap().layout, Layout::Blocked);
/// assert_eq!(layer_size(10_000_000, 1e-4).unwrap().layout, Layout::Lines(2));
/// let tight = layer_size(10_000_000, 1e-9).unwrap();
/// assert_eq!(tight.layout, Layout::Lines(4));
/// // The classic optimum is ln(1/ε)/ln²2 = 43.13 bits per item.
/// let bits_per_item = tight.bits as f64 / 1e7;
/// assert!(bits_per_item > 43.13 && bits_per_item < 43.13 * 1.05, "{bits_per_item}");
/// // 300 items at 1e-9 in 13,056 classic bits would see about 10⁻⁵ false positives.
/// assert_eq!(layer_size(300, 1e-9).unwrap().layout, Layout::Lines(4));
/// ```
pub fn layer_size(capacity: u64, error_rate: f64) -> Result<LayerSize, SizingError> {
    let classic_size = classic_size(capacity, error_rate)?;
    if classic_size.bytes() >= LINES_MIN_BYTES {
        let (_, classic) = classic_bits_per_item(error_rate)?;
        let cheap = (1..=MAX_LINES)
            .find_map(|lines| in_lines(capacity, error_rate, lines, classic * LINES_MAX_COST));
        if let Some(size) = cheap {
            return Ok(size);
        }
    }
    Ok(past_classic_floor(classic_size, error_rate)
        .then(|| fewest_bits_in_lines(capacity, error_rate, |_| true))
        .flatten()
        .unwrap_or(classic_size))
}

/// Whether a classic layer of this shape would fall short of `error_rate`: whether the floor of
/// double hashing, about [`CLASSIC_FLOOR`] / bits, exceeds it; classic thus needs m ≥ 0.3/ε bits
/// (30 at 1e-2, 3,000 at 1e-4, 3·10⁸ at 1e-9). The whole of ε, not a share of it: a layer left
/// classic answers at most about 2ε, as RedisBloom's own double hashing does at those sizes, and
/// keeps RedisBloom's sizes (its flow tests pin BF.INFO's Size of `0.001 100` and of a 3-item
/// filter at 1%); every layer that would miss its rate by more (100 items at 1e-6 by 100×, at
/// 1e-9 by 10⁴×) goes in lines.
pub fn past_classic_floor(size: LayerSize, error_rate: f64) -> bool {
    CLASSIC_FLOOR > error_rate * size.bits as f64
}

/// The layout in lines (1 to [`MAX_LINES`]) with the fewest bits among those `fits` accepts, the
/// fewer lines on a tie; None when none reaches ε within 2× the classic bits.
fn fewest_bits_in_lines(
    capacity: u64,
    error_rate: f64,
    fits: impl Fn(&LayerSize) -> bool,
) -> Option<LayerSize> {
    (1..=MAX_LINES)
        .filter_map(|lines| lines_size(capacity, error_rate, lines))
        .filter(|size| fits(size))
        .fold(None, |best: Option<LayerSize>, size| match best {
            Some(best) if best.bits <= size.bits => Some(best),
            _ => Some(size),
        })
}

/// The classic layout: solve (1 − e^(−k·n/m))^k ≤ ε for the smallest m, over the integers k
/// near the optimum log2(1/ε) (rounding k itself, as RedisBloom does, overshoots the rate).
/// m is rounded up to whole 64-bit words.
pub fn classic_size(capacity: u64, error_rate: f64) -> Result<LayerSize, SizingError> {
    let (num_hashes, bits_per_item) = classic_bits_per_item(error_rate)?;
    Ok(LayerSize {
        bits: round_up(capacity, bits_per_item, 64)?,
        num_hashes,
        layout: Layout::Classic,
    })
}

/// The layout in `lines` cache lines (1..=[`MAX_LINES`]) at its best k, whatever it costs over
/// classic as long as that is under 2×; None when no k reaches ε in that or `lines` is out of
/// range. [`layer_size`] takes it only when it is within [`LINES_MAX_COST`].
pub fn lines_size(capacity: u64, error_rate: f64, lines: u32) -> Option<LayerSize> {
    let (_, classic) = classic_bits_per_item(error_rate).ok()?;
    in_lines(capacity, error_rate, lines, classic * 2.0)
}

/// Sizes one of the `slots` slots of a sliding window (see [`crate::window`]) for `capacity`
/// items at `error_rate`, the slots together taking at most `max_bits`: one cache line per item
/// (the blocked layout) while it stays within `max_bits` and at most `blocked_max_cost` × a
/// classic slot; else, by a layer's rule ([`layer_size`]), for a classic slot of
/// [`LINES_MIN_BYTES`] or more the fewest lines within [`LINES_MAX_COST`] of it and `max_bits`;
/// else classic, unless past double hashing's floor ([`past_classic_floor`]), where the layout
/// in lines with the fewest bits within `max_bits` is taken. Low rates thus cost h lines per
/// slot, not k words scattered over it.
pub fn slot_size(
    capacity: u64,
    error_rate: f64,
    slots: u64,
    max_bits: f64,
    blocked_max_cost: f64,
) -> Result<LayerSize, SizingError> {
    let classic = classic_size(capacity, error_rate)?;
    let fits = |size: &LayerSize| (size.bits * slots) as f64 <= max_bits;
    Ok(lines_size(capacity, error_rate, 1)
        .filter(|blocked| {
            fits(blocked) && blocked.bits as f64 <= classic.bits as f64 * blocked_max_cost
        })
        .or_else(|| {
            let big = classic.bytes() >= LINES_MIN_BYTES;
            (2..=MAX_LINES).filter(|_| big).find_map(|lines| {
                lines_size(capacity, error_rate, lines).filter(|size| {
                    size.bits as f64 <= classic.bits as f64 * LINES_MAX_COST && fits(size)
                })
            })
        })
        .or_else(|| {
            past_classic_floor(classic, error_rate)
                .then(|| fewest_bits_in_lines(capacity, error_rate, fits))
                .flatten()
        })
        .unwrap_or(classic))
}

/// Sizes a layer in `lines` lines with at most `max_bits_per_item` bits per item.
///
/// Model (Putze, Sanders, Singler 2007, §3): each of an item's h lines is a one-line blocked
/// filter with k/h probes; with c bits per item a line receives λ = h·512/c item-lines on average
/// (Poisson), so the rate is `[Σ_j Pois(j; λ)·(1 − (1 − 1/512)^(j·k/h))^(k/h)]^h`. k is a
/// multiple of h (k/h probes in every line), which keeps all lines alike and the model exact;
/// at the best integer k/h it costs at most 1% in bits over the best real k (checked in tests).
/// For each k/h near log2(1/ε)/h we search c between the classic optimum ln(1/ε)/ln²2, which no
/// layout beats, and `max_bits_per_item` (see [`smallest_meeting`]), and keep the cheapest.
fn in_lines(
    capacity: u64,
    error_rate: f64,
    lines: u32,
    max_bits_per_item: f64,
) -> Option<LayerSize> {
    let layout = Layout::with_lines(lines).filter(|layout| *layout != Layout::Classic)?;
    let floor = math::ln(1.0 / error_rate) / (LN_2 * LN_2);
    let rate = |bits_per_item: f64, per_line: u32| {
        let lambda = f64::from(lines) * BLOCK_BITS as f64 / bits_per_item;
        math::powi(line_error_rate(lambda, per_line), lines)
    };
    // The best k/h sits a little below the classic optimum log2(1/ε) spread over h lines (crowded
    // lines favour fewer probes): these five candidates hold it from 1e-2 to 1e-12 (tested).
    let centre = (floor * LN_2 / f64::from(lines)).ceil() as u32;
    let candidates = centre.saturating_sub(3).max(1)..=(centre + 1).min(MAX_BLOCKED_HASHES);
    let (per_line, bits_per_item) = cheapest(candidates, |per_line| {
        smallest_meeting(floor, max_bits_per_item, error_rate, |c| rate(c, per_line))
    });
    if !bits_per_item.is_finite() {
        return None;
    }
    Some(LayerSize {
        bits: round_up(capacity, bits_per_item, BLOCK_BITS).ok()?,
        num_hashes: per_line * lines,
        layout,
    })
}

/// The smallest c in [low, high] with `rate(c)` ≤ `target`, for a rate that falls as c grows;
/// None when even `high` misses. Regula falsi on ln rate − ln target, which is nearly linear in
/// c, with the Illinois modification (Dowell and Jarratt, BIT 11, 1971: halve the value kept at
/// an end that survives twice, so both ends close in): about 10 evaluations of the model where
/// bisection needs 40 or more. Each step keeps a bracket whose upper end meets the target, so the answer
/// is on the safe side, and falls back to halving when interpolation leaves the bracket.
fn smallest_meeting(
    mut low: f64,
    mut high: f64,
    target: f64,
    rate: impl Fn(f64) -> f64,
) -> Option<f64> {
    let ln_target = math::ln(target);
    let gap = |r: f64| math::ln(r) - ln_target;
    let high_rate = rate(high);
    if high_rate > target || high_rate.is_nan() {
        return None;
    }
    let low_rate = rate(low);
    if low_rate <= target {
        return Some(low);
    }
    let (mut low_gap, mut high_gap) = (gap(low_rate), gap(high_rate));
    let mut kept = 0i8;
    for _ in 0..SEARCH_STEPS {
        if high - low <= high * SEARCH_TOLERANCE {
            break;
        }
        let secant = (low * high_gap - high * low_gap) / (high_gap - low_gap);
        let mid = if secant > low && secant < high {
            secant
        } else {
            (low + high) / 2.0
        };
        let mid_rate = rate(mid);
        if mid_rate <= target {
            high = mid;
            high_gap = gap(mid_rate);
            if kept == -1 {
                low_gap /= 2.0;
            }
            kept = -1;
        } else {
            low = mid;
            low_gap = gap(mid_rate);
            if kept == 1 {
                high_gap /= 2.0;
            }
            kept = 1;
        }
    }
    Some(high)
}

/// The classic layout's best k and its bits per item for `error_rate`.
fn classic_bits_per_item(error_rate: f64) -> Result<(u32, f64), SizingError> {
    if !(error_rate > 0.0 && error_rate < 1.0) {
        return Err(SizingError::ErrorRate);
    }
    let optimal_k = math::ln(1.0 / error_rate) / LN_2;
    if !optimal_k.is_finite() || optimal_k > f64::from(MAX_HASHES) {
        return Err(SizingError::ErrorRate);
    }
    let lowest = (optimal_k.floor() as u32).saturating_sub(1).max(1);
    let highest = (optimal_k.ceil() as u32 + 1).min(MAX_HASHES);
    Ok(cheapest(lowest..=highest, |k| {
        let k = f64::from(k);
        // Bits per item so that k hashes give exactly ε: solve (1 − e^(−k/c))^k = ε for c.
        // ε^(1/k) stays near 1/2 for the k tried, so ln(1 − t) loses no precision.
        Some(-k / math::ln(1.0 - math::pow(error_rate, 1.0 / k)))
    }))
}

/// The k (and its bits per item) with the fewest bits per item.
fn cheapest(
    candidates: std::ops::RangeInclusive<u32>,
    bits_per_item: impl Fn(u32) -> Option<f64>,
) -> (u32, f64) {
    candidates
        .filter_map(|k| bits_per_item(k).map(|b| (k, b)))
        .fold((1, f64::INFINITY), |best, candidate| {
            if candidate.1 < best.1 {
                candidate
            } else {
                best
            }
        })
}

/// `capacity × bits_per_item` rounded up to a multiple of `unit` bits.
fn round_up(capacity: u64, bits_per_item: f64, unit: u64) -> Result<u64, SizingError> {
    if capacity == 0 {
        return Err(SizingError::Capacity);
    }
    let bits = (capacity as f64 * bits_per_item).ceil();
    if !bits.is_finite() || bits > (1u64 << 60) as f64 {
        return Err(SizingError::Capacity);
    }
    Ok((bits as u64).max(1).div_ceil(unit) * unit)
}

/// The false-positive rate of one 512-bit line that received a Poisson(λ) number of items, each
/// setting `per_line` random bits of it: `Σ_j Pois(j; λ)·(1 − q^j)^per_line` with
/// q = (1 − 1/512)^per_line the chance that one item leaves a given bit clear.
///
/// The sum starts at the Poisson mode, whose weight is the only one computed from logarithms
/// (Stirling's series for ln m!), and walks outwards with the ratios Pois(j+1)/Pois(j) = λ/(j+1)
/// and q^(j+1)/q^j = q, stopping each way once terms shrink below [`NEGLIGIBLE_TERM`] of the sum:
/// three ln/exp per call instead of three per term, and about 8√λ terms instead of λ + 12√λ + 30.
/// Both walks are monotone past the mode (the summand is log-concave in j), so nothing is missed.
fn line_error_rate(lambda: f64, per_line: u32) -> f64 {
    if lambda.is_nan() || lambda <= 0.0 {
        return 0.0;
    }
    if !lambda.is_finite() {
        return 1.0;
    }
    let q = math::powi(1.0 - 1.0 / BLOCK_BITS as f64, per_line);
    let false_positive = |clear: f64| math::powi(1.0 - clear, per_line);
    let mode = lambda.floor();
    let mode_weight = math::exp(mode * math::ln(lambda) - lambda - ln_factorial(mode));
    let mode_clear = math::powu(q, mode as u64);

    let mut rate = mode_weight * false_positive(mode_clear);
    let (mut weight, mut clear, mut j, mut previous) = (mode_weight, mode_clear, mode, rate);
    loop {
        j += 1.0;
        weight *= lambda / j;
        clear *= q;
        let term = weight * false_positive(clear);
        rate += term;
        if term.is_nan() || (term <= previous && term <= rate * NEGLIGIBLE_TERM) {
            break;
        }
        previous = term;
    }
    let (mut weight, mut clear, mut j) = (mode_weight, mode_clear, mode);
    while j > 0.0 {
        weight *= j / lambda;
        clear /= q;
        j -= 1.0;
        let term = weight * false_positive(clear);
        rate += term;
        if term.is_nan() || term <= rate * NEGLIGIBLE_TERM {
            break;
        }
    }
    rate
}

/// Ok when `size` is a shape a layer of `capacity` items at `error_rate` could have, whoever sized
/// it (this release, an older one, or RedisBloom's formulas): at least the classic optimum of
/// bits, −ln ε / ln²2 per item (no Bloom filter layout reaches ε with fewer; 1% slack for the
/// rounding of other sizers), and a hash count within what ε implies, log2(1/ε) give or take a
/// few (all our sizers pick k near it; a forged k of 255 is not). Decoders and explicit growth
/// check this before trusting a shape, so a header cannot claim 2^30 items in 64 bits.
pub fn check_shape(size: LayerSize, capacity: u64, error_rate: f64) -> Result<(), &'static str> {
    if !(error_rate > 0.0 && error_rate < 1.0) {
        return Err("error rate");
    }
    let optimal_k = math::ln(1.0 / error_rate) / LN_2;
    let optimal_bits_per_item = optimal_k / LN_2;
    let fewest_bits = capacity as f64 * optimal_bits_per_item * 0.99;
    if (size.bits as f64) < fewest_bits.min((1u64 << 62) as f64) {
        return Err("bit count too small for the capacity");
    }
    let (lowest, highest) = match size.layout {
        Layout::Classic => (optimal_k / 2.0, optimal_k + 3.0),
        // Blocked and lines layouts trade hashes for bits (fewer probes per crowded line).
        Layout::Blocked | Layout::Lines(_) => (optimal_k / 3.0, optimal_k + 3.0),
    };
    let k = f64::from(size.num_hashes);
    if k < lowest.floor().max(1.0) || k > highest.ceil() {
        return Err("hash count");
    }
    Ok(())
}

/// ln m! for a whole number m ≥ 0: summed below 16, else Stirling's series
/// m·ln m − m + ln(2πm)/2 + 1/(12m) − 1/(360m³) + 1/(1260m⁵), whose next term is under 10⁻¹².
fn ln_factorial(m: f64) -> f64 {
    if m < 16.0 {
        return (2..m as u32 + 1).map(|i| math::ln(f64::from(i))).sum();
    }
    let ln_m = math::ln(m);
    let (m2, m3) = (m * m, m * m * m);
    m * ln_m - m + 0.5 * (LN_2PI + ln_m) + 1.0 / (12.0 * m) - 1.0 / (360.0 * m3)
        + 1.0 / (1260.0 * m3 * m2)
}

/// ln 2π, as the nearest double.
const LN_2PI: f64 = 1.837_877_066_409_345_5;

/// The false-positive rate of `items` items in a layer of this shape, by the model it was sized
/// with.
pub fn expected_error_rate(size: LayerSize, items: u64) -> f64 {
    let lines = size.layout.lines();
    if lines == 0 {
        let k = f64::from(size.num_hashes);
        return math::powi(
            1.0 - math::exp(-k * items as f64 / size.bits as f64),
            size.num_hashes,
        );
    }
    let lambda = f64::from(lines) * BLOCK_BITS as f64 * items as f64 / size.bits as f64;
    math::powi(line_error_rate(lambda, size.hashes_per_line()), lines)
}

#[cfg(test)]
mod tests;
