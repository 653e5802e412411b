//! Reading the BPF tracer out (at the end, or while it counts on): live
//! threads from their task
//! storage, exited ones from their exit records, repeated arguments from
//! arg_stats, one-shot ones from their summary, and what was lost.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::os::fd::{AsRawFd, BorrowedFd};

use libbpf_rs::{MapCore, MapFlags};

use super::exits::Collected;
use super::features::Variant;
use super::fold::Fold;
use super::live::{LiveIterator, LiveThread};
use super::maps::{bpf_error, bytes_of, c_string, from_bytes, percpu_stride, read_all, read_keys, run_once, MapEntries};
use super::records::{
    brk_change_of, errno_entries, errnos_of, exe_id_of, mask_change_of, spill_entries, timeout_of, used, ExeNames, PathOf, PathText, Record,
    ThreadCounts, NULL_PATH, UNREADABLE_PATH,
};
use super::skel::types::{arg_key, arg_slot, arg_val, io_hist, lost_counter, once_summary, state_slot, target_state, task_state};
use super::tables::Tables;
use super::word_counts::WordCounts;
use crate::error::Result;
use crate::linux::syscalls::{self, ArgKind};
use crate::model::builder::{TaskRecord, TraceBuilder};
use crate::model::{Argument, ArgumentStats, Histogram, Lost};

const AT_FDCWD: i64 = -100;

/// What the read-out learns and keeps from one read to the next: the
/// repeated paths' strings (samples' keys resolve here too) and the names
/// of the files processes ran.
#[derive(Debug, Default)]
pub struct Names {
    pub paths: Paths,
    pub executables: ExeNames,
}

/// The path strings a tracer knows, and which read last wanted each: a run
/// with no end (top, serve) forgets those no key has used lately, so that
/// keys that are gone (ended programs' keys past their budget) do not keep
/// their strings for hours.
#[derive(Debug, Default)]
pub struct Paths {
    text: PathOf,
    /// hash -> the read that last used it, or brought it; None for a run
    /// that ends, which forgets nothing and need not keep count.
    last: Option<RefCell<HashMap<u64, u64>>>,
    read: u64,
}

impl Paths {
    /// Strings of a run with no end: `forget_unused` may drop them.
    pub fn forgetting() -> Paths {
        Paths { last: Some(RefCell::default()), ..Default::default() }
    }

    /// Strings just sent, each once.
    pub fn add(&mut self, new: PathOf) {
        for (hash, path) in new {
            if let Some(last) = &mut self.last {
                last.get_mut().insert(hash, self.read);
            }
            self.text.entry(hash).or_insert(path);
        }
    }

    pub fn get(&self, hash: u64) -> Option<&PathText> {
        let p = self.text.get(&hash)?;
        if let Some(last) = &self.last {
            last.borrow_mut().insert(hash, self.read);
        }
        Some(p)
    }

    /// Ends a read: strings that none of the last `keep` reads used are
    /// forgotten. More than one: a key one read misses keeps its string.
    /// (No sweep runs during a read: ExitReader::hold_sweeps.)
    pub fn forget_unused(&mut self, keep: u64) {
        let read = self.read;
        let Some(last) = &mut self.last else { return };
        let last = last.get_mut();
        last.retain(|_, l| *l + keep > read);
        self.text.retain(|h, _| last.contains_key(h));
        self.read += 1;
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.text.len()
    }
}

