//! `bfctl`: bulk work on rustbloom filters (reserve, load, exists, dedup, dump, restore, build,
//! merge, info, plan, migrate, drop), each subcommand in its own file over the rustbloom-client
//! library.
//!
//! Every subcommand but `plan`, `build` and `migrate` talks to the server or cluster given by `--url`
//! (default `redis://127.0.0.1:6379`; `redis+unix:///path/to/sock` works too; any node of a
//! cluster); `migrate` talks to the two given by `--from` and `--to`.

use std::io::{self, IsTerminal};
use std::time::Duration;

use anyhow::Result;
use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};

mod alloc;
mod build;
mod count;
mod dedup;
mod drop;
mod dump;
mod dumpfile;
mod exists;
mod fill;
mod info;
mod input;
mod load;
mod merge;
mod migrate;
mod offline;
mod outfile;
mod plan;
mod report;
mod reserve;
mod restore;
mod spill;
mod stall;
mod window;

#[global_allocator]
static ALLOCATOR: alloc::BfctlAlloc = alloc::BfctlAlloc;

#[derive(Parser)]
#[command(
    name = "bfctl",
    version,
    about = "Bulk work on rustbloom (BF.*) filters"
)]
struct Cli {
    /// Server to talk to: redis://[user:password@]host:port[/db] or redis+unix:///path/to.sock;
    /// for a cluster, any of its nodes.
    #[arg(
        long,
        global = true,
        default_value = "redis://127.0.0.1:6379",
        env = "BFCTL_URL"
    )]
    url: String,
    /// Never draw a progress bar (it is drawn only when stderr is a terminal anyway). A load
    /// waiting through a failover still says so on stderr, at most every 10 s.
    #[arg(long, short, global = true)]
    quiet: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Create a filter with BF.RESERVE: plain, partitioned (--partitions), or empty and made as
    /// another one was (--like OLD), to merge with it.
    Reserve(reserve::ReserveArgs),
    Load(load::LoadArgs),
    /// Print 1 or 0 for every line of FILE (or stdin), in order: whether the filter has it.
    Exists(exists::ExistsArgs),
    Dedup(dedup::DedupArgs),
    Dump(dump::DumpArgs),
    Restore(restore::RestoreArgs),
    Build(build::BuildArgs),
    Merge(merge::MergeArgs),
    Info(info::InfoArgs),
    /// Bytes, hashes and the false-positive rate table of a filter before you reserve it.
    Plan(plan::PlanArgs),
    Migrate(migrate::Options),
    /// Delete a filter (every partition of a partitioned one included).
    Drop(drop::DropArgs),
}

fn main() {
    // Rust ignores SIGPIPE, so `bfctl plan | head` would panic on the closed pipe; like any
    // Unix filter, bfctl should just stop when its reader goes away.
    // SAFETY: restoring the default disposition of a signal before any thread starts.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    keep_freed_memory();
    // Filters built here (build, load --offline) live in this process's allocator, one block
    // per layer (not the pieces cut for a server's jemalloc); big blocks are mapped into huge
    // pages (see `alloc`).
    rustbloom_core::budget::set_allocator(rustbloom_core::budget::Allocator::Libc);
    let cli = Cli::parse();
    if let Err(e) = run(cli) {
        eprintln!("bfctl: {e:#}");
        std::process::exit(1);
    }
}

/// A load frees and allocates the same few megabytes every round trip (packed commands,
/// replies); glibc would hand the big ones back to the kernel each time (mmap above 128 KiB,
/// heap trimmed above 128 KiB free), and the page faults of taking them again cost more CPU
/// than the parsing. Below 16 MiB they are kept and reused (a long line still gets its own
/// mapping, grown without a copy).
fn keep_freed_memory() {
    // From this size on, bfctl's allocator maps blocks itself (see `alloc`).
    const KEEP: libc::c_int = alloc::MAPPED_FROM as libc::c_int;
    // SAFETY: mallopt only changes glibc's allocation thresholds; called before any thread
    // starts, and a refusal (0) leaves the defaults, which are correct, only slower.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, KEEP);
        libc::mallopt(libc::M_TRIM_THRESHOLD, KEEP);
    }
}

fn run(cli: Cli) -> Result<()> {
    let progress = !cli.quiet && io::stderr().is_terminal();
    let url = cli.url.as_str();
    match &cli.command {
        Command::Reserve(args) => reserve::run(url, args),
        Command::Load(args) => load::run(url, args, progress),
        Command::Exists(args) => exists::run(url, args),
        Command::Dedup(args) => dedup::run(url, args),
        Command::Dump(args) => dump::dump(url, args, progress),
        Command::Restore(args) => restore::restore(url, args, progress),
        Command::Build(args) => build::run(args),
        Command::Merge(args) => merge::run(url, args),
        Command::Info(args) => info::run(url, args, progress),
        Command::Plan(args) => plan::run(args),
        Command::Migrate(args) => migrate::run(args, progress),
        Command::Drop(args) => drop::run(url, args),
    }
}

/// A progress bar on stderr when `show`, else a hidden one.
fn bar(show: bool, total: Option<u64>, template: &str) -> ProgressBar {
    if !show {
        return ProgressBar::hidden();
    }
    let pb = match total {
        Some(t) => ProgressBar::new(t),
        None => ProgressBar::new_spinner(),
    };
    if let Ok(style) = ProgressStyle::with_template(template) {
        pb.set_style(style.progress_chars("=> "));
    }
    pb.enable_steady_tick(Duration::from_millis(200));
    pb
}

fn rate(count: u64, elapsed: Duration) -> f64 {
    count as f64 / elapsed.as_secs_f64().max(1e-9)
}
