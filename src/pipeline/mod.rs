//! The pipeline every tracing command runs: a target (a command started
//! held, or running processes), traced until it ends, read out into a
//! Trace, diagnosed. target → backend (+ stacks) → model → diagnose; what is
//! written where is the caller's business.

mod analyze;
mod attach;
mod fleet;
mod handover;
mod ptraced;
mod run;
mod zone;

pub use analyze::analyze;
pub use attach::{arm_threads, attach};
pub use fleet::{Host, HostWindow, Scope};
pub use run::trace_command;
pub use zone::zone_lookups;

use std::sync::mpsc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use crate::backend::bpf::{BpfOptions, BpfTracer, LoadedTracer};
use crate::backend::filter::SyscallSet;
use crate::backend::mappings::{MapEvent, MapEvents};
use crate::backend::Tracer;
use crate::diagnose::Finding;
use crate::error::Result;
use crate::model::builder::TraceBuilder;
use crate::model::{Lost, RunInfo, Trace};
use crate::stacks::collector::{Collector, LastPass, StartingCollector};
use crate::target::Event;

/// Which tracer counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Backend {
    /// BPF when it loads, else ptrace (and say why).
    #[default]
    Auto,
    Bpf,
    Ptrace,
}

/// What every tracing command takes.
#[derive(Debug, Clone, Default)]
pub struct TraceOptions {
    pub backend: Backend,
    pub filter: SyscallSet,
    /// Sample stacks to find call sites.
    pub stacks: bool,
    /// Measure each call's wall time (two hooks) instead of sampling CPU time.
    pub latency: bool,
    /// The command's stdin, stdout and stderr go to /dev/null.
    pub quiet: bool,
    /// Report small findings too.
    pub all: bool,
}

/// A traced run: its Trace, the findings, and the status to exit with (the
/// command's own, 128 + N when killed by signal N; 0 for attach).
pub struct Traced {
    pub trace: Trace,
    pub findings: Vec<Finding>,
    pub status: i32,
}

/// Loads the BPF tracer, or says why ptrace will count instead (None, with
/// the reason, when `--backend auto` cannot use BPF here); and what one
/// syscall costs on this host untraced (`linux::syscall_cost_ns`).
/// `arms_running_threads`: see BpfOptions (attach). With `stacks` (the
/// watched mappings of targets known now), the stack reader too.
fn load_bpf(opts: &TraceOptions, arms_running_threads: bool, stacks: MappingWatch) -> Result<(Option<Loaded>, Option<String>, u64)> {
    load_bpf_then(opts, arms_running_threads, stacks, || {}, &|| true)
}

/// The same, calling `cold` once it is known that no keeper lends a set
/// (this run loads its own: tens of ms), and `go_on` once the programs are
/// loaded: they attach only if it says so.
fn load_bpf_then(
    opts: &TraceOptions,
    arms_running_threads: bool,
    stacks: MappingWatch,
    cold: impl FnOnce(),
    go_on: &dyn Fn() -> bool,
) -> Result<(Option<Loaded>, Option<String>, u64)> {
    if opts.backend == Backend::Ptrace {
        return Ok((None, None, crate::linux::syscall_cost_ns()));
    }
    // A command's run ends with its targets: its programs can be kept.
    let keep_loaded = !arms_running_threads;
    let (loaded, syscall_ns) = load_measuring(&opts.filter, BpfOptions { arms_running_threads, keep_loaded, ..opts.bpf() }, stacks, cold, go_on);
    match loaded {
        Ok(l) => Ok((Some(l), None, syscall_ns)),
        // Loaded for a command that has ended meanwhile: nothing to say.
        Err(_) if !go_on() => Ok((None, None, syscall_ns)),
        Err(e) if opts.backend == Backend::Auto => {
            let Some(why) = bpf_unavailable(&e) else { return Err(e) };
            eprintln!("sysdiet: counting with ptrace (slower than BPF): {why}");
            Ok((None, Some(why), syscall_ns))
        }
        Err(e) => Err(e),
    }
}

/// The attached tracer, and its stack reader when one was asked for.
struct Loaded {
    tracer: BpfTracer,
    stacks: Option<Collector>,
}

/// Says on stderr that tracing has begun, as strace's "Process N
/// attached" does: from here on every call of `pids` is counted.
fn say_attached(pids: &[u32], threads: usize, duration: Option<std::time::Duration>) {
    let list = pids.iter().map(u32::to_string).collect::<Vec<_>>().join(", ");
    let which = if pids.len() == 1 { format!("pid {list}") } else { format!("pids {list}") };
    let until = if pids.len() == 1 { "until it exits" } else { "until they exit" };
    let limit = duration.map(|d| format!(", for at most {}", crate::human::duration(d.as_nanos() as u64))).unwrap_or_default();
    let s = if threads == 1 { "" } else { "s" };
    eprintln!("sysdiet: attached to {which} ({threads} thread{s}): tracing {until}{limit}, or Ctrl-C");
}

