//! Forging payloads the module must validate: the DUMP/RESTORE CRC64 trailer and the filter
//! header (layout: core/src/scalable/encoding.rs) with its xxh3-64 checksum, so that mutations reach the
//! module's field checks instead of stopping at a checksum.

use rand::Rng;
use rand_chacha::ChaCha8Rng;
use xxhash_rust::xxh3::{xxh3_64, xxh3_64_with_seed};

/// CRC-64/Jones as Redis' crc64.c: reflected, polynomial 0xad93d23594c935a9, init 0, no xorout.
pub fn crc64(data: &[u8]) -> u64 {
    static TABLE: std::sync::OnceLock<[u64; 256]> = std::sync::OnceLock::new();
    let table = TABLE.get_or_init(|| {
        const REFLECTED_POLY: u64 = 0x95ac_9329_ac4b_c9b5; // bit-reverse of 0xad93d23594c935a9
        let mut t = [0u64; 256];
        for (i, slot) in t.iter_mut().enumerate() {
            let mut crc = i as u64;
            for _ in 0..8 {
                crc = if crc & 1 == 1 {
                    (crc >> 1) ^ REFLECTED_POLY
                } else {
                    crc >> 1
                };
            }
            *slot = crc;
        }
        t
    });
    data.iter().fold(0u64, |crc, &b| {
        table[((crc ^ u64::from(b)) & 0xff) as usize] ^ (crc >> 8)
    })
}

/// Appends the RDB version and the CRC64 of everything before it: a payload RESTORE accepts.
pub fn seal(mut value: Vec<u8>, version: [u8; 2]) -> Vec<u8> {
    value.extend_from_slice(&version);
    let crc = crc64(&value);
    value.extend_from_slice(&crc.to_le_bytes());
    value
}

/// Overwrites the trailing 8 bytes of a filter header with the xxh3-64 of the bytes before them.
pub fn fix_xxh3(bytes: &mut [u8]) {
    let body = bytes.len() - 8;
    let sum = xxh3_64(&bytes[..body]);
    bytes[body..].copy_from_slice(&sum.to_le_bytes());
}

/// Writes the low `size` bytes of `value`, little-endian, at `at`.
pub fn put(bytes: &mut [u8], at: usize, size: usize, value: u64) {
    bytes[at..at + size].copy_from_slice(&value.to_le_bytes()[..size]);
}

/// Reads a little-endian field of `size` bytes at `at`.
pub fn get(bytes: &[u8], at: usize, size: usize) -> u64 {
    let mut b = [0u8; 8];
    b[..size].copy_from_slice(&bytes[at..at + size]);
    u64::from_le_bytes(b)
}

/// A header from scratch: one scaling (expansion > 0) or non-scaling filter, `layers` as
/// (items, bits, hashes), `loaded` bytes of bits valid. Checksum correct.
pub fn build_header(
    nonscaling: bool,
    seed: u64,
    rate: f64,
    capacity: u64,
    expansion: u32,
    loaded: u64,
    layers: &[(u64, u64, u32)],
) -> Vec<u8> {
    let mut h = Vec::new();
    h.extend_from_slice(b"RBLM");
    h.push(1);
    h.push(u8::from(nonscaling));
    h.extend_from_slice(&[0, 0]);
    h.extend_from_slice(&seed.to_le_bytes());
    h.extend_from_slice(&rate.to_le_bytes());
    h.extend_from_slice(&capacity.to_le_bytes());
    h.extend_from_slice(&expansion.to_le_bytes());
    h.extend_from_slice(&(layers.len() as u32).to_le_bytes());
    h.extend_from_slice(&loaded.to_le_bytes());
    for &(items, bits, hashes) in layers {
        h.extend_from_slice(&items.to_le_bytes());
        h.extend_from_slice(&bits.to_le_bytes());
        h.extend_from_slice(&hashes.to_le_bytes());
        h.extend_from_slice(&[0; 4]);
    }
    h.extend_from_slice(&[0; 8]);
    fix_xxh3(&mut h);
    h
}

/// The checksum stored at the end of a (transfer) header: it seeds every chunk checksum.
pub fn header_sum(header: &[u8]) -> u64 {
    u64::from_le_bytes(header[header.len() - 8..].try_into().unwrap())
}

