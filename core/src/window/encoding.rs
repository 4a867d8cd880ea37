//! The binary encoding of a window filter, for RDB, DUMP/RESTORE and SCANDUMP/LOADCHUNK.
//!
//! A fixed-size header, then the bits: all words in memory order (see the layout in
//! [`super`]), each as 8 little-endian bytes. All integers little-endian:
//!
//! ```text
//!  offset  size  field
//!  0       4     magic "RBLW" (not "RBLM": a window filter never decodes as a scalable one)
//!  4       1     format version: 1 for classic or blocked slots, 2 for slots in lines
//!  5       1     slot layout: 0 classic, 1 blocked (version 1); h = 2..=4 lines (version 2)
//!  6       1     slots in the ring (4)
//!  7       1     hashes per item k: 1..=255 classic, 1..=16 blocked, h·(1..=16) in h lines
//!  8       8     seed of the item hash
//!  16      8     requested error rate (IEEE-754 f64), in (0, 1)
//!  24      8     capacity N per window, 1..=2^30
//!  32      8     window W in ms, 4..=2^40
//!  40      8     last_ms: the latest timestamp a write used (the ring's position)
//!  48      8     bits per slot: a positive multiple of 64 (of 512 blocked or in lines), at most 2^60
//!  56      32    per slot 0..3: adds counted, each at most the slot's bits; with the bits, c
//!                adds hold from c to k·c set bits in their slot (each counted add set one to
//!                k), none when c = 0: checked once the bits are in (see below)
//!  88      8     loaded bytes: how many bytes of bits are valid (less than the total only while
//!                a BF.LOADCHUNK load is incomplete)
//!  96      8     xxh3-64 of bytes 0..96
//!  104     ...   4 × bits-per-slot / 8 bytes of bits
//! ```
//!
//! As in the scalable filter's encoding, the slot's bits and hashes are stored rather than
//! recomputed from the parameters, so a later change of the sizing rule cannot change how an old
//! filter reads; the generation length ⌈W/3⌉ is not stored, it is part of the format. The decoder
//! checks the checksum, every field and the total size before it allocates anything, and the
//! allocation (its allocation size, see [`crate::budget`]) must pass the caller's
//! [`MemoryBudget`].
//!
//! The bits are those the filter holds: a slot whose generation has left the window in a region
//! no write has cleared yet is written as zeros (see [`super::REGION_SLOT_WORDS`]), so the
//! encoding of a filter depends neither on where its writes happened to clear nor on the regions.
//! A decoded filter's counts are checked against its bits: [`decode`] refuses a mismatch; a
//! loader in pieces calls [`WindowFilter::counts_match_bits`] or
//! [`WindowFilter::recount_from_bits`] once all the bits are in. Clearing never trusts a count, so a value whose counts lie still forgets.
//!
//! Big filters move in pieces: [`encode_header`], then [`WindowFilter::read_bits`] over the ranges
//! of [`crate::encoding::pieces`]; on the other side [`decode_header`] gives an all-zero filter
//! that [`WindowFilter::write_bits`] fills.
//!
//! ```
//! use rustbloom_core::window::{encoding, WindowFilter, WindowParams};
//! use rustbloom_core::Unlimited;
//!
//! let params = WindowParams { error_rate: 0.01, capacity: 1000, window_ms: 60_000, seed: 7 };
//! let mut filter = WindowFilter::new(params, 5_000, &mut Unlimited).unwrap();
//! filter.insert(b"alice", 5_000);
//! let bytes = encoding::encode(&filter);
//! let copy = encoding::decode(&bytes, &mut Unlimited).unwrap();
//! assert_eq!(copy, filter);
//! // Restarted two windows later, the copy holds nothing from before.
//! assert!(!copy.contains(b"alice", 5_000 + 2 * 60_000));
//! ```

use xxhash_rust::xxh3::xxh3_64;

use super::{WindowFilter, WindowParams, WindowShape, MAX_WINDOW_MS, MIN_WINDOW_MS, SLOTS};
use crate::budget::MemoryBudget;
use crate::encoding::{check, DecodeError};
use crate::scalable::MAX_CAPACITY;
use crate::sizing::{LayerSize, Layout};

