//! The measured parts of the table (numbered as in the header of main.rs): each runs its passes
//! on every server it concerns and returns the per-round figures the report prints.

use redis::Value;

use crate::pass::{Pass, Recorder};
use crate::report::fmt_rate;
use crate::workload::{probes_for, Batches, Words, Workload};
use crate::{Config, Target};

/// The error rate whose part-1 pass is also the dedup of the words (part 4).
pub const DEDUP_RATE: f64 = 1e-7;
/// The error rates of the window rows (part 3), among RATES.
const WINDOW_RATES: [f64; 2] = [1e-3, 1e-7];
/// Commands per write of the single-item passes (the writer thread hands the kernel this many at
/// a time; the server reads whatever has arrived).
const SINGLES_PER_WRITE: usize = 64;

/// Per-round figures of one server at one error rate.
#[derive(Default)]
pub struct RateFigures {
    pub ratios: Vec<f64>,
    pub us_per_madd: Vec<f64>,
    pub us_per_pfadd: Vec<f64>,
    /// Round 1: bits per item of the NONSCALING filter filled to capacity (BF.INFO Size).
    pub nonscaling_bits: f64,
    /// MEMORY USAGE of the filled NONSCALING filter · 8 / capacity: what the allocator handed out.
    pub nonscaling_memory_bits: f64,
    /// Round 1: false positives of the NONSCALING and the scaling filter among `probes`.
    pub nonscaling_fp: u64,
    pub scaling_fp: u64,
    pub probes: u64,
    /// Round 1: bits per item of the scaling filter after the pass.
    pub scaling_bits: f64,
    /// Round 1 of the dedup rate: duplicates the filter reported.
    pub reported_dups: u64,
    /// Wall time of the BF.MADD pass per round.
    pub wall: Vec<f64>,
}

/// Part 2's figures of one round: (MADD-100, ADD, EXISTS) ratios to PFADD, then µs per call of
/// PFADD-100, BF.MADD-100, PFADD-1, BF.ADD, PFADD-1, BF.EXISTS.
pub type SmallRow = [f64; 9];

/// Part 3's figures at one rate: window ratios to PFADD and µs per window BF.MADD, per round.
#[derive(Default)]
pub struct WindowFigures {
    pub ratios: Vec<f64>,
    pub us_per_madd: Vec<f64>,
}

/// A command outside the timed passes, which must succeed.
pub fn run(target: &mut Target, args: &[&str]) -> Value {
    redis::cmd(args[0])
        .arg(&args[1..])
        .query(&mut target.conn)
        .unwrap_or_else(|e| panic!("{} on {}: {e}", args[0], target.name))
}

fn int(value: &Value) -> u64 {
    match value {
        Value::Int(i) => u64::try_from(*i).unwrap_or_else(|_| panic!("negative: {i}")),
        Value::Array(items) if items.len() == 1 => int(&items[0]),
        other => panic!("expected an integer, got {other:?}"),
    }
}

fn card(target: &mut Target, key: &str) -> u64 {
    int(&run(target, &["BF.CARD", key]))
}

/// Bits per item by BF.INFO Size and by MEMORY USAGE, over `capacity`.
fn bits_per_item(target: &mut Target, key: &str, capacity: u64) -> (f64, f64) {
    let size = int(&run(target, &["BF.INFO", key, "SIZE"]));
    let memory = int(&run(target, &["MEMORY", "USAGE", key]));
    (
        size as f64 * 8.0 / capacity as f64,
        memory as f64 * 8.0 / capacity as f64,
    )
}

/// Part 1 (with the bits and false positives of round 1, and the dedup of part 4): BF.MADD of
/// 1000 vs PFADD of 1000, per round, per error rate, per server.
pub fn madd_vs_pfadd(
    config: &Config,
    targets: &mut [Target],
    recorder: &mut Recorder,
    workload: &mut Workload,
) -> Vec<Vec<RateFigures>> {
    let mut figures: Vec<Vec<RateFigures>> = targets
        .iter()
        .map(|_| {
            config
                .rates
                .iter()
                .map(|_| RateFigures::default())
                .collect()
        })
        .collect();
    for round in (1..=config.rounds).filter(|_| config.part("madd")) {
        for (r, &rate) in config.rates.iter().enumerate() {
            for (s, target) in targets.iter_mut().enumerate() {
                if !config.runs_round(s, round) {
                    continue;
                }
                let f = &mut figures[s][r];
                madd_round(target, recorder, workload, (round, rate), f);
                if round == 1 && config.measures_accuracy(s) {
                    accuracy(config, target, recorder, workload, rate, f);
                }
                run(target, &["DEL", "bf", "ns"]);
            }
        }
    }
    figures
}

