//! Module settings (`CONFIG GET/SET bf.*`, redis.conf, load-time arguments): the defaults of new
//! filters and the memory limits. Every setter validates; an invalid value is refused, never stored.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Mutex;

use redis_module::configuration::{
    register_enum_configuration, register_i64_configuration, register_string_configuration,
    ConfigurationContext, ConfigurationFlags, ConfigurationValue,
};
use redis_module::{enum_configuration, Context, RedisError, RedisString};

use rustbloom_core::scalable::LimitError;
use rustbloom_core::Growth;

use super::args;

/// `bf.error-rate`: error rate of filters created without one.
pub const DEFAULT_ERROR_RATE: &str = "0.01";
/// `bf.initial-capacity`: capacity of filters created without one.
pub const DEFAULT_CAPACITY: i64 = 100;
/// `bf.expansion`: expansion of filters created without one.
pub const DEFAULT_EXPANSION: i64 = 2;
/// `bf.max-filter-bytes`: the most bytes of bits one filter may hold: enough for ~900M items at
/// 1%. Raise it for bigger filters (a billion items at 1e-9 need about 5.8 GB).
pub const DEFAULT_MAX_FILTER_BYTES: i64 = 1 << 30;
/// The seed of every filter when `bf.seed-mode` is `fixed` and the command names none.
pub const FIXED_SEED: u64 = 0;

enum_configuration! {
    /// `bf.seed-mode`: where the hash seed of a new filter comes from when the command gives none.
    #[allow(non_camel_case_types)]
    pub enum SeedMode {
        /// A fresh random seed per filter: nobody can precompute colliding items.
        random = 1,
        /// FIXED_SEED: the same items give the same bits in every filter of the same shape.
        fixed = 2,
    }
}

pub static ERROR_RATE: ErrorRateSetting = ErrorRateSetting(AtomicU64::new(0));
pub static INITIAL_CAPACITY: AtomicI64 = AtomicI64::new(DEFAULT_CAPACITY);
pub static EXPANSION: AtomicI64 = AtomicI64::new(DEFAULT_EXPANSION);
pub static MAX_FILTER_BYTES: AtomicI64 = AtomicI64::new(DEFAULT_MAX_FILTER_BYTES);
pub static SEED_MODE: Mutex<SeedMode> = Mutex::new(SeedMode::random);

/// The default error rate, stored as the bits of an f64 (0 until the config is registered).
pub struct ErrorRateSetting(AtomicU64);

impl ErrorRateSetting {
    pub fn get(&self) -> f64 {
        match f64::from_bits(self.0.load(Ordering::Relaxed)) {
            rate if rate > 0.0 => rate,
            _ => 0.01,
        }
    }

    /// Validates and stores a textual error rate; returns the reason on refusal.
    pub fn set_text(&self, text: &[u8]) -> Result<(), &'static str> {
        let rate = args::parse_error_rate(text)
            .map_err(|_| "error rate must be a number in the range (0, 1), such as 0.01")?;
        self.0.store(rate.to_bits(), Ordering::Relaxed);
        Ok(())
    }
}

impl ConfigurationValue<RedisString> for ErrorRateSetting {
    fn get(&self, _ctx: &ConfigurationContext) -> RedisString {
        RedisString::create(None, ErrorRateSetting::get(self).to_string().as_str())
    }

    fn set(&self, _ctx: &ConfigurationContext, value: RedisString) -> Result<(), RedisError> {
        self.set_text(value.as_slice()).map_err(RedisError::Str)
    }
}

/// The parameters a command falls back on.
pub struct Defaults {
    pub error_rate: f64,
    pub capacity: u64,
    pub growth: Growth,
    /// None: draw a random seed.
    pub seed: Option<u64>,
}

pub fn defaults() -> Defaults {
    Defaults {
        error_rate: ERROR_RATE.get(),
        capacity: INITIAL_CAPACITY.load(Ordering::Relaxed).max(1) as u64,
        growth: Growth::Scaling {
            expansion: EXPANSION.load(Ordering::Relaxed).clamp(1, 32768) as u32,
        },
        seed: match SEED_MODE.lock().map(|mode| mode.clone()) {
            Ok(SeedMode::fixed) => Some(FIXED_SEED),
            _ => None,
        },
    }
}

/// The per-filter cap on the bytes the allocator hands out for a filter's bits.
pub fn filter_limit() -> u64 {
    MAX_FILTER_BYTES.load(Ordering::Relaxed).max(0) as u64
}

