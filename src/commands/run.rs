//! `sysdiet run -- CMD`: trace a command from its execve to its end.

use std::ffi::OsString;
use std::time::Instant;

use sysdiet::pipeline::{trace_command, TraceOptions};
use sysdiet::report::{Document, Outputs};
use sysdiet::Result;

/// Runs `command` traced, writes the report, and returns the status
/// sysdiet should exit with: the command's own.
pub fn run(command: &[OsString], opts: &TraceOptions, mut outputs: Outputs, started: Instant) -> Result<i32> {
    let env: Vec<(OsString, OsString)> = std::env::vars_os().collect();
    let traced = trace_command(command, &env, opts, started)?;
    outputs.write(&Document::Run { trace: &traced.trace, findings: &traced.findings })?;
    Ok(traced.status)
}