pub(crate) const MAGIC: &[u8; 4] = b"RBLW";
/// Version 1: classic or blocked slots, all this format had until slots in 2 to 4 lines came;
/// version 2: slots in 2 to 4 lines (a reader of version 1 refuses them by their version, not
/// as a corrupt layout). Classic and blocked filters are written as version 1, which any
/// reader of version 1 decodes.
const FORMAT_VERSION_ONE_LINE: u8 = 1;
const FORMAT_VERSION_LINES: u8 = 2;
/// Bytes before the checksum.
const BODY_BYTES: usize = 64 + 8 * SLOTS;
/// Bytes of the header, checksum included.
pub const HEADER_BYTES: usize = BODY_BYTES + 8;
/// The most bits one slot may have, as for a layer.
pub(crate) const MAX_SLOT_BITS: u64 = 1 << 60;

/// The header of a complete `filter` (its bits follow separately, see
/// [`WindowFilter::read_bits`]).
pub fn encode_header(filter: &WindowFilter) -> Vec<u8> {
    encode_header_as(filter, filter.bytes())
}

/// The header with a given loaded-bytes field.
pub(crate) fn encode_header_as(filter: &WindowFilter, loaded: u64) -> Vec<u8> {
    let params = filter.params();
    let slot = filter.shape().slot;
    let mut out = Vec::with_capacity(HEADER_BYTES);
    out.extend_from_slice(MAGIC);
    let lines = slot.layout.lines();
    out.push(if lines <= 1 {
        FORMAT_VERSION_ONE_LINE
    } else {
        FORMAT_VERSION_LINES
    });
    // 0 classic, 1 blocked, h for h lines (h ≤ MAX_LINES).
    out.push(lines as u8);
    out.push(SLOTS as u8);
    // The decoder refuses more than 255 hashes, and sizing never makes more (MAX_HASHES).
    out.push(slot.num_hashes as u8);
    out.extend_from_slice(&params.seed.to_le_bytes());
    out.extend_from_slice(&params.error_rate.to_le_bytes());
    out.extend_from_slice(&params.capacity.to_le_bytes());
    out.extend_from_slice(&params.window_ms.to_le_bytes());
    out.extend_from_slice(&filter.last_ms().to_le_bytes());
    out.extend_from_slice(&slot.bits.to_le_bytes());
    for items in filter.slot_items() {
        out.extend_from_slice(&items.to_le_bytes());
    }
    out.extend_from_slice(&loaded.to_le_bytes());
    let checksum = xxh3_64(&out);
    out.extend_from_slice(&checksum.to_le_bytes());
    out
}

/// The header followed by all the bits: for small filters and tests (big ones go in pieces).
pub fn encode(filter: &WindowFilter) -> Vec<u8> {
    let mut out = encode_header(filter);
    let header = out.len();
    out.resize(header + filter.bytes() as usize, 0);
    filter
        .read_bits(0, &mut out[header..])
        .expect("the buffer is exactly the filter's bits");
    out
}

/// Everything a header says, validated, without the bits.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WindowHeader {
    pub params: WindowParams,
    pub shape: WindowShape,
    pub last_ms: u64,
    pub slot_items: [u64; SLOTS],
    /// Bytes of bits that are valid: less than the total only while a load is incomplete.
    pub loaded_bytes: u64,
}

/// The `N` bytes at `at` of a header already checked to be [`HEADER_BYTES`] long.
fn field<const N: usize>(bytes: &[u8], at: usize) -> [u8; N] {
    let mut out = [0; N];
    out.copy_from_slice(&bytes[at..at + N]);
    out
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(field(bytes, at))
}

