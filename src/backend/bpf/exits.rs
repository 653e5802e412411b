//! What the kernel side sends while the target runs: exited threads'
//! counts (the `exits` ring, when a thread ends) and repeated paths'
//! strings (the `strings` ring), read and filed as they come (fold.rs), so
//! that no fixed table bounds how many threads, processes and paths a run
//! has; and every 2 s the argument entries of processes that ended, swept
//! out of the kernel's table.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::os::fd::AsRawFd;
use std::sync::{mpsc, Arc, Mutex, MutexGuard, TryLockError};
use std::time::{Duration, Instant};

use libbpf_rs::{MapCore, MapFlags, MapHandle};

use super::fold::{Exited, KeyBudget};
use super::maps::{from_bytes, read_all};
use super::records::{errno_entries, spill_entries, ExeNames, Failure, PathOf, Record};
use super::ring::Rings;
use super::skel::types::{arg_key, arg_val, io_hist};
use super::word_counts::WordCounts;
use crate::backend::wake::Stop;
use crate::error::{Error, Result};
use crate::model::{Environment, FAILED_ONCE_NAMED};

/// The least the reader sleeps while a sweep is due (one put off by a
/// read-out holding the tables). Otherwise it sleeps until the next sweep:
/// the kernel wakes it when a ring is an eighth full, and a snapshot or
/// the end pokes it, so records wait in their ring at no cost, and an idle
/// host wakes it once a sweep, not 20 times a second.
const POLL: Duration = Duration::from_millis(50);

/// What the reader hands over: the exited threads, folded past the
/// detailed ones; records that came after the checkpoint, as they are; the
/// path strings; each process's environment at its exec; the names of the
/// files processes ran.
#[derive(Debug, Default)]
pub struct Collected {
    pub exited: Exited,
    pub late: Vec<Record>,
    pub paths: PathOf,
    pub environments: HashMap<u32, Environment>,
    /// Each process's failed lookups of new paths sent by name (since its
    /// last exec), up to FAILED_ONCE_NAMED.
    pub failures: HashMap<u32, Vec<Failure>>,
    pub executables: ExeNames,
    /// Why records were left unread in a ring (a chunk that could not be
    /// mapped): the read-out is then an error, not counts short.
    pub unread: Option<String>,
}

impl Collected {
    /// An error if records were left unread: counts read so would be short.
    pub fn whole(&self) -> Result<()> {
        match &self.unread {
            Some(why) => Err(Error::Bpf(format!("exit records left unread: {why}"))),
            None => Ok(()),
        }
    }
}

/// The kernel tables the reader empties of ended processes' entries.
pub struct SweepMaps {
    pub args: MapHandle,
    pub hists: MapHandle,
    /// first_calls: the calls some entries count in their word.
    pub first_calls: MapHandle,
    /// errno_stats and syscall_spill: what threads' own slots did not hold.
    pub errnos: MapHandle,
    pub spill: MapHandle,
}

/// pid -> fold row, published for the stack collector.
pub type Shared = Arc<std::sync::Mutex<HashMap<u32, u32>>>;

/// How often ended processes' argument entries are taken out of the kernel,
/// and the fold rows published.
const SWEEP: Duration = Duration::from_secs(2);

/// The thread that reads the rings while the target runs.
pub struct ExitReader {
    stop: Arc<Stop>,
    checkpoint: mpsc::Sender<mpsc::Sender<()>>,
    snapshots: mpsc::Sender<mpsc::Sender<Collected>>,
    /// What the thread read, handed over before it unmaps its rings.
    done: mpsc::Receiver<Collected>,
    /// Whether the thread mapped its rings: its one word, and then what
    /// it said.
    ready: mpsc::Receiver<std::result::Result<(), String>>,
    started: std::sync::OnceLock<std::result::Result<(), String>>,
    /// Held by a read-out of the live tables, which must not see a sweep
    /// halfway: an entry moved meanwhile would be in neither place.
    sweeps: Arc<Mutex<()>>,
}

