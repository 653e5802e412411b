//! The ptrace tracer, for where BPF cannot load (no CAP_BPF, a container,
//! a plain user): every syscall of the targets stops them twice, at entry
//! and exit, as under strace. Counts, errors, time per call (wall, entry to
//! exit), argument keys and stack samples go into the same records the BPF
//! tracer makes. Tracees are taken with PTRACE_SEIZE and without
//! PTRACE_O_EXITKILL: if sysdiet dies, the kernel detaches them and they
//! run on.

mod keys;
mod sys;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use nix::errno::Errno;
use nix::sys::ptrace::{self, Event as PEvent, Options};
use nix::sys::signal::Signal;
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;

use crate::backend::calls::{BrkState, Call, Calls, MaskState};
use crate::backend::filter::SyscallSet;
use crate::backend::mappings::{self, MapEvent};
use crate::backend::samples::StackSample;
use crate::backend::Tracer;
use crate::error::{Error, Result};
use crate::linux::syscalls;
use crate::model::builder::{TaskRecord, TraceBuilder};
use crate::model::{Argument, Exit, Lost, TimeKind};
use ::syscalls::Sysno;
use sys::SyscallStop;

/// A stack sample per thread at most this often (the BPF side's budget).
pub const SAMPLE_INTERVAL_NS: u64 = 500_000;

/// The backend's name, as `--backend` and a run document say it.
pub const NAME: &str = "ptrace";
/// Bytes of stack copied above the stack pointer per sample.
const STACK_BYTES: usize = 16 * 1024;

const NR_EXECVE: u32 = Sysno::execve.id() as u32;
const NR_EXIT: u32 = Sysno::exit.id() as u32;
const NR_EXIT_GROUP: u32 = Sysno::exit_group.id() as u32;
/// The calls after which a process's mappings are read again.
const MAPPING_CHANGES: [Sysno; 5] = [Sysno::mmap, Sysno::mprotect, Sysno::munmap, Sysno::mremap, Sysno::remap_file_pages];

/// Where stack samples and the mappings they need go (stacks/ unwinds them).
pub trait SampleSink {
    fn mappings(&mut self, events: Vec<MapEvent>);
    fn sample(&mut self, sample: StackSample);
}

/// Another tracer that takes tracees over once it is ready (a run starts
/// under ptrace while BPF loads: pipeline/handover.rs). A tracee goes when
/// it stops at a syscall's exit: the kernel runs the exit tracepoint before
/// ptrace's exit stop, so that call is ptrace's and every later one the
/// other tracer's.
pub trait HandOver {
    /// Whether the other tracer can take tasks now: asked at each stop
    /// until it says yes.
    fn ready(&mut self) -> bool;
    /// Takes task `task`, stopped after a call: true when it counts the
    /// task's calls from its next on; false leaves it with ptrace.
    fn take(&mut self, task: &Handed) -> bool;
    /// Whether a tracee stopped after a call waits there until the other
    /// tracer is ready, rather than run on under ptrace meanwhile.
    fn hold(&mut self) -> bool;
}

/// A tracee offered to another tracer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handed {
    pub tid: u32,
    pub tgid: u32,
    /// Its parent's tgid.
    pub ppid: u32,
    pub comm: String,
}

/// What became of a hand-over.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HandOverFacts {
    /// When the other tracer said it was ready, from the tracer's start.
    pub ready_ns: Option<u64>,
    /// When the last task was handed, from the tracer's start.
    pub last_ns: u64,
    /// Tasks handed over, and tasks it refused (they stayed with ptrace).
    pub handed: u64,
    pub refused: u64,
}

struct NoSamples;

impl SampleSink for NoSamples {
    fn mappings(&mut self, _: Vec<MapEvent>) {}
    fn sample(&mut self, _: StackSample) {}
}

