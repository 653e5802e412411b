//! The command line, as `sysdiet --help` shows it.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(
    name = "sysdiet",
    version,
    about = "Find the system calls a program makes for nothing, and who makes them",
    long_about = "Counts every system call of a program in the kernel (BPF), exactly and at \
                  little cost (with ptrace where BPF cannot load; from a saved strace log with \
                  `analyze`), and reports them like `strace -c`, with the arguments repeated most, \
                  the code that makes them, and what to change."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run a command, trace it and its children to its end, then report
    #[command(after_help = "Examples:\n  sysdiet run -- ./timeloop localtime 1000000\n  \
                            sysdiet run --json -o out.json -- make -j2\n  \
                            sysdiet run -e trace=%file -- ls /\n\n\
                            The command's exit status is sysdiet's (128+N when killed by signal N).\n\
                            Ctrl-C reaches the command; the report of what ran is still printed.")]
    Run {
        #[command(flatten)]
        report: ReportArgs,
        /// Judge the run against a TOML budget of calls (total, per syscall, per path) and findings;
        /// exit 3 when it breaks (docs/ci.md)
        #[arg(long, value_name = "FILE")]
        budget: Option<PathBuf>,
        /// The command and its arguments
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true, value_name = "COMMAND")]
        command: Vec<OsString>,
    },
    /// Trace running processes (all their threads and future children)
    #[command(after_help = "Examples:\n  sysdiet attach -p 1234 --duration 30s\n  \
                            sysdiet attach -p 1234,1240\n\n\
                            Tracing ends when the processes exit, --duration runs out, or on Ctrl-C.")]
    Attach {
        /// Process ids, comma-separated or repeated
        #[arg(short = 'p', long = "pid", value_delimiter = ',', required = true, value_name = "PID")]
        pids: Vec<u32>,
        /// Stop after this long: 30s, 500ms, 2m, 1h (a bare number is seconds)
        #[arg(long, value_parser = parse_duration, value_name = "TIME")]
        duration: Option<Duration>,
        #[command(flatten)]
        report: ReportArgs,
    },
    /// Diagnose a saved strace log: the same report as `run`, from strace's text
    #[command(after_help = "Examples:\n  strace -f -tt -T -k -o trace.log ./app && sysdiet analyze trace.log\n  \
                            sysdiet analyze --json trace.log > report.json\n  \
                            sysdiet analyze trace          # a -ff set: trace.1234, trace.1240, ...\n  \
                            strace -f ./app 2>&1 >/dev/null | sysdiet analyze -\n\n\
                            Reads -f (PID or [pid N] prefixes), -ff sets, -t/-tt/-ttt/-r, -T, -y/-yy, -k and -v.\n\
                            Without -T the log has no times; without -k no call sites; without -f one process:\n\
                            the report says what the log lacked. The report goes to stdout.")]
    Analyze {
        /// The log: a file, `-` for stdin, or the PATH of a -ff set (PATH.PID files)
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
        /// Count only these syscalls, as strace: trace=open,read  trace=%file  trace=!write
        #[arg(short = 'e', value_name = "EXPR")]
        expr: Option<String>,
        #[command(flatten)]
        out: OutputArgs,
        /// Break the counts down per process and per thread
        #[arg(long)]
        per_thread: bool,
        /// Write the call sites (-k stacks) as folded stacks
        #[arg(long, value_name = "FILE")]
        folded: Option<PathBuf>,
        /// Write the call sites (-k stacks) as a flame graph SVG
        #[arg(long, value_name = "FILE.svg")]
        flamegraph: Option<PathBuf>,
        /// What the folded stacks and the flame graph weigh: calls, or time
        #[arg(long, value_enum, default_value = "count", value_name = "WHAT")]
        weight: WeightArg,
        /// Report small findings too (a few calls, under 1% of the run)
        #[arg(long)]
        all: bool,
    },
    /// Measure a fix: the command against variants, untraced, interleaved, with statistics
    #[command(after_help = "Examples:\n  sysdiet compare --env TZ=:/etc/localtime -- ./timeloop localtime 1000000\n  \
                            sysdiet compare --vs './app --buffered' -- ./app\n  \
                            sysdiet compare --runs 20 --warmup 3 --check-output --export-markdown result.md --env PYTHONUNBUFFERED= -- python3 job.py\n\n\
                            Timing runs are untraced; one more traced run of each variant gives the syscall diff.\n\
                            Exit status 1 when --check-output finds a variant whose output differs.")]
    Compare {
        #[command(flatten)]
        args: CompareArgs,
        #[command(flatten)]
        out: OutputArgs,
    },
    /// What changed between two saved runs (run --json documents or strace logs), and limits for CI
    #[command(after_help = "Examples:\n  sysdiet diff base.json new.json\n  \
                            sysdiet diff --max-increase 10% --fail-on-new-findings main.json branch.json\n  \
                            sysdiet diff --markdown -o comment.md base.strace new.strace\n  \
                            sysdiet diff --ignore /usr/lib/* --ignore clock_gettime base.json new.json\n\n\
                            BASE and NEW: what sysdiet run --json wrote, or a log of strace -f -o FILE.\n\
                            Exit status 3 when a limit broke (each said in one line), 0 otherwise.")]
    Diff {
        /// The baseline
        #[arg(value_name = "BASE")]
        base: PathBuf,
        /// The run judged against it
        #[arg(value_name = "NEW")]
        new: PathBuf,
        /// A limit: no syscall's calls, nor the total, may grow by more than PCT (10%)
        #[arg(long, value_name = "PCT", value_parser = sysdiet::compare::gate::parse_percent)]
        max_increase: Option<f64>,
        /// Rows with fewer calls than N on both sides are not judged
        #[arg(long, value_name = "N", default_value_t = 0)]
        min_calls: u64,
        /// A limit: NEW may have no finding BASE has not
        #[arg(long)]
        fail_on_new_findings: bool,
        /// Leave a syscall (a name) or a path (a glob with a /) out of both sides; repeatable
        #[arg(long, value_name = "SYSCALL|PATH-GLOB")]
        ignore: Vec<String>,
        /// Write the diff as Markdown (a pull-request comment)
        #[arg(long, conflicts_with = "json")]
        markdown: bool,
        #[command(flatten)]
        out: OutputArgs,
    },
    /// What each time and signal call costs on this host, in time and in syscalls
    #[command(after_help = "Examples:\n  sysdiet bench\n  \
                            sysdiet bench --only localtime,localtime_r --threads 1,2,4 --svg scaling.svg\n  \
                            sysdiet bench --only none,localtime,gettimeofday --iterations 1000000\n  \
                            sysdiet bench --json -o bench.json\n\n\
                            Each loop calls one function in a loop, in a process of its own.\n\
                            Syscalls per call are counted with BPF (as root); without the rights, only times are shown.\n\
                            The table goes to stdout; Ctrl-C prints what was measured so far.")]
    Bench {
        #[command(flatten)]
        args: BenchArgs,
        #[command(flatten)]
        out: OutputArgs,
    },
    /// Runs one bench loop (sysdiet bench starts these itself)
    #[command(name = "__bench-worker", hide = true)]
    BenchWorker {
        #[arg(allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Runs a command with empty syscall hooks attached (bench/overhead's floor)
    #[command(name = "__floor", hide = true)]
    Floor {
        /// enter, exit or both
        #[arg(long, value_parser = ["enter", "exit", "both"])]
        hooks: String,
        /// Each hook reads the clock: the floor of timing every call
        #[arg(long)]
        clock: bool,
        /// sys_exit reads each call's path: the floor of counting per path
        #[arg(long)]
        paths: bool,
        /// sys_exit finds the thread's state in task storage first: the
        /// floor of keeping per-thread state there
        #[arg(long, conflicts_with = "state_by_pid")]
        state: bool,
        /// sys_exit finds the thread's state in an array indexed by its
        /// id instead: the floor of per-thread state without a helper call
        #[arg(long)]
        state_by_pid: bool,
        /// sys_exit counts each path call in a word of a table of WORDS
        /// (a power of two; 2048, 16 KiB, by default) picked by a hash of its
        /// key: the floor of counting each path in the kernel
        #[arg(long, requires = "paths", value_name = "WORDS", num_args = 0..=1, default_missing_value = "2048", value_parser = parse_table_words)]
        keys: Option<u32>,
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        command: Vec<OsString>,
    },
    /// Loads the tracer's programs and prints what the verifier went through
    /// for each (tests/scale.rs bounds sys_exit's)
    #[command(name = "__programs", hide = true)]
    Programs {
        #[arg(long)]
        no_stacks: bool,
        #[arg(long)]
        latency: bool,
        #[arg(long)]
        system_wide: bool,
        /// Writes libbpf's messages and the verifier's whole log (each
        /// instruction it went over, its state at each branch) to this file
        #[arg(long, value_name = "FILE")]
        log: Option<std::path::PathBuf>,
    },
    /// Keeps a run's loaded programs for the next run (started by a run,
    /// not by hand; SYSDIET_KEEP in the README)
    #[command(name = "__keep", hide = true)]
    Keep {
        set: String,
        seconds: u64,
        syscall_ns: u64,
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        given: Vec<String>,
    },
    /// Print a shell's completion script for sysdiet
    #[command(after_help = "Examples:\n  sysdiet completions bash > /usr/share/bash-completion/completions/sysdiet\n  \
                            sysdiet completions zsh > /usr/local/share/zsh/site-functions/_sysdiet\n  \
                            sysdiet completions fish > ~/.config/fish/completions/sysdiet.fish\n\n\
                            `make install` puts them in place, with the man page.")]
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Write the man pages (sysdiet.1, sysdiet-run.1, ...) to DIR (make install does)
    #[command(name = "__man", hide = true)]
    Man { dir: PathBuf },
    /// Live, system-wide: which programs make avoidable syscalls right now
    #[command(after_help = "Examples:\n  sysdiet top\n  \
                            sysdiet top --cgroup nginx.service --interval 5s\n  \
                            sysdiet top --once --json > window.json\n  \
                            sysdiet top --iterations 10 > top.log        # batch mode, as top -b\n\n\
                            Keys: s sort (waste, calls/s, errors/s, name), / filter, space pause, up/down select, q quit.\n\
                            A row is a program (comm) in a unit (its cgroup); its processes, alive or gone, count together.\n\
                            WASTE is the CPU the row's findings' calls cost, as a share of one CPU.\n\
                            Without a terminal on stdout, each window is printed as a table.")]
    Top {
        #[command(flatten)]
        host: HostArgs,
        /// How often the screen is refreshed: 2s, 500ms
        #[arg(long, default_value = "2s", value_parser = parse_duration, value_name = "TIME")]
        interval: Duration,
        /// What rates and findings are over: a sliding window of the last TIME
        /// (whole intervals), moving one interval at a time [default: the interval]
        #[arg(long, value_parser = parse_duration, value_name = "TIME")]
        window: Option<Duration>,
        /// Print one window (one interval) and exit (= --iterations 1)
        #[arg(long)]
        once: bool,
        /// Print this many windows and exit
        #[arg(short = 'n', long, value_name = "N")]
        iterations: Option<u64>,
        /// Print windows as JSON (docs/json.md, `window`) instead of tables
        #[arg(long)]
        json: bool,
    },
    /// Serve the host's syscalls and findings to Prometheus (/metrics)
    #[command(after_help = "Examples:\n  sysdiet serve\n  \
                            sysdiet serve --listen 0.0.0.0:9464 --interval 15s\n  \
                            curl -s localhost:9464/metrics | grep finding\n\n\
                            /metrics is refreshed once per window; /window.json is the last window as `top --json` prints it.\n\
                            Labels are unit, program, syscall and rule, never pids or paths. docs/metrics.md lists every metric;\n\
                            deploy/ has a systemd unit, a Kubernetes DaemonSet, alert rules and a Grafana dashboard.")]
    Serve {
        #[command(flatten)]
        host: HostArgs,
        /// Where to listen: ADDR:PORT (loopback unless told otherwise)
        #[arg(long, default_value = "127.0.0.1:9464", value_name = "ADDR:PORT")]
        listen: String,
        /// Length of a window: how often the metrics change
        #[arg(long, default_value = "10s", value_parser = parse_duration, value_name = "TIME")]
        interval: Duration,
        /// Turn kernel.bpf_stats_enabled on while serving, for sysdiet_bpf_run_seconds
        /// (it costs every BPF program on the host two clock reads per run)
        #[arg(long)]
        bpf_stats: bool,
    },
    /// Audit the host without running anything: clocksource, TZ, processes without TZ
    #[command(after_help = "Examples:\n  sysdiet check\n  sysdiet check --sample 5s\n\n\
                            Lists the processes that have no TZ, with the fix for each (a systemd drop-in for services).\n\
                            --sample counts their lookups of /etc/localtime with BPF; nothing is stopped.")]
    Check {
        #[command(flatten)]
        args: CheckArgs,
    },
}

/// What `top` and `serve` take: which programs, which syscalls.
#[derive(Args, Debug, Clone)]
pub struct HostArgs {
    /// Only programs with one of these processes (comma-separated or repeated)
    #[arg(short = 'p', long = "pid", value_delimiter = ',', value_name = "PID")]
    pub pids: Vec<u32>,
    /// Only programs in this unit (nginx.service) or under this cgroup path (/system.slice)
    #[arg(long, value_name = "UNIT|PATH")]
    pub cgroup: Option<String>,
    /// Count only these syscalls, as strace: trace=%file  trace=!write
    #[arg(short = 'e', value_name = "EXPR")]
    pub expr: Option<String>,
    /// Show small findings too (a few calls, under 1% of the window)
    #[arg(long)]
    pub all: bool,
}

/// What `sysdiet compare` takes (besides where to write).
#[derive(Args, Debug, Clone)]
pub struct CompareArgs {
    /// A variant with this environment variable set (repeatable; all of them form one variant)
    #[arg(long = "env", value_name = "NAME=VALUE")]
    pub env: Vec<String>,
    /// ... or with this variable removed (repeatable)
    #[arg(long = "unset-env", value_name = "NAME")]
    pub unset_env: Vec<String>,
    /// A variant that is another command line (repeatable)
    #[arg(long = "vs", value_name = "'CMD'")]
    pub vs: Vec<String>,
    /// Timed runs per variant
    #[arg(long, default_value_t = 10)]
    pub runs: usize,
    /// Untimed runs per variant first
    #[arg(long, default_value_t = 1)]
    pub warmup: usize,
    /// Fail when a variant's stdout differs from the baseline's
    #[arg(long)]
    pub check_output: bool,
    /// Replace matches of REGEX in outputs before comparing them (repeatable)
    #[arg(long, value_name = "REGEX")]
    pub normalize: Vec<String>,
    /// Go on when the command exits non-zero
    #[arg(long)]
    pub ignore_failure: bool,
    /// Skip the traced runs (no syscall diff)
    #[arg(long)]
    pub no_trace: bool,
    #[command(flatten)]
    pub export: ExportArgs,
    /// The baseline command
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true, value_name = "COMMAND")]
    pub command: Vec<OsString>,
}

/// hyperfine's exports: the result in another format, besides the main output.
#[derive(Args, Debug, Clone)]
pub struct ExportArgs {
    /// Also write the result as JSON to FILE (`-`: stdout)
    #[arg(long, value_name = "FILE")]
    pub export_json: Option<PathBuf>,
    /// Also write the result as a Markdown table to FILE (`-`: stdout)
    #[arg(long, value_name = "FILE")]
    pub export_markdown: Option<PathBuf>,
}

/// What `sysdiet bench` takes (besides where to write).
#[derive(Args, Debug, Clone)]
pub struct BenchArgs {
    /// Only these loops: names (every variant) or name:variant ids, comma-separated
    #[arg(long, value_delimiter = ',', value_name = "LOOPS")]
    pub only: Option<Vec<String>>,
    /// Run each loop from this many threads at once, for each count given
    #[arg(long, value_delimiter = ',', default_value = "1", value_name = "LIST")]
    pub threads: Vec<usize>,
    /// Calls per thread in each run (default: enough for ~40 ms a run)
    #[arg(long, value_name = "N")]
    pub iterations: Option<u64>,
    /// Timed runs per loop and thread count
    #[arg(long, default_value_t = 5)]
    pub runs: usize,
    /// Also plot ns per call (by loop, or by thread count) as an SVG
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    #[command(flatten)]
    pub export: ExportArgs,
    /// List the loops and exit
    #[arg(long)]
    pub list: bool,
}

#[derive(Args, Debug, Clone)]
pub struct CheckArgs {
    /// Also count, for this long, how often each process without TZ stats the zone file
    #[arg(long, value_parser = parse_duration, value_name = "TIME")]
    pub sample: Option<Duration>,
    #[command(flatten)]
    pub out: OutputArgs,
}

/// Where and how a report is written: every command takes these.
#[derive(Args, Debug, Clone)]
pub struct OutputArgs {
    /// Write the result as JSON (schema: docs/json.md)
    #[arg(long)]
    pub json: bool,
    /// Write it to FILE (`-`: stdout) instead of stderr (run, attach) or stdout (analyze, check, compare, bench)
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
}

#[derive(Args, Debug, Clone)]
pub struct ReportArgs {
    /// Count only these syscalls, as strace: trace=open,read  trace=%file  trace=!write  trace=/^rt_
    #[arg(short = 'e', value_name = "EXPR")]
    pub expr: Option<String>,
    #[command(flatten)]
    pub out: OutputArgs,
    /// Break the counts down per process and per thread
    #[arg(long)]
    pub per_thread: bool,
    /// Write the call sites as folded stacks (flamegraph.pl, inferno, speedscope)
    #[arg(long, value_name = "FILE")]
    pub folded: Option<PathBuf>,
    /// Write the call sites as a flame graph SVG
    #[arg(long, value_name = "FILE.svg")]
    pub flamegraph: Option<PathBuf>,
    /// What the folded stacks and the flame graph weigh: calls, or time in the kernel
    #[arg(long, value_enum, default_value = "count", value_name = "WHAT")]
    pub weight: WeightArg,
    /// Count only: take no stack samples, find no call sites
    #[arg(long)]
    pub no_stacks: bool,
    /// Measure every call's wall time, entry to exit, like strace -c -w (a
    /// second hook: costs more); by default syscall time is CPU time, sampled
    #[arg(long)]
    pub latency: bool,
    /// Report small findings too (a few calls, under 1% of the run)
    #[arg(long)]
    pub all: bool,
    /// Who counts: BPF (root, CAP_BPF), ptrace (anyone who may trace the
    /// program; slower), or auto: BPF when it loads, else ptrace
    #[arg(long, value_enum, default_value = "auto", value_name = "WHICH")]
    pub backend: BackendArg,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy)]
pub enum BackendArg {
    Auto,
    Bpf,
    Ptrace,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy)]
pub enum WeightArg {
    Count,
    Time,
}

/// A table's size in words: a power of two, at most 2^24 (128 MiB).
fn parse_table_words(s: &str) -> Result<u32, String> {
    match s.parse::<u32>() {
        Ok(n) if n.is_power_of_two() && n <= 1 << 24 => Ok(n),
        _ => Err(format!("{s} is not a power of two up to 16777216 (words of 8 bytes)")),
    }
}

pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: f64 = num.parse().map_err(|_| format!("`{s}` is not a duration: try 30s, 500ms, 2m"))?;
    let secs = match unit {
        "" | "s" => n,
        "ms" => n / 1e3,
        "us" | "µs" => n / 1e6,
        "m" | "min" => n * 60.0,
        "h" => n * 3600.0,
        _ => return Err(format!("unknown unit `{unit}` in `{s}`: use ms, s, m or h")),
    };
    if !secs.is_finite() || secs <= 0.0 {
        return Err(format!("`{s}`: a duration must be positive"));
    }
    // Beyond what a Duration holds (~585 billion years) is a typo, not a wait.
    Duration::try_from_secs_f64(secs).map_err(|_| format!("`{s}` is too long: give at most a few years"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("1.5").unwrap(), Duration::from_millis(1500));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("5y").is_err());
        assert!(parse_duration("0").is_err());
        assert!(parse_duration("18446744073709551616").unwrap_err().contains("too long"));
        assert!(parse_duration("5124095576030432h").unwrap_err().contains("too long"));
    }
}
