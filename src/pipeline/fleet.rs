//! The whole host, live (sysdiet top / serve): every task is counted from
//! its first syscall on, and read every interval into a window per program
//! that the same rules as `run` diagnose.

use std::time::Instant;

use super::unix_now;
use crate::backend::bpf::{BpfOptions, BpfTracer};
use crate::backend::filter::SyscallSet;
use crate::diagnose::Finding;
use crate::error::{Error, Result};
use crate::linux::cgroup::Units;
use crate::model::builder::TraceBuilder;
use crate::model::window::{Totals, Window, Windows};
use crate::model::{Environment, RunInfo};

/// Which programs a view keeps.
#[derive(Debug, Clone, Default)]
pub struct Scope {
    /// Only programs with one of these processes alive.
    pub pids: Vec<u32>,
    /// Only programs in this unit or under this cgroup path.
    pub cgroup: Option<String>,
}

pub struct Host {
    tracer: BpfTracer,
    windows: Windows,
    units: Units,
    scope: Scope,
    filter: Option<String>,
    all: bool,
    syscall_ns: u64,
    /// When each read the window spans was made, oldest first (as the
    /// baselines in `windows`).
    reads: std::collections::VecDeque<(Instant, f64)>,
    span: usize,
    /// When the tracer was loaded (the set-up time of the first window).
    setup_ns: u64,
}

/// One window, diagnosed: findings name their program through
/// `window.program(pid)`.
pub struct HostWindow {
    pub window: Window,
    pub findings: Vec<Finding>,
}

impl Host {
    /// Loads the tracer for every task on the host. No ptrace fallback: a
    /// whole host cannot be ptraced. A window spans the last `span` reads.
    pub fn start(filter: &SyscallSet, filter_expr: Option<String>, scope: Scope, all: bool, span: usize) -> Result<Host> {
        let t0 = Instant::now();
        let (loaded, syscall_ns) = super::load_measuring(filter, BpfOptions { system_wide: true, ..Default::default() }, None, || {}, &|| true);
        let mut tracer = loaded.map(|l| l.tracer).map_err(|e| match super::bpf_unavailable(&e) {
            Some(why) if matches!(e, Error::NoBpfRights) => Error::HostNeedsBpf(format!("{why} (run as root, or give CAP_BPF and CAP_PERFMON)")),
            Some(why) => Error::HostNeedsBpf(why),
            None => e,
        })?;
        let mut units = Units::new();
        let first = snapshot(&mut tracer, &mut units)?;
        Ok(Host {
            tracer,
            windows: Windows::sliding(first, span),
            units,
            scope,
            filter: filter_expr,
            all,
            syscall_ns,
            reads: [(Instant::now(), unix_now())].into(),
            span: span.max(1),
            setup_ns: t0.elapsed().as_nanos() as u64,
        })
    }

    /// What the host did since the last window (or the start), diagnosed.
    pub fn window(&mut self) -> Result<HostWindow> {
        let t0 = Instant::now();
        let now = snapshot(&mut self.tracer, &mut self.units)?;
        let (since, since_unix) = self.reads.front().copied().unwrap_or((t0, unix_now()));
        let run = RunInfo {
            backend: crate::backend::bpf::NAME.into(),
            bpf_programs: Some(self.tracer.variant().name().into()),
            filter: self.filter.clone(),
            started_at: since_unix,
            duration_ns: (t0 - since).as_nanos() as u64,
            setup_ns: std::mem::take(&mut self.setup_ns),
            time: self.tracer.time_kind(),
            // Programs' own environments come from their exec; one that
            // started before sysdiet has none: TZ counts as unset.
            environment: Environment {
                clocksource: crate::linux::clocksource(),
                available_clocksources: crate::linux::available_clocksources(),
                ..Default::default()
            },
            syscall_ns: Some(self.syscall_ns),
            ..Default::default()
        };
        let mut window = self.windows.next(now, run);
        self.reads.push_back((t0, unix_now()));
        while self.reads.len() > self.span {
            self.reads.pop_front();
        }
        self.keep_scope(&mut window);
        window.trace.run.readout_ns = t0.elapsed().as_nanos() as u64;
        let findings = crate::diagnose::diagnose(&window.trace, self.all);
        Ok(HostWindow { window, findings })
    }

    /// sysdiet's own BPF programs' (name, run time ns, runs), running totals.
    pub fn run_stats(&self) -> Vec<(String, u64, u64)> {
        self.tracer.run_stats()
    }

    /// Drops the rows outside `--pid` / `--cgroup`, renumbering the rest.
    fn keep_scope(&mut self, w: &mut Window) {
        if self.scope.pids.is_empty() && self.scope.cgroup.is_none() {
            return;
        }
        let pids = &self.scope.pids;
        let keep: Vec<bool> = w.live.iter().map(|live| pids.is_empty() || live.iter().any(|p| pids.contains(p))).collect();
        let keep: Vec<bool> = match self.scope.cgroup.clone() {
            None => keep,
            Some(wanted) => {
                let cgroups: Vec<u64> = w.trace.processes.iter().map(|p| p.cgroup).collect();
                keep.iter().zip(cgroups).map(|(&k, id)| k && self.units.matches(id, &wanted)).collect()
            }
        };
        w.retain_rows(&keep);
    }
}

/// The tracer's running totals, by program.
fn snapshot(tracer: &mut BpfTracer, units: &mut Units) -> Result<Totals> {
    let mut builder = TraceBuilder::default();
    let lost = tracer.snapshot_into(&mut builder)?;
    let trace = builder.finish(RunInfo::default(), lost);
    Ok(Totals::of(&trace, &mut |id| units.name(id)))
}
