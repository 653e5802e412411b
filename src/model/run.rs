//! What a run was: its command, times, environment, and how it ended.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct RunInfo {
    /// The command as given (`run`), empty for `attach`.
    pub command: Vec<String>,
    /// The processes tracing started from: the command, or the attached pids.
    pub root_pids: Vec<u32>,
    pub backend: String,
    /// Which BPF programs counted: "current" (Linux 5.17 and newer),
    /// "bounded" (5.15 and 5.16) or "legacy" (5.8 to 5.14); absent without
    /// BPF.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bpf_programs: Option<String>,
    /// The BPF programs came loaded and verified from a keeper, a previous
    /// run's (SYSDIET_KEEP): this run's set-up did not load them.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub bpf_programs_kept: bool,
    /// Why sysdiet chose this backend by itself (`--backend auto` when BPF
    /// could not load): "no rights to load BPF".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback: Option<String>,
    /// `-e trace=...` as given, when not everything was counted.
    pub filter: Option<String>,
    /// Unix time (seconds) when counting started.
    pub started_at: f64,
    /// From the first counted syscall to the end of tracing.
    pub duration_ns: u64,
    /// How the command ended (`run` only).
    pub exit: Option<Exit>,
    /// Tracing stopped before the command ended (Ctrl-C, --duration).
    pub interrupted: bool,
    /// sysdiet's own cost: from its start to the probes being armed, and
    /// from the command's end to this Trace being read out of the kernel.
    pub setup_ns: u64,
    pub readout_ns: u64,
    /// What the syscalls' time is.
    #[serde(default)]
    pub time: TimeKind,
    /// The traced tasks' CPU time outside syscalls, sampled like syscall
    /// time (0 with --latency, which does not sample).
    #[serde(default)]
    pub user_cpu_ns: u64,
    pub environment: Environment,
    /// What a strace log held and lacked (`analyze` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log: Option<LogFacts>,
    /// What one syscall's round trip costs on this host untraced (the
    /// fastest of 5 batches of getppid, before the probes were armed), in
    /// ns: the least each call a fix removes saves. BPF backend only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub syscall_ns: Option<u64>,
    /// A cold start of `run --backend auto`: ptrace counted the command's
    /// first calls while the BPF programs loaded, then handed each thread
    /// to BPF between two of its calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ptrace_first: Option<PtraceFirst>,
}

/// How a run began under ptrace and went on under BPF.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
pub struct PtraceFirst {
    /// From the command's start to the last thread handed to BPF.
    pub ns: u64,
    /// The calls ptrace counted. Their times are left out: the syscalls'
    /// times are BPF's measure (`time`), which ptrace's is not.
    pub calls: u64,
    /// Threads handed to BPF.
    pub threads_handed: u64,
    /// Threads BPF could not take (no thread pidfd before Linux 6.9):
    /// ptrace counted them to their end.
    pub threads_kept: u64,
}

/// What `sysdiet analyze` read, and what the log could not tell.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct LogFacts {
    /// The files read (a `-ff` set is several).
    pub paths: Vec<String>,
    pub files: u64,
    pub lines: u64,
    /// Calls read, whole or joined from `<unfinished ...>` and `resumed`.
    pub calls: u64,
    /// Lines with a pid (`-f`): without, the log is one process.
    pub follow_forks: bool,
    pub timestamps: bool,
    /// `-T`: each call's time.
    pub durations: bool,
    /// `-k`: each call's stack.
    pub stacks: bool,
    /// execve showed the environment (`-v`).
    pub environment: bool,
    pub signals: u64,
    /// Lines that are not strace's (a program's own output mixed in), and
    /// the first of them.
    pub unparsed: u64,
    pub first_unparsed: Option<u64>,
    /// The log ends in the middle: a cut last line, or calls begun that
    /// never ended and no exit after them.
    pub incomplete: bool,
    pub unfinished: u64,
    /// The first process has no exit line: the log was cut at a line's
    /// end, or strace detached from it (`-p`).
    #[serde(default)]
    pub ends_before_exit: bool,
    /// Calls whose argument key found no room (counted, not keyed).
    pub keys_full: u64,
    /// strace's own messages (`strace: Process N attached`), the first few.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub messages: Vec<String>,
}

/// What `total_ns` and the other times of a Trace measure.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TimeKind {
    /// CPU time in the kernel, sampled: a timer tick every `tick_ns` on each
    /// CPU is charged to the syscall the traced thread it interrupts is in
    /// (`strace -c`'s "system time"). Blocked time counts nothing.
    CpuSampled {
        tick_ns: u64,
        /// A finer tick, every `fine_tick_ns`, in the run's first
        /// `fine_for_ns` (0: `tick_ns` throughout).
        #[serde(default, skip_serializing_if = "super::is_zero")]
        fine_tick_ns: u64,
        #[serde(default, skip_serializing_if = "super::is_zero")]
        fine_for_ns: u64,
        /// Then a tick every `middle_tick_ns`, until `middle_until_ns` into
        /// the run, before `tick_ns` (0: none).
        #[serde(default, skip_serializing_if = "super::is_zero")]
        middle_tick_ns: u64,
        #[serde(default, skip_serializing_if = "super::is_zero")]
        middle_until_ns: u64,
    },
    /// Wall time from entry to exit of every call, measured (`strace -c -w`).
    #[default]
    Wall,
    /// Not known: a strace log without `-T`. Every time is 0.
    Unmeasured,
}

impl TimeKind {
    /// CPU time sampled by one tick of `tick_ns` throughout the run.
    pub fn sampled_every(tick_ns: u64) -> TimeKind {
        TimeKind::CpuSampled { tick_ns, fine_tick_ns: 0, fine_for_ns: 0, middle_tick_ns: 0, middle_until_ns: 0 }
    }
}

/// Facts about the target's environment that rules need.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Environment {
    /// `TZ` as the command saw it, `None` when unset.
    pub tz: Option<String>,
    pub clocksource: Option<String>,
    /// The clocksources this host could switch to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub available_clocksources: Vec<String>,
    /// Variables of the command's environment that rules know the effect
    /// of (buffering, the allocator), those that were set.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub knobs: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Exit {
    Code { code: i32 },
    Signal { signal: i32, core_dumped: bool },
}

impl Exit {
    /// The status a shell would report: the code, or 128 + the signal.
    pub fn shell_status(self) -> i32 {
        match self {
            Exit::Code { code } => code,
            Exit::Signal { signal, .. } => 128 + signal,
        }
    }

    /// Decodes a wait(2) status word.
    pub fn from_wait_status(status: i32) -> Exit {
        if libc::WIFSIGNALED(status) {
            Exit::Signal { signal: libc::WTERMSIG(status), core_dumped: libc::WCOREDUMP(status) }
        } else {
            Exit::Code { code: libc::WEXITSTATUS(status) }
        }
    }
}