impl ExitReader {
    /// Reads `rings` (the exits and the path strings) until finished.
    /// `folded` is kept up to date with the processes folded so far; folds
    /// keep argument keys within `budget`.
    /// Returns while the new thread maps the rings' positions: what the
    /// programs send meanwhile waits in the rings, so the run need not
    /// wait for it to start its target; `started` says whether it could.
    pub fn spawn(rings: Vec<MapHandle>, sweep: SweepMaps, folded: Shared, budget: KeyBudget) -> Result<ExitReader> {
        let stop = Arc::new(Stop::new()?);
        let (ready_tx, ready) = mpsc::sync_channel(1);
        let (cp_tx, cp_rx) = mpsc::channel();
        let (snap_tx, snap_rx) = mpsc::channel();
        let (done_tx, done) = mpsc::sync_channel(1);
        let reader_stop = stop.clone();
        let sweeps = Arc::new(Mutex::new(()));
        let asked = Requests { checkpoints: cp_rx, snapshots: snap_rx, done: done_tx, sweeps: sweeps.clone() };
        std::thread::Builder::new().name("sysdiet-exits".into()).spawn(move || read(rings, sweep, folded, budget, &reader_stop, asked, ready_tx))?;
        Ok(ExitReader { stop, checkpoint: cp_tx, snapshots: snap_tx, done, ready, started: Default::default(), sweeps })
    }

    /// No sweep until the guard is dropped: for a snapshot and the read of
    /// the tables that goes with it.
    pub fn hold_sweeps(&self) -> MutexGuard<'_, ()> {
        self.sweeps.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits until the rings are mapped; an error if they could not be
    /// (then nothing the programs sent can be read).
    pub fn started(&self) -> Result<()> {
        let said = self.started.get_or_init(|| match self.ready.recv() {
            Ok(said) => said,
            Err(_) => Err("the exit record reader did not start".into()),
        });
        said.clone().map_err(Error::Bpf)
    }

    /// Not needed after all (the programs did not attach): its thread ends.
    pub fn abandon(self) {
        self.stop.stop();
    }

    /// Reads everything sent so far; what comes after is kept apart (`late`).
    pub fn checkpoint(&self) {
        let (tx, rx) = mpsc::channel();
        if self.checkpoint.send(tx).is_ok() {
            self.stop.poke();
            let _ = rx.recv();
        }
    }

    /// Reads everything sent so far and hands over a copy of what is filed,
    /// reading on (sysdiet top / serve). Path strings are handed over once:
    /// the caller keeps them.
    pub fn snapshot(&self) -> Collected {
        let (tx, rx) = mpsc::channel();
        if self.snapshots.send(tx).is_err() {
            return Collected::default();
        }
        self.stop.poke();
        rx.recv().unwrap_or_default()
    }

    /// Has the thread read what is left, while the caller reads the
    /// tables: no sweep is under way or starts once this returns, so no
    /// entry moves meanwhile. `Finishing::collected` hands everything over.
    pub fn finish_beside(self) -> Finishing {
        self.stop.stop();
        // A sweep that began before the stop ends first; the reader looks
        // at the stop under this lock before it starts one (`read`).
        drop(self.hold_sweeps());
        Finishing { done: self.done }
    }
}

/// The reader's last pass, under way on its thread.
pub struct Finishing {
    done: mpsc::Receiver<Collected>,
}

impl Finishing {
    /// Waits for the last pass and hands everything over.
    pub fn collected(self) -> Collected {
        let _t = crate::timings::span("wait for the exit reader's last pass");
        self.done.recv().unwrap_or_default()
    }
}

/// Parses and files the records copied so far.
fn file(raw: &RefCell<Vec<Vec<u8>>>, out: &mut Collected, late: bool, to_sweep: &mut HashSet<u32>) {
    for bytes in std::mem::take(&mut *raw.borrow_mut()) {
        match Record::parse(&bytes) {
            Some(Record::Path(hash, path)) => {
                out.paths.entry(hash).or_insert(path);
            }
            // A process that execs again has the later environment, and
            // the later program's failed lookups.
            Some(Record::Exec { tgid, exe, name, env }) => {
                out.failures.remove(&tgid);
                match env {
                    Some(env) => out.environments.insert(tgid, env),
                    None => out.environments.remove(&tgid),
                };
                // While it runs, its /proc link names the file as ls would
                // (no symlink, no script): the name exec got otherwise.
                out.executables.entry(exe).or_insert_with(|| crate::linux::host::executable(tgid, exe).unwrap_or(name));
            }
            Some(Record::Failure(f)) => {
                let named = out.failures.entry(f.tgid).or_default();
                if named.len() < FAILED_ONCE_NAMED {
                    named.push(f);
                }
            }
            Some(r) if late => out.late.push(r),
            Some(Record::Thread(t)) => {
                if t.tid == t.tgid {
                    to_sweep.insert(t.tgid);
                }
                out.exited.add_thread(t);
            }
            Some(Record::Slot(tgid, _, s)) => {
                let io = crate::linux::syscalls::by_nr(s.nr).is_some_and(|i| matches!(i.arg, crate::linux::syscalls::ArgKind::FdIo { .. }));
                out.exited.add_slot(tgid, *s, io);
            }
            None => {}
        }
    }
}

