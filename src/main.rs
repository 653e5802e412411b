use std::ffi::OsString;
use std::time::Instant;

use clap::Parser;

mod cli;
mod commands;

use cli::{BackendArg, Cli, Command, ReportArgs, WeightArg};
use commands::{add_exports, attach::attach, main_output, run::run};
use sysdiet::backend::bpf::{BpfOptions, BpfTracer};
use sysdiet::backend::filter::SyscallSet;
use sysdiet::compare::gate::{Ignore, Limits};
use sysdiet::pipeline::{Backend, TraceOptions};
use sysdiet::report::export::{FlameGraphExporter, FoldedExporter, MarkdownExporter, SvgExporter};
use sysdiet::report::{Destination, Outputs, Weight};
use sysdiet::Result;

fn main() {
    let started = Instant::now();
    // Before any thread starts: a table threads share grows only after an
    // RCU grace period, and a run opens more than a new table holds.
    sysdiet::linux::descriptors::reserve(sysdiet::linux::descriptors::for_tracing());
    sysdiet::timings::init(started);
    let cli = Cli::parse();
    let code = match dispatch(cli, started) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("sysdiet: {e}");
            e.exit_code()
        }
    };
    if sysdiet::timings::on() {
        eprint!("{}", sysdiet::report::timings::render(&sysdiet::timings::spans(), started.elapsed()));
    }
    // Exit without running destructors: the kernel detaches the probes as
    // the process ends, after the report is already out.
    std::process::exit(code);
}

fn dispatch(cli: Cli, started: Instant) -> Result<i32> {
    // Every output is opened here, before anything runs: a path that
    // cannot be written fails now, not after the traced command.
    match cli.command {
        // A bad filter is refused before any report file is created.
        Command::Run { report, budget, command } => {
            // A bad budget is refused before anything runs.
            let budget = budget.as_deref().map(sysdiet::compare::budget::Budget::read).transpose()?;
            let (opts, outputs) = (options(&report)?, trace_outputs(&report)?);
            // Said on stderr too when the report is not: a CI log shows why.
            let budget = budget.as_ref().map(|b| (b, report.out.json || report.out.output.is_some()));
            run(&command, &opts, budget, outputs, started)
        }
        Command::Attach { pids, duration, report } => {
            let (opts, outputs) = (options(&report)?, trace_outputs(&report)?);
            attach(&pids, duration, &opts, outputs, started)
        }
        Command::Analyze { files, expr, out, per_thread, folded, flamegraph, weight, all } => {
            let filter = match &expr {
                Some(e) => SyscallSet::parse(e)?,
                None => SyscallSet::default(),
            };
            let mut outputs = main_output(&out, Destination::Stdout, per_thread)?;
            add_stacks(&mut outputs, folded.as_deref(), flamegraph.as_deref(), weight)?;
            let opts = TraceOptions { filter, stacks: true, all, ..Default::default() };
            commands::analyze::analyze(&files, &opts, outputs)
        }
        Command::Compare { args, out } => {
            let mut outputs = main_output(&out, Destination::Stdout, false)?;
            add_exports(&mut outputs, &args.export)?;
            commands::compare::run(args, outputs)
        }
        Command::Bench { args, out } => {
            let mut outputs = main_output(&out, Destination::Stdout, false)?;
            add_exports(&mut outputs, &args.export)?;
            if let Some(path) = &args.svg {
                outputs.add(SvgExporter, &Destination::from_arg(Some(path), Destination::Stdout))?;
            }
            commands::bench::run(args, outputs)
        }
        Command::BenchWorker { args } => match sysdiet::bench::worker::Job::parse(&args) {
            Some(job) => Ok(sysdiet::bench::worker::work(job)),
            None => Err(sysdiet::Error::Usage("__bench-worker is run by `sysdiet bench`, not by hand".into())),
        },
        Command::Floor { hooks, clock, paths, state, state_by_pid, keys, command } => {
            use sysdiet::bench::floor::State;
            let state = if state {
                State::InTask
            } else if state_by_pid {
                State::ByPid
            } else {
                State::None
            };
            floor(&hooks, clock, paths, state, keys, &command)
        }
        Command::Programs { no_stacks, latency, system_wide, log } => programs(
            BpfOptions { stacks: !no_stacks, latency, system_wide, verifier_stats: true, verifier_log: log.is_some(), ..Default::default() },
            log.as_deref(),
        ),
        Command::Keep { set, seconds, syscall_ns, given } => {
            sysdiet::backend::bpf::keeper::keep(&set, std::time::Duration::from_secs(seconds), syscall_ns, &given).map(|()| 0)
        }
        Command::Completions { shell } => {
            clap_complete::generate(shell, &mut public_command(), "sysdiet", &mut std::io::stdout());
            Ok(0)
        }
        Command::Man { dir } => {
            clap_mangen::generate_to(public_command(), &dir).map_err(|source| sysdiet::Error::File { path: dir.clone(), source })?;
            Ok(0)
        }
        Command::Top { host, interval, window, once, iterations, json } => {
            let iterations = if once { Some(1) } else { iterations };
            // A window of whole intervals, at least one: --once shows one interval.
            let span = if once { 1 } else { window.map_or(1, |w| (w.as_secs_f64() / interval.as_secs_f64()).round().max(1.0) as usize) };
            commands::top::top(start_host(&host, span)?, interval, iterations, json)
        }
        Command::Serve { host, listen, interval, bpf_stats } => commands::serve::serve(&listen, interval, bpf_stats, || start_host(&host, 1)),
        Command::Diff { base, new, max_increase, min_calls, fail_on_new_findings, ignore, markdown, out } => {
            let mut outputs = Outputs::default();
            let to = Destination::from_arg(out.output.as_deref(), Destination::Stdout);
            if markdown {
                outputs.add(MarkdownExporter, &to)?;
            } else {
                outputs = main_output(&out, Destination::Stdout, false)?;
            }
            let limits = Limits { max_increase_pct: max_increase, min_calls, fail_on_new_findings };
            commands::diff::diff(&base, &new, &Ignore::new(&ignore)?, &limits, outputs)
        }
        Command::Check { args } => commands::check::check(args.sample, main_output(&args.out, Destination::Stdout, false)?),
    }
}

