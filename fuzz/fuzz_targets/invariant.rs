//! One invariant for every accepted value: random headers of every kind (our scalable "RBLM",
//! window "RBLW" and RedisBloom envelope "RBLR" headers, each sometimes a partition's "RBLP",
//! RedisBloom's SCANDUMP header, RedisBloom's RDB value in encodings 0 to 4, and a partitioned
//! filter's descriptor "RBLD"), and, when a filter is accepted, a random sequence of adds and
//! lookups on it; after it, the value must come back through every path that saves it (RDB and
//! DUMP, SCANDUMP to BF.LOADCHUNK, the AOF rewrite) with the same fields, its partition identity
//! included, and a filter must answer the same for a sample of items.
#![no_main]

mod common;

use common::{
    budget, fix_checksum, maybe_partition, mutate, real_any, real_descriptor, real_redisbloom,
    Reader,
};
use libfuzzer_sys::fuzz_target;
use rustbloom_core::partition::Descriptor;
use rustbloom_core::redisbloom::{rdb, scandump, Arithmetic, RbFilter, RdbSink, RdbSource};
use rustbloom_core::stored::{decode_header, decode_value};
use rustbloom_core::transfer::{decode_load_header, load_chunk, load_commands};
use rustbloom_core::valkeybloom::{blob, rdb as vb_rdb};
use rustbloom_core::{Filter, StoredFilter, StoredValue, Unlimited};

/// One field of an RDB value.
enum Field {
    Unsigned(u64),
    Double(f64),
    Bytes(Vec<u8>),
}

/// An RDB value in memory: what `rdb::save` writes, what `rdb::load` reads.
#[derive(Default)]
struct Fields(Vec<Field>, usize);

impl RdbSink for Fields {
    fn unsigned(&mut self, value: u64) {
        self.0.push(Field::Unsigned(value));
    }
    fn double(&mut self, value: f64) {
        self.0.push(Field::Double(value));
    }
    fn string(&mut self, bytes: &[u8]) {
        self.0.push(Field::Bytes(bytes.to_vec()));
    }
}

impl RdbSource for Fields {
    type Error = ();
    type Bytes = Vec<u8>;
    fn unsigned(&mut self) -> Result<u64, ()> {
        self.1 += 1;
        match self.0.get(self.1 - 1) {
            Some(Field::Unsigned(value)) => Ok(*value),
            _ => Err(()),
        }
    }
    fn double(&mut self) -> Result<f64, ()> {
        self.1 += 1;
        match self.0.get(self.1 - 1) {
            Some(Field::Double(value)) => Ok(*value),
            _ => Err(()),
        }
    }
    fn string(&mut self) -> Result<Vec<u8>, ()> {
        self.1 += 1;
        match self.0.get(self.1 - 1) {
            Some(Field::Bytes(value)) => Ok(value.clone()),
            _ => Err(()),
        }
    }
}

/// The RDB fields of a real RedisBloom filter, some of them replaced by input-chosen values
/// near the edges (counts, error rates, hash counts).
fn mutated_rdb(filter: &RbFilter, r: &mut Reader) -> Fields {
    let mut fields = Fields::default();
    rdb::save(filter, &mut fields);
    for _ in 0..r.u8() % 6 {
        let at = usize::from(r.u16()) % fields.0.len();
        fields.0[at] = match &fields.0[at] {
            Field::Unsigned(old) => Field::Unsigned(match r.u8() % 6 {
                0 => u64::MAX,
                1 => old.wrapping_add(1),
                2 => old.wrapping_sub(1),
                3 => u64::from(r.u16()),
                4 => 1 << (r.u8() % 64),
                _ => r.u64(),
            }),
            Field::Double(old) => Field::Double(match r.u8() % 5 {
                0 => f64::from_bits(1),
                1 => 1.0 - f64::EPSILON / 2.0,
                2 => old * 0.5,
                3 => old * (1.0 + 1e-7),
                _ => f64::from_bits(r.u64()),
            }),
            Field::Bytes(old) => Field::Bytes(vec![r.u8(); old.len() ^ usize::from(r.u8() % 9)]),
        };
    }
    fields
}

