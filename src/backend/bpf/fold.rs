//! Exited threads' counts as they arrive, in bounded memory: the first
//! DETAILED processes keep a row each, with every thread; later ones roll
//! into one row per program (name, cgroup, executable), so a shell loop
//! traced for hours costs a row per program, not per process. Counts stay
//! exact either way.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::records::{ExeId, ThreadCounts};
use super::skel::types::{arg_key, arg_slot, arg_val, io_hist};
use crate::model::SyscallStats;

/// Processes kept apart; the rest are folded by program name.
pub const DETAILED: usize = 1000;

/// How many argument keys folds keep, when a run has no end (top, serve):
/// per program, and in all. A key past them is counted in `over_budget`,
/// its calls still in its syscall's counts. A run that ends keeps every key.
#[derive(Debug, Clone, Copy)]
pub struct KeyBudget {
    pub per_program: usize,
    pub total: usize,
}

impl KeyBudget {
    pub const UNBOUNDED: KeyBudget = KeyBudget { per_program: usize::MAX, total: usize::MAX };
    /// ~100-200 bytes a key: at most ~20 MB for a host's folded programs.
    /// SYSDIET_FOLD_KEYS sets the per-program part (tests: a budget
    /// spent by a thousand processes, not by a hundred thousand).
    pub fn host() -> KeyBudget {
        let per_program = std::env::var("SYSDIET_FOLD_KEYS").ok().and_then(|v| v.parse().ok()).unwrap_or(8192);
        KeyBudget { per_program, total: 131_072 }
    }
}

impl Default for KeyBudget {
    fn default() -> Self {
        KeyBudget::UNBOUNDED
    }
}

/// Fold rows get ids above any pid (pid_max is at most 2^22).
pub const FOLD_BASE: u32 = 1 << 30;

/// The counts of an argument key, summed.
#[derive(Debug, Clone, Default)]
pub struct ArgSum {
    pub calls: u64,
    pub errors: u64,
    pub ns: u64,
    /// Byte-count histograms, read/write family only.
    pub hist: Option<(Vec<u64>, Vec<u64>)>,
}

impl ArgSum {
    fn add(&mut self, calls: u64, errors: u64, ns: u64, hist: Option<(Vec<u64>, Vec<u64>)>) {
        self.calls += calls;
        self.errors += errors;
        self.ns += ns;
        if let Some((req, ret)) = hist {
            let (r, t) = self.hist.get_or_insert_with(|| (vec![0; req.len()], vec![0; ret.len()]));
            r.iter_mut().zip(req).for_each(|(a, b)| *a += b);
            t.iter_mut().zip(ret).for_each(|(a, b)| *a += b);
        }
    }
}

/// (syscall, fd, path hash): an argument key within one row.
pub type ArgKey = (u32, i64, u64);

/// Every exited process of one program beyond the detailed ones.
#[derive(Debug, Clone, Default)]
pub struct Fold {
    pub row: u32,
    pub comm: String,
    pub cgroup: u64,
    pub exe: ExeId,
    pub processes: u64,
    /// The parent they all share, 0 when they have more than one: the
    /// row stays its parent's child, so what a shell loop started is
    /// counted whole (a row per program, not per parent, keeps memory
    /// bounded).
    pub ppid: u32,
    pub stats: BTreeMap<u32, SyscallStats>,
    pub mask_calls: [u64; 6],
    pub errnos: BTreeMap<(u32, u32), u64>,
    pub errnos_lost: u64,
    pub user_ticks: u64,
    pub args: HashMap<ArgKey, ArgSum>,
}

