//! `sysdiet bench`: time the kernels, count their syscalls, report.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use crate::bench::kernels::KERNELS;
use crate::bench::{measure, BenchOptions, Progress};
use crate::error::{Error, Result};
use crate::report::{Format, ReportOptions};

/// What `sysdiet bench` takes (besides where to write).
#[derive(clap::Args, Debug, Clone)]
pub struct BenchArgs {
    /// Only these kernels: names (every variant) or name:variant ids, comma-separated
    #[arg(long, value_delimiter = ',', value_name = "KERNELS")]
    pub only: Option<Vec<String>>,
    /// Run each kernel from this many threads at once, for each count given
    #[arg(long, value_delimiter = ',', default_value = "1", value_name = "LIST")]
    pub threads: Vec<usize>,
    /// Calls per thread in each run (default: enough for ~40 ms a run)
    #[arg(long, value_name = "N")]
    pub iterations: Option<u64>,
    /// Timed runs per kernel and thread count
    #[arg(long, default_value_t = 5)]
    pub runs: usize,
    /// Also plot ns per call (by kernel, or by thread count) as an SVG
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// List the kernels and exit
    #[arg(long)]
    pub list: bool,
}

pub fn run(a: BenchArgs, report: &ReportOptions) -> Result<i32> {
    if a.list {
        let body = crate::report::bench::list(KERNELS.iter().map(|k| (k.id(), k.label)));
        crate::report::write_result(&body, report)?;
        return Ok(0);
    }
    if a.runs == 0 {
        return Err(Error::Usage("--runs 0: give at least one run".into()));
    }
    if a.iterations == Some(0) {
        return Err(Error::Usage("--iterations 0: give at least one call per run".into()));
    }
    if let Some(&t) = a.threads.iter().find(|&&t| t == 0 || t > 1024) {
        return Err(Error::Usage(format!("--threads {t}: give thread counts from 1 to 1024")));
    }
    let kernels = crate::bench::kernels::select(a.only.as_deref()).map_err(Error::Usage)?;
    // A path that cannot be written is said now, not after the whole bench.
    for path in [&a.svg, &report.output].into_iter().flatten() {
        std::fs::File::create(path).map_err(|source| Error::File { path: path.clone(), source })?;
    }
    let opts = BenchOptions { kernels, threads: a.threads, iterations: a.iterations, runs: a.runs };

    // Ctrl-C: the step under way ends (its worker gets the signal too) and
    // the report shows what was measured.
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(&stop))?;
    }
    let bar = std::io::stderr().is_terminal().then(progress_bar);
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

    if let Some(path) = &a.svg {
        std::fs::write(path, crate::report::plot::render(&m)).map_err(|source| Error::File { path: path.clone(), source })?;
    }
    let body = match report.format {
        Format::Json => serde_json::to_string_pretty(&m).expect("serializes") + "\n",
        Format::Text => crate::report::bench::render(&m),
    };
    crate::report::write_result(&body, report)?;
    Ok(if m.interrupted { 128 + libc::SIGINT } else { 0 })
}

fn progress_bar() -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(1);
    let style = indicatif::ProgressStyle::with_template("sysdiet bench {bar:30} {pos}/{len}  {msg}")
        .expect("a valid template");
    bar.set_style(style);
    bar.enable_steady_tick(std::time::Duration::from_millis(200));
    bar
}