/// Files everything read into `out`: `collected` from the exit reader,
/// `live` from the threads' storage, the rest from the maps; returns what
/// was lost. `tick_ns`: what a CPU-time tick stands for (0: wall time).
pub fn file_into(
    maps: &Tables,
    names: &mut Names,
    tick_ns: u64,
    out: &mut TraceBuilder,
    mut collected: Collected,
    live: Vec<(ThreadCounts, Vec<arg_slot>)>,
    logged: Option<MapEntries>,
) -> Result<Lost> {
    let lost = read_lost(maps)?;
    let mut lost = Lost { argument_keys_over_budget: collected.exited.over_budget, ..lost };
    let live_tids: HashSet<u32> = live.iter().map(|(t, _)| t.tid).collect();
    names.paths.add(collected.paths);
    for (exe, name) in collected.executables {
        names.executables.entry(exe).or_insert(name);
    }
    // A process from before the tracer had no exec to name its file.
    for (t, _) in &live {
        if t.exe != (0, 0) && !names.executables.contains_key(&t.exe) {
            if let Some(name) = crate::linux::host::executable(t.tgid, t.exe) {
                names.executables.insert(t.exe, name);
            }
        }
    }
    for (pid, env) in collected.environments {
        // A folded process's environment is its program row's: dropped.
        if collected.exited.row_of(pid).is_none() {
            out.set_environment(pid, env);
        }
    }
    // A folded process's failed lookups are its program row's: dropped,
    // as its environment is.
    for f in collected.failures.values().flatten().filter(|f| collected.exited.row_of(f.tgid).is_none()) {
        out.add_failed_once(argument_stats(f.tgid, f.nr, f.fd, f.path_hash, 1, 1, f.ns, &names.paths));
    }
    let detailed = std::mem::take(&mut collected.exited.detailed);
    let (path_of, exited) = (&names.paths, &collected.exited);
    let names = &names.executables;
    // A folded process's counts go to its program's row, as one thread.
    let row = |tgid: u32| exited.row_of(tgid);
    let placed = |mut t: ThreadCounts| {
        if let Some(f) = exited.fold_of_process(t.tgid) {
            (t.tgid, t.tid, t.ppid, t.exit) = (f.row, f.row, f.ppid, None);
        }
        t
    };

    for t in detailed {
        add_thread(out, t, names, tick_ns, &mut lost);
    }
    for (tgid, s) in &exited.detailed_slots {
        out.add_argument(slot_stats(*tgid, s, path_of));
    }
    for (k, v, h) in &exited.swept {
        out.add_argument(arg_entry(k, v, h.as_ref(), k.tgid, path_of));
    }
    for (tgid, stats) in &exited.swept_syscalls {
        out.add_syscall(*tgid, *tgid, stats.clone());
    }
    for &(tgid, nr, err, n) in &exited.swept_errnos {
        out.add_errno(tgid, nr, &crate::linux::errno::name(err), n);
    }
    for f in exited.folds.values() {
        add_fold(out, f, names, tick_ns, path_of, &mut lost);
    }
    for (counts, slots) in live {
        let tgid = row(counts.tgid).unwrap_or(counts.tgid);
        add_thread(out, placed(counts), names, tick_ns, &mut lost);
        for s in &slots {
            out.add_argument(slot_stats(tgid, s, path_of));
        }
    }
    for r in collected.late.into_iter().filter(|r| !live_tids.contains(&r.tid())) {
        match r {
            Record::Thread(t) => add_thread(out, placed(t), names, tick_ns, &mut lost),
            Record::Slot(tgid, _, s) => out.add_argument(slot_stats(row(tgid).unwrap_or(tgid), &s, path_of)),
            Record::Path(..) | Record::Exec { .. } | Record::Failure(_) => {}
        }
    }

    let arg_stats = match logged {
        Some(entries) => entries,
        None => crate::timings::timed("walk the argument table", || read_all(&maps.arg_stats))?,
    };
    let entries: Vec<(&[u8], arg_key, arg_val)> = arg_stats.iter().map(|(k, v)| (k, from_bytes(k), from_bytes(v))).collect();
    let words = WordCounts::new(&maps.first_calls, entries.iter().map(|(_, _, v)| v));
    for (k, key, mut v) in entries {
        if v.once != 0 {
            continue; // seen once: in the one-shot summary
        }
        words.add_to(&mut v)?;
        let hist = match syscalls::by_nr(key.nr).map(|s| s.arg) {
            Some(ArgKind::FdIo { .. }) => maps.io_hists.lookup(k, MapFlags::ANY).map_err(bpf_error)?.map(|h| from_bytes::<io_hist>(&h)),
            _ => None,
        };
        out.add_argument(arg_entry(&key, &v, hist.as_ref(), row(key.tgid).unwrap_or(key.tgid), path_of));
    }
    // Per-CPU maps in one batch read each, not a syscall per key and CPU.
    for (_, (tgid, nr, err, n)) in errno_entries(&read_all(&maps.errno_stats)?) {
        out.add_errno(row(tgid).unwrap_or(tgid), nr, &crate::linux::errno::name(err), n);
    }
    // Syscalls made past a thread's own THREAD_SYSCALLS kinds, by process;
    // a per-thread view shows them under the process's main thread.
    for (_, tgid, stats) in spill_entries(&read_all(&maps.syscall_spill)?) {
        let pid = row(tgid).unwrap_or(tgid);
        if stats.calls > 0 {
            out.add_syscall(pid, pid, stats);
        }
    }
    for (k, per_cpu) in read_all(&maps.once_summary)?.iter() {
        let nr: u32 = from_bytes(k);
        // Per-CPU parts may wrap (a promotion undoes a key on another CPU);
        // their sum does not.
        let sum = per_cpu
            .chunks_exact(percpu_stride(std::mem::size_of::<once_summary>()))
            .map(from_bytes::<once_summary>)
            .fold((0u64, 0u64, 0u64), |a, o| (a.0.wrapping_add(o.keys), a.1.wrapping_add(o.errors), a.2.wrapping_add(o.ns)));
        if sum.0 > 0 {
            out.add_one_shot(nr, sum.0, sum.1, sum.2);
        }
    }
    out.set_remap(exited.remap.clone());
    Ok(lost)
}

