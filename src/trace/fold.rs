//! Exited threads' counts as they arrive, in bounded memory: the first
//! DETAILED processes keep a row each, with every thread; later ones roll
//! into one row per program (name, cgroup, executable), so a shell loop traced for hours costs
//! a row per program, not per process. Counts stay exact either way.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::bpf::skel::types::{arg_key, arg_slot, arg_val, io_hist};
use super::exits::{ExeId, ThreadCounts};
use crate::model::SyscallStats;

/// Processes kept apart; the rest are folded by program name.
pub const DETAILED: usize = 1000;
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
}

impl Exited {
    /// Where the counts of `tgid`'s current process go: None for a
    /// detailed one, its fold row otherwise.
    pub fn row_of(&self, tgid: u32) -> Option<u32> {
        self.remap.get(&tgid).copied()
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
                    ..Default::default()
                });
                fold.processes += 1;
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
        match self.fold_of(tgid) {
            None => self.detailed_slots.push((tgid, s)),
            Some(fold) => fold.args.entry((s.nr, s.fd, s.path_hash)).or_default().add(s.calls, s.errors, s.ns, hist),
        }
    }

    /// A repeated argument entry taken out of the kernel's table.
    pub fn add_swept(&mut self, k: arg_key, v: arg_val, hist: Option<io_hist>) {
        match self.fold_of(k.tgid) {
            None => self.swept.push((k, v, hist)),
            Some(fold) => fold.args.entry((k.nr, k.fd, k.path_hash)).or_default().add(
                v.calls,
                v.errors,
                v.ns,
                hist.map(|h| (h.requested.to_vec(), h.returned.to_vec())),
            ),
        }
    }

    fn fold_of(&mut self, tgid: u32) -> Option<&mut Fold> {
        let row = self.row_of(tgid)?;
        self.folds.values_mut().find(|f| f.row == row)
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