/// The error reply for a limit that refused an allocation: what was hit and how to raise it.
pub fn limit_message(limit: LimitError) -> String {
    match limit {
        LimitError::FilterBytes { needed, limit } => format!(
            "ERR filter would use {needed} bytes, over the per-filter limit of {limit} bytes \
             (raise it with CONFIG SET bf.max-filter-bytes)"
        ),
        LimitError::ServerMemory { needed, available } => format!(
            "ERR filter needs {needed} more bytes but only {available} can be allocated \
             (the least of what maxmemory leaves and the machine's available memory)"
        ),
        LimitError::Allocation { needed } => {
            format!("ERR out of memory: the system refused {needed} bytes for the filter")
        }
    }
}

/// Registers the `bf.*` configs and loads their values from redis.conf. Called once at load.
pub fn register(ctx: &Context) -> Result<(), String> {
    register_string_configuration(
        ctx,
        "error-rate",
        &ERROR_RATE,
        DEFAULT_ERROR_RATE,
        ConfigurationFlags::DEFAULT,
        None,
    );
    let integers: [(&str, &'static AtomicI64, i64, i64, i64, ConfigurationFlags); 3] = [
        (
            "initial-capacity",
            &INITIAL_CAPACITY,
            DEFAULT_CAPACITY,
            1,
            1 << 30,
            ConfigurationFlags::DEFAULT,
        ),
        (
            "expansion",
            &EXPANSION,
            DEFAULT_EXPANSION,
            1,
            32768,
            ConfigurationFlags::DEFAULT,
        ),
        (
            "max-filter-bytes",
            &MAX_FILTER_BYTES,
            DEFAULT_MAX_FILTER_BYTES,
            64,
            i64::MAX,
            ConfigurationFlags::MEMORY,
        ),
    ];
    for (name, variable, default, min, max, flags) in integers {
        register_i64_configuration(ctx, name, variable, default, min, max, flags, None);
    }
    register_enum_configuration(
        ctx,
        "seed-mode",
        &SEED_MODE,
        SeedMode::random,
        ConfigurationFlags::DEFAULT,
        None,
    );
    let load = unsafe { redis_module::raw::RedisModule_LoadConfigs }
        .ok_or("this server cannot load module configs")?;
    if unsafe { load(ctx.get_raw()) } != redis_module::raw::REDISMODULE_OK as i32 {
        return Err("invalid bf.* value in the configuration file".to_string());
    }
    Ok(())
}

/// Applies load-time arguments (`loadmodule librustbloom.so error-rate 0.001 ...`), our config
/// names and RedisBloom's (`ERROR_RATE`, `INITIAL_SIZE`) so existing redis.conf lines keep working.
/// RedisBloom's arguments for its other structures (`CF_MAX_EXPANSIONS`, any `CF_*`) are accepted
/// and ignored, so a redis.conf that loaded RedisBloom loads this module unchanged: the returned
/// lines say so, for the log. Anything else unknown or invalid refuses the load, with the reason.
pub fn apply_module_args(args: &[&[u8]]) -> Result<Vec<String>, String> {
    let mut ignored = Vec::new();
    for pair in args.chunks(2) {
        let name = String::from_utf8_lossy(pair[0]);
        let [_, value] = pair else {
            return Err(format!("module argument {name} has no value"));
        };
        let is = |option: &str| name.eq_ignore_ascii_case(option);
        let integer = |min: i64, max: i64| {
            args::parse_i64(value)
                .filter(|v| (min..=max).contains(v))
                .ok_or(format!("{name} must be an integer in [{min}, {max}]"))
        };
        if is("error-rate") || is("ERROR_RATE") {
            ERROR_RATE
                .set_text(value)
                .map_err(|reason| format!("{name}: {reason}"))?;
        } else if is("initial-capacity") || is("INITIAL_SIZE") {
            INITIAL_CAPACITY.store(integer(1, 1 << 30)?, Ordering::Relaxed);
        } else if is("expansion") {
            EXPANSION.store(integer(1, 32768)?, Ordering::Relaxed);
        } else if is("max-filter-bytes") {
            MAX_FILTER_BYTES.store(integer(64, i64::MAX)?, Ordering::Relaxed);
        } else if is("seed-mode") {
            let mode = match value.to_ascii_lowercase().as_slice() {
                b"random" => SeedMode::random,
                b"fixed" => SeedMode::fixed,
                _ => return Err(format!("{name} must be random or fixed")),
            };
            if let Ok(mut current) = SEED_MODE.lock() {
                *current = mode;
            }
        } else if name.len() > 3 && name[..3].eq_ignore_ascii_case("CF_") {
            ignored.push(format!(
                "rustbloom: ignoring RedisBloom's load-time argument {name} {} (rustbloom has \
                 Bloom filters only, no cuckoo filters)",
                String::from_utf8_lossy(value)
            ));
        } else {
            return Err(format!(
                "unknown module argument {name} (expected error-rate, initial-capacity, \
                 expansion, max-filter-bytes, seed-mode, or RedisBloom's ERROR_RATE and INITIAL_SIZE)"
            ));
        }
    }
    Ok(ignored)
}