/// Reads and validates a header (exactly [`HEADER_BYTES`]): checksum, every field, and that the
/// bits' size is representable. Allocates nothing.
pub fn parse_header(bytes: &[u8]) -> Result<WindowHeader, DecodeError> {
    check(bytes.len() == HEADER_BYTES, "header length")?;
    check(
        xxh3_64(&bytes[..BODY_BYTES]) == u64_at(bytes, BODY_BYTES),
        "checksum",
    )?;
    check(&field::<4>(bytes, 0) == MAGIC, "magic")?;
    let [version, layout, slots, num_hashes] = field::<4>(bytes, 4);
    let layout = match version {
        FORMAT_VERSION_ONE_LINE if layout <= 1 => Layout::with_lines(u32::from(layout)),
        FORMAT_VERSION_LINES if layout >= 2 => Layout::with_lines(u32::from(layout)),
        FORMAT_VERSION_ONE_LINE | FORMAT_VERSION_LINES => None,
        _ => return Err(DecodeError::Corrupt("format version")),
    }
    .ok_or(DecodeError::Corrupt("layout"))?;
    check(usize::from(slots) == SLOTS, "slots")?;
    // The hash count and the bits' unit for the layout are checked as for any layer, below.
    let seed = u64_at(bytes, 8);
    let error_rate = f64::from_le_bytes(field(bytes, 16));
    check(error_rate > 0.0 && error_rate < 1.0, "error rate")?;
    let capacity = u64_at(bytes, 24);
    check((1..=MAX_CAPACITY).contains(&capacity), "capacity")?;
    let window_ms = u64_at(bytes, 32);
    check(
        (MIN_WINDOW_MS..=MAX_WINDOW_MS).contains(&window_ms),
        "window",
    )?;
    let last_ms = u64_at(bytes, 40);
    let bits = u64_at(bytes, 48);
    check(bits > 0 && bits <= MAX_SLOT_BITS, "bit count")?;
    let slot = LayerSize {
        bits,
        num_hashes: u32::from(num_hashes),
        layout,
    };
    // What every decoded layer passes: k within the layout's bounds (classic 1..=255; in h
    // lines, k/h probes in each, 1..=16) and bits in whole words or lines.
    slot.check().map_err(DecodeError::Corrupt)?;
    let mut slot_items = [0; SLOTS];
    for (slot, items) in slot_items.iter_mut().enumerate() {
        *items = u64_at(bytes, 56 + 8 * slot);
        check(*items <= bits, "items over the slot's bits")?;
    }
    let loaded_bytes = u64_at(bytes, 56 + 8 * SLOTS);
    // SLOTS × bits / 8 cannot overflow: bits ≤ 2^60.
    check(loaded_bytes <= bits / 8 * SLOTS as u64, "loaded bytes")?;
    let params = WindowParams {
        error_rate,
        capacity,
        window_ms,
        seed,
    };
    let shape = WindowShape {
        slot,
        generation_ms: window_ms.div_ceil(super::GENERATIONS_PER_WINDOW),
    };
    Ok(WindowHeader {
        params,
        shape,
        last_ms,
        slot_items,
        loaded_bytes,
    })
}

/// Decodes a header into a filter whose bits are all zero, for the caller to fill with
/// [`WindowFilter::write_bits`]; refused when invalid or when `budget` refuses its bytes.
pub fn decode_header<B: MemoryBudget + ?Sized>(
    bytes: &[u8],
    budget: &mut B,
) -> Result<WindowFilter, DecodeError> {
    allocate(parse_header(bytes)?, budget)
}

pub(crate) fn allocate<B: MemoryBudget + ?Sized>(
    header: WindowHeader,
    budget: &mut B,
) -> Result<WindowFilter, DecodeError> {
    WindowFilter::zeroed(
        header.params,
        header.shape,
        header.last_ms,
        header.slot_items,
        // No bits yet: write_bits marks the slots it writes.
        0,
        budget,
    )
    .map_err(DecodeError::Limit)
}

/// Decodes [`encode`]'s output: the header, then exactly the bits it announces.
pub fn decode<B: MemoryBudget + ?Sized>(
    bytes: &[u8],
    budget: &mut B,
) -> Result<WindowFilter, DecodeError> {
    check(bytes.len() >= HEADER_BYTES, "header length")?;
    let (header, bits) = bytes.split_at(HEADER_BYTES);
    let header = parse_header(header)?;
    check(bits.len() as u64 == header.shape.bytes(), "bits length")?;
    check(
        header.loaded_bytes == header.shape.bytes(),
        "incomplete filter",
    )?;
    let mut filter = allocate(header, budget)?;
    filter
        .write_bits(0, bits)
        .map_err(|_| DecodeError::Corrupt("bits length"))?;
    check(filter.counts_match_bits(), "slot counts against their bits")?;
    Ok(filter)
}
