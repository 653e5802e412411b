use std::ffi::OsString;
use std::time::Instant;

use clap::Parser;

mod cli;

use cli::{Cli, Command, OutputArgs, ReportArgs, WeightArg};
use sysdiet::commands::{attach::attach, run::run, TraceOptions};
use sysdiet::report::{Format, ReportOptions, Weight};
use sysdiet::trace::filter::SyscallSet;
use sysdiet::Result;

fn main() {
    let started = Instant::now();
    let cli = Cli::parse();
    let code = match dispatch(cli, started) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("sysdiet: {e}");
            e.exit_code()
        }
    };
    // Exit without running destructors: the kernel detaches the probes as
    // the process ends, after the report is already out.
    std::process::exit(code);
}

fn dispatch(cli: Cli, started: Instant) -> Result<i32> {
    match cli.command {
        Command::Run { report, command } => run(&command, &options(report)?, started),
        Command::Attach { pids, duration, report } => attach(&pids, duration, &options(report)?, started),
        Command::Compare { args, out } => sysdiet::commands::compare::run(args, &report_options(out)),
        Command::Bench { args, out } => sysdiet::commands::bench::run(args, &report_options(out)),
        Command::BenchWorker { args } => match sysdiet::bench::worker::Job::parse(&args) {
            Some(job) => Ok(sysdiet::bench::worker::work(job)),
            None => Err(sysdiet::Error::Usage("__bench-worker is run by `sysdiet bench`, not by hand".into())),
        },
        Command::Floor { hooks, command } => floor(&hooks, &command),
        Command::Check { args } => sysdiet::commands::check::check(args.sample, &report_options(args.out)),
    }
}

/// Runs `command` under empty hooks; its exit status is ours.
fn floor(hooks: &str, command: &[OsString]) -> Result<i32> {
    use sysdiet::trace::floor::{Floor, Hooks};
    let hooks = match hooks {
        "enter" => Hooks::Enter,
        "exit" => Hooks::Exit,
        _ => Hooks::Both,
    };
    let _floor = Floor::attach(hooks)?;
    let status = std::process::Command::new(&command[0]).args(&command[1..]).status()?;
    Ok(status.code().unwrap_or_else(|| 128 + std::os::unix::process::ExitStatusExt::signal(&status).unwrap_or(0)))
}

fn options(r: ReportArgs) -> Result<TraceOptions> {
    if r.no_stacks && (r.folded.is_some() || r.flamegraph.is_some()) {
        return Err(sysdiet::Error::Usage(
            "--folded and --flamegraph need call sites: drop --no-stacks".into(),
        ));
    }
    Ok(TraceOptions {
        stacks: !r.no_stacks,
        latency: r.latency,
        quiet: false,
        filter: match &r.expr {
            Some(e) => SyscallSet::parse(e)?,
            None => SyscallSet::default(),
        },
        report: ReportOptions {
            per_thread: r.per_thread,
            all: r.all,
            folded: r.folded,
            flamegraph: r.flamegraph,
            weight: match r.weight {
                WeightArg::Count => Weight::Count,
                WeightArg::Time => Weight::Time,
            },
            ..report_options(r.out)
        },
    })
}

fn report_options(out: OutputArgs) -> ReportOptions {
    ReportOptions { format: if out.json { Format::Json } else { Format::Text }, output: out.output, ..Default::default() }
}