#[derive(Debug, Default)]
struct Tracee {
    tgid: u32,
    ppid: u32,
    comm: String,
    /// Counting: from the command's execve on (run), or at once (attach).
    counting: bool,
    /// The call in progress: number, arguments, start, timeout class.
    entry: Option<Entry>,
    /// An exec just happened: the next exit stop is execve's, whose entry
    /// came before tracing began.
    exec_exit: bool,
    /// A new task's first stop is its attach stop, not a group-stop.
    fresh: bool,
    /// Its last syscall stop was an entry: the next is that call's exit
    /// (what tells them apart where the kernel does not say, before 5.3).
    /// A new task's first is an entry: the kernel stops syscall tracing in
    /// a child, and an attached task's call in progress is restarted.
    in_syscall: bool,
    mask: MaskState,
    brk: BrkState,
    /// What rules read of its environment at its exec.
    environment: Option<crate::model::Environment>,
    /// The file it runs (/proc/PID/exe at its exec, or its parent's).
    executable: Option<String>,
    since_sample: u64,
    last_sample_ns: u64,
    exit: Option<Exit>,
    /// The other tracer refused it (HandOver::take): it stays.
    refused: bool,
    /// The file an execve in progress asked for, as it named it.
    exec_path: Option<String>,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    nr: u32,
    args: [u64; 6],
    start: Instant,
    timeout: Option<crate::model::Timeout>,
}

/// How tracing ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// The command (run) or every process (attach) exited.
    Exited,
    /// Asked to stop: the rest were detached and run on.
    Stopped,
    /// Every tracee went to the other tracer (HandOver) before the command
    /// ended.
    HandedOver,
}

pub struct Ptracer {
    tasks: HashMap<u32, Tracee>,
    calls: Calls,
    lost: Lost,
    filter: SyscallSet,
    /// run: the command's pid; tracing ends when it exits.
    root: Option<u32>,
    pub root_exit: Option<Exit>,
    /// Processes whose mappings changed since they were last read.
    dirty_maps: HashMap<u32, bool>,
    /// Argument keys of stack samples, interned: a sample carries an id.
    keys: HashMap<Argument, u64>,
    key_list: Vec<Argument>,
    epoch: Instant,
    /// Tasks that ended or were let go.
    finished: Vec<(u32, Tracee)>,
    /// Tasks handed to another tracer: their later stops are not ours.
    handed: std::collections::HashSet<u32>,
    /// Tasks held at a syscall's exit stop until the other tracer is ready.
    waiting: Vec<u32>,
    pub hand_over: HandOverFacts,
}

fn options() -> Options {
    Options::PTRACE_O_TRACESYSGOOD
        | Options::PTRACE_O_TRACEFORK
        | Options::PTRACE_O_TRACEVFORK
        | Options::PTRACE_O_TRACECLONE
        | Options::PTRACE_O_TRACEEXEC
}

fn seize_error(pid: u32, e: Errno) -> Error {
    match e {
        Errno::ESRCH => Error::NoSuchProcess(pid),
        Errno::EPERM => Error::NoPtraceRights(pid),
        e => Error::Io(std::io::Error::from(e)),
    }
}

impl Ptracer {
    fn new(filter: SyscallSet) -> Ptracer {
        Ptracer {
            tasks: HashMap::new(),
            calls: Calls::default(),
            lost: Lost::default(),
            filter,
            root: None,
            root_exit: None,
            dirty_maps: HashMap::new(),
            keys: HashMap::new(),
            key_list: Vec::new(),
            epoch: Instant::now(),
            finished: Vec::new(),
            handed: Default::default(),
            waiting: Vec::new(),
            hand_over: HandOverFacts::default(),
        }
    }

    /// Takes a child held before its execve of `program` (target::spawn):
    /// it runs on until its exec, and is counted from there.
    pub fn seize_held(pid: u32, comm: &str, program: &str, filter: SyscallSet) -> Result<Ptracer> {
        ptrace::seize(Pid::from_raw(pid as i32), options()).map_err(|e| seize_error(pid, e))?;
        let mut t = Ptracer::new(filter);
        t.root = Some(pid);
        let exec_path = Some(program.to_string());
        t.tasks.insert(pid, Tracee { tgid: pid, ppid: std::process::id(), comm: comm.to_string(), exec_path, ..Default::default() });
        Ok(t)
    }

