//! The pipeline with the ptrace tracer, where BPF cannot load: a command
//! held before its execve, or running processes, followed by ptrace on
//! this thread (ptrace requests must come from the thread that attached);
//! signals to sysdiet are handled on another, which wakes this one.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use super::{finish, not_interrupted, Span, TraceOptions, Traced};
use crate::backend::ptrace::{End, Ptracer, SampleSink};
use crate::error::Result;
use crate::model::RunInfo;
use crate::stacks::collector::{Inline, LastPass};
use crate::target::{self, spawn::HeldChild, Event};

/// Traces a held child with ptrace to its end. `why`: why not BPF, when
/// sysdiet chose ptrace by itself.
pub fn trace_held(
    held: HeldChild,
    command: &[std::ffi::OsString],
    env: &[(std::ffi::OsString, std::ffi::OsString)],
    opts: &TraceOptions,
    signals: mpsc::Receiver<Event>,
    started: Instant,
    why: Option<String>,
) -> Result<Traced> {
    let mut tracer = seize(&held, command, opts)?;
    let span = Span::begin(started);
    not_interrupted(&signals)?;
    let pid = held.release()?;
    let state = Arc::new(Interrupts::default());
    watch(signals, pid, state.clone());
    let mut inline = opts.stacks.then(Inline::default);
    let end = tracer.follow(&state.stop, inline.as_mut().map(|i| i as &mut dyn SampleSink));
    state.done.store(true, Ordering::Relaxed);
    let ended = Instant::now();
    let exit = tracer.root_exit;
    let run = RunInfo {
        command: command.iter().map(|a| a.to_string_lossy().into_owned()).collect(),
        root_pids: vec![pid],
        fallback: why,
        exit,
        interrupted: end == End::Stopped || exit.is_none(),
        environment: target::environment_of_command(env),
        ..span.run_info(&tracer, opts, ended)
    };
    let last = state.last_signal.load(Ordering::Relaxed);
    let (trace, findings) = finish(&mut tracer, inline.map(|i| move || LastPass::Done(Box::new(i.finish()))), run, ended, opts)?;
    Ok(Traced { trace, findings, status: exit.map_or(128 + last, |e| e.shell_status()) })
}

/// Seizes the held command with ptrace (handover.rs too): named by its
/// command line's first word until its execve names it again.
pub(super) fn seize(held: &HeldChild, command: &[std::ffi::OsString], opts: &TraceOptions) -> Result<Ptracer> {
    let comm =
        command.first().map(|c| std::path::Path::new(c).file_name().unwrap_or(c.as_os_str()).to_string_lossy().into_owned()).unwrap_or_default();
    Ptracer::seize_held(held.pid(), &comm, held.program(), opts.filter.clone())
}

/// Traces running processes with ptrace until they exit, `duration` runs
/// out, or a signal; then lets them go.
pub fn attach(pids: &[u32], duration: Option<Duration>, opts: &TraceOptions, started: Instant, why: Option<String>) -> Result<Traced> {
    let threads: Vec<(u32, Vec<(u32, String)>)> = pids.iter().map(|&p| target::live_threads(p).map(|t| (p, t))).collect::<Result<_>>()?;
    let (tx, rx) = mpsc::channel();
    target::watch_signals(tx.clone())?;
    let mut tracer = Ptracer::attach(&threads, opts.filter.clone())?;
    super::say_attached(pids, threads.iter().map(|(_, t)| t.len()).sum(), duration);
    let span = Span::begin(started);
    let state = Arc::new(Interrupts::default());
    if let Some(d) = duration {
        target::watch_timeout(d, tx);
    }
    watch(rx, 0, state.clone());
    let mut inline = opts.stacks.then(Inline::default);
    let end = tracer.follow(&state.stop, inline.as_mut().map(|i| i as &mut dyn SampleSink));
    state.done.store(true, Ordering::Relaxed);
    let ended = Instant::now();
    let run = RunInfo {
        root_pids: pids.to_vec(),
        fallback: why,
        interrupted: end == End::Stopped && !state.timed_out.load(Ordering::Relaxed),
        environment: target::environment_of_process(pids[0]),
        ..span.run_info(&tracer, opts, ended)
    };
    let (mut trace, findings) = finish(&mut tracer, inline.map(|i| move || LastPass::Done(Box::new(i.finish()))), run, ended, opts)?;
    if let [pid] = pids {
        trace.run.exit = trace.processes.iter().find(|p| p.pid == *pid).and_then(|p| p.exit);
    }
    Ok(Traced { trace, findings, status: 0 })
}

#[derive(Default)]
pub(super) struct Interrupts {
    pub(super) stop: AtomicBool,
    /// The tracer saw `stop` and returned: no more waking.
    pub(super) done: AtomicBool,
    timed_out: AtomicBool,
    pub(super) last_signal: std::sync::atomic::AtomicI32,
}

/// Handles signals to sysdiet on a thread: passed on to the command (when
/// the terminal did not already send them to it), and the second one, or
/// --duration's end, stops tracing. The tracer's thread, blocked in
/// waitpid, is woken by a signal of its own.
pub(super) fn watch(rx: mpsc::Receiver<Event>, pid: u32, state: Arc<Interrupts>) {
    let tracer_thread = unsafe { libc::pthread_self() };
    wake_handler();
    state.last_signal.store(libc::SIGINT, Ordering::Relaxed);
    let session_leader = nix::unistd::getsid(None).is_ok_and(|sid| sid == nix::unistd::getpid());
    std::thread::spawn(move || {
        let mut interrupts = 0;
        for event in rx {
            match event {
                Event::Signal { signal, from_terminal } => {
                    if pid != 0 && (!from_terminal || (signal == libc::SIGHUP && session_leader)) {
                        if let Ok(sig) = Signal::try_from(signal) {
                            let _ = kill(Pid::from_raw(pid as i32), sig);
                        }
                    }
                    interrupts += 1;
                    state.last_signal.store(signal, Ordering::Relaxed);
                    // run: the first signal is the command's to act on;
                    // attach: any signal ends tracing.
                    if interrupts < 2 && pid != 0 {
                        continue;
                    }
                }
                Event::Timeout => state.timed_out.store(true, Ordering::Relaxed),
                _ => continue,
            }
            state.stop.store(true, Ordering::Relaxed);
            // Again until it is seen: a wake-up that lands just before the
            // tracer blocks in waitpid would be lost.
            while !state.done.load(Ordering::Relaxed) {
                // SAFETY: the tracer thread lives as long as the process.
                unsafe { libc::pthread_kill(tracer_thread, WAKE) };
                std::thread::sleep(Duration::from_millis(50));
            }
            return;
        }
    });
}

/// The signal that interrupts the tracer's waitpid (EINTR): SIGURG, which
/// nothing else here uses, with a handler that does nothing and no
/// SA_RESTART.
const WAKE: libc::c_int = libc::SIGURG;

fn wake_handler() {
    extern "C" fn nothing(_: libc::c_int) {}
    // SAFETY: installs a handler that touches nothing.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = nothing as *const () as usize;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(WAKE, &sa, std::ptr::null_mut());
    }
}
