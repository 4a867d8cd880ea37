//! valkey-bloom 1.0's objects, made as valkey-bloom makes them: each filter by the real
//! `bloomfilter` crate (3.0, the version valkey-bloom 1.0 builds with), the object by its add
//! rule (a new filter when the newest is full, capacity × expansion, error rate × tightening
//! per filter, the first filter's seed), and written as valkey-bloom writes it: the `bloomfltr`
//! RDB value (RESTORE payloads) and the BF.LOAD blob of its AOF rewrite.

use bloomfilter::Bloom;

use crate::payload::{module_payload, ModuleField};

/// valkey-bloom's built-in seed (its fixed-seed mode).
pub const FIXED_SEED: [u8; 32] = [
    89, 15, 245, 34, 234, 120, 17, 218, 167, 20, 216, 9, 59, 62, 123, 217, 29, 137, 138, 115, 62,
    152, 136, 135, 48, 127, 151, 205, 40, 7, 51, 131,
];

/// One valkey-bloom object.
pub struct VbObject {
    pub expansion: u32,
    pub fp_rate: f64,
    pub tightening: f64,
    pub seed_random: bool,
    pub seed: [u8; 32],
    /// (filter, items, capacity), oldest first.
    pub filters: Vec<(Bloom<[u8]>, u64, u64)>,
}

impl VbObject {
    /// A new object as BF.RESERVE / BF.INSERT creates one in valkey-bloom 1.0.
    pub fn new(
        capacity: u64,
        fp_rate: f64,
        expansion: u32,
        tightening: f64,
        seed: Option<[u8; 32]>,
    ) -> VbObject {
        let seed_random = seed.is_some();
        let seed = seed.unwrap_or(FIXED_SEED);
        let bloom = Bloom::new_for_fp_rate_with_seed(capacity as usize, fp_rate, &seed)
            .expect("a filter the crate can size");
        VbObject {
            expansion,
            fp_rate,
            tightening,
            seed_random,
            seed,
            filters: vec![(bloom, 0, capacity)],
        }
    }

    /// BF.EXISTS as valkey-bloom answers it.
    pub fn check(&self, item: &[u8]) -> bool {
        self.filters.iter().any(|(bloom, _, _)| bloom.check(item))
    }

    /// BF.ADD as valkey-bloom does it: Some(added), None when a non-scaling object is full.
    pub fn add(&mut self, item: &[u8]) -> Option<bool> {
        if self.check(item) {
            return Some(false);
        }
        let count = self.filters.len();
        let (_, items, capacity) = self.filters.last().expect("a filter");
        if items >= capacity {
            if self.expansion == 0 {
                return None;
            }
            let fp = self.fp_rate * self.tightening.powi(count as i32);
            let capacity = capacity * u64::from(self.expansion);
            let bloom = Bloom::new_for_fp_rate_with_seed(capacity as usize, fp, &self.seed)
                .expect("a filter the crate can size");
            self.filters.push((bloom, 0, capacity));
        }
        let (bloom, items, _) = self.filters.last_mut().expect("a filter");
        bloom.set(item);
        *items += 1;
        Some(true)
    }

    /// Items over all filters (BF.CARD).
    pub fn items(&self) -> u64 {
        self.filters.iter().map(|(_, items, _)| items).sum()
    }

    /// The fields of its `bloomfltr` RDB value (valkey-bloom 1.0's rdb_save).
    pub fn rdb_fields(&self) -> Vec<ModuleField> {
        let mut fields = vec![
            ModuleField::Unsigned(self.filters.len() as u64),
            ModuleField::Unsigned(u64::from(self.expansion)),
            ModuleField::Double(self.fp_rate),
            ModuleField::Double(self.tightening),
            ModuleField::Unsigned(u64::from(self.seed_random)),
        ];
        for (index, (bloom, items, capacity)) in self.filters.iter().enumerate() {
            fields.push(ModuleField::Bytes(bloom.as_slice().to_vec()));
            fields.push(ModuleField::Unsigned(*capacity));
            if index + 1 == self.filters.len() {
                fields.push(ModuleField::Unsigned(*items));
            }
        }
        fields
    }

    /// A RESTORE payload of the object, as valkey-bloom's DUMP writes it, for the server's RDB
    /// `version`.
    pub fn restore_payload(&self, version: [u8; 2]) -> Vec<u8> {
        module_payload("bloomfltr", 1, &self.rdb_fields(), version)
    }

    /// Its BF.LOAD blob (valkey-bloom's encode_object: a version byte, then bincode 1.3's
    /// default layout of the object).
    pub fn load_blob(&self) -> Vec<u8> {
        let mut out = vec![1];
        out.extend_from_slice(&self.expansion.to_le_bytes());
        out.extend_from_slice(&self.fp_rate.to_le_bytes());
        out.extend_from_slice(&self.tightening.to_le_bytes());
        out.push(u8::from(self.seed_random));
        out.extend_from_slice(&(self.filters.len() as u64).to_le_bytes());
        for (bloom, items, capacity) in &self.filters {
            out.extend_from_slice(&(bloom.as_slice().len() as u64).to_le_bytes());
            out.extend_from_slice(bloom.as_slice());
            out.extend_from_slice(&items.to_le_bytes());
            out.extend_from_slice(&capacity.to_le_bytes());
        }
        out
    }
}
