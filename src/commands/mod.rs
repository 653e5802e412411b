//! The commands: each wires target → trace → model → report.

pub mod attach;
pub mod run;

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use crate::error::Result;
use crate::model::builder::TraceBuilder;
use crate::model::{RunInfo, Trace};
use crate::report::ReportOptions;
use crate::trace::bpf::BpfTracer;
use crate::trace::filter::SyscallSet;

/// What every tracing command takes.
#[derive(Debug, Clone, Default)]
pub struct TraceOptions {
    pub filter: SyscallSet,
    pub report: ReportOptions,
}

pub const BACKEND: &str = "bpf";

fn unix_now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

/// Reads the tracer out into a Trace and writes the report. `ended` is when
/// the traced work ended: the report's latency is measured from it.
fn finish(tracer: &mut BpfTracer, mut run: RunInfo, ended: Instant, opts: &TraceOptions) -> Result<Trace> {
    let mut builder = TraceBuilder::default();
    let lost = tracer.read_into(&mut builder)?;
    run.readout_ns = ended.elapsed().as_nanos() as u64;
    let trace = builder.finish(run, lost);
    crate::report::write(&trace, &opts.report)?;
    Ok(trace)
}