    /// Takes every thread of running processes, counting at once.
    pub fn attach(pids: &[(u32, Vec<(u32, String)>)], filter: SyscallSet) -> Result<Ptracer> {
        let mut t = Ptracer::new(filter);
        for (pid, threads) in pids {
            let ppid = crate::target::parent_of(*pid);
            let mut threads = threads.clone();
            // Threads made meanwhile by one not yet taken show up in the
            // next look at /proc: look until nothing is new (those made by
            // a taken one are taken by the kernel, TRACECLONE).
            while !threads.is_empty() {
                for (tid, comm) in threads {
                    let p = Pid::from_raw(tid as i32);
                    match ptrace::seize(p, options()) {
                        Ok(()) => {}
                        // A thread that ended meanwhile, or one a taken
                        // thread made, which the kernel gave us already.
                        Err(Errno::ESRCH) if tid != *pid => continue,
                        Err(Errno::EPERM) if tid != *pid && tracer_of(tid) == Some(std::process::id()) => continue,
                        Err(e) => {
                            t.detach_all();
                            return Err(seize_error(tid, e));
                        }
                    }
                    let _ = ptrace::interrupt(p);
                    t.tasks.insert(
                        tid,
                        Tracee { tgid: *pid, ppid, comm, counting: true, fresh: true, executable: executable_of(*pid), ..Default::default() },
                    );
                    t.dirty_maps.insert(*pid, true);
                }
                threads = crate::target::live_threads(*pid).unwrap_or_default().into_iter().filter(|(tid, _)| !t.tasks.contains_key(tid)).collect();
            }
        }
        Ok(t)
    }

    /// Follows the tracees until the command ends (run), every tracee is
    /// gone (attach), or `stop` is set (then the rest are detached).
    pub fn follow(&mut self, stop: &AtomicBool, sink: Option<&mut dyn SampleSink>) -> End {
        self.follow_handing(stop, sink, None)
    }

    /// The same, handing each tracee to `hand` at its first syscall exit
    /// once it is ready; ends with End::HandedOver when none is left.
    pub fn follow_handing(&mut self, stop: &AtomicBool, mut sink: Option<&mut dyn SampleSink>, mut hand: Option<&mut dyn HandOver>) -> End {
        let mut none = NoSamples;
        let stacks = sink.is_some();
        let sink: &mut dyn SampleSink = match sink.take() {
            Some(s) => s,
            None => &mut none,
        };
        loop {
            if stop.load(Ordering::Relaxed) {
                self.let_waiting_go(&mut None);
                self.detach_all();
                return End::Stopped;
            }
            if !self.waiting.is_empty() && hand.as_mut().is_some_and(|h| h.ready() || !h.hold()) {
                self.let_waiting_go(&mut hand);
                if self.tasks.is_empty() {
                    return End::HandedOver;
                }
            }
            // While tasks are held, the other tracer is looked at every
            // millisecond: nothing else may stop.
            let flags = if self.waiting.is_empty() { WaitPidFlag::__WALL } else { WaitPidFlag::__WALL | WaitPidFlag::WNOHANG };
            let status = match waitpid(None, Some(flags)) {
                Ok(WaitStatus::StillAlive) => {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                    continue;
                }
                Ok(s) => s,
                Err(Errno::EINTR) => continue,
                Err(_) => return End::Exited,
            };
            if let Some((tid, exit)) = ended_task(&status) {
                if self.ended(tid, exit) {
                    self.detach_all();
                    return End::Exited;
                }
            }
            match status {
                WaitStatus::PtraceSyscall(pid) => {
                    let tid = pid.as_raw() as u32;
                    let exit = self.syscall_stop(tid, stacks.then_some(&mut *sink));
                    if exit && self.handed_over(tid, &mut hand) {
                        let _ = ptrace::detach(pid, None);
                    } else if exit && self.held(tid, &mut hand) {
                        self.waiting.push(tid);
                    } else {
                        let _ = ptrace::syscall(pid, None);
                    }
                }
                WaitStatus::PtraceEvent(pid, sig, event) => self.event(pid, sig, event),
                WaitStatus::Stopped(pid, sig) => {
                    // A signal on its way to the tracee: deliver it. An
                    // unknown task stopped: a new one whose parent's event
                    // is still to come.
                    let tid = pid.as_raw() as u32;
                    if !self.tasks.contains_key(&tid) {
                        self.adopt(tid, None);
                        if sig == Signal::SIGSTOP {
                            let _ = ptrace::syscall(pid, None);
                            continue;
                        }
                    }
                    let _ = ptrace::syscall(pid, Some(sig));
                }
                _ => {}
            }
            if self.tasks.is_empty() {
                return if self.root_exit.is_none() && self.hand_over.handed > 0 { End::HandedOver } else { End::Exited };
            }
        }
    }

