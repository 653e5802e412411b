//! A live host in windows (sysdiet top / serve): running totals per
//! program, and what one window added to them, as a Trace with one row per
//! program that the same rules as `run` read.
//!
//! A program is (unit, comm, executable): its processes, alive or gone,
//! count together, so thousands of short processes cost one row. Totals
//! only grow; a read that lands between a thread's end and its exit record
//! sees less for a moment, so the baseline keeps the largest total seen,
//! and a window never counts anything twice. An argument key the reads
//! stop showing (its processes ended and its program's key budget was
//! spent) leaves the baseline after MISSED_READS + 1 reads: the baseline
//! is as big as what the tracer keeps, and the key, made again later,
//! starts from zero.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use super::{sort_by_cost, Argument, ArgumentStats, Environment, Histogram, Lost, OneShot, Process, RunInfo, SyscallStats, Thread, Trace};

/// What one row of `top`, one label set of `serve`, stands for.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ProgramKey {
    /// The systemd unit or container (the last part of its cgroup path);
    /// "/" for the root cgroup.
    pub unit: String,
    /// The program's name (comm).
    pub program: String,
    /// The file it runs; absent when not known (a process that ended
    /// before sysdiet saw its exec or read its /proc link).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executable: Option<String>,
}

#[derive(Debug, Clone, Default)]
struct ProgramTotals {
    syscalls: BTreeMap<u32, SyscallStats>,
    arguments: HashMap<(u32, Argument), ArgumentStats>,
    /// Baselines only: reads in a row that did not show an argument key.
    missed: HashMap<(u32, Argument), u32>,
    environment: Option<Environment>,
    /// Its processes' failed lookups of paths tried once (Trace::failed_once);
    /// in a baseline, those seen in its reads so far, the latest BASELINE_FAILURES.
    failed_once: Vec<ArgumentStats>,
    /// Its processes alive at the read.
    live: Vec<u32>,
    /// Its cgroup id (the last process read's).
    cgroup: u64,
}

/// Named failed lookups a baseline remembers per program, so that a window
/// shows those new in it: a few processes' worth.
const BASELINE_FAILURES: usize = 4 * super::FAILED_ONCE_NAMED;

/// Reads in a row that may miss a key still counted: one, while its entry
/// moves from the kernel's table to its program's fold.
const MISSED_READS: u32 = 2;

/// Running totals per program, from one read of the tracer.
#[derive(Debug, Clone, Default)]
pub struct Totals {
    programs: HashMap<ProgramKey, ProgramTotals>,
    one_shot: BTreeMap<u32, OneShot>,
    lost: Lost,
}

impl Totals {
    /// Sums a running-totals Trace by program; `unit_of` names a cgroup id.
    pub fn of(trace: &Trace, unit_of: &mut dyn FnMut(u64) -> String) -> Totals {
        let mut programs: HashMap<ProgramKey, ProgramTotals> = HashMap::new();
        let mut key_of: HashMap<u32, ProgramKey> = HashMap::new();
        for p in &trace.processes {
            let key = ProgramKey { unit: unit_of(p.cgroup), program: p.comm.clone(), executable: p.executable.clone() };
            let t = programs.entry(key.clone()).or_default();
            t.cgroup = p.cgroup;
            for s in &p.syscalls {
                t.syscalls.entry(s.nr).or_insert_with(|| SyscallStats::new(s.nr)).merge(s);
            }
            if p.exit.is_none() && p.folded == 0 {
                t.live.push(p.pid);
                if p.environment.is_some() {
                    t.environment.clone_from(&p.environment);
                }
            } else if t.environment.is_none() {
                t.environment.clone_from(&p.environment);
            }
            key_of.insert(p.pid, key);
        }
        for a in &trace.arguments {
            let Some(t) = key_of.get(&a.pid).and_then(|k| programs.get_mut(k)) else { continue };
            t.arguments.entry((a.nr, a.argument.clone())).and_modify(|m| m.merge(a)).or_insert_with(|| ArgumentStats {
                pid: 0,
                sites: Vec::new(),
                ..a.clone()
            });
        }
        for a in &trace.failed_once {
            let Some(t) = key_of.get(&a.pid).and_then(|k| programs.get_mut(k)) else { continue };
            t.failed_once.push(ArgumentStats { pid: 0, ..a.clone() });
        }
        let one_shot = trace.one_shot.iter().map(|o| (o.nr, o.clone())).collect();
        Totals { programs, one_shot, lost: trace.lost.clone() }
    }

