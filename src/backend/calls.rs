//! Counts calls one by one, for the tracers that see each call in user
//! space (a strace log): per thread and syscall, per errno, per argument
//! key, and per call site when the call's stack is known. BPF counts the
//! same things in the kernel; both hand a TraceBuilder the same records.

use std::collections::{BTreeMap, HashMap};

use crate::linux::syscalls;
use crate::model::builder::{SampleRecord, TaskRecord, TraceBuilder};
use crate::model::{Argument, ArgumentStats, Histogram, SyscallStats};

/// Distinct (thread, syscall, argument) keys kept before new ones are only
/// summarised: a bound on memory for logs of any size.
const MAX_KEYS: usize = 2_000_000;

/// One finished call.
#[derive(Debug, Clone, Default)]
pub struct Call {
    pub tid: u32,
    pub nr: u32,
    /// The errno name of a failed call.
    pub errno: Option<String>,
    pub ns: u64,
    pub argument: Option<Argument>,
    /// read/write family: bytes asked for and moved.
    pub requested: Option<u64>,
    pub returned: Option<u64>,
    /// Index of the call's site, when its stack is known.
    pub site: Option<usize>,
}

#[derive(Debug, Default, Clone)]
struct KeyStats {
    /// How many keys were made before this one, in the whole run: failed
    /// lookups of paths seen once are sampled in the order they were made.
    first: u64,
    calls: u64,
    errors: u64,
    ns: u64,
    requested: Vec<u64>,
    returned: Vec<u64>,
}

/// (tid, nr, argument, site): the calls of one key made at one site.
type SiteKey = (u32, u32, Option<Argument>, usize);

#[derive(Debug, Default)]
pub struct Calls {
    /// tid -> nr -> stats
    threads: HashMap<u32, BTreeMap<u32, SyscallStats>>,
    /// (tid, nr, errno) -> calls
    errnos: HashMap<(u32, u32, String), u64>,
    keys: HashMap<(u32, u32, Argument), KeyStats>,
    sites: HashMap<SiteKey, (u64, u64)>,
    /// Calls whose key found no room (MAX_KEYS): summarised as seen once.
    pub keys_full: u64,
    overflow: BTreeMap<u32, (u64, u64, u64)>,
}

impl Calls {
    pub fn add(&mut self, call: Call) {
        let failed = call.errno.is_some();
        let s = self.threads.entry(call.tid).or_default().entry(call.nr).or_insert_with(|| SyscallStats::new(call.nr));
        if s.calls == 0 || call.ns < s.min_ns {
            s.min_ns = call.ns;
        }
        s.calls += 1;
        s.errors += u64::from(failed);
        s.total_ns += call.ns;
        s.max_ns = s.max_ns.max(call.ns);
        if let Some(e) = &call.errno {
            match self.errnos.get_mut(&(call.tid, call.nr, e.clone())) {
                Some(n) => *n += 1,
                None => {
                    self.errnos.insert((call.tid, call.nr, e.clone()), 1);
                }
            }
        }
        if let Some(site) = call.site {
            let e = self.sites.entry((call.tid, call.nr, call.argument.clone(), site)).or_default();
            e.0 += 1;
            e.1 += call.ns;
        }
        let Some(argument) = call.argument else { return };
        let key = (call.tid, call.nr, argument);
        if !self.keys.contains_key(&key) && self.keys.len() >= MAX_KEYS {
            self.keys_full += 1;
            let o = self.overflow.entry(call.nr).or_default();
            *o = (o.0 + 1, o.1 + u64::from(failed), o.2 + call.ns);
            return;
        }
        let made = self.keys.len() as u64;
        let k = self.keys.entry(key).or_insert_with(|| KeyStats { first: made, ..KeyStats::default() });
        k.calls += 1;
        k.errors += u64::from(failed);
        k.ns += call.ns;
        for (hist, bytes) in [(&mut k.requested, call.requested), (&mut k.returned, call.returned)] {
            if let Some(v) = bytes {
                let b = Histogram::bucket_of(v);
                if hist.len() <= b {
                    hist.resize(b + 1, 0);
                }
                hist[b] += 1;
            }
        }
    }

