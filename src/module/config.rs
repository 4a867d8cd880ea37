//! Module settings (`CONFIG GET/SET bf.*`, redis.conf, load-time arguments): the defaults of new
//! filters and the memory limits. Every setter validates; an invalid value is refused, never stored.

use std::ffi::CStr;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Mutex;

use redis_module::configuration::{
    register_enum_configuration, register_i64_configuration, ConfigurationContext,
    ConfigurationFlags,
};
use redis_module::{enum_configuration, raw, Context};

use rustbloom_core::scalable::{MAX_CAPACITY, MAX_EXPANSION, TIGHTENING_RATIO};
use rustbloom_core::Growth;

use super::args;
use super::ffi::{ConfigReply, LoadCtx, StringConfig};
use super::personality::{self, PersonalityConfig};

/// `bf.error-rate`: error rate of filters created without one.
pub const DEFAULT_ERROR_RATE: &CStr = c"0.01";
/// `bf.initial-capacity`: capacity of filters created without one.
pub const DEFAULT_CAPACITY: i64 = 100;
/// `bf.expansion`: expansion of filters created without one.
pub const DEFAULT_EXPANSION: i64 = 2;
/// `bf.max-filter-bytes`: the most bytes of bits one filter may hold: enough for ~900M items at
/// 1%. Raise it for bigger filters (a billion items at 1e-9 need about 5.8 GB).
pub const DEFAULT_MAX_FILTER_BYTES: i64 = 1 << 30;
/// `bf.tightening-ratio`: tightening ratio of filters created without one (RedisBloom's ½).
pub const DEFAULT_TIGHTENING: &CStr = c"0.5";
/// The seed of every filter when `bf.seed-mode` is `fixed` and the command names none.
pub const FIXED_SEED: u64 = 0;

/// The values an integer setting accepts, inclusive: the same through CONFIG SET, redis.conf,
/// RedisBloom's config names and load-time arguments.
type Bounds = (i64, i64);
/// `bf.initial-capacity`: up to the core's largest first layer.
const CAPACITY_BOUNDS: Bounds = (1, MAX_CAPACITY as i64);
/// `bf.expansion`: up to the largest expansion a filter may have.
const EXPANSION_BOUNDS: Bounds = (1, MAX_EXPANSION as i64);
/// `bf.max-filter-bytes`: at least one word.
const FILTER_BYTES_BOUNDS: Bounds = (64, i64::MAX);

/// `text` as an integer within `bounds`, or why not, naming the setting as `what`.
fn integer_setting(text: &[u8], what: &str, (min, max): Bounds) -> Result<i64, String> {
    args::parse_i64(text)
        .filter(|v| (min..=max).contains(v))
        .ok_or_else(|| format!("{what} must be an integer in [{min}, {max}]"))
}

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

pub static ERROR_RATE: RatioSetting = RatioSetting::new(
    0.01,
    "error rate must be a number in the range (0, 1), such as 0.01",
);
pub static TIGHTENING: RatioSetting = RatioSetting::new(
    TIGHTENING_RATIO,
    "tightening ratio must be a number in the range (0, 1), such as 0.5",
);
pub static INITIAL_CAPACITY: AtomicI64 = AtomicI64::new(DEFAULT_CAPACITY);
pub static EXPANSION: AtomicI64 = AtomicI64::new(DEFAULT_EXPANSION);
pub static MAX_FILTER_BYTES: AtomicI64 = AtomicI64::new(DEFAULT_MAX_FILTER_BYTES);
pub static SEED_MODE: Mutex<SeedMode> = Mutex::new(SeedMode::random);
/// Filters created without an expansion do not scale: RedisBloom's `bf-expansion-factor 0`.
/// Setting `bf.expansion` clears it.
pub static NONSCALING_DEFAULT: AtomicBool = AtomicBool::new(false);

/// A default ratio strictly between 0 and 1 (the error rate, the tightening ratio), stored as
/// the bits of an f64: 0, read as `fallback`, until the config is registered.
pub struct RatioSetting {
    bits: AtomicU64,
    fallback: f64,
    /// Why a value is refused.
    reason: &'static str,
}

impl RatioSetting {
    const fn new(fallback: f64, reason: &'static str) -> RatioSetting {
        RatioSetting {
            bits: AtomicU64::new(0),
            fallback,
            reason,
        }
    }