/// The program the read-out runs (syscount.bpf.c), never attached.
pub const COPY_LOGGED: &str = "copy_logged";

/// arg_stats' entries, found by the keys the programs logged when they
/// logged every key they made (ARG_KEYS_LOGGED in state.bpf.h), so that
/// the read-out does not walk the table's buckets; None: walk it. `copy`
/// (copy_logged, loaded where the kernel has bpf_loop) copies them all in
/// one run; without it, or if its run fails, each is looked up (a syscall
/// each). Only once counting has stopped: a key being logged may not be
/// written yet.
pub fn logged_entries(maps: &Tables, copy: Option<BorrowedFd<'_>>) -> Result<Option<MapEntries>> {
    let Some(logged) = super::maps::logged_arg_keys(maps.bss()) else {
        return Ok(None);
    };
    // A key swept out and made again is logged twice: read once.
    let mut seen = HashSet::new();
    let firsts = logged.iter().enumerate().filter(|(_, k)| seen.insert((k.tgid, k.nr, k.fd, k.path_hash)));
    if !copy.is_some_and(copied) {
        return crate::timings::timed("look up the logged keys", || read_keys(&maps.arg_stats, firsts.map(|(_, k)| bytes_of(k)))).map(Some);
    }
    let bss = maps.bss();
    let mut out = MapEntries::new(std::mem::size_of::<arg_key>(), std::mem::size_of::<arg_val>());
    for (i, k) in firsts {
        // SAFETY: fields of the mapped .bss, written by copy_logged's run,
        // which has returned; read once each.
        let (found, mut v, word) = unsafe {
            (
                std::ptr::read_volatile(&bss.logged_found[i]),
                std::ptr::read_volatile(&bss.logged_vals[i]),
                std::ptr::read_volatile(&bss.logged_words[i]),
            )
        };
        if found != 0 {
            // Its word's calls added here: first_calls is then not mapped
            // for it. A word not read (0) is left to WordCounts, which says so.
            if v.counting != 0 && word != 0 {
                super::word_counts::add_word(&mut v, word);
            }
            out.push(bytes_of(k), bytes_of(&v));
        }
    }
    Ok(Some(out))
}

/// Runs copy_logged once: whether it copied every logged key's entry.
fn copied(program: BorrowedFd<'_>) -> bool {
    let _t = crate::timings::span("copy the logged entries");
    run_once(program, &mut []) == Some(0)
}

/// Each traced thread still running, with its state: read by the task
/// iterator when there is one, from the legacy programs' table by tid
/// there, else found by a walk of /proc as asked for (whether any is alive
/// needs only the first).
pub fn live_states<'a>(maps: &'a Tables, variant: Variant, iterator: Option<&LiveIterator>) -> Box<dyn Iterator<Item = LiveThread> + 'a> {
    let live = |s: &task_state| s.exited == 0 && s.state != target_state::TARGET_PENDING_EXEC.0;
    if let Some(read) = iterator.and_then(|i| i.read().ok()) {
        return Box::new(read.into_iter());
    }
    // The legacy programs' states are a table by tid: read whole, in
    // batches, not looked up for every thread of the host.
    if let (Variant::Legacy, Some(states)) = (variant, maps.thread_states.as_ref()) {
        let _t = crate::timings::span("read the live threads from the legacy programs' table");
        if let Ok(entries) = read_all(states) {
            let threads: Vec<LiveThread> = entries
                .iter()
                .map(|(k, v)| LiveThread { tid: from_bytes(k), comm: None, state: Box::new(from_bytes(v)) })
                .filter(|t| live(&t.state))
                .collect();
            return Box::new(threads.into_iter());
        }
    }
    Box::new(all_tids().filter_map(move |tid| {
        let v = match variant {
            Variant::Current | Variant::Bounded => {
                let pidfd = crate::target::pidfd(tid)?;
                match maps.states.as_ref()?.lookup(&pidfd.as_raw_fd().to_ne_bytes(), MapFlags::ANY).ok()? {
                    Some(v) => v,
                    None => slot_state(maps.state_slots.as_ref()?, tid)?,
                }
            }
            Variant::Legacy => maps.thread_states.as_ref()?.lookup(&tid.to_ne_bytes(), MapFlags::ANY).ok()??,
        };
        let state: Box<task_state> = Box::new(from_bytes(&v));
        live(&state).then_some(LiveThread { tid, comm: None, state })
    }))
}

