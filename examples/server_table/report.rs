//! The markdown tables on stdout, from the figures the parts returned.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use rustbloom_core::{FilterParams, Growth};
use rustbloom_testkit::server::server_binary;

use crate::parts::{window_rates, RateFigures, SmallRow, WindowFigures, DEDUP_RATE};
use crate::Config;

/// Everything the parts measured, per server in the order of the run's targets.
pub struct Figures {
    pub names: Vec<&'static str>,
    pub distinct: usize,
    pub per_rate: Vec<Vec<RateFigures>>,
    pub small: Vec<Vec<SmallRow>>,
    pub window: Vec<WindowFigures>,
}

pub fn print(config: &Config, figures: &Figures, started: Instant, load_before: &str) {
    print_header(config, started, load_before);
    let measured = !figures.per_rate[0][0].ratios.is_empty();
    if measured {
        print_madd(config, figures);
    }
    if measured && config.part("accuracy") {
        print_accuracy(config, figures);
    }
    if !figures.small[0].is_empty() {
        print_small(config, figures);
    }
    if figures.window.iter().any(|w| !w.ratios.is_empty()) {
        print_window(config, figures);
    }
    let dedup = config.rates.iter().position(|&e| e == DEDUP_RATE);
    if let Some(r) = dedup.filter(|_| measured) {
        print_dedup(config, figures, r);
    }
}