    /// Whether task `tid`, stopped at a syscall's exit, waits there for
    /// `hand` to be ready.
    fn held(&self, tid: u32, hand: &mut Option<&mut dyn HandOver>) -> bool {
        let Some(hand) = hand else { return false };
        self.tasks.get(&tid).is_some_and(|t| t.counting && !t.refused) && hand.hold()
    }

    /// The held tasks handed over (`hand` ready) or resumed under ptrace.
    fn let_waiting_go(&mut self, hand: &mut Option<&mut dyn HandOver>) {
        for tid in std::mem::take(&mut self.waiting) {
            let pid = Pid::from_raw(tid as i32);
            if self.handed_over(tid, hand) {
                let _ = ptrace::detach(pid, None);
            } else if hand.is_some() {
                let _ = ptrace::syscall(pid, None);
            } else {
                // Tracing stops: it is let go from the stop it is in.
                let _ = ptrace::detach(pid, None);
                if let Some(t) = self.tasks.remove(&tid) {
                    self.finished.push((tid, t));
                }
            }
        }
    }

    /// Offers task `tid`, stopped at a syscall's exit, to `hand` once that
    /// is ready; true when it took it (the caller detaches it).
    fn handed_over(&mut self, tid: u32, hand: &mut Option<&mut dyn HandOver>) -> bool {
        let Some(hand) = hand else { return false };
        let Some(t) = self.tasks.get(&tid) else { return false };
        // Before its execve the command is not counted yet: it goes at
        // execve's exit, the first call it is counted from.
        if t.refused || !t.counting {
            return false;
        }
        let now = || self.epoch.elapsed().as_nanos() as u64;
        if self.hand_over.ready_ns.is_none() {
            if !hand.ready() {
                return false;
            }
            self.hand_over.ready_ns = Some(now());
        }
        let task = Handed { tid, tgid: t.tgid, ppid: t.ppid, comm: t.comm.clone() };
        if !hand.take(&task) {
            self.hand_over.refused += 1;
            self.tasks.get_mut(&tid).expect("a known task").refused = true;
            return false;
        }
        self.hand_over.handed += 1;
        self.hand_over.last_ns = now();
        let t = self.tasks.remove(&tid).expect("a known task");
        self.handed.insert(tid);
        self.finished.push((tid, t));
        true
    }

