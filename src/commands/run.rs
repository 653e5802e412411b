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
/// run broke its budget, BREACH_STATUS.
pub fn run(command: &[OsString], opts: &TraceOptions, budget: Option<&Budget>, mut outputs: Outputs, started: Instant) -> Result<i32> {
    let env: Vec<(OsString, OsString)> = std::env::vars_os().collect();
    let traced = trace_command(command, &env, opts, started)?;
    let judged = budget.map(|b| b.check(&traced.trace, &traced.findings));
    outputs.write(&Document::Run { trace: &traced.trace, findings: &traced.findings, budget: judged.as_ref() })?;
    let broke = judged.is_some_and(|j| !j.breaches.is_empty());
    Ok(if traced.status == 0 && broke { BREACH_STATUS } else { traced.status })
}