/// Loads the whole-host tracer for `top` and `serve`.
fn start_host(h: &cli::HostArgs, span: usize) -> Result<sysdiet::pipeline::Host> {
    let filter = match &h.expr {
        Some(e) => SyscallSet::parse(e)?,
        None => SyscallSet::default(),
    };
    let scope = sysdiet::pipeline::Scope { pids: h.pids.clone(), cgroup: h.cgroup.clone() };
    sysdiet::pipeline::Host::start(&filter, h.expr.clone(), scope, h.all, span)
}

/// The command line without its hidden commands (sysdiet's own helpers):
/// what completions offer and the man pages describe.
fn public_command() -> clap::Command {
    let full = <Cli as clap::CommandFactory>::command();
    let mut public = clap::Command::new("sysdiet")
        .version(env!("CARGO_PKG_VERSION"))
        .about(full.get_about().cloned().unwrap_or_default())
        .long_about(full.get_long_about().cloned().unwrap_or_default())
        .subcommand_required(true);
    for sub in full.get_subcommands().filter(|s| !s.is_hide_set()) {
        public = public.subcommand(sub.clone());
    }
    public
}

/// Loads and attaches the tracer, prints the time that took and each
/// program's verified instructions and verification time, and unloads it.
fn programs(options: BpfOptions, log: Option<&std::path::Path>) -> Result<i32> {
    let started = Instant::now();
    let loaded = BpfTracer::load(&SyscallSet::default(), options);
    // Written whether or not the load was refused: a refusal's log says why.
    if let Some(path) = log {
        std::fs::write(path, BpfTracer::verifier_log()).map_err(|source| sysdiet::Error::File { path: path.to_path_buf(), source })?;
    }
    let tracer = loaded?;
    let mut text = format!("loaded and attached in {:.1} ms\n", started.elapsed().as_secs_f64() * 1e3);
    let times: std::collections::HashMap<&str, u64> = tracer.verification_us().iter().map(|(n, us)| (n.as_str(), *us)).collect();
    for (name, insns) in tracer.verified() {
        let us = times.get(name.as_str()).map(|us| format!(" verification_us={us}")).unwrap_or_default();
        text += &format!("{name} verified_insns={insns}{us}\n");
    }
    // A reader that stops early (| head) is not an error worth a panic.
    let _ = std::io::Write::write_all(&mut std::io::stdout(), text.as_bytes());
    Ok(0)
}

/// Runs `command` under empty hooks; its exit status is ours.
fn floor(hooks: &str, clock: bool, paths: bool, state: sysdiet::bench::floor::State, keys: Option<u32>, command: &[OsString]) -> Result<i32> {
    use sysdiet::bench::floor::{Floor, Hooks};
    let hooks = match hooks {
        "enter" => Hooks::Enter,
        "exit" => Hooks::Exit,
        _ => Hooks::Both,
    };
    let _floor = Floor::attach(hooks, clock, paths, state, keys)?;
    let status = std::process::Command::new(&command[0]).args(&command[1..]).status()?;
    Ok(status.code().unwrap_or_else(|| 128 + std::os::unix::process::ExitStatusExt::signal(&status).unwrap_or(0)))
}

/// The report (stderr unless -o), then the call sites as folded stacks
/// and as a flame graph, when asked.
fn trace_outputs(r: &ReportArgs) -> Result<Outputs> {
    if r.no_stacks && (r.folded.is_some() || r.flamegraph.is_some()) {
        return Err(sysdiet::Error::Usage("--folded and --flamegraph need call sites: drop --no-stacks".into()));
    }
    let mut outputs = main_output(&r.out, Destination::Stderr, r.per_thread)?;
    add_stacks(&mut outputs, r.folded.as_deref(), r.flamegraph.as_deref(), r.weight)?;
    Ok(outputs)
}

/// The call sites as folded stacks and as a flame graph, when asked.
fn add_stacks(outputs: &mut Outputs, folded: Option<&std::path::Path>, flamegraph: Option<&std::path::Path>, weight: WeightArg) -> Result<()> {
    let weight = match weight {
        WeightArg::Count => Weight::Count,
        WeightArg::Time => Weight::Time,
    };
    if let Some(path) = folded {
        outputs.add(FoldedExporter { weight }, &Destination::from_arg(Some(path), Destination::Stdout))?;
    }
    if let Some(path) = flamegraph {
        outputs.add(FlameGraphExporter { weight }, &Destination::from_arg(Some(path), Destination::Stdout))?;
    }
    Ok(())
}

fn options(r: &ReportArgs) -> Result<TraceOptions> {
    Ok(TraceOptions {
        backend: match r.backend {
            BackendArg::Auto => Backend::Auto,
            BackendArg::Bpf => Backend::Bpf,
            BackendArg::Ptrace => Backend::Ptrace,
        },
        stacks: !r.no_stacks,
        latency: r.latency,
        quiet: false,
        all: r.all,
        filter: match &r.expr {
            Some(e) => SyscallSet::parse(e)?,
            None => SyscallSet::default(),
        },
    })
}
