//! `bfctl info` and `bfctl plan --window` for sliding-window filters (`BF.RESERVE key e c WINDOW
//! ms`). A window filter is a ring of four equal slots, one per generation of ⌈W/3⌉ ms (see
//! `rustbloom_core::window`), not a chain of layers: its reports are about slots (which
//! generation each holds, whether it is inside the window at the server's clock, how full it is)
//! and about what a window costs against a classic filter of the same items, none of which a
//! layered filter has. info.rs and plan.rs hand a window filter over to this file.

use anyhow::{anyhow, bail, Result};
use redis::Value;
use rustbloom_core::scalable::MAX_CAPACITY;
use rustbloom_core::sizing::{expected_error_rate, LayerSize, Layout};
use rustbloom_core::window::encoding::{parse_header, WindowHeader};
use rustbloom_core::window::{
    bytes_needed, WindowError, WindowParams, WindowShape, GENERATIONS_PER_WINDOW, MAX_WINDOW_MS,
    MIN_WINDOW_MS, SLOTS, SLOT_MARGIN,
};
use rustbloom_core::{FilterParams, Growth};

use rustbloom_client::{Connection, KeyInfo};

use crate::report::{human_bytes, scan_bits};

/// The window header in a BF.SCANDUMP header chunk, when the key holds a window filter.
pub fn header(chunk: &[u8]) -> Option<WindowHeader> {
    parse_header(chunk).ok()
}

/// Bits of the optimal classic Bloom filter of `items` at `error`: n·ln(1/ε)/ln²2.
fn classic_bits(items: u64, error: f64) -> f64 {
    items as f64 * (1.0 / error).ln() / std::f64::consts::LN_2.powi(2)
}

fn layout_name(layout: Layout) -> String {
    match layout {
        Layout::Classic => "classic".into(),
        Layout::Blocked => "blocked".into(),
        Layout::Lines(lines) => format!("{lines} lines"),
    }
}

/// The server's clock in Unix ms (TIME): windows are measured on it, not on this machine's.
fn server_ms(c: &mut Connection) -> Result<u64> {
    let reply = c.query(&redis::cmd("TIME"))?;
    let parts = match reply {
        Value::Array(parts) if parts.len() == 2 => parts,
        other => bail!("unexpected TIME reply {other:?}"),
    };
    let number = |v: &Value| {
        rustbloom_client::filter::as_u64(v).ok_or_else(|| anyhow!("unexpected TIME reply {v:?}"))
    };
    Ok(number(&parts[0])? * 1000 + number(&parts[1])? / 1000)
}

/// One slot as `info` shows it.
struct SlotView {
    /// The generation it holds (None: no generation since the ring started).
    generation: Option<u64>,
    /// Inside the window at the server's moment.
    live: bool,
    items: u64,
    /// Set bits, when counted (--scan).
    ones: Option<u64>,
}

impl SlotView {
    fn fill(&self, size: LayerSize) -> f64 {
        match self.ones {
            Some(ones) => ones as f64 / size.bits as f64,
            None => {
                1.0 - (-f64::from(size.num_hashes) * self.items as f64 / size.bits as f64).exp()
            }
        }
    }

    fn estimated_rate(&self, size: LayerSize) -> f64 {
        match self.ones {
            Some(_) => self
                .fill(size)
                .powi(i32::try_from(size.num_hashes).unwrap_or(i32::MAX)),
            None => expected_error_rate(size, self.items),
        }
    }
}

/// The slots of `header` as seen at the server's moment `now`: slot s holds the generation
/// ≡ s (mod 4) among the four up to the last write's; those older than the three before
/// `max(now, last write)` are outside the window (cleared by the next write).
fn slots(header: &WindowHeader, now: u64) -> Vec<SlotView> {
    let shape = header.shape;
    let current = shape.generation(header.last_ms);
    let seen = shape.generation(now.max(header.last_ms));
    let oldest_live = seen.saturating_sub(GENERATIONS_PER_WINDOW);
    (0..SLOTS as u64)
        .map(|slot| {
            let back = (current % SLOTS as u64 + SLOTS as u64 - slot) % SLOTS as u64;
            let items = header.slot_items[slot as usize];
            // A filter never written is at time 0, before any generation of interest.
            let generation = current
                .checked_sub(back)
                .filter(|_| header.last_ms > 0 || items > 0);
            SlotView {
                generation,
                live: generation.is_some_and(|g| g >= oldest_live),
                items,
                ones: None,
            }
        })
        .collect()
}