/// The state in thread `tid`'s slot (STATE_SLOTS in states.bpf.h), if the
/// slot is tagged with its tid and the state is of its process: user space
/// does not know the start time the programs tag it with too.
fn slot_state(slots: &libbpf_rs::MapHandle, tid: u32) -> Option<Vec<u8>> {
    let at = tid % slots.max_entries();
    let v = slots.lookup(&at.to_ne_bytes(), MapFlags::ANY).ok()??;
    let slot: state_slot = from_bytes(&v);
    (slot.tid == u64::from(tid) && Some(slot.s.tgid) == crate::target::tgid_of(tid)).then(|| bytes_of(&slot.s).to_vec())
}

/// The traced threads still running, from their states.
pub fn live_threads(maps: &Tables, variant: Variant, iterator: Option<&LiveIterator>) -> Vec<(ThreadCounts, Vec<arg_slot>)> {
    let mut live = Vec::new();
    for LiveThread { tid, comm, state: ts } in live_states(maps, variant, iterator) {
        let comm = comm.unwrap_or_else(|| {
            std::fs::read_to_string(format!("/proc/{tid}/comm"))
                .map(|c| c.trim_end_matches('\n').to_string())
                .unwrap_or_else(|_| c_string(&ts.comm.map(|c| c as u8)))
        });
        let counts = ThreadCounts {
            tgid: ts.tgid,
            tid,
            ppid: ts.ppid,
            comm,
            cgroup: ts.cgroup,
            exe: exe_id_of(&ts.exe),
            exit: None,
            stats: used(&ts),
            mask_calls: ts.mask_calls,
            errnos: errnos_of(&ts.errnos),
            errnos_lost: ts.errnos_lost,
            user_ticks: ts.user_ticks,
        };
        live.push((counts, ts.slots.iter().filter(|s| s.used != 0 && s.calls > 0).copied().collect()));
    }
    live
}

/// A program's row: every exited process of it beyond the detailed ones.
fn add_fold(out: &mut TraceBuilder, f: &Fold, names: &ExeNames, tick_ns: u64, path_of: &Paths, lost: &mut Lost) {
    let t = ThreadCounts {
        tgid: f.row,
        tid: f.row,
        ppid: f.ppid,
        comm: f.comm.clone(),
        cgroup: f.cgroup,
        exe: f.exe,
        exit: None,
        stats: f.stats.values().cloned().collect(),
        mask_calls: f.mask_calls,
        errnos: f.errnos.iter().map(|(&(nr, err), &n)| (nr, err, n)).collect(),
        errnos_lost: f.errnos_lost,
        user_ticks: f.user_ticks,
    };
    add_thread(out, t, names, tick_ns, lost);
    out.set_folded(f.row, f.processes);
    for (&(nr, fd, hash), a) in &f.args {
        let hist = |b: &[u64]| Histogram::from_buckets(b.to_vec());
        out.add_argument(ArgumentStats {
            requested: a.hist.as_ref().map(|(r, _)| hist(r)),
            returned: a.hist.as_ref().map(|(_, r)| hist(r)),
            ..argument_stats(f.row, nr, fd, hash, a.calls, a.errors, a.ns, path_of)
        });
    }
}