    pub fn get(&self) -> f64 {
        match f64::from_bits(self.bits.load(Ordering::Relaxed)) {
            ratio if ratio > 0.0 && ratio < 1.0 => ratio,
            _ => self.fallback,
        }
    }

    fn set(&self, ratio: f64) {
        self.bits.store(ratio.to_bits(), Ordering::Relaxed);
    }

    /// Validates and stores a textual ratio; returns the reason on refusal.
    pub fn set_text(&self, text: &[u8]) -> Result<(), &'static str> {
        let ratio = args::parse_f64(text)
            .filter(|&ratio| ratio > 0.0 && ratio < 1.0)
            .ok_or(self.reason)?;
        self.set(ratio);
        Ok(())
    }
}

/// The string `bf.error-rate`'s getter handed out last (see [`ConfigReply`]).
static ERROR_RATE_REPLY: ConfigReply = ConfigReply::new();

/// `bf.error-rate`, registered by hand (see [`register`]).
struct ErrorRateConfig;

impl StringConfig for ErrorRateConfig {
    const GET: &'static str = "CONFIG GET bf.error-rate";
    const SET: &'static str = "CONFIG SET bf.error-rate";

    fn get(_privdata: usize) -> *mut raw::RedisModuleString {
        ERROR_RATE_REPLY.hand_out(&ERROR_RATE.get().to_string())
    }

    fn set(_privdata: usize, text: &[u8]) -> Result<(), String> {
        ERROR_RATE.set_text(text).map_err(String::from)
    }
}

/// The string `bf.tightening-ratio`'s getter handed out last (see [`ConfigReply`]).
static TIGHTENING_REPLY: ConfigReply = ConfigReply::new();

/// `bf.tightening-ratio`, registered by hand as `bf.error-rate` is.
struct TighteningConfig;

impl StringConfig for TighteningConfig {
    const GET: &'static str = "CONFIG GET bf.tightening-ratio";
    const SET: &'static str = "CONFIG SET bf.tightening-ratio";

    fn get(_privdata: usize) -> *mut raw::RedisModuleString {
        TIGHTENING_REPLY.hand_out(&TIGHTENING.get().to_string())
    }

    fn set(_privdata: usize, text: &[u8]) -> Result<(), String> {
        TIGHTENING.set_text(text).map_err(String::from)
    }
}

/// The parameters a command falls back on.
pub struct Defaults {
    pub error_rate: f64,
    pub capacity: u64,
    pub growth: Growth,
    /// None: draw a random seed (Some in `bf.seed-mode fixed`).
    pub seed: Option<u64>,
    pub tightening: f64,
}

pub fn defaults() -> Defaults {
    Defaults {
        error_rate: ERROR_RATE.get(),
        capacity: INITIAL_CAPACITY.load(Ordering::Relaxed).max(1) as u64,
        growth: if NONSCALING_DEFAULT.load(Ordering::Relaxed) {
            Growth::NonScaling
        } else {
            Growth::Scaling {
                expansion: EXPANSION
                    .load(Ordering::Relaxed)
                    .clamp(EXPANSION_BOUNDS.0, EXPANSION_BOUNDS.1)
                    as u32,
            }
        },
        seed: match SEED_MODE.lock().map(|mode| mode.clone()) {
            Ok(SeedMode::fixed) => Some(FIXED_SEED),
            _ => None,
        },
        tightening: TIGHTENING.get(),
    }
}

/// `bf.bloom-defrag-enabled` (valkey-bloom's name): whether the defrag callback moves blocks.
static DEFRAG_ENABLED: AtomicBool = AtomicBool::new(true);

/// True unless `bf.bloom-defrag-enabled` is `no`.
pub fn defrag_enabled() -> bool {
    DEFRAG_ENABLED.load(Ordering::Relaxed)
}

/// The per-filter cap on the bytes the allocator hands out for a filter's bits.
pub fn filter_limit() -> u64 {
    MAX_FILTER_BYTES.load(Ordering::Relaxed).max(0) as u64
}

