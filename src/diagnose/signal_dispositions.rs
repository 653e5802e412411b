//! signal-disposition-churn: rt_sigaction over and over. Setting up a
//! process's handlers touches each signal once or twice (a query, a set:
//! at most 2 × 64 calls, what a runtime's start-up does); more is setting
//! and restoring a handler around every operation. In a process that
//! starts others, many calls per child started are the dispositions gone
//! through for each one (a shell's job-control handlers around each fork).
//! In the children, many calls made before their exec by the parent's
//! code are the spawn putting each signal back to its default in each
//! child (libuv's uv_spawn, CPython's subprocess, glibc's posix_spawn):
//! each child's few tens add up to the parent's.

use std::collections::BTreeMap;

use super::spawner::{self, Spawner};
use super::{Evidence, Finding, Fix};
use crate::human::{escaped, thousands};
use crate::model::{callsite, Process, SiteShare, Trace};

pub const ID: &str = "signal-disposition-churn";

/// One query and one set for each of the 64 signals: a whole set-up.
const SET_UP: u64 = 128;
/// Calls per child started that mean handlers are redone for each.
const PER_CHILD: u64 = 16;
/// Children enough for a reset in each to be the spawner's pattern.
const MIN_CHILDREN: u64 = 10;

pub fn check(trace: &Trace) -> Vec<Finding> {
    let mut out = Vec::new();
    let children = spawner::children(trace);
    for p in &trace.processes {
        let Some(s) = p.syscalls.iter().find(|s| s.name == "rt_sigaction") else { continue };
        // Counted once: a folded row stands for many.
        let children = spawner::started(p.pid, &children);
        let per_child = s.calls.checked_div(children).unwrap_or(0);
        let churn = s.calls > SET_UP;
        let per_spawn = children >= 2 && per_child >= PER_CHILD;
        if !churn && !per_spawn {
            continue;
        }
        let (why, fix) = if per_spawn {
            (
                format!(
                    "{} rt_sigaction calls for each of the {} processes it started: the dispositions are gone through again for every one",
                    thousands(per_child),
                    thousands(children)
                ),
                Fix::code("install the handlers once, before starting children, instead of around each fork; or start fewer processes"),
            )
        } else {
            (
                format!("{} rt_sigaction calls, more than setting up every signal once takes ({SET_UP}): handlers are set and restored around operations", thousands(s.calls)),
                Fix::code("set the handler once and keep it (let it check a flag); to hold a signal off during a section, block it instead of swapping handlers"),
            )
        };
        out.push(Finding {
            id: ID.into(),
            what: format!("{} × rt_sigaction", thousands(s.calls)),
            pid: Some(p.pid),
            // Set and restored around each operation, or redone per child.
            evidence: Evidence { per_item: true, ..Evidence::new(trace, "rt_sigaction", s.calls, s.total_ns) },
            sites: s.sites.clone(),
            // A set-up's worth stays.
            saving_ns: s.total_ns - s.total_ns * SET_UP.min(s.calls) / s.calls.max(1),
            why,
            fixes: vec![fix],
            ..Default::default()
        });
    }
    out.extend(reset_in_each_child(trace, children));
    out
}

