//! The valkey-bloom kind against the `bloomfilter` crate itself (the version valkey-bloom 1.0
//! builds with): the same sizes, the same bits for the same items, the same answers for members
//! and non-members, and growth by valkey-bloom's rule, modelled here with the crate's filters.

use bloomfilter::Bloom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::rdb::{self, CRATE_HEADER_BYTES};
use super::*;
use crate::budget::{Budget, Unlimited};
use crate::encoding::DecodeError;
use crate::redisbloom::{RdbError, RdbSink, RdbSource};
use crate::scalable::{CreateError, InsertError};

/// valkey-bloom 1.0's object, modelled with the crate: its add rule, step by step.
struct Model {
    expansion: u32,
    fp_rate: f64,
    tightening: f64,
    seed: [u8; 32],
    /// (filter, items, capacity)
    filters: Vec<(Bloom<[u8]>, u64, u64)>,
}

impl Model {
    fn new(capacity: u64, fp_rate: f64, expansion: u32, tightening: f64, seed: [u8; 32]) -> Model {
        let bloom = Bloom::new_for_fp_rate_with_seed(capacity as usize, fp_rate, &seed).unwrap();
        Model {
            expansion,
            fp_rate,
            tightening,
            seed,
            filters: vec![(bloom, 0, capacity)],
        }
    }

    fn check(&self, item: &[u8]) -> bool {
        self.filters.iter().any(|(bloom, _, _)| bloom.check(item))
    }

    /// valkey-bloom's add_item: Some(added), None for "non scaling filter is full".
    fn add(&mut self, item: &[u8]) -> Option<bool> {
        if self.check(item) {
            return Some(false);
        }
        let n = self.filters.len();
        let (_, items, capacity) = self.filters.last().unwrap();
        if items >= capacity {
            if self.expansion == 0 {
                return None;
            }
            let fp = self.fp_rate * self.tightening.powi(n as i32);
            let capacity = capacity * u64::from(self.expansion);
            let bloom =
                Bloom::new_for_fp_rate_with_seed(capacity as usize, fp, &self.seed).unwrap();
            self.filters.push((bloom, 0, capacity));
        }
        let (bloom, items, _) = self.filters.last_mut().unwrap();
        bloom.set(item);
        *items += 1;
        Some(true)
    }
}

/// The fields of an RDB value, as Redis' module API would save and read them.
#[derive(Clone, Debug, PartialEq)]
enum Field {
    Unsigned(u64),
    Double(f64),
    Bytes(Vec<u8>),
}

#[derive(Default)]
struct Fields(Vec<Field>);

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

struct Source(std::vec::IntoIter<Field>);

impl RdbSource for Source {
    type Error = &'static str;
    type Bytes = Vec<u8>;
    fn unsigned(&mut self) -> Result<u64, &'static str> {
        match self.0.next() {
            Some(Field::Unsigned(v)) => Ok(v),
            _ => Err("not an unsigned"),
        }
    }
    fn double(&mut self) -> Result<f64, &'static str> {
        match self.0.next() {
            Some(Field::Double(v)) => Ok(v),
            _ => Err("not a double"),
        }
    }
    fn string(&mut self) -> Result<Vec<u8>, &'static str> {
        match self.0.next() {
            Some(Field::Bytes(v)) => Ok(v),
            _ => Err("not a string"),
        }
    }
}

/// The RDB fields valkey-bloom 1.0 saves for the model's object (its rdb_save).
fn model_fields(model: &Model, seed_random: bool) -> Vec<Field> {
    let mut fields = vec![
        Field::Unsigned(model.filters.len() as u64),
        Field::Unsigned(u64::from(model.expansion)),
        Field::Double(model.fp_rate),
        Field::Double(model.tightening),
        Field::Unsigned(u64::from(seed_random)),
    ];
    for (index, (bloom, items, capacity)) in model.filters.iter().enumerate() {
        fields.push(Field::Bytes(bloom.as_slice().to_vec()));
        fields.push(Field::Unsigned(*capacity));
        if index + 1 == model.filters.len() {
            fields.push(Field::Unsigned(*items));
        }
    }
    fields
}

fn load(fields: Vec<Field>) -> Result<VbFilter, RdbError<&'static str>> {
    rdb::load(&mut Source(fields.into_iter()), 1, &mut Unlimited)
}

fn random_seed(rng: &mut ChaCha8Rng) -> [u8; 32] {
    rng.random()
}

fn items(prefix: &str, count: usize) -> Vec<Vec<u8>> {
    (0..count)
        .map(|i| format!("{prefix}{i}").into_bytes())
        .collect()
}