type OnChanged = Box<dyn Fn(&ConfigurationContext, &str, &'static AtomicI64)>;
/// Name, variable, default, min, max, flags and what to do on a change.
type IntegerConfig = (
    &'static str,
    &'static AtomicI64,
    i64,
    i64,
    i64,
    ConfigurationFlags,
    Option<OnChanged>,
);

/// Registers the `bf.*` configs (and RedisBloom's names for three of them, where the server
/// allows) and loads their values from redis.conf. Called once at load; Ok holds lines for the log.
pub fn register(ctx: &Context, load: &LoadCtx) -> Result<Vec<String>, String> {
    // Registered by hand, not through redis-module's string configs: their getter hands Redis a
    // new string at every CONFIG GET that nobody frees.
    load.register_string_config::<ErrorRateConfig>(
        c"error-rate",
        DEFAULT_ERROR_RATE,
        ConfigurationFlags::DEFAULT.bits(),
        0,
    )
    .map_err(|()| "the server refused the config bf.error-rate".to_string())?;
    load.register_string_config::<TighteningConfig>(
        c"tightening-ratio",
        DEFAULT_TIGHTENING,
        ConfigurationFlags::DEFAULT.bits(),
        0,
    )
    .map_err(|()| "the server refused the config bf.tightening-ratio".to_string())?;
    let scaling_again: OnChanged =
        Box::new(|_, _, _| NONSCALING_DEFAULT.store(false, Ordering::Relaxed));
    let capacity = if personality::is_valkey_bloom() {
        personality::VALKEY_BLOOM_CAPACITY
    } else {
        DEFAULT_CAPACITY
    };
    INITIAL_CAPACITY.store(capacity, Ordering::Relaxed);
    load.register_string_config::<PersonalityConfig>(
        c"personality",
        personality::current_name(),
        raw::REDISMODULE_CONFIG_IMMUTABLE,
        0,
    )
    .map_err(|()| "the server refused the config bf.personality".to_string())?;
    let integers: [IntegerConfig; 3] = [
        (
            "initial-capacity",
            &INITIAL_CAPACITY,
            capacity,
            CAPACITY_BOUNDS.0,
            CAPACITY_BOUNDS.1,
            ConfigurationFlags::DEFAULT,
            None,
        ),
        (
            "expansion",
            &EXPANSION,
            DEFAULT_EXPANSION,
            EXPANSION_BOUNDS.0,
            EXPANSION_BOUNDS.1,
            ConfigurationFlags::DEFAULT,
            Some(scaling_again),
        ),
        (
            "max-filter-bytes",
            &MAX_FILTER_BYTES,
            DEFAULT_MAX_FILTER_BYTES,
            FILTER_BYTES_BOUNDS.0,
            FILTER_BYTES_BOUNDS.1,
            ConfigurationFlags::MEMORY,
            None,
        ),
    ];
    for (name, variable, default, min, max, flags, on_changed) in integers {
        register_i64_configuration(ctx, name, variable, default, min, max, flags, on_changed);
    }
    register_enum_configuration(
        ctx,
        "seed-mode",
        &SEED_MODE,
        SeedMode::random,
        ConfigurationFlags::DEFAULT,
        None,
    );
    register_valkey_bloom_names(load)?;
    LOADING_CONFIGS.store(true, Ordering::Relaxed);
    let notes = vec![register_redisbloom_names(load)];
    let loaded = load.load_configs();
    LOADING_CONFIGS.store(false, Ordering::Relaxed);
    loaded?;
    Ok(notes)
}

/// Other modules' names for our configs: RedisBloom's three, as Redis 8 (whose bundled
/// RedisBloom has them) registers them, without the module-name prefix; and valkey-bloom's
/// five whose meaning is ours, under our prefix as valkey-bloom's (both modules are named `bf`),
/// so that a valkey.conf written for valkey-bloom loads unchanged. All string-valued.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Alias {
    /// `bf-error-rate` = `bf.error-rate`; like RedisBloom, a rate above 0.25 is taken as 0.25.
    ErrorRate,
    /// `bf-initial-size` = `bf.initial-capacity`.
    InitialSize,
    /// `bf-expansion-factor` = `bf.expansion`, and 0: filters created without an expansion do not
    /// scale (RedisBloom's meaning).
    ExpansionFactor,
    /// valkey-bloom's `bf.bloom-capacity` = `bf.initial-capacity`.
    BloomCapacity,
    /// valkey-bloom's `bf.bloom-expansion` = `bf.expansion`.
    BloomExpansion,
    /// valkey-bloom's `bf.bloom-fp-rate` = `bf.error-rate` (no RedisBloom cap at 0.25).
    BloomFpRate,
    /// valkey-bloom's `bf.bloom-memory-usage-limit` = `bf.max-filter-bytes`: both cap what one
    /// filter may take (valkey-bloom counts its structs too, we count the bits' allocation).
    BloomMemoryUsageLimit,
    /// valkey-bloom's `bf.bloom-use-random-seed` yes/no = `bf.seed-mode` random/fixed.
    BloomUseRandomSeed,
    /// valkey-bloom's `bf.bloom-tightening-ratio` = `bf.tightening-ratio`.
    BloomTighteningRatio,
    /// valkey-bloom's `bf.bloom-defrag-enabled` yes/no: whether the type's defrag callback moves
    /// anything (no: every value is left where it is, as if active defrag skipped our keys).
    BloomDefragEnabled,
}