/// One round of part 1 on one server at one rate: PFADD, then BF.MADD into a fresh filter `bf`
/// (left in place for the accuracy measure).
fn madd_round(
    target: &mut Target,
    recorder: &mut Recorder,
    workload: &Workload,
    (round, rate): (usize, f64),
    f: &mut RateFigures,
) {
    let batches = (&workload.batches_1000, 1);
    let pf = recorder.pass(target, &round.to_string(), "PFADD", "pf", batches);
    run(target, &["DEL", "pf"]);
    let items = workload.items.to_string();
    run(target, &["BF.RESERVE", "bf", &rate.to_string(), &items]);
    let label = format!("{round}-{}", fmt_rate(rate));
    let bf = recorder.pass(target, &label, "BF.MADD", "bf", batches);
    f.ratios.push(bf.ratio_to(&pf));
    f.us_per_madd.push(bf.us_per_call());
    f.us_per_pfadd.push(pf.us_per_call());
    f.wall.push(bf.wall.as_secs_f64());
    if round == 1 {
        f.reported_dups = bf.tally.zeros;
    }
    eprintln!(
        "round {round} {} {}: PFADD {:.2} s, BF.MADD {:.2} s CPU ({:.2}×), wall {:.2} s",
        target.name,
        fmt_rate(rate),
        pf.cpu_s(),
        bf.cpu_s(),
        bf.ratio_to(&pf),
        bf.wall.as_secs_f64()
    );
}

/// Round 1's accuracy figures at `rate`: the bits and false positives of the scaling filter `bf`
/// the pass filled, then of a NONSCALING filter `ns` filled to exactly its capacity.
fn accuracy(
    config: &Config,
    target: &mut Target,
    recorder: &mut Recorder,
    workload: &mut Workload,
    rate: f64,
    f: &mut RateFigures,
) {
    let n = config
        .fixed_probes
        .unwrap_or(probes_for(rate))
        .min(workload.max_probes) as usize;
    let probe_batches = Batches::new(&workload.probes, 0..n, 1000);
    let probe = |target: &mut Target, recorder: &mut Recorder, key: &str| {
        let pass = recorder.pass(target, "probe", "BF.MEXISTS", key, (&probe_batches, 1));
        pass.tally.ones
    };
    f.probes = n as u64;
    f.scaling_bits = bits_per_item(target, "bf", workload.items as u64).0;
    f.scaling_fp = probe(target, recorder, "bf");
    run(target, &["DEL", "bf"]);
    let capacity = workload.items as u64;
    fill_nonscaling(target, recorder, workload, rate, capacity);
    (f.nonscaling_bits, f.nonscaling_memory_bits) = bits_per_item(target, "ns", capacity);
    f.nonscaling_fp = probe(target, recorder, "ns");
}

/// `BF.RESERVE ns rate capacity NONSCALING`, filled with the words and then never-seen fillers
/// until BF.CARD says it holds `capacity` items.
fn fill_nonscaling(
    target: &mut Target,
    recorder: &mut Recorder,
    workload: &mut Workload,
    rate: f64,
    capacity: u64,
) {
    let (rate, capacity_arg) = (rate.to_string(), capacity.to_string());
    run(
        target,
        &["BF.RESERVE", "ns", &rate, &capacity_arg, "NONSCALING"],
    );
    recorder.pass(target, "fill", "BF.MADD", "ns", (&workload.batches_1000, 1));
    for _ in 0..20 {
        let missing = capacity - card(target, "ns");
        if missing == 0 {
            break;
        }
        let fillers = Words::generate(&mut workload.fillers, missing as usize, 13, 16);
        let fill = Batches::new(&fillers, 0..fillers.len(), 1000);
        recorder.pass(target, "fill", "BF.MADD", "ns", (&fill, 1));
    }
    assert_eq!(card(target, "ns"), capacity, "NONSCALING fill");
}