    fn event(&mut self, pid: Pid, sig: Signal, event: i32) {
        let tid = pid.as_raw() as u32;
        if !self.tasks.contains_key(&tid) {
            self.adopt(tid, None);
        }
        match event {
            e if e == PEvent::PTRACE_EVENT_FORK as i32 || e == PEvent::PTRACE_EVENT_VFORK as i32 || e == PEvent::PTRACE_EVENT_CLONE as i32 => {
                if let Ok(child) = ptrace::getevent(pid) {
                    self.adopt(child as u32, Some(tid));
                }
                let _ = ptrace::syscall(pid, None);
            }
            e if e == PEvent::PTRACE_EVENT_EXEC as i32 => {
                // A thread other than the leader that execs takes the
                // leader's pid: its old tid is in the event message.
                if let Ok(old) = ptrace::getevent(pid) {
                    let old = old as u32;
                    if old != tid {
                        if let Some(t) = self.tasks.remove(&old) {
                            self.tasks.insert(tid, t);
                        }
                    }
                }
                let comm = std::fs::read_to_string(format!("/proc/{tid}/comm")).map(|c| c.trim_end().to_string()).unwrap_or_default();
                let environment = std::fs::read(format!("/proc/{tid}/environ")).ok().map(|b| crate::target::environment_of_block(&b));
                let t = self.tasks.entry(tid).or_default();
                // Its next syscall stop is execve's exit.
                t.in_syscall = true;
                t.tgid = tid;
                t.comm = comm;
                t.environment = environment;
                t.executable = executable_as_named(tid, t.exec_path.take());
                if !t.counting {
                    // The command's own execve: its entry was before we
                    // looked; its exit is the next stop.
                    t.counting = true;
                    t.exec_exit = true;
                    t.entry = None;
                }
                self.dirty_maps.insert(tid, true);
                let _ = ptrace::syscall(pid, None);
            }
            // PTRACE_EVENT_STOP: an attach stop, our interrupt, or a
            // group-stop (SIGSTOP, SIGTSTP...): that one stays stopped, as
            // job control wants, and we hear when it continues.
            _ => {
                let fresh = self.tasks.get_mut(&tid).map(|t| std::mem::take(&mut t.fresh)).unwrap_or(false);
                let group_stop = !fresh && matches!(sig, Signal::SIGSTOP | Signal::SIGTSTP | Signal::SIGTTIN | Signal::SIGTTOU);
                if group_stop {
                    let _ = listen(pid);
                } else {
                    let _ = ptrace::syscall(pid, None);
                }
            }
        }
    }

    /// A new task: `parent`'s child or thread (its tgid says which).
    fn adopt(&mut self, tid: u32, parent: Option<u32>) {
        // Handed over before its parent's event came: no longer ours.
        if self.handed.contains(&tid) {
            return;
        }
        let tgid = tgid_of(tid).unwrap_or(tid);
        let from = parent.and_then(|p| self.tasks.get(&p));
        let counting = from.is_none_or(|p| p.counting);
        let comm = from.map(|p| p.comm.clone()).unwrap_or_default();
        let executable = from.and_then(|p| p.executable.clone());
        let ppid = if tgid == tid { from.map_or(0, |p| p.tgid) } else { from.map_or(0, |p| p.ppid) };
        let mask = from.map(|p| MaskState { mask: p.mask.mask, ..Default::default() }).unwrap_or_default();
        let t = self.tasks.entry(tid).or_insert_with(|| Tracee { fresh: true, ..Default::default() });
        t.tgid = tgid;
        t.counting = counting;
        if t.comm.is_empty() {
            t.comm = comm;
        }
        if t.executable.is_none() {
            t.executable = executable;
        }
        t.ppid = ppid;
        t.mask = mask;
        if tgid == tid {
            self.dirty_maps.insert(tgid, true);
        }
    }

