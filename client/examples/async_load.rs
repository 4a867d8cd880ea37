//! Loads every line of a file into a filter with the async API and prints the items/s, to set
//! beside `bfctl load NAME FILE` on the same filter and file.
//!
//! `cargo run --release -p rustbloom-client --example async_load -- URL NAME FILE [TASKS]`
//!
//! The filter is reserved first when it does not exist (1% error, 1M items, 16 partitions).
//! The file is read before the clock starts. Rounds of 16 commands of 1000 items (bfctl
//! load's defaults) are added by TASKS tasks (default 1) over clones of one connection, so that
//! TASKS rounds are in flight at once, on one thread.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use rustbloom_client::{Client, Filter, Growth, ReserveOptions, WriteOptions};

const ROUND: usize = 16 * 1000;

// One thread, as bfctl: the tasks interleave on it while their commands are in flight.
#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [url, name, file, rest @ ..] = args.as_slice() else {
        return Err("usage: async_load URL NAME FILE [TASKS]".into());
    };
    let tasks: usize = match rest.first() {
        Some(t) => t.parse()?,
        None => 1,
    };
    let text = std::fs::read(file)?;
    let lines: Arc<Vec<Vec<u8>>> = Arc::new(
        text.split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .map(<[u8]>::to_vec)
            .collect(),
    );

    let mut conn = Client::open_async(url).await?.connect_async().await?;
    let filter = match Filter::discover_async(&mut conn, name.as_bytes()).await? {
        Some(f) => f,
        None => {
            let opts = ReserveOptions {
                error_rate: 0.01,
                capacity: 1_000_000,
                growth: Growth::Scaling { expansion: None },
                partitions: Some(16),
            };
            Filter::reserve_async(&mut conn, name.as_bytes(), &opts).await?
        }
    };

    let start = Instant::now();
    let next_round = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..tasks.max(1))
        .map(|_| {
            let (mut conn, filter) = (conn.clone(), filter.clone());
            let (lines, next_round) = (Arc::clone(&lines), Arc::clone(&next_round));
            tokio::spawn(async move {
                let mut new = 0usize;
                loop {
                    let at = next_round.fetch_add(1, Ordering::Relaxed) * ROUND;
                    let Some(round) = lines.get(at..lines.len().min(at + ROUND)) else {
                        return Ok::<usize, rustbloom_client::Error>(new);
                    };
                    if round.is_empty() {
                        return Ok(new);
                    }
                    let items: Vec<&[u8]> = round.iter().map(Vec::as_slice).collect();
                    let answers = filter
                        .add_async(&mut conn, &items, &WriteOptions::default())
                        .await?;
                    new += answers.iter().filter(|&&a| a).count();
                }
            })
        })
        .collect();
    let mut new = 0;
    for worker in workers {
        new += worker.await??;
    }
    let elapsed = start.elapsed().as_secs_f64();
    println!(
        "{name}: {} items, {new} new ({elapsed:.2} s, {:.0} items/s, {tasks} tasks)",
        lines.len(),
        lines.len() as f64 / elapsed
    );
    Ok(())
}
