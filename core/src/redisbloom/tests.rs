//! The decoders refuse what RedisBloom could not have written, before allocating; growth is
//! fallible and leaves the filter unchanged when refused.

use super::chain::{RbAddOutcome, RbFilter};
use super::rdb::{load, RdbError, RdbSource};
use super::scandump::{decode_header, encode_header, parse_header, scandump_step, CHUNK_BYTES};
use super::shape::{LinkShape, MAX_CHAIN_HASHES, MAX_LINKS, NOROUND, NO_SCALING};
use crate::budget::LimitError;
use crate::budget::{allocation_size, Budget, Unlimited};
use crate::encoding::{ChunkError, DecodeError};
use crate::scalable::InsertError;

const OPTIONS: u32 = 5;

/// A NOROUND link as RedisBloom 2.8.2 sizes 100 entries at 0.005.
fn link(items: u64) -> LinkShape {
    LinkShape {
        entries: 100,
        error: 0.005,
        hashes: 8,
        bpe: 11.027753418256411,
        bits: 1152,
        n2: 0,
        bytes: 144,
        items,
    }
}

/// A SCANDUMP header of these fields (the layout in [`super::scandump`]).
fn header(items: u64, options: u32, growth: u32, links: &[LinkShape]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&items.to_le_bytes());
    out.extend_from_slice(&(links.len() as u32).to_le_bytes());
    out.extend_from_slice(&options.to_le_bytes());
    out.extend_from_slice(&growth.to_le_bytes());
    for link in links {
        out.extend_from_slice(&link.bytes.to_le_bytes());
        out.extend_from_slice(&link.bits.to_le_bytes());
        out.extend_from_slice(&link.items.to_le_bytes());
        out.extend_from_slice(&link.error.to_le_bytes());
        out.extend_from_slice(&link.bpe.to_le_bytes());
        out.extend_from_slice(&link.hashes.to_le_bytes());
        out.extend_from_slice(&link.entries.to_le_bytes());
        out.push(link.n2);
    }
    out
}

fn refused(bytes: &[u8]) -> &'static str {
    match parse_header(bytes) {
        Err(DecodeError::Corrupt(what)) => what,
        other => panic!("accepted: {other:?}"),
    }
}

#[test]
fn a_valid_header_round_trips() {
    let bytes = header(150, OPTIONS, 2, &[link(100), link(50)]);
    let filter = decode_header(&bytes, &mut Unlimited).unwrap();
    assert_eq!(encode_header(&filter), bytes);
    assert_eq!(
        (filter.items(), filter.capacity(), filter.bytes()),
        (150, 200, 288)
    );
    // Two links of 144 bytes: chunks stop at the link boundary.
    assert_eq!(scandump_step(&filter, 1), (145, vec![0; 144]));
    assert_eq!(scandump_step(&filter, 145), (289, vec![0; 144]));
    assert_eq!(scandump_step(&filter, 289), (0, vec![]));
}

#[test]
fn chunks_are_at_most_16_mib_and_stop_at_the_link() {
    // As RedisBloom 2.8.2 answers for a 27,569,384-byte link: 16 MiB, then the rest of it.
    let big = LinkShape {
        entries: 2_000_000,
        bits: (CHUNK_BYTES + 24) * 8,
        bytes: CHUNK_BYTES + 24,
        ..link(0)
    };
    let filter = decode_header(&header(0, OPTIONS, 2, &[big]), &mut Unlimited).unwrap();
    let step = |iterator| {
        let (next, chunk) = scandump_step(&filter, iterator);
        (next, chunk.len() as u64)
    };
    assert_eq!(step(1), (1 + CHUNK_BYTES, CHUNK_BYTES));
    assert_eq!(step(1 + CHUNK_BYTES), (25 + CHUNK_BYTES, 24));
    // From inside the link, the chunk ends with the link.
    assert_eq!(step(1000), (25 + CHUNK_BYTES, CHUNK_BYTES + 24 - 999));
    assert_eq!(step(25 + CHUNK_BYTES), (0, 0));
}

#[test]
fn headers_with_bad_counts_are_refused() {
    let ok = header(100, OPTIONS, 2, &[link(100)]);
    assert_eq!(refused(&ok[..19]), "header too short");
    assert_eq!(refused(&ok[..ok.len() - 1]), "header length");
    assert_eq!(refused(&header(0, OPTIONS, 2, &[])), "link count");
    let mut too_many = ok.clone();
    too_many[8..12].copy_from_slice(&(MAX_LINKS as u32 + 1).to_le_bytes());
    assert_eq!(refused(&too_many), "link count");
    assert_eq!(
        refused(&header(100, 16 | OPTIONS, 2, &[link(100)])),
        "options"
    );
    assert_eq!(refused(&header(100, OPTIONS, 0, &[link(100)])), "growth");
    assert_eq!(
        refused(&header(100, OPTIONS, 32769, &[link(100)])),
        "growth"
    );
    assert_eq!(
        refused(&header(
            150,
            OPTIONS | NO_SCALING,
            2,
            &[link(100), link(50)]
        )),
        "non-scaling filter with several links"
    );
    assert_eq!(
        refused(&header(99, OPTIONS, 2, &[link(100)])),
        "items differ from the links' sum"
    );
}

