//! descriptor-sweep: close (or fcntl, fstat) over a range of fds, most of
//! them not open, failing with EBADF: the classic close-everything loop
//! before an exec, from 3 up to the fd limit. One close_range(2) does it.

use foldhash::HashSet;
use std::collections::BTreeMap;

use super::spawner::{self, Spawner};
use super::{Evidence, Finding, Fix};
use crate::human::{escaped, thousands};
use crate::model::{callsite, SiteShare, SyscallStats, Trace};

pub const ID: &str = "descriptor-sweep";

/// The syscalls a sweep is made of, and the fix for each. glibc makes
/// fstat a newfstatat (or statx) of "" on the fd: EBADF from those is a
/// probe of an fd number, as a bad dirfd is all that gives it.
const SWEEPS: &[(&[&str], &str)] = &[
    (&["close"], "close them all with one close_range(first, ~0U, 0) (Linux 5.9, glibc 2.34), or closefrom(3)"),
    (&["fcntl"], "mark them close-on-exec with one close_range(first, ~0U, CLOSE_RANGE_CLOEXEC) (Linux 5.11)"),
    (&["fstat", "newfstatat", "fstatat64", "statx"], "list the open fds from /proc/self/fd instead of probing every number"),
];

/// What close_range changes besides speed.
const TRADEOFF: &str = "close_range needs Linux 5.9 (5.11 for CLOSE_RANGE_CLOEXEC) and glibc 2.34 to be called by name; \
     where either is older, read the open fds from /proc/self/fd and close those";

/// Children enough for a sweep in each to be the spawner's pattern.
const MIN_CHILDREN: u64 = 2;

/// The calls of `s` that failed with EBADF, and the fix, when they are
/// most of its calls: most fds in the range are not open.
fn sweep(s: &SyscallStats) -> Option<(u64, &'static str)> {
    let (_, fix) = SWEEPS.iter().find(|(names, _)| names.contains(&s.name.as_str()))?;
    let bad = s.errnos.get("EBADF").copied().unwrap_or(0);
    (bad >= 2 && bad * 2 >= s.calls).then_some((bad, *fix))
}

pub fn check(trace: &Trace) -> Vec<Finding> {
    let (mut out, told) = swept_in_children(trace);
    for p in &trace.processes {
        for s in &p.syscalls {
            let Some((bad, fix)) = sweep(s) else { continue };
            if told.contains(&(p.pid, s.name.as_str())) {
                continue;
            }
            let ns = s.total_ns * bad / s.calls.max(1);
            out.push(Finding {
                id: ID.into(),
                // A share, not a count: the same in each of a program's
                // processes, so a finding summed over them still says it.
                what: format!("{} × {} failing with EBADF, {}% of its calls", thousands(bad), s.name, bad * 100 / s.calls.max(1)),
                pid: Some(p.pid),
                evidence: Evidence::new(trace, &s.name, bad, ns),
                sites: s.sites.clone(),
                saving_ns: ns,
                why: format!(
                    "{} goes over a range of fd numbers, and {} of {} were not open: a sweep asks the kernel about every number",
                    s.name,
                    thousands(bad),
                    thousands(s.calls)
                ),
                fixes: vec![Fix::code(fix)],
                tradeoff: fix.contains("close_range").then(|| TRADEOFF.into()),
                ..Default::default()
            });
        }
    }
    out
}