/// A repeated argument entry of the kernel's table, as `pid`'s.
fn arg_entry(k: &arg_key, v: &arg_val, hist: Option<&io_hist>, pid: u32, path_of: &Paths) -> ArgumentStats {
    ArgumentStats {
        requested: hist.map(|h| Histogram::from_buckets(h.requested.to_vec())),
        returned: hist.map(|h| Histogram::from_buckets(h.returned.to_vec())),
        ..argument_stats(pid, k.nr, k.fd, k.path_hash, v.calls, v.errors, v.ns, path_of)
    }
}

fn add_thread(out: &mut TraceBuilder, t: ThreadCounts, names: &ExeNames, tick_ns: u64, lost: &mut Lost) {
    for s in t.stats {
        out.add_syscall(t.tgid, t.tid, s);
    }
    for (class, &n) in t.mask_calls.iter().enumerate().filter(|(_, n)| **n > 0) {
        out.add_argument(mask_stats(t.tgid, class as i64, n));
    }
    for &(nr, err, n) in &t.errnos {
        out.add_errno(t.tgid, nr, &crate::linux::errno::name(err), n);
    }
    lost.errno_table_full += t.errnos_lost;
    out.add_user_cpu(t.user_ticks * tick_ns);
    out.add_task(
        t.tid,
        TaskRecord { tgid: t.tgid, ppid: t.ppid, comm: t.comm, exit: t.exit, cgroup: t.cgroup, executable: names.get(&t.exe).cloned() },
    );
}

/// Every thread id on the host, from /proc, listed as it is walked.
fn all_tids() -> impl Iterator<Item = u32> {
    fn numbers(dir: String) -> impl Iterator<Item = u32> {
        std::fs::read_dir(dir).into_iter().flatten().filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
    }
    numbers("/proc".into()).flat_map(|pid| numbers(format!("/proc/{pid}/task")))
}

fn read_lost(maps: &Tables) -> Result<Lost> {
    let lost = &maps.lost;
    let get = |c: lost_counter| -> Result<u64> {
        Ok(lost
            .lookup_percpu(&c.0.to_ne_bytes(), MapFlags::ANY)
            .map_err(bpf_error)?
            .map_or(0, |cpus| cpus.iter().map(|v| from_bytes::<u64>(v)).sum()))
    };
    Ok(Lost {
        tasks_untraced: get(lost_counter::LOST_NO_TASK_STORAGE)?,
        exit_records: get(lost_counter::LOST_EXIT_RECORDS)?,
        argument_table_full: get(lost_counter::LOST_ARG_TABLE_FULL)?,
        argument_alloc_failed: get(lost_counter::LOST_ARG_NOMEM)?,
        once_table_full: get(lost_counter::LOST_ONCE_TABLE_FULL)?,
        errno_table_full: get(lost_counter::LOST_ERRNO_TABLE_FULL)?,
        path_unreadable: get(lost_counter::LOST_PATH_UNREADABLE)?,
        path_truncated: get(lost_counter::LOST_PATH_TRUNCATED)?,
        path_strings: get(lost_counter::LOST_PATH_STRING)?,
        compat_syscalls: get(lost_counter::LOST_COMPAT)?,
        syscall_nr_out_of_range: get(lost_counter::LOST_NR_OUT_OF_RANGE)?,
        samples_dropped: get(lost_counter::LOST_SAMPLES_DROPPED)?,
        histogram_table_full: get(lost_counter::LOST_HIST_TABLE_FULL)?,
        environments: get(lost_counter::LOST_EXEC)?,
        first_sighting_races: get(lost_counter::LOST_FIRST_RACE)?,
        syscall_spill_full: get(lost_counter::LOST_SYSCALL_SPILL_FULL)?,
        failure_names: get(lost_counter::LOST_FAILURE_NAME)?,
        // Counted in user space (file_into, and the pipeline's finish).
        argument_keys_over_budget: 0,
        syscall_exits_unseen: 0,
        hook_runs_missed: 0,
    })
}

/// rt_sigprocmask calls of one class, counted in task storage (no time or
/// errors per class: the syscall's own stats have those).
fn mask_stats(tgid: u32, class: i64, calls: u64) -> ArgumentStats {
    argument_stats(tgid, libc::SYS_rt_sigprocmask as u32, class, 0, calls, 0, 0, &Paths::default())
}

