//! Telling the user that a load is waiting. Through a failover, a node down or a WAIT short of
//! replicas, the client retries each round for up to its deadline: on a terminal the progress
//! bar says what it waits for; otherwise (a log, a pipe) a plain line on stderr says it when the
//! wait starts and again at most every [`EVERY`] while it lasts. Nothing is printed while every
//! round is answered at once.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use indicatif::ProgressBar;
use rustbloom_client::{Stall, StallWatcher};

/// The least time between two lines about the same load's waits.
const EVERY: Duration = Duration::from_secs(10);

/// Keys named in a line; the rest are counted.
const KEYS_SHOWN: usize = 3;

/// The watcher of the load into `name`: on `bar` when one is drawn, else on stderr.
pub fn watcher(name: &str, bar: Option<ProgressBar>) -> StallWatcher {
    let name = name.to_string();
    let last_line: Mutex<Option<Instant>> = Mutex::new(None);
    StallWatcher::new(move |stall| {
        let text = describe(&name, stall);
        if let Some(bar) = &bar {
            bar.set_message(text);
            return;
        }
        // A poisoned lock only means another report panicked mid-print: print anyway.
        let mut last = last_line.lock().unwrap_or_else(|p| p.into_inner());
        if last.is_none_or(|at| at.elapsed() >= EVERY) {
            eprintln!("bfctl: {text}");
            *last = Some(Instant::now());
        }
    })
}

/// `stall` in a line: which keys of `name` wait, for what, and for how long at most.
fn describe(name: &str, stall: &Stall) -> String {
    let keys: Vec<String> = stall
        .keys
        .iter()
        .take(KEYS_SHOWN)
        .map(|k| String::from_utf8_lossy(k).into_owned())
        .collect();
    let mut waiting_for = match keys.as_slice() {
        [only] if only == name => format!("filter {name}"),
        [only] => format!("partition {only} of {name}"),
        _ => format!("partitions {} of {name}", keys.join(", ")),
    };
    if stall.keys.len() > KEYS_SHOWN {
        waiting_for.push_str(&format!(" and {} more", stall.keys.len() - KEYS_SHOWN));
    }
    let (reason, left) = (&stall.reason, stall.gives_up_in.as_secs());
    match stall.waited.as_secs() {
        0 => format!("waiting for {waiting_for}: {reason}; retrying for up to {left} s"),
        waited => format!(
            "still waiting for {waiting_for} after {waited} s: {reason}; retrying for up to \
             {left} s more"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stall(keys: &[&str]) -> Stall {
        Stall {
            keys: keys.iter().map(|k| k.as_bytes().to_vec()).collect(),
            reason: "CLUSTERDOWN The cluster is down".into(),
            waited: Duration::from_millis(12_400),
            gives_up_in: Duration::from_millis(107_600),
        }
    }

    #[test]
    fn a_line_names_the_keys_the_reason_and_the_time_left() {
        let starting = Stall {
            waited: Duration::from_millis(60),
            gives_up_in: Duration::from_millis(119_900),
            ..stall(&["f"])
        };
        assert_eq!(
            describe("f", &starting),
            "waiting for filter f: CLUSTERDOWN The cluster is down; retrying for up to 119 s"
        );
        assert_eq!(
            describe("f", &stall(&["{9}f/0"])),
            "still waiting for partition {9}f/0 of f after 12 s: CLUSTERDOWN The cluster is \
             down; retrying for up to 107 s more"
        );
        assert_eq!(
            describe(
                "f",
                &stall(&["{9}f/0", "{3}f/1", "{7}f/2", "{1}f/3", "{5}f/4"])
            ),
            "still waiting for partitions {9}f/0, {3}f/1, {7}f/2 of f and 2 more after 12 s: \
             CLUSTERDOWN The cluster is down; retrying for up to 107 s more"
        );
    }
}
