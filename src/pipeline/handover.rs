//! A cold start of `run --backend auto`: the command starts at once under
//! ptrace while the BPF programs load and verify on another thread, and
//! each of its threads goes over to BPF at its next syscall exit once they
//! are attached. The kernel runs the exit tracepoint before ptrace's exit
//! stop, so the call a thread is handed over in is ptrace's and every
//! later one BPF's: none is counted twice or missed. A command that ends
//! within LOAD_AFTER is counted by ptrace alone and pays its few
//! milliseconds, not the load's tens; a longer one waits for the load.

use std::ffi::OsString;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;

use super::ptraced::{watch, Interrupts};
use super::{finish, not_interrupted, read_out_after, Loaded, Span, TraceOptions, Traced};
use crate::backend::ptrace::{End, HandOver, Handed, SampleSink};
use crate::error::{Error, Result};
use crate::model::builder::TraceBuilder;
use crate::model::{Exit, PtraceFirst, RunInfo};
use crate::stacks::collector::{Inline, LastPass};
use crate::target::{self, spawn::HeldChild, Event};

/// What load_bpf gives: the tracer (None: ptrace counts, and why), and
/// an untraced syscall's cost.
type LoadResult = Result<(Option<Loaded>, Option<String>, u64)>;

/// What the loader thread says, in this order.
enum Loading {
    /// No keeper lends a set: this run loads its own (tens of ms).
    Cold,
    Done(Box<LoadResult>),
}

/// The BPF programs loading on a thread of their own.
pub(super) struct Loader {
    said: mpsc::Receiver<Loading>,
    /// Set when the command ended first: the programs are not attached.
    abandon: Arc<AtomicBool>,
    /// Said (or dropped) when the command ends: a cold load not begun
    /// yet is not.
    ended: mpsc::Sender<()>,
}

/// Starts loading the programs for the command held as `pid`, on a thread
/// of its own; returns once the mapping events call sites need are open
/// (its execve's mappings must be seen). A keeper's set comes in a few
/// ms; a set this run loads itself, in tens.
pub(super) fn start_loading(opts: &TraceOptions, pid: u32) -> Result<Loader> {
    let (opened_tx, opened) = mpsc::channel();
    let mappings = super::watch_mappings_then(opts, vec![pid], move || {
        let _ = opened_tx.send(());
    });
    let watching = mappings.is_some();
    let (tx, said) = mpsc::channel();
    let (ended, ended_rx) = mpsc::channel();
    let abandon = Arc::new(AtomicBool::new(false));
    let (opts, go_on, cold) = (opts.clone(), Arc::clone(&abandon), tx.clone());
    let load_at = Instant::now() + LOAD_AFTER;
    std::thread::Builder::new()
        .name("sysdiet-bpf".into())
        .spawn(move || {
            let cold = move || {
                let _ = cold.send(Loading::Cold);
                if ended_rx.recv_timeout(load_at.saturating_duration_since(Instant::now())) != Err(mpsc::RecvTimeoutError::Timeout) {
                    // The command ended first: nothing to load for. The
                    // thread waits here for the process to exit.
                    loop {
                        std::thread::park();
                    }
                }
            };
            let attach = || !go_on.load(Ordering::Relaxed);
            let loaded = super::load_bpf_then(&opts, false, mappings, cold, &attach);
            let _ = tx.send(Loading::Done(Box::new(loaded)));
        })
        .map_err(Error::Io)?;
    if watching {
        let _ = opened.recv();
    }
    Ok(Loader { said, abandon, ended })
}

/// A cold load begins once the command has run this long under ptrace,
/// and the command then waits at its threads' next syscall exits until the
/// programs are attached. One that ends sooner is counted by ptrace alone
/// and pays none of the load (the maps a load makes are zeroed in the
/// kernel, uninterrupted, and a process cannot exit before they are); a
/// longer one pays this much of ptrace's cost, then the load, as with
/// `--backend bpf`, with no CPU taken from the load by its tracer.
const LOAD_AFTER: Duration = Duration::from_millis(10);

