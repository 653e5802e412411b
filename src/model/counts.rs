//! Per-syscall counts, of a process, a thread, or calls seen once.

use super::{Environment, Exit, SiteShare};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

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

/// For serde's skip_serializing_if: a count or time left out when 0.
pub fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Sorts syscall stats the way reports show them: most time, then most calls.
pub fn sort_by_cost(stats: &mut [SyscallStats]) {
    stats.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(b.calls.cmp(&a.calls)).then(a.name.cmp(&b.name)));
}