/// Part 2: on `BF.RESERVE one 0.01 ITEMS`, per round and server, BF.MADD of 100, BF.ADD and
/// BF.EXISTS each against PFADD of as many items.
pub fn single_items(
    config: &Config,
    targets: &mut [Target],
    recorder: &mut Recorder,
    workload: &Workload,
) -> Vec<Vec<SmallRow>> {
    let (items, words) = (workload.items, &workload.words);
    let (half, fifth) = (items / 2, items / 5);
    let b100 = Batches::new(words, 0..half, 100);
    let adds = Batches::new(words, half..half + fifth, 1);
    let exists = Batches::new(words, half + fifth / 2..half + fifth / 2 + fifth, 1);
    let mut small: Vec<Vec<SmallRow>> = targets.iter().map(|_| Vec::new()).collect();
    for round in (1..=config.rounds).filter(|_| config.part("single")) {
        for (s, target) in targets.iter_mut().enumerate() {
            if !config.runs_round(s, round) {
                continue;
            }
            let label = round.to_string();
            run(target, &["BF.RESERVE", "one", "0.01", &items.to_string()]);
            let mut against_pfadd = |command: &str, batches: (&Batches, usize)| {
                let pf = recorder.pass(target, &label, "PFADD", "pf", batches);
                run(target, &["DEL", "pf"]);
                (pf, recorder.pass(target, &label, command, "one", batches))
            };
            let madd = against_pfadd("BF.MADD", (&b100, 1));
            let add = against_pfadd("BF.ADD", (&adds, SINGLES_PER_WRITE));
            let ex = against_pfadd("BF.EXISTS", (&exists, SINGLES_PER_WRITE));
            assert!(card(target, "one") as usize <= items, "the 1% filter grew");
            run(target, &["DEL", "one"]);
            let row = small_row([madd, add, ex]);
            eprintln!("round {round} {}: {row:.3?}", target.name);
            small[s].push(row);
        }
    }
    small
}

/// Part 2's row from its three (PFADD, BF.*) pairs of passes.
fn small_row(pairs: [(Pass, Pass); 3]) -> SmallRow {
    let [(pf100, bf100), (pf1, add), (pf1b, ex)] = pairs;
    [
        bf100.ratio_to(&pf100),
        add.ratio_to(&pf1),
        ex.ratio_to(&pf1b),
        pf100.us_per_call(),
        bf100.us_per_call(),
        pf1.us_per_call(),
        add.us_per_call(),
        pf1b.us_per_call(),
        ex.us_per_call(),
    ]
}

/// The rates of part 3: WINDOW_RATES among the run's rates.
pub fn window_rates(config: &Config) -> Vec<f64> {
    config
        .rates
        .iter()
        .copied()
        .filter(|e| WINDOW_RATES.contains(e))
        .collect()
}

/// Part 3, rustbloom only (no peer has windows): per round and window rate, PFADD of 1000 then
/// BF.MADD of 1000 into `BF.RESERVE win ε ITEMS WINDOW 3600000`. A window of an hour: nothing
/// expires during a pass, so the cost is the window's own (its generations' slots), not forgetting.
pub fn window(
    config: &Config,
    target: &mut Target,
    recorder: &mut Recorder,
    workload: &Workload,
) -> Vec<WindowFigures> {
    let rates = window_rates(config);
    let mut figures: Vec<WindowFigures> = rates.iter().map(|_| Default::default()).collect();
    let batches = (&workload.batches_1000, 1);
    let items = workload.items.to_string();
    for round in (1..=config.rounds).filter(|_| config.part("window")) {
        for (r, &rate) in rates.iter().enumerate() {
            let pf = recorder.pass(target, &round.to_string(), "PFADD", "pf", batches);
            run(target, &["DEL", "pf"]);
            let rate_arg = rate.to_string();
            run(
                target,
                &["BF.RESERVE", "win", &rate_arg, &items, "WINDOW", "3600000"],
            );
            let label = format!("{round}-{}-window", fmt_rate(rate));
            let bf = recorder.pass(target, &label, "BF.MADD", "win", batches);
            run(target, &["DEL", "win"]);
            let ratio = bf.ratio_to(&pf);
            eprintln!("round {round} window {}: {ratio:.2}× PFADD", fmt_rate(rate));
            figures[r].ratios.push(ratio);
            figures[r].us_per_madd.push(bf.us_per_call());
        }
    }
    figures
}
