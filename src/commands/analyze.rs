//! `sysdiet analyze FILE`: a saved strace log, diagnosed like a traced run.

use std::path::PathBuf;

use sysdiet::pipeline::TraceOptions;
use sysdiet::report::{Document, Outputs};
use sysdiet::Result;

pub fn analyze(files: &[PathBuf], opts: &TraceOptions, mut outputs: Outputs) -> Result<i32> {
    let analyzed = sysdiet::pipeline::analyze(files, opts)?;
    outputs.write(&Document::Run { trace: &analyzed.trace, findings: &analyzed.findings, budget: None })?;
    Ok(analyzed.status)
}
