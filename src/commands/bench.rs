//! `sysdiet bench`: time the loops, count their syscalls, report.

use std::io::IsTerminal;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use sysdiet::bench::loops::LOOPS;
use sysdiet::bench::{measure, BenchOptions, Progress};
use sysdiet::error::{Error, Result};
use sysdiet::report::{Document, Outputs};

use crate::cli::BenchArgs;

const MAX_RUNS: usize = 10_000;

/// `outputs` holds the main output, the exports and --svg, opened already.
pub fn run(a: BenchArgs, mut outputs: Outputs) -> Result<i32> {
    if a.list {
        // A list, not a result: always text, on stdout.
        let list = sysdiet::report::bench::list(LOOPS.iter().map(|k| (k.id(), k.label)));
        let _ = std::io::Write::write_all(&mut std::io::stdout(), list.as_bytes());
        return Ok(0);
    }
    if a.runs == 0 {
        return Err(Error::Usage("--runs 0: give at least one run".into()));
    }
    // Each run is kept; more than this is a typo, not a measurement.
    if a.runs > MAX_RUNS {
        return Err(Error::Usage(format!("--runs {}: give at most {MAX_RUNS} runs", a.runs)));
    }
    if a.iterations == Some(0) {
        return Err(Error::Usage("--iterations 0: give at least one call per run".into()));
    }
    if let Some(&t) = a.threads.iter().find(|&&t| t == 0 || t > 1024) {
        return Err(Error::Usage(format!("--threads {t}: give thread counts from 1 to 1024")));
    }
    let loops = sysdiet::bench::loops::select(a.only.as_deref()).map_err(Error::Usage)?;
    let opts = BenchOptions { loops, threads: a.threads, iterations: a.iterations, runs: a.runs };

    // Ctrl-C: the step under way ends (its worker gets the signal too) and
    // the report shows what was measured.
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(&stop))?;
    }
    let bar = std::io::stderr().is_terminal().then(|| super::progress_bar("bench"));
    let mut show = |p: Progress| {
        if let Some(bar) = &bar {
            bar.set_length(p.total as u64);
            bar.set_position(p.done as u64);
            bar.set_message(p.step);
        }
    };
    let result = measure(&opts, &stop, &mut show);
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    let m = result?;

    outputs.write(&Document::Bench(&m))?;
    Ok(if m.interrupted { 128 + libc::SIGINT } else { 0 })
}
