//! The one place command arguments are parsed: typed results, and one error reply per failure.

use rustbloom_core::partition::{Partition, MAX_PARTITIONS};
use rustbloom_core::scalable::MAX_EXPANSION;
use rustbloom_core::scalable::{is_tightening_ratio, MAX_CAPACITY, MAX_LAYERS};
use rustbloom_core::sizing::Layout;
use rustbloom_core::window::{MAX_WINDOW_MS, MIN_WINDOW_MS};
use rustbloom_core::{Growth, LayerSize};

use super::errors::{
    core_error, duplicate_option, CommandError, BAD_CAPACITY, BAD_ERROR_RATE, BAD_EXPANSION,
    BAD_INFO_FIELD, BAD_ITERATOR, BAD_LAYER_INDEX, BAD_PARTITION, BAD_SEED, BAD_SHAPE,
    BAD_TIGHTENING, BAD_TIMESTAMP, BAD_WINDOW, CAPACITY_RANGE, ERROR_RATE_RANGE, EXPANSION_RANGE,
    EXPANSION_TOO_SMALL, INSERT_BAD_ARGUMENT, INSERT_BAD_CAPACITY, INSERT_BAD_ERROR_RATE,
    INSERT_BAD_EXPANSION, NONSCALING_EXPANSION, NONSCALING_VALIDATE_SCALE_TO, NO_EXPANSION,
    PARTITIONS_RANGE, PARTITION_AND_PARTITIONS, TIGHTENING_RANGE, UNKNOWN_ARGUMENT,
    VALKEY_SEED_OPTIONS, WINDOW_EXPANSION, WINDOW_RANGE, WINDOW_TIGHTENING,
};
use super::ffi::Command;

/// Creation parameters a command gave explicitly; the rest come from the configured defaults.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CreateOptions {
    pub error_rate: Option<f64>,
    pub capacity: Option<u64>,
    pub growth: Option<Growth>,
    pub seed: Option<u64>,
    /// The exact shape of the first layer, or of a window's slots (BF.RESERVE ... SHAPE, as a
    /// primary replicates a creation); None to size it here.
    pub shape: Option<LayerSize>,
    /// A sliding window in milliseconds: a window filter instead of a scalable one.
    pub window_ms: Option<u64>,
    /// `TIGHTENING r`: each new layer's error rate over the previous one's.
    pub tightening: Option<f64>,
    /// `SEED` of exactly 32 bytes, valkey-bloom's form: a valkey-bloom filter with that seed
    /// (what a valkey-bloom primary replicates and writes to its AOF for every creation).
    pub valkey_seed: Option<[u8; 32]>,
    /// `VALIDATESCALETO n`: refuse to create a filter that could not reach n items.
    pub scale_to: Option<u64>,
}

/// What BF.RESERVE creates besides a plain filter.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PartitionRole {
    /// `PARTITION i P routing_seed`: a filter that is one partition of a partitioned filter.
    Partition(Partition),
    /// `PARTITIONS P routing_seed`: the descriptor of a partitioned filter.
    Descriptor { partitions: u32, routing_seed: u64 },
}

/// BF.INSERT's options and where its items start.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct InsertArgs {
    pub create: CreateOptions,
    pub nocreate: bool,
    pub first_item: usize,
}

/// A BF.INFO field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InfoField {
    Capacity,
    Size,
    Filters,
    Items,
    Expansion,
    /// valkey-bloom's: the error rate the filter was created for.
    Error,
    /// valkey-bloom's: each new layer's error rate over the previous one's.
    Tightening,
    /// valkey-bloom's: the capacity the filter can reach under its limits.
    MaxScaledCapacity,
}

fn text(bytes: &[u8]) -> Option<&str> {
    std::str::from_utf8(bytes).ok()
}

/// A finite decimal number; NaN, infinities, overflow to infinity (1e309) and junk are refused.
pub fn parse_f64(bytes: &[u8]) -> Option<f64> {
    text(bytes)?.parse::<f64>().ok().filter(|v| v.is_finite())
}

