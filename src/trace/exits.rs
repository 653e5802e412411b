//! What the kernel side sends while the target runs: exited threads'
//! counts (the `exits` ring, when a thread ends) and repeated paths'
//! strings (the `strings` ring), read and filed as they come (fold.rs), so
//! that no fixed table bounds how many threads, processes and paths a run
//! has; and every 2 s the argument entries of processes that ended, swept
//! out of the kernel's table.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::rc::Rc;
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use libbpf_rs::{MapCore, MapFlags, MapHandle, RingBufferBuilder};

use super::bpf::skel::types::{
    arg_key, arg_slot, arg_val, errno_slot, exec_record, exit_entry, exit_record, io_hist, path_record, record_kind, slot_record, sys_val,
};
use super::bpf::{c_string, from_bytes, read_all};
use super::fold::{Exited, KeyBudget};
use super::wake::Stop;
use crate::error::{Error, Result};
use crate::model::{Environment, Exit, SyscallStats};

const RECORD_SLOT: u32 = record_kind::RECORD_SLOT.0;
const RECORD_EXIT: u32 = record_kind::RECORD_EXIT.0;
const RECORD_PATH: u32 = record_kind::RECORD_PATH.0;
const RECORD_EXEC: u32 = record_kind::RECORD_EXEC.0;
/// An exec record's `cut` when the environment could not be read (syscount.h).
const ENV_UNREAD: u32 = 2;
/// How often the reader looks, besides the kernel's batched wake-ups.
const POLL: Duration = Duration::from_millis(50);

/// One thread's counts: from its exit record, or read from its task
/// storage while it still runs.
#[derive(Debug, Clone)]
pub struct ThreadCounts {
    pub tgid: u32,
    pub tid: u32,
    pub ppid: u32,
    pub comm: String,
    /// Its cgroup v2 id, as the kernel side saw it at fork or exec.
    pub cgroup: u64,
    /// The file it runs, at fork or exec.
    pub exe: ExeId,
    /// How it ended (wait status), for exited threads.
    pub exit: Option<Exit>,
    /// Every syscall it made.
    pub stats: Vec<SyscallStats>,
    pub mask_calls: [u64; 6],
    /// (syscall, errno, count)
    pub errnos: Vec<(u32, u32, u64)>,
    pub errnos_lost: u64,
    pub user_ticks: u64,
}

impl ThreadCounts {
    pub fn calls(&self) -> u64 {
        self.stats.iter().map(|s| s.calls).sum()
    }
}

pub(super) fn errnos_of(slots: &[errno_slot]) -> Vec<(u32, u32, u64)> {
    slots.iter().filter(|s| s.count > 0).map(|s| (s.nr as u32, s.err as u32, s.count)).collect()
}

/// Which file a process runs: (inode, device); (0, 0) for a kernel thread.
pub type ExeId = (u64, u32);

/// The kernel side's (inode, device) of a file, as user space keys it.
pub(super) fn exe_id_of(e: &super::bpf::skel::types::exe_id) -> ExeId {
    (e.ino, e.dev)
}

/// Executables' paths by their identity.
pub type ExeNames = HashMap<ExeId, String>;

/// A repeated path's text, as the kernel side read it.
#[derive(Debug, Clone)]
pub struct PathText {
    pub text: String,
    /// Longer than the kernel side reads: `text` is its beginning.
    pub cut: bool,
    /// The exact bytes, when they are not UTF-8.
    pub raw: Option<Vec<u8>>,
}

impl PathText {
    fn of(bytes: &[u8], cut: bool) -> PathText {
        let bytes = &bytes[..bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len())];
        match std::str::from_utf8(bytes) {
            Ok(text) => PathText { text: text.to_string(), cut, raw: None },
            Err(_) => PathText { text: String::from_utf8_lossy(bytes).into_owned(), cut, raw: Some(bytes.to_vec()) },
        }
    }
}

/// Repeated paths by the hash of what was read of them.
pub type PathOf = HashMap<u64, PathText>;

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
    /// forgotten. More than one: a key swept out of the kernel's table
    /// during a read is in neither place for that one read.
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

/// Bytes of a path the kernel side reads, its NUL included.
// SAFETY: a path record is plain integers and bytes; zero is valid.
const PATH_BYTES: usize = super::bpf::array_len(&unsafe { std::mem::zeroed::<path_record>() }.path);

/// A record off the ring.
#[derive(Debug, Clone)]
pub enum Record {
    Thread(ThreadCounts),
    /// A cached argument key's calls not yet in arg_stats: (tgid, tid, slot).
    Slot(u32, u32, Box<arg_slot>),
    /// The string of a path key: (path hash, path).
    Path(u64, PathText),
    /// A process's exec: the file it runs, as exec named it, and what
    /// rules read of its environment (None: it could not be read).
    Exec {
        tgid: u32,
        exe: ExeId,
        name: String,
        env: Option<Environment>,
    },
}