#[test]
fn links_with_bad_fields_are_refused() {
    let bad = |change: &dyn Fn(&mut LinkShape)| {
        let mut shape = link(10);
        change(&mut shape);
        refused(&header(10, OPTIONS, 2, &[shape]))
    };
    assert_eq!(bad(&|l| l.items = 101), "link items over entries");
    assert_eq!(bad(&|l| l.entries = 0), "link entries");
    assert_eq!(bad(&|l| l.error = 0.0), "link error rate");
    assert_eq!(bad(&|l| l.error = 1.0), "link error rate");
    assert_eq!(bad(&|l| l.error = f64::NAN), "link error rate");
    assert_eq!(bad(&|l| l.hashes = 0), "link hashes");
    assert_eq!(bad(&|l| l.hashes = 1101), "link hashes");
    assert_eq!(bad(&|l| l.bpe = f64::INFINITY), "link bits per entry");
    assert_eq!(bad(&|l| l.n2 = 64), "link n2");
    assert_eq!(bad(&|l| l.bytes = 0), "empty link");
    assert_eq!(bad(&|l| l.bits = 1153), "link bits over its bytes");
    assert_eq!(bad(&|l| l.n2 = 11), "link modulus over its bytes");
    assert_eq!(bad(&|l| l.bytes = 1 << 40), "link bytes over its modulus");
    assert_eq!(bad(&|l| l.bytes = u64::MAX), "link bytes");
    // A power-of-two link of 2^63 bits is well-formed; enough of them overflow the total.
    let huge = LinkShape {
        bits: 0,
        n2: 63,
        bytes: 1 << 60,
        items: 0,
        ..link(0)
    };
    assert_eq!(refused(&header(0, 4, 2, &[huge; 16])), "total bytes");
}

#[test]
fn decoding_respects_limits() {
    let bytes = header(10, OPTIONS, 2, &[link(10)]);
    // 144 bytes of bits are a 160-byte allocation, which is what the budget sees.
    assert_eq!(
        decode_header(&bytes, &mut Budget::new(100, u64::MAX)),
        Err(DecodeError::Limit(LimitError::FilterBytes {
            needed: 160,
            limit: 100
        }))
    );
    let mut budget = Budget::new(u64::MAX, 1000);
    let filter = decode_header(&bytes, &mut budget).unwrap();
    assert_eq!(filter.allocated_bytes(), 160);
    assert_eq!(budget.available(), 840);
}

#[test]
fn copies_are_charged_and_equal() {
    let filter = decode_header(
        &header(150, OPTIONS, 2, &[link(100), link(50)]),
        &mut Unlimited,
    )
    .unwrap();
    assert_eq!(
        filter.try_clone(&mut Budget::new(u64::MAX, 319)),
        Err(LimitError::ServerMemory {
            needed: 320,
            available: 319
        })
    );
    let mut budget = Budget::new(u64::MAX, 320);
    assert_eq!(filter.try_clone(&mut budget).as_ref(), Ok(&filter));
    assert_eq!(budget.available(), 0);
}

fn full_filter(options: u32) -> RbFilter {
    // One full link; a new item (no bits are set) makes it grow or refuse.
    decode_header(&header(100, options, 2, &[link(100)]), &mut Unlimited).unwrap()
}

#[test]
fn growth_announces_its_bytes_and_can_be_refused() {
    let mut filter = full_filter(OPTIONS);
    let next = filter.next_link().unwrap();
    assert_eq!((next.entries, next.error, next.hashes), (200, 0.0025, 9));
    assert_eq!(filter.next_link_bytes(), Some(312));
    // The budget is charged the allocation size of the 312-byte array.
    assert_eq!(next.allocated_bytes(), allocation_size(312));
    assert_eq!(allocation_size(312), 320);
    let before = filter.try_clone(&mut Unlimited).unwrap();
    assert_eq!(
        filter.insert(b"x", &mut Budget::new(u64::MAX, 319)),
        Err(InsertError::Limit(LimitError::ServerMemory {
            needed: 320,
            available: 319
        }))
    );
    assert_eq!(
        filter.insert(b"x", &mut Budget::new(160 + 319, u64::MAX)),
        Err(InsertError::Limit(LimitError::FilterBytes {
            needed: 160 + 320,
            limit: 160 + 319
        }))
    );
    assert_eq!(filter, before, "a refused growth changes nothing");
    assert_eq!(filter.insert(b"x", &mut Unlimited), Ok(true));
    assert_eq!(filter.links().len(), 2);
    assert_eq!(*filter.links()[1].shape(), LinkShape { items: 1, ..next });
    assert_eq!(filter.insert(b"x", &mut Unlimited), Ok(false));
    assert_eq!(filter.items(), 101);
}

