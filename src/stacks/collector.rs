//! The thread that takes stack samples off the ring buffer while the target
//! runs, learns its mappings as they change, and unwinds each sample at
//! once: only the frames are kept, not 16 KiB of stack per sample.

use std::collections::HashMap;
use std::os::fd::AsRawFd;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use libbpf_rs::MapHandle;

use super::symbolize::{FrameNames, Namer};
use super::unwind::{RawStack, Unwinder};
use crate::backend::bpf::ring::Rings;
use crate::backend::mappings::{MapEvent, MapEvents};
use crate::backend::samples::StackSample;
use crate::backend::wake::Stop;
use crate::error::{Error, Result};

/// How often the reader looks, besides the kernel's batched wake-ups.
const POLL: Duration = Duration::from_millis(20);
/// How soon it first looks, the wait doubling up to POLL: a short
/// command's images (its exec's mappings) and first samples are then
/// loaded and named while it runs, on another CPU, not after it ends.
const FIRST_POLL: Duration = Duration::from_millis(1);
/// How often samples of processes folded meanwhile move to their row.
const REFOLD: Duration = Duration::from_secs(1);

/// pid -> fold row, shared with the exit reader that decides it.
pub type Folded = Arc<std::sync::Mutex<HashMap<u32, u32>>>;

/// Samples of one process, syscall, argument and stack (an index into
/// `Collected::stacks`), summed: memory grows with the distinct ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SampleKey {
    pub tgid: u32,
    pub nr: u32,
    pub fd: i64,
    pub path_hash: u64,
    pub stack: usize,
}

#[derive(Debug, Clone, Copy, Default)]
pub struct SampleSum {
    pub samples: u64,
    /// The calls they stand for.
    pub periods: u64,
    /// Σ period × the call's time: the time they stand for.
    pub weighted_ns: u64,
}

#[derive(Default)]
pub struct Collected {
    pub unwinder: Unwinder,
    /// Distinct unwound stacks.
    pub stacks: Vec<RawStack>,
    pub samples: HashMap<SampleKey, SampleSum>,
    pub count: u64,
    pub max_gap: u64,
    pub too_short: u64,
    pub frames_unmapped: u64,
    /// bytes of stack unwinding needed -> samples
    pub bytes_used: std::collections::BTreeMap<u64, u64>,
    pub stack_bytes_copied: u64,
    pub unwind_ns: u64,
    pub mappings_lost: u64,
    /// Why samples were left unread in the ring (a chunk that could not
    /// be mapped): the run is then an error, not call sites short.
    pub unread: Option<String>,
    /// The stacks' frames named so far.
    pub names: FrameNames,
}

impl Collected {
    /// Unwinds one sample and adds it to its (process, syscall, key,
    /// stack) sum; `index` finds the stacks seen before.
    pub fn add(&mut self, index: &mut HashMap<RawStack, usize>, s: &StackSample) {
        let (stack, facts) = self.unwinder.unwind(s);
        let id = match index.get(&stack) {
            Some(&id) => id,
            None => {
                index.insert(stack.clone(), self.stacks.len());
                self.stacks.push(stack);
                self.stacks.len() - 1
            }
        };
        self.stack_bytes_copied = self.stack_bytes_copied.max(s.stack.len() as u64);
        self.count += 1;
        self.max_gap = self.max_gap.max(s.period);
        self.too_short += facts.too_short as u64;
        self.frames_unmapped += facts.unmapped_frames;
        *self.bytes_used.entry(facts.bytes_used).or_default() += 1;
        let key = SampleKey { tgid: s.tgid, nr: s.nr, fd: s.fd, path_hash: s.path_hash, stack: id };
        let sum = self.samples.entry(key).or_default();
        sum.samples += 1;
        sum.periods += s.period;
        sum.weighted_ns += s.period * s.ns;
    }
}

/// Samples unwound as they are handed over, on the tracer's own thread
/// (the ptrace tracer, which stops the target for each one anyway).
#[derive(Default)]
pub struct Inline {
    out: Collected,
    index: HashMap<RawStack, usize>,
}

impl Inline {
    pub fn finish(self) -> Collected {
        self.out
    }
}

impl crate::backend::ptrace::SampleSink for Inline {
    fn mappings(&mut self, events: Vec<MapEvent>) {
        for e in events {
            self.out.unwinder.apply(e);
        }
    }

    fn sample(&mut self, sample: StackSample) {
        let t = Instant::now();
        self.out.add(&mut self.index, &sample);
        self.out.unwind_ns += t.elapsed().as_nanos() as u64;
    }
}

pub struct Collector {
    stop: Arc<Stop>,
    /// What the thread collected, handed over before it unmaps its ring
    /// (milliseconds, as mapping it was), which it then does on its own.
    done: mpsc::Receiver<Collected>,
}

/// A collector whose thread is mapping its ring: `ready` waits for it.
pub struct StartingCollector {
    collector: Collector,
    ready: mpsc::Receiver<Result<()>>,
}

impl StartingCollector {
    /// Waits until the ring is mapped and read.
    pub fn ready(self) -> Result<Collector> {
        match self.ready.recv() {
            Ok(Ok(())) => Ok(self.collector),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(Error::Bpf("the stack sample reader did not start".into())),
        }
    }

    /// Not needed after all: its thread ends.
    pub fn abandon(self) {
        self.collector.stop.stop();
    }
}