const ALIASES: [(Alias, &CStr, &str); 3] = [
    (Alias::ErrorRate, c"bf-error-rate", "bf.error-rate"),
    (
        Alias::InitialSize,
        c"bf-initial-size",
        "bf.initial-capacity",
    ),
    (
        Alias::ExpansionFactor,
        c"bf-expansion-factor",
        "bf.expansion",
    ),
];

/// valkey-bloom's names (their meaning is the same as ours, within our ranges; a tightening
/// ratio r gives our filters' layers ε·(1 − r)·r^i, valkey-bloom's ε·r^i, see
/// [`rustbloom_core::FilterParams::layer_error_rate`]; its defrag switch has no other name
/// here).
const VALKEY_BLOOM_ALIASES: [(Alias, &CStr, &str); 7] = [
    (
        Alias::BloomCapacity,
        c"bloom-capacity",
        "bf.initial-capacity",
    ),
    (Alias::BloomExpansion, c"bloom-expansion", "bf.expansion"),
    (Alias::BloomFpRate, c"bloom-fp-rate", "bf.error-rate"),
    (
        Alias::BloomMemoryUsageLimit,
        c"bloom-memory-usage-limit",
        "bf.max-filter-bytes",
    ),
    (
        Alias::BloomUseRandomSeed,
        c"bloom-use-random-seed",
        "bf.seed-mode",
    ),
    (
        Alias::BloomTighteningRatio,
        c"bloom-tightening-ratio",
        "bf.tightening-ratio",
    ),
    (
        Alias::BloomDefragEnabled,
        c"bloom-defrag-enabled",
        "bf.bloom-defrag-enabled",
    ),
];

/// The largest error rate RedisBloom's `bf-error-rate` keeps; above, it stores this.
const REDISBLOOM_MAX_DEFAULT_ERROR_RATE: f64 = 0.25;

/// True while `register` loads the configs: the server then sets every config that the
/// configuration file does not name to its registered default. The aliases are registered with
/// an empty default, which means "leave the value alone" then (and is refused afterwards), so
/// an alias that the file does not name never undoes the value its `bf.*` twin got.
static LOADING_CONFIGS: AtomicBool = AtomicBool::new(false);