fn probes() -> Vec<Vec<u8>> {
    let mut probes = items("probe", 20_000);
    probes.extend([Vec::new(), vec![0], (0..=255).collect(), vec![0xff; 9]]);
    probes
}

#[test]
fn sizes_layers_as_the_crate_does() {
    for (capacity, fp) in [
        (1u64, 0.5),
        (100, 0.01),
        (1000, 0.001),
        (100_000, 0.01),
        (7, 1e-9),
        (12_345, 0.999),
        (3, 2e-300),
    ] {
        let bloom =
            Bloom::<[u8]>::new_for_fp_rate_with_seed(capacity as usize, fp, &[1; 32]).unwrap();
        let shape = LayerShape::new(capacity, fp).unwrap();
        assert_eq!(shape.bits(), bloom.len(), "capacity {capacity} fp {fp}");
        assert_eq!(
            shape.hashes,
            bloom.number_of_hash_functions(),
            "capacity {capacity} fp {fp}"
        );
        assert_eq!(
            shape.bytes as usize + CRATE_HEADER_BYTES,
            bloom.as_slice().len()
        );
    }
}

#[test]
fn a_loaded_object_answers_every_item_as_the_crate_does_and_grows_by_valkey_blooms_rule() {
    let mut rng = ChaCha8Rng::seed_from_u64(36);
    for (capacity, fp, expansion, tightening, fixed) in [
        (100u64, 0.01, 2u32, 0.5, false),
        (50, 0.001, 1, 0.9, true),
        (1, 0.3, 3, 0.25, false),
        (1000, 0.05, 0, 0.5, false),
    ] {
        let seed = if fixed {
            FIXED_SEED
        } else {
            random_seed(&mut rng)
        };
        let mut model = Model::new(capacity, fp, expansion, tightening, seed);
        // Fill past a few layers (or, non-scaling, to the brim).
        let members = items("m", (capacity as usize) * 7 + 3);
        for item in &members {
            model.add(item);
        }
        let loaded = load(model_fields(&model, !fixed)).unwrap();
        assert_eq!(loaded.layers().len(), model.filters.len());
        for item in members.iter().chain(&probes()) {
            assert_eq!(loaded.contains(item), model.check(item), "{item:?}");
        }
        // The saved fields are valkey-bloom's, field for field.
        let mut saved = Fields::default();
        rdb::save(&loaded, &mut saved);
        assert_eq!(saved.0, model_fields(&model, !fixed));

        // More items, added to both: the same answers, layers and bits.
        let mut ours = loaded;
        for item in items("g", (capacity as usize) * 9) {
            let want = model.add(&item);
            let got = match ours.insert(&item, &mut Unlimited) {
                Ok(added) => Some(added),
                Err(InsertError::NonScalingFull) => None,
                Err(other) => panic!("{other:?}"),
            };
            assert_eq!(got, want);
        }
        let mut saved = Fields::default();
        rdb::save(&ours, &mut saved);
        assert_eq!(saved.0, model_fields(&model, !fixed));
        for item in probes() {
            assert_eq!(ours.contains(&item), model.check(&item));
        }
    }
}

#[test]
fn blob_and_envelope_round_trip() {
    let mut model = Model::new(10, 0.01, 2, 0.5, FIXED_SEED);
    for item in items("x", 75) {
        model.add(&item);
    }
    let filter = load(model_fields(&model, false)).unwrap();
    let blob = blob::encode(&filter);
    assert_eq!(blob::decode(&blob, &mut Unlimited).unwrap(), filter);

    let header = envelope::encode_header(&filter, filter.bytes());
    let (mut copy, loaded) = envelope::decode_header(&header, &mut Unlimited).unwrap();
    assert_eq!(loaded, filter.bytes());
    for (offset, len) in filter.pieces(7) {
        let mut piece = vec![0; len as usize];
        filter.read_bits(offset, &mut piece).unwrap();
        copy.write_bits(offset, &piece).unwrap();
    }
    assert_eq!(copy, filter);
}

/// valkey-bloom's BF.LOAD blob of the model, laid out as bincode 1.3 writes its object.
fn model_blob(model: &Model, seed_random: bool) -> Vec<u8> {
    let mut out = vec![1];
    out.extend_from_slice(&model.expansion.to_le_bytes());
    out.extend_from_slice(&model.fp_rate.to_le_bytes());
    out.extend_from_slice(&model.tightening.to_le_bytes());
    out.push(u8::from(seed_random));
    out.extend_from_slice(&(model.filters.len() as u64).to_le_bytes());
    for (bloom, items, capacity) in &model.filters {
        out.extend_from_slice(&(bloom.as_slice().len() as u64).to_le_bytes());
        out.extend_from_slice(bloom.as_slice());
        out.extend_from_slice(&items.to_le_bytes());
        out.extend_from_slice(&capacity.to_le_bytes());
    }
    out
}

