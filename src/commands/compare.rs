//! `sysdiet compare`: the baseline and its variants, measured.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use sysdiet::compare::{compare as measure, variants, CompareOptions, Untraced};
use sysdiet::error::Error;
use sysdiet::report::{Document, Outputs};
use sysdiet::Result;

use crate::cli::CompareArgs;

pub fn run(a: CompareArgs, mut outputs: Outputs) -> Result<i32> {
    let normalize =
        a.normalize.iter().map(|r| regex::Regex::new(r).map_err(|e| Error::Usage(format!("--normalize {r}: {e}")))).collect::<Result<Vec<_>>>()?;
    let variants = variants(&a.command, &a.env, &a.unset_env, &a.vs)?;
    let opts = CompareOptions {
        runs: a.runs,
        warmup: a.warmup,
        check_output: a.check_output,
        normalize,
        ignore_failure: a.ignore_failure,
        trace: !a.no_trace,
    };
    let bar = std::io::stderr().is_terminal().then(|| super::progress_bar("compare"));
    let mut show = |done: usize, total: usize, label: &str| {
        if let Some(bar) = &bar {
            bar.set_length(total as u64);
            bar.set_position(done as u64);
            bar.set_message(if label.is_empty() { String::new() } else { format!("variant {label}") });
        }
    };
    // Ctrl-C or SIGTERM: the run under way ends, and what was measured is
    // the result (status 128 + the signal).
    let stop = Arc::new(AtomicUsize::new(0));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register_usize(sig, Arc::clone(&stop), sig as usize)?;
    }
    let result = measure(&variants, &opts, &mut Untraced, &mut show, &stop);
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    let result = result?;
    outputs.write(&Document::Compare(&result))?;
    if result.interrupted {
        return Ok(128 + stop.load(Ordering::Relaxed) as i32);
    }
    // A fix that changes the output is not a fix: say so in the status too.
    Ok(if result.variants.iter().any(|v| v.output_differs.is_some()) { 1 } else { 0 })
}
