//! A command traced from its execve to its end.

use std::ffi::OsString;
use std::sync::mpsc;
use std::time::Instant;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use super::{handover, not_interrupted, read_out, watch_mappings, Backend, Span, TraceOptions, Traced};
use crate::error::{Error, Result};
use crate::model::RunInfo;
use crate::target::{self, spawn, Event};

/// Runs `command` with environment `env`, traced to its end.
pub fn trace_command(command: &[OsString], env: &[(OsString, OsString)], opts: &TraceOptions, started: Instant) -> Result<Traced> {
    let Some(name) = command.first() else {
        return Err(Error::Usage("no command given: sysdiet run -- COMMAND [ARGS...]".into()));
    };
    // Cheap errors first: a typo should not wait for BPF to load.
    let spawning = crate::timings::span("spawn the command, held");
    let program = spawn::resolve_program(name)?;

    let (tx, rx) = mpsc::channel();
    target::watch_signals(tx.clone())?;
    // Held before the BPF loads: if sysdiet dies meanwhile, the child sees
    // its pipe close and runs the command anyway, untraced.
    let held = spawn::spawn_held(&program, command, env, opts.quiet)?;
    drop(spawning);
    let comm = program.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    // `--backend auto` starts the command under ptrace beside the load and
    // hands it to BPF (handover.rs); where BPF plainly cannot load (no
    // rights, no BTF), that is said now, before the command's first line,
    // and ptrace counts as before.
    let bpf_may_load = crate::linux::host::may_load_bpf() && crate::backend::bpf::maps::require_btf().is_ok();
    if opts.backend == Backend::Auto && bpf_may_load {
        let loader = handover::start_loading(opts, held.pid())?;
        return handover::trace_held(held, command, env, opts, rx, started, loader);
    }
    // Its mappings are watched before its execve, so that the new
    // program's are seen.
    let mappings = watch_mappings(opts, vec![held.pid()]);
    let (loaded, why, syscall_ns) = super::load_bpf(opts, false, mappings)?;
    let Some(super::Loaded { mut tracer, stacks }) = loaded else {
        return super::ptraced::trace_held(held, command, env, opts, rx, started, why);
    };
    tracer.add_target(held.pid(), true, held.pid(), std::process::id(), &comm)?;

    let span = Span::begin(started);
    not_interrupted(&rx)?;
    let pid = held.release()?;
    target::watch_child(pid, tx);
    // Read while the command runs (sysfs reads): nothing it does changes it.
    let environment = target::environment_of_command(env);

    let session_leader = nix::unistd::getsid(None).is_ok_and(|sid| sid == nix::unistd::getpid());
    let mut interrupts = 0;
    // The status when tracing ends before the command: as a shell reports
    // a death by the last signal sysdiet was sent (130 for Ctrl-C, 143 for
    // SIGTERM).
    let mut last_signal = libc::SIGINT;
    let exit = loop {
        match rx.recv() {
            Ok(Event::Exited(exit)) => break Some(exit),
            Ok(Event::Signal { signal, from_terminal }) => {
                // The terminal signals the whole process group; a signal
                // sent to sysdiet alone is passed on to the command. A
                // hang-up reaches only the session's leader: when that is
                // sysdiet, the command hears of it from us.
                if !from_terminal || (signal == libc::SIGHUP && session_leader) {
                    if let Ok(sig) = Signal::try_from(signal) {
                        let _ = kill(Pid::from_raw(pid as i32), sig);
                    }
                }
                interrupts += 1;
                last_signal = signal;
                // Asked twice: report now, leave the command running, untraced.
                if interrupts >= 2 {
                    break None;
                }
            }
            Ok(_) => {}
            Err(_) => break None,
        }
    };
    let ended = Instant::now();
    crate::timings::record("the command", span.t0);
    let run = RunInfo {
        command: command.iter().map(|a| a.to_string_lossy().into_owned()).collect(),
        root_pids: vec![pid],
        exit,
        interrupted: exit.is_none(),
        environment,
        syscall_ns: Some(syscall_ns),
        ..span.run_info(&tracer, opts, ended)
    };
    let read = read_out(&mut tracer, stacks.map(|c| move || c.last_pass()), run, ended)?;
    // Unloaded (or left with a keeper) on the other CPU while the trace is
    // built and diagnosed, which need the tracer no more.
    let unloading = std::thread::spawn(move || crate::timings::timed("unload the programs", || tracer.keep_loaded()));
    let (trace, findings) = read.conclude(opts);
    let _ = unloading.join();
    Ok(Traced { trace, findings, status: exit.map_or(128 + last_signal, |e| e.shell_status()) })
}
