//! Assembles a Trace from per-thread records, whichever tracer made them.

use super::*;
use std::collections::{BTreeMap, HashMap};

#[derive(Debug, Default)]
pub struct TraceBuilder {
    /// (tgid, tid) -> its stats, a row per syscall
    threads: BTreeMap<(u32, u32), Vec<SyscallStats>>,
    /// (tgid, nr) -> errno name -> count
    errnos: BTreeMap<(u32, u32), BTreeMap<String, u64>>,
    /// tid -> what is known of the task
    tasks: BTreeMap<u32, TaskRecord>,
    arguments: Vec<ArgumentStats>,
    /// Failed calls of paths seen once, by name, as they came.
    failed_once: Vec<ArgumentStats>,
    /// Keys a tracer saw once in its part of a run (add_single).
    singles: Vec<ArgumentStats>,
    /// nr -> calls whose argument was seen once
    one_shot: BTreeMap<u32, OneShot>,
    /// (tgid, nr) -> the stack samples of those calls
    samples: BTreeMap<(u32, u32), Vec<SampleRecord>>,
    call_sites: Vec<CallSite>,
    sampling: Option<Sampling>,
    user_cpu_ns: u64,
    /// pid -> the row its counts went to (processes folded by program).
    remap: HashMap<u32, u32>,
    /// row -> how many processes it stands for
    folded: HashMap<u32, u64>,
    /// pid -> its environment at its exec
    environments: HashMap<u32, Environment>,
}

/// One stack sample, its stack already resolved to a call site.
#[derive(Debug, Clone)]
pub struct SampleRecord {
    pub tgid: u32,
    pub nr: u32,
    /// The call's argument key, for syscalls that have one.
    pub argument: Option<Argument>,
    /// Index into the call sites given to `set_call_sites`.
    pub site: usize,
    /// How many calls the sample stands for: the thread's calls since its
    /// previous sample (summed, for samples of one site summed together).
    pub period: u64,
    /// The call's time in the kernel (weighted by period, when summed).
    pub ns: u64,
    /// How many samples this is.
    pub samples: u64,
}

#[derive(Debug, Clone, Default)]
pub struct TaskRecord {
    pub tgid: u32,
    pub ppid: u32,
    pub comm: String,
    pub exit: Option<Exit>,
    /// Its cgroup v2 id; 0 when not known.
    pub cgroup: u64,
    /// The file it runs; None when not known.
    pub executable: Option<String>,
}

impl TraceBuilder {
    pub fn add_syscall(&mut self, tgid: u32, tid: u32, stats: SyscallStats) {
        // A thread's rows in a Vec, not a map: each thread comes here once
        // per syscall it made, and makes a few dozen kinds at most.
        let rows = self.threads.entry((tgid, tid)).or_default();
        match rows.iter_mut().find(|r| r.nr == stats.nr) {
            Some(row) => row.merge(&stats),
            None if stats.calls > 0 => rows.push(stats),
            None => rows.push(SyscallStats::new(stats.nr)),
        }
    }

    pub fn add_errno(&mut self, tgid: u32, nr: u32, errno: &str, count: u64) {
        *self.errnos.entry((tgid, nr)).or_default().entry(errno.to_string()).or_default() += count;
    }

    /// What is known of task `tid`; a second record of it (one tracer
    /// handed the task to another) fills in what the first lacked.
    pub fn add_task(&mut self, tid: u32, task: TaskRecord) {
        let merged = match self.tasks.remove(&tid) {
            None => task,
            Some(old) => TaskRecord {
                tgid: if task.tgid != 0 { task.tgid } else { old.tgid },
                ppid: if task.ppid != 0 { task.ppid } else { old.ppid },
                comm: if task.comm.is_empty() { old.comm } else { task.comm },
                exit: task.exit.or(old.exit),
                cgroup: if task.cgroup != 0 { task.cgroup } else { old.cgroup },
                executable: task.executable.or(old.executable),
            },
        };
        self.tasks.insert(tid, merged);
    }

    pub fn add_argument(&mut self, stats: ArgumentStats) {
        self.arguments.push(stats);
    }

    /// A failed call of a path its process tried once (counted by
    /// add_one_shot too), in the order the process made them.
    pub fn add_failed_once(&mut self, stats: ArgumentStats) {
        self.failed_once.push(stats);
    }

