//! Running processes traced, all their threads and their future children,
//! until they exit, the duration runs out, or a signal.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::{finish, say_attached, start_stacks, watch_mappings, Span, TraceOptions, Traced};
use crate::backend::bpf::BpfTracer;
use crate::error::{Error, Result};
use crate::model::RunInfo;
use crate::target::{self, Event};

pub fn attach(pids: &[u32], duration: Option<Duration>, opts: &TraceOptions, started: Instant) -> Result<Traced> {
    if pids.is_empty() {
        return Err(Error::Usage("no pid given: sysdiet attach -p PID[,PID...]".into()));
    }
    let threads: Vec<Vec<(u32, String)>> = pids.iter().map(|&p| target::live_threads(p)).collect::<Result<_>>()?;

    let mappings = watch_mappings(opts, pids.to_vec());
    // The stack reader starts after the threads are armed (initial).
    let (loaded, why, syscall_ns) = super::load_bpf(opts, true, None)?;
    let Some(super::Loaded { mut tracer, .. }) = loaded else {
        return super::ptraced::attach(pids, duration, opts, started, why);
    };
    let (tx, rx) = mpsc::channel();
    target::watch_signals(tx.clone())?;
    let mut armed = Vec::new();
    for (&pid, threads) in pids.iter().zip(threads) {
        armed.extend(arm_threads(&tracer, pid, threads)?);
    }
    // Events watched before the snapshot: a mapping made in between is in
    // both, never in neither.
    let initial = pids.iter().flat_map(|&p| crate::backend::mappings::snapshot(p)).collect();
    let stacks = start_stacks(&tracer, mappings, initial)?;
    let span = Span::begin(started);
    target::watch_pids(pids, tx.clone())?;
    say_attached(pids, armed.len(), duration);
    if let Some(d) = duration {
        target::watch_timeout(d, tx);
    }
    let interrupted = loop {
        match rx.recv() {
            Ok(Event::AllGone) | Ok(Event::Timeout) => break false,
            Ok(Event::Signal { .. }) | Err(_) => break true,
            Ok(Event::Exited(_)) => {}
        }
    };
    let ended = Instant::now();
    let run = RunInfo {
        root_pids: pids.to_vec(),
        interrupted,
        environment: target::environment_of_process(pids[0]),
        syscall_ns: Some(syscall_ns),
        ..span.run_info(&tracer, opts, ended)
    };
    let (mut trace, findings) = finish(&mut tracer, stacks.map(|c| move || c.last_pass()), run, ended, opts)?;
    // One process that ended while traced: its exit is the run's, as for `run`.
    if let [pid] = pids {
        trace.run.exit = trace.processes.iter().find(|p| p.pid == *pid).and_then(|p| p.exit);
    }
    Ok(Traced { trace, findings, status: 0 })
}

/// Arms every thread of `pid`. Threads that armed threads create are armed
/// by the kernel side at fork; a thread made meanwhile by one not yet armed
/// shows up in the next look at /proc, so look until nothing is new.
/// Returns the threads armed.
pub fn arm_threads(tracer: &BpfTracer, pid: u32, mut threads: Vec<(u32, String)>) -> Result<Vec<u32>> {
    let ppid = target::parent_of(pid);
    let mut armed = std::collections::HashSet::new();
    loop {
        let new: Vec<(u32, String)> = threads.into_iter().filter(|(tid, _)| !armed.contains(tid)).collect();
        if new.is_empty() {
            return Ok(armed.into_iter().collect());
        }
        for (tid, comm) in new {
            match tracer.add_target(tid, false, pid, ppid, &comm) {
                Ok(()) => {}
                // A thread that ended in between has nothing to count; one
                // that still runs but has no pidfd (Linux < 6.9) would be
                // lost silently, so say so instead.
                Err(Error::NoSuchProcess(_)) if std::path::Path::new(&format!("/proc/{pid}/task/{tid}")).exists() => {
                    return Err(Error::ThreadUnreachable { pid, tid });
                }
                Err(Error::NoSuchProcess(_)) => {}
                Err(e) => return Err(e),
            }
            armed.insert(tid);
        }
        threads = target::live_threads(pid)?;
    }
}