    /// Takes a syscall stop in; true when it was a call's exit.
    fn syscall_stop(&mut self, tid: u32, sink: Option<&mut dyn SampleSink>) -> bool {
        let Some(t) = self.tasks.get_mut(&tid) else { return false };
        let Ok(stop) = sys::syscall_stop(tid, t.in_syscall) else { return false };
        match stop {
            SyscallStop::Entry { .. } => t.in_syscall = true,
            SyscallStop::Exit { .. } => t.in_syscall = false,
            SyscallStop::Unknown => {}
        }
        match stop {
            SyscallStop::Entry { nr, args, compat } => {
                if compat {
                    // The compat entry's numbers are not the native table's.
                    if t.counting {
                        self.lost.compat_syscalls += 1;
                    }
                    t.entry = None;
                    return false;
                }
                let nr = nr as u32;
                if nr == NR_EXECVE {
                    // Read now: at the exec the old image is gone.
                    t.exec_path = sys::read_string(tid, args[0], 4096).map(|(b, _)| String::from_utf8_lossy(&b).into_owned());
                }
                let timeout = keys::timeout_at_entry(tid, nr, &args);
                t.entry = Some(Entry { nr, args, start: Instant::now(), timeout });
                false
            }
            SyscallStop::Exit { rval, is_error } => {
                let now = Instant::now();
                let entry = match (t.entry.take(), std::mem::take(&mut t.exec_exit)) {
                    (Some(e), _) => e,
                    (None, true) => Entry { nr: NR_EXECVE, args: [0; 6], start: now, timeout: None },
                    (None, false) => return true,
                };
                if t.counting {
                    self.exit_stop(tid, entry, rval, is_error, now, sink);
                }
                true
            }
            SyscallStop::Unknown => false,
        }
    }

    fn exit_stop(&mut self, tid: u32, entry: Entry, rval: i64, is_error: bool, now: Instant, sink: Option<&mut dyn SampleSink>) {
        let nr = entry.nr;
        if !self.filter.contains(nr) && self.filter.expr.is_some() {
            return;
        }
        let t = self.tasks.get_mut(&tid).expect("a known task");
        let tgid = t.tgid;
        t.mask.seq += 1;
        let failed = is_error && (-4095..0).contains(&rval);
        let errno = failed.then(|| crate::linux::errno::name((-rval) as u32));
        let ns = (now - entry.start).as_nanos() as u64;
        let mut call = Call { tid, nr, errno, ns, ..Default::default() };
        if nr == NR_EXECVE && !failed {
            // Its arguments were the old image's: keyed by nothing.
            self.dirty_maps.insert(tgid, true);
        } else if let Some(spec) = syscalls::by_nr(nr) {
            call.argument =
                keys::argument(spec.arg, tid, &entry.args, entry.timeout, rval, failed, &mut t.mask, &mut t.brk, &mut call, &mut self.lost);
        }
        if MAPPING_CHANGES.iter().any(|s| s.id() as u32 == nr) {
            self.dirty_maps.insert(tgid, true);
        }
        t.since_sample += 1;
        let now_ns = (now - self.epoch).as_nanos() as u64;
        let due = t.last_sample_ns == 0 || now_ns.saturating_sub(t.last_sample_ns) >= SAMPLE_INTERVAL_NS;
        if let (Some(sink), true) = (sink, due) {
            let period = std::mem::take(&mut t.since_sample);
            t.last_sample_ns = now_ns;
            self.sample(tid, tgid, &call, period, now_ns, sink);
        }
        self.calls.add(call);
    }

    fn sample(&mut self, tid: u32, tgid: u32, call: &Call, period: u64, now_ns: u64, sink: &mut dyn SampleSink) {
        let Ok(sys::UserRegs { ip, sp, fp, lr }) = sys::user_regs(tid) else { return };
        if self.dirty_maps.insert(tgid, false) != Some(false) {
            // The mappings changed (or were never read): read them again,
            // as a new epoch starting just before this sample.
            let time = now_ns.saturating_sub(1);
            let mut events = vec![MapEvent::Exec { pid: tgid, time }];
            events.extend(mappings::snapshot(tgid).into_iter().map(|e| match e {
                MapEvent::Mmap { pid, start, len, pgoff, path, .. } => MapEvent::Mmap { pid, time, start, len, pgoff, path },
                other => other,
            }));
            sink.mappings(events);
        }
        let mut stack = vec![0u8; STACK_BYTES];
        let n = sys::read(tid, sp, &mut stack);
        stack.truncate(n);
        let key = call.argument.as_ref().map_or(0, |a| self.key_id(a));
        sink.sample(StackSample { tgid, tid, nr: call.nr, period, ns: call.ns, time_ns: now_ns, fd: 0, path_hash: key, ip, sp, fp, lr, stack });
    }

