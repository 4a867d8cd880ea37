//! What a filter tells about itself: BF.INFO and BF.DEBUG.

use rustbloom_core::Filter;

use crate::module::args::{self, InfoField};
use crate::module::config;
use crate::module::errors::{CommandError, CommandResult, NOT_FOUND};
use crate::module::ffi::Command;
use crate::module::partition;
use crate::module::personality;

use super::ready;

/// One BF.INFO value.
enum InfoValue {
    Count(u64),
    Integer(i64),
    Double(f64),
    Text(String),
    Null,
}

/// The name BF.INFO gives a field.
fn info_name(field: InfoField) -> &'static str {
    match field {
        InfoField::Capacity => "Capacity",
        InfoField::Size => "Size",
        InfoField::Filters => "Number of filters",
        InfoField::Items => "Number of items inserted",
        InfoField::Expansion => "Expansion rate",
        InfoField::Error => "Error rate",
        InfoField::Tightening => "Tightening ratio",
        InfoField::MaxScaledCapacity => "Max scaled capacity",
    }
}

/// `BF.INFO key [CAPACITY | SIZE | FILTERS | ITEMS | EXPANSION | ERROR | TIGHTENING |
/// MAXSCALEDCAPACITY]`: RedisBloom's five fields, in its order; a window filter adds its own
/// after them, so that clients that read the five keep working, and so does a valkey-bloom
/// object valkey-bloom's three (which any filter answers when asked for one: the last is
/// reckoned under bf.max-filter-bytes, our limit where valkey-bloom has its memory limit). One
/// field: a one-element array in RESP2 and, as RedisBloom 2.6 and later, a one-entry map in
/// RESP3; under the valkey-bloom personality the value alone, as valkey-bloom answers.
pub fn info(command: &Command) -> CommandResult {
    let field = args::parse_info(command)?;
    let key = command.open_key(false);
    if partition::info_descriptor(command, &key, field.is_some())? {
        return Ok(());
    }
    let identity = partition::of_key(&key)?;
    let filter = ready(&key)?.ok_or(NOT_FOUND)?;
    let now_ms = command.now_ms();
    let value = |field: InfoField| match field {
        InfoField::Capacity => InfoValue::Count(filter.capacity()),
        InfoField::Size => InfoValue::Count(filter.info_size()),
        InfoField::Filters => InfoValue::Count(filter.layer_count()),
        InfoField::Items => InfoValue::Count(filter.items(now_ms)),
        InfoField::Expansion => match filter.expansion() {
            Some(expansion) => InfoValue::Integer(i64::from(expansion)),
            None => InfoValue::Null,
        },
        InfoField::Error => InfoValue::Double(filter.error_rate()),
        InfoField::Tightening => filter
            .tightening()
            .map_or(InfoValue::Null, InfoValue::Double),
        InfoField::MaxScaledCapacity => {
            InfoValue::Count(filter.max_scaled_capacity(config::filter_limit()))
        }
    };
    let reply_value = |value: InfoValue| match value {
        InfoValue::Count(count) => command.reply_count(count),
        InfoValue::Integer(integer) => command.reply_integer(integer),
        InfoValue::Double(double) => command.reply_double(double),
        InfoValue::Text(text) => command.reply_bulk(text.as_bytes()),
        InfoValue::Null => command.reply_null(),
    };
    if let Some(field) = field {
        let answer = value(field);
        if personality::is_valkey_bloom() {
            // valkey-bloom answers one field with the value alone.
        } else if command.is_resp3() {
            command.reply_map(1);
            command.reply_simple(info_name(field));
        } else {
            command.reply_array(1);
        }
        reply_value(answer);
        return Ok(());
    }
    let mut fields: Vec<(&str, InfoValue)> = [
        InfoField::Capacity,
        InfoField::Size,
        InfoField::Filters,
        InfoField::Items,
        InfoField::Expansion,
    ]
    .into_iter()
    .map(|field| (info_name(field), value(field)))
    .collect();
    if let Filter::Window(window) = filter {
        let shape = window.shape();
        let params = window.params();
        fields.extend([
            ("Window (ms)", InfoValue::Count(params.window_ms)),
            ("Generation (ms)", InfoValue::Count(shape.generation_ms)),
            ("Last write (ms)", InfoValue::Count(window.last_ms())),
            ("Error rate", InfoValue::Double(params.error_rate)),
        ]);
    }
    if let Filter::ValkeyBloom(_) = filter {
        fields.extend(
            [
                InfoField::Error,
                InfoField::Tightening,
                InfoField::MaxScaledCapacity,
            ]
            .into_iter()
            .map(|field| (info_name(field), value(field))),
        );
    }
    if let Some(partition) = identity {
        fields.extend([
            ("Partition", InfoValue::Count(u64::from(partition.index()))),
            ("Partitions", InfoValue::Count(u64::from(partition.count()))),
            (
                "Routing seed",
                InfoValue::Text(partition.routing_seed().to_string()),
            ),
        ]);
    }
    command.reply_map(fields.len());
    for (name, answer) in fields {
        command.reply_simple(name);
        reply_value(answer);
    }
    Ok(())
}