#[test]
fn non_scaling_and_maximal_filters_refuse_to_grow() {
    let mut filter = full_filter(OPTIONS | NO_SCALING);
    assert_eq!(filter.next_link_bytes(), None);
    assert_eq!(
        filter.insert(b"x", &mut Unlimited),
        Err(InsertError::NonScalingFull)
    );
    let links = vec![
        LinkShape {
            entries: 1,
            items: 1,
            ..link(0)
        };
        MAX_LINKS
    ];
    let bytes = header(MAX_LINKS as u64, OPTIONS, 1, &links);
    let mut filter = decode_header(&bytes, &mut Unlimited).unwrap();
    assert_eq!(
        filter.insert(b"x", &mut Unlimited),
        Err(InsertError::CannotGrow)
    );
    let mut outcome = RbAddOutcome::default();
    let mut full = full_filter(OPTIONS | NO_SCALING);
    full.insert_many([&b"a"[..], b"b"], &mut Unlimited, &mut outcome);
    assert_eq!(
        outcome,
        RbAddOutcome {
            added: vec![],
            error: Some(InsertError::NonScalingFull),
        },
        "stops at the error"
    );
}

#[test]
fn one_add_operation_pushes_its_links_and_is_charged_their_sum() {
    // EXPANSION 1 and one entry per link: every new item pushes a link of 8 bytes (an 8-byte
    // allocation), so three new items push three links, charged 24 bytes in all.
    let tiny = LinkShape {
        entries: 1,
        error: 0.45,
        hashes: 1,
        bpe: 1.6619891500019202,
        bits: 64,
        n2: 0,
        bytes: 8,
        items: 1,
    };
    let mut filter = decode_header(&header(1, OPTIONS, 1, &[tiny]), &mut Unlimited).unwrap();
    // Three items each new when added in turn (a link of 64 bits may already report an item),
    // and the links they push, found on a copy.
    let (mut items, mut shapes) = (Vec::new(), Vec::new());
    let mut copy = filter.try_clone(&mut Unlimited).unwrap();
    for candidate in (0u32..).map(|i| format!("new-{i}").into_bytes()) {
        if items.len() == 3 {
            break;
        }
        if !copy.contains(&candidate) {
            shapes.push(copy.next_link().unwrap());
            assert_eq!(copy.insert(&candidate, &mut Unlimited), Ok(true));
            items.push(candidate);
        }
    }
    assert!(shapes.iter().all(|shape| shape.allocated_bytes() == 8));
    let mut budget = Budget::new(u64::MAX, 23);
    let mut outcome = RbAddOutcome::default();
    let batch = [&items[0][..], &items[0], &items[1], &items[2]];
    filter.insert_many(batch, &mut budget, &mut outcome);
    assert_eq!(
        outcome,
        RbAddOutcome {
            added: vec![true, false, true],
            error: Some(InsertError::Limit(LimitError::ServerMemory {
                needed: 8,
                available: 7
            })),
        },
        "the third link is refused: the first two took 16 of 23 bytes"
    );
    assert_eq!(outcome.added_positions().collect::<Vec<_>>(), [0, 2]);
    assert_eq!(filter.links().len(), 3);
    assert_eq!(filter.items(), 3);
    // The links pushed are the ones the rule gave the copy; only their counts moved since.
    for (link, shape) in filter.links()[1..].iter().zip(&shapes) {
        assert_eq!(*link.shape(), LinkShape { items: 1, ..*shape });
    }
    assert_eq!(budget.available(), 7);
}

#[test]
fn chunks_write_within_odd_sized_links() {
    // Old files may have arrays that are not whole words: 27 bytes for a modulus of 200 bits.
    let odd = LinkShape {
        entries: 18,
        bits: 200,
        bytes: 27,
        items: 0,
        ..link(0)
    };
    let mut filter =
        decode_header(&header(0, OPTIONS, 2, &[odd, link(0)]), &mut Unlimited).unwrap();
    let data: Vec<u8> = (1..=20).collect();
    filter.write_bits(3, &data).unwrap();
    let (next, chunk) = scandump_step(&filter, 1);
    assert_eq!(next, 28);
    let mut expected = vec![0u8; 27];
    expected[3..23].copy_from_slice(&data);
    assert_eq!(chunk, expected);
    assert_eq!(filter.write_bits(20, &[0; 8]), Err(ChunkError::TooBig));
    filter.write_bits(27 + 5, &[0xff; 139]).unwrap();
    assert_eq!(scandump_step(&filter, 28).1[5..], [0xff; 139]);
}