/// A base-10 signed 64-bit integer with no spaces, no exponent, no hex and, as Redis' own
/// integers, no leading `+`.
pub fn parse_i64(bytes: &[u8]) -> Option<i64> {
    integer_text(bytes)?.parse::<i64>().ok()
}

/// A base-10 unsigned 64-bit integer (no sign).
pub fn parse_u64(bytes: &[u8]) -> Option<u64> {
    integer_text(bytes)?.parse::<u64>().ok()
}

fn integer_text(bytes: &[u8]) -> Option<&str> {
    text(bytes).filter(|t| !t.starts_with('+'))
}

pub fn parse_error_rate(bytes: &[u8]) -> Result<f64, CommandError> {
    let rate = parse_f64(bytes).ok_or(BAD_ERROR_RATE)?;
    if rate > 0.0 && rate < 1.0 {
        Ok(rate)
    } else {
        Err(ERROR_RATE_RANGE)
    }
}

pub fn parse_capacity(bytes: &[u8]) -> Result<u64, CommandError> {
    let capacity = parse_i64(bytes).ok_or(BAD_CAPACITY)?;
    u64::try_from(capacity)
        .ok()
        .filter(|c| (1..=MAX_CAPACITY).contains(c))
        .ok_or(CAPACITY_RANGE)
}

/// An expansion, 1 to [`MAX_EXPANSION`]. Below 1 (0 included, which RedisBloom 2.8 refuses on
/// BF.INSERT as on BF.RESERVE, creating nothing) and for a value that is not an integer, each
/// command's RedisBloom reply; above the cap, both give the range (RedisBloom accepts it and has
/// no reply for the case).
fn parse_growth(bytes: &[u8], insert: bool) -> Result<Growth, CommandError> {
    let (bad, too_small) = if insert {
        (INSERT_BAD_EXPANSION, INSERT_BAD_ARGUMENT)
    } else {
        (BAD_EXPANSION, EXPANSION_TOO_SMALL)
    };
    let expansion = parse_i64(bytes).ok_or(bad)?;
    if expansion < 1 {
        return Err(too_small);
    }
    u32::try_from(expansion)
        .ok()
        .filter(|x| (1..=MAX_EXPANSION).contains(x))
        .map(|expansion| Growth::Scaling { expansion })
        .ok_or(EXPANSION_RANGE)
}

/// BF.INSERT's ERROR: RedisBloom's `Bad error rate` for anything outside (0, 1).
fn parse_insert_error_rate(bytes: &[u8]) -> Result<f64, CommandError> {
    parse_error_rate(bytes).map_err(|_| INSERT_BAD_ERROR_RATE)
}

/// BF.INSERT's CAPACITY: RedisBloom's `Bad capacity` for anything but a positive integer; above
/// the cap, the range (RedisBloom accepts it and has no reply for the case).
fn parse_insert_capacity(bytes: &[u8]) -> Result<u64, CommandError> {
    match parse_i64(bytes) {
        Some(capacity) if capacity >= 1 => parse_capacity(bytes),
        _ => Err(INSERT_BAD_CAPACITY),
    }
}

pub fn parse_seed(bytes: &[u8]) -> Result<u64, CommandError> {
    parse_u64(bytes).ok_or(BAD_SEED)
}

/// A SCANDUMP/LOADCHUNK iterator: a non-negative integer.
pub fn parse_iterator(bytes: &[u8]) -> Result<u64, CommandError> {
    parse_i64(bytes)
        .and_then(|i| u64::try_from(i).ok())
        .ok_or(BAD_ITERATOR)
}

/// Options shared by BF.RESERVE and BF.INSERT, read one at a time.
struct OptionReader<'a> {
    command: &'a Command,
    at: usize,
    options: CreateOptions,
    expansion_given: bool,
    nonscaling_given: bool,
}

impl<'a> OptionReader<'a> {
    fn new(command: &'a Command, at: usize) -> Self {
        OptionReader {
            command,
            at,
            options: CreateOptions::default(),
            expansion_given: false,
            nonscaling_given: false,
        }
    }

