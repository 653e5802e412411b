//! Exited threads' counts, as the kernel side sends them through the
//! `exits` ring buffer when a thread ends: read while the target runs, so
//! that no fixed table bounds how many threads and processes a run has.

use std::cell::RefCell;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::Duration;

use libbpf_rs::{MapHandle, RingBufferBuilder};

use super::bpf::skel::types::{arg_slot, errno_slot, exit_entry, exit_record, path_record, slot_record, sys_val};
use super::bpf::{c_string, from_bytes};
use crate::error::{Error, Result};
use crate::model::Exit;

const RECORD_SLOT: u32 = 1;
const RECORD_EXIT: u32 = 2;
const RECORD_PATH: u32 = 3;
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
    /// How it ended (wait status), for exited threads.
    pub exit: Option<Exit>,
    /// (syscall, counts) for every syscall it made.
    pub stats: Vec<(u32, sys_val)>,
    pub mask_calls: [u64; 6],
    /// (syscall, errno, count)
    pub errnos: Vec<(u32, u32, u64)>,
    pub errnos_lost: u64,
    pub user_ticks: u64,
}

impl ThreadCounts {
    pub fn calls(&self) -> u64 {
        self.stats.iter().map(|(_, v)| v.calls).sum()
    }
}

pub(super) fn errnos_of(slots: &[errno_slot]) -> Vec<(u32, u32, u64)> {
    slots.iter().filter(|s| s.count > 0).map(|s| (s.nr as u32, s.err as u32, s.count)).collect()
}

/// A record off the ring.
#[derive(Debug, Clone)]
pub enum Record {
    Thread(ThreadCounts),
    /// A cached argument key's calls not yet in arg_stats: (tgid, tid, slot).
    Slot(u32, u32, Box<arg_slot>),
    /// The string of a path key: (path hash, path).
    Path(u64, String),
}

impl Record {
    pub fn tid(&self) -> u32 {
        match self {
            Record::Thread(t) => t.tid,
            Record::Slot(_, tid, _) => *tid,
            Record::Path(..) => 0,
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
            RECORD_PATH if data.len() >= std::mem::size_of::<path_record>() => {
                let r: path_record = from_bytes(data);
                Some(Record::Path(r.path_hash, c_string(&r.path.map(|c| c as u8))))
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
                    exit: Some(Exit::from_wait_status(r.exit_code)),
                    stats: r.e[..entries].iter().map(|e| (e.nr, e.v)).collect(),
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

/// The thread that reads the ring while the target runs.
pub struct ExitReader {
    stop: Arc<AtomicBool>,
    wake: Arc<OwnedFd>,
    checkpoint: mpsc::Sender<mpsc::Sender<usize>>,
    thread: JoinHandle<Vec<Option<Record>>>,
}

impl ExitReader {
    /// Reads `rings` (the exits and the path strings) until finished.
    pub fn start(rings: Vec<MapHandle>) -> Result<ExitReader> {
        let stop = Arc::new(AtomicBool::new(false));
        // SAFETY: eventfd has no preconditions; a new fd we own.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error().into());
        }
        // SAFETY: fresh fd, ours.
        let wake = Arc::new(unsafe { OwnedFd::from_raw_fd(fd) });
        let (ready_tx, ready_rx) = mpsc::sync_channel(1);
        let (cp_tx, cp_rx) = mpsc::channel();
        let (stop_flag, wake_fd) = (stop.clone(), wake.clone());
        let thread = std::thread::Builder::new()
            .name("sysdiet-exits".into())
            .spawn(move || read(rings, stop_flag, wake_fd, cp_rx, ready_tx))?;
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(ExitReader { stop, wake, checkpoint: cp_tx, thread }),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(Error::Bpf("the exit record reader did not start".into())),
        }
    }

    fn poke(&self) {
        // SAFETY: writing 8 bytes to our own eventfd.
        unsafe { libc::write(self.wake.as_raw_fd(), 1u64.to_ne_bytes().as_ptr().cast(), 8) };
    }

    /// Reads everything sent so far; returns how many records that is.
    pub fn checkpoint(&self) -> usize {
        let (tx, rx) = mpsc::channel();
        if self.checkpoint.send(tx).is_err() {
            return usize::MAX;
        }
        self.poke();
        rx.recv().unwrap_or(usize::MAX)
    }

    /// Reads what is left and hands every record over, in order.
    pub fn finish(self) -> Vec<Option<Record>> {
        self.stop.store(true, Ordering::Release);
        self.poke();
        self.thread.join().unwrap_or_default()
    }
}

fn read(
    rings: Vec<MapHandle>,
    stop: Arc<AtomicBool>,
    wake: Arc<OwnedFd>,
    checkpoints: mpsc::Receiver<mpsc::Sender<usize>>,
    ready: mpsc::SyncSender<Result<()>>,
) -> Vec<Option<Record>> {
    // Raw bytes only while the target runs: the callback must keep up with
    // a flood of path strings; parsing waits for the end.
    let records: Rc<RefCell<Vec<Vec<u8>>>> = Rc::default();
    let mut builder = RingBufferBuilder::new();
    let mut added = Ok(());
    for ring in &rings {
        let sink = records.clone();
        added = added.and_then(|_| {
            builder
                .add(ring, move |data: &[u8]| {
                    sink.borrow_mut().push(data.to_vec());
                    0
                })
                .map(|_| ())
        });
    }
    let built = added.and_then(|_| builder.build());
    let rb = match built {
        Ok(rb) => {
            let _ = ready.send(Ok(()));
            rb
        }
        Err(e) => {
            let _ = ready.send(Err(Error::Bpf(format!("exit record ring buffer: {e}"))));
            return Vec::new();
        }
    };
    loop {
        let last = stop.load(Ordering::Acquire);
        if !last {
            wait(rb.epoll_fd(), wake.as_raw_fd());
        }
        let _ = rb.consume();
        while let Ok(reply) = checkpoints.try_recv() {
            let _ = rb.consume();
            let _ = reply.send(records.borrow().len());
        }
        if last {
            break;
        }
    }
    drop(rb);
    let raw = std::mem::take(&mut *records.borrow_mut());
    // None keeps the place of a record that does not parse (none should):
    // checkpoints count places.
    raw.iter().map(|r| Record::parse(r)).collect()
}

/// Sleeps until the ring has a batch, the eventfd is written, or POLL passes.
fn wait(ring_fd: i32, wake_fd: i32) {
    let mut fds = [
        libc::pollfd { fd: ring_fd, events: libc::POLLIN, revents: 0 },
        libc::pollfd { fd: wake_fd, events: libc::POLLIN, revents: 0 },
    ];
    // SAFETY: two valid pollfds; an error or EINTR just means look again.
    unsafe { libc::poll(fds.as_mut_ptr(), 2, POLL.as_millis() as i32) };
    if fds[1].revents & libc::POLLIN != 0 {
        let mut buf = [0u8; 8];
        // SAFETY: draining our own eventfd into an 8-byte buffer.
        unsafe { libc::read(wake_fd, buf.as_mut_ptr().cast(), 8) };
    }
}

/// The (syscall, counts) of a thread's storage that it used.
pub(super) fn used(stats: &[sys_val]) -> Vec<(u32, sys_val)> {
    stats.iter().enumerate().filter(|(_, s)| s.calls > 0).map(|(nr, s)| (nr as u32, *s)).collect()
}
