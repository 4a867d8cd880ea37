//! Helpers shared by the fuzz targets: a byte reader over the fuzz input, and builders that give
//! the decoder inputs with a correct checksum, so the fuzzer explores the field checks behind it.
#![allow(dead_code)]

use rustbloom_core::partition::{Descriptor, Partition, PartitionGrowth, MAX_PARTITIONS};
use rustbloom_core::redisbloom::scandump;
use rustbloom_core::redisbloom::shape::{LinkShape, FORCE64, NOROUND, NO_SCALING};
use rustbloom_core::redisbloom::RbFilter;
use rustbloom_core::transfer::scandump_step;
use rustbloom_core::valkeybloom::{blob, LayerShape, VbFilter, FIXED_SEED};
use rustbloom_core::window::{WindowFilter, WindowParams};
use rustbloom_core::{
    AddOutcome, BloomFilter, Budget, Filter, FilterParams, Growth, StoredFilter, Unlimited,
};
use xxhash_rust::xxh3::{xxh3_64, xxh3_64_with_seed};

/// Small limits: the targets exercise validation, not the allocator. A filter may hold at most
/// this many bytes (allocation sizes)...
pub const MAX_FILTER_BYTES: u64 = 256 << 10;
/// ... and one operation may allocate at most this many.
pub const MAX_NEW_BYTES: u64 = 256 << 10;

/// The budget of one operation (one command).
pub fn budget() -> Budget {
    Budget::new(MAX_FILTER_BYTES, MAX_NEW_BYTES)
}

/// Reads the fuzz input front to back; past the end every read gives zeros.
pub struct Reader<'a> {
    pub data: &'a [u8],
}

impl<'a> Reader<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Reader { data }
    }
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
    pub fn u8(&mut self) -> u8 {
        match self.data.split_first() {
            Some((&b, rest)) => {
                self.data = rest;
                b
            }
            None => 0,
        }
    }
    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }
    pub fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }
    pub fn u64(&mut self) -> u64 {
        u64::from(self.u32()) | (u64::from(self.u32()) << 32)
    }
    pub fn bytes(&mut self, n: usize) -> &'a [u8] {
        let n = n.min(self.data.len());
        let (head, rest) = self.data.split_at(n);
        self.data = rest;
        head
    }
}

/// Overwrites the trailing 8 bytes with the xxh3-64 of everything before them (the header's,
/// a descriptor's and a chunk's checksum layout); in a partition's header, the identity's own
/// checksum too (bytes 24..32, of the 24 before them).
pub fn fix_checksum(bytes: &mut [u8]) {
    if bytes.len() >= 32 && bytes.starts_with(b"RBLP") {
        let sum = xxh3_64(&bytes[..24]);
        bytes[24..32].copy_from_slice(&sum.to_le_bytes());
    }
    if bytes.len() >= 8 {
        let body = bytes.len() - 8;
        let sum = xxh3_64(&bytes[..body]);
        bytes[body..].copy_from_slice(&sum.to_le_bytes());
    }
}

/// Filter parameters from the input: small capacities, every growth kind.
pub fn real_params(r: &mut Reader) -> FilterParams {
    let capacity = u64::from(r.u16() % 2000) + 1;
    let error_rate = match r.u8() {
        0 => 0.5,
        b => 1.0 / (f64::from(b) * 7.0 + 2.0),
    };
    let growth = match r.u8() % 8 {
        0 => Growth::NonScaling,
        1 => Growth::Scaling { expansion: 1 },
        x => Growth::Scaling {
            expansion: u32::from(x) * 3,
        },
    };
    let seed = r.u64();
    FilterParams {
        capacity,
        error_rate,
        growth,
        seed,
        tightening: rustbloom_core::scalable::TIGHTENING_RATIO,
    }
}

/// A real (small) filter whose parameters and items come from the input; each add is its own
/// operation with its own budget, as BF.ADD would run it.
pub fn real_filter(r: &mut Reader) -> Option<BloomFilter> {
    let params = real_params(r);
    let mut filter = BloomFilter::new(params, &mut budget()).ok()?;
    let items = u32::from(r.u16() % 4096);
    for i in 0..items {
        if filter.insert(&i.to_le_bytes(), &mut budget()).is_err() {
            break;
        }
    }
    Some(filter)
}