    fn value(&mut self) -> Result<&'a [u8], CommandError> {
        if self.at >= self.command.argc() {
            return Err(CommandError::WrongArity);
        }
        self.at += 1;
        Ok(self.command.arg(self.at - 1))
    }

    /// Reads the option at the cursor if it is one of the shared ones; Ok(false) otherwise.
    /// `insert`: the command is BF.INSERT (else BF.RESERVE).
    fn shared_option(&mut self, name: &[u8], insert: bool) -> Result<bool, CommandError> {
        let is = |option: &str| name.eq_ignore_ascii_case(option.as_bytes());
        if is("EXPANSION") {
            once(self.expansion_given, "EXPANSION")?;
            self.expansion_given = true;
            if !insert && self.at >= self.command.argc() {
                return Err(NO_EXPANSION);
            }
            let growth = parse_growth(self.value()?, insert)?;
            self.set_growth(growth, insert)?;
        } else if is("NONSCALING") {
            once(self.nonscaling_given, "NONSCALING")?;
            self.nonscaling_given = true;
            self.set_growth(Growth::NonScaling, insert)?;
        } else if is("SEED") {
            once(
                self.options.seed.is_some() || self.options.valkey_seed.is_some(),
                "SEED",
            )?;
            let seed = self.value()?;
            match <[u8; 32]>::try_from(seed) {
                Ok(valkey_seed) => self.options.valkey_seed = Some(valkey_seed),
                Err(_) => self.options.seed = Some(parse_seed(seed)?),
            }
        } else if is("TIGHTENING") {
            once(self.options.tightening.is_some(), "TIGHTENING")?;
            self.options.tightening = Some(parse_tightening(self.value()?)?);
        } else if is("VALIDATESCALETO") {
            once(self.options.scale_to.is_some(), "VALIDATESCALETO")?;
            let items = self.value()?;
            self.options.scale_to = Some(if insert {
                parse_insert_capacity(items)?
            } else {
                parse_capacity(items)?
            });
        } else if is("WINDOW") {
            once(self.options.window_ms.is_some(), "WINDOW")?;
            self.options.window_ms = Some(parse_window(self.value()?)?);
        } else {
            return Ok(false);
        }
        Ok(true)
    }

    /// EXPANSION beside NONSCALING: BF.RESERVE refuses the pair, BF.INSERT creates a
    /// non-scaling filter (its expansion checked, then unused), both as RedisBloom 2.8 and 8 do;
    /// clients that always send an expansion rely on the second.
    fn set_growth(&mut self, growth: Growth, insert: bool) -> Result<(), CommandError> {
        let growth = match (self.options.growth, growth) {
            (Some(Growth::NonScaling), Growth::Scaling { .. })
            | (Some(Growth::Scaling { .. }), Growth::NonScaling)
                if !insert =>
            {
                return Err(NONSCALING_EXPANSION)
            }
            (Some(Growth::NonScaling), _) => Growth::NonScaling,
            (_, growth) => growth,
        };
        self.options.growth = Some(growth);
        Ok(())
    }
}

/// WINDOW's value: whole milliseconds.
pub fn parse_window(bytes: &[u8]) -> Result<u64, CommandError> {
    let window = parse_i64(bytes).ok_or(BAD_WINDOW)?;
    u64::try_from(window)
        .ok()
        .filter(|w| (MIN_WINDOW_MS..=MAX_WINDOW_MS).contains(w))
        .ok_or(WINDOW_RANGE)
}

/// `TIGHTENING`'s value: a ratio strictly between 0 and 1, with valkey-bloom's replies.
fn parse_tightening(bytes: &[u8]) -> Result<f64, CommandError> {
    let ratio = parse_f64(bytes).ok_or(BAD_TIGHTENING)?;
    if is_tightening_ratio(ratio) {
        Ok(ratio)
    } else {
        Err(TIGHTENING_RANGE)
    }
}