/// A LOADCHUNK data chunk: `bits` followed by xxh3-64(bits, seed = header checksum + offset).
pub fn forge_chunk(header: &[u8], offset: u64, bits: &[u8]) -> Vec<u8> {
    let sum = xxh3_64_with_seed(bits, header_sum(header).wrapping_add(offset));
    let mut c = bits.to_vec();
    c.extend_from_slice(&sum.to_le_bytes());
    c
}

/// Offsets of the header fields: (name, offset, size). Per-layer fields follow for each layer.
pub fn header_fields(layers: usize) -> Vec<(&'static str, usize, usize)> {
    let mut f = vec![
        ("magic", 0, 4),
        ("version", 4, 1),
        ("flags", 5, 1),
        ("reserved", 6, 2),
        ("seed", 8, 8),
        ("error_rate", 16, 8),
        ("capacity", 24, 8),
        ("expansion", 32, 4),
        ("layer_count", 36, 4),
        ("loaded", 40, 8),
    ];
    for i in 0..layers {
        let at = 48 + 24 * i;
        f.push(("layer.items", at, 8));
        f.push(("layer.bits", at + 8, 8));
        f.push(("layer.hashes", at + 16, 4));
        f.push(("layer.reserved", at + 20, 4));
    }
    f
}

/// Interesting values for a little-endian field of `size` bytes.
pub fn interesting(rng: &mut ChaCha8Rng, size: usize, old: u64) -> u64 {
    let max = if size == 8 {
        u64::MAX
    } else {
        (1u64 << (8 * size)) - 1
    };
    let floats = [
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        -0.0,
        0.0,
        1.0,
        0.5,
        1e-300,
        5e-324,
        1e-10,
        0.999_999_999_999,
        -0.01,
    ];
    match rng.random_range(0..12) {
        0 => 0,
        1 => 1,
        2 => max,
        3 => max - 1,
        4 => rng.random::<u64>() & max,
        5 => old ^ (1 << rng.random_range(0..8 * size)),
        6 => old.wrapping_add(1) & max,
        7 => old.wrapping_sub(1) & max,
        8 => (1u64 << rng.random_range(0..8 * size as u32)) & max,
        9 => old.wrapping_mul(2) & max,
        10 if size == 8 => floats[rng.random_range(0..floats.len())].to_bits(),
        _ => (old.wrapping_add(64)) & max,
    }
}

/// Mutates a header's fields (checksum then fixed). Sometimes adds or drops a layer record.
pub fn mutate_header(rng: &mut ChaCha8Rng, header: &[u8]) -> Vec<u8> {
    let mut h = header.to_vec();
    let layers = (h.len() - 56) / 24;
    match rng.random_range(0..10) {
        0 if layers > 1 => {
            // Drop the last layer record, with or without fixing the count.
            h.drain(h.len() - 8 - 24..h.len() - 8);
            if rng.random_bool(0.7) {
                put(&mut h, 36, 4, (layers - 1) as u64);
            }
        }
        1 => {
            // Append a layer record copied from the last one, maybe with new values.
            let last = h[h.len() - 8 - 24..h.len() - 8].to_vec();
            let at = h.len() - 8;
            h.splice(at..at, last);
            if rng.random_bool(0.7) {
                put(&mut h, 36, 4, (layers + 1) as u64);
            }
        }
        _ => {}
    }
    let layers_now = (h.len().saturating_sub(56)) / 24;
    let fields = header_fields(layers_now);
    for _ in 0..rng.random_range(1..4) {
        let (_, at, size) = fields[rng.random_range(0..fields.len())];
        if at + size > h.len() - 8 {
            continue;
        }
        let old = get(&h, at, size);
        let new = interesting(rng, size, old);
        put(&mut h, at, size, new);
    }
    fix_xxh3(&mut h);
    h
}

/// One field of a module value in an RDB payload.
#[derive(Clone, Debug, PartialEq)]
pub enum ModuleField {
    Unsigned(u64),
    Double(f64),
    Bytes(Vec<u8>),
}

