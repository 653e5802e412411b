//! Errors for humans: each says what went wrong and what to do, in one line.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Usage(String),

    #[error("{0}: command not found (check the name, or give a path like ./{0})")]
    CommandNotFound(String),

    #[error("{0}: no such file (check the path)")]
    NoSuchFile(String),

    #[error("{0}: permission denied: not executable (chmod +x it, or run it through its interpreter)")]
    NotExecutable(String),

    #[error("{0}: is a directory, not a program")]
    IsADirectory(String),

    #[error("cannot execute {name}: {source}")]
    Exec { name: String, source: std::io::Error },

    #[error("no process with pid {0}: it has exited or never existed (see `ps -e`)")]
    NoSuchProcess(u32),

    #[error("pid {pid} is a kernel thread ({name}): it makes no syscalls from user space; attach to a process (see `ps -e`)")]
    KernelThread { pid: u32, name: String },

    #[error("cannot trace thread {tid} of pid {pid}: this kernel cannot open a pidfd for a thread (Linux 6.9 or newer can); attach to a single-threaded process, or use `sysdiet run`")]
    ThreadUnreachable { pid: u32, tid: u32 },

    #[error("cannot ptrace pid {0}: not permitted (it is another user's, or kernel.yama.ptrace_scope forbids it, or a debugger holds it); run as its user or as root")]
    NoPtraceRights(u32),

    #[error("no rights to load BPF programs: sysdiet needs CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN); run it as root or with sudo")]
    NoBpfRights,

    #[error("the kernel refused sysdiet's perf events ({what}): kernel.perf_event_paranoid is {level}, at which Debian's kernels open them for CAP_SYS_ADMIN only; run it as root with every capability, or `sysctl kernel.perf_event_paranoid=2`, or (run, attach) count with none: `--no-stacks --latency`")]
    PerfEventsRestricted { what: &'static str, level: i32 },

    #[error("this kernel ({release}) has no BTF ({} is missing): sysdiet's BPF tracer needs a kernel built with CONFIG_DEBUG_INFO_BTF=y", path.display())]
    NoBtf { release: String, path: PathBuf },

    #[error("this kernel ({release}) has no {feature}, which sysdiet's BPF tracer needs (Linux {since} has it)")]
    KernelLacks { release: String, feature: &'static str, since: &'static str },

    #[error("loading the BPF tracer failed: {0} (run with SYSDIET_DEBUG=1 to see libbpf's log)")]
    Bpf(String),

    #[error("variant {label} ({}) exited with status {status}: fix it, or pass --ignore-failure to compare anyway", if change.is_empty() { "the baseline" } else { change.as_str() })]
    VariantFailed { label: String, change: String, status: i32 },

    #[error("the bench loop {bench_loop} failed ({how}): this is a bug in sysdiet, please report it")]
    LoopFailed { bench_loop: String, how: String },

    #[error("interrupted by signal {signal} before the command started: it was not run")]
    NotStarted { signal: i32 },

    #[error("interrupted by signal {signal} before every variant ran once: nothing to compare")]
    Interrupted { signal: i32 },

    /// A strace log that cannot be read as one.
    #[error("{path}: {why}")]
    Log { path: String, why: String },

    #[error("{path}: {source}")]
    File { path: PathBuf, source: std::io::Error },

    #[error("a whole host is watched with BPF only, and {0}")]
    HostNeedsBpf(String),

    #[error("cannot listen on {addr}: {why} (pick another port with --listen ADDR:PORT)")]
    Listen { addr: String, why: String },

    #[error("{0}")]
    Io(#[from] std::io::Error),
}

impl Error {
    /// The exit status sysdiet ends with: the shell's 126/127 for commands
    /// that cannot run, 2 for bad usage, 1 for everything else.
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::CommandNotFound(_) | Error::NoSuchFile(_) => 127,
            Error::Exec { source, .. } if source.kind() == std::io::ErrorKind::NotFound => 127,
            Error::NotExecutable(_) | Error::IsADirectory(_) | Error::Exec { .. } => 126,
            Error::Usage(_) => 2,
            Error::NotStarted { signal } | Error::Interrupted { signal } => 128 + signal,
            _ => 1,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