    /// A key a tracer saw once in its part of a run, another tracer
    /// counting the rest: a row if the other has a row of it, else a call
    /// seen once (add_one_shot).
    pub fn add_single(&mut self, stats: ArgumentStats) {
        self.singles.push(stats);
    }

    pub fn add_one_shot(&mut self, nr: u32, calls: u64, errors: u64, total_ns: u64) {
        let o = self.one_shot.entry(nr).or_insert_with(|| OneShot { syscall: crate::linux::syscalls::name(nr), nr, ..Default::default() });
        o.calls += calls;
        o.errors += errors;
        o.total_ns += total_ns;
    }

    /// CPU time the traced tasks spent outside syscalls.
    pub fn add_user_cpu(&mut self, ns: u64) {
        self.user_cpu_ns += ns;
    }

    /// Where the processes folded into a program's row went: samples,
    /// which name pids, follow their counts.
    pub fn set_remap(&mut self, remap: HashMap<u32, u32>) {
        self.remap = remap;
    }

    /// What `pid`'s environment was at its exec.
    pub fn set_environment(&mut self, pid: u32, env: Environment) {
        self.environments.insert(pid, env);
    }

    /// Row `pid` stands for `processes` exited processes of one program.
    pub fn set_folded(&mut self, pid: u32, processes: u64) {
        self.folded.insert(pid, processes);
    }

    pub fn add_sample(&mut self, mut sample: SampleRecord) {
        if let Some(&row) = self.remap.get(&sample.tgid) {
            sample.tgid = row;
        }
        self.samples.entry((sample.tgid, sample.nr)).or_default().push(sample);
    }

    pub fn set_call_sites(&mut self, sites: Vec<CallSite>, sampling: Sampling) {
        self.call_sites = sites;
        self.sampling = Some(sampling);
    }

    pub fn finish(self, mut run: RunInfo, lost: Lost) -> Trace {
        run.user_cpu_ns += self.user_cpu_ns;
        let mut processes: BTreeMap<u32, Process> = BTreeMap::new();
        let mut environments = self.environments;
        for ((tgid, tid), mut syscalls) in self.threads {
            let task = self.tasks.get(&tid);
            let leader = self.tasks.get(&tgid);
            let p = processes.entry(tgid).or_insert_with(|| Process {
                pid: tgid,
                ppid: leader.or(task).map_or(0, |t| t.ppid),
                comm: leader.or(task).map_or_else(String::new, |t| t.comm.clone()),
                exit: leader.and_then(|t| t.exit),
                cgroup: leader.or(task).map_or(0, |t| t.cgroup),
                executable: leader.or(task).and_then(|t| t.executable.clone()),
                folded: self.folded.get(&tgid).copied().unwrap_or(0),
                environment: environments.remove(&tgid),
                ..Default::default()
            });
            sort_by_cost(&mut syscalls);
            p.threads.push(Thread { tid, comm: task.map_or_else(String::new, |t| t.comm.clone()), syscalls });
        }

        let mut totals: BTreeMap<u32, SyscallStats> = BTreeMap::new();
        for p in processes.values_mut() {
            let mut per_process: BTreeMap<u32, SyscallStats> = BTreeMap::new();
            for s in p.threads.iter().flat_map(|t| &t.syscalls) {
                per_process.entry(s.nr).or_insert_with(|| SyscallStats::new(s.nr)).merge(s);
            }
            for (nr, s) in per_process.iter_mut() {
                if let Some(e) = self.errnos.get(&(p.pid, *nr)) {
                    s.errnos = e.clone();
                }
                if let Some(samples) = self.samples.get(&(p.pid, *nr)) {
                    s.sites = shares(s.calls, s.total_ns, samples.iter());
                }
                let total = totals.entry(*nr).or_insert_with(|| SyscallStats::new(*nr));
                total.merge(s);
                callsite::merge_shares(&mut total.sites, &s.sites);
            }
            p.syscalls = per_process.into_values().collect();
            sort_by_cost(&mut p.syscalls);
        }
        let mut syscalls: Vec<SyscallStats> = totals.into_values().collect();
        sort_by_cost(&mut syscalls);

        // Most calls first; rows alike in both by key, so that a run's
        // report is the same whatever order the tracer read them in.
        let mut rows = self.arguments;
        let mut one_shot = self.one_shot;
        if !self.singles.is_empty() {
            let known: foldhash::HashSet<(u32, u32, &Argument)> = rows.iter().map(argument_key).collect();
            let (again, once): (Vec<ArgumentStats>, Vec<ArgumentStats>) = self.singles.into_iter().partition(|s| known.contains(&argument_key(s)));
            for o in once {
                let e = one_shot.entry(o.nr).or_insert_with(|| OneShot { syscall: o.syscall.clone(), nr: o.nr, ..Default::default() });
                e.calls += o.calls;
                e.errors += o.errors;
                e.total_ns += o.total_ns;
            }
            rows.extend(again);
        }
        let mut arguments = sorted_by(merge_arguments(rows), |a, b| {
            b.calls.cmp(&a.calls).then(b.total_ns.cmp(&a.total_ns)).then_with(|| argument_key(a).cmp(&argument_key(b)))
        });
        // Each sample is looked at once: indexed by its full key, so the
        // work grows with samples + arguments, not their product.
        let mut by_argument: foldhash::HashMap<(u32, u32, &Argument), Vec<&SampleRecord>> = foldhash::HashMap::default();
        for s in self.samples.values().flatten() {
            if let Some(arg) = &s.argument {
                by_argument.entry((s.tgid, s.nr, arg)).or_default().push(s);
            }
        }
        for a in &mut arguments {
            if let Some(mine) = by_argument.get(&argument_key(a)) {
                a.sites = shares(a.calls, a.total_ns, mine.iter().copied());
            }
        }
        let one_shot = one_shot.into_values().filter(|o| o.calls > 0).collect();
        let failed_once = named_failures(self.failed_once, &arguments);

        Trace {
            run,
            lost,
            syscalls,
            processes: processes.into_values().collect(),
            arguments,
            one_shot,
            failed_once,
            call_sites: self.call_sites,
            sampling: self.sampling,
        }
    }
}