/// An RDB length: 6 bits, 14 bits, 32 bits or 64 bits (Redis' rdbSaveLen).
fn rdb_length(n: u64) -> Vec<u8> {
    if n < 1 << 6 {
        vec![n as u8]
    } else if n < 1 << 14 {
        vec![0x40 | (n >> 8) as u8, n as u8]
    } else if n <= u64::from(u32::MAX) {
        let mut out = vec![0x80];
        out.extend_from_slice(&(n as u32).to_be_bytes());
        out
    } else {
        let mut out = vec![0x81];
        out.extend_from_slice(&n.to_be_bytes());
        out
    }
}

/// A RESTORE payload of a module value of type `type_name` (9 characters) in encoding `encver`,
/// its fields saved as RedisModule_SaveUnsigned / SaveDouble / SaveStringBuffer save them, for
/// the server's RDB `version` (the 2 bytes before the CRC of any DUMP).
pub fn module_payload(
    type_name: &str,
    encver: u64,
    fields: &[ModuleField],
    version: [u8; 2],
) -> Vec<u8> {
    const CHARSET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let id = type_name.bytes().fold(0u64, |id, c| {
        let at = CHARSET
            .iter()
            .position(|&x| x == c)
            .expect("type name character");
        (id << 6) | at as u64
    });
    let id = (id << 10) | encver;
    // RDB_TYPE_MODULE_2, then the module id as a 64-bit length.
    let mut value = vec![7];
    value.extend(rdb_length(id));
    for field in fields {
        match field {
            ModuleField::Unsigned(n) => {
                value.push(2);
                value.extend(rdb_length(*n));
            }
            ModuleField::Double(d) => {
                value.push(4);
                value.extend_from_slice(&d.to_le_bytes());
            }
            ModuleField::Bytes(b) => {
                value.push(5);
                value.extend(rdb_length(b.len() as u64));
                value.extend_from_slice(b);
            }
        }
    }
    value.push(0);
    seal(value, version)
}

/// Offsets in a partitioned filter's descriptor (the picture at core's `Descriptor::encode`) of
/// P (4 bytes), N and the partition capacity c (8 bytes each).
const DESCRIPTOR_PARTITIONS_AT: usize = 8;
const DESCRIPTOR_CAPACITY_AT: usize = 20;
const DESCRIPTOR_PARTITION_CAPACITY_AT: usize = 28;

/// A descriptor's saved bytes with P, N and c replaced where given and its checksum made right,
/// so that only the fields' agreement is left to refuse it.
pub fn forge_descriptor(
    descriptor: &[u8],
    partitions: Option<u32>,
    capacity: Option<u64>,
    partition_capacity: Option<u64>,
) -> Vec<u8> {
    let mut bytes = descriptor.to_vec();
    if let Some(p) = partitions {
        put(&mut bytes, DESCRIPTOR_PARTITIONS_AT, 4, u64::from(p));
    }
    if let Some(n) = capacity {
        put(&mut bytes, DESCRIPTOR_CAPACITY_AT, 8, n);
    }
    if let Some(c) = partition_capacity {
        put(&mut bytes, DESCRIPTOR_PARTITION_CAPACITY_AT, 8, c);
    }
    fix_xxh3(&mut bytes);
    bytes
}

/// The RDB version the server behind `c` writes in DUMP payloads (the two bytes before the CRC).
pub fn rdb_version(c: &mut redis::Connection) -> [u8; 2] {
    let probe: &[u8] = b"rdb-version-probe";
    crate::reply::rawb(c, &[b"SET", probe, b"x"]).expect("SET");
    let dump = match crate::reply::rawb(c, &[b"DUMP", probe]) {
        Ok(redis::Value::BulkString(dump)) => dump,
        other => panic!("DUMP: {other:?}"),
    };
    crate::reply::rawb(c, &[b"DEL", probe]).expect("DEL");
    [dump[dump.len() - 10], dump[dump.len() - 9]]
}

/// The RESTORE payload of a descriptor's saved bytes (the module's encoding 100, one string).
pub fn descriptor_payload(descriptor: &[u8], version: [u8; 2]) -> Vec<u8> {
    module_payload(
        "MBbloom--",
        100,
        &[ModuleField::Bytes(descriptor.to_vec())],
        version,
    )
}