/// The options that exclude each other, whatever their order: a window has no growth options
/// (its SHAPE is its slots' shape); a valkey-bloom SEED makes a filter of that module's kind,
/// which has none of ours; VALIDATESCALETO needs a filter that scales.
fn check_combinations(options: &CreateOptions) -> Result<(), CommandError> {
    if options.window_ms.is_some() {
        if options.growth.is_some() {
            return Err(WINDOW_EXPANSION);
        }
        if options.tightening.is_some() || options.scale_to.is_some() {
            return Err(WINDOW_TIGHTENING);
        }
    }
    if options.valkey_seed.is_some() && (options.window_ms.is_some() || options.shape.is_some()) {
        return Err(VALKEY_SEED_OPTIONS);
    }
    if options.scale_to.is_some() && options.growth == Some(Growth::NonScaling) {
        return Err(NONSCALING_VALIDATE_SCALE_TO);
    }
    Ok(())
}

fn once(already: bool, name: &str) -> Result<(), CommandError> {
    if already {
        Err(duplicate_option(name))
    } else {
        Ok(())
    }
}

/// A layer shape as BF.RESERVE's SHAPE and BF.GROW carry it: bits, hashes, and the layout as its
/// number of cache lines (0 classic), the code headers use. Only
/// its form is checked here; whether it fits the filter is the core's call.
fn parse_shape(bits: &[u8], hashes: &[u8], layout: &[u8]) -> Result<LayerSize, CommandError> {
    let bits = parse_u64(bits).ok_or(BAD_SHAPE)?;
    let num_hashes = parse_u64(hashes)
        .and_then(|k| u32::try_from(k).ok())
        .ok_or(BAD_SHAPE)?;
    let layout = parse_u64(layout)
        .and_then(|code| u32::try_from(code).ok())
        .and_then(Layout::with_lines)
        .ok_or(BAD_SHAPE)?;
    Ok(LayerSize {
        bits,
        num_hashes,
        layout,
    })
}

/// A count of partitions, 1..=4096.
fn parse_partitions(bytes: &[u8]) -> Result<u32, CommandError> {
    parse_u64(bytes)
        .ok_or(BAD_PARTITION)?
        .try_into()
        .ok()
        .filter(|count| (1..=MAX_PARTITIONS).contains(count))
        .ok_or(PARTITIONS_RANGE)
}

/// `BF.RESERVE key error_rate capacity [EXPANSION n] [NONSCALING] [WINDOW ms] [SEED s] [TIGHTENING r] [VALIDATESCALETO n] [SHAPE bits hashes layout] [PARTITION i P routing_seed | PARTITIONS P routing_seed]`
/// (with WINDOW, SHAPE is the shape of every slot)
///
/// With PARTITIONS the capacity is the whole's, N, bounded by what its partitions may hold.
pub fn parse_reserve(
    command: &Command,
) -> Result<(CreateOptions, Option<PartitionRole>), CommandError> {
    if command.argc() < 4 {
        return Err(CommandError::WrongArity);
    }
    let error_rate = parse_error_rate(command.arg(2))?;
    let descriptor = command
        .args_from(4)
        .any(|arg| arg.eq_ignore_ascii_case(b"PARTITIONS"));
    let capacity = if descriptor {
        parse_u64(command.arg(3))
            .filter(|&n| n >= 1)
            .ok_or(CAPACITY_RANGE)?
    } else {
        parse_capacity(command.arg(3))?
    };
    let mut role = None;
    let mut reader = OptionReader::new(command, 4);
    while reader.at < command.argc() {
        let name = reader.value()?;
        if name.eq_ignore_ascii_case(b"PARTITION") {
            if matches!(role, Some(PartitionRole::Descriptor { .. })) {
                return Err(PARTITION_AND_PARTITIONS);
            }
            once(role.is_some(), "PARTITION")?;
            let (index, count, seed) = (reader.value()?, reader.value()?, reader.value()?);
            let count = parse_partitions(count)?;
            let index = parse_u64(index)
                .and_then(|index| u32::try_from(index).ok())
                .ok_or(BAD_PARTITION)?;
            let routing_seed = parse_u64(seed).ok_or(BAD_PARTITION)?;
            let partition = Partition::new(index, count, routing_seed).map_err(core_error)?;
            role = Some(PartitionRole::Partition(partition));
        } else if name.eq_ignore_ascii_case(b"PARTITIONS") {
            if matches!(role, Some(PartitionRole::Partition(_))) {
                return Err(PARTITION_AND_PARTITIONS);
            }
            once(role.is_some(), "PARTITIONS")?;
            let (count, seed) = (reader.value()?, reader.value()?);
            role = Some(PartitionRole::Descriptor {
                partitions: parse_partitions(count)?,
                routing_seed: parse_u64(seed).ok_or(BAD_PARTITION)?,
            });
        } else if name.eq_ignore_ascii_case(b"SHAPE") {
            once(reader.options.shape.is_some(), "SHAPE")?;
            let (bits, hashes, layout) = (reader.value()?, reader.value()?, reader.value()?);
            reader.options.shape = Some(parse_shape(bits, hashes, layout)?);
        } else if !reader.shared_option(name, false)? {
            return Err(UNKNOWN_ARGUMENT);
        }
    }
    if reader.options.valkey_seed.is_some() && role.is_some() {
        return Err(VALKEY_SEED_OPTIONS);
    }
    check_combinations(&reader.options)?;
    let options = CreateOptions {
        error_rate: Some(error_rate),
        capacity: Some(capacity),
        ..reader.options
    };
    Ok((options, role))
}