/// Per parent (`children`: its children), the rt_sigaction they made
/// before their exec, in the parent's code: the spawn resetting dispositions child by child.
fn reset_in_each_child<'a>(trace: &'a Trace, children: BTreeMap<u32, Vec<&'a Process>>) -> Vec<Finding> {
    let mut out = Vec::new();
    for (&ppid, kids) in &children {
        let Some(parent) = trace.process(ppid) else { continue };
        let spawner = Spawner::new(trace, parent);
        let (mut calls, mut ns, mut n, mut below) = (0, 0, 0, 0);
        let mut sites: Vec<SiteShare> = Vec::new();
        for c in kids {
            let Some(s) = c.syscalls.iter().find(|s| s.name == "rt_sigaction") else { continue };
            let before_exec = spawner.before_exec(c, &s.sites);
            let here: u64 = before_exec.iter().map(|x| x.calls).sum();
            let many = c.folded.max(1);
            if here >= PER_CHILD * many {
                below += spawner::calls_below(c, &children);
                calls += here;
                ns += before_exec.iter().map(|x| x.total_ns).sum::<u64>();
                n += many;
                callsite::merge_shares(&mut sites, &before_exec);
            }
        }
        if n < MIN_CHILDREN {
            continue;
        }
        sites.sort_by_key(|x| std::cmp::Reverse(x.calls));
        let spawner = sites
            .first()
            .and_then(|x| trace.call_site(x))
            .and_then(|site| site.frames.iter().find(|f| !f.in_c_runtime() || f.function.as_deref() == Some("__spawni_child")))
            .and_then(|f| f.function.clone());
        out.push(Finding {
            id: ID.into(),
            what: format!("{} × rt_sigaction in {} children of {}, before their exec", thousands(calls), thousands(n), escaped(&parent.comm)),
            pid: Some(ppid),
            evidence: Evidence { per_item: below.saturating_sub(calls) / n < spawner::BUSY_CHILD, ..Evidence::new(trace, "rt_sigaction", calls, ns) },
            sites,
            saving_ns: ns,
            why: format!(
                "about {} rt_sigaction calls in each child between its fork and its exec{}: the spawn puts each signal's \
                 disposition back to its default, one call or two per signal, for every child",
                thousands(calls / n),
                spawner.map(|f| format!(", made by {f} in the parent's code")).unwrap_or_default()
            ),
            fixes: vec![Fix::code(
                "start fewer processes: batch the work into one child, or keep a worker process and hand it the work; \
                 every spawner resets the dispositions for each child (libuv's uv_spawn about 30 calls, CPython's subprocess 63, \
                 glibc's posix_spawn 64 to 128)",
            )],
            ..Default::default()
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::testing::*;
    use crate::model::Process;

    #[test]
    fn handlers_swapped_around_every_operation() {
        let t = trace(100_000_000, &[("rt_sigaction", 20_000, 5_000_000), ("getpid", 10_000, 1_000_000)]);
        let f = check(&t);
        assert_eq!(f[0].what, "20,000 × rt_sigaction");
        assert!(!f[0].is_small());
    }

    #[test]
    fn a_start_up_is_not_churn() {
        // CPython's start-up: 66 calls.
        assert!(check(&trace(100_000_000, &[("rt_sigaction", 66, 100_000)])).is_empty());
    }

    #[test]
    fn a_reset_before_exec_in_every_child() {
        let mut t = trace(100_000_000, &[("wait4", 20, 1_000)]);
        t.processes[0].comm = "node".into();
        t.processes[0].executable = Some("/usr/bin/node".into());
        let spawning = site(&mut t, &["__libc_sigaction", "uv__process_child_init", "uv_spawn"]);
        for f in &mut t.call_sites[spawning[0].site].frames[1..] {
            f.module = "/usr/bin/node".into();
        }
        let own = site(&mut t, &["__libc_sigaction", "main"]);
        for f in &mut t.call_sites[own[0].site].frames[1..] {
            f.module = "/usr/bin/true".into();
        }
        let child = |pid, shares: &[SiteShare]| {
            let sites = shares.iter().map(|x| SiteShare { calls: 30, total_ns: 3_000, ..x.clone() }).collect();
            let s = crate::model::SyscallStats { name: "rt_sigaction".into(), calls: 30, total_ns: 3_000, sites, ..Default::default() };
            Process { pid, ppid: 7, comm: "true".into(), executable: Some("/usr/bin/true".into()), syscalls: vec![s], ..Default::default() }
        };
        t.processes.extend((100..112).map(|pid| child(pid, &spawning)));
        let f = check(&t);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].what, "360 × rt_sigaction in 12 children of node, before their exec");
        assert!(f[0].why.contains("about 30 rt_sigaction calls in each child") && f[0].why.contains("uv__process_child_init"), "{}", f[0].why);
        // A name from the traced system reaches no terminal raw.
        t.processes[0].comm = "node\x1b[2J".into();
        assert_eq!(check(&t)[0].what, "360 × rt_sigaction in 12 children of node\\x1b[2J, before their exec");
        // The same calls made by the children's own program: their start-up.
        t.processes.truncate(1);
        t.processes.extend((100..112).map(|pid| child(pid, &own)));
        assert!(check(&t).is_empty());
    }

    #[test]
    fn dispositions_per_child_started() {
        let mut t = trace(100_000_000, &[("rt_sigaction", 100, 100_000)]);
        t.processes.extend((100..105).map(|pid| Process { pid, ppid: 7, comm: "true".into(), ..Default::default() }));
        let f = check(&t);
        assert!(f[0].why.contains("20 rt_sigaction calls for each of the 5 processes"), "{}", f[0].why);
    }
}