/// Loads the tracer while a syscall's untraced cost is measured on the
/// other CPU (a few ms of start-up, no longer in series with the load),
/// and attaches it once that is done: the probes slow every task's
/// syscalls, the measure's too. Kept programs come with their keeper's
/// figure, from before their hooks were attached: measured only for
/// programs loaded now. The readers map their rings on their own threads
/// meanwhile. A stack reader that cannot start fails the load, as a
/// program that does not load: `--backend auto` then counts with ptrace.
fn load_measuring(
    filter: &SyscallSet,
    options: BpfOptions,
    stacks: MappingWatch,
    cold: impl FnOnce(),
    go_on: &dyn Fn() -> bool,
) -> (Result<Loaded>, u64) {
    let _t = crate::timings::span("load BPF");
    let mut cost = None;
    let loaded = BpfTracer::load_unattached_then(filter, options, || {
        cold();
        cost = Some(std::thread::spawn(|| {
            let _t = crate::timings::span("measure a syscall");
            crate::linux::syscall_cost_ns()
        }))
    });
    let loaded = loaded.and_then(|l| if go_on() { Ok(l) } else { Err(crate::error::Error::Bpf("not needed: the command ended first".into())) });
    let starting = match &loaded {
        Ok(l) => spawn_stacks(l, stacks),
        Err(_) => Ok(None),
    };
    let measured = || cost.and_then(|c| c.join().ok()).unwrap_or_else(crate::linux::syscall_cost_ns);
    let syscall_ns = loaded.as_ref().ok().and_then(LoadedTracer::kept_syscall_ns).unwrap_or_else(measured);
    let loaded = loaded.map(|mut l| {
        l.set_syscall_ns(syscall_ns);
        l
    });
    let attached = starting.and_then(|starting| match loaded.and_then(LoadedTracer::attach) {
        Ok(tracer) => {
            let _t = crate::timings::span("wait for the stack reader");
            Ok(Loaded { tracer, stacks: starting.map(StartingCollector::ready).transpose()? })
        }
        Err(e) => {
            if let Some(s) = starting {
                s.abandon();
            }
            Err(e)
        }
    });
    (attached, syscall_ns)
}

/// Why BPF cannot count here, in a few words, for the errors that mean it
/// is unavailable (rights, BTF, a refused load); None for any other error.
fn bpf_unavailable(e: &crate::error::Error) -> Option<String> {
    use crate::error::Error;
    match e {
        Error::NoBpfRights => Some("no rights to load BPF".to_string()),
        Error::PerfEventsRestricted { level, .. } => Some(format!("perf events need CAP_SYS_ADMIN here (kernel.perf_event_paranoid={level})")),
        Error::NoBtf { release, .. } => Some(format!("this kernel ({release}) has no BTF")),
        Error::KernelLacks { release, feature, since } => Some(format!("this kernel ({release}) has no {feature} (Linux {since})")),
        Error::Bpf(msg) => Some(format!("BPF did not load ({msg})")),
        _ => None,
    }
}

impl TraceOptions {
    fn bpf(&self) -> BpfOptions {
        BpfOptions { stacks: self.stacks, latency: self.latency, ..Default::default() }
    }
}

fn unix_now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

/// Mapping events being opened for the processes `pids` (call sites need
/// them), on another thread, beside the BPF load.
type MappingWatch = Option<std::thread::JoinHandle<Result<MapEvents>>>;

fn watch_mappings(opts: &TraceOptions, pids: Vec<u32>) -> MappingWatch {
    watch_mappings_then(opts, pids, || {})
}

/// The same, calling `opened` once the events are open (or failed to).
fn watch_mappings_then(opts: &TraceOptions, pids: Vec<u32>, opened: impl FnOnce() + Send + 'static) -> MappingWatch {
    // The ptrace backend unwinds from the stopped task: no events to open.
    (opts.stacks && opts.backend != Backend::Ptrace).then(|| {
        std::thread::spawn(move || {
            let _t = crate::timings::span("open mapping events");
            let events = MapEvents::open(&pids);
            opened();
            events
        })
    })
}

/// Starts reading stack samples, when asked for, with the mappings of the
/// watched processes (`initial`: what they map already).
fn start_stacks(tracer: &BpfTracer, watch: MappingWatch, initial: Vec<MapEvent>) -> Result<Option<Collector>> {
    let Some(watch) = watch else {
        return Ok(None);
    };
    let _t = crate::timings::span("start the stack reader");
    let events = watch.join().map_err(|_| crate::error::Error::Bpf("opening the mapping events failed".into()))??;
    Collector::start(tracer.samples_ring()?, events, initial, tracer.folded()).map(Some)
}

