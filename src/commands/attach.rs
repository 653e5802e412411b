//! `sysdiet attach -p PID[,PID...]`: trace running processes, all their
//! threads and their future children, until they exit, --duration runs out,
//! or Ctrl-C.

use std::time::{Duration, Instant};

use sysdiet::pipeline::TraceOptions;
use sysdiet::report::{Document, Outputs};
use sysdiet::Result;

pub fn attach(pids: &[u32], duration: Option<Duration>, opts: &TraceOptions, mut outputs: Outputs, started: Instant) -> Result<i32> {
    let (pids, notes) = sysdiet::target::processes_to_attach(pids)?;
    for note in notes {
        eprintln!("sysdiet: {note}");
    }
    let traced = sysdiet::pipeline::attach(&pids, duration, opts, started)?;
    outputs.write(&Document::Run { trace: &traced.trace, findings: &traced.findings, budget: None })?;
    let status = traced.status;
    // Freed by sysdiet's exit, at once (commands/run.rs).
    std::mem::forget(traced);
    Ok(status)
}