/// The hand-over's BPF side: the tracer once loaded, and why not if not.
struct ToBpf {
    loader: Loader,
    loaded: Option<Loaded>,
    syscall_ns: u64,
    /// Why BPF will not count (a failed load), once known.
    failed: Option<String>,
    /// The loader said it loads a set of its own (no keeper lent one).
    cold: bool,
    /// Tests: not ready before this (SYSDIET_TEST_HANDOVER_MS), so that a
    /// hand-over finds the command's children and threads under ptrace,
    /// which run on meanwhile.
    not_before: Option<Instant>,
    /// From when the command's threads wait for BPF (LOAD_AFTER).
    hold_at: Instant,
}

impl ToBpf {
    fn new(loader: Loader, started: Instant) -> ToBpf {
        let delay = std::env::var("SYSDIET_TEST_HANDOVER_MS").ok().and_then(|v| v.parse().ok()).map(Duration::from_millis);
        ToBpf {
            loader,
            loaded: None,
            syscall_ns: 0,
            failed: None,
            cold: false,
            not_before: delay.map(|d| started + d),
            hold_at: started + LOAD_AFTER,
        }
    }

    /// Takes in what the loader said so far.
    fn hear(&mut self) {
        while self.loaded.is_none() && self.failed.is_none() {
            match self.loader.said.try_recv() {
                Ok(said) => self.take_in(said),
                Err(mpsc::TryRecvError::Empty) => return,
                Err(mpsc::TryRecvError::Disconnected) => self.failed = Some("the loading thread ended".into()),
            }
        }
    }

    /// Waits for the loader's last word, unless it says it loads a set
    /// of its own (which, the command ended, it never begins).
    fn hear_out(&mut self) {
        while self.loaded.is_none() && self.failed.is_none() && !self.cold {
            match self.loader.said.recv() {
                Ok(said) => self.take_in(said),
                Err(_) => self.failed = Some("the loading thread ended".into()),
            }
        }
    }

    fn take_in(&mut self, said: Loading) {
        let done = match said {
            Loading::Cold => {
                self.cold = true;
                return;
            }
            Loading::Done(done) => *done,
        };
        match done {
            Ok((Some(loaded), _, syscall_ns)) => {
                self.loaded = Some(loaded);
                self.syscall_ns = syscall_ns;
            }
            Ok((None, why, _)) => self.failed = Some(why.unwrap_or_else(|| "BPF did not load".into())),
            Err(e) => {
                eprintln!("sysdiet: counting with ptrace (slower than BPF): {e}");
                self.failed = Some(e.to_string());
            }
        }
    }

    /// The command ended before any of it was handed over. Programs that
    /// loaded go to a keeper for the next run, and a keeper's set being
    /// lent is waited for and given back (a lease dropped would make its
    /// keeper discard it); a load of this run's own is not waited for.
    fn let_go(mut self) {
        let _ = self.loader.ended.send(());
        self.hear_out();
        match self.loaded.take() {
            Some(Loaded { mut tracer, stacks }) => {
                drop(stacks);
                tracer.stop();
                crate::timings::timed("unload the programs", || tracer.keep_loaded());
            }
            None => self.loader.abandon.store(true, Ordering::Relaxed),
        }
    }
}

impl HandOver for ToBpf {
    fn ready(&mut self) -> bool {
        if self.not_before.is_some_and(|t| Instant::now() < t) {
            return false;
        }
        self.hear();
        self.loaded.is_some()
    }

    fn hold(&mut self) -> bool {
        if self.not_before.is_some() {
            return false;
        }
        self.hear();
        self.loaded.is_none() && self.failed.is_none() && Instant::now() >= self.hold_at
    }

    fn take(&mut self, task: &Handed) -> bool {
        // A thread with no pidfd to reach it by (Linux < 6.9) is refused.
        self.loaded.as_ref().is_some_and(|l| l.tracer.add_target(task.tid, false, task.tgid, task.ppid, &task.comm).is_ok())
    }
}