/// A filter decoded from a random header of a random kind, its bits from the input.
fn decoded(r: &mut Reader) -> Option<StoredFilter> {
    match r.u8() % 3 {
        // Our header of any kind (sometimes a partition's), or RedisBloom's envelope: a real
        // one, mutated, re-summed.
        0 => {
            let filter = real_any(r)?;
            let stored = maybe_partition(r, StoredFilter::ready_filter(filter))?;
            let mut bytes = stored.encode_header();
            mutate(r, &mut bytes);
            fix_checksum(&mut bytes);
            let mut stored = decode_header(&bytes, &mut budget()).ok()?;
            let total = stored.filter().bytes();
            for (offset, len) in stored.filter().pieces(total, 4096) {
                let mut piece = r.bytes(len as usize).to_vec();
                piece.resize(len as usize, 0);
                stored.write_bits(offset, &piece);
            }
            // A mutated loaded-bytes count may leave a load in progress, which answers nothing.
            stored.ready()?;
            Some(stored)
        }
        // RedisBloom's SCANDUMP header: a real one, mutated.
        1 => {
            let filter = real_redisbloom(r)?;
            let mut bytes = scandump::encode_header(&filter);
            for _ in 0..r.u8() % 9 {
                let at = usize::from(r.u16()) % bytes.len();
                bytes[at] ^= r.u8();
            }
            let mut filter = scandump::decode_header(&bytes, &mut budget()).ok()?;
            for (offset, len) in filter.pieces(4096) {
                let mut piece = r.bytes(len as usize).to_vec();
                piece.resize(len as usize, 0);
                filter.write_bits(offset, &piece).ok()?;
            }
            Some(StoredFilter::ready_filter(Filter::RedisBloom(filter)))
        }
        // RedisBloom's RDB value in any encoding.
        _ => {
            let filter = real_redisbloom(r)?;
            let mut fields = mutated_rdb(&filter, r);
            let encver = i32::from(r.u8() % 5);
            let filter = rdb::load(&mut fields, encver, &mut budget()).ok()?;
            Some(StoredFilter::ready_filter(Filter::RedisBloom(filter)))
        }
    }
}

/// The value BF.LOADCHUNK builds from `steps` (a SCANDUMP's or an AOF rewrite's), which must
/// all be accepted and complete it.
fn loaded(mut steps: impl Iterator<Item = (u64, Vec<u8>)>, what: &str) -> StoredFilter {
    let (_, header) = steps.next().expect("a header first");
    let mut stored = decode_load_header(&header, &mut Unlimited)
        .unwrap_or_else(|e| panic!("{what}: own header refused: {e:?}"));
    for (iterator, chunk) in steps {
        load_chunk(&mut stored, iterator, &chunk)
            .unwrap_or_else(|e| panic!("{what}: own chunk refused: {e:?}"));
    }
    assert!(stored.ready().is_some(), "{what}: left a load in progress");
    stored
}

/// `stored` saved and read back by every path: our header and bits (RDB, DUMP), the AOF
/// rewrite's BF.LOADCHUNK commands, and for our kinds BF.SCANDUMP's stream; a RedisBloom filter
/// also through RedisBloom's RDB value and SCANDUMP stream.
fn encodings(stored: &StoredFilter) -> Vec<StoredFilter> {
    let filter = stored.filter();
    let mut again =
        decode_header(&stored.encode_header(), &mut Unlimited).expect("own header refused");
    for (offset, len) in filter.pieces(filter.bytes(), 4096) {
        let mut piece = vec![0; len as usize];
        filter.read_bits(offset, &mut piece);
        again.write_bits(offset, &piece);
    }
    assert!(
        again.ready().is_some(),
        "own header and bits left a load in progress"
    );
    let mut out = vec![again, loaded(load_commands(stored), "AOF rewrite")];
    match filter {
        Filter::Scalable(_) | Filter::Window(_) | Filter::ValkeyBloom(_) => {
            let mut iterator = 0;
            let steps = std::iter::from_fn(|| {
                let (next, data) = stored.scandump_step(iterator);
                let step = (next != 0).then_some((next, data));
                iterator = next;
                step
            });
            out.push(loaded(steps, "SCANDUMP"));
            if let Filter::ValkeyBloom(object) = filter {
                // valkey-bloom's own encodings: its RDB value and its BF.LOAD blob.
                let mut fields = Fields::default();
                vb_rdb::save(object, &mut fields);
                let again = vb_rdb::load(&mut fields, vb_rdb::ENCODING_VERSION, &mut Unlimited)
                    .expect("own bloomfltr value refused");
                out.push(StoredFilter::ready_filter(Filter::ValkeyBloom(Box::new(
                    again,
                ))));
                let again =
                    blob::decode(&blob::encode(object), &mut Unlimited).expect("own blob refused");
                out.push(StoredFilter::ready_filter(Filter::ValkeyBloom(Box::new(
                    again,
                ))));
            }
        }
        Filter::RedisBloom(rb) => {
            let mut fields = Fields::default();
            let encver = rdb::save(rb, &mut fields);
            let again =
                rdb::load(&mut fields, encver, &mut Unlimited).expect("own RDB value refused");
            out.push(StoredFilter::ready_filter(Filter::RedisBloom(again)));
            if rb.header().arithmetic == Arithmetic::Wide {
                let mut again =
                    scandump::decode_header(&scandump::encode_header(rb), &mut Unlimited)
                        .expect("own SCANDUMP header refused");
                let mut iterator = 1;
                loop {
                    let (next, chunk) = scandump::scandump_step(rb, iterator);
                    if next == 0 {
                        break;
                    }
                    scandump::load_chunk(&mut again, next, &chunk).expect("own chunk refused");
                    iterator = next;
                }
                out.push(StoredFilter::ready_filter(Filter::RedisBloom(again)));
            }
        }
    }
    out
}