/// `bfctl info` of a window filter: `bi` from BF.INFO, `header` from BF.SCANDUMP.
pub fn info(
    c: &mut Connection,
    key: &str,
    bi: &KeyInfo,
    header: &WindowHeader,
    scan: bool,
    show: bool,
) -> Result<()> {
    let now = server_ms(c)?;
    let WindowHeader { params, shape, .. } = *header;
    let mut slots = slots(header, now);
    if scan {
        count_ones(c, key, &shape, &mut slots, show)?;
    }
    let slot = shape.slot;
    let fpr = 1.0
        - slots
            .iter()
            .filter(|s| s.live)
            .map(|s| 1.0 - s.estimated_rate(slot))
            .product::<f64>();
    println!("key:               {key}");
    println!("kind:              sliding window (BF.RESERVE ... WINDOW)");
    print_timing(header, now);
    print_sizes(bi, header);
    println!(
        "estimated FPR now: {:.3e} = {:.4}% ({})",
        fpr,
        fpr * 100.0,
        if scan {
            "from the measured fill of each slot inside the window"
        } else {
            "from the items in each slot inside the window"
        }
    );
    print_slots(&params, &slots, slot);
    Ok(())
}

/// The window, its generations, the last write and when an item added now is forgotten.
fn print_timing(header: &WindowHeader, now: u64) {
    let WindowHeader {
        params,
        shape,
        last_ms,
        ..
    } = *header;
    let window = params.window_ms;
    println!(
        "window:            {window} ms, in generations of {} ms ({SLOTS} slots)",
        shape.generation_ms
    );
    if last_ms == 0 {
        println!("last write:        never");
    } else {
        println!(
            "last write:        {last_ms} (Unix ms), {} ms before the server's clock",
            now.saturating_sub(last_ms)
        );
    }
    println!(
        "forgets:           an item added now answers through now + {window} ms and is gone \
         {} ms from now",
        shape.forgotten_at(now.max(last_ms)) - now.max(last_ms)
    );
}

/// Capacity, items, bytes, bits per item against a classic filter, and the error rate.
fn print_sizes(bi: &KeyInfo, header: &WindowHeader) {
    let WindowHeader { params, shape, .. } = *header;
    let bits = shape.bytes() * 8;
    println!("capacity:          {} (items per window)", params.capacity);
    println!(
        "items:             {} (counted in the generations inside the window)",
        bi.items
    );
    println!("bytes:             {} ({} of them bits)", bi.size, bits / 8);
    println!(
        "bits per item:     {:.2} at capacity, {:.2}x a classic filter of {} items at {}",
        bits as f64 / params.capacity as f64,
        bits as f64 / classic_bits(params.capacity, params.error_rate),
        params.capacity,
        params.error_rate
    );
    println!(
        "error rate:        {} (from the filter's header)",
        params.error_rate
    );
}

/// The slots' shape, then a row per slot: its generation, state, items, fill and FPR.
fn print_slots(params: &WindowParams, slots: &[SlotView], slot: LayerSize) {
    println!(
        "slots:             {} bits each, {}, {} hashes, sized for {} items at {:.3e}",
        slot.bits,
        layout_name(slot.layout),
        slot.num_hashes,
        params.capacity.div_ceil(GENERATIONS_PER_WINDOW),
        SLOT_MARGIN * params.error_rate / SLOTS as f64
    );
    println!("slot  generation     state     items        fill     est-FPR");
    for (index, view) in slots.iter().enumerate() {
        let (generation, state) = match view.generation {
            None => ("-".to_string(), "unused"),
            Some(g) if view.live => (g.to_string(), "live"),
            Some(g) => (g.to_string(), "expired"),
        };
        println!(
            "{index:<5} {generation:<14} {state:<9} {:<12} {:<8.4} {:.3e}",
            view.items,
            view.fill(slot),
            view.estimated_rate(slot)
        );
    }
}

/// The slot a byte of the encoded bits belongs to: blocked, the four slots' 64-byte copies of
/// one block follow each other; classic, each slot is one run of bits / 8 bytes.
fn slot_of(shape: &WindowShape, offset: u64) -> usize {
    match shape.slot.layout {
        Layout::Classic => (offset / (shape.slot.bits / 8)) as usize,
        _ => ((offset / 64) % SLOTS as u64) as usize,
    }
}

/// Counts the set bits of every slot by reading the whole filter ([`scan_bits`]).
fn count_ones(
    c: &mut Connection,
    key: &str,
    shape: &WindowShape,
    slots: &mut [SlotView],
    show: bool,
) -> Result<()> {
    let mut ones = [0u64; SLOTS];
    scan_bits(c, key, shape.bytes(), show, |start, bits| {
        for (i, byte) in bits.iter().enumerate() {
            ones[slot_of(shape, start + i as u64)] += u64::from(byte.count_ones());
        }
        Ok(())
    })?;
    for (view, count) in slots.iter_mut().zip(ones) {
        view.ones = Some(count);
    }
    Ok(())
}