    /// The programs with a process alive at the read, and those pids.
    pub fn live(&self) -> impl Iterator<Item = (&ProgramKey, &[u32])> {
        self.programs.iter().map(|(k, t)| (k, t.live.as_slice()))
    }
}

/// Windows one after another: each is what the totals gained over the
/// last `span` reads (1: since the last read; more: a sliding window that
/// moves one read at a time).
#[derive(Debug, Default)]
pub struct Windows {
    /// The baselines of the reads the window spans, oldest first.
    baselines: std::collections::VecDeque<Totals>,
    span: usize,
}

/// One window: a Trace whose process `pid` is program `rows[pid - 1]`.
#[derive(Debug, Clone)]
pub struct Window {
    pub trace: Trace,
    pub rows: Vec<ProgramKey>,
    /// Live processes of each row, as `rows`.
    pub live: Vec<Vec<u32>>,
}

/// A process row of a window's trace, and the program it stands for.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ProgramRow {
    /// The row's `pid` in the trace (1, 2, ...): not a process id.
    pub pid: u32,
    #[serde(flatten)]
    pub key: ProgramKey,
    /// Its processes alive at the end of the window.
    pub processes: Vec<u32>,
}

impl Window {
    /// The program a process row of the trace stands for.
    pub fn program(&self, pid: u32) -> Option<&ProgramKey> {
        self.rows.get((pid as usize).checked_sub(1)?)
    }

    pub fn program_rows(&self) -> Vec<ProgramRow> {
        self.rows
            .iter()
            .zip(&self.live)
            .enumerate()
            .map(|(i, (key, live))| ProgramRow { pid: i as u32 + 1, key: key.clone(), processes: live.clone() })
            .collect()
    }

    /// The programs a finding is about, with their shares of its calls:
    /// its row (`pid`), or the rows of a finding grouped by program name
    /// (the same comm in several units).
    pub fn programs_of(&self, pid: Option<u32>, shares: &[super::ProcessShare]) -> Vec<(&ProgramKey, f64)> {
        if let Some(p) = pid.and_then(|pid| self.program(pid)) {
            return vec![(p, 1.0)];
        }
        let total = shares.iter().map(|s| s.calls).sum::<u64>().max(1) as f64;
        shares.iter().filter_map(|s| Some((self.program(s.pid)?, s.calls as f64 / total))).collect()
    }

    /// Keeps the rows whose `keep` is true, numbered again from 1, and
    /// the totals of what is left.
    pub fn retain_rows(&mut self, keep: &[bool]) {
        let t = &mut self.trace;
        let mut new_pid = vec![0u32; keep.len()];
        let mut next = 0;
        for (i, &k) in keep.iter().enumerate() {
            if k {
                next += 1;
                new_pid[i] = next;
            }
        }
        let renumber = |pid: u32| new_pid.get((pid as usize).wrapping_sub(1)).copied().unwrap_or(0);
        t.processes.retain(|p| renumber(p.pid) != 0);
        for p in &mut t.processes {
            p.pid = renumber(p.pid);
            for th in &mut p.threads {
                th.tid = p.pid;
            }
        }
        for arguments in [&mut t.arguments, &mut t.failed_once] {
            arguments.retain(|a| renumber(a.pid) != 0);
            for a in arguments.iter_mut() {
                a.pid = renumber(a.pid);
            }
        }
        t.syscalls = syscall_totals(&t.processes);
        self.rows = kept(std::mem::take(&mut self.rows), keep);
        self.live = kept(std::mem::take(&mut self.live), keep);
        // The one-shot summary is the host's: it cannot be cut by program.
    }
}

/// One program's part of a window, before the rows are numbered.
struct RowParts {
    key: ProgramKey,
    process: Process,
    arguments: Vec<ArgumentStats>,
    failed_once: Vec<ArgumentStats>,
    live: Vec<u32>,
}