impl Alias {
    fn set(self, text: &[u8]) -> Result<(), String> {
        if text.is_empty() {
            return if LOADING_CONFIGS.load(Ordering::Relaxed) {
                Ok(())
            } else {
                Err("a value is required".to_string())
            };
        }
        match self {
            Alias::BloomCapacity => {
                let size = integer_setting(text, "bloom capacity", CAPACITY_BOUNDS)?;
                INITIAL_CAPACITY.store(size, Ordering::Relaxed);
            }
            Alias::BloomExpansion => {
                let expansion = integer_setting(text, "bloom expansion", EXPANSION_BOUNDS)?;
                EXPANSION.store(expansion, Ordering::Relaxed);
                NONSCALING_DEFAULT.store(false, Ordering::Relaxed);
            }
            Alias::BloomFpRate => ERROR_RATE.set_text(text)?,
            Alias::BloomTighteningRatio => TIGHTENING.set_text(text)?,
            Alias::BloomMemoryUsageLimit => {
                let limit = integer_setting(text, "bloom memory usage limit", FILTER_BYTES_BOUNDS)?;
                MAX_FILTER_BYTES.store(limit, Ordering::Relaxed);
            }
            Alias::BloomDefragEnabled => {
                let enabled = match text.to_ascii_lowercase().as_slice() {
                    b"yes" => true,
                    b"no" => false,
                    _ => return Err("bloom defrag enabled must be yes or no".to_string()),
                };
                DEFRAG_ENABLED.store(enabled, Ordering::Relaxed);
            }
            Alias::BloomUseRandomSeed => {
                let mode = match text.to_ascii_lowercase().as_slice() {
                    b"yes" => SeedMode::random,
                    b"no" => SeedMode::fixed,
                    _ => return Err("bloom use random seed must be yes or no".to_string()),
                };
                if let Ok(mut current) = SEED_MODE.lock() {
                    *current = mode;
                }
            }
            Alias::ErrorRate => {
                let rate = args::parse_error_rate(text)
                    .map_err(|_| "error rate must be a number in the range (0, 1), such as 0.01")?;
                ERROR_RATE.set(rate.min(REDISBLOOM_MAX_DEFAULT_ERROR_RATE));
            }
            Alias::InitialSize => {
                let size = integer_setting(text, "initial size", CAPACITY_BOUNDS)?;
                INITIAL_CAPACITY.store(size, Ordering::Relaxed);
            }
            Alias::ExpansionFactor => {
                // 0 is RedisBloom's "non-scaling".
                let factor = integer_setting(text, "expansion factor", (0, EXPANSION_BOUNDS.1))
                    .map_err(|reason| reason + " (0: non-scaling)")?;
                if factor > 0 {
                    EXPANSION.store(factor, Ordering::Relaxed);
                }
                NONSCALING_DEFAULT.store(factor == 0, Ordering::Relaxed);
            }
        }
        Ok(())
    }

    fn value(self) -> String {
        match self {
            Alias::ErrorRate => ERROR_RATE.get().to_string(),
            Alias::InitialSize => INITIAL_CAPACITY.load(Ordering::Relaxed).to_string(),
            Alias::ExpansionFactor if NONSCALING_DEFAULT.load(Ordering::Relaxed) => "0".to_string(),
            Alias::ExpansionFactor | Alias::BloomExpansion => {
                EXPANSION.load(Ordering::Relaxed).to_string()
            }
            Alias::BloomCapacity => INITIAL_CAPACITY.load(Ordering::Relaxed).to_string(),
            Alias::BloomFpRate => ERROR_RATE.get().to_string(),
            Alias::BloomTighteningRatio => TIGHTENING.get().to_string(),
            Alias::BloomMemoryUsageLimit => MAX_FILTER_BYTES.load(Ordering::Relaxed).to_string(),
            Alias::BloomDefragEnabled => match defrag_enabled() {
                true => "yes".to_string(),
                false => "no".to_string(),
            },
            Alias::BloomUseRandomSeed => match SEED_MODE.lock().map(|mode| mode.clone()) {
                Ok(SeedMode::fixed) => "no".to_string(),
                _ => "yes".to_string(),
            },
        }
    }

    fn from_privdata(privdata: usize) -> Option<Alias> {
        ALIASES
            .iter()
            .chain(&VALKEY_BLOOM_ALIASES)
            .map(|&(alias, _, _)| alias)
            .find(|&alias| alias as usize == privdata)
    }
}

/// The strings the alias getters last handed to the server, one per alias (see [`ConfigReply`]).
static ALIAS_REPLIES: [ConfigReply; 10] = [
    ConfigReply::new(),
    ConfigReply::new(),
    ConfigReply::new(),
    ConfigReply::new(),
    ConfigReply::new(),
    ConfigReply::new(),
    ConfigReply::new(),
    ConfigReply::new(),
    ConfigReply::new(),
    ConfigReply::new(),
];

/// RedisBloom's config names, each registered with its [`Alias`] as privdata.
struct AliasConfig;

impl StringConfig for AliasConfig {
    const GET: &'static str = "CONFIG GET of an alias";
    const SET: &'static str = "CONFIG SET of an alias";

    fn get(privdata: usize) -> *mut raw::RedisModuleString {
        match Alias::from_privdata(privdata) {
            Some(alias) => ALIAS_REPLIES[alias as usize].hand_out(&alias.value()),
            None => std::ptr::null_mut(),
        }
    }

