//! The partitions of a dump in a regular file, loaded by several workers at once. Each worker
//! has its own connection (routed to each partition's master) and a reader thread with its own
//! file handle: the reader takes the next partition from a shared counter and reads its
//! records ahead while the worker sends the one before, so the masters copy, replicate and
//! answer while the file is read. The first failure stops every worker after its chunk in
//! flight; the caller deletes every key any of them wrote.

use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::ops::Range;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use anyhow::{anyhow, Context, Result};
use indicatif::ProgressBar;
use rustbloom_client::routing::key_slot;
use rustbloom_client::{Client, Connection};

use super::{load_chunk, Loaded};
use crate::dumpfile::Reader;

/// What to load: partition `i` of `file` lies at `sections[i]` and goes to `keys[i]`; the
/// workers take the partitions in the order of `order`.
pub struct Work<'a> {
    pub client: &'a Client,
    pub file: &'a Path,
    pub sections: &'a [Range<u64>],
    pub keys: &'a [Vec<u8>],
    pub order: &'a [usize],
}

/// The order to load the partitions `keys` in, and how many masters hold them (1 on a single
/// server), which the default number of workers follows. The order takes
/// one partition of each master in turn, so that workers starting together (and staying about
/// together, as partitions are about equal) load on different masters: partitions sit on
/// evenly spaced slots, so in index order the first few would all go to the first master.
pub fn plan(conn: &mut Connection, keys: &[Vec<u8>]) -> Result<(Vec<usize>, usize)> {
    let masters = conn.masters()?;
    // One list per master; a key on a slot no master claims (the map is changing) in a last one.
    let mut held: Vec<Vec<usize>> = vec![Vec::new(); masters.len() + 1];
    for (i, key) in keys.iter().enumerate() {
        let slot = key_slot(key);
        let m = masters
            .iter()
            .position(|m| m.owns(slot))
            .unwrap_or(masters.len());
        held[m].push(i);
    }
    held.retain(|h| !h.is_empty());
    let mut order = Vec::with_capacity(keys.len());
    for round in 0..held.iter().map(Vec::len).max().unwrap_or(0) {
        order.extend(held.iter().filter_map(|h| h.get(round)));
    }
    Ok((order, held.len().max(1)))
}

/// What the workers share.
struct Shared<'a> {
    work: &'a Work<'a>,
    /// The next place in the work's order to take.
    next: AtomicUsize,
    /// Set by the first failure: every worker stops.
    failed: AtomicBool,
    first_error: Mutex<Option<anyhow::Error>>,
    written: Mutex<Vec<Vec<u8>>>,
    chunks: AtomicU64,
    bytes: AtomicU64,
    pb: &'a ProgressBar,
}

impl Shared<'_> {
    fn fail(&self, e: anyhow::Error) {
        self.failed.store(true, Ordering::SeqCst);
        let mut first = self.first_error.lock().unwrap_or_else(|p| p.into_inner());
        first.get_or_insert(e);
    }

    fn stopped(&self) -> bool {
        self.failed.load(Ordering::SeqCst)
    }
}

/// Loads every partition with `jobs` workers (at most one per partition). Answers what was
/// written, whether or not it all succeeded, and the first error, which names its partition.
pub fn load(work: &Work<'_>, jobs: usize, pb: &ProgressBar) -> (Loaded, Result<()>) {
    let shared = Shared {
        work,
        next: AtomicUsize::new(0),
        failed: AtomicBool::new(false),
        first_error: Mutex::new(None),
        written: Mutex::new(Vec::new()),
        chunks: AtomicU64::new(0),
        bytes: AtomicU64::new(0),
        pb,
    };
    let jobs = jobs.clamp(1, work.keys.len().max(1));
    std::thread::scope(|s| {
        for _ in 0..jobs {
            s.spawn(|| worker(&shared));
        }
    });
    let loaded = Loaded {
        chunks: shared.chunks.into_inner(),
        bytes: shared.bytes.into_inner(),
        position: 0,
        keys: shared
            .written
            .into_inner()
            .unwrap_or_else(|p| p.into_inner()),
    };
    let result = match shared.first_error.into_inner() {
        Ok(None) => Ok(()),
        Ok(Some(e)) => Err(e),
        Err(p) => p.into_inner().map_or(Ok(()), Err),
    };
    (loaded, result)
}

/// One worker: takes partitions from the shared counter and loads each through its own
/// connection and file handle, until none is left or a worker failed.
fn worker(shared: &Shared<'_>) {
    let work = shared.work;
    let mut conn = match work.client.connect() {
        Ok(c) => c,
        Err(e) => return shared.fail(anyhow!(e).context("connecting a restore worker")),
    };
    // One buffer for every chunk: allocated once, not each time (freed and taken again, its
    // megabytes cost page faults).
    let mut data = Vec::new();
    while !shared.stopped() {
        let Some(&i) = work.order.get(shared.next.fetch_add(1, Ordering::SeqCst)) else {
            return;
        };
        let section = &work.sections[i];
        let key = &work.keys[i];
        let read = || format!("read partition {i} of {}", work.file.display());
        let mut r = match section_reader(work.file, section).with_context(read) {
            Ok(r) => r,
            Err(e) => return shared.fail(e),
        };
        let mut reported = 0;
        let mut written = false;
        loop {
            let it = match r.next_record_into(&mut data).with_context(read) {
                Ok(Some(it)) => it,
                Ok(None) => break,
                Err(e) => return shared.fail(e),
            };
            if shared.stopped() {
                return;
            }
            if !written {
                let mut keys = shared.written.lock().unwrap_or_else(|p| p.into_inner());
                keys.push(key.clone());
                written = true;
            }
            let nth = shared.chunks.load(Ordering::Relaxed) + 1;
            if let Err(e) = load_chunk(&mut conn, key, it, &data, nth) {
                let shown = String::from_utf8_lossy(key);
                return shared.fail(e.context(format!("partition {i} ({shown})")));
            }
            shared.chunks.fetch_add(1, Ordering::Relaxed);
            shared.bytes.fetch_add(data.len() as u64, Ordering::Relaxed);
            shared.pb.inc(r.position() - reported);
            reported = r.position();
        }
        shared.pb.inc(r.position() - reported);
    }
}

/// The dump at `section` of `file`, on a handle of its own; it must end where the section does.
fn section_reader(file: &Path, section: &Range<u64>) -> Result<Reader<impl Read>> {
    let mut f = File::open(file).with_context(|| format!("open {}", file.display()))?;
    f.seek(SeekFrom::Start(section.start))?;
    let len = section.end - section.start;
    Reader::section(BufReader::with_capacity(1 << 20, f.take(len)), true)
}