/// Traces the held command under ptrace, handing it to BPF once loaded.
pub(super) fn trace_held(
    held: HeldChild,
    command: &[OsString],
    env: &[(OsString, OsString)],
    opts: &TraceOptions,
    signals: mpsc::Receiver<Event>,
    started: Instant,
    loader: Loader,
) -> Result<Traced> {
    let mut ptracer = super::ptraced::seize(&held, command, opts)?;
    let span = Span::begin(started);
    not_interrupted(&signals)?;
    let pid = held.release()?;
    let state = Arc::new(Interrupts::default());
    watch(signals, pid, Arc::clone(&state));
    let mut inline = opts.stacks.then(Inline::default);
    let mut to_bpf = ToBpf::new(loader, span.t0);
    let sink = inline.as_mut().map(|i| i as &mut dyn SampleSink);
    let mut end = ptracer.follow_handing(&state.stop, sink, Some(&mut to_bpf));
    let mut exit = ptracer.root_exit;
    if end == End::HandedOver {
        exit = wait_for(pid, &state);
        if exit.is_none() {
            end = End::Stopped;
        }
    }
    state.done.store(true, Ordering::Relaxed);
    let ended = Instant::now();
    let last = state.last_signal.load(Ordering::Relaxed);
    let status = exit.map_or(128 + last, |e| e.shell_status());
    // What only this run knows, on what the tracer that counted says.
    let environment = target::environment_of_command(env);
    let own = |base: RunInfo| RunInfo {
        command: command.iter().map(|a| a.to_string_lossy().into_owned()).collect(),
        root_pids: vec![pid],
        exit,
        interrupted: end == End::Stopped || exit.is_none(),
        environment: environment.clone(),
        ..base
    };
    let facts = ptracer.hand_over;
    to_bpf.hear();
    let loaded = if facts.handed > 0 { to_bpf.loaded.take() } else { None };
    let Some(Loaded { mut tracer, stacks }) = loaded else {
        // Why BPF did not count: a load that failed says so, whenever the
        // command ended.
        to_bpf.hear_out();
        let why = to_bpf.failed.clone().unwrap_or_else(|| "the command ended before BPF took it over".into());
        let run = RunInfo { fallback: Some(why), ..own(span.run_info(&ptracer, opts, ended)) };
        let letting_go = std::thread::spawn(move || to_bpf.let_go());
        let done = finish(&mut ptracer, inline.map(|i| move || LastPass::Done(Box::new(i.finish()))), run, ended, opts);
        let _ = letting_go.join();
        let (trace, findings) = done?;
        return Ok(Traced { trace, findings, status });
    };
    // Ptrace timed each call from entry to exit; BPF samples CPU time: the
    // run's times are BPF's alone, ptrace's calls counted untimed.
    let first = PtraceFirst { ns: facts.last_ns, calls: ptracer.calls_counted(), threads_handed: facts.handed, threads_kept: facts.refused };
    let mut builder = TraceBuilder::default();
    let lost = ptracer.read_first_part(&mut builder);
    let run = RunInfo { syscall_ns: Some(to_bpf.syscall_ns), ptrace_first: Some(first), ..own(span.run_info(&tracer, opts, ended)) };
    let read = read_out_after(builder, lost, &mut tracer, stacks.map(|c| move || c.last_pass()), run, ended)?;
    let unloading = std::thread::spawn(move || crate::timings::timed("unload the programs", || tracer.keep_loaded()));
    let (trace, findings) = read.conclude(opts);
    let _ = unloading.join();
    Ok(Traced { trace, findings, status })
}

/// Waits for the command, ours again since every thread was handed over;
/// None when tracing is stopped first.
fn wait_for(pid: u32, state: &Interrupts) -> Option<Exit> {
    loop {
        if state.stop.load(Ordering::Relaxed) {
            return None;
        }
        match waitpid(Pid::from_raw(pid as i32), Some(WaitPidFlag::__WALL)) {
            Ok(WaitStatus::Exited(_, code)) => return Some(Exit::Code { code }),
            Ok(WaitStatus::Signaled(_, sig, core_dumped)) => return Some(Exit::Signal { signal: sig as i32, core_dumped }),
            Ok(_) | Err(Errno::EINTR) => {}
            Err(_) => return None,
        }
    }
}