impl Record {
    pub fn tid(&self) -> u32 {
        match self {
            Record::Thread(t) => t.tid,
            Record::Slot(_, tid, _) => *tid,
            Record::Path(..) | Record::Exec { .. } => 0,
        }
    }

    /// Parses one record; None for one shorter than its header says.
    pub fn parse(data: &[u8]) -> Option<Record> {
        let kind = u32::from_ne_bytes(data.get(..4)?.try_into().ok()?);
        match kind {
            RECORD_SLOT if data.len() >= std::mem::size_of::<slot_record>() => {
                let r: slot_record = from_bytes(data);
                Some(Record::Slot(r.tgid, r.tid, Box::new(r.slot)))
            }
            RECORD_PATH => {
                // Cut after the path's NUL: read the header, then the bytes sent.
                let at = std::mem::offset_of!(path_record, path);
                let h = std::mem::offset_of!(path_record, path_hash);
                let hash = u64::from_ne_bytes(data.get(h..h + 8)?.try_into().ok()?);
                // A len past the buffer is the kernel side's mark of a cut path.
                let l = std::mem::offset_of!(path_record, len);
                let len = u32::from_ne_bytes(data.get(l..l + 4)?.try_into().ok()?) as usize;
                Some(Record::Path(hash, PathText::of(data.get(at..)?, len > PATH_BYTES)))
            }
            RECORD_EXEC => {
                // Cut after the environment sent: the header is whole.
                let at = std::mem::offset_of!(exec_record, env);
                let r: exec_record = from_bytes(&[data.get(..at)?, &vec![0u8; std::mem::size_of::<exec_record>() - at]].concat());
                Some(Record::Exec {
                    tgid: r.tgid,
                    exe: exe_id_of(&r.exe),
                    name: c_string(&r.exe_name.map(|c| c as u8)),
                    env: (r.cut != ENV_UNREAD).then(|| crate::target::environment_of_block(data.get(at..).unwrap_or_default())),
                })
            }
            RECORD_EXIT => {
                let head = std::mem::offset_of!(exit_record, e);
                // The record is cut after its last entry: read the header
                // whole, then the entries it says it has.
                let mut full = vec![0u8; std::mem::size_of::<exit_record>()];
                let n = data.len().min(full.len());
                full[..n].copy_from_slice(&data[..n]);
                let r: &exit_record = &from_bytes(&full);
                let entries = r.entries as usize;
                if data.len() < head + entries * std::mem::size_of::<exit_entry>() {
                    return None;
                }
                Some(Record::Thread(ThreadCounts {
                    tgid: r.tgid,
                    tid: r.tid,
                    ppid: r.ppid,
                    comm: c_string(&r.comm.map(|c| c as u8)),
                    cgroup: r.cgroup,
                    exe: exe_id_of(&r.exe),
                    exit: Some(Exit::from_wait_status(r.exit_code)),
                    stats: r.e[..entries].iter().map(|e| syscall_stats(e.nr, &e.v)).collect(),
                    mask_calls: r.mask_calls,
                    errnos: errnos_of(&r.errnos),
                    errnos_lost: r.errnos_lost,
                    user_ticks: r.user_ticks,
                }))
            }
            _ => None,
        }
    }
}

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
    pub executables: ExeNames,
}

/// The kernel tables the reader empties of ended processes' entries.
pub struct SweepMaps {
    pub args: MapHandle,
    pub hists: MapHandle,
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
    thread: JoinHandle<Collected>,
}

impl ExitReader {
    /// Reads `rings` (the exits and the path strings) until finished.
    /// `folded` is kept up to date with the processes folded so far; folds
    /// keep argument keys within `budget`.
    pub fn start(rings: Vec<MapHandle>, sweep: SweepMaps, folded: Shared, budget: KeyBudget) -> Result<ExitReader> {
        let stop = Arc::new(Stop::new()?);
        let (ready_tx, ready_rx) = mpsc::sync_channel(1);
        let (cp_tx, cp_rx) = mpsc::channel();
        let (snap_tx, snap_rx) = mpsc::channel();
        let reader_stop = stop.clone();
        let thread = std::thread::Builder::new()
            .name("sysdiet-exits".into())
            .spawn(move || read(rings, sweep, folded, budget, &reader_stop, Requests { checkpoints: cp_rx, snapshots: snap_rx }, ready_tx))?;
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(ExitReader { stop, checkpoint: cp_tx, snapshots: snap_tx, thread }),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(Error::Bpf("the exit record reader did not start".into())),
        }
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

    /// Reads what is left and hands everything over.
    pub fn finish(self) -> Collected {
        self.stop.stop();
        self.thread.join().unwrap_or_default()
    }
}

