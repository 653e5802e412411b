//! `sysdiet run -- CMD`: trace a command from its execve to its end.

use std::ffi::OsString;
use std::time::Instant;

use sysdiet::compare::budget::Budget;
use sysdiet::compare::gate::BREACH_STATUS;
use sysdiet::pipeline::{trace_command, TraceOptions};
use sysdiet::report::{Document, Outputs};
use sysdiet::Result;

/// Runs `command` traced, writes the report, and returns the status
/// sysdiet should exit with: the command's own, or, when that is 0 and the
/// run broke its budget, BREACH_STATUS. The budget's verdict goes to
/// stderr as well when the flag beside it says the report goes elsewhere.
pub fn run(command: &[OsString], opts: &TraceOptions, budget: Option<(&Budget, bool)>, mut outputs: Outputs, started: Instant) -> Result<i32> {
    let env: Vec<(OsString, OsString)> = std::env::vars_os().collect();
    let traced = trace_command(command, &env, opts, started)?;
    let judged = budget.map(|(b, _)| b.check(&traced.trace, &traced.findings));
    sysdiet::timings::timed("write the report", || {
        outputs.write(&Document::Run { trace: &traced.trace, findings: &traced.findings, budget: judged.as_ref() })
    })?;
    if let (Some(j), Some((_, true))) = (&judged, budget) {
        eprint!("{}", sysdiet::report::diff::budget(j));
    }
    let broke = judged.is_some_and(|j| !j.breaches.is_empty());
    let status = if traced.status == 0 && broke { BREACH_STATUS } else { traced.status };
    // sysdiet exits next, which frees it all at once: a build's trace, its
    // tens of thousands of paths freed one by one, took milliseconds.
    std::mem::forget(traced);
    Ok(status)
}