/// The output of `cmd args`, trimmed; empty when it cannot run.
fn output_of(cmd: &str, args: &[&str]) -> String {
    Command::new(cmd)
        .args(args)
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

fn print_header(config: &Config, started: Instant, load_before: &str) {
    let (items, rounds) = (config.items, config.rounds);
    println!(
        "## Server table: {items} words, rustbloom {rounds} round(s), RedisBloom {} round(s); finished {} after {:.0} s",
        config.rb_rounds.min(rounds),
        output_of("date", &["-u", "+%Y-%m-%d %H:%M UTC"]),
        started.elapsed().as_secs_f64()
    );
    println!();
    let uncommitted = output_of("git", &["status", "--porcelain", "--untracked-files=no"]);
    println!(
        "commit {}{}, redis-server {}, load average before/after: {load_before} / {}",
        output_of("git", &["rev-parse", "--short", "HEAD"]),
        if uncommitted.is_empty() {
            ""
        } else {
            " (with uncommitted changes)"
        },
        output_of(&server_binary().to_string_lossy(), &["--version"])
            .split_whitespace()
            .nth(2)
            .unwrap_or("?")
            .trim_start_matches("v="),
        loadavg()
    );
    println!();
    println!(
        "rustbloom: {} (sha256 {}){}",
        config.ours.display(),
        sha256(&config.ours),
        match &config.theirs {
            Some(p) => format!("; RedisBloom: {} (sha256 {})", p.display(), sha256(p)),
            None => "; RedisBloom: not installed".into(),
        }
    );
    println!();
}

/// The layout and hash count the core sizes the first layer of `BF.RESERVE key rate items` with.
fn layout(items: usize, rate: f64) -> String {
    let params = FilterParams {
        capacity: items as u64,
        error_rate: rate,
        growth: Growth::Scaling { expansion: 2 },
        seed: 0,
        tightening: rustbloom_core::scalable::TIGHTENING_RATIO,
    };
    params
        .layer_size(0)
        .map(|s| format!("{:?} ({})", s.layout, s.num_hashes))
        .unwrap_or_else(|e| format!("{e:?}"))
}

fn print_madd(config: &Config, figures: &Figures) {
    println!(
        "### BF.MADD of 1000 vs PFADD of 1000 (server CPU; median of rounds, range in brackets)"
    );
    println!();
    let mut head = String::from(
        "| ε | rustbloom layout (k) | rustbloom ÷ PFADD | µs per BF.MADD | PFADD µs |",
    );
    let mut rule = String::from("|---|---|---|---|---|");
    if figures.names.len() > 1 {
        head.push_str(" RedisBloom ÷ PFADD | µs per BF.MADD | PFADD µs |");
        rule.push_str("---|---|---|");
    }
    println!("{head}");
    println!("{rule}");
    for (r, &rate) in config.rates.iter().enumerate() {
        let mut line = format!("| {} | {} |", fmt_rate(rate), layout(config.items, rate));
        for per in &figures.per_rate {
            let f = &per[r];
            line.push_str(&format!(
                " {} | {:.0} | {:.0} |",
                fmt_ratio(&f.ratios),
                median(f.us_per_madd.clone()),
                median(f.us_per_pfadd.clone())
            ));
        }
        println!("{line}");
    }
}

/// The NONSCALING layer's own bits per item from the core's sizing (÷ optimum), layout and k.
fn nonscaling_layer(items: usize, rate: f64, optimum: f64) -> String {
    let params = FilterParams {
        capacity: items as u64,
        error_rate: rate,
        growth: Growth::NonScaling,
        seed: 0,
        tightening: rustbloom_core::scalable::TIGHTENING_RATIO,
    };
    params
        .layer_size(0)
        .map(|size| {
            let bits = size.bits as f64 / items as f64;
            format!(
                "{bits:.2} ({:.3}), {:?} {}",
                bits / optimum,
                size.layout,
                size.num_hashes
            )
        })
        .unwrap_or_default()
}

fn print_accuracy(config: &Config, figures: &Figures) {
    let items = config.items;
    let distinct = figures.distinct;
    println!();
    println!("### Bits per item and false-positive rate (round 1)");
    println!();
    println!("NONSCALING: `BF.RESERVE key ε {items} NONSCALING` filled to exactly its capacity; bits = BF.INFO Size · 8 / capacity (the filter's bits and headers, as RedisBloom counts them), and MEMORY USAGE · 8 / capacity (what the allocator handed out, as used_memory and maxmemory count it); the layer's own bits from the core's sizing next to them; optimum = −ln ε / ln²2. Scaling: the filter of the timed pass ({distinct} distinct words in it).");
    println!();
    let servers = if config.rb_accuracy {
        figures.names.len()
    } else {
        1
    };
    let mut head = String::from(
        "| ε | optimum | probes | rustbloom NONSCALING layer: bits/item (÷ opt.), layout k |",
    );
    let mut rule = String::from("|---|---|---|---|");
    for name in figures.names.iter().take(servers) {
        head.push_str(&format!(
            " {name} NONSCALING bits (÷ opt.) | MEMORY USAGE bits (÷ opt.) | FPR at capacity | scaling bits | scaling FPR |"
        ));
        rule.push_str("---|---|---|---|---|");
    }
    println!("{head}");
    println!("{rule}");
    for (r, &rate) in config.rates.iter().enumerate() {
        let optimum = -rate.ln() / (2f64.ln() * 2f64.ln());
        let mut line = format!(
            "| {} | {optimum:.2} | {:.0e} | {} |",
            fmt_rate(rate),
            figures.per_rate[0][r].probes as f64,
            nonscaling_layer(items, rate, optimum)
        );
        for per in figures.per_rate.iter().take(servers) {
            line.push_str(&accuracy_cells(&per[r], optimum));
        }
        println!("{line}");
    }
}

/// One server's cells of the accuracy table.
fn accuracy_cells(f: &RateFigures, optimum: f64) -> String {
    let fpr = |fp: u64| {
        let rate_measured = fp as f64 / f.probes as f64;
        format!("{rate_measured:.2e} ({fp})")
    };
    format!(
        " {:.2} ({:.3}) | {:.2} ({:.3}) | {} | {:.2} | {} |",
        f.nonscaling_bits,
        f.nonscaling_bits / optimum,
        f.nonscaling_memory_bits,
        f.nonscaling_memory_bits / optimum,
        fpr(f.nonscaling_fp),
        f.scaling_bits,
        fpr(f.scaling_fp)
    )
}

fn print_small(config: &Config, figures: &Figures) {
    println!();
    println!("### Single items and batches of 100, `BF.RESERVE key 0.01 {}` (server CPU µs per call; ratio to PFADD of as many items, median of rounds)", config.items);
    println!();
    println!("| server | BF.MADD-100 ÷ PFADD-100 | BF.ADD ÷ PFADD-1 | BF.EXISTS ÷ PFADD-1 | PFADD-100 / BF.MADD-100 µs | PFADD-1 / BF.ADD µs | PFADD-1 / BF.EXISTS µs |");
    println!("|---|---|---|---|---|---|---|");
    for (s, name) in figures.names.iter().enumerate() {
        let col = |i: usize| {
            figures.small[s]
                .iter()
                .map(|row| row[i])
                .collect::<Vec<f64>>()
        };
        println!(
            "| {name} | {} | {} | {} | {:.2} / {:.2} | {:.3} / {:.3} | {:.3} / {:.3} |",
            fmt_ratio(&col(0)),
            fmt_ratio(&col(1)),
            fmt_ratio(&col(2)),
            median(col(3)),
            median(col(4)),
            median(col(5)),
            median(col(6)),
            median(col(7)),
            median(col(8)),
        );
    }
}

fn print_window(config: &Config, figures: &Figures) {
    println!();
    println!("### Window filters: BF.MADD of 1000 into `BF.RESERVE key ε {} WINDOW 3600000` (rustbloom; server CPU, median of rounds)", config.items);
    println!();
    println!("| ε | window ÷ PFADD | µs per BF.MADD (window) | plain filter ÷ PFADD (part 1) |");
    println!("|---|---|---|---|");
    for (r, &rate) in window_rates(config).iter().enumerate() {
        let plain = config
            .rates
            .iter()
            .position(|&e| e == rate)
            .map(|i| &figures.per_rate[0][i].ratios)
            .filter(|ratios| !ratios.is_empty())
            .map_or("–".to_string(), |ratios| fmt_ratio(ratios));
        let window = &figures.window[r];
        println!(
            "| {} | {} | {:.0} | {plain} |",
            fmt_rate(rate),
            fmt_ratio(&window.ratios),
            median(window.us_per_madd.clone()),
        );
    }
}

fn print_dedup(config: &Config, figures: &Figures, r: usize) {
    let items = config.items;
    println!();
    println!("### Dedup of the {items} words at {}", fmt_rate(DEDUP_RATE));
    println!();
    println!("| server | server CPU ÷ PFADD | server CPU s (PFADD s) | wall s | duplicates reported | exact | false positives |");
    println!("|---|---|---|---|---|---|---|");
    let exact = (items - figures.distinct) as u64;
    let seconds =
        |us_per_call: &[f64]| median(us_per_call.to_vec()) * (items as f64 / 1000.0) / 1e6;
    for (s, name) in figures.names.iter().enumerate() {
        let f = &figures.per_rate[s][r];
        println!(
            "| {name} | {} | {:.2} ({:.2}) | {:.2} | {} | {exact} | {} |",
            fmt_ratio(&f.ratios),
            seconds(&f.us_per_madd),
            seconds(&f.us_per_pfadd),
            median(f.wall.clone()),
            f.reported_dups,
            f.reported_dups as i64 - exact as i64
        );
    }
}

fn median(mut xs: Vec<f64>) -> f64 {
    assert!(!xs.is_empty());
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    if n % 2 == 1 {
        xs[n / 2]
    } else {
        (xs[n / 2 - 1] + xs[n / 2]) / 2.0
    }
}

pub fn fmt_rate(e: f64) -> String {
    format!("1e-{}", (-e.log10()).round() as i32)
}

/// "1.23" or "1.23 (1.20–1.27)" with the spread over rounds.
fn fmt_ratio(xs: &[f64]) -> String {
    let m = median(xs.to_vec());
    if xs.len() < 2 {
        return format!("{m:.2}");
    }
    let lo = xs.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    format!("{m:.2} ({lo:.2}–{hi:.2})")
}

/// The 1-minute load average (other work on the machine skews every figure).
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "?".into())
}

fn sha256(path: &Path) -> String {
    output_of("sha256sum", &[&path.to_string_lossy()])
        .split_whitespace()
        .next()
        .map(|h| h[..12].to_string())
        .unwrap_or_else(|| "?".into())
}