#[derive(Debug, Clone, Default)]
pub struct Exited {
    /// Threads of detailed processes, as they ended.
    pub detailed: Vec<ThreadCounts>,
    /// Cached argument keys' pending calls of detailed processes: (tgid, slot).
    pub detailed_slots: Vec<(u32, arg_slot)>,
    /// Repeated argument entries of ended detailed processes, taken out of
    /// the kernel's table.
    pub swept: Vec<(arg_key, arg_val, Option<io_hist>)>,
    /// Syscalls past a thread's own kinds (syscall_spill) of ended
    /// detailed processes, taken out of the kernel's table: (tgid, counts).
    pub swept_syscalls: Vec<(u32, SyscallStats)>,
    /// Errnos past a thread's own slots (errno_stats) of ended detailed
    /// processes, taken out of the kernel's table: (tgid, syscall, errno, calls).
    pub swept_errnos: Vec<(u32, u32, u32, u64)>,
    /// By (program name, cgroup, executable): one program in two services
    /// is two rows, and so are two programs of one name.
    pub folds: HashMap<(String, u64, ExeId), Fold>,
    /// The current process of a pid -> its fold row, for folded ones.
    pub remap: HashMap<u32, u32>,
    detailed_pids: HashSet<u32>,
    /// Pids seen as some process's parent: kept apart whatever their number
    /// (the shell, make, the server that spawns the helpers).
    parents: HashSet<u32>,
    /// Processes whose main thread ended: a later record of the pid is a
    /// new process; their kernel entries can be swept.
    pub ended: HashSet<u32>,
    detailed_count: usize,
    pub budget: KeyBudget,
    /// Argument keys in all folds.
    fold_keys: usize,
    /// Calls of argument keys the budget left out.
    pub over_budget: u64,
}

impl Exited {
    /// Where the counts of `tgid`'s current process go: None for a
    /// detailed one, its fold row otherwise.
    pub fn row_of(&self, tgid: u32) -> Option<u32> {
        self.remap.get(&tgid).copied()
    }

    /// The fold `tgid`'s current process went to, for a folded one.
    pub fn fold_of_process(&self, tgid: u32) -> Option<&Fold> {
        let row = self.row_of(tgid)?;
        self.folds.values().find(|f| f.row == row)
    }

    /// A thread's exit record (sent before its slots).
    pub fn add_thread(&mut self, t: ThreadCounts) {
        let tgid = t.tgid;
        self.parents.insert(t.ppid);
        let new_process = self.ended.remove(&tgid) || !(self.detailed_pids.contains(&tgid) || self.remap.contains_key(&tgid));
        if new_process {
            if self.detailed_count < DETAILED || self.parents.contains(&tgid) {
                self.detailed_count += 1;
                self.detailed_pids.insert(tgid);
                self.remap.remove(&tgid);
            } else {
                self.detailed_pids.remove(&tgid);
                let next = FOLD_BASE + self.folds.len() as u32;
                let fold = self.folds.entry((t.comm.clone(), t.cgroup, t.exe)).or_insert_with(|| Fold {
                    row: next,
                    comm: t.comm.clone(),
                    cgroup: t.cgroup,
                    exe: t.exe,
                    ppid: t.ppid,
                    ..Default::default()
                });
                fold.processes += 1;
                if fold.ppid != t.ppid {
                    fold.ppid = 0;
                }
                self.remap.insert(tgid, fold.row);
            }
        }
        if t.tid == tgid {
            self.ended.insert(tgid);
        }
        match self.row_of(tgid).and_then(|row| self.folds.values_mut().find(|f| f.row == row)) {
            None => self.detailed.push(t),
            Some(fold) => {
                for s in &t.stats {
                    fold.stats.entry(s.nr).or_insert_with(|| SyscallStats::new(s.nr)).merge(s);
                }
                fold.mask_calls.iter_mut().zip(t.mask_calls).for_each(|(a, b)| *a += b);
                for &(nr, err, n) in &t.errnos {
                    *fold.errnos.entry((nr, err)).or_default() += n;
                }
                fold.errnos_lost += t.errnos_lost;
                fold.user_ticks += t.user_ticks;
            }
        }
    }

    /// A cached argument key's pending calls, of a thread that ended.
    pub fn add_slot(&mut self, tgid: u32, s: arg_slot, io: bool) {
        let hist = io.then(|| (s.requested.iter().map(|&n| n as u64).collect(), s.returned.iter().map(|&n| n as u64).collect()));
        if self.row_of(tgid).is_none() {
            return self.detailed_slots.push((tgid, s));
        }
        self.add_folded(tgid, (s.nr, s.fd, s.path_hash), ArgSum { calls: s.calls, errors: s.errors, ns: s.ns, hist });
    }