impl Windows {
    /// Starts counting from `now`: what came before is in no window.
    pub fn start(now: Totals) -> Windows {
        Windows::sliding(now, 1)
    }

    /// Windows that span the last `span` reads.
    pub fn sliding(now: Totals, span: usize) -> Windows {
        Windows { baselines: [now].into(), span: span.max(1) }
    }

    /// What the totals gained over the window ending now, as a Trace under
    /// `run` with one process per program that made calls.
    pub fn next(&mut self, now: Totals, run: RunInfo) -> Window {
        let window = self.since(&now, run);
        // With one baseline it is replaced: no copy of every key.
        let mut latest = if self.span == 1 { self.baselines.pop_back() } else { self.baselines.back().cloned() }.unwrap_or_default();
        latest.absorb(now);
        self.baselines.push_back(latest);
        while self.baselines.len() > self.span {
            self.baselines.pop_front();
        }
        window
    }

    fn since(&self, now: &Totals, run: RunInfo) -> Window {
        static EMPTY: std::sync::LazyLock<Totals> = std::sync::LazyLock::new(Totals::default);
        let baseline = self.baselines.front().unwrap_or(&EMPTY);
        let mut rows: Vec<RowParts> = Vec::new();
        for (key, t) in &now.programs {
            let before = baseline.programs.get(key);
            let syscalls: Vec<SyscallStats> =
                t.syscalls.values().map(|s| since(s, before.and_then(|b| b.syscalls.get(&s.nr)))).filter(|s| s.calls > 0).collect();
            if syscalls.is_empty() {
                continue;
            }
            let arguments =
                t.arguments.iter().map(|(k, a)| argument_since(a, before.and_then(|b| b.arguments.get(k)))).filter(|a| a.calls > 0).collect();
            let seen = |a: &ArgumentStats| before.is_some_and(|b| b.failed_once.iter().any(|o| o.nr == a.nr && o.argument == a.argument));
            let failed_once = t.failed_once.iter().filter(|a| !seen(a)).take(super::FAILED_ONCE_NAMED).cloned().collect();
            let process = Process {
                comm: key.program.clone(),
                cgroup: t.cgroup,
                executable: key.executable.clone(),
                environment: t.environment.clone(),
                syscalls,
                ..Default::default()
            };
            rows.push(RowParts { key: key.clone(), process, arguments, failed_once, live: t.live.clone() });
        }
        rows.sort_by(|a, b| a.key.cmp(&b.key));

        let mut trace = Trace { run, lost: now.lost.since(&baseline.lost), ..Default::default() };
        let (mut keys, mut live) = (Vec::new(), Vec::new());
        for (i, RowParts { key, mut process, arguments, failed_once, live: pids }) in rows.into_iter().enumerate() {
            let pid = i as u32 + 1;
            process.pid = pid;
            sort_by_cost(&mut process.syscalls);
            process.threads = vec![Thread { tid: pid, comm: process.comm.clone(), syscalls: process.syscalls.clone() }];
            trace.processes.push(process);
            trace.arguments.extend(arguments.into_iter().map(|a| ArgumentStats { pid, ..a }));
            trace.failed_once.extend(failed_once.into_iter().map(|a| ArgumentStats { pid, ..a }));
            keys.push(key);
            live.push(pids);
        }
        trace.syscalls = syscall_totals(&trace.processes);
        trace.arguments.sort_by(|a, b| b.calls.cmp(&a.calls).then(b.total_ns.cmp(&a.total_ns)));
        trace.one_shot = now
            .one_shot
            .values()
            .map(|o| {
                let b = baseline.one_shot.get(&o.nr);
                let d = |f: fn(&OneShot) -> u64| f(o).saturating_sub(b.map_or(0, f));
                OneShot { calls: d(|o| o.calls), errors: d(|o| o.errors), total_ns: d(|o| o.total_ns), ..o.clone() }
            })
            .filter(|o| o.calls > 0)
            .collect();
        Window { trace, rows: keys, live }
    }
}

