//! The Trace: what a traced run did, as plain data. Tracers fill it, rules
//! read it, renderers print it. No I/O here.

pub mod builder;
pub mod callsite;
mod histogram;
pub mod window;

pub use callsite::{in_c_runtime, CallSite, Frame, Sampling, SiteShare};
pub use histogram::Histogram;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use crate::linux::arch;

/// Bumped whenever the JSON shape changes incompatibly (docs/json.md).
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Trace {
    pub run: RunInfo,
    /// What went unseen; all zero when the counts are complete.
    pub lost: Lost,
    /// Totals per syscall over every process and thread, most time first.
    pub syscalls: Vec<SyscallStats>,
    pub processes: Vec<Process>,
    /// Per (process, syscall, argument): the repeated calls.
    pub arguments: Vec<ArgumentStats>,
    /// The code that made the calls; `sites` fields index into this.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub call_sites: Vec<CallSite>,
    /// Calls whose argument key (path, fd, ...) was seen only once, per
    /// syscall: a file-tree walk's paths, summarised, not listed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub one_shot: Vec<OneShot>,
    /// How stacks were sampled; `None` when they were not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampling: Option<Sampling>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct RunInfo {
    /// The command as given (`run`), empty for `attach`.
    pub command: Vec<String>,
    /// The processes tracing started from: the command, or the attached pids.
    pub root_pids: Vec<u32>,
    pub backend: String,
    /// Which BPF programs counted: "current" (Linux 5.17 and newer) or
    /// "legacy" (5.8 to 5.16); absent without BPF.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bpf_programs: Option<String>,
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
    CpuSampled { tick_ns: u64 },
    /// Wall time from entry to exit of every call, measured (`strace -c -w`).
    #[default]
    Wall,
    /// Not known: a strace log without `-T`. Every time is 0.
    Unmeasured,
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

/// What went unseen. Each counter is in calls unless its doc says otherwise;
/// all zero when everything was counted.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
pub struct Lost {
    /// New tasks of a target left untraced: no memory for their state (tasks).
    pub tasks_untraced: u64,
    /// Calls of exited threads that could not be handed over (ring buffer full).
    pub exit_records: u64,
    /// Calls of repeated arguments with no room in the argument table.
    pub argument_table_full: u64,
    /// Calls whose argument entry could not be allocated.
    pub argument_alloc_failed: u64,
    /// Calls summarised as one-shot without checking for repeats: the table
    /// of keys seen once was full.
    pub once_table_full: u64,
    /// Failed calls whose errno was not kept.
    pub errno_table_full: u64,
    /// Calls whose path could not be read from the target's memory.
    pub path_unreadable: u64,
    /// Calls whose path was longer than sysdiet keeps (255 bytes), shown cut.
    pub path_truncated: u64,
    /// Repeated paths whose string had no room: they show with no path (keys).
    pub path_strings: u64,
    /// Calls made through the 32-bit entry (i386's `int 0x80`, AArch32):
    /// not counted under the native table's names.
    pub compat_syscalls: u64,
    /// Calls with a number beyond the native table (x32 on x86-64).
    pub syscall_nr_out_of_range: u64,
    /// Stack samples dropped because sysdiet read them too slowly (samples).
    #[serde(default)]
    pub samples_dropped: u64,
    /// Calls of repeated read/write keys whose byte-count histogram had no room.
    #[serde(default)]
    pub histogram_table_full: u64,
    /// Processes whose environment at exec was not seen (ring buffer
    /// full): rules read sysdiet's view of it for them (processes).
    #[serde(default)]
    pub environments: u64,
    /// Calls of ended processes' repeated arguments that top/serve kept no
    /// key for: their program (or all programs) had their budget of keys
    /// already. Their syscalls' counts have them.
    #[serde(default)]
    pub argument_keys_over_budget: u64,
}

impl Lost {
    /// (what, count) of every non-zero counter, for reports: `what` agrees
    /// with the count ("1 call", "2 calls").
    pub fn nonzero(&self) -> Vec<(&'static str, u64)> {
        [
            (("task untraced: no memory for its state", "tasks untraced: no memory for their state"), self.tasks_untraced),
            (("call of exited threads lost: ring buffer full", "calls of exited threads lost: ring buffer full"), self.exit_records),
            (("call without argument stats: table full", "calls without argument stats: table full"), self.argument_table_full),
            (("call without argument stats: allocation failed", "calls without argument stats: allocation failed"), self.argument_alloc_failed),
            (("call not checked for repeats: one-shot table full", "calls not checked for repeats: one-shot table full"), self.once_table_full),
            (("failed call without errno: table full", "failed calls without errno: table full"), self.errno_table_full),
            (("call with an unreadable path", "calls with unreadable paths"), self.path_unreadable),
            (("call with a path cut at 255 bytes", "calls with paths cut at 255 bytes"), self.path_truncated),
            (("repeated path without its string: table full", "repeated paths without their string: table full"), self.path_strings),
            (arch::COMPAT_NOT_COUNTED, self.compat_syscalls),
            (arch::UNKNOWN_NR_NOT_COUNTED, self.syscall_nr_out_of_range),
            (("stack sample dropped: ring buffer full", "stack samples dropped: ring buffer full"), self.samples_dropped),
            (("call without byte-count histograms: table full", "calls without byte-count histograms: table full"), self.histogram_table_full),
            (
                (
                    "process whose exec (environment, file) was not seen: ring buffer full",
                    "processes whose exec (environment, file) was not seen: ring buffer full",
                ),
                self.environments,
            ),
            (
                (
                    "call without argument stats: its program's key budget was spent",
                    "calls without argument stats: their program's key budget was spent",
                ),
                self.argument_keys_over_budget,
            ),
        ]
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .map(|((one, many), n)| (if n == 1 { one } else { many }, n))
        .collect()
    }

    /// Every counter, zero ones too, by its JSON name: through the JSON
    /// form, so that a new counter cannot be forgotten.
    pub fn by_name(&self) -> Vec<(String, u64)> {
        match serde_json::to_value(self) {
            Ok(serde_json::Value::Object(m)) => m.into_iter().map(|(k, v)| (k, v.as_u64().unwrap_or(0))).collect(),
            _ => Vec::new(),
        }
    }

    /// Each counter as `f` makes it of this and `other`'s.
    fn each(&self, other: &Lost, f: impl Fn(u64, u64) -> u64) -> Lost {
        let theirs: std::collections::HashMap<String, u64> = other.by_name().into_iter().collect();
        let fields = self.by_name().into_iter().map(|(k, v)| {
            let n = f(v, theirs.get(&k).copied().unwrap_or(0));
            (k, serde_json::Value::from(n))
        });
        serde_json::from_value(serde_json::Value::Object(fields.collect())).unwrap_or_default()
    }

    /// What was lost since `before` (running totals).
    pub fn since(&self, before: &Lost) -> Lost {
        self.each(before, u64::saturating_sub)
    }

    /// The larger of each counter.
    pub fn largest(&self, other: &Lost) -> Lost {
        self.each(other, u64::max)
    }

    /// Lost counters that make call counts incomplete (not just details).
    pub fn counts_incomplete(&self) -> bool {
        self.tasks_untraced + self.exit_records + self.compat_syscalls + self.syscall_nr_out_of_range > 0
    }

    /// Lost counters that make per-argument stats incomplete: findings that
    /// read arguments (repeated paths, tiny I/O, ...) may be missing.
    pub fn arguments_incomplete(&self) -> bool {
        self.counts_incomplete()
            || self.argument_table_full
                + self.argument_alloc_failed
                + self.once_table_full
                + self.path_strings
                + self.histogram_table_full
                + self.argument_keys_over_budget
                > 0
    }
}

/// The calls of one syscall whose argument was seen once only.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct OneShot {
    pub syscall: String,
    pub nr: u32,
    /// Distinct arguments, each called once.
    pub calls: u64,
    pub errors: u64,
    pub total_ns: u64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct SyscallStats {
    pub name: String,
    pub nr: u32,
    pub calls: u64,
    pub errors: u64,
    /// Time in the kernel (see `RunInfo::time`); exit and exit_group count none.
    pub total_ns: u64,
    /// The shortest and longest call: measured with --latency; with sampled
    /// time, min is 0 and max the most ticks one call took.
    pub min_ns: u64,
    pub max_ns: u64,
    /// errno name (ENOENT, ...) -> count.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub errnos: BTreeMap<String, u64>,
    /// The call sites that made these calls, most calls first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sites: Vec<SiteShare>,
}

impl SyscallStats {
    pub fn new(nr: u32) -> SyscallStats {
        SyscallStats { name: crate::linux::syscalls::name(nr), nr, ..Default::default() }
    }

    /// Adds `other`'s counts (same syscall) into this one.
    pub fn merge(&mut self, other: &SyscallStats) {
        if other.calls == 0 {
            return;
        }
        if self.calls == 0 || other.min_ns < self.min_ns {
            self.min_ns = other.min_ns;
        }
        self.calls += other.calls;
        self.errors += other.errors;
        self.total_ns += other.total_ns;
        self.max_ns = self.max_ns.max(other.max_ns);
        for (e, n) in &other.errnos {
            *self.errnos.entry(e.clone()).or_default() += n;
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Process {
    /// The pid; for a folded row, an id above any pid (2^30 and up).
    pub pid: u32,
    pub ppid: u32,
    pub comm: String,
    pub exit: Option<Exit>,
    /// A row that stands for this many exited processes of one program,
    /// folded together to keep memory bounded (0: one process).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub folded: u64,
    /// Its cgroup v2 id (the directory's inode under the cgroup2 mount);
    /// absent when not known.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cgroup: u64,
    /// The file it runs (its /proc/PID/exe while it lived, else the name
    /// exec was given); absent when not known (ptrace, strace logs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executable: Option<String>,
    /// `TZ` and the knobs rules read, from the process's own environment at
    /// its exec (`tz` null: unset); absent when not known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<Environment>,
    /// This process's syscalls, all threads together, most time first.
    pub syscalls: Vec<SyscallStats>,
    pub threads: Vec<Thread>,
}

/// One process's part of a finding about a program.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
pub struct ProcessShare {
    pub pid: u32,
    pub calls: u64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Thread {
    pub tid: u32,
    pub comm: String,
    pub syscalls: Vec<SyscallStats>,
}

/// What identifies one call's argument.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord, Hash, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Argument {
    /// A path (None when it could not be read, or was NULL); `dirfd` for
    /// `*at` calls not relative to the working directory.
    Path {
        path: Option<String>,
        dirfd: Option<i64>,
        /// The argument was NULL, which some calls take for "the file of
        /// `dirfd`" (futimens is utimensat(fd, NULL)): not a lost path.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        null: bool,
        /// The path was longer than sysdiet reads (255 bytes): `path` is
        /// its beginning, and paths that begin alike count together.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        cut: bool,
        /// The path's exact bytes when they are not UTF-8 (`path` then has
        /// U+FFFD in place of each byte that is not).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        raw: Option<Vec<u8>>,
    },
    Fd {
        fd: i64,
    },
    /// clock_gettime's clock id (CLOCK_MONOTONIC = 1, ...).
    Clock {
        clock: i64,
    },
    /// poll/epoll_wait/ppoll/select: the kind of timeout.
    Timeout {
        timeout: Timeout,
    },
    /// rt_sigprocmask: what the call did to the mask it found.
    SigMask {
        change: MaskChange,
    },
    /// brk: which way the call moved the end of the heap.
    Brk {
        change: BrkChange,
    },
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord, Hash, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Timeout {
    /// Returns at once: a poll that never waits.
    Zero,
    Finite,
    /// Waits until something happens.
    None,
    Unreadable,
    /// Zero, or a finite timeout that ran out: select, pselect6 and ppoll
    /// write the time left back, and sampled mode reads it at exit.
    RanOut,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord, Hash, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum MaskChange {
    /// `set == NULL`: only reads the mask.
    Query,
    /// Sets the mask the thread already has.
    Same,
    Block,
    Unblock,
    /// SIG_SETMASK to a different mask.
    Set,
    /// A change right after another change, with no syscall between.
    Undo,
}

/// Against the break the thread last saw; a thread's first move counts as
/// growing.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord, Hash, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum BrkChange {
    /// `brk(0)`: only reads the break.
    Query,
    Grow,
    /// Gives memory back: malloc trimming the top of its heap.
    Shrink,
    /// No move: a grow that failed returns the old break.
    Same,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct ArgumentStats {
    pub pid: u32,
    pub syscall: String,
    pub nr: u32,
    pub argument: Argument,
    pub calls: u64,
    pub errors: u64,
    pub total_ns: u64,
    /// Byte counts asked for and returned (read/write family only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested: Option<Histogram>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub returned: Option<Histogram>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sites: Vec<SiteShare>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Trace {
    pub fn total_calls(&self) -> u64 {
        self.syscalls.iter().map(|s| s.calls).sum()
    }

    pub fn syscall(&self, name: &str) -> Option<&SyscallStats> {
        self.syscalls.iter().find(|s| s.name == name)
    }

    pub fn call_site(&self, share: &SiteShare) -> Option<&CallSite> {
        self.call_sites.get(share.site)
    }

    pub fn thread_count(&self) -> usize {
        self.processes.iter().map(|p| if p.folded > 0 { p.folded as usize } else { p.threads.len() }).sum()
    }

    /// How many processes a finding's shares stand for: a row folding many
    /// exited processes counts as them all.
    pub fn processes_in(&self, shares: &[ProcessShare]) -> u64 {
        shares.iter().map(|s| self.process(s.pid).map_or(1, |p| p.folded.max(1))).sum()
    }

    /// Process `pid`. The builder lists processes by pid, so this is a
    /// binary search; a list in another order is still searched whole.
    pub fn process(&self, pid: u32) -> Option<&Process> {
        match self.processes.binary_search_by_key(&pid, |p| p.pid) {
            Ok(i) => Some(&self.processes[i]),
            Err(_) => self.processes.iter().find(|p| p.pid == pid),
        }
    }

    /// The argument rows of each process, in the trace's order. For a rule
    /// that looks at each process's arguments: a filter of the whole list
    /// per process is quadratic (a build's 900 processes × 100,000
    /// arguments took 1.5 s to diagnose).
    pub fn arguments_by_pid(&self) -> std::collections::HashMap<u32, Vec<&ArgumentStats>> {
        let mut out: std::collections::HashMap<u32, Vec<&ArgumentStats>> = std::collections::HashMap::new();
        for a in &self.arguments {
            out.entry(a.pid).or_default().push(a);
        }
        out
    }

    /// The files (ELF paths) that call sites pass through in the program's
    /// own code with no name for the frame: stripped, without debug info.
    pub fn unnamed_modules(&self) -> Vec<&str> {
        let mut out: Vec<&str> = self
            .call_sites
            .iter()
            .flat_map(|s| s.user_chain())
            .filter(|f| f.function.is_none() && f.module.starts_with('/'))
            .map(|f| f.module.as_str())
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Processes traced, a folded row counting as the processes it stands for.
    pub fn process_count(&self) -> usize {
        self.processes.iter().map(|p| p.folded.max(1) as usize).sum()
    }
}

/// Sorts syscall stats the way reports show them: most time, then most calls.
pub fn sort_by_cost(stats: &mut [SyscallStats]) {
    stats.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(b.calls.cmp(&a.calls)).then(a.name.cmp(&b.name)));
}

impl ArgumentStats {
    /// Adds another entry's counts and byte histograms to this one's.
    pub fn merge(&mut self, other: &ArgumentStats) {
        self.calls += other.calls;
        self.errors += other.errors;
        self.total_ns += other.total_ns;
        for (mine, theirs) in [(&mut self.requested, &other.requested), (&mut self.returned, &other.returned)] {
            match (mine.as_mut(), theirs) {
                (Some(h), Some(t)) => h.add(t),
                (None, Some(t)) => *mine = Some(t.clone()),
                _ => {}
            }
        }
    }

    /// At most how many bytes 90% of the calls moved (read/write family).
    pub fn typical_bytes(&self) -> Option<u64> {
        self.returned.as_ref()?.bound_covering(0.9)
    }

    /// At most how many bytes 90% of the calls asked for.
    pub fn typical_request(&self) -> Option<u64> {
        self.requested.as_ref()?.bound_covering(0.9)
    }
}

#[cfg(test)]
mod tests {
    use super::Lost;

    #[test]
    fn a_lost_count_of_one_reads_in_the_singular() {
        let lost = Lost { path_unreadable: 1, path_truncated: 2, ..Default::default() };
        assert_eq!(lost.nonzero(), vec![("call with an unreadable path", 1), ("calls with paths cut at 255 bytes", 2)]);
    }
}