/// The same for targets known before the load, started before the
/// programs attach: its ring is mapped while they do.
fn spawn_stacks(loaded: &LoadedTracer, watch: MappingWatch) -> Result<Option<StartingCollector>> {
    let Some(watch) = watch else {
        return Ok(None);
    };
    let _t = crate::timings::span("start the stack reader");
    let events = watch.join().map_err(|_| crate::error::Error::Bpf("opening the mapping events failed".into()))??;
    Collector::spawn(loaded.samples_ring()?, events, Vec::new(), loaded.folded()).map(Some)
}

/// When tracing began, and what setting it up took: measured alike for
/// every backend.
struct Span {
    setup_ns: u64,
    /// Wall-clock time (Unix seconds) at the start.
    started_at: f64,
    t0: Instant,
}

impl Span {
    /// Tracing begins now; sysdiet started at `started`.
    fn begin(started: Instant) -> Span {
        Span { setup_ns: started.elapsed().as_nanos() as u64, started_at: unix_now(), t0: Instant::now() }
    }

    /// The run's facts every backend fills alike, up to `ended`; the
    /// caller adds what only it knows (command, pids, exit, environment).
    fn run_info(&self, tracer: &dyn Tracer, opts: &TraceOptions, ended: Instant) -> RunInfo {
        RunInfo {
            backend: tracer.backend().into(),
            bpf_programs: tracer.programs().map(Into::into),
            bpf_programs_kept: tracer.programs_kept(),
            filter: opts.filter.expr.clone(),
            started_at: self.started_at,
            duration_ns: (ended - self.t0).as_nanos() as u64,
            setup_ns: self.setup_ns,
            time: tracer.time_kind(),
            ..Default::default()
        }
    }
}

/// A signal while the tracer was set up: the command is not started (the
/// held child, dropped, ends). From here on a signal reaches it as usual.
fn not_interrupted(signals: &mpsc::Receiver<Event>) -> Result<()> {
    match signals.try_recv() {
        Ok(Event::Signal { signal, .. }) => Err(crate::error::Error::NotStarted { signal }),
        _ => Ok(()),
    }
}

/// Reads the tracer out into a Trace and diagnoses it: `samples` starts
/// the stack reader's last pass once the tracer has stopped, which runs
/// while the counts are read, and hands over what it returns: the samples,
/// resolved to call sites after. `ended` is when the traced work ended:
/// the read-out's time is measured from it.
fn finish(
    tracer: &mut dyn Tracer,
    samples: Option<impl FnOnce() -> LastPass>,
    run: RunInfo,
    ended: Instant,
    opts: &TraceOptions,
) -> Result<(Trace, Vec<Finding>)> {
    Ok(read_out(tracer, samples, run, ended)?.conclude(opts))
}

/// A run read out of its tracer, which it no longer needs.
struct ReadOut {
    builder: TraceBuilder,
    run: RunInfo,
    lost: crate::model::Lost,
}

/// `finish`'s first half: the tracer stopped and read out, call sites named.
fn read_out(tracer: &mut dyn Tracer, samples: Option<impl FnOnce() -> LastPass>, run: RunInfo, ended: Instant) -> Result<ReadOut> {
    read_out_after(TraceBuilder::default(), Lost::default(), tracer, samples, run, ended)
}

/// The same, into `builder`, which holds what another tracer counted
/// earlier in the run and lost (`lost_before`).
fn read_out_after(
    mut builder: TraceBuilder,
    lost_before: Lost,
    tracer: &mut dyn Tracer,
    samples: Option<impl FnOnce() -> LastPass>,
    mut run: RunInfo,
    ended: Instant,
) -> Result<ReadOut> {
    tracer.stop();
    let last_pass = samples.map(|s| s());
    let lost = tracer.read_into(&mut builder)?.plus(&lost_before);
    if let Some(last_pass) = last_pass {
        let collected = last_pass.collected();
        if let Some(why) = &collected.unread {
            return Err(crate::error::Error::Bpf(format!("stack samples left unread: {why}")));
        }
        let _t = crate::timings::span("name the call sites");
        crate::stacks::resolve(collected, tracer.sample_rate(), |nr, fd, key| tracer.argument_of_sample(nr, fd, key), &mut builder);
    }
    run.readout_ns = ended.elapsed().as_nanos() as u64;
    Ok(ReadOut { builder, run, lost })
}

impl ReadOut {
    /// `finish`'s second half: the trace built and diagnosed.
    fn conclude(self, opts: &TraceOptions) -> (Trace, Vec<Finding>) {
        let ReadOut { builder, run, lost } = self;
        let mut trace = crate::timings::timed("build the trace", || builder.finish(run, lost));
        trace.lost.syscall_exits_unseen = exits_unseen(&trace, &opts.filter);
        let findings = crate::timings::timed("diagnose", || crate::diagnose::diagnose(&trace, opts.all));
        (trace, findings)
    }
}

