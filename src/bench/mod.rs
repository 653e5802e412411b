//! `sysdiet bench`: what each time and signal call costs on this host.
//! C loops × thread counts ──► Measurements ──► report (table, JSON, SVG).
//!
//! Every loop runs in a process of its own (sysdiet run again as a
//! worker) with the TZ it needs. First each loop's syscalls per call are
//! counted, then the counter is unloaded and each loop is timed, so that
//! no probe is attached while anything is timed.

pub mod count;
pub mod floor;
pub mod host;
pub mod loops;
pub mod tally;
pub mod worker;

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::stats::{summarize, Summary};
use host::Host;
use loops::{Tz, LOOPS, TZ_SET};
use tally::Tally;
use worker::{Job, Timed};

#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// Indices into LOOPS, in table order (`loops::select`).
    pub loops: Vec<usize>,
    /// Thread counts, each run in turn.
    pub threads: Vec<usize>,
    /// Calls per thread per run; calibrated to ~40 ms a run when None.
    pub iterations: Option<u64>,
    pub runs: usize,
}

/// A bench's results.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Measurements {
    pub host: Host,
    pub threads: Vec<usize>,
    pub runs: usize,
    /// Fixed by --iterations; None when each loop was calibrated.
    pub iterations: Option<u64>,
    pub loops: Vec<LoopCost>,
    /// Why syscalls were not counted, when they were not.
    pub syscalls_not_counted: Option<String>,
    /// Syscalls the counter had no room for (0 unless its table filled).
    pub syscalls_lost: u64,
    /// Ctrl-C stopped the bench: what was measured before is here.
    pub interrupted: bool,
}

/// What one call of one loop costs.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct LoopCost {
    /// `name` or `name:variant`, what --only takes.
    pub id: String,
    pub name: String,
    pub label: String,
    /// TZ in the kernel's process; None: unset.
    pub tz: Option<String>,
    /// One per thread count, in the order asked.
    pub times: Vec<CallTime>,
    /// Counted with one thread.
    pub syscalls: Option<SyscallsPerCall>,
    /// Counted with each thread count above one, when --threads asks; the
    /// calls per thread are a quarter of a timed run's (at least 5,000).
    pub contended_syscalls: Vec<ContendedSyscalls>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct ContendedSyscalls {
    pub threads: usize,
    pub syscalls: SyscallsPerCall,
}