/// A real (small) window filter whose parameters, writes and their times come from the input.
pub fn real_window(r: &mut Reader) -> Option<WindowFilter> {
    let capacity = u64::from(r.u16() % 2000) + 1;
    let error_rate = match r.u8() {
        0 => 0.5,
        b => 1.0 / (f64::from(b) * 7.0 + 2.0),
    };
    // Short windows (so that writes cross generations) and, sometimes, extreme ones.
    let window_ms = match r.u8() % 8 {
        0 => 4,
        1 => 1 << 40,
        _ => u64::from(r.u16()) + 4,
    };
    let params = WindowParams {
        error_rate,
        capacity,
        window_ms,
        seed: r.u64(),
    };
    let mut now = match r.u8() % 4 {
        0 => 0,
        1 => u64::MAX - u64::from(r.u16()),
        _ => r.u64() >> 16,
    };
    // Created with its ring at time 0, as the module creates it.
    let mut filter = WindowFilter::new(params, 0, &mut budget()).ok()?;
    for i in 0..u32::from(r.u16() % 1024) {
        if i % 64 == 0 {
            now = now.saturating_add(u64::from(r.u16()));
        }
        filter.insert(&i.to_le_bytes(), now);
    }
    Some(filter)
}

/// A real (small) RedisBloom filter: a chain of NOROUND links sized as RedisBloom 2.8 sizes
/// them, from input-chosen entries and error rates, with items added by its own rules.
pub fn real_redisbloom(r: &mut Reader) -> Option<RbFilter> {
    let link = |entries: u64, error: f64| {
        let bpe = (1.0 / error).ln() / std::f64::consts::LN_2.powi(2);
        let bits = ((entries as f64 * bpe).ceil() as u64).div_ceil(64) * 64;
        LinkShape {
            entries,
            error,
            hashes: (std::f64::consts::LN_2 * bpe).ceil() as u32,
            bpe,
            bits,
            n2: 0,
            bytes: bits / 8,
            items: 0,
        }
    };
    let scaling = !r.u8().is_multiple_of(4);
    let growth = u32::from(r.u8() % 4) + 1;
    let mut entries = u64::from(r.u16() % 500) + 1;
    let mut error = 1.0 / (f64::from(r.u8()) + 2.0);
    let links = if scaling {
        usize::from(r.u8() % 3) + 1
    } else {
        1
    };
    let mut shapes = Vec::new();
    for _ in 0..links {
        shapes.push(link(entries, error));
        entries *= u64::from(growth);
        error /= 2.0;
    }
    let options = NOROUND | FORCE64 | if scaling { 0 } else { NO_SCALING };
    let mut header = Vec::new();
    header.extend_from_slice(&0u64.to_le_bytes());
    header.extend_from_slice(&(shapes.len() as u32).to_le_bytes());
    header.extend_from_slice(&options.to_le_bytes());
    header.extend_from_slice(&growth.to_le_bytes());
    for shape in &shapes {
        header.extend_from_slice(&shape.bytes.to_le_bytes());
        header.extend_from_slice(&shape.bits.to_le_bytes());
        header.extend_from_slice(&shape.items.to_le_bytes());
        header.extend_from_slice(&shape.error.to_le_bytes());
        header.extend_from_slice(&shape.bpe.to_le_bytes());
        header.extend_from_slice(&shape.hashes.to_le_bytes());
        header.extend_from_slice(&shape.entries.to_le_bytes());
        header.push(shape.n2);
    }
    let mut filter = scandump::decode_header(&header, &mut budget()).ok()?;
    for i in 0..u32::from(r.u16() % 2048) {
        if filter.insert(&i.to_le_bytes(), &mut budget()).is_err() {
            break;
        }
    }
    Some(filter)
}