    fn set(privdata: usize, text: &[u8]) -> Result<(), String> {
        match Alias::from_privdata(privdata) {
            Some(alias) => alias.set(text),
            None => Err("unknown config".to_string()),
        }
    }
}

/// Registers RedisBloom's config names where the server lets a module register a name without
/// its prefix (Redis 8; not Redis 7 nor Valkey 9.1, which would refuse the flag with a warning in
/// their log: they are told apart by an API that arrived in Redis 8 with the flag). Never fails
/// the load: the returned line says what was done, for the log.
fn register_redisbloom_names(load: &LoadCtx) -> String {
    let names = "bf-error-rate, bf-initial-size and bf-expansion-factor";
    if !load.has_unprefixed_configs() {
        return format!(
            "rustbloom: this server does not let modules register unprefixed configs, so \
             RedisBloom's config names ({names}) are not available: use bf.error-rate, \
             bf.initial-capacity and bf.expansion"
        );
    };
    for (alias, name, ours) in ALIASES {
        let registered = load.register_string_config::<AliasConfig>(
            name,
            c"",
            raw::REDISMODULE_CONFIG_UNPREFIXED,
            alias as usize,
        );
        if registered.is_err() {
            return format!(
                "rustbloom: the server refused RedisBloom's config name {} (is another module \
                 using it?), so it is not available: use {ours}",
                name.to_string_lossy()
            );
        }
    }
    format!(
        "rustbloom: RedisBloom's config names {names} are aliases of bf.error-rate, \
         bf.initial-capacity and bf.expansion"
    )
}

/// Registers valkey-bloom's config names (under our prefix, which every server with module
/// configs allows); Err when the server refuses one.
fn register_valkey_bloom_names(load: &LoadCtx) -> Result<(), String> {
    for (alias, name, _) in VALKEY_BLOOM_ALIASES {
        load.register_string_config::<AliasConfig>(
            name,
            c"",
            ConfigurationFlags::DEFAULT.bits(),
            alias as usize,
        )
        .map_err(|()| {
            format!(
                "the server refused the config bf.{} (valkey-bloom's name)",
                name.to_string_lossy()
            )
        })?;
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
        let integer = |bounds| integer_setting(value, &name, bounds);
        if is("error-rate") || is("ERROR_RATE") {
            ERROR_RATE
                .set_text(value)
                .map_err(|reason| format!("{name}: {reason}"))?;
        } else if is("tightening-ratio") {
            TIGHTENING
                .set_text(value)
                .map_err(|reason| format!("{name}: {reason}"))?;
        } else if is("initial-capacity") || is("INITIAL_SIZE") {
            INITIAL_CAPACITY.store(integer(CAPACITY_BOUNDS)?, Ordering::Relaxed);
        } else if is("expansion") {
            EXPANSION.store(integer(EXPANSION_BOUNDS)?, Ordering::Relaxed);
            NONSCALING_DEFAULT.store(false, Ordering::Relaxed);
        } else if is("max-filter-bytes") {
            MAX_FILTER_BYTES.store(integer(FILTER_BYTES_BOUNDS)?, Ordering::Relaxed);
        } else if is("seed-mode") {
            let mode = match value.to_ascii_lowercase().as_slice() {
                b"random" => SeedMode::random,
                b"fixed" => SeedMode::fixed,
                _ => return Err(format!("{name} must be random or fixed")),
            };
            if let Ok(mut current) = SEED_MODE.lock() {
                *current = mode;
            }
        } else if is(personality::NAME) {
            // Read before anything was registered (personality::choose).
        } else if name.len() > 3 && name[..3].eq_ignore_ascii_case("CF_") {
            ignored.push(format!(
                "rustbloom: ignoring RedisBloom's load-time argument {name} {} (rustbloom has \
                 Bloom filters only, no cuckoo filters)",
                String::from_utf8_lossy(value)
            ));
        } else {
            return Err(format!(
                "unknown module argument {name} (expected error-rate, initial-capacity, \
                 expansion, max-filter-bytes, seed-mode, tightening-ratio, personality, or \
                 RedisBloom's ERROR_RATE and INITIAL_SIZE)"
            ));
        }
    }
    Ok(ignored)
}