fn slot_stats(tgid: u32, s: &arg_slot, path_of: &Paths) -> ArgumentStats {
    let io = syscalls::by_nr(s.nr).map(|i| matches!(i.arg, ArgKind::FdIo { .. })).unwrap_or(false);
    let hist = |b: &[u32]| Histogram::from_buckets(b.iter().map(|&n| n as u64).collect());
    ArgumentStats {
        requested: io.then(|| hist(&s.requested)),
        returned: io.then(|| hist(&s.returned)),
        ..argument_stats(tgid, s.nr, s.fd, s.path_hash, s.calls, s.errors, s.ns, path_of)
    }
}

#[allow(clippy::too_many_arguments)]
fn argument_stats(tgid: u32, nr: u32, fd: i64, path_hash: u64, calls: u64, errors: u64, ns: u64, path_of: &Paths) -> ArgumentStats {
    ArgumentStats {
        pid: tgid,
        syscall: syscalls::name(nr),
        nr,
        argument: argument_of(nr, fd, path_hash, path_of),
        calls,
        errors,
        total_ns: ns,
        requested: None,
        returned: None,
        sites: Vec::new(),
    }
}

pub fn argument_of(nr: u32, fd: i64, path_hash: u64, path_of: &Paths) -> Argument {
    match syscalls::by_nr(nr).map(|s| s.arg) {
        Some(ArgKind::Path(i)) => {
            // None: unreadable, or its string was lost to a full table.
            let known = (path_hash != UNREADABLE_PATH && path_hash != NULL_PATH).then(|| path_of.get(path_hash)).flatten();
            Argument::Path {
                path: known.map(|p| p.text.clone()),
                dirfd: (i > 0 && fd != AT_FDCWD).then_some(fd),
                null: path_hash == NULL_PATH,
                cut: known.is_some_and(|p| p.cut),
                raw: known.and_then(|p| p.raw.clone()),
            }
        }
        Some(ArgKind::Clock(_)) => Argument::Clock { clock: fd },
        Some(ArgKind::TimeoutMs(_) | ArgKind::TimeoutPtr(_)) => Argument::Timeout { timeout: timeout_of(fd) },
        Some(ArgKind::SigMask) => Argument::SigMask { change: mask_change_of(fd) },
        Some(ArgKind::Brk) => Argument::Brk { change: brk_change_of(fd) },
        _ => Argument::Fd { fd },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_no_read_wants_are_forgotten_after_a_grace() {
        let mut p = Paths::forgetting();
        p.add([(7, PathText::of(b"/a", false)), (8, PathText::of(b"/b", false))].into());
        // Unused for two reads, then wanted: still there.
        p.forget_unused(3);
        p.forget_unused(3);
        assert_eq!(p.get(8).map(|t| t.text.as_str()), Some("/b"));
        for _ in 0..4 {
            assert!(p.get(7).is_some());
            p.forget_unused(3);
        }
        assert!(p.get(8).is_none(), "unused for three reads");
        assert_eq!(p.len(), 1);
        // A run that ends forgets nothing.
        let mut kept = Paths::default();
        kept.add([(8, PathText::of(b"/b", false))].into());
        for _ in 0..5 {
            kept.forget_unused(3);
        }
        assert!(kept.get(8).is_some());
    }

    #[test]
    fn a_slot_is_read_as_a_threads_state_only_if_tagged_with_it_and_of_its_process() {
        use libbpf_rs::{MapCore, MapHandle, MapType};
        let opts = super::super::maps::create_opts(0);
        let size = std::mem::size_of::<state_slot>();
        let Ok(slots) = MapHandle::create(MapType::Array, Some("state_slots"), 4, size as u32, 256, &opts) else {
            return; // no BPF rights here
        };
        let (tid, pid) = (unsafe { libc::gettid() } as u32, std::process::id());
        let put = |tag: u32, tgid: u32| {
            let mut slot: state_slot = from_bytes(&vec![0u8; size]);
            slot.tid = u64::from(tag);
            slot.s.tgid = tgid;
            slot.s.seq = 42;
            slots.update(&(tid % 256).to_ne_bytes(), bytes_of(&slot), MapFlags::ANY).unwrap();
        };
        put(tid, pid);
        let state: Option<task_state> = slot_state(&slots, tid).map(|v| from_bytes(&v));
        assert_eq!(state.map(|s| s.seq), Some(42));
        // Another thread's tag on the same slot, or a state of another
        // process under this tid (a stale one, its tid reused): none.
        put(tid + 256, pid);
        assert!(slot_state(&slots, tid).is_none());
        put(tid, pid + 1);
        assert!(slot_state(&slots, tid).is_none());
    }
}
