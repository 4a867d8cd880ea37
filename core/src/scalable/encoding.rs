//! The scalable filter's header ("RBLM"), which RDB, DUMP/RESTORE, the AOF rewrite and
//! SCANDUMP/LOADCHUNK share ([`crate::stored`], [`crate::transfer`]).
//!
//! An encoded filter is a header followed by the bits of every layer, oldest layer first, each
//! as little-endian bytes (see the layout in [`crate`]). The header, all integers
//! little-endian:
//!
//! ```text
//!  offset  size  field
//!  0       4     magic "RBLM"
//!  4       1     format version: 3 with a tightening ratio other than ½, else 2 when a layer
//!                spreads items over 2 or more cache lines, else 1
//!  5       1     flags: bit 0 = non-scaling, bit 1 = a tightening ratio follows (version 3
//!                only); other bits zero
//!  6       2     reserved, zero
//!  8       8     seed of the item hash
//!  16      8     requested error rate (IEEE-754 f64), in (0, 1)
//!  24      8     capacity of layer 0, 1..=2^30
//!  32      4     expansion (0 when non-scaling, else 1..=MAX_EXPANSION)
//!  36      4     layer count L, 1..=MAX_LAYERS (1 when non-scaling)
//!  40      8     loaded bytes: how many bytes of bits are valid (less than the total only while a
//!                BF.LOADCHUNK load is incomplete)
//!  48      8     version 3 only: tightening ratio r (IEEE-754 f64), in (0, 1), not ½, of a
//!                scaling filter (BF.RESERVE/BF.INSERT ... TIGHTENING r); T = 8 then, else 0
//!  48+T    24·L  per layer: items u64, bits u64, hashes u32 (k), layout u32: the cache lines h an
//!                item's probes touch, 0 for classic (k lines anywhere), 1 for blocked, 2..=4 for
//!                k/h probes in each of h lines (version 2 and 3 only)
//!  48+T+24L 8    xxh3-64 of every byte before it
//! ```
//!
//! Version 2 is version 1 plus layouts 2..=4, version 3 is version 2 plus the tightening ratio: a
//! header is written at the lowest version that describes the filter, so every filter an older
//! release can read is still written so that it can read it (downgrades, older replicas loading
//! an RDB), and a header is read only at the version it would be written at, so each filter has
//! exactly one encoding. The layout code is the number of lines because the blocked layout of
//! version 1 is, bit for bit, the one-line case (see [`crate::hash`]).
//!
//! Layer capacities and error rates are not stored: they follow from the parameters by the growth
//! rule. Bit counts and hash counts are stored, so a later change of the sizing formula cannot
//! change how an old filter reads. The decoder checks the checksum, every field's range and the
//! consistency between them (only the newest layer may be partly filled, no layer holds more items
//! than its capacity, sizes add up) before it allocates anything, and the allocation itself must
//! pass the caller's [`MemoryBudget`].

use xxhash_rust::xxh3::xxh3_64;

use crate::budget::MemoryBudget;
use crate::encoding::{check, DecodeError, Fields};
use crate::layer::{layer_allocation_size, Layer};
use crate::scalable::{
    is_tightening_ratio, BloomFilter, FilterParams, Growth, MAX_CAPACITY, MAX_EXPANSION,
    MAX_LAYERS, TIGHTENING_RATIO,
};
use crate::sizing::{LayerSize, Layout};

pub(crate) const MAGIC: &[u8; 4] = b"RBLM";
/// Layouts 0 (classic) and 1 (blocked) only.
const FORMAT_VERSION_1: u8 = 1;
/// Adds layouts 2..=4: an item's probes in 2 to 4 cache lines.
const FORMAT_VERSION_2: u8 = 2;
/// Adds the tightening ratio of a scaling filter created with one other than ½.
const FORMAT_VERSION_3: u8 = 3;
const FLAG_NON_SCALING: u8 = 1;
const FLAG_TIGHTENING: u8 = 2;
const FIXED_HEADER_BYTES: usize = 48;
const TIGHTENING_BYTES: usize = 8;
const LAYER_BYTES: usize = 24;
const CHECKSUM_BYTES: usize = 8;

/// The lowest format version that can describe a filter of these parameters and layouts.
fn format_version(params: &FilterParams, layouts: impl IntoIterator<Item = Layout>) -> u8 {
    if stores_tightening(params) {
        FORMAT_VERSION_3
    } else if layouts.into_iter().any(|layout| layout.lines() > 1) {
        FORMAT_VERSION_2
    } else {
        FORMAT_VERSION_1
    }
}

