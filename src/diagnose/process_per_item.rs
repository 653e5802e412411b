//! process-per-item: one process starting the same program over and over,
//! each run doing a little and ending (a shell's `$(date +%s)` for each
//! line, `find -exec … \;`, `xargs -n 1`, a helper run per request). Every
//! start is a fork, an exec, the loader mapping the program and its
//! libraries and the program's own set-up: tens or hundreds of syscalls
//! for an item whose work takes a few.

use std::collections::BTreeMap;

use super::spawner;
use super::{called_through, Evidence, Finding, Fix};
use crate::human::{escaped, thousands};
use crate::model::{callsite, Process, SiteShare, Trace};

pub const ID: &str = "process-per-item";

/// Runs of one program enough to be a pattern, not a script's few steps.
const MIN_RUNS: u64 = 20;

/// The syscalls that start a process.
const STARTS: &[&str] = &["clone", "clone3", "fork", "vfork"];

/// A shell's own function that forks for a command (bash's, dash's, zsh's):
/// the parent is a script, whose fix is the shell's own features.
const SHELL_FORKS: &[&str] = &["make_child", "forkshell", "vforkexec", "zfork"];

const FIX: &str = "do each item's work in the process itself, or start the program once for many items: one run over all \
     the arguments (xargs without -n 1, find -exec … {} + instead of \\;), a batch mode fed through a pipe, or a library \
     instead of a command";
const SHELL_FIX: &str = "the script runs a command for each item: use the shell's own features ($EPOCHSECONDS or \
     printf '%(%s)T' -1 for $(date +%s), ${f##*/} and ${f%/*} for basename and dirname, $((…)) for expr), or one awk or \
     sed over all the lines instead of a command per line";

/// The runs of one program by one parent.
#[derive(Default)]
struct Runs {
    /// Processes started (a folded row counts for each it stands for).
    started: u64,
    /// Their syscalls and kernel time, with every process below them.
    calls: u64,
    ns: u64,
}

/// What a process runs: its file, else its name (ptrace and strace logs
/// know no file).
fn program(p: &Process) -> &str {
    p.executable.as_deref().unwrap_or(&p.comm)
}