impl Totals {
    /// Keeps, per counter, the larger of the two: the baseline never goes
    /// back, so counts a read missed for a moment are not counted twice.
    fn absorb(&mut self, now: Totals) {
        for (key, t) in now.programs {
            let b = self.programs.entry(key).or_default();
            for (nr, s) in t.syscalls {
                let old = b.syscalls.entry(nr).or_insert_with(|| SyscallStats::new(nr));
                *old = largest(old, &s);
            }
            for k in b.arguments.keys() {
                if !t.arguments.contains_key(k) {
                    *b.missed.entry(k.clone()).or_default() += 1;
                }
            }
            let gone: Vec<(u32, Argument)> = b.missed.iter().filter(|(_, &n)| n > MISSED_READS).map(|(k, _)| k.clone()).collect();
            for k in gone {
                b.missed.remove(&k);
                b.arguments.remove(&k);
            }
            for (k, a) in t.arguments {
                b.missed.remove(&k);
                match b.arguments.get_mut(&k) {
                    Some(old) if old.calls >= a.calls => {}
                    Some(old) => *old = a,
                    None => {
                        b.arguments.insert(k, a);
                    }
                }
            }
            for a in t.failed_once {
                if !b.failed_once.iter().any(|o| o.nr == a.nr && o.argument == a.argument) {
                    b.failed_once.push(a);
                }
            }
            let over = b.failed_once.len().saturating_sub(BASELINE_FAILURES);
            b.failed_once.drain(..over);
            b.environment = t.environment.or(b.environment.take());
            b.live = t.live;
            b.cgroup = t.cgroup;
        }
        for (nr, o) in now.one_shot {
            let old = self.one_shot.entry(nr).or_insert_with(|| OneShot { calls: 0, errors: 0, total_ns: 0, ..o.clone() });
            if o.calls >= old.calls {
                *old = o;
            }
        }
        self.lost = self.lost.largest(&now.lost);
    }
}

fn largest(a: &SyscallStats, b: &SyscallStats) -> SyscallStats {
    let mut out = if b.calls >= a.calls { b.clone() } else { a.clone() };
    out.total_ns = a.total_ns.max(b.total_ns);
    out.errors = a.errors.max(b.errors);
    for (e, n) in a.errnos.iter().chain(&b.errnos) {
        let v = out.errnos.entry(e.clone()).or_default();
        *v = (*v).max(*n);
    }
    out
}

/// A syscall's counts since `before`; the largest call time seen stays.
fn since(now: &SyscallStats, before: Option<&SyscallStats>) -> SyscallStats {
    let Some(b) = before else { return SyscallStats { sites: Vec::new(), ..now.clone() } };
    let errnos =
        now.errnos.iter().map(|(e, n)| (e.clone(), n.saturating_sub(b.errnos.get(e).copied().unwrap_or(0)))).filter(|(_, n)| *n > 0).collect();
    SyscallStats {
        calls: now.calls.saturating_sub(b.calls),
        errors: now.errors.saturating_sub(b.errors),
        total_ns: now.total_ns.saturating_sub(b.total_ns),
        min_ns: 0,
        errnos,
        sites: Vec::new(),
        ..now.clone()
    }
}

fn argument_since(now: &ArgumentStats, before: Option<&ArgumentStats>) -> ArgumentStats {
    let Some(b) = before else { return now.clone() };
    let hist = |n: &Option<Histogram>, b: &Option<Histogram>| {
        n.as_ref().map(|n| {
            let old = b.as_ref().map_or(&[][..], |b| &b.buckets[..]);
            Histogram::from_buckets(n.buckets.iter().enumerate().map(|(i, v)| v.saturating_sub(old.get(i).copied().unwrap_or(0))).collect())
        })
    };
    ArgumentStats {
        calls: now.calls.saturating_sub(b.calls),
        errors: now.errors.saturating_sub(b.errors),
        total_ns: now.total_ns.saturating_sub(b.total_ns),
        requested: hist(&now.requested, &b.requested),
        returned: hist(&now.returned, &b.returned),
        ..now.clone()
    }
}