    /// A repeated argument entry taken out of the kernel's table.
    pub fn add_swept(&mut self, k: arg_key, v: arg_val, hist: Option<io_hist>) {
        if self.row_of(k.tgid).is_none() {
            return self.swept.push((k, v, hist));
        }
        let hist = hist.map(|h| (h.requested.to_vec(), h.returned.to_vec()));
        self.add_folded(k.tgid, (k.nr, k.fd, k.path_hash), ArgSum { calls: v.calls, errors: v.errors, ns: v.ns, hist });
    }

    /// A spilled syscall's counts of an ended process, taken out of the
    /// kernel's table.
    pub fn add_swept_syscall(&mut self, tgid: u32, stats: SyscallStats) {
        match self.fold_of(tgid) {
            Some(fold) => fold.stats.entry(stats.nr).or_insert_with(|| SyscallStats::new(stats.nr)).merge(&stats),
            None => self.swept_syscalls.push((tgid, stats)),
        }
    }

    /// A spilled errno's calls of an ended process, taken out of the
    /// kernel's table.
    pub fn add_swept_errno(&mut self, tgid: u32, nr: u32, err: u32, calls: u64) {
        match self.fold_of(tgid) {
            Some(fold) => *fold.errnos.entry((nr, err)).or_default() += calls,
            None => self.swept_errnos.push((tgid, nr, err, calls)),
        }
    }

    fn fold_of(&mut self, tgid: u32) -> Option<&mut Fold> {
        let row = self.row_of(tgid)?;
        self.folds.values_mut().find(|f| f.row == row)
    }