pub fn check(trace: &Trace) -> Vec<Finding> {
    let children = spawner::children(trace);
    let mut out = Vec::new();
    for (&ppid, kids) in &children {
        let Some(parent) = trace.process(ppid) else { continue };
        let mut by_program: BTreeMap<&str, Runs> = BTreeMap::new();
        for c in kids {
            // A child that runs the parent's own program is a fork of it (a
            // worker, a subshell), not a program started.
            if program(c) == program(parent) {
                continue;
            }
            let many = c.folded.max(1);
            let (calls, ns) = spawner::cost_below(c, &children);
            if calls / many > spawner::BUSY_CHILD {
                continue; // work of its own: a compiler, a test
            }
            let runs = by_program.entry(program(c)).or_default();
            runs.started += many;
            runs.calls += calls;
            runs.ns += ns;
        }
        by_program.retain(|_, r| r.started >= MIN_RUNS);
        if by_program.is_empty() {
            continue;
        }
        // Where the parent starts processes, and whether it is a shell's
        // doing: once for all the programs it starts.
        let mut sites: Vec<SiteShare> = Vec::new();
        for s in parent.syscalls.iter().filter(|s| STARTS.contains(&s.name.as_str())) {
            callsite::merge_shares(&mut sites, &s.sites);
        }
        let shell = called_through(trace, &sites, SHELL_FORKS);
        for (name, runs) in by_program {
            let mut fixes = vec![Fix::code(FIX)];
            if shell {
                fixes.insert(0, Fix::code(SHELL_FIX));
            }
            // Names from the traced system: escaped before any terminal.
            let short = escaped(name.rsplit('/').next().unwrap_or(name));
            out.push(Finding {
                id: ID.into(),
                what: format!(
                    "{} × {short} started by {}, each ending after about {} syscalls",
                    thousands(runs.started),
                    escaped(&parent.comm),
                    thousands(runs.calls / runs.started)
                ),
                pid: Some(ppid),
                // A few dozen calls come with each item started.
                evidence: Evidence { per_item: true, ..Evidence::new(trace, "execve", runs.calls, runs.ns) },
                sites: sites.clone(),
                saving_ns: runs.ns,
                why: format!(
                    "{} is started for each item and ends: each start is a fork, an exec, the loader mapping the program \
                     and its libraries and the program's set-up before any work, about {} syscalls a run here, start and work \
                     together, {} runs in all",
                    escaped(name),
                    thousands(runs.calls / runs.started),
                    thousands(runs.started)
                ),
                fixes,
                ..Default::default()
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::testing::*;
    use crate::model::SyscallStats;

    /// A parent (pid 7, bash) and `n` children running `exe`, each making
    /// `calls` syscalls in `ns`.
    fn spawner_of(n: u32, exe: &str, calls: u64, ns: u64) -> Trace {
        let mut t = trace(1_000_000_000, &[("clone", n as u64, 1_000_000)]);
        t.processes[0].executable = Some("/usr/bin/bash".into());
        t.processes[0].comm = "bash".into();
        for i in 0..n {
            let syscalls = vec![SyscallStats { calls, total_ns: ns, ..SyscallStats::new(59) }];
            t.processes.push(Process {
                pid: 100 + i,
                ppid: 7,
                comm: exe.rsplit('/').next().unwrap().into(),
                executable: Some(exe.into()),
                syscalls,
                ..Default::default()
            });
        }
        t
    }

    #[test]
    fn a_program_started_per_line_is_told() {
        // bash -c 'for i in $(seq 300); do d=$(date +%s); done': 161 calls a run.
        let mut t = spawner_of(300, "/usr/bin/date", 161, 590_000);
        t.processes[0].syscalls[0].sites = site(&mut t, &["__libc_fork", "make_child", "command_substitute", "main"]);
        let f = check(&t);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].what, "300 × date started by bash, each ending after about 161 syscalls");
        assert_eq!(f[0].saving_ns, 300 * 590_000);
        assert!(!f[0].is_small());
        assert!(f[0].fixes[0].text.contains("$EPOCHSECONDS"), "a shell's fix first: {:?}", f[0].fixes);
        // The same runs from a C program's fork: no shell advice.
        let mut t = spawner_of(300, "/usr/bin/date", 161, 590_000);
        t.processes[0].syscalls[0].sites = site(&mut t, &["__libc_fork", "run_helper", "main"]);
        let f = check(&t);
        assert!(f[0].fixes.iter().all(|x| !x.text.contains("EPOCHSECONDS")), "{:?}", f[0].fixes);
        assert!(f[0].fixes[0].text.contains("find -exec"), "{:?}", f[0].fixes);
    }

    #[test]
    fn names_from_the_traced_system_are_escaped() {
        let mut t = spawner_of(30, "/tmp/x\x1b]0;PWN\x07", 40, 100_000);
        t.processes[0].comm = "sh\x1b[2J".into();
        let f = check(&t);
        for text in [&f[0].what, &f[0].why] {
            assert!(!text.chars().any(char::is_control), "{text:?}");
            assert!(text.contains("\\x1b"), "{text:?}");
        }
    }

    #[test]
    fn workers_compilers_and_a_scripts_few_steps_are_not() {
        // make -j2: each child's shell runs a compiler, hundreds of calls.
        assert!(check(&spawner_of(300, "/usr/bin/sh", 900, 5_000_000)).is_empty());
        // A script's handful of commands.
        assert!(check(&spawner_of(5, "/usr/bin/date", 161, 590_000)).is_empty());
        // A server's forked workers run its own program.
        assert!(check(&spawner_of(300, "/usr/bin/bash", 50, 100_000)).is_empty());
    }
}