/// The call sites' shares of an exact count, from its samples, each
/// weighing the calls it stands for.
fn shares<'a>(calls: u64, total_ns: u64, samples: impl Iterator<Item = &'a SampleRecord>) -> Vec<SiteShare> {
    let weights: Vec<(usize, f64, f64, u64)> = samples
        .map(|s| {
            #[cfg(test)]
            tests::OPS.with(|n| n.set(n.get() + 1));
            (s.site, s.period as f64, (s.period * s.ns) as f64, s.samples)
        })
        .collect();
    callsite::apportion(calls, total_ns, &weights)
}

/// The named failed lookups of paths tried only once, at most
/// FAILED_ONCE_NAMED a process, in the order they came: one whose key came
/// to be repeated is in `arguments` instead.
fn named_failures(failures: Vec<ArgumentStats>, arguments: &[ArgumentStats]) -> Vec<ArgumentStats> {
    // Which to keep is decided on borrowed keys: no path is copied.
    let keep: Vec<bool> = {
        let repeated: foldhash::HashSet<(u32, u32, &Argument)> = arguments.iter().map(argument_key).collect();
        let mut seen: foldhash::HashSet<(u32, u32, &Argument)> = foldhash::HashSet::default();
        let mut per_pid: foldhash::HashMap<u32, usize> = foldhash::HashMap::default();
        failures
            .iter()
            .map(|a| {
                let key = argument_key(a);
                matches!(&a.argument, Argument::Path { path: Some(_), .. }) && !repeated.contains(&key) && seen.insert(key) && {
                    let n = per_pid.entry(a.pid).or_default();
                    *n += 1;
                    *n <= FAILED_ONCE_NAMED
                }
            })
            .collect()
    };
    let kept: Vec<ArgumentStats> = failures.into_iter().zip(keep).filter_map(|(a, keep)| keep.then_some(a)).collect();
    sorted_by(kept, |a, b| a.pid.cmp(&b.pid))
}

/// `rows` sorted by `cmp`, stably, each row moved once: sorted in place,
/// a row of an argument's size moves about log2(n) times.
fn sorted_by<T>(rows: Vec<T>, mut cmp: impl FnMut(&T, &T) -> std::cmp::Ordering) -> Vec<T> {
    let mut order: Vec<usize> = (0..rows.len()).collect();
    order.sort_by(|&i, &j| cmp(&rows[i], &rows[j]));
    let mut rows: Vec<Option<T>> = rows.into_iter().map(Some).collect();
    order.into_iter().filter_map(|i| rows[i].take()).collect()
}

/// An argument row's key: one row per key after `merge_arguments`.
fn argument_key(a: &ArgumentStats) -> (u32, u32, &Argument) {
    (a.pid, a.nr, &a.argument)
}

