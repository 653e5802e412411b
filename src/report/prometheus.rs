//! `sysdiet serve`'s /metrics, in the Prometheus text format (written by
//! prometheus-client). Labels name units, programs, syscalls and rules,
//! never pids or paths: a fleet's series stay few. docs/metrics.md lists
//! every metric.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::AtomicU64;

use crate::diagnose::Finding;
use crate::model::window::Window;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SyscallLabels {
    unit: String,
    program: String,
    syscall: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FindingLabels {
    rule: String,
    unit: String,
    program: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WhatLabels {
    what: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ProgLabels {
    prog: String,
}

type FloatCounter = Counter<f64, AtomicU64>;
type FloatGauge = Gauge<f64, AtomicU64>;

/// What sysdiet costs itself, read when a window ends.
#[derive(Debug, Clone, Default)]
pub struct OwnCost {
    /// Each BPF program's (name, run time ns, runs), running totals; zero
    /// unless kernel.bpf_stats_enabled is on.
    pub bpf: Vec<(String, u64, u64)>,
    pub cpu_seconds: f64,
    pub resident_bytes: u64,
}

pub struct Metrics {
    registry: Registry,
    calls: Family<SyscallLabels, Counter>,
    errors: Family<SyscallLabels, Counter>,
    seconds: Family<SyscallLabels, FloatCounter>,
    active: Family<FindingLabels, Gauge>,
    cost: Family<FindingLabels, FloatGauge>,
    finding_calls: Family<FindingLabels, FloatGauge>,
    shown: HashSet<FindingLabels>,
    lost: Family<WhatLabels, Counter>,
    bpf_seconds: Family<ProgLabels, FloatCounter>,
    bpf_runs: Family<ProgLabels, Counter>,
    own_cpu: FloatCounter,
    own_rss: Gauge,
    window_seconds: FloatGauge,
    programs: Gauge,
    windows: Counter,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("sysdiet");
        let m = Metrics {
            registry: Registry::default(),
            calls: Family::default(),
            errors: Family::default(),
            seconds: Family::default(),
            active: Family::default(),
            cost: Family::default(),
            finding_calls: Family::default(),
            shown: HashSet::new(),
            lost: Family::default(),
            bpf_seconds: Family::default(),
            bpf_runs: Family::default(),
            own_cpu: FloatCounter::default(),
            own_rss: Gauge::default(),
            window_seconds: FloatGauge::default(),
            programs: Gauge::default(),
            windows: Counter::default(),
        };
        registry.register("syscalls", "System calls made, by unit, program and syscall", m.calls.clone());
        registry.register("syscall_errors", "System calls that failed, by unit, program and syscall", m.errors.clone());
        registry.register(
            "syscall_cpu_seconds",
            "CPU time in system calls, sampled at 4 kHz per CPU (strace -c's time, not wall time)",
            m.seconds.clone(),
        );
        registry.register("finding_active", "1 while a finding holds over the last window, by rule, unit and program", m.active.clone());
        registry.register(
            "finding_cost_ratio",
            "A finding's estimated saving: seconds of CPU per second its fix would save (0.01 = 1% of one CPU)",
            m.cost.clone(),
        );
        registry.register("finding_calls_per_second", "The calls a finding is about, per second", m.finding_calls.clone());
        registry.register("lost", "What went uncounted, in calls unless `what` says otherwise (see docs/metrics.md)", m.lost.clone());
        registry.register(
            "bpf_run_seconds",
            "Time sysdiet's BPF programs ran in the kernel (counted only while kernel.bpf_stats_enabled is on)",
            m.bpf_seconds.clone(),
        );
        registry.register("bpf_runs", "Runs of sysdiet's BPF programs (while kernel.bpf_stats_enabled is on)", m.bpf_runs.clone());
        registry.register("own_cpu_seconds", "CPU time of the sysdiet process itself (user + system)", m.own_cpu.clone());
        registry.register("own_resident_memory_bytes", "Resident memory of the sysdiet process", m.own_rss.clone());
        registry.register("window_seconds", "Length of the last window", m.window_seconds.clone());
        registry.register("programs", "Programs that made syscalls in the last window", m.programs.clone());
        registry.register("windows", "Windows read so far", m.windows.clone());
        Metrics { registry, ..m }
    }

    /// Adds a window: its counts to the counters, its findings as the
    /// active ones (findings that ended are removed), and sysdiet's cost.
    pub fn update(&mut self, window: &Window, findings: &[Finding], own: &OwnCost) {
        let t = &window.trace;
        for p in &t.processes {
            let Some(key) = window.program(p.pid) else { continue };
            for s in &p.syscalls {
                let l = SyscallLabels { unit: key.unit.clone(), program: key.program.clone(), syscall: s.name.clone() };
                self.calls.get_or_create(&l).inc_by(s.calls);
                if s.errors > 0 {
                    self.errors.get_or_create(&l).inc_by(s.errors);
                }
                if s.total_ns > 0 {
                    self.seconds.get_or_create(&l).inc_by(s.total_ns as f64 / 1e9);
                }
            }
        }
        let secs = (t.run.duration_ns as f64 / 1e9).max(1e-9);
        // Rows that share labels (one name, two executables) add up: the
        // labels carry no paths.
        let mut now: HashMap<FindingLabels, (f64, f64)> = HashMap::new();
        for f in findings {
            for (key, share) in window.programs_of(f.pid, &f.processes) {
                let l = FindingLabels { rule: f.id.clone(), unit: key.unit.clone(), program: key.program.clone() };
                let v = now.entry(l).or_default();
                v.0 += f.saving_ns as f64 * share / 1e9 / secs;
                v.1 += f.evidence.calls as f64 * share / secs;
            }
        }
        for (l, (cost, calls)) in &now {
            self.active.get_or_create(l).set(1);
            self.cost.get_or_create(l).set(*cost);
            self.finding_calls.get_or_create(l).set(*calls);
        }
        let now: HashSet<FindingLabels> = now.into_keys().collect();
        for gone in self.shown.difference(&now) {
            self.active.remove(gone);
            self.cost.remove(gone);
            self.finding_calls.remove(gone);
        }
        self.shown = now;
        // Every counter has a series, zero ones too: one exists before anything is lost.
        for (what, n) in t.lost.counters() {
            self.lost.get_or_create(&WhatLabels { what: what.to_string() }).inc_by(n);
        }
        for (prog, ns, runs) in &own.bpf {
            let l = ProgLabels { prog: prog.clone() };
            set_counter(&self.bpf_seconds.get_or_create(&l), *ns as f64 / 1e9);
            let c = self.bpf_runs.get_or_create(&l);
            c.inc_by(runs.saturating_sub(c.get()));
        }
        set_counter(&self.own_cpu, own.cpu_seconds);
        self.own_rss.set(own.resident_bytes as i64);
        self.window_seconds.set(secs);
        self.programs.set(t.processes.len() as i64);
        self.windows.inc();
    }

    /// The exposition, as /metrics serves it.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry).expect("writing to a String cannot fail");
        out
    }
}

/// Raises a counter to a running total read elsewhere.
fn set_counter(c: &FloatCounter, total: f64) {
    let d = total - c.get();
    if d > 0.0 {
        c.inc_by(d);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::window::{Totals, Windows};
    use crate::model::{Process, RunInfo, SyscallStats, Trace};

    fn window(calls: u64) -> Window {
        let mut t = Trace::default();
        let s = SyscallStats { calls, errors: 2, total_ns: 1000, name: "newfstatat".into(), ..SyscallStats::new(262) };
        t.processes.push(Process { pid: 40, comm: "app\"x".into(), syscalls: vec![s], ..Default::default() });
        let mut w = Windows::start(Totals::default());
        w.next(Totals::of(&t, &mut |_| "web.service".into()), RunInfo { duration_ns: 1_000_000_000, ..Default::default() })
    }

    #[test]
    fn two_executables_of_one_program_share_their_series() {
        let mut t = Trace::default();
        for (pid, exe) in [(40, "/usr/bin/app"), (41, "/opt/app")] {
            let s = SyscallStats { calls: 100, name: "newfstatat".into(), ..SyscallStats::new(262) };
            t.processes.push(Process { pid, comm: "app".into(), executable: Some(exe.into()), syscalls: vec![s], ..Default::default() });
        }
        let mut w = Windows::start(Totals::default());
        let w = w.next(Totals::of(&t, &mut |_| "web.service".into()), RunInfo { duration_ns: 1_000_000_000, ..Default::default() });
        assert_eq!(w.rows.len(), 2);
        let mut m = Metrics::new();
        let f = |pid| Finding { id: "tz-unset".into(), pid: Some(pid), saving_ns: 10_000_000, ..Default::default() };
        m.update(&w, &[f(1), f(2)], &OwnCost::default());
        let page = m.encode();
        assert!(page.contains(r#"sysdiet_syscalls_total{unit="web.service",program="app",syscall="newfstatat"} 200"#), "{page}");
        assert!(page.contains(r#"sysdiet_finding_cost_ratio{rule="tz-unset",unit="web.service",program="app"} 0.02"#), "{page}");
        assert!(!page.contains("/opt/app"), "no paths in labels: {page}");
    }

    #[test]
    fn counts_add_up_and_a_finding_that_ends_leaves_the_page() {
        let mut m = Metrics::new();
        let w = window(300);
        let f = Finding { id: "tz-unset".into(), pid: Some(1), saving_ns: 20_000_000, ..Default::default() };
        m.update(&w, std::slice::from_ref(&f), &OwnCost::default());
        m.update(&w, std::slice::from_ref(&f), &OwnCost::default());
        let page = m.encode();
        assert!(page.contains(r#"sysdiet_syscalls_total{unit="web.service",program="app\"x",syscall="newfstatat"} 600"#), "{page}");
        assert!(page.contains(r#"sysdiet_syscall_errors_total{unit="web.service",program="app\"x",syscall="newfstatat"} 4"#), "{page}");
        assert!(page.contains(r#"sysdiet_finding_active{rule="tz-unset",unit="web.service",program="app\"x"} 1"#), "{page}");
        assert!(page.contains(r#"sysdiet_finding_cost_ratio{rule="tz-unset",unit="web.service",program="app\"x"} 0.02"#), "{page}");
        assert!(page.contains(r#"sysdiet_lost_total{what="exit_records"} 0"#), "{page}");
        assert!(!page.contains("pid"), "no pid labels: {page}");
        m.update(&w, &[], &OwnCost::default());
        let page = m.encode();
        assert!(!page.contains("sysdiet_finding_active{"), "{page}");
        assert!(page.contains(r#"program="app\"x",syscall="newfstatat"} 900"#), "{page}");
    }
}