/// Whether the header carries the tightening ratio: only a scaling filter's other than ½ (a
/// non-scaling filter's one layer does not depend on it).
fn stores_tightening(params: &FilterParams) -> bool {
    params.tightening != TIGHTENING_RATIO && matches!(params.growth, Growth::Scaling { .. })
}

/// The header with a given loaded-bytes field.
pub(crate) fn encode_header_as(filter: &BloomFilter, loaded: u64) -> Vec<u8> {
    let params = filter.params();
    let layers = filter.layers();
    let mut out = Vec::with_capacity(FIXED_HEADER_BYTES + LAYER_BYTES * layers.len() + 8);
    out.extend_from_slice(MAGIC);
    out.push(format_version(
        params,
        layers.iter().map(|layer| layer.size().layout),
    ));
    let (mut flags, expansion) = match params.growth {
        Growth::NonScaling => (FLAG_NON_SCALING, 0),
        Growth::Scaling { expansion } => (0, expansion),
    };
    if stores_tightening(params) {
        flags |= FLAG_TIGHTENING;
    }
    out.push(flags);
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&params.seed.to_le_bytes());
    out.extend_from_slice(&params.error_rate.to_le_bytes());
    out.extend_from_slice(&params.capacity.to_le_bytes());
    out.extend_from_slice(&expansion.to_le_bytes());
    out.extend_from_slice(&(layers.len() as u32).to_le_bytes());
    out.extend_from_slice(&loaded.to_le_bytes());
    if stores_tightening(params) {
        out.extend_from_slice(&params.tightening.to_le_bytes());
    }
    for layer in layers {
        let size = layer.size();
        out.extend_from_slice(&layer.items().to_le_bytes());
        out.extend_from_slice(&size.bits.to_le_bytes());
        out.extend_from_slice(&size.num_hashes.to_le_bytes());
        out.extend_from_slice(&size.layout.lines().to_le_bytes());
    }
    let checksum = xxh3_64(&out);
    out.extend_from_slice(&checksum.to_le_bytes());
    out
}

/// One layer as a header describes it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LayerShape {
    pub size: LayerSize,
    pub capacity: u64,
    pub error_rate: f64,
    pub items: u64,
}

/// Everything a header says about a filter, validated, without its bits.
#[derive(Clone, Debug, PartialEq)]
pub struct FilterShape {
    pub params: FilterParams,
    /// Oldest first.
    pub layers: Vec<LayerShape>,
    /// Bytes of bits that are valid (less than [`total_bytes`](Self::total_bytes) while a
    /// chunked load is incomplete).
    pub loaded_bytes: u64,
}

impl FilterShape {
    /// Bytes of bits over all layers (the header checked that the sum fits a u64).
    pub fn total_bytes(&self) -> u64 {
        self.layers.iter().map(|layer| layer.size.bytes()).sum()
    }
}

/// Decodes a header into a filter whose bits are all zero, and its loaded-bytes count,
/// validating everything first and allocating only what `budget` admits; the caller then fills
/// the bits ([`BloomFilter::write_bits`]). See [`crate::stored::decode_header`] for any kind.
pub(crate) fn decode_scalable_header<B: MemoryBudget + ?Sized>(
    bytes: &[u8],
    budget: &mut B,
) -> Result<(BloomFilter, u64), DecodeError> {
    let shape = parse_header(bytes)?;
    let allocation = shape
        .layers
        .iter()
        .map(|layer| layer_allocation_size(layer.size.bytes()))
        .sum();
    budget
        .charge(allocation, allocation)
        .map_err(DecodeError::Limit)?;
    let layers = shape
        .layers
        .iter()
        .map(|layer| Layer::with_size(layer.size, layer.capacity, layer.error_rate, layer.items))
        .collect::<Result<Vec<_>, _>>()
        .map_err(DecodeError::Limit)?;
    Ok((
        BloomFilter::from_parts(shape.params, layers),
        shape.loaded_bytes,
    ))
}