/// An in-memory RDB value.
enum Field {
    U(u64),
    D(f64),
    S(Vec<u8>),
}

#[derive(Debug, PartialEq)]
struct Exhausted;

struct Fields(std::vec::IntoIter<Field>);

impl RdbSource for Fields {
    type Error = Exhausted;
    type Bytes = Vec<u8>;
    fn unsigned(&mut self) -> Result<u64, Exhausted> {
        match self.0.next() {
            Some(Field::U(value)) => Ok(value),
            _ => Err(Exhausted),
        }
    }
    fn double(&mut self) -> Result<f64, Exhausted> {
        match self.0.next() {
            Some(Field::D(value)) => Ok(value),
            _ => Err(Exhausted),
        }
    }
    fn string(&mut self) -> Result<Vec<u8>, Exhausted> {
        match self.0.next() {
            Some(Field::S(value)) => Ok(value),
            _ => Err(Exhausted),
        }
    }
}

/// The RDB fields of one filter of `links` in encoding `encver`, each array `fill`.
fn rdb_fields(encver: i32, options: u64, links: &[LinkShape], fill: u8) -> Vec<Field> {
    use Field::{D, S, U};
    let mut fields = vec![
        U(links.iter().fold(0u64, |sum, l| sum.wrapping_add(l.items))),
        U(links.len() as u64),
    ];
    if encver >= 2 {
        fields.push(U(options));
    }
    if encver >= 4 {
        fields.push(U(2));
    }
    for link in links {
        fields.extend([
            U(link.entries),
            D(link.error),
            U(u64::from(link.hashes)),
            D(link.bpe),
        ]);
        if encver >= 1 {
            fields.extend([U(link.bits), U(u64::from(link.n2))]);
        }
        fields.extend([S(vec![fill; link.bytes as usize]), U(link.items)]);
    }
    fields
}

fn load_fields(fields: Vec<Field>, encver: i32) -> Result<RbFilter, RdbError<Exhausted>> {
    load(&mut Fields(fields.into_iter()), encver, &mut Unlimited)
}

#[test]
fn every_encoding_loads_its_fields() {
    for encver in 0..=4 {
        let filter = load_fields(rdb_fields(encver, 5, &[link(100), link(7)], 0xff), encver)
            .unwrap_or_else(|e| panic!("encver {encver}: {e:?}"));
        assert_eq!(filter.items(), 107);
        let shape = *filter.links()[0].shape();
        let expected_options = if encver >= 2 { 5 } else { 0 };
        assert_eq!(filter.header().options, expected_options, "encver {encver}");
        if encver == 0 {
            // Encoding 0 stores no bit count: (u64)(100 · 11.0277...) = 1102.
            assert_eq!((shape.bits, shape.n2), (1102, 0));
        } else {
            assert_eq!(shape, link(100));
        }
        assert!(filter.contains(b"anything"), "all bits set");
        assert_eq!(scandump_step(&filter, 1).1, vec![0xff; 144]);
    }
}

#[test]
fn bad_rdb_values_are_refused() {
    let decode = |what: &'static str| RdbError::Decode(DecodeError::Corrupt(what));
    let fields = || rdb_fields(4, 5, &[link(100)], 0);
    assert_eq!(load_fields(fields(), 5), Err(decode("encoding version")));
    assert_eq!(load_fields(fields(), -1), Err(decode("encoding version")));
    let mut truncated = fields();
    truncated.pop();
    assert_eq!(load_fields(truncated, 4), Err(RdbError::Source(Exhausted)));
    let mut count = fields();
    count[1] = Field::U(1 << 40);
    assert_eq!(load_fields(count, 4), Err(decode("link count")));
    let mut short = fields();
    short[10] = Field::S(vec![0; 8]);
    assert_eq!(
        load_fields(short, 4),
        Err(decode("link bits over its bytes"))
    );
    let mut n2 = fields();
    n2[9] = Field::U(300);
    assert_eq!(load_fields(n2, 4), Err(decode("link n2")));
    let mut hashes = fields();
    hashes[6] = Field::U(1 << 33);
    assert_eq!(load_fields(hashes, 4), Err(decode("link hashes")));
    let mut items = fields();
    items[0] = Field::U(99);
    assert_eq!(
        load_fields(items, 4),
        Err(decode("items differ from the links' sum"))
    );
    // Each 144-byte array is a 160-byte allocation; the second takes the filter to 320.
    let limited = load(
        &mut Fields(rdb_fields(4, 5, &[link(100), link(7)], 0).into_iter()),
        4,
        &mut Budget::new(200, u64::MAX),
    );
    assert_eq!(
        limited,
        Err(RdbError::Decode(DecodeError::Limit(
            LimitError::FilterBytes {
                needed: 320,
                limit: 200
            }
        )))
    );
    // One budget for the whole value: the second link sees what the first left.
    let limited = load(
        &mut Fields(rdb_fields(4, 5, &[link(100), link(7)], 0).into_iter()),
        4,
        &mut Budget::new(u64::MAX, 250),
    );
    assert_eq!(
        limited,
        Err(RdbError::Decode(DecodeError::Limit(
            LimitError::ServerMemory {
                needed: 160,
                available: 90
            }
        )))
    );
}