/// What the reader is asked for while it reads.
struct Requests {
    checkpoints: mpsc::Receiver<mpsc::Sender<()>>,
    snapshots: mpsc::Receiver<mpsc::Sender<Collected>>,
    /// Where everything goes at the end: handed over before the rings are
    /// unmapped (milliseconds, as mapping them was), which the thread then
    /// does on its own while the run reports.
    done: mpsc::SyncSender<Collected>,
    /// Taken by each sweep; held by a read-out meanwhile (hold_sweeps).
    sweeps: Arc<Mutex<()>>,
}

fn read(
    rings: Vec<MapHandle>,
    sweep: SweepMaps,
    folded: Shared,
    budget: KeyBudget,
    stop: &Stop,
    asked: Requests,
    ready: mpsc::SyncSender<std::result::Result<(), String>>,
) {
    let mut out = Collected::default();
    out.exited.budget = budget;
    let mut rings = match Rings::new(&rings.iter().collect::<Vec<_>>()) {
        Ok(rings) => {
            let _ = ready.send(Ok(()));
            rings
        }
        Err(e) => {
            let _ = ready.send(Err(format!("the exit record rings: {e}")));
            let _ = asked.done.send(out);
            return;
        }
    };
    // Records are copied out, and parsed and filed between reads.
    let raw: RefCell<Vec<Vec<u8>>> = RefCell::default();
    let unread: RefCell<Option<String>> = RefCell::default();
    let consume = |rings: &mut Rings| {
        if let Err(e) = rings.consume(|_, data| raw.borrow_mut().push(data.to_vec())) {
            unread.borrow_mut().get_or_insert_with(|| e.to_string());
        }
    };
    let mut late = false;
    let mut to_sweep: HashSet<u32> = HashSet::new();
    let mut last_sweep = Instant::now();
    loop {
        let last = stop.stopped();
        let _last_pass = last.then(|| crate::timings::span("last pass of the exit reader"));
        if !last {
            stop.wait(rings.epoll_fd().as_raw_fd(), SWEEP.saturating_sub(last_sweep.elapsed()).max(POLL));
        }
        consume(&mut rings);
        file(&raw, &mut out, late, &mut to_sweep);
        while let Ok(reply) = asked.checkpoints.try_recv() {
            consume(&mut rings);
            file(&raw, &mut out, late, &mut to_sweep);
            late = true;
            let _ = reply.send(());
        }
        while let Ok(reply) = asked.snapshots.try_recv() {
            consume(&mut rings);
            file(&raw, &mut out, late, &mut to_sweep);
            let copy = Collected {
                exited: out.exited.clone(),
                late: Vec::new(),
                paths: std::mem::take(&mut out.paths),
                environments: out.environments.clone(),
                failures: out.failures.clone(),
                executables: std::mem::take(&mut out.executables),
                unread: unread.borrow().clone(),
            };
            let _ = reply.send(copy);
        }
        if last {
            break;
        }
        if !late && last_sweep.elapsed() >= SWEEP {
            // Not while the tables are being read: the next turn.
            let _sweeping = match asked.sweeps.try_lock() {
                Ok(guard) => guard,
                Err(TryLockError::Poisoned(e)) => e.into_inner(),
                Err(TryLockError::WouldBlock) => continue,
            };
            // The end's read-out has begun (finish_beside): the next turn is
            // the last, and sweeps nothing.
            if stop.stopped() {
                continue;
            }
            if !to_sweep.is_empty() {
                sweep_ended(&sweep, &mut out.exited, &mut to_sweep);
            }
            if let Ok(mut shared) = folded.lock() {
                shared.clone_from(&out.exited.remap);
            }
            // A folded process's environment and failed lookups are
            // dropped at the read-out (its row has none): once it is gone,
            // not kept for hours.
            let remap = &out.exited.remap;
            // Each folded pid's /proc looked at once, for both tables.
            let folded: HashSet<u32> = out.environments.keys().chain(out.failures.keys()).filter(|pid| remap.contains_key(pid)).copied().collect();
            let gone: HashSet<u32> = folded.into_iter().filter(|pid| !std::path::Path::new(&format!("/proc/{pid}")).exists()).collect();
            out.environments.retain(|pid, _| !gone.contains(pid));
            out.failures.retain(|pid, _| !gone.contains(pid));
            last_sweep = Instant::now();
        }
    }
    out.unread = unread.take();
    let _ = asked.done.send(out);
    // Left mapped for the process's exit to take down: a reader finishes
    // at the end of a run, and unmapping the rings now, with the process's
    // other threads alive, flushes every CPU they ran on, page range by
    // page range (docs/overhead.md).
    std::mem::forget(rings);
}