/// Sweeps the children of one parent made in the parent's code before
/// their exec (a shell or spawner closing what each child inherited), one
/// finding per parent and syscall; and which (child, syscall) they hold.
fn swept_in_children(trace: &Trace) -> (Vec<Finding>, HashSet<(u32, &str)>) {
    let (mut out, mut told) = (Vec::new(), HashSet::default());
    let children = spawner::children(trace);
    for (&ppid, kids) in &children {
        let Some(parent) = trace.process(ppid) else { continue };
        let spawner = Spawner::new(trace, parent);
        // Per syscall: failed calls, their time, children, the calls the
        // samples put in the parent's code and in all, sites, the
        // children's (pid, syscall).
        #[derive(Default)]
        struct Sum<'a> {
            bad: u64,
            ns: u64,
            children: u64,
            below: u64,
            theirs: u64,
            calls: u64,
            sites: Vec<SiteShare>,
            pids: Vec<(u32, &'a str)>,
        }
        let mut sums: BTreeMap<&str, Sum> = BTreeMap::new();
        for c in kids {
            for s in &c.syscalls {
                let Some((bad, _)) = sweep(s) else { continue };
                let theirs = spawner.before_exec(c, &s.sites);
                let sum = sums.entry(s.name.as_str()).or_default();
                sum.bad += bad;
                sum.ns += s.total_ns * bad / s.calls.max(1);
                sum.children += c.folded.max(1);
                sum.below += spawner::calls_below(c, &children);
                sum.theirs += theirs.iter().map(|x| x.calls).sum::<u64>();
                sum.calls += s.calls;
                callsite::merge_shares(&mut sum.sites, &theirs);
                sum.pids.push((c.pid, s.name.as_str()));
            }
        }
        // Most of the calls, as the samples split them, in the parent's
        // code: the children whose few samples fell elsewhere are alike.
        for (name, Sum { bad, ns, children: n, below, mut sites, pids, .. }) in sums.into_iter().filter(|(_, x)| x.theirs * 2 >= x.calls) {
            if n < MIN_CHILDREN {
                continue;
            }
            told.extend(pids);
            sites.sort_by_key(|x| std::cmp::Reverse(x.calls));
            out.push(Finding {
                id: ID.into(),
                what: format!(
                    "{} × {name} failing with EBADF in {} children of {}, before their exec",
                    thousands(bad),
                    thousands(n),
                    escaped(&parent.comm)
                ),
                pid: Some(ppid),
                evidence: Evidence { per_item: below.saturating_sub(bad) / n < spawner::BUSY_CHILD, ..Evidence::new(trace, name, bad, ns) },
                sites,
                saving_ns: ns,
                why: format!(
                    "in each child, between its fork and its exec, {}'s code asks about every fd number to close what the child \
                     inherited: about {} {name} calls a child failing with EBADF, numbers that were not open",
                    escaped(&parent.comm),
                    thousands(bad / n)
                ),
                fixes: vec![Fix::code(
                    "close what the child inherits with one close_range(3, ~0U, 0) (Linux 5.9, glibc 2.34) or closefrom(3) before the exec, \
                     or open fds with O_CLOEXEC so that nothing is left to close",
                )],
                tradeoff: Some(TRADEOFF.into()),
                ..Default::default()
            });
        }
    }
    (out, told)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::testing::*;

    #[test]
    fn a_close_sweep() {
        let mut t = trace(1_000_000, &[("close", 1024, 500_000)]);
        t.processes[0].syscalls[0].errnos.insert("EBADF".into(), 1020);
        let f = check(&t);
        assert_eq!(f[0].what, "1,020 × close failing with EBADF, 99% of its calls");
        assert!(f[0].fixes[0].text.contains("close_range"));
        assert!(!f[0].is_small());
    }

    #[test]
    fn an_fstat_sweep_through_newfstatat() {
        let mut t = trace(1_000_000, &[("newfstatat", 269, 500_000)]);
        t.processes[0].syscalls[0].errnos.insert("EBADF".into(), 266);
        let f = check(&t);
        assert_eq!(f[0].what, "266 × newfstatat failing with EBADF, 98% of its calls");
        assert!(f[0].fixes[0].text.contains("/proc/self/fd"));
    }

    /// tcsh running `/bin/echo` in backquotes: each child fstats every fd
    /// number in tcsh's code before its exec.
    #[test]
    fn a_sweep_in_each_child_is_its_parents() {
        let mut t = trace(100_000_000, &[("wait4", 20, 1_000)]);
        t.processes[0].comm = "tcsh".into();
        t.processes[0].executable = Some("/usr/bin/tcsh".into());
        let theirs = site(&mut t, &["fstatat", "closem"]);
        t.call_sites[theirs[0].site].frames[1].module = "/usr/bin/tcsh".into();
        let own = site(&mut t, &["fstatat", "main"]);
        t.call_sites[own[0].site].frames[1].module = "/usr/bin/echo".into();
        let child = |pid, shares: &[SiteShare]| {
            let sites = shares.iter().map(|x| SiteShare { calls: 269, total_ns: 5_000, ..x.clone() }).collect();
            let mut s = SyscallStats { name: "newfstatat".into(), calls: 269, total_ns: 5_000, sites, ..Default::default() };
            s.errnos.insert("EBADF".into(), 266);
            crate::model::Process {
                pid,
                ppid: 7,
                comm: "echo".into(),
                executable: Some("/usr/bin/echo".into()),
                syscalls: vec![s],
                ..Default::default()
            }
        };
        t.processes.extend((100..110).map(|pid| child(pid, &theirs)));
        let f = check(&t);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].what, "2,660 × newfstatat failing with EBADF in 10 children of tcsh, before their exec");
        assert_eq!(f[0].pid, Some(7));
        assert!(f[0].why.contains("about 266 newfstatat calls a child") && f[0].fixes[0].text.contains("close_range(3"), "{f:?}");
        // A name from the traced system reaches no terminal raw.
        t.processes[0].comm = "tcsh\x1b[2J".into();
        let f = check(&t);
        assert!(f[0].what.ends_with("children of tcsh\\x1b[2J, before their exec"), "{}", f[0].what);
        assert!(!f[0].why.chars().any(char::is_control), "{}", f[0].why);
        // The children's own program sweeping: each child's finding.
        t.processes.truncate(1);
        t.processes.extend((100..110).map(|pid| child(pid, &own)));
        let f = check(&t);
        assert_eq!(f.len(), 10);
        assert!(f.iter().all(|x| x.what == "266 × newfstatat failing with EBADF, 98% of its calls"));
    }

    #[test]
    fn closing_open_fds_is_no_sweep() {
        let mut t = trace(1_000_000, &[("close", 1024, 500_000)]);
        t.processes[0].syscalls[0].errnos.insert("EBADF".into(), 10);
        assert!(check(&t).is_empty());
    }
}