/// `BF.INSERT key [CAPACITY c] [ERROR e] [EXPANSION n] [NOCREATE] [NONSCALING] [WINDOW ms] [SEED s] [TIGHTENING r] [VALIDATESCALETO n] ITEMS item...`
///
/// valkey-bloom's form with a 32-byte SEED may leave ITEMS out: a valkey-bloom primary
/// replicates each BF.RESERVE so, and its AOF holds it (the filter is created, nothing added).
pub fn parse_insert(command: &Command) -> Result<InsertArgs, CommandError> {
    let mut reader = OptionReader::new(command, 2);
    let mut nocreate = false;
    loop {
        if reader.at == command.argc() && reader.options.valkey_seed.is_some() && !nocreate {
            check_combinations(&reader.options)?;
            return Ok(InsertArgs {
                create: reader.options,
                nocreate,
                first_item: reader.at,
            });
        }
        let name = reader.value()?;
        let is = |option: &str| name.eq_ignore_ascii_case(option.as_bytes());
        if is("ITEMS") {
            break;
        } else if is("CAPACITY") {
            once(reader.options.capacity.is_some(), "CAPACITY")?;
            reader.options.capacity = Some(parse_insert_capacity(reader.value()?)?);
        } else if is("ERROR") {
            once(reader.options.error_rate.is_some(), "ERROR")?;
            reader.options.error_rate = Some(parse_insert_error_rate(reader.value()?)?);
        } else if is("NOCREATE") {
            once(nocreate, "NOCREATE")?;
            nocreate = true;
        } else if !reader.shared_option(name, true)? {
            return Err(UNKNOWN_ARGUMENT);
        }
    }
    if reader.at >= command.argc() {
        return Err(CommandError::WrongArity);
    }
    check_combinations(&reader.options)?;
    Ok(InsertArgs {
        create: reader.options,
        nocreate,
        first_item: reader.at,
    })
}

/// `BF.GROW key index bits hashes layout`: the layer a primary pushed, as it sized it.
pub fn parse_grow(command: &Command) -> Result<(usize, LayerSize), CommandError> {
    if command.argc() != 6 {
        return Err(CommandError::WrongArity);
    }
    let index = parse_u64(command.arg(2))
        .and_then(|index| usize::try_from(index).ok())
        .filter(|&index| index < MAX_LAYERS)
        .ok_or(BAD_LAYER_INDEX)?;
    let shape = parse_shape(command.arg(3), command.arg(4), command.arg(5))?;
    Ok((index, shape))
}