#[test]
fn power_of_two_filters_grow_by_powers_of_two() {
    // Options 4 (FORCE64 without NOROUND): the next link is 2^n2 bits and its entries follow
    // from them, as RedisBloom 2.8.2 grows such a filter (core/tests/redisbloom.rs replays it).
    let first = LinkShape {
        entries: 20,
        error: 0.0025,
        hashes: 9,
        bpe: 12.470448459145377,
        bits: 256,
        n2: 8,
        bytes: 32,
        items: 20,
    };
    let filter = decode_header(&header(20, 4, 2, &[first]), &mut Unlimited).unwrap();
    let next = filter.next_link().unwrap();
    assert_eq!(
        (next.n2, next.bits, next.bytes, next.entries),
        (10, 1024, 128, 73)
    );
    assert_eq!(filter.header().options & NOROUND, 0);
}

/// The error rate closest to 1: each bit holds the most entries (about 4·10^15).
const LOOSEST: f64 = 1.0 - f64::EPSILON / 2.0;

/// A NOROUND link of `bytes` bytes at `error`, with the fields RedisBloom derives from it.
fn link_at(error: f64, bytes: u64, entries: u64, items: u64) -> LinkShape {
    let bpe = -(error.ln() / 0.480453013918201);
    LinkShape {
        entries,
        error,
        hashes: (std::f64::consts::LN_2 * bpe).ceil() as u32,
        bpe,
        bits: bytes * 8,
        n2: 0,
        bytes,
        items,
    }
}

#[test]
fn entries_beyond_what_the_bits_hold_are_refused() {
    let bad = |entries| refused(&header(0, OPTIONS, 2, &[LinkShape { entries, ..link(0) }]));
    // 1152 bits at 11.03 bits per entry hold 104 entries.
    assert!(parse_header(&header(
        0,
        OPTIONS,
        2,
        &[LinkShape {
            entries: 104,
            ..link(0)
        }]
    ))
    .is_ok());
    assert_eq!(bad(105), "link entries over its bits");
    // Entries 2^64 − 1 in a small link, which one add would wrap.
    assert_eq!(bad(u64::MAX), "link entries over its bits");
    // 256 bits hold 23.
    let power = LinkShape {
        entries: 24,
        n2: 8,
        bits: 256,
        bytes: 32,
        ..link(0)
    };
    assert_eq!(
        refused(&header(0, 4, 2, &[power])),
        "link entries over its bits"
    );
}

#[test]
fn hashes_and_bits_per_entry_follow_the_error_rate() {
    let bad = |change: &dyn Fn(&mut LinkShape)| {
        let mut shape = link(0);
        change(&mut shape);
        parse_header(&header(0, OPTIONS, 2, &[shape])).err()
    };
    // RedisBloom gives 8 hashes at 0.005; one either side is tolerated.
    for hashes in [7, 8, 9] {
        assert_eq!(bad(&|l| l.hashes = hashes), None, "{hashes} hashes");
    }
    let hashes = Some(DecodeError::Corrupt("link hashes"));
    assert_eq!(bad(&|l| l.hashes = 6), hashes);
    assert_eq!(bad(&|l| l.hashes = 10), hashes);
    assert_eq!(bad(&|l| l.hashes = 1100), hashes);
    let bpe = Some(DecodeError::Corrupt("link bits per entry"));
    assert_eq!(bad(&|l| l.bpe = 11.03), bpe);
    assert_eq!(bad(&|l| l.bpe = 1.0), bpe);
}