/// `BF.DEBUG key`: RedisBloom's report of a filter, one bulk string per line: `size:<items>`,
/// then one line per layer (per link of a migrated filter, per slot of a window filter, oldest
/// slot of the ring first) `bytes:B bits:b hashes:k hashwidth:w capacity:c size:n ratio:ε`, the
/// ratio formatted as C's `%g`.
pub fn debug(command: &Command) -> CommandResult {
    if command.argc() != 2 {
        return Err(CommandError::WrongArity);
    }
    let key = command.open_key(false);
    let filter = ready(&key)?.ok_or(NOT_FOUND)?;
    let layers = filter.layer_reports();
    command.reply_array(1 + layers.len());
    command.reply_bulk(format!("size:{}", filter.items(command.now_ms())).as_bytes());
    for layer in layers {
        let line = format!(
            "bytes:{} bits:{} hashes:{} hashwidth:{} capacity:{} size:{} ratio:{}",
            layer.bytes,
            layer.bits,
            layer.hashes,
            layer.hash_width,
            layer.capacity,
            layer.items,
            format_g(layer.error_rate)
        );
        command.reply_bulk(line.as_bytes());
    }
    Ok(())
}

/// `value` as C's `printf("%g")` writes it (RedisBloom's BF.DEBUG ratios): six significant
/// digits, trailing zeros removed, in exponent form below 1e-4 or from 1e6 up.
fn format_g(value: f64) -> String {
    if value == 0.0 || !value.is_finite() {
        return value.to_string();
    }
    let scientific = format!("{value:.5e}");
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let trim = |digits: &str| -> String {
        if digits.contains('.') {
            digits
                .trim_end_matches('0')
                .trim_end_matches('.')
                .to_string()
        } else {
            digits.to_string()
        }
    };
    if (-4..6).contains(&exponent) {
        let decimals = usize::try_from(5 - exponent).unwrap_or(0);
        trim(&format!("{value:.decimals$}"))
    } else {
        let sign = if exponent < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", trim(mantissa), exponent.abs())
    }
}

#[cfg(test)]
mod tests {
    use super::format_g;

    #[test]
    fn ratios_are_written_as_c_writes_them_with_percent_g() {
        // RedisBloom's BF.DEBUG lines for layers at these rates (its flow tests).
        for (value, expected) in [
            (0.005, "0.005"),
            (0.0025, "0.0025"),
            (0.000625, "0.000625"),
            (0.0005, "0.0005"),
            (6.25e-05, "6.25e-05"),
            (1.5625e-05, "1.5625e-05"),
            (0.01, "0.01"),
            (1e-9, "1e-09"),
            (0.1234567, "0.123457"),
            (1234567.0, "1.23457e+06"),
            (0.00009999996, "0.0001"),
        ] {
            assert_eq!(format_g(value), expected, "{value}");
        }
    }
}