/// `BF.ADDAT key timestamp_ms item [item ...]`: the timestamp (its items start at argument 3).
pub fn parse_addat(command: &Command) -> Result<u64, CommandError> {
    if command.argc() < 4 {
        return Err(CommandError::WrongArity);
    }
    parse_u64(command.arg(2)).ok_or(BAD_TIMESTAMP)
}

/// `BF.INFO key [field]`: None for the whole record.
pub fn parse_info(command: &Command) -> Result<Option<InfoField>, CommandError> {
    match command.argc() {
        2 => Ok(None),
        3 => {
            let name = command.arg(2);
            let is = |option: &str| name.eq_ignore_ascii_case(option.as_bytes());
            let field = if is("CAPACITY") {
                InfoField::Capacity
            } else if is("SIZE") {
                InfoField::Size
            } else if is("FILTERS") {
                InfoField::Filters
            } else if is("ITEMS") {
                InfoField::Items
            } else if is("EXPANSION") {
                InfoField::Expansion
            } else if is("ERROR") {
                InfoField::Error
            } else if is("TIGHTENING") {
                InfoField::Tightening
            } else if is("MAXSCALEDCAPACITY") {
                InfoField::MaxScaledCapacity
            } else {
                return Err(BAD_INFO_FIELD);
            };
            Ok(Some(field))
        }
        _ => Err(CommandError::WrongArity),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_strict() {
        for junk in [
            "", " 1", "1 ", "0x10", "nan", "inf", "-inf", "1e309", "1,5", "abc",
        ] {
            assert_eq!(parse_f64(junk.as_bytes()), None, "{junk:?}");
        }
        assert_eq!(parse_f64(b"0.01"), Some(0.01));
        assert_eq!(parse_f64(b"1e-3"), Some(0.001));
        for junk in [
            "",
            " 5",
            "5 ",
            "0x10",
            "1e6",
            "99999999999999999999",
            "5.0",
            "-",
        ] {
            assert_eq!(parse_i64(junk.as_bytes()), None, "{junk:?}");
        }
        assert_eq!(parse_i64(b"-3"), Some(-3));
    }

    #[test]
    fn ranges_give_their_own_errors() {
        assert_eq!(parse_error_rate(b"0"), Err(ERROR_RATE_RANGE));
        assert_eq!(parse_error_rate(b"1"), Err(ERROR_RATE_RANGE));
        assert_eq!(parse_error_rate(b"x"), Err(BAD_ERROR_RATE));
        assert_eq!(parse_capacity(b"0"), Err(CAPACITY_RANGE));
        assert_eq!(parse_capacity(b"-1"), Err(CAPACITY_RANGE));
        assert_eq!(parse_capacity(b"1073741825"), Err(CAPACITY_RANGE));
        assert_eq!(parse_capacity(b"1073741824"), Ok(MAX_CAPACITY));
        assert_eq!(parse_growth(b"0", false), Err(EXPANSION_TOO_SMALL));
        assert_eq!(parse_growth(b"0", true), Err(INSERT_BAD_ARGUMENT));
        assert_eq!(parse_growth(b"32769", false), Err(EXPANSION_RANGE));
        assert_eq!(parse_growth(b"32769", true), Err(EXPANSION_RANGE));
        assert_eq!(parse_growth(b"-1", false), Err(EXPANSION_TOO_SMALL));
        assert_eq!(parse_growth(b"-1", true), Err(INSERT_BAD_ARGUMENT));
        assert_eq!(parse_growth(b"x", true), Err(INSERT_BAD_EXPANSION));
        assert_eq!(parse_insert_capacity(b"0"), Err(INSERT_BAD_CAPACITY));
        assert_eq!(parse_insert_capacity(b"x"), Err(INSERT_BAD_CAPACITY));
        assert_eq!(parse_insert_capacity(b"1073741825"), Err(CAPACITY_RANGE));
        assert_eq!(parse_insert_error_rate(b"2"), Err(INSERT_BAD_ERROR_RATE));
        assert_eq!(parse_iterator(b"-1"), Err(BAD_ITERATOR));
    }
}