#[test]
fn chains_of_many_slow_links_are_refused() {
    // 1100 links of 1100 hashes: no error rate gives 1100 hashes.
    let mut slow = link_at(f64::from_bits(1), 256, 1, 0);
    slow.hashes = 1100;
    assert_eq!(
        refused(&header(0, OPTIONS, 1, &vec![slow; MAX_LINKS])),
        "link hashes"
    );
    // 1100 links at the smallest error rate (1075 hashes each, 1.2 million probes a lookup).
    let slowest = link_at(f64::from_bits(1), 256, 1, 0);
    assert_eq!(slowest.hashes, 1075);
    assert_eq!(
        refused(&header(0, OPTIONS, 1, &vec![slowest; MAX_LINKS])),
        "hashes over the chain"
    );
    // The same through RDB: refused before the array of the link that crosses the bound.
    let fields = rdb_fields(4, 5, &vec![slowest; MAX_LINKS], 0xff);
    assert_eq!(
        load_fields(fields, 4),
        Err(RdbError::Decode(DecodeError::Corrupt(
            "hashes over the chain"
        )))
    );
    // Up to the bound, it loads.
    let fit = (MAX_CHAIN_HASHES / 1075) as usize;
    assert!(parse_header(&header(0, OPTIONS, 1, &vec![slowest; fit])).is_ok());
}

#[test]
fn growth_stops_where_the_decoders_would() {
    // EXPANSION 1, one entry per link: from an error near 1, the longest chain RedisBloom grows.
    let mut filter = RbFilter::new(1, 0.999, Some(1), &mut Unlimited)
        .unwrap()
        .unwrap();
    let mut i = 0u32;
    let stop = loop {
        match filter.insert(&i.to_le_bytes(), &mut Unlimited) {
            Ok(_) => i += 1,
            Err(error) => break error,
        }
    };
    assert_eq!(stop, InsertError::CannotGrow);
    let links = filter.links().len();
    let hashes: u64 = filter
        .links()
        .iter()
        .map(|l| u64::from(l.shape().hashes))
        .sum();
    // It stopped because the error underflowed, not at a bound of ours: RedisBloom's own chain
    // fits them.
    assert!(links > 1000 && links <= MAX_LINKS, "{links} links");
    assert!(
        hashes <= MAX_CHAIN_HASHES && hashes > MAX_CHAIN_HASHES * 99 / 100,
        "{hashes}"
    );
    assert_eq!(filter.links().last().unwrap().shape().error * 0.5, 0.0);
    let bytes = encode_header(&filter);
    assert_eq!(
        encode_header(&decode_header(&bytes, &mut Unlimited).unwrap()),
        bytes
    );
}

#[test]
fn counts_at_their_bounds_refuse_adds_instead_of_wrapping() {
    // A link at the loosest error holds u64::MAX entries in 1 KiB; the chain's count is at
    // u64::MAX, so an add that would need a new link cannot count its item.
    let first = LinkShape {
        entries: 1,
        items: 1,
        ..link_at(0.45, 8, 1, 1)
    };
    let loose = link_at(LOOSEST, 1024, u64::MAX, u64::MAX - 1);
    let bytes = header(u64::MAX, OPTIONS, 2, &[first, loose]);
    let mut filter = decode_header(&bytes, &mut Unlimited).unwrap();
    assert_eq!(
        filter.insert(b"x", &mut Unlimited),
        Err(InsertError::CannotGrow)
    );
    assert_eq!(
        encode_header(&filter),
        bytes,
        "a refused add changes nothing"
    );
    // Its newest link full: a non-scaling one answers full.
    let full = link_at(LOOSEST, 1024, u64::MAX, u64::MAX);
    let mut filter = decode_header(
        &header(u64::MAX, OPTIONS | NO_SCALING, 2, &[full]),
        &mut Unlimited,
    )
    .unwrap();
    assert_eq!(
        filter.insert(b"x", &mut Unlimited),
        Err(InsertError::NonScalingFull)
    );
}

#[test]
fn version_1_envelopes_keep_version_1_options() {
    use super::envelope;
    let mut filter = load_fields(rdb_fields(1, 0, &[link(10)], 0), 1).unwrap();
    let bytes = envelope::encode_header(&filter, 0);
    assert!(envelope::parse_header(&bytes).is_ok());
    // The same with growth 3: encoding 1 could not save it.
    let forged = decode_header(&header(10, 0, 3, &[link(10)]), &mut Unlimited).unwrap();
    let mut bytes = envelope::encode_header(&forged, 0);
    bytes[5] = 1;
    let body = bytes.len() - 8;
    let sum = xxhash_rust::xxh3::xxh3_64(&bytes[..body]);
    bytes[body..].copy_from_slice(&sum.to_le_bytes());
    assert!(matches!(
        envelope::parse_header(&bytes),
        Err(DecodeError::Corrupt("options of a version 1 filter"))
    ));
    assert_eq!(filter.insert(b"a", &mut Unlimited), Ok(true));
}