    /// The calls counted for thread `from` are `to`'s: a log names a
    /// thread's pid only after its first lines.
    pub fn rename_thread(&mut self, from: u32, to: u32) {
        if let Some(t) = self.threads.remove(&from) {
            self.threads.insert(to, t);
        }
        self.errnos = std::mem::take(&mut self.errnos).into_iter().map(|((t, nr, e), n)| ((if t == from { to } else { t }, nr, e), n)).collect();
        self.keys = std::mem::take(&mut self.keys).into_iter().map(|((t, nr, a), k)| ((if t == from { to } else { t }, nr, a), k)).collect();
        self.sites = std::mem::take(&mut self.sites).into_iter().map(|((t, nr, a, s), v)| ((if t == from { to } else { t }, nr, a, s), v)).collect();
    }

    /// Calls counted so far.
    pub fn count(&self) -> u64 {
        self.threads.values().flat_map(|t| t.values()).map(|s| s.calls).sum()
    }

    /// Sets every time measured so far to zero, the calls still counted:
    /// for a trace whose times are another tracer's measure (a hand-over
    /// to BPF, which samples CPU time where ptrace times each call).
    pub fn forget_times(&mut self) {
        for s in self.threads.values_mut().flat_map(|t| t.values_mut()) {
            (s.total_ns, s.min_ns, s.max_ns) = (0, 0, 0);
        }
        self.keys.values_mut().for_each(|k| k.ns = 0);
        self.sites.values_mut().for_each(|v| v.1 = 0);
        self.overflow.values_mut().for_each(|o| o.2 = 0);
    }

    /// Hands everything to `out`, each thread under its process
    /// (`tgid_of`). Keys seen once in a process are summarised per syscall.
    pub fn finish(self, tgid_of: impl Fn(u32) -> u32, tasks: Vec<(u32, TaskRecord)>, out: &mut TraceBuilder) {
        self.finish_as(tgid_of, tasks, out, false)
    }

    /// The same for the first part of a run another tracer counted the
    /// rest of: a key seen once here may be a row there (add_single).
    pub fn finish_first_part(self, tgid_of: impl Fn(u32) -> u32, tasks: Vec<(u32, TaskRecord)>, out: &mut TraceBuilder) {
        self.finish_as(tgid_of, tasks, out, true)
    }

    fn finish_as(self, tgid_of: impl Fn(u32) -> u32, tasks: Vec<(u32, TaskRecord)>, out: &mut TraceBuilder, first_part: bool) {
        for (tid, task) in tasks {
            out.add_task(tid, task);
        }
        for (tid, by_nr) in self.threads {
            for stats in by_nr.into_values() {
                out.add_syscall(tgid_of(tid), tid, stats);
            }
        }
        for ((tid, nr, errno), n) in self.errnos {
            out.add_errno(tgid_of(tid), nr, &errno, n);
        }
        let mut merged: HashMap<(u32, u32, Argument), KeyStats> = HashMap::new();
        for ((tid, nr, arg), k) in self.keys {
            let m = merged.entry((tgid_of(tid), nr, arg)).or_insert_with(|| KeyStats { first: k.first, ..KeyStats::default() });
            m.first = m.first.min(k.first);
            m.calls += k.calls;
            m.errors += k.errors;
            m.ns += k.ns;
            for (into, from) in [(&mut m.requested, k.requested), (&mut m.returned, k.returned)] {
                if into.len() < from.len() {
                    into.resize(from.len(), 0);
                }
                into.iter_mut().zip(from).for_each(|(a, b)| *a += b);
            }
        }
        let mut failed_once = Vec::new();
        for ((pid, nr, argument), k) in merged {
            if k.calls == 1 {
                if first_part {
                    out.add_single(argument_row(pid, nr, argument.clone(), k.clone()));
                } else {
                    out.add_one_shot(nr, 1, k.errors, k.ns);
                }
                if k.errors > 0 && matches!(argument, Argument::Path { path: Some(_), .. }) {
                    failed_once.push((k.first, argument_row(pid, nr, argument, k)));
                }
                continue;
            }
            out.add_argument(argument_row(pid, nr, argument, k));
        }
        // A sample of each process's, as the BPF side picks it.
        failed_once.sort_by_key(|(first, _)| *first);
        let mut made: HashMap<u32, usize> = HashMap::new();
        for (_, a) in failed_once {
            let index = made.entry(a.pid).or_default();
            if crate::model::named_failure(*index) {
                out.add_failed_once(a);
            }
            *index += 1;
        }
        for (nr, (calls, errors, ns)) in self.overflow {
            out.add_one_shot(nr, calls, errors, ns);
        }
        for ((tid, nr, argument, site), (calls, ns)) in self.sites {
            out.add_sample(SampleRecord { tgid: tgid_of(tid), nr, argument, site, period: calls, ns: ns / calls.max(1), samples: calls });
        }
    }
}