/// Nanoseconds per call, with `threads` threads calling at once.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct CallTime {
    pub threads: usize,
    /// Calls per thread in each run.
    pub iterations: u64,
    /// Over the runs; each run's figure is the mean of its threads'.
    pub ns_per_call: Summary,
    pub runs_ns_per_call: Vec<f64>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct SyscallsPerCall {
    pub total: f64,
    /// Largest first.
    pub by_syscall: Vec<SyscallShare>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct SyscallShare {
    pub name: String,
    pub per_call: f64,
}

/// Where the bench is: `done` of `total` steps, now on `step`.
pub struct Progress {
    pub done: usize,
    pub total: usize,
    pub step: String,
}

/// Runs the bench. `stop` is set by Ctrl-C: the bench ends after the step
/// under way, with what it has.
pub fn measure(opts: &BenchOptions, stop: &AtomicBool, progress: &mut dyn FnMut(Progress)) -> Result<Measurements> {
    let selected = &opts.loops;
    let mut m = Measurements {
        host: host::facts(),
        threads: opts.threads.clone(),
        runs: opts.runs,
        iterations: opts.iterations,
        loops: selected.iter().map(|&i| cost_of(i)).collect(),
        ..Default::default()
    };
    let contended: Vec<usize> = opts.threads.iter().copied().filter(|&t| t > 1).collect();
    let mut steps = Steps { done: 0, total: selected.len() * (1 + opts.threads.len() + contended.len()), progress };
    let stopped = || stop.load(Ordering::Relaxed);

    // 1. Syscalls per call on one thread: exact. The counter is unloaded
    // at the end of this block, before anything is timed.
    match Tally::load() {
        Ok(tally) => {
            for (cost, &i) in m.loops.iter_mut().zip(selected) {
                if stopped() {
                    break;
                }
                steps.next(format!("counting {}", LOOPS[i].label));
                match count::syscalls_per_call(&tally, i, 1, count::CALLS) {
                    Ok(s) => cost.syscalls = Some(s),
                    // Ctrl-C reached the worker too.
                    Err(_) if stopped() => break,
                    Err(e) => return Err(e),
                }
            }
            m.syscalls_lost += tally.lost();
        }
        // Timings need no rights; the table says what is missing.
        Err(e @ (Error::NoBpfRights | Error::PerfEventsRestricted { .. } | Error::NoBtf { .. } | Error::KernelLacks { .. })) => {
            m.syscalls_not_counted = Some(e.to_string())
        }
        Err(e) => return Err(e),
    }

    // 2. Time per call, untraced.
    'loops: for (cost, &i) in m.loops.iter_mut().zip(selected) {
        for &threads in &opts.threads {
            if stopped() {
                break 'loops;
            }
            let on = if threads == 1 { String::new() } else { format!(" on {threads} threads") };
            steps.next(format!("timing {}{on}", LOOPS[i].label));
            let job = Job { bench_loop: i, threads, iterations: opts.iterations.unwrap_or(0), runs: opts.runs, count: false };
            match time(&job, stop)? {
                Some(t) => cost.times.push(CallTime {
                    threads,
                    iterations: t.iterations,
                    ns_per_call: summarize(&t.ns_per_call),
                    runs_ns_per_call: t.ns_per_call,
                }),
                None => break 'loops,
            }
        }
    }

    // 3. What contention adds (futex waits on a lock), counted with the
    // threads calling long enough to overlap as they did when timed.
    if !contended.is_empty() && m.syscalls_not_counted.is_none() && !stopped() {
        let tally = Tally::load()?;
        'contended: for (cost, &i) in m.loops.iter_mut().zip(selected) {
            let runs: Vec<(usize, u64)> = cost.times.iter().filter(|t| t.threads > 1).map(|t| (t.threads, t.iterations)).collect();
            for (threads, iterations) in runs {
                if stopped() {
                    break 'contended;
                }
                steps.next(format!("counting {} on {threads} threads", LOOPS[i].label));
                match count::syscalls_per_call(&tally, i, threads, (iterations / 4).max(count::CALLS)) {
                    Ok(s) => cost.contended_syscalls.push(ContendedSyscalls { threads, syscalls: s }),
                    Err(_) if stopped() => break 'contended,
                    Err(e) => return Err(e),
                }
            }
        }
        m.syscalls_lost += tally.lost();
    }
    m.interrupted = stopped();
    Ok(m)
}

/// Counts the bench's steps for the progress bar.
struct Steps<'a> {
    done: usize,
    total: usize,
    progress: &'a mut dyn FnMut(Progress),
}

impl Steps<'_> {
    fn next(&mut self, step: String) {
        (self.progress)(Progress { done: self.done, total: self.total, step });
        self.done += 1;
    }
}

fn cost_of(i: usize) -> LoopCost {
    let k = &LOOPS[i];
    LoopCost { id: k.id(), name: k.name.into(), label: k.label.into(), tz: (k.tz == Tz::Set).then(|| TZ_SET.into()), ..Default::default() }
}

/// Times a job in a worker process; None when Ctrl-C ended it.
fn time(job: &Job, stop: &AtomicBool) -> Result<Option<Timed>> {
    let mut cmd = Command::new(self_exe()?);
    cmd.args(job.args()).env_clear().envs(worker_env(LOOPS[job.bench_loop].tz));
    let out = cmd.stdin(Stdio::null()).stderr(Stdio::piped()).output()?;
    if stop.load(Ordering::Relaxed) {
        return Ok(None);
    }
    if !out.status.success() {
        let why = String::from_utf8_lossy(&out.stderr).lines().next().unwrap_or("").to_string();
        return Err(worker_failed(job.bench_loop, &format!("{} {why}", out.status)));
    }
    serde_json::from_slice(&out.stdout).map(Some).map_err(|e| worker_failed(job.bench_loop, &format!("unreadable answer: {e}")))
}

/// sysdiet's own executable, which runs the loops.
fn self_exe() -> Result<PathBuf> {
    std::env::current_exe().map_err(|e| Error::Usage(format!("cannot find sysdiet's own executable to run the loops: {e}")))
}

/// sysdiet's environment with TZ as the loop needs it.
fn worker_env(tz: Tz) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = std::env::vars_os().filter(|(k, _)| k != "TZ").collect();
    if tz == Tz::Set {
        env.push(("TZ".into(), TZ_SET.into()));
    }
    env
}

fn worker_failed(bench_loop: usize, how: &str) -> Error {
    Error::LoopFailed { bench_loop: LOOPS[bench_loop].label.into(), how: how.trim().into() }
}
