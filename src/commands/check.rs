//! `sysdiet check`: a host audit that runs nothing. The clocksource, TZ
//! system-wide, the processes without TZ, and with --sample how often each
//! of them stats the zone file.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::attach::arm_threads;
use crate::diagnose::host::audit;
use crate::error::{Error, Result};
use crate::model::builder::TraceBuilder;
use crate::model::{Argument, RunInfo};
use crate::report::{Format, ReportOptions};
use crate::target::{self, host};
use crate::trace::bpf::{BpfOptions, BpfTracer};
use crate::trace::filter::SyscallSet;

/// The calls glibc makes to see whether the zone file changed.
const ZONE_LOOKUPS: &str = "newfstatat,stat,lstat,statx,access,faccessat,faccessat2";
const ZONE_FILE: &str = "/etc/localtime";

pub fn check(sample: Option<Duration>, report: &ReportOptions) -> Result<i32> {
    let processes = host::processes(std::process::id());
    let counts = match sample {
        Some(d) => Some(sample_zone_lookups(&processes, d)?),
        None => None,
    };
    let count_of = |pid: u32| counts.as_ref().and_then(|(_, by_pid)| by_pid.get(&pid).copied()).unwrap_or(0);
    let result = audit(
        crate::trace::clocksource(),
        crate::trace::available_clocksources(),
        host::system_tz(),
        host::zone(),
        &processes,
        counts.as_ref().map(|(ns, _)| (*ns, &count_of as &dyn Fn(u32) -> u64)),
    );
    let body = match report.format {
        Format::Json => serde_json::to_string_pretty(&result).expect("serializes") + "\n",
        Format::Text => crate::report::check::render(&result),
    };
    crate::report::write_body(&body, report)?;
    Ok(0)
}

/// Counts, for `d`, each TZ-less process's lookups of the zone file. BPF
/// counts only; nothing is stopped.
fn sample_zone_lookups(processes: &[host::RunningProcess], d: Duration) -> Result<(u64, std::collections::HashMap<u32, u64>)> {
    let (tx, rx) = mpsc::channel();
    target::watch_signals(tx.clone())?;
    let mut tracer = BpfTracer::load(
        &SyscallSet::parse(&format!("trace={ZONE_LOOKUPS}"))?,
        // A process that looks the zone file up once counts too.
        BpfOptions { keep_every_key: true, ..Default::default() },
    )?;
    for p in processes.iter().filter(|p| p.tz.is_none()) {
        match target::live_threads(p.pid).and_then(|threads| arm_threads(&tracer, p.pid, threads)) {
            Ok(_) => {}
            // Gone meanwhile, or out of reach: its row shows no lookups.
            Err(Error::NoSuchProcess(_) | Error::ThreadUnreachable { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    let t0 = Instant::now();
    target::watch_timeout(d, tx);
    // The timeout, or a signal: either way what was counted is shown.
    let _ = rx.recv();
    let ns = t0.elapsed().as_nanos() as u64;
    let mut builder = TraceBuilder::default();
    tracer.read_into(&mut builder)?;
    let trace = builder.finish(RunInfo::default(), Default::default());
    let mut counts = std::collections::HashMap::new();
    for a in &trace.arguments {
        if matches!(&a.argument, Argument::Path { path: Some(p), .. } if p == ZONE_FILE) {
            *counts.entry(a.pid).or_default() += a.calls;
        }
    }
    Ok((ns, counts))
}