/// A real valkey-bloom object: one layer as valkey-bloom creates it (input-chosen capacity,
/// error rate, expansion, tightening and seed), brought in by its BF.LOAD blob, then grown by
/// input-many adds.
pub fn real_valkeybloom(r: &mut Reader) -> Option<VbFilter> {
    let capacity = u64::from(r.u16() % 2000) + 1;
    let fp_rate: f64 = [0.5, 0.1, 0.01, 0.001, 1e-6][usize::from(r.u8() % 5)];
    let expansion = u32::from(r.u8() % 4);
    let tightening: f64 = [0.5, 0.9, 0.25, 0.75][usize::from(r.u8() % 4)];
    let seed_random = r.u8() % 2 == 1;
    let seed: [u8; 32] = if seed_random {
        let mut seed = [0; 32];
        let bytes = r.bytes(32);
        seed[..bytes.len()].copy_from_slice(bytes);
        seed
    } else {
        FIXED_SEED
    };
    let shape = LayerShape::new(capacity, fp_rate)?;
    let mut bytes = vec![1];
    bytes.extend_from_slice(&shape.bytes.to_le_bytes());
    bytes.extend_from_slice(&shape.hashes.to_le_bytes());
    bytes.extend_from_slice(&seed);
    bytes.resize(bytes.len() + usize::try_from(shape.bytes).ok()?, 0);
    let mut object = vec![1];
    object.extend_from_slice(&expansion.to_le_bytes());
    object.extend_from_slice(&fp_rate.to_le_bytes());
    object.extend_from_slice(&tightening.to_le_bytes());
    object.push(u8::from(seed_random));
    object.extend_from_slice(&1u64.to_le_bytes());
    object.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
    object.extend_from_slice(&bytes);
    object.extend_from_slice(&0u64.to_le_bytes());
    object.extend_from_slice(&capacity.to_le_bytes());
    let mut filter = blob::decode(&object, &mut budget()).ok()?;
    for i in 0..u32::from(r.u16() % 2048) {
        if filter.insert(&i.to_le_bytes(), &mut budget()).is_err() {
            break;
        }
    }
    Some(filter)
}

/// A real filter of an input-chosen kind.
pub fn real_any(r: &mut Reader) -> Option<Filter> {
    match r.u8() % 4 {
        0 => real_filter(r).map(Filter::Scalable),
        1 => real_window(r).map(|window| Filter::Window(Box::new(window))),
        2 => real_valkeybloom(r).map(|object| Filter::ValkeyBloom(Box::new(object))),
        _ => real_redisbloom(r).map(Filter::RedisBloom),
    }
}

/// `stored` as one partition of an input-chosen partitioned filter, a third of the time (our
/// kinds only: a RedisBloom filter cannot be one); None when the input's routing seed is the
/// filter's own seed, which no partition may have.
pub fn maybe_partition(r: &mut Reader, stored: StoredFilter) -> Option<StoredFilter> {
    if matches!(
        stored.filter(),
        Filter::RedisBloom(_) | Filter::ValkeyBloom(_)
    ) || !r.u8().is_multiple_of(3)
    {
        return Some(stored);
    }
    let count = u32::from(r.u16()) % MAX_PARTITIONS + 1;
    let partition = Partition::new(u32::from(r.u16()) % count, count, r.u64()).ok()?;
    stored.with_partition(partition).ok()
}

/// A descriptor whose fields come from the input, as `BF.RESERVE ... PARTITIONS` makes one;
/// None where it refuses them.
pub fn real_descriptor(r: &mut Reader) -> Option<Descriptor> {
    let partitions = u32::from(r.u16()) % (MAX_PARTITIONS + 1);
    let routing_seed = r.u64();
    let capacity = match r.u8() % 4 {
        0 => r.u64(),
        1 => u64::from(r.u32()),
        // Near the most P partitions may hold.
        2 => (u64::from(partitions) << 30).wrapping_sub(u64::from(r.u16())),
        _ => u64::from(r.u16()),
    };
    let error_rate = match r.u8() {
        0 => f64::from_bits(1),
        1 => 1.0 - f64::EPSILON / 2.0,
        b => 1.0 / (f64::from(b) * 7.0 + 2.0),
    };
    let growth = match r.u8() % 3 {
        0 => PartitionGrowth::Scaling {
            expansion: u32::from(r.u16()),
        },
        1 => PartitionGrowth::NonScaling,
        _ => PartitionGrowth::Window {
            window_ms: r.u64() >> (r.u8() % 64),
        },
    };
    Descriptor::new(partitions, routing_seed, capacity, error_rate, growth).ok()
}

