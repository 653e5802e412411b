//! The Trace: every count of a run, and the questions rules ask of it.

use super::{ArgumentStats, CallSite, Lost, OneShot, Process, ProcessShare, RunInfo, Sampling, SiteShare, SyscallStats};
use serde::{Deserialize, Serialize};

/// How many of a process's failed lookups of paths tried once are kept by
/// name (Trace::failed_once), at most: those `named_failure` picks.
pub const FAILED_ONCE_NAMED: usize = 64;

/// Whether a process's `index`th failed lookup of a path tried once (from
/// 0, in the order made) is one named: the first 16, then one in 3 (odd:
/// the loader's lookups alternate between a library and its directory)
/// until 64 are, so that each place a search looked shows (the dynamic
/// loader tries ~8 paths per directory on arm64, ~40 on x86-64). The BPF
/// side picks the same (FAILURES_NAMED_ALL in syscount.h).
pub fn named_failure(index: usize) -> bool {
    const ALL: usize = 16;
    const EVERY: usize = 3;
    index < ALL || (index < ALL + (FAILED_ONCE_NAMED - ALL) * EVERY && (index - ALL).is_multiple_of(EVERY))
}

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
    /// Failed path calls whose path their process tried only once, by
    /// name (counted in `one_shot` too): a sample of each process's
    /// (`named_failure`), so that rules can tell where a search looked
    /// (the loader's, each path once).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_once: Vec<ArgumentStats>,
    /// How stacks were sampled; `None` when they were not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampling: Option<Sampling>,
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
    pub fn arguments_by_pid(&self) -> foldhash::HashMap<u32, Vec<&ArgumentStats>> {
        let mut out: foldhash::HashMap<u32, Vec<&ArgumentStats>> = foldhash::HashMap::default();
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