#[test]
fn a_blob_decodes_to_the_object_its_rdb_value_gives() {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let mut model = Model::new(20, 0.02, 2, 0.5, random_seed(&mut rng));
    for item in items("b", 130) {
        model.add(&item);
    }
    let from_blob = blob::decode(&model_blob(&model, true), &mut Unlimited).unwrap();
    assert_eq!(from_blob, load(model_fields(&model, true)).unwrap());
    assert_eq!(blob::encode(&from_blob), model_blob(&model, true));
}

/// Replaces field `index` of `fields`.
fn with(fields: &[Field], index: usize, value: Field) -> Vec<Field> {
    let mut fields = fields.to_vec();
    fields[index] = value;
    fields
}

fn refused(fields: Vec<Field>) -> &'static str {
    match load(fields) {
        Err(RdbError::Decode(DecodeError::Corrupt(what))) => what,
        other => panic!("not refused as corrupt: {other:?}"),
    }
}

#[test]
fn refuses_values_valkey_bloom_could_not_have_written() {
    let mut model = Model::new(10, 0.01, 2, 0.5, FIXED_SEED);
    for item in items("x", 25) {
        model.add(&item);
    }
    let good = model_fields(&model, false);
    assert_eq!(model.filters.len(), 2);
    // Layout: 0 count, 1 expansion, 2 fp, 3 tightening, 4 random, 5 bytes, 6 capacity,
    // 7 bytes, 8 capacity, 9 items.
    assert_eq!(refused(with(&good, 0, Field::Unsigned(0))), "layer count");
    assert_eq!(
        refused(with(&good, 0, Field::Unsigned(1 << 40))),
        "layer count"
    );
    assert_eq!(
        refused(with(&good, 1, Field::Unsigned(0))),
        "several layers in a non-scaling object"
    );
    assert_eq!(refused(with(&good, 2, Field::Double(0.0))), "error rate");
    assert_eq!(
        refused(with(&good, 2, Field::Double(f64::NAN))),
        "error rate"
    );
    assert_eq!(
        refused(with(&good, 3, Field::Double(1.0))),
        "tightening ratio"
    );
    assert_eq!(
        refused(with(&good, 4, Field::Unsigned(2))),
        "seed is random"
    );
    assert_eq!(
        refused(with(&good, 2, Field::Double(0.001))),
        "bitmap size is not the one its capacity and error rate give"
    );
    assert_eq!(
        refused(with(&good, 6, Field::Unsigned(11))),
        "bitmap size is not the one its capacity and error rate give"
    );
    assert_eq!(
        refused(with(&good, 8, Field::Unsigned(30))),
        "capacity is not the previous one times the expansion"
    );
    assert_eq!(
        refused(with(&good, 9, Field::Unsigned(21))),
        "items over capacity"
    );
    let Field::Bytes(layer) = &good[5] else {
        panic!()
    };
    let mut other_seed = layer.clone();
    other_seed[20] ^= 1;
    assert_eq!(
        refused(with(&good, 5, Field::Bytes(other_seed.clone()))),
        "fixed-seed object without the fixed seed"
    );
    // Random-seed mode takes any seed, but every layer must share it.
    let random = with(&good, 4, Field::Unsigned(1));
    assert_eq!(
        refused(with(&random, 5, Field::Bytes(other_seed))),
        "layers with different seeds"
    );
    let mut hashes = layer.clone();
    hashes[9] += 2;
    assert_eq!(
        refused(with(&good, 5, Field::Bytes(hashes))),
        "hash count is not the one its size and capacity give"
    );
    let mut short = layer.clone();
    short.pop();
    assert_eq!(
        refused(with(&good, 5, Field::Bytes(short))),
        "layer bitmap length differs from its header's"
    );
    let mut version = layer.clone();
    version[0] = 2;
    assert_eq!(
        refused(with(&good, 5, Field::Bytes(version))),
        "layer format version"
    );
    assert_eq!(
        refused(with(
            &good,
            5,
            Field::Bytes(layer[..CRATE_HEADER_BYTES].to_vec())
        )),
        "layer bytes too short"
    );
    assert!(matches!(
        rdb::load(&mut Source(good.clone().into_iter()), 2, &mut Unlimited),
        Err(RdbError::Decode(DecodeError::Corrupt("encoding version")))
    ));
    // A budget too small for the bitmaps refuses them as a limit, not as corrupt.
    assert!(matches!(
        rdb::load(
            &mut Source(good.into_iter()),
            1,
            &mut Budget::new(8, u64::MAX)
        ),
        Err(RdbError::Decode(DecodeError::Limit(_)))
    ));
}