    fn key_id(&mut self, a: &Argument) -> u64 {
        if let Some(&id) = self.keys.get(a) {
            return id;
        }
        self.key_list.push(a.clone());
        let id = self.key_list.len() as u64;
        self.keys.insert(a.clone(), id);
        id
    }

    /// The argument a sample's key id stands for.
    pub fn argument_of_key(&self, id: u64) -> Option<Argument> {
        id.checked_sub(1).and_then(|i| self.key_list.get(i as usize)).cloned()
    }

    /// A task ended; true when it was the command's (run: tracing ends).
    fn ended(&mut self, tid: u32, exit: Exit) -> bool {
        let Some(mut t) = self.tasks.remove(&tid) else {
            // The command, handed over, is still our child: its end is
            // the run's.
            if self.root == Some(tid) && self.handed.contains(&tid) {
                self.root_exit = Some(exit);
                if let Some((_, t)) = self.finished.iter_mut().find(|(f, _)| *f == tid) {
                    t.exit = Some(exit);
                }
                return true;
            }
            return false;
        };
        // exit and exit_group never return: counted as they end the task.
        if let Some(e) = t.entry.take() {
            if t.counting && matches!(e.nr, NR_EXIT | NR_EXIT_GROUP) && (self.filter.expr.is_none() || self.filter.contains(e.nr)) {
                self.calls.add(Call { tid, nr: e.nr, ..Default::default() });
            }
        }
        t.exit = Some(exit);
        let is_root = self.root == Some(tid);
        if is_root {
            self.root_exit = Some(exit);
        }
        self.finished.push((tid, t));
        is_root
    }

    /// Lets every tracee go: interrupted, then detached, running on.
    pub fn detach_all(&mut self) {
        let tids: Vec<u32> = self.tasks.keys().copied().collect();
        for tid in tids {
            let pid = Pid::from_raw(tid as i32);
            if ptrace::interrupt(pid).is_err() {
                continue;
            }
            // Its next stop, whatever it is, is where it is let go; a
            // signal caught on its way is delivered as it goes.
            match waitpid(pid, Some(WaitPidFlag::__WALL)) {
                Ok(WaitStatus::Exited(..) | WaitStatus::Signaled(..)) | Err(_) => {}
                Ok(WaitStatus::Stopped(_, sig)) if sig != Signal::SIGTRAP => {
                    let _ = ptrace::detach(pid, Some(sig));
                }
                Ok(_) => {
                    let _ = ptrace::detach(pid, None);
                }
            }
        }
        let rest: Vec<(u32, Tracee)> = self.tasks.drain().collect();
        self.finished.extend(rest);
    }

    /// Calls counted so far.
    pub fn calls_counted(&self) -> u64 {
        self.calls.count()
    }

    /// The counts of a run's first part, into `out`, BPF counting the
    /// rest: untimed (BPF's times are another measure), and a key seen once
    /// here left to join BPF's row of it (Calls::finish_first_part).
    pub fn read_first_part(&mut self, out: &mut TraceBuilder) -> Lost {
        self.calls.forget_times();
        self.read_out_as(out, true)
    }

    /// The counts and what is known of each task, into `out`; what was
    /// lost. What it counted is handed over: a second read is empty.
    fn read_out(&mut self, out: &mut TraceBuilder) -> Lost {
        self.read_out_as(out, false)
    }