impl Collector {
    /// Starts reading `ring`; `initial` are the mappings of processes that
    /// already ran (attach), `events` the kernel's reports of new ones.
    /// `folded`: pid -> the row a folded process's counts went to; samples
    /// follow them, so that a long run's samples stay bounded too.
    pub fn start(ring: MapHandle, events: MapEvents, initial: Vec<MapEvent>, folded: Folded) -> Result<Collector> {
        Self::spawn(ring, events, initial, folded)?.ready()
    }

    /// The same, returning while the new thread maps the ring: the caller
    /// does its own work meanwhile, then `ready`.
    pub fn spawn(ring: MapHandle, events: MapEvents, initial: Vec<MapEvent>, folded: Folded) -> Result<StartingCollector> {
        let stop = Arc::new(Stop::new()?);
        let (ready_tx, ready_rx) = mpsc::sync_channel(1);
        let (done_tx, done) = mpsc::sync_channel(1);
        let reader_stop = stop.clone();
        std::thread::Builder::new()
            .name("sysdiet-stacks".into())
            .spawn(move || collect(ring, events, initial, folded, &reader_stop, ready_tx, done_tx))?;
        Ok(StartingCollector { collector: Collector { stop, done }, ready: ready_rx })
    }

    /// Starts the reader's last pass (call after the tracer stopped
    /// sampling), on its thread: the caller reads the counts meanwhile.
    pub fn last_pass(self) -> LastPass {
        self.stop.stop();
        LastPass::Reading { done: self.done, began: Instant::now() }
    }
}

/// A stack reader's last pass, running on its thread; or samples
/// collected already (the ptrace tracer's, inline).
pub enum LastPass {
    Reading { done: mpsc::Receiver<Collected>, began: Instant },
    Done(Box<Collected>),
}

impl LastPass {
    /// Waits for the last pass, and takes everything collected.
    pub fn collected(self) -> Collected {
        match self {
            LastPass::Reading { done, began } => {
                let collected = done.recv().expect("the stack reader does not panic");
                crate::timings::record("last pass of the stack reader", began);
                collected
            }
            LastPass::Done(collected) => *collected,
        }
    }
}

fn collect(
    ring: MapHandle,
    mut events: MapEvents,
    initial: Vec<MapEvent>,
    folded: Folded,
    stop: &Stop,
    ready: mpsc::SyncSender<Result<()>>,
    done: mpsc::SyncSender<Collected>,
) {
    let mut out = Collected::default();
    let mut rings = match Rings::new(&[&ring]) {
        Ok(rings) => {
            let _ = ready.send(Ok(()));
            rings
        }
        Err(e) => {
            let _ = ready.send(Err(Error::Bpf(format!("the stack sample ring: {e}"))));
            let _ = done.send(out);
            return;
        }
    };
    let mut batch: Vec<StackSample> = Vec::new();
    for e in initial {
        out.unwinder.apply(e);
    }
    let mut index: HashMap<RawStack, usize> = HashMap::new();
    // Processes that ended: forgotten one pass later, once every sample
    // they sent before is unwound.
    let (mut ended, mut ending): (Vec<u32>, Vec<u32>) = (Vec::new(), Vec::new());
    let mut refolded = Instant::now();
    let mut namer = Namer::default();
    let mut poll = FIRST_POLL;
    loop {
        // Look at the flag first: the pass after it is set is the last, and
        // sees everything sent before it.
        let last = stop.stopped();
        if !last {
            stop.wait(rings.epoll_fd().as_raw_fd(), poll);
            poll = (poll * 2).min(POLL);
        }
        if let Err(e) = rings.consume(|_, data| batch.extend(crate::backend::bpf::records::stack_sample(data))) {
            out.unread.get_or_insert_with(|| e.to_string());
        }
        // Mappings first: every sample taken so far was taken after the
        // mappings it runs in were reported.
        for e in events.drain() {
            if let MapEvent::Exit { pid, .. } = e {
                ending.push(pid);
            }
            out.unwinder.apply(e);
        }
        let t = Instant::now();
        for s in batch.drain(..) {
            out.add(&mut index, &s);
        }
        out.unwind_ns += t.elapsed().as_nanos() as u64;
        // While the target runs, on this CPU, rather than after it ends.
        namer.name_new(&out.unwinder.images, &out.stacks, &mut out.names);
        for pid in ended.drain(..) {
            out.unwinder.forget(pid);
        }
        std::mem::swap(&mut ended, &mut ending);
        if refolded.elapsed() >= REFOLD {
            refold(&mut out.samples, &folded);
            refolded = Instant::now();
        }
        if last {
            refold(&mut out.samples, &folded);
            break;
        }
    }
    namer.save();
    out.mappings_lost = events.lost;
    let _ = done.send(out);
    // The ring and the mapping events' buffers are left mapped for the
    // process's exit to take down, as the exit reader's rings are
    // (exits.rs).
    std::mem::forget(rings);
    std::mem::forget(events);
}

/// Moves the samples of processes folded since into their row.
fn refold(samples: &mut HashMap<SampleKey, SampleSum>, folded: &Folded) {
    let Ok(rows) = folded.lock() else { return };
    if rows.is_empty() {
        return;
    }
    let moved: Vec<(SampleKey, SampleSum)> = samples.iter().filter(|(k, _)| rows.contains_key(&k.tgid)).map(|(k, v)| (*k, *v)).collect();
    for (k, v) in moved {
        samples.remove(&k);
        let sum = samples.entry(SampleKey { tgid: rows[&k.tgid], ..k }).or_default();
        sum.samples += v.samples;
        sum.periods += v.periods;
        sum.weighted_ns += v.weighted_ns;
    }
}
