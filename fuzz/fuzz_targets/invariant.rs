//! One invariant for every accepted value: random headers of every kind (our scalable "RBLM",
//! window "RBLW" and RedisBloom envelope "RBLR" headers, RedisBloom's SCANDUMP header, and
//! RedisBloom's RDB value in encodings 0 to 4), and, when one is accepted, a random sequence of
//! adds and lookups on it; after it, encoding the filter and decoding the bytes must succeed and
//! give a filter that answers the same for a sample of items.
#![no_main]

mod common;

use common::{budget, fix_checksum, mutate, real_any, real_redisbloom, Reader};
use libfuzzer_sys::fuzz_target;
use rustbloom_core::redisbloom::{rdb, scandump, Arithmetic, RbFilter, RdbSink, RdbSource};
use rustbloom_core::stored::decode_header;
use rustbloom_core::{Filter, StoredFilter, Unlimited};

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
fn decoded(r: &mut Reader) -> Option<Filter> {
    match r.u8() % 3 {
        // Our header of any kind, or RedisBloom's envelope: a real one, mutated, re-summed.
        0 => {
            let filter = real_any(r)?;
            let mut bytes = StoredFilter::ready_filter(filter).encode_header();
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
            Some(stored.into_filter())
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
            Some(Filter::RedisBloom(filter))
        }
        // RedisBloom's RDB value in any encoding.
        _ => {
            let filter = real_redisbloom(r)?;
            let mut fields = mutated_rdb(&filter, r);
            let encver = i32::from(r.u8() % 5);
            let filter = rdb::load(&mut fields, encver, &mut budget()).ok()?;
            Some(Filter::RedisBloom(filter))
        }
    }
}

/// `filter` encoded as it is saved (our header and bits), decoded back; a RedisBloom filter
/// also through RedisBloom's RDB value and SCANDUMP stream.
fn encodings(filter: &Filter) -> Vec<Filter> {
    let mut out = Vec::new();
    let stored = StoredFilter::ready_filter(filter.try_clone(&mut Unlimited).expect("clone"));
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
    out.push(again.into_filter());
    if let Filter::RedisBloom(rb) = filter {
        let mut fields = Fields::default();
        let encver = rdb::save(rb, &mut fields);
        let again = rdb::load(&mut fields, encver, &mut Unlimited).expect("own RDB value refused");
        out.push(Filter::RedisBloom(again));
        if rb.header().arithmetic == Arithmetic::Wide {
            let mut again = scandump::decode_header(&scandump::encode_header(rb), &mut Unlimited)
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
            out.push(Filter::RedisBloom(again));
        }
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let mut r = Reader::new(data);
    let Some(mut filter) = decoded(&mut r) else {
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
    for again in encodings(&filter) {
        let replies: Vec<bool> = sample
            .iter()
            .map(|item| again.contains(item, || now))
            .collect();
        assert_eq!(replies, answers, "an encoding answered otherwise");
        assert_eq!(again.counted_items(), filter.counted_items());
    }
});