    fn read_out_as(&mut self, out: &mut TraceBuilder, first_part: bool) -> Lost {
        self.finished.extend(self.tasks.drain());
        let tgids: HashMap<u32, u32> = self.finished.iter().map(|(tid, t)| (*tid, t.tgid)).collect();
        for (tid, t) in &mut self.finished {
            if let (Some(env), true) = (t.environment.take(), t.tgid == *tid) {
                out.set_environment(*tid, env);
            }
        }
        let records = std::mem::take(&mut self.finished)
            .into_iter()
            .map(|(tid, t)| {
                (
                    tid,
                    TaskRecord {
                        tgid: t.tgid,
                        ppid: t.ppid,
                        comm: t.comm,
                        exit: if t.tgid == tid { t.exit } else { None },
                        cgroup: 0,
                        executable: t.executable,
                    },
                )
            })
            .collect();
        let calls = std::mem::take(&mut self.calls);
        let tgid_of = |tid| tgids.get(&tid).copied().unwrap_or(tid);
        if first_part {
            calls.finish_first_part(tgid_of, records, out);
        } else {
            calls.finish(tgid_of, records, out);
        }
        std::mem::take(&mut self.lost)
    }
}

/// The file process `pid` runs now, as the BPF backend names a running one.
fn executable_of(pid: u32) -> Option<String> {
    std::fs::read_link(format!("/proc/{pid}/exe")).ok().map(|p| p.to_string_lossy().into_owned())
}

/// The file process `pid` runs after its exec of `asked` (the path its
/// execve named): that path when it leads to the file running, as the BPF
/// backend names an exec (`/bin/true`, where /proc says `/usr/bin/true`),
/// so that one program's processes group alike whichever tracer counted
/// them; else (a script's interpreter) the file running.
fn executable_as_named(pid: u32, asked: Option<String>) -> Option<String> {
    let running = executable_of(pid)?;
    let Some(asked) = asked.filter(|a| !a.is_empty()) else { return Some(running) };
    let resolved = std::path::Path::new(&format!("/proc/{pid}/cwd")).join(&asked).canonicalize().ok();
    Some(if resolved.is_some_and(|r| r.to_string_lossy() == running) { asked } else { running })
}

impl Tracer for Ptracer {
    fn backend(&self) -> &str {
        NAME
    }

    fn time_kind(&self) -> TimeKind {
        TimeKind::Wall
    }

    fn sample_rate(&self) -> (u32, u64) {
        (1, SAMPLE_INTERVAL_NS)
    }

    fn read_into(&mut self, out: &mut TraceBuilder) -> Result<Lost> {
        Ok(self.read_out(out))
    }

    fn argument_of_sample(&self, _: u32, _: i64, key: u64) -> Option<Argument> {
        self.argument_of_key(key)
    }
}

/// The task a wait status says ended, and how.
fn ended_task(status: &WaitStatus) -> Option<(u32, Exit)> {
    match *status {
        WaitStatus::Exited(pid, code) => Some((pid.as_raw() as u32, Exit::Code { code })),
        WaitStatus::Signaled(pid, sig, core_dumped) => Some((pid.as_raw() as u32, Exit::Signal { signal: sig as i32, core_dumped })),
        _ => None,
    }
}

/// PTRACE_LISTEN: a group-stopped tracee stays stopped, and we hear when
/// it is continued (nix has no wrapper).
fn listen(pid: Pid) -> nix::Result<()> {
    // SAFETY: PTRACE_LISTEN takes no data.
    let r = unsafe { libc::ptrace(libc::PTRACE_LISTEN, pid.as_raw(), 0, 0) };
    Errno::result(r).map(drop)
}

/// Who ptraces `tid` (0: nobody).
fn tracer_of(tid: u32) -> Option<u32> {
    status_field(tid, "TracerPid:")
}

fn tgid_of(tid: u32) -> Option<u32> {
    status_field(tid, "Tgid:")
}

/// A number from /proc/TID/status.
fn status_field(tid: u32, name: &str) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    status.lines().find_map(|l| l.strip_prefix(name)).and_then(|v| v.trim().parse().ok())
}