/// The per-syscall totals of the rows, most time first.
fn syscall_totals(processes: &[Process]) -> Vec<SyscallStats> {
    let mut totals: BTreeMap<u32, SyscallStats> = BTreeMap::new();
    for s in processes.iter().flat_map(|p| &p.syscalls) {
        totals.entry(s.nr).or_insert_with(|| SyscallStats::new(s.nr)).merge(s);
    }
    let mut totals: Vec<SyscallStats> = totals.into_values().collect();
    sort_by_cost(&mut totals);
    totals
}

/// The items of `v` whose `keep` is true.
fn kept<T>(v: Vec<T>, keep: &[bool]) -> Vec<T> {
    v.into_iter().zip(keep).filter(|(_, &k)| k).map(|(x, _)| x).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trace(processes: &[(u32, &str, u64, u64)], path_calls: u64) -> Trace {
        let mut t = Trace::default();
        for &(pid, comm, cgroup, calls) in processes {
            let s = SyscallStats { calls, errors: 1, total_ns: calls * 10, name: "newfstatat".into(), ..SyscallStats::new(262) };
            t.processes.push(Process { pid, comm: comm.into(), cgroup, syscalls: vec![s], ..Default::default() });
        }
        let path = Argument::Path { path: Some("/etc/localtime".into()), dirfd: None, null: false, cut: false, raw: None };
        t.arguments.push(ArgumentStats {
            pid: processes[0].0,
            syscall: "newfstatat".into(),
            nr: 262,
            argument: path,
            calls: path_calls,
            errors: 0,
            total_ns: 0,
            requested: None,
            returned: None,
            sites: vec![],
        });
        t
    }

    fn unit(id: u64) -> String {
        if id == 0 {
            "/".into()
        } else {
            format!("u{id}.service")
        }
    }

    #[test]
    fn a_window_is_what_the_programs_gained_and_processes_of_a_program_count_together() {
        let mut w = Windows::start(Totals::of(&trace(&[(10, "app", 0, 100), (11, "app", 0, 50), (12, "db", 7, 5)], 80), &mut unit));
        let now = trace(&[(10, "app", 0, 300), (11, "app", 0, 50), (13, "app", 0, 20), (12, "db", 7, 5)], 200);
        let win = w.next(Totals::of(&now, &mut unit), RunInfo::default());
        // db made nothing new: no row.
        assert_eq!(win.rows, vec![ProgramKey { unit: "/".into(), program: "app".into(), executable: None }]);
        assert_eq!(win.trace.processes[0].pid, 1);
        assert_eq!(win.trace.syscalls[0].calls, 220);
        assert_eq!(win.trace.arguments[0].calls, 120);
        assert_eq!(win.trace.arguments[0].pid, 1);
        assert_eq!(win.live[0].len(), 3);
        assert_eq!(win.program(1).map(|k| k.unit.as_str()), Some("/"));
    }

    #[test]
    fn a_window_names_the_failed_lookups_new_in_it() {
        let failed = |pid, path: &str| ArgumentStats {
            pid,
            syscall: "openat".into(),
            nr: 257,
            argument: Argument::Path { path: Some(path.into()), dirfd: None, null: false, cut: false, raw: None },
            calls: 1,
            errors: 1,
            total_ns: 0,
            requested: None,
            returned: None,
            sites: vec![],
        };
        let mut w = Windows::start(Totals::default());
        let mut t = trace(&[(10, "app", 0, 100), (12, "db", 7, 5)], 80);
        t.failed_once = vec![failed(10, "/opt/a/tls/libm.so.6"), failed(12, "/opt/b/libz.so.1")];
        let win = w.next(Totals::of(&t, &mut unit), RunInfo::default());
        let named = |win: &Window| win.trace.failed_once.iter().map(|a| (a.pid, a.calls)).collect::<Vec<_>>();
        assert_eq!(named(&win), vec![(1, 1), (2, 1)], "each under its program's row");
        // The next read: app's process 11 starts and fails one lookup more.
        let mut t = trace(&[(10, "app", 0, 200), (11, "app", 0, 10), (12, "db", 7, 10)], 80);
        t.failed_once = vec![failed(10, "/opt/a/tls/libm.so.6"), failed(11, "/opt/a/x86_64/libm.so.6"), failed(12, "/opt/b/libz.so.1")];
        let mut win = w.next(Totals::of(&t, &mut unit), RunInfo::default());
        assert_eq!(named(&win), vec![(1, 1)], "only the new one");
        win.retain_rows(&[false, true]);
        assert!(win.trace.failed_once.is_empty(), "app's went with its row");
    }

    #[test]
    fn rows_left_out_take_their_arguments_and_totals_with_them() {
        let mut w = Windows::start(Totals::default());
        let mut win = w.next(Totals::of(&trace(&[(10, "app", 0, 100), (12, "db", 7, 5)], 80), &mut unit), RunInfo::default());
        assert_eq!(win.rows.len(), 2);
        win.retain_rows(&[false, true]);
        assert_eq!(win.rows, vec![ProgramKey { unit: "u7.service".into(), program: "db".into(), executable: None }]);
        assert_eq!(win.trace.processes[0].pid, 1);
        assert_eq!(win.trace.syscalls[0].calls, 5);
        assert!(win.trace.arguments.is_empty(), "app's path went with it");
        assert_eq!(win.live.len(), 1);
    }

    #[test]
    fn a_total_read_low_for_a_moment_is_not_counted_twice() {
        let mut w = Windows::start(Totals::default());
        let win = w.next(Totals::of(&trace(&[(10, "app", 0, 100)], 10), &mut unit), RunInfo::default());
        assert_eq!(win.trace.syscalls[0].calls, 100);
        // A thread between its end and its exit record: its calls unseen.
        let win = w.next(Totals::of(&trace(&[(10, "app", 0, 40)], 10), &mut unit), RunInfo::default());
        assert!(win.trace.syscalls.is_empty());
        // Back, with 5 more: 5, not 65.
        let win = w.next(Totals::of(&trace(&[(10, "app", 0, 105)], 10), &mut unit), RunInfo::default());
        assert_eq!(win.trace.syscalls[0].calls, 5);
    }

    #[test]
    fn a_key_the_reads_stop_showing_leaves_the_baseline_and_counts_from_zero_when_made_again() {
        let mut w = Windows::start(Totals::default());
        let mut calls = 100;
        let mut read = |path_calls: Option<u64>| {
            // The program makes calls in every window: its row is there.
            calls += 100;
            let mut t = trace(&[(10, "app", 0, calls)], path_calls.unwrap_or(0));
            if path_calls.is_none() {
                t.arguments.clear();
            }
            let win = w.next(Totals::of(&t, &mut unit), RunInfo::default());
            win.trace.arguments.first().map_or(0, |a| a.calls)
        };
        assert_eq!(read(Some(80)), 80);
        // Missing for one read (a sweep in between): still known, not counted again.
        assert_eq!(read(None), 0);
        assert_eq!(read(Some(80)), 0);
        // Gone (its process ended, its program's budget spent)...
        for _ in 0..=MISSED_READS {
            assert_eq!(read(None), 0);
        }
        // ...and made again by a new process: its 5 calls, not 0.
        assert_eq!(read(Some(5)), 5);
    }

    #[test]
    fn a_sliding_window_spans_the_last_reads() {
        let mut w = Windows::sliding(Totals::default(), 2);
        let mut at = |calls| w.next(Totals::of(&trace(&[(10, "app", 0, calls)], 1), &mut unit), RunInfo::default()).trace.syscalls[0].calls;
        assert_eq!(at(100), 100);
        assert_eq!(at(150), 150, "two reads: 0 -> 150");
        assert_eq!(at(160), 60, "100 -> 160");
        assert_eq!(at(300), 150, "150 -> 300");
    }

    #[test]
    fn lost_counters_are_windowed_field_by_field() {
        let a = Lost { exit_records: 5, compat_syscalls: 2, ..Default::default() };
        let b = Lost { exit_records: 9, environments: 1, ..Default::default() };
        assert_eq!(b.since(&a), Lost { exit_records: 4, environments: 1, ..Default::default() });
        assert_eq!(a.largest(&b), Lost { exit_records: 9, compat_syscalls: 2, environments: 1, ..Default::default() });
    }
}