/// Takes the entries of processes that ended (and whose pid is not in use
/// again) out of the kernel's tables, so that a long run never fills
/// them: repeated argument keys, spilled syscalls and errnos into their
/// row, one-shot keys (already in the summary) just deleted.
fn sweep_ended(maps: &SweepMaps, exited: &mut Exited, to_sweep: &mut HashSet<u32>) {
    let dead: HashSet<u32> = to_sweep.iter().copied().filter(|p| !std::path::Path::new(&format!("/proc/{p}")).exists()).collect();
    if dead.is_empty() {
        return;
    }
    sweep_spilled(maps, exited, &dead);
    sweep_arguments(maps, exited, &dead);
    to_sweep.retain(|p| !dead.contains(p));
}

/// The spilled syscalls and errnos of `dead` processes, into their rows.
fn sweep_spilled(maps: &SweepMaps, exited: &mut Exited, dead: &HashSet<u32>) {
    if let Ok(entries) = read_all(&maps.spill) {
        let mut gone = Vec::new();
        for (k, tgid, stats) in spill_entries(&entries).filter(|(_, tgid, _)| dead.contains(tgid)) {
            gone.extend_from_slice(k);
            exited.add_swept_syscall(tgid, stats);
        }
        delete_all(&maps.spill, &gone);
    }
    if let Ok(entries) = read_all(&maps.errnos) {
        let mut gone = Vec::new();
        for (k, (tgid, nr, err, n)) in errno_entries(&entries).filter(|(_, (tgid, ..))| dead.contains(tgid)) {
            gone.extend_from_slice(k);
            exited.add_swept_errno(tgid, nr, err, n);
        }
        delete_all(&maps.errnos, &gone);
    }
}

/// The argument entries of `dead` processes: repeated ones into their row.
fn sweep_arguments(maps: &SweepMaps, exited: &mut Exited, dead: &HashSet<u32>) {
    let Ok(entries) = read_all(&maps.args) else { return };
    // Deleted in batches: one syscall per entry was most of the reader's
    // CPU on a host starting hundreds of processes a second.
    let (mut gone, mut gone_hists) = (Vec::new(), Vec::new());
    let ended: Vec<(&[u8], arg_key, arg_val)> =
        entries.iter().map(|(k, v)| (k, from_bytes::<arg_key>(k), from_bytes(v))).filter(|(_, key, _)| dead.contains(&key.tgid)).collect();
    let words = WordCounts::new(&maps.first_calls, ended.iter().map(|(_, _, v)| v));
    for (k, key, mut val) in ended {
        // A word not read: the entry stays for the final read-out.
        if words.add_to(&mut val).is_err() {
            continue;
        }
        // Only read/write keys have a histogram.
        let io = crate::linux::syscalls::by_nr(key.nr).is_some_and(|i| matches!(i.arg, crate::linux::syscalls::ArgKind::FdIo { .. }));
        let hist = io.then(|| maps.hists.lookup(k, MapFlags::ANY).ok().flatten().map(|h| from_bytes::<io_hist>(&h))).flatten();
        if hist.is_some() {
            gone_hists.extend_from_slice(k);
        }
        gone.extend_from_slice(k);
        if val.once == 0 {
            exited.add_swept(key, val, hist);
        }
    }
    delete_all(&maps.hists, &gone_hists);
    delete_all(&maps.args, &gone);
}

/// Deletes `keys` (packed one after another) from `map`, in batches; one
/// by one if the kernel has no batch delete for it.
fn delete_all(map: &MapHandle, keys: &[u8]) {
    let size = map.key_size() as usize;
    for chunk in keys.chunks(size * 4096) {
        let n = (chunk.len() / size) as u32;
        if n == 0 || map.delete_batch(chunk, n, MapFlags::ANY, MapFlags::ANY).is_err() {
            for k in chunk.chunks(size) {
                let _ = map.delete(k);
            }
        }
    }
}