mod hostile {
    //! Whatever bytes arrive, the decoders answer with a value and what they accept works.

    use proptest::prelude::*;

    use super::*;

    /// The budget of one operation.
    fn small() -> Budget {
        Budget::new(1 << 20, 1 << 20)
    }

    /// Exercises everything a decoded filter offers; none of it may panic.
    fn use_filter(mut filter: RbFilter, chunk: &[u8]) {
        for item in [&b""[..], b"a", chunk] {
            filter.contains(item);
            let _ = filter.insert(item, &mut small());
        }
        let _ = filter.write_bits(chunk.len() as u64, chunk);
        let mut iterator = 0;
        for _ in 0..4 {
            iterator = scandump_step(&filter, iterator).0;
        }
        let _ = filter.next_link_bytes();
    }

    proptest! {
        #[test]
        fn mutated_headers_never_panic(
            edits in proptest::collection::vec((0usize..126, any::<u8>()), 1..6),
            chunk in proptest::collection::vec(any::<u8>(), 0..40),
        ) {
            let mut bytes = header(150, OPTIONS, 2, &[link(100), link(50)]);
            for (at, value) in edits {
                bytes[at] = value;
            }
            if let Ok(filter) = decode_header(&bytes, &mut small()) {
                use_filter(filter, &chunk);
            }
        }

        #[test]
        fn random_rdb_fields_never_panic(
            encver in 0i32..=4,
            values in proptest::collection::vec((any::<u64>(), 0u8..6), 12),
            chunk in proptest::collection::vec(any::<u8>(), 0..40),
        ) {
            // Start from a valid value and overwrite some of its fields with random ones.
            let mut fields = rdb_fields(encver, 5, &[link(100)], 0x5a);
            for (i, (value, pick)) in values.into_iter().enumerate() {
                if pick == 0 && i < fields.len() {
                    fields[i] = match fields[i] {
                        Field::U(_) => Field::U(value % 300),
                        Field::D(_) => Field::D(f64::from_bits(value)),
                        Field::S(_) => Field::S(vec![0; (value % 200) as usize]),
                    };
                }
            }
            let loaded = load(&mut Fields(fields.into_iter()), encver, &mut small());
            if let Ok(filter) = loaded {
                use_filter(filter, &chunk);
            }
        }
    }
}

mod invariant {
    //! One invariant for every accepted value: whatever a decoder takes, and whatever adds make
    //! of it, encodes to bytes the decoders take back as the same filter (the fuzz target
    //! `invariant` runs the same on any input).

    use proptest::prelude::*;

    use super::super::{envelope, rdb};
    use super::*;

    /// The fields of one link near the edges of what the checks allow.
    fn link_strategy() -> impl Strategy<Value = LinkShape> {
        (
            prop_oneof![
                Just(0.45),
                Just(0.005),
                Just(1e-300),
                Just(f64::from_bits(1)),
                Just(LOOSEST),
                1e-12f64..1.0,
            ],
            1u64..=40,
            prop_oneof![6 => 0u8..2, 1 => 2u8..5],
            prop_oneof![3 => Just(0u8), 3 => Just(1u8), 1 => 2u8..5],
            prop_oneof![6 => Just(0i32), 1 => -2i32..=2],
            any::<u64>(),
        )
            .prop_map(
                |(error, words, entries_pick, items_pick, hashes_delta, random)| {
                    let mut shape = link_at(error, words * 8, 1, 0);
                    let bound = shape.max_entries();
                    shape.entries = match entries_pick {
                        0 => random % bound.max(1) + 1,
                        1 => bound,
                        2 => bound.saturating_add(1),
                        3 => u64::MAX,
                        _ => 1,
                    };
                    shape.items = match items_pick {
                        0 => 0,
                        1 => shape.entries,
                        2 => shape.entries.saturating_sub(1),
                        3 => random,
                        _ => random % shape.entries.saturating_add(1).max(1),
                    };
                    shape.hashes = shape.hashes.saturating_add_signed(hashes_delta);
                    shape
                },
            )
    }

    /// Decodes `bytes` as `kind` (0: SCANDUMP header, 1: RDB encoding 0..=4).
    fn decode(
        kind: u8,
        links: &[LinkShape],
        options: u32,
        growth: u32,
        items: u64,
    ) -> Option<RbFilter> {
        if kind == 0 {
            return decode_header(&header(items, options, growth, links), &mut small()).ok();
        }
        let encver = i32::from(kind) - 1;
        let mut fields = rdb_fields(encver, u64::from(options), links, 0);
        fields[0] = Field::U(items);
        if encver >= 4 {
            fields[3] = Field::U(u64::from(growth));
        }
        load(&mut Fields(fields.into_iter()), encver, &mut small()).ok()
    }