/// The processes whose exec the tracer saw in a run where it saw not one
/// syscall end (exit and exit_group never return): every process that
/// execs returns from its execve, so the kernel did not run the exit hook
/// at all (arm64 6.1 under QEMU's TCG, at times: docs/kernels.md). Zero
/// when any call was counted, or execve is filtered out.
fn exits_unseen(trace: &Trace, filter: &SyscallSet) -> u64 {
    let execve = crate::linux::syscalls::by_name("execve").map(|s| s.nr);
    if !execve.is_some_and(|nr| filter.contains(nr)) {
        return 0;
    }
    let ends: u64 = trace.syscalls.iter().filter(|s| s.name != "exit" && s.name != "exit_group").map(|s| s.calls).sum();
    if ends > 0 {
        return 0;
    }
    trace.processes.iter().filter(|p| p.environment.is_some()).count() as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::replay::Replay;
    use crate::diagnose::testing::{argument, path, trace};
    use crate::model::TimeKind;

    /// A run recorded by the BPF backend: 100,000 stats of /etc/localtime.
    fn recorded() -> Trace {
        let mut t = trace(2_000_000_000, &[("newfstatat", 100_003, 900_000_000), ("write", 5, 1_000)]);
        t.run.backend = "bpf".into();
        t.run.time = TimeKind::sampled_every(250_000);
        argument(&mut t, "newfstatat", path("/etc/localtime"), 100_000, 899_000_000);
        t
    }

    #[test]
    fn execs_seen_with_no_syscall_end_are_counted_lost() {
        let mut t = trace(2_000_000, &[("exit_group", 3, 0)]);
        for (i, p) in [7, 8, 9].into_iter().enumerate() {
            t.processes.resize_with(i + 1, Default::default);
            t.processes[i].pid = p;
            t.processes[i].environment = Some(Default::default());
        }
        assert_eq!(exits_unseen(&t, &SyscallSet::default()), 3);
        assert!(crate::model::Lost { syscall_exits_unseen: 3, ..Default::default() }.counts_incomplete());
        // One call counted: the hook ran.
        let execve = crate::linux::syscalls::by_name("execve").unwrap().nr;
        t.syscalls.push(crate::model::SyscallStats { calls: 1, ..crate::model::SyscallStats::new(execve) });
        assert_eq!(exits_unseen(&t, &SyscallSet::default()), 0);
        // execve filtered out: nothing to tell by.
        t.syscalls.pop();
        assert_eq!(exits_unseen(&t, &SyscallSet::parse("trace=openat").unwrap()), 0);
        // No exec seen (attach to a running process): nothing to tell by.
        t.processes.iter_mut().for_each(|p| p.environment = None);
        assert_eq!(exits_unseen(&t, &SyscallSet::default()), 0);
    }

    #[test]
    fn a_replayed_run_is_read_out_and_diagnosed_without_root() {
        let recorded = recorded();
        let mut tracer = Replay::new(recorded.clone());
        let span = Span { setup_ns: 5_000, started_at: 1.5, t0: Instant::now() };
        let opts = TraceOptions::default();
        let ended = Instant::now();
        let run = RunInfo { root_pids: vec![7], duration_ns: recorded.run.duration_ns, ..span.run_info(&tracer, &opts, ended) };
        let (trace, findings) = finish(&mut tracer, None::<fn() -> LastPass>, run, ended, &opts).unwrap();
        assert_eq!((trace.run.backend.as_str(), trace.run.setup_ns, trace.run.started_at), ("bpf", 5_000, 1.5));
        assert_eq!(trace.run.time, recorded.run.time);
        assert_eq!(trace.syscalls, recorded.syscalls);
        assert_eq!(trace.arguments, recorded.arguments);
        let ids: Vec<&str> = findings.iter().map(|f| f.id.as_str()).collect();
        assert_eq!(ids, ["tz-unset"], "{findings:?}");
    }

    #[test]
    fn a_signal_while_setting_up_means_the_command_never_started() {
        let (tx, rx) = mpsc::channel();
        assert!(not_interrupted(&rx).is_ok());
        tx.send(Event::Exited(crate::model::Exit::Code { code: 0 })).unwrap();
        assert!(not_interrupted(&rx).is_ok(), "only a signal stops it");
        tx.send(Event::Signal { signal: libc::SIGINT, from_terminal: true }).unwrap();
        assert!(matches!(not_interrupted(&rx), Err(crate::error::Error::NotStarted { signal: libc::SIGINT })));
    }
}