/// A descriptor decoded from a real one's bytes, mutated and re-summed: when accepted, its RDB
/// and DUMP form (the same bytes) and its AOF rewrite (`BF.RESERVE name ε N PARTITIONS P seed`
/// and its growth, the error rate written as the module writes it, created as the module
/// creates it) give it back field for field.
fn descriptor_round_trips(r: &mut Reader) {
    let Some(descriptor) = real_descriptor(r) else {
        return;
    };
    let mut bytes = descriptor.encode();
    mutate(r, &mut bytes);
    fix_checksum(&mut bytes);
    let Ok(decoded) = Descriptor::decode(&bytes) else {
        return;
    };
    assert_eq!(decoded.encode(), bytes, "a descriptor re-encodes otherwise");
    assert_eq!(
        decode_value(&bytes, &mut Unlimited),
        Ok(StoredValue::Descriptor(decoded))
    );
    let error_rate: f64 = decoded
        .error_rate()
        .to_string()
        .parse()
        .expect("an error rate as the AOF writes it");
    let recreated = Descriptor::new(
        decoded.partitions(),
        decoded.routing_seed(),
        decoded.capacity(),
        error_rate,
        decoded.growth(),
    );
    assert_eq!(recreated, Ok(decoded), "its AOF rewrite creates another");
}

fuzz_target!(|data: &[u8]| {
    let mut r = Reader::new(data);
    if r.u8().is_multiple_of(4) {
        descriptor_round_trips(&mut r);
        return;
    }
    let Some(mut stored) = decoded(&mut r) else {
        return;
    };
    let Some(filter) = stored.ready_mut() else {
        return;
    };
    // Adds and lookups, as commands run them (each add its own operation and budget); a window
    // filter at input-chosen times.
    let mut now = 0u64;
    for _ in 0..r.u8() {
        let item = r.u16().to_le_bytes();
        now = now.saturating_add(u64::from(r.u8()));
        let before = filter.counted_items();
        if r.u8().is_multiple_of(4) {
            let mut outcome = filter.new_outcome(|| now);
            filter.contains_many([&item[..]], || now, |_| {});
            filter.insert_many([&item[..]], &mut budget(), &mut outcome);
            if outcome.error().is_some() {
                assert_eq!(filter.counted_items(), before, "a refused add counted");
            }
        }
    }
    let sample: Vec<[u8; 2]> = (0..128u16).map(|i| (i * 512).to_le_bytes()).collect();
    let answers: Vec<bool> = sample
        .iter()
        .map(|item| filter.contains(item, || now))
        .collect();
    let counted = filter.counted_items();
    for again in encodings(&stored) {
        assert_eq!(
            again.partition(),
            stored.partition(),
            "an encoding lost its identity"
        );
        let again = again.ready().expect("complete");
        let replies: Vec<bool> = sample
            .iter()
            .map(|item| again.contains(item, || now))
            .collect();
        assert_eq!(replies, answers, "an encoding answered otherwise");
        assert_eq!(again.counted_items(), counted);
    }
});