/// Reads and validates a header (checksum, every field, their consistency) without allocating
/// the filter: for tools that only want to describe a filter.
pub fn parse_header(bytes: &[u8]) -> Result<FilterShape, DecodeError> {
    check(
        bytes.len() >= FIXED_HEADER_BYTES + CHECKSUM_BYTES,
        "header too short",
    )?;
    let body_len = bytes.len() - CHECKSUM_BYTES;
    let stored_checksum = u64::from_le_bytes(bytes[body_len..].try_into().expect("8 bytes"));
    check(xxh3_64(&bytes[..body_len]) == stored_checksum, "checksum")?;

    let mut fields = Fields::new(bytes);
    check(&fields.take::<4>() == MAGIC, "magic")?;
    let [version, flags] = fields.take::<2>();
    check(
        (FORMAT_VERSION_1..=FORMAT_VERSION_3).contains(&version),
        "format version",
    )?;
    check(flags & !(FLAG_NON_SCALING | FLAG_TIGHTENING) == 0, "flags")?;
    check(fields.take::<2>() == [0, 0], "reserved")?;
    let seed = fields.u64();
    let error_rate = fields.f64();
    check(error_rate > 0.0 && error_rate < 1.0, "error rate")?;
    let capacity = fields.u64();
    check((1..=MAX_CAPACITY).contains(&capacity), "capacity")?;
    let expansion = fields.u32();
    let growth = if flags & FLAG_NON_SCALING != 0 {
        check(expansion == 0, "expansion of a non-scaling filter")?;
        Growth::NonScaling
    } else {
        check((1..=MAX_EXPANSION).contains(&expansion), "expansion")?;
        Growth::Scaling { expansion }
    };
    let layer_count = fields.u32() as usize;
    let max_layers = if growth == Growth::NonScaling {
        1
    } else {
        MAX_LAYERS
    };
    check((1..=max_layers).contains(&layer_count), "layer count")?;
    let tightening_bytes = if flags & FLAG_TIGHTENING != 0 {
        TIGHTENING_BYTES
    } else {
        0
    };
    check(
        body_len == FIXED_HEADER_BYTES + tightening_bytes + LAYER_BYTES * layer_count,
        "header length",
    )?;
    let loaded = fields.u64();
    let tightening = if tightening_bytes > 0 {
        fields.f64()
    } else {
        TIGHTENING_RATIO
    };
    check(is_tightening_ratio(tightening), "tightening ratio")?;
    let params = FilterParams {
        capacity,
        error_rate,
        growth,
        seed,
        tightening,
    };
    // A stored ratio must be one the encoder stores (scaling, not ½): one encoding per filter.
    check(
        (flags & FLAG_TIGHTENING != 0) == stores_tightening(&params),
        "tightening ratio",
    )?;

    let mut layers = Vec::with_capacity(layer_count);
    // Sums that must not overflow: BF.CARD and the INFO gauges add them up.
    let (mut total_items, mut total_bytes) = (0u64, 0u64);
    for index in 0..layer_count {
        let items = fields.u64();
        let bits = fields.u64();
        let num_hashes = fields.u32();
        let layout = Layout::with_lines(fields.u32()).ok_or(DecodeError::Corrupt("layout"))?;
        let layer_capacity = params
            .layer_capacity(index)
            .ok_or(DecodeError::Corrupt("capacity"))?;
        let size = LayerSize {
            bits,
            num_hashes,
            layout,
        };
        // Bits a positive multiple of 64 (of 512 in lines), k in range and, in h lines, a
        // multiple of h with at most 16 per line; then whether the shape fits the layer's
        // capacity and error rate.
        size.check().map_err(DecodeError::Corrupt)?;
        params
            .check_layer(index, size)
            .map_err(DecodeError::Corrupt)?;
        check(items <= layer_capacity, "items over capacity")?;
        let newest = index + 1 == layer_count;
        check(newest || items == layer_capacity, "older layer not full")?;
        total_items = total_items
            .checked_add(items)
            .ok_or(DecodeError::Corrupt("total items"))?;
        total_bytes = total_bytes
            .checked_add(bits / 8)
            .ok_or(DecodeError::Corrupt("total size"))?;
        layers.push(LayerShape {
            size,
            capacity: layer_capacity,
            error_rate: params.layer_error_rate(index),
            items,
        });
    }
    check(loaded <= total_bytes, "loaded bytes")?;
    check(
        version == format_version(&params, layers.iter().map(|layer| layer.size.layout)),
        "format version",
    )?;
    Ok(FilterShape {
        params,
        layers,
        loaded_bytes: loaded,
    })
}