/// A key's calls, as an argument row.
fn argument_row(pid: u32, nr: u32, argument: Argument, k: KeyStats) -> ArgumentStats {
    let hist = |b: Vec<u64>| (!b.is_empty()).then(|| Histogram::from_buckets(b));
    ArgumentStats {
        pid,
        syscall: syscalls::name(nr),
        nr,
        argument,
        calls: k.calls,
        errors: k.errors,
        total_ns: k.ns,
        requested: hist(k.requested),
        returned: hist(k.returned),
        sites: Vec::new(),
    }
}

/// What a thread's signal mask is known to be, for classifying its
/// rt_sigprocmask calls as the BPF side does (classify_mask in
/// src/bpf/arguments.bpf.h).
#[derive(Debug, Clone, Copy, Default)]
pub struct MaskState {
    pub mask: Option<u64>,
    /// The thread's calls so far, and the one that last changed the mask.
    pub seq: u64,
    pub last_change: Option<u64>,
}

/// SIG_BLOCK, SIG_UNBLOCK, SIG_SETMASK.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum How {
    Block,
    Unblock,
    Set,
}

impl MaskState {
    /// Classifies one finished rt_sigprocmask(how, set, oldset): `set` and
    /// `old` as read (None: NULL or unreadable). Call `seq += 1` per call
    /// of the thread first.
    pub fn classify(&mut self, how: How, set: Option<u64>, old: Option<u64>, failed: bool) -> crate::model::MaskChange {
        use crate::model::MaskChange;
        const UNBLOCKABLE: u64 = (1 << 8) | (1 << 18); // SIGKILL, SIGSTOP
        let class = match how {
            How::Block => MaskChange::Block,
            How::Unblock => MaskChange::Unblock,
            How::Set => MaskChange::Set,
        };
        let before = old.or(self.mask);
        let Some(set) = set else {
            if old.is_some() {
                self.mask = old;
            }
            return MaskChange::Query;
        };
        if failed {
            return class;
        }
        let after = match (how, before) {
            (How::Block, Some(b)) => Some(b | set),
            (How::Unblock, Some(b)) => Some(b & !set),
            (How::Set, _) => Some(set),
            _ => None,
        }
        .map(|m| m & !UNBLOCKABLE);
        self.mask = after;
        let (Some(before), Some(after)) = (before, after) else { return class };
        if before == after {
            return MaskChange::Same;
        }
        let undo = self.last_change.is_some_and(|c| c + 1 == self.seq);
        self.last_change = Some(self.seq);
        if undo {
            MaskChange::Undo
        } else {
            class
        }
    }
}

/// The program break a thread last saw, for classifying its brk calls as
/// the BPF side does (ARG_BRK in src/bpf/syscount.bpf.c).
#[derive(Debug, Clone, Copy, Default)]
pub struct BrkState(u64);