/// XORs up to 8 input-chosen bytes of `bytes` (its trailing checksum excluded).
pub fn mutate(r: &mut Reader, bytes: &mut [u8]) {
    let body = bytes.len().saturating_sub(8);
    if body == 0 {
        return;
    }
    for _ in 0..r.u8() % 9 {
        let at = usize::from(r.u16()) % body;
        bytes[at] ^= r.u8();
    }
}

/// The header BF.LOADCHUNK starts a load of one of our kinds with (SCANDUMP's first chunk).
pub fn transfer_header(filter: &Filter) -> Vec<u8> {
    scandump_step(filter, 0).1
}

/// The checksum a BF.LOADCHUNK data chunk of `bits` at `offset` must carry for `filter` (one of
/// our kinds: a RedisBloom filter's chunks carry none).
pub fn chunk_sum(filter: &Filter, offset: u64, bits: &[u8]) -> u64 {
    let header = transfer_header(filter);
    let header_sum = u64::from_le_bytes(header[header.len() - 8..].try_into().unwrap());
    xxh3_64_with_seed(bits, header_sum.wrapping_add(offset))
}

/// `bits` followed by `sum`: a data chunk.
pub fn with_sum(bits: &[u8], sum: u64) -> Vec<u8> {
    let mut chunk = bits.to_vec();
    chunk.extend_from_slice(&sum.to_le_bytes());
    chunk
}

/// A copy of a stored filter, complete or loading (StoredFilter is not Clone).
pub fn clone_stored(stored: &StoredFilter) -> StoredFilter {
    stored.try_clone(&mut Unlimited).expect("clone")
}

/// Checks what one `insert_many` of `items` on `filter` (whose state before it was
/// `layers_before` layers and `items_before` items) reported.
pub fn check_outcome(
    filter: &BloomFilter,
    items: &[&[u8]],
    outcome: &AddOutcome,
    layers_before: usize,
    items_before: u64,
) {
    assert!(outcome.added.len() <= items.len());
    match outcome.error {
        None => assert_eq!(outcome.added.len(), items.len(), "stopped with no error"),
        Some(_) => assert!(outcome.added.len() < items.len()),
    }
    let added = outcome.added.iter().filter(|&&a| a).count() as u64;
    assert_eq!(filter.items(), items_before + added, "items not counted");
    assert_eq!(
        filter.layers().len(),
        layers_before + outcome.grown.len(),
        "layers pushed but not reported"
    );
    for (n, grown) in outcome.grown.iter().enumerate() {
        assert_eq!(grown.index, layers_before + n);
        assert_eq!(grown.size, filter.layers()[grown.index].size());
        assert!(
            outcome.added.get(grown.first_item) == Some(&true),
            "a layer was pushed for an item that was not added"
        );
        if n > 0 {
            assert!(grown.first_item > outcome.grown[n - 1].first_item);
        }
    }
    for (&item, _) in items.iter().zip(&outcome.added) {
        assert!(filter.contains(item), "false negative after insert_many");
    }
}

/// Replays on `replica` what an `insert_many` of `items` did on its primary, as replication
/// carries it: `BF.MADD` of the items added before each new layer, then `BF.GROW` with that
/// layer's exact shape, and so on. The replica never sizes or grows a layer itself.
pub fn replay(replica: &mut BloomFilter, items: &[&[u8]], outcome: &AddOutcome) {
    let mut positions = outcome.added_positions().peekable();
    let mut madd = |replica: &mut BloomFilter, end: usize| {
        let mut batch = Vec::new();
        while let Some(position) = positions.next_if(|&position| position < end) {
            batch.push(items[position]);
        }
        let mut o = AddOutcome::default();
        replica.insert_many(batch.iter().copied(), &mut Unlimited, &mut o);
        assert_eq!(o.error, None, "replica refused an add");
        assert!(o.grown.is_empty(), "replica grew by itself");
        assert!(
            o.added.iter().all(|&a| a),
            "replica found present an item its primary added"
        );
    };
    for grown in &outcome.grown {
        madd(replica, grown.first_item);
        replica
            .push_layer(grown.index, grown.size, &mut Unlimited)
            .expect("replica refused its primary's layer");
    }
    madd(replica, usize::MAX);
}
