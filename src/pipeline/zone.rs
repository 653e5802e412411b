//! How often processes look up the zone file, counted for a while (for
//! `sysdiet check --sample`). BPF counts only; nothing is stopped.

use std::collections::HashMap;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::arm_threads;
use crate::backend::bpf::{BpfOptions, BpfTracer};
use crate::backend::filter::SyscallSet;
use crate::error::{Error, Result};
use crate::linux::host::RunningProcess;
use crate::model::builder::TraceBuilder;
use crate::model::{Argument, RunInfo};
use crate::target;

/// The calls glibc makes to see whether the zone file changed.
const ZONE_LOOKUPS: &str = "newfstatat,stat,lstat,statx,access,faccessat,faccessat2";
const ZONE_FILE: &str = "/etc/localtime";

/// Counts, for `d`, each TZ-less process's lookups of the zone file:
/// (nanoseconds counted, lookups by pid).
pub fn zone_lookups(processes: &[RunningProcess], d: Duration) -> Result<(u64, HashMap<u32, u64>)> {
    let (tx, rx) = mpsc::channel();
    target::watch_signals(tx.clone())?;
    let mut tracer = BpfTracer::load(
        &SyscallSet::parse(&format!("trace={ZONE_LOOKUPS}"))?,
        // A process that looks the zone file up once counts too.
        BpfOptions { keep_every_key: true, arms_running_threads: true, ..Default::default() },
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
    let mut counts = HashMap::new();
    for a in &trace.arguments {
        if matches!(&a.argument, Argument::Path { path: Some(p), .. } if p == ZONE_FILE) {
            *counts.entry(a.pid).or_default() += a.calls;
        }
    }
    Ok((ns, counts))
}