    fn small() -> Budget {
        Budget::new(1 << 20, 1 << 20)
    }

    /// A sink that keeps the fields, for `rdb::save` then `rdb::load`.
    #[derive(Default)]
    struct Saved(Vec<Field>);

    impl rdb::RdbSink for Saved {
        fn unsigned(&mut self, value: u64) {
            self.0.push(Field::U(value));
        }
        fn double(&mut self, value: f64) {
            self.0.push(Field::D(value));
        }
        fn string(&mut self, bytes: &[u8]) {
            self.0.push(Field::S(bytes.to_vec()));
        }
    }

    /// Every encoding of `filter` decodes to `filter` again.
    fn round_trips(filter: &RbFilter) {
        // RedisBloom's SCANDUMP stream (which cannot say Wrap32).
        if filter.header().arithmetic == super::super::Arithmetic::Wide {
            let mut copy = decode_header(&encode_header(filter), &mut Unlimited)
                .expect("own SCANDUMP header refused");
            let mut iterator = 1;
            loop {
                let (next, chunk) = scandump_step(filter, iterator);
                if next == 0 {
                    break;
                }
                super::super::scandump::load_chunk(&mut copy, next, &chunk)
                    .expect("own chunk refused");
                iterator = next;
            }
            assert_eq!(&copy, filter, "SCANDUMP/LOADCHUNK changed the filter");
        }
        // Our envelope, then the arrays.
        let (mut copy, loaded) = envelope::decode_header(
            &envelope::encode_header(filter, filter.bytes()),
            &mut Unlimited,
        )
        .expect("own envelope refused");
        assert_eq!(loaded, filter.bytes());
        for (offset, len) in filter.pieces(4096) {
            let mut piece = vec![0; len as usize];
            filter.read_bits(offset, &mut piece).unwrap();
            copy.write_bits(offset, &piece).unwrap();
        }
        assert_eq!(&copy, filter, "envelope changed the filter");
        // RedisBloom's RDB value.
        let mut saved = Saved::default();
        let encver = rdb::save(filter, &mut saved);
        let copy = load(&mut Fields(saved.0.into_iter()), encver, &mut Unlimited)
            .expect("own RDB value refused");
        assert_eq!(&copy, filter, "RDB value changed the filter");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]

        #[test]
        fn accepted_values_and_their_adds_encode_back(
            kind in 0u8..6,
            links in proptest::collection::vec(link_strategy(), 1..4),
            options in prop_oneof![
                6 => Just(5u32), 2 => Just(13), 2 => Just(4), 1 => Just(0), 1 => any::<u32>()
            ],
            growth in prop_oneof![Just(1u32), Just(2), 1u32..40000],
            items_pick in prop_oneof![6 => Just(0u8), 1 => Just(2u8)],
            random_items in any::<u64>(),
            adds in 0u32..300,
            start in any::<u32>(),
        ) {
            let sum = links.iter().try_fold(0u64, |sum, link| sum.checked_add(link.items));
            let items = match (items_pick, sum) {
                (0, Some(sum)) | (1, Some(sum)) => sum,
                _ => random_items,
            };
            let Some(mut filter) = decode(kind, &links, options, growth, items) else {
                return Ok(());
            };
            round_trips(&filter);
            let sample: Vec<[u8; 4]> = (start..start.wrapping_add(64)).map(u32::to_le_bytes).collect();
            for i in 0..adds {
                let item = start.wrapping_add(i).to_le_bytes();
                let before = filter.items();
                match filter.insert(&item, &mut small()) {
                    Ok(new) => {
                        prop_assert!(filter.contains(&item));
                        prop_assert_eq!(filter.items(), before + u64::from(new));
                    }
                    Err(_) => prop_assert_eq!(filter.items(), before),
                }
            }
            round_trips(&filter);
            let answers: Vec<bool> = sample.iter().map(|item| filter.contains(item)).collect();
            let again = decode_header(&encode_header(&filter), &mut Unlimited);
            if let Ok(again) = again {
                let mut again = again;
                for (offset, len) in filter.pieces(4096) {
                    let mut piece = vec![0; len as usize];
                    filter.read_bits(offset, &mut piece).unwrap();
                    again.write_bits(offset, &piece).unwrap();
                }
                let replies: Vec<bool> = sample.iter().map(|item| again.contains(item)).collect();
                if filter.header().arithmetic == super::super::Arithmetic::Wide {
                    prop_assert_eq!(replies, answers);
                }
            } else {
                prop_assert!(false, "own SCANDUMP header refused: {:?}", again.err());
            }
        }
    }
}