/// Parses and files the records copied so far.
fn file(raw: &RefCell<Vec<Vec<u8>>>, out: &mut Collected, late: bool, to_sweep: &mut HashSet<u32>) {
    for bytes in std::mem::take(&mut *raw.borrow_mut()) {
        match Record::parse(&bytes) {
            Some(Record::Path(hash, path)) => {
                out.paths.entry(hash).or_insert(path);
            }
            // A process that execs again has the later environment.
            Some(Record::Exec { tgid, exe, name, env }) => {
                match env {
                    Some(env) => out.environments.insert(tgid, env),
                    None => out.environments.remove(&tgid),
                };
                // While it runs, its /proc link names the file as ls would
                // (no symlink, no script): the name exec got otherwise.
                out.executables.entry(exe).or_insert_with(|| crate::linux::host::executable(tgid, exe).unwrap_or(name));
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
}

fn read(
    rings: Vec<MapHandle>,
    sweep: SweepMaps,
    folded: Shared,
    budget: KeyBudget,
    stop: &Stop,
    asked: Requests,
    ready: mpsc::SyncSender<Result<()>>,
) -> Collected {
    // The callbacks only copy; records are parsed and filed between reads.
    let raw: Rc<RefCell<Vec<Vec<u8>>>> = Rc::default();
    let mut builder = RingBufferBuilder::new();
    let mut added = Ok(());
    for ring in &rings {
        let sink = raw.clone();
        added = added.and_then(|_| {
            builder
                .add(ring, move |data: &[u8]| {
                    sink.borrow_mut().push(data.to_vec());
                    0
                })
                .map(|_| ())
        });
    }
    let mut out = Collected::default();
    out.exited.budget = budget;
    let rb = match added.and_then(|_| builder.build()) {
        Ok(rb) => {
            let _ = ready.send(Ok(()));
            rb
        }
        Err(e) => {
            let _ = ready.send(Err(Error::Bpf(format!("exit record ring buffer: {e}"))));
            return out;
        }
    };
    let mut late = false;
    let mut to_sweep: HashSet<u32> = HashSet::new();
    let mut last_sweep = Instant::now();
    loop {
        let last = stop.stopped();
        if !last {
            stop.wait(rb.epoll_fd(), POLL);
        }
        let _ = rb.consume();
        file(&raw, &mut out, late, &mut to_sweep);
        while let Ok(reply) = asked.checkpoints.try_recv() {
            let _ = rb.consume();
            file(&raw, &mut out, late, &mut to_sweep);
            late = true;
            let _ = reply.send(());
        }
        while let Ok(reply) = asked.snapshots.try_recv() {
            let _ = rb.consume();
            file(&raw, &mut out, late, &mut to_sweep);
            let copy = Collected {
                exited: out.exited.clone(),
                late: Vec::new(),
                paths: std::mem::take(&mut out.paths),
                environments: out.environments.clone(),
                executables: std::mem::take(&mut out.executables),
            };
            let _ = reply.send(copy);
        }
        if last {
            break;
        }
        if !late && last_sweep.elapsed() >= SWEEP {
            if !to_sweep.is_empty() {
                sweep_ended(&sweep, &mut out.exited, &mut to_sweep);
            }
            if let Ok(mut shared) = folded.lock() {
                shared.clone_from(&out.exited.remap);
            }
            // A folded process's environment is dropped at the read-out
            // (its row has none): once it is gone, not kept for hours.
            let remap = &out.exited.remap;
            out.environments.retain(|pid, _| !remap.contains_key(pid) || std::path::Path::new(&format!("/proc/{pid}")).exists());
            last_sweep = Instant::now();
        }
    }
    out
}

/// Takes the argument entries of processes that ended (and whose pid is
/// not in use again) out of the kernel's table, so that a long run never
/// fills it: repeated ones into their row, one-shot ones (already in the
/// summary) just deleted.
fn sweep_ended(maps: &SweepMaps, exited: &mut Exited, to_sweep: &mut HashSet<u32>) {
    let dead: HashSet<u32> = to_sweep.iter().copied().filter(|p| !std::path::Path::new(&format!("/proc/{p}")).exists()).collect();
    if dead.is_empty() {
        return;
    }
    let Ok(entries) = read_all(&maps.args) else { return };
    // Deleted in batches: one syscall per entry was most of the reader's
    // CPU on a host starting hundreds of processes a second.
    let (mut gone, mut gone_hists) = (Vec::new(), Vec::new());
    for (k, v) in entries.iter() {
        let key: arg_key = from_bytes(k);
        if !dead.contains(&key.tgid) {
            continue;
        }
        let val: arg_val = from_bytes(v);
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
    to_sweep.retain(|p| !dead.contains(p));
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

/// The syscalls of a thread's storage that it used.
pub(super) fn used(stats: &[sys_val]) -> Vec<SyscallStats> {
    stats.iter().enumerate().filter(|(_, s)| s.calls > 0).map(|(nr, s)| syscall_stats(nr as u32, s)).collect()
}

/// One syscall's counts, as the kernel side keeps them, in the model's terms.
pub(super) fn syscall_stats(nr: u32, v: &sys_val) -> SyscallStats {
    SyscallStats { calls: v.calls, errors: v.errors, total_ns: v.ns, min_ns: v.min_ns, max_ns: v.max_ns, ..SyscallStats::new(nr) }
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
}