/// Merges entries with the same (pid, syscall, argument) into the first of
/// them: a tracer may report one per CPU or per reading.
fn merge_arguments(args: Vec<ArgumentStats>) -> Vec<ArgumentStats> {
    // Each entry's first, found by hashing the keys in place: no key is
    // copied, no entry moved (a build's rows are tens of thousands).
    let firsts: Vec<usize> = {
        let mut first: foldhash::HashMap<(u32, u32, &Argument), usize> = foldhash::HashMap::default();
        first.reserve(args.len());
        args.iter().enumerate().map(|(i, a)| *first.entry(argument_key(a)).or_insert(i)).collect()
    };
    if firsts.iter().enumerate().all(|(i, &first)| i == first) {
        return args;
    }
    let mut rows: Vec<Option<ArgumentStats>> = args.into_iter().map(Some).collect();
    for (i, &first) in firsts.iter().enumerate() {
        if first != i {
            let later = rows[i].take();
            if let (Some(later), Some(row)) = (later, rows[first].as_mut()) {
                row.merge(&later);
            }
        }
    }
    rows.into_iter().flatten().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    thread_local! {
        /// Samples weighed by `shares`: the builder's work, counted.
        pub static OPS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    }

    fn path_row(path: &str, calls: u64) -> ArgumentStats {
        ArgumentStats {
            pid: 1,
            syscall: "openat".into(),
            nr: 257,
            argument: Argument::Path { path: Some(path.into()), dirfd: None, null: false, cut: false, raw: None },
            calls,
            errors: 0,
            total_ns: 0,
            requested: None,
            returned: None,
            sites: Vec::new(),
        }
    }

    /// A hand-over: a key ptrace saw once joins BPF's row of it; one BPF
    /// has no row of stays a call seen once.
    #[test]
    fn a_key_seen_once_before_a_hand_over_joins_the_row_after_it() {
        let mut b = TraceBuilder::default();
        b.add_single(path_row("/etc/list", 1));
        b.add_single(path_row("/etc/once", 1));
        b.add_argument(path_row("/etc/list", 299));
        let t = b.finish(RunInfo::default(), Lost::default());
        let rows: Vec<(u64, &Argument)> = t.arguments.iter().map(|a| (a.calls, &a.argument)).collect();
        assert_eq!(rows.len(), 1, "{rows:?}");
        assert_eq!(rows[0].0, 300);
        assert_eq!(t.one_shot.iter().map(|o| (o.nr, o.calls)).collect::<Vec<_>>(), [(257, 1)]);
    }

    /// A task both tracers knew: the second record fills in what the first
    /// lacked, and says what it knows.
    #[test]
    fn a_task_handed_over_keeps_what_each_tracer_knew_of_it() {
        let mut b = TraceBuilder::default();
        b.add_task(5, TaskRecord { tgid: 5, ppid: 1, comm: "sh".into(), executable: Some("/bin/sh".into()), ..Default::default() });
        b.add_task(5, TaskRecord { tgid: 5, comm: "sh".into(), exit: Some(Exit::Code { code: 3 }), cgroup: 9, ..Default::default() });
        b.add_syscall(5, 5, stats(39, 1, 0, 0));
        let t = b.finish(RunInfo::default(), Lost::default());
        let p = &t.processes[0];
        assert_eq!((p.ppid, p.executable.as_deref(), p.exit, p.cgroup), (1, Some("/bin/sh"), Some(Exit::Code { code: 3 }), 9));
    }

    /// n distinct path arguments in one process, each with one sample.
    fn walk(n: u64) -> u64 {
        let mut b = TraceBuilder::default();
        b.add_syscall(1, 1, stats(262, 2 * n, 0, 2 * n));
        for i in 0..n {
            let argument = Argument::Path { path: Some(format!("/d/{i}")), dirfd: None, null: false, cut: false, raw: None };
            b.add_argument(ArgumentStats {
                pid: 1,
                syscall: "newfstatat".into(),
                nr: 262,
                argument: argument.clone(),
                calls: 2,
                errors: 0,
                total_ns: 2,
                requested: None,
                returned: None,
                sites: Vec::new(),
            });
            b.add_sample(SampleRecord { tgid: 1, nr: 262, argument: Some(argument), site: (i % 7) as usize, period: 2, ns: 1, samples: 1 });
        }
        OPS.with(|o| o.set(0));
        let t = b.finish(RunInfo::default(), Lost::default());
        assert_eq!(t.arguments.len() as u64, n);
        OPS.with(|o| o.get())
    }

    #[test]
    fn builder_work_grows_linearly() {
        let (small, large) = (walk(2_000), walk(20_000));
        // Each sample weighed for its argument and for its syscall: 2 per
        // sample, whatever n is. A quadratic builder would do 100x more.
        assert_eq!(small, 4_000);
        assert_eq!(large, 40_000);
    }

    fn stats(nr: u32, calls: u64, errors: u64, ns: u64) -> SyscallStats {
        SyscallStats { calls, errors, total_ns: ns, min_ns: ns / calls.max(1), max_ns: ns, ..SyscallStats::new(nr) }
    }

    #[test]
    fn threads_roll_up_into_processes_and_totals() {
        let mut b = TraceBuilder::default();
        b.add_syscall(10, 10, stats(0, 5, 0, 500));
        b.add_syscall(10, 11, stats(0, 3, 1, 900));
        b.add_syscall(20, 20, stats(1, 2, 0, 100));
        b.add_errno(10, 0, "EBADF", 1);
        b.add_task(10, TaskRecord { tgid: 10, ppid: 1, comm: "app".into(), exit: Some(Exit::Code { code: 0 }), cgroup: 0, executable: None });
        let t = b.finish(RunInfo::default(), Lost::default());
        assert_eq!(t.processes.len(), 2);
        let p = &t.processes[0];
        assert_eq!((p.pid, p.comm.as_str(), p.threads.len()), (10, "app", 2));
        assert_eq!(p.syscalls[0].calls, 8);
        assert_eq!(p.syscalls[0].errnos["EBADF"], 1);
        let read = t.syscall("read").unwrap();
        assert_eq!((read.calls, read.errors, read.total_ns, read.max_ns), (8, 1, 1400, 900));
        assert_eq!(t.total_calls(), 10);
    }

    #[test]
    fn per_cpu_argument_entries_merge() {
        let mut b = TraceBuilder::default();
        let arg = |calls| ArgumentStats {
            pid: 1,
            syscall: "write".into(),
            nr: 1,
            argument: Argument::Fd { fd: 1 },
            calls,
            errors: 0,
            total_ns: 10,
            requested: Some(Histogram::from_buckets(vec![0, calls])),
            returned: None,
            sites: Vec::new(),
        };
        b.add_argument(arg(2));
        b.add_argument(arg(3));
        let t = b.finish(RunInfo::default(), Lost::default());
        assert_eq!(t.arguments.len(), 1);
        assert_eq!(t.arguments[0].calls, 5);
        assert_eq!(t.arguments[0].requested.as_ref().unwrap().buckets, vec![0, 5]);
    }

    #[test]
    fn one_keys_entries_merge_wherever_they_come() {
        let mut b = TraceBuilder::default();
        let arg = |pid, fd, calls| ArgumentStats {
            pid,
            syscall: "close".into(),
            nr: 3,
            argument: Argument::Fd { fd },
            calls,
            errors: 0,
            total_ns: 0,
            requested: None,
            returned: None,
            sites: Vec::new(),
        };
        // A process's entry, another's of the same fd, then the first's again
        // (a slot flushed, then its swept entry).
        for (pid, fd, calls) in [(1, 4, 2), (2, 4, 7), (1, 5, 1), (1, 4, 3), (2, 4, 1)] {
            b.add_argument(arg(pid, fd, calls));
        }
        let t = b.finish(RunInfo::default(), Lost::default());
        let rows: Vec<(u32, &Argument, u64)> = t.arguments.iter().map(|a| (a.pid, &a.argument, a.calls)).collect();
        let fd = |fd| Argument::Fd { fd };
        assert_eq!(rows, [(2, &fd(4), 8), (1, &fd(4), 5), (1, &fd(5), 1)]);
    }

    #[test]
    fn rows_alike_in_counts_come_in_key_order() {
        let rows = |order: &[(u32, i64)]| {
            let mut b = TraceBuilder::default();
            for &(pid, fd) in order {
                let argument = Argument::Fd { fd };
                b.add_argument(ArgumentStats {
                    pid,
                    syscall: "close".into(),
                    nr: 3,
                    argument,
                    calls: 1,
                    errors: 0,
                    total_ns: 5,
                    requested: None,
                    returned: None,
                    sites: Vec::new(),
                });
            }
            let t = b.finish(RunInfo::default(), Lost::default());
            t.arguments.iter().map(|a| (a.pid, a.argument.clone())).collect::<Vec<_>>()
        };
        let keys: Vec<(u32, i64)> = (0..40).map(|i| (1 + i % 3, 100 - i as i64)).collect();
        let mut sorted = keys.clone();
        sorted.sort_unstable();
        let expected: Vec<(u32, Argument)> = sorted.iter().map(|&(pid, fd)| (pid, Argument::Fd { fd })).collect();
        assert_eq!(rows(&keys), expected);
        assert_eq!(rows(&keys.iter().rev().copied().collect::<Vec<_>>()), expected);
    }

    #[test]
    fn samples_share_exact_counts_among_sites() {
        let mut b = TraceBuilder::default();
        b.add_syscall(10, 10, stats(4, 1000, 0, 2000));
        b.add_syscall(10, 11, stats(4, 500, 0, 1000));
        b.add_syscall(20, 20, stats(4, 7, 0, 7));
        let fd = |fd| Some(Argument::Fd { fd });
        let sample = |tgid, argument, site, period| SampleRecord { tgid, nr: 4, argument, site, period, ns: 2, samples: 1 };
        b.add_sample(sample(10, fd(3), 0, 4));
        b.add_sample(sample(10, fd(3), 0, 4));
        b.add_sample(sample(10, fd(5), 1, 8));
        b.add_sample(sample(10, fd(7), 1, 1));
        b.add_sample(sample(20, fd(3), 2, 1));
        b.add_argument(ArgumentStats {
            pid: 10,
            syscall: "stat".into(),
            nr: 4,
            argument: Argument::Fd { fd: 7 },
            calls: 3,
            errors: 0,
            total_ns: 6,
            requested: None,
            returned: None,
            sites: Vec::new(),
        });
        let t = b.finish(RunInfo::default(), Lost::default());
        let p = &t.processes[0].syscalls[0];
        assert_eq!(p.sites.iter().map(|s| (s.site, s.calls)).collect::<Vec<_>>(), vec![(1, 794), (0, 706)]);
        let total = t.syscall("stat").unwrap();
        assert_eq!(total.sites.iter().map(|s| s.calls).sum::<u64>(), 1507);
        assert_eq!(total.sites.iter().find(|s| s.site == 2).unwrap().calls, 7);
        assert_eq!(t.arguments[0].sites, vec![SiteShare { site: 1, calls: 3, total_ns: 6, samples: 1 }]);
    }

    #[test]
    fn failed_lookups_seen_once_are_named_a_few_per_process() {
        let lookup = |pid, path: Option<String>, calls| ArgumentStats {
            pid,
            syscall: "openat".into(),
            nr: 257,
            argument: Argument::Path { path, dirfd: None, null: false, cut: false, raw: None },
            calls,
            errors: calls,
            total_ns: 0,
            requested: None,
            returned: None,
            sites: Vec::new(),
        };
        let mut b = TraceBuilder::default();
        b.add_argument(lookup(20, Some("/again".into()), 2));
        b.add_failed_once(lookup(20, Some("/again".into()), 1));
        b.add_failed_once(lookup(20, None, 1));
        for i in 0..FAILED_ONCE_NAMED + 4 {
            b.add_failed_once(lookup(10, Some(format!("/d/{i}")), 1));
        }
        b.add_failed_once(lookup(10, Some("/d/0".into()), 1));
        b.add_failed_once(lookup(20, Some("/once".into()), 1));
        let t = b.finish(RunInfo::default(), Lost::default());
        let named = |pid| {
            t.failed_once
                .iter()
                .filter(|a| a.pid == pid)
                .filter_map(|a| match &a.argument {
                    Argument::Path { path, .. } => path.clone(),
                    _ => None,
                })
                .collect::<Vec<_>>()
        };
        let first: Vec<String> = (0..FAILED_ONCE_NAMED).map(|i| format!("/d/{i}")).collect();
        assert_eq!(named(10), first, "the first ones, each once, in their order");
        assert_eq!(named(20), vec!["/once"], "not one that was repeated, nor one without its path");
        assert_eq!((0..100_000).filter(|&i| named_failure(i)).count(), FAILED_ONCE_NAMED, "the sample fits the bound");
    }
}