    /// An argument key's calls, to `tgid`'s fold row, within the budget.
    fn add_folded(&mut self, tgid: u32, key: ArgKey, sum: ArgSum) {
        let Some(row) = self.row_of(tgid) else { return };
        let Some(fold) = self.folds.values_mut().find(|f| f.row == row) else { return };
        let known = fold.args.contains_key(&key);
        if !known && (fold.args.len() >= self.budget.per_program || self.fold_keys >= self.budget.total) {
            self.over_budget += sum.calls;
            return;
        }
        self.fold_keys += usize::from(!known);
        fold.args.entry(key).or_default().add(sum.calls, sum.errors, sum.ns, sum.hist);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn thread(tgid: u32, tid: u32, comm: &str, calls: u64) -> ThreadCounts {
        ThreadCounts {
            tgid,
            tid,
            ppid: 1,
            comm: comm.into(),
            cgroup: 0,
            exe: (7, 1),
            exit: None,
            stats: vec![SyscallStats { calls, ..SyscallStats::new(39) }],
            mask_calls: [0; 6],
            errnos: vec![(2, 2, 1)],
            errnos_lost: 0,
            user_ticks: 0,
        }
    }

    #[test]
    fn processes_beyond_the_detailed_ones_fold_by_name_and_keep_their_counts() {
        let mut e = Exited::default();
        let n = DETAILED as u32 + 500;
        for pid in 100..100 + n {
            e.add_thread(thread(pid, pid, if pid % 2 == 0 { "true" } else { "sh" }, 3));
        }
        assert_eq!(e.detailed.len(), DETAILED);
        assert_eq!(e.folds.len(), 2);
        let total: u64 = e.folds.values().map(|f| f.stats[&39].calls).sum::<u64>() + e.detailed.iter().map(|t| t.calls()).sum::<u64>();
        assert_eq!(total, 3 * n as u64, "every call counted");
        assert_eq!(e.folds.values().map(|f| f.processes).sum::<u64>(), 500);
        assert!(e.folds.values().all(|f| f.row >= FOLD_BASE));
    }

    #[test]
    fn two_programs_of_one_name_fold_apart() {
        let mut e = Exited::default();
        for pid in 100..100 + DETAILED as u32 + 4 {
            let mut t = thread(pid, pid, "python3", 1);
            t.exe = (pid as u64 % 2, 1);
            e.add_thread(t);
        }
        assert_eq!(e.folds.len(), 2, "{:?}", e.folds.keys());
        assert!(e.folds.values().all(|f| f.processes == 2));
    }

    #[test]
    fn folds_keep_keys_within_their_budget_and_count_the_rest() {
        let mut e = Exited { budget: KeyBudget { per_program: 3, total: 4 }, ..Default::default() };
        for pid in 100..100 + DETAILED as u32 + 2 {
            e.add_thread(thread(pid, pid, if pid % 2 == 0 { "a" } else { "b" }, 1));
        }
        let slot = |hash: u64, calls: u64| arg_slot { nr: 4, path_hash: hash, calls, used: 1, ..Default::default() };
        let (a, b) = (100 + DETAILED as u32, 101 + DETAILED as u32);
        for hash in 1..=5 {
            e.add_slot(a, slot(hash, 2), false);
        }
        // A key it has goes on counting; b gets what is left in all.
        e.add_slot(a, slot(1, 7), false);
        e.add_slot(b, slot(9, 3), false);
        e.add_slot(b, slot(10, 5), false);
        let fold = |name: &str| &e.folds[&(name.to_string(), 0, (7, 1))];
        assert_eq!(fold("a").args.len(), 3);
        assert_eq!(fold("a").args[&(4, 0, 1)].calls, 9);
        assert_eq!(fold("b").args.len(), 1);
        assert_eq!(e.over_budget, 2 * 2 + 5, "a's 4th and 5th keys, b's 2nd");
    }

    #[test]
    fn swept_spills_go_to_a_folded_process_row_or_stay_by_pid() {
        let mut e = Exited::default();
        for pid in 100..100 + DETAILED as u32 + 1 {
            e.add_thread(thread(pid, pid, "mk", 1));
        }
        let folded = 100 + DETAILED as u32;
        let spilled = |calls| SyscallStats { calls, ..SyscallStats::new(39) };
        e.add_swept_syscall(folded, spilled(4));
        e.add_swept_errno(folded, 2, 2, 5);
        e.add_swept_syscall(100, spilled(6));
        e.add_swept_errno(100, 2, 13, 7);
        let fold = &e.folds[&("mk".to_string(), 0, (7, 1))];
        assert_eq!((fold.stats[&39].calls, fold.errnos[&(2, 2)]), (1 + 4, 1 + 5), "added to what its thread brought");
        assert_eq!(e.swept_syscalls.iter().map(|(p, s)| (*p, s.calls)).collect::<Vec<_>>(), vec![(100, 6)]);
        assert_eq!(e.swept_errnos, vec![(100, 2, 13, 7)]);
    }

    #[test]
    fn a_parent_is_never_folded() {
        let mut e = Exited::default();
        for pid in 100..100 + DETAILED as u32 + 10 {
            let mut t = thread(pid, pid, "true", 1);
            t.ppid = 50;
            e.add_thread(t);
        }
        // The parent ends last, long after the detailed rows are used up.
        e.add_thread(thread(50, 50, "loop", 1));
        assert_eq!(e.row_of(50), None);
        assert!(e.detailed.iter().any(|t| t.tgid == 50));
    }

    #[test]
    fn a_fold_keeps_the_parent_its_processes_share() {
        let mut e = Exited::default();
        for pid in 100..100 + DETAILED as u32 + 6 {
            let mut t = thread(pid, pid, if pid % 2 == 0 { "date" } else { "sed" }, 1);
            t.ppid = if t.comm == "sed" && pid % 3 == 0 { 60 } else { 50 };
            e.add_thread(t);
        }
        let fold = |name: &str| &e.folds[&(name.to_string(), 0, (7, 1))];
        assert_eq!((fold("date").processes, fold("date").ppid), (3, 50));
        assert_eq!((fold("sed").processes, fold("sed").ppid), (3, 0), "two parents: none");
    }

    #[test]
    fn a_reused_pid_is_a_new_process() {
        let mut e = Exited::default();
        for pid in 0..DETAILED as u32 {
            e.add_thread(thread(10_000 + pid, 10_000 + pid, "a", 1));
        }
        // Pid 10,000 again, after its first process ended: folded now.
        e.add_thread(thread(10_000, 10_000, "b", 1));
        assert_eq!(e.row_of(10_000), Some(FOLD_BASE));
        assert_eq!(e.folds[&("b".to_string(), 0, (7, 1))].processes, 1);
        // A thread of a folded process that is not its main thread.
        e.add_thread(thread(20_000, 20_001, "c", 1));
        e.add_thread(thread(20_000, 20_000, "c", 1));
        assert_eq!(e.folds[&("c".to_string(), 0, (7, 1))].processes, 1);
        assert_eq!(e.folds[&("c".to_string(), 0, (7, 1))].stats[&39].calls, 2);
    }
}