impl BrkState {
    /// brk(`asked`) returned `now` (the break after the call).
    pub fn classify(&mut self, asked: u64, now: u64) -> crate::model::BrkChange {
        use crate::model::BrkChange;
        let change = if asked == 0 {
            BrkChange::Query
        } else {
            match now.cmp(&self.0) {
                std::cmp::Ordering::Equal => BrkChange::Same,
                std::cmp::Ordering::Less => BrkChange::Shrink,
                std::cmp::Ordering::Greater => BrkChange::Grow,
            }
        };
        self.0 = now;
        change
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Lost, RunInfo};

    fn path(p: &str) -> Option<Argument> {
        Some(Argument::Path { path: Some(p.into()), dirfd: None, null: false, cut: false, raw: None })
    }

    #[test]
    fn threads_fold_into_processes_and_keys_seen_once_are_summarised() {
        let mut c = Calls::default();
        for (tid, p) in [(1, "/etc/localtime"), (2, "/etc/localtime"), (1, "/a"), (2, "/b")] {
            c.add(Call { tid, nr: 262, ns: 10, argument: path(p), site: Some(0), ..Default::default() });
        }
        c.add(Call { tid: 2, nr: 3, errno: Some("EBADF".into()), argument: Some(Argument::Fd { fd: 9 }), ..Default::default() });
        let mut b = TraceBuilder::default();
        c.finish(|_| 1, Vec::new(), &mut b);
        let t = b.finish(RunInfo::default(), Lost::default());
        assert_eq!(t.processes.len(), 1);
        assert_eq!(t.processes[0].threads.len(), 2);
        assert_eq!(t.syscall("newfstatat").unwrap().calls, 4);
        assert_eq!(t.syscall("close").unwrap().errnos["EBADF"], 1);
        assert_eq!(t.arguments.len(), 1, "only /etc/localtime repeats");
        assert_eq!((t.arguments[0].calls, t.arguments[0].sites[0].calls), (2, 2));
        let once: u64 = t.one_shot.iter().map(|o| o.calls).sum();
        assert_eq!(once, 3);
    }

    #[test]
    fn failed_lookups_of_paths_seen_once_are_named_in_their_order() {
        let mut c = Calls::default();
        let enoent = || Some("ENOENT".to_string());
        for (tid, p, errno) in
            [(1, "/opt/b/libm.so.6", enoent()), (2, "/opt/a/libm.so.6", enoent()), (1, "/ok", None), (1, "/twice", enoent()), (2, "/twice", enoent())]
        {
            c.add(Call { tid, nr: 257, errno, argument: path(p), ..Default::default() });
        }
        let mut b = TraceBuilder::default();
        c.finish(|_| 1, Vec::new(), &mut b);
        let t = b.finish(RunInfo::default(), Lost::default());
        let named: Vec<_> = t.failed_once.iter().map(|a| (a.pid, &a.argument, a.calls, a.errors)).collect();
        assert_eq!(named, vec![(1, &path("/opt/b/libm.so.6").unwrap(), 1, 1), (1, &path("/opt/a/libm.so.6").unwrap(), 1, 1)]);
        assert_eq!(t.one_shot.iter().map(|o| o.calls).sum::<u64>(), 3, "still counted as seen once");

        // A long search: the first ones, then one in three.
        let mut c = Calls::default();
        for i in 0..100 {
            c.add(Call { tid: 1, nr: 257, errno: enoent(), argument: path(&format!("/d/{i}")), ..Default::default() });
        }
        let mut b = TraceBuilder::default();
        c.finish(|_| 1, Vec::new(), &mut b);
        let t = b.finish(RunInfo::default(), Lost::default());
        let expected: Vec<Argument> = (0..100).filter(|&i| crate::model::named_failure(i)).map(|i| path(&format!("/d/{i}")).unwrap()).collect();
        assert_eq!(t.failed_once.iter().map(|a| a.argument.clone()).collect::<Vec<_>>(), expected);
        assert_eq!(expected.len(), 16 + 28);
    }
}