/// `bfctl plan --window MS`: the shape and memory of a window filter, against a classic filter.
/// Answers the bytes allocated.
pub fn plan(items: u64, error: f64, window_ms: u64) -> Result<u64> {
    let params = WindowParams {
        error_rate: error,
        capacity: items,
        window_ms,
        seed: 0,
    };
    let shape = params.shape().map_err(plan_error)?;
    let bytes = bytes_needed(&params).map_err(|e| anyhow!("cannot size this filter: {e:?}"))?;
    let slot = shape.slot;
    let bits = shape.bytes() * 8;
    let classic = classic_bits(items, error);
    let g = shape.generation_ms;
    println!("BF.RESERVE key {error} {items} WINDOW {window_ms}");
    println!(
        "generations:   {g} ms; an item added at t answers through t + {window_ms} ms and is \
         forgotten when the 4th generation after its own begins, by t + {} ms",
        SLOTS as u64 * g
    );
    println!(
        "slots:         {SLOTS} x {} bits, {}, {} hashes, each sized for {} items at {:.3e}",
        slot.bits,
        layout_name(slot.layout),
        slot.num_hashes,
        items.div_ceil(GENERATIONS_PER_WINDOW),
        SLOT_MARGIN * error / SLOTS as f64
    );
    println!(
        "memory:        {} bytes of bits, {bytes} ({}) allocated; {:.2} bits per windowed item",
        shape.bytes(),
        human_bytes(bytes),
        bits as f64 / items as f64
    );
    println!(
        "classic:       {:.0} bytes ({}), {:.2} bits per item (the optimum for {items} items at \
         {error}): the window takes {:.2}x",
        (classic / 8.0).ceil(),
        human_bytes((classic / 8.0).ceil() as u64),
        classic / items as f64,
        bits as f64 / classic
    );
    print_alternatives(items, error, classic)?;
    println!();
    print_fpr_rows(items, slot);
    Ok(bytes)
}

/// The message of `bfctl plan --window` for a window it cannot shape.
fn plan_error(e: WindowError) -> anyhow::Error {
    match e {
        WindowError::ErrorRate => anyhow!("--error must be strictly between 0 and 1"),
        WindowError::Capacity => anyhow!("--items must be in [1, {MAX_CAPACITY}]"),
        WindowError::Window => {
            anyhow!("--window must be a number of ms in [{MIN_WINDOW_MS}, {MAX_WINDOW_MS}]")
        }
        WindowError::Limit(_) => anyhow!("cannot size this filter"),
        WindowError::Shape(why) => anyhow!("bad slot shape: {why}"),
    }
}

/// What the same N and ε take as the module's own fixed-size filter (which never forgets), and
/// as two rotated keys: one such key per window, the current and the previous one queried, each
/// sized for ε/2 so that the pair answers false positives at ε. `classic`: the optimum's bits.
fn print_alternatives(items: u64, error: f64, classic: f64) -> Result<()> {
    let fixed = |error_rate: f64| {
        FilterParams {
            capacity: items,
            error_rate,
            growth: Growth::NonScaling,
            seed: 0,
            tightening: rustbloom_core::scalable::TIGHTENING_RATIO,
        }
        .layer_size(0)
        .map_err(|e| anyhow!("cannot size the plain filter: {e:?}"))
    };
    let plain = fixed(error)?;
    let rotated = 2 * fixed(error / 2.0)?.bytes();
    println!(
        "plain filter:  BF.RESERVE key {error} {items} NONSCALING: {} bytes ({:.2}x classic), \
         never forgets",
        plain.bytes(),
        plain.bits as f64 / classic
    );
    println!(
        "rotated keys:  two keys of {items} items at {} (one per window, both queried): {rotated} \
         bytes ({:.2}x classic), forgetting after 1 to 2 windows",
        error / 2.0,
        rotated as f64 * 8.0 / classic
    );
    Ok(())
}

/// The expected FPR at the worst moment for fractions of the window's capacity. A steady rate
/// puts a third of the window's items in each generation; at the last moment of a generation
/// all four slots are full, the worst moment.
fn print_fpr_rows(items: u64, slot: LayerSize) {
    println!("items per window  per generation  expected FPR (worst moment)");
    for fraction in [0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 4.0] {
        let n = ((items as f64 * fraction).round() as u64).max(1);
        let per_generation = n.div_ceil(GENERATIONS_PER_WINDOW);
        let pass = (1.0 - expected_error_rate(slot, per_generation)).powi(SLOTS as i32);
        println!(
            "{n:<17} {per_generation:<15} {:.3e}{}",
            1.0 - pass,
            if n == items { "  (capacity)" } else { "" }
        );
    }
}