#[test]
fn mutated_blobs_and_envelopes_are_refused_or_loaded_never_panic() {
    let mut rng = ChaCha8Rng::seed_from_u64(99);
    let mut model = Model::new(8, 0.05, 3, 0.6, random_seed(&mut rng));
    for item in items("z", 60) {
        model.add(&item);
    }
    let blob = model_blob(&model, true);
    let filter = blob::decode(&blob, &mut Unlimited).unwrap();
    let header = envelope::encode_header(&filter, 0);
    for _ in 0..20_000 {
        let mut bytes = if rng.random() {
            blob.clone()
        } else {
            header.clone()
        };
        let flips = rng.random_range(1..4);
        for _ in 0..flips {
            let at = rng.random_range(0..bytes.len());
            bytes[at] = rng.random();
        }
        if rng.random_range(0..10) == 0 {
            bytes.truncate(rng.random_range(0..bytes.len()));
        }
        let budget = &mut Budget::new(1 << 20, 1 << 20);
        if let Ok(decoded) = blob::decode(&bytes, budget) {
            decoded.shape().validate().unwrap();
        }
        if let Ok((decoded, _)) = envelope::decode_header(&bytes, budget) {
            decoded.shape().validate().unwrap();
        }
    }
}

#[test]
fn growth_stops_where_valkey_blooms_does() {
    // A non-scaling object refuses the item past its capacity.
    let mut model = Model::new(3, 0.01, 0, 0.5, FIXED_SEED);
    for item in items("n", 3) {
        model.add(&item);
    }
    let mut filter = load(model_fields(&model, false)).unwrap();
    let mut refusal = None;
    for item in items("more", 50) {
        if let Err(error) = filter.insert(&item, &mut Unlimited) {
            refusal = Some(error);
            break;
        }
    }
    assert_eq!(refusal, Some(InsertError::NonScalingFull));
    // An error rate that would underflow: no further layer (valkey-bloom: "false positive
    // degrades to 0 on scale out").
    let mut model = Model::new(1, 1e-300, 1, 1e-10, FIXED_SEED);
    model.add(b"only");
    let filter = load(model_fields(&model, false)).unwrap();
    assert_eq!(filter.next_layer(), Err(InsertError::CannotGrow));
}

/// An object made here (the valkey-bloom personality's BF.RESERVE and first add) is the one
/// valkey-bloom makes: after the same items, the same layers, answers and saved fields.
#[test]
fn a_new_object_is_the_one_valkey_bloom_makes() {
    let mut rng = ChaCha8Rng::seed_from_u64(361);
    for (capacity, fp, expansion, fixed) in [
        (100u64, 0.01, 2u32, false),
        (100_000, 0.01, 2, true),
        (7, 0.2, 0, false),
    ] {
        let seed = if fixed {
            FIXED_SEED
        } else {
            random_seed(&mut rng)
        };
        let params = ObjectParams {
            expansion,
            fp_rate: fp,
            tightening: 0.5,
            seed_random: !fixed,
            seed,
        };
        let mut ours = VbFilter::new(params, capacity, &mut Unlimited).unwrap();
        let mut model = Model::new(capacity, fp, expansion, 0.5, seed);
        for item in items("n", (capacity.min(300) as usize) * 5) {
            let want = model.add(&item);
            let got = match ours.insert(&item, &mut Unlimited) {
                Ok(added) => Some(added),
                Err(InsertError::NonScalingFull) => None,
                Err(other) => panic!("{other:?}"),
            };
            assert_eq!(got, want);
        }
        let mut saved = Fields::default();
        rdb::save(&ours, &mut saved);
        assert_eq!(saved.0, model_fields(&model, !fixed));
        for item in probes() {
            assert_eq!(ours.contains(&item), model.check(&item));
        }
    }
    // What valkey-bloom refuses to create: no object.
    let params = ObjectParams {
        expansion: 2,
        fp_rate: 0.01,
        tightening: 0.5,
        seed_random: false,
        seed: FIXED_SEED,
    };
    assert!(matches!(
        VbFilter::new(params, 0, &mut Unlimited),
        Err(CreateError::Shape(_))
    ));
    let bad_rate = ObjectParams {
        fp_rate: 1.0,
        ..params
    };
    assert!(matches!(
        VbFilter::new(bad_rate, 10, &mut Unlimited),
        Err(CreateError::Shape(_))
    ));
    assert!(matches!(
        VbFilter::new(params, 100, &mut Budget::new(8, u64::MAX)),
        Err(CreateError::Limit(_))
    ));
}
