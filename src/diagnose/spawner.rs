//! What a process did in its children between their fork and their exec:
//! a spawner's work repeated per child (signals reset, fds swept) is the
//! parent's cost and the parent's fix, though each child's counts hold it.

use foldhash::HashSet;
use std::cell::OnceCell;
use std::collections::BTreeMap;

use crate::model::{Process, SiteShare, Trace};

/// Every process's children, by parent pid.
pub fn children(trace: &Trace) -> BTreeMap<u32, Vec<&Process>> {
    let mut children: BTreeMap<u32, Vec<&Process>> = BTreeMap::new();
    for c in trace.processes.iter().filter(|c| c.ppid != c.pid) {
        children.entry(c.ppid).or_default().push(c);
    }
    children
}

/// How many processes `pid` started: a folded row counts as the
/// processes it stands for.
pub fn started(pid: u32, children: &BTreeMap<u32, Vec<&Process>>) -> u64 {
    children.get(&pid).map_or(0, |kids| kids.iter().map(|c| c.folded.max(1)).sum())
}

/// Calls a child made, with every process below it, beyond which it is
/// a worker doing work of its own (a compiler and its assembler), not a
/// process started per item to do a little (`/bin/true`: about 35).
pub const BUSY_CHILD: u64 = 200;

/// The calls `child` and every process below it made, all together: the
/// work it was started for, with what the spawn made in it.
pub fn calls_below(child: &Process, children: &BTreeMap<u32, Vec<&Process>>) -> u64 {
    cost_below(child, children).0
}

/// The calls and their kernel time of `child` and every process below it.
pub fn cost_below(child: &Process, children: &BTreeMap<u32, Vec<&Process>>) -> (u64, u64) {
    let mut seen = HashSet::default();
    let (mut calls, mut ns) = (0, 0);
    let mut stack = vec![child];
    while let Some(p) = stack.pop() {
        if !seen.insert(p.pid) {
            continue; // a pid reused in a long run: no process twice
        }
        calls += p.syscalls.iter().map(|s| s.calls).sum::<u64>();
        ns += p.syscalls.iter().map(|s| s.total_ns).sum::<u64>();
        stack.extend(children.get(&p.pid).into_iter().flatten().copied());
    }
    (calls, ns)
}

/// A parent's code, to tell its calls in a child from the child's own.
pub struct Spawner<'a> {
    trace: &'a Trace,
    parent: &'a Process,
    /// Its executable and the modules of its call sites, the C runtime's
    /// left out (the child's program uses it too): gathered at the first
    /// child that needs it (none, when no child swept fds or reset signals).
    code: OnceCell<HashSet<&'a str>>,
}

impl<'a> Spawner<'a> {
    pub fn new(trace: &'a Trace, parent: &'a Process) -> Spawner<'a> {
        Spawner { trace, parent, code: OnceCell::new() }
    }

    fn code(&self) -> &HashSet<&'a str> {
        self.code.get_or_init(|| {
            let mut code: HashSet<&str> = self.parent.executable.iter().map(String::as_str).collect();
            let mut sites = HashSet::default();
            for share in self.parent.syscalls.iter().flat_map(|s| &s.sites) {
                let Some(site) = self.trace.call_site(share).filter(|_| sites.insert(share.site)) else { continue };
                // A stack's frames come in runs of one module: each run
                // judged once.
                let mut last = None;
                for f in &site.frames {
                    let module = f.module.as_str();
                    if last != Some(module) && !code.contains(module) && !f.in_c_runtime() {
                        code.insert(module);
                    }
                    last = Some(module);
                }
            }
            code
        })
    }

    /// Of `child`'s calls at `shares`, those the parent's code made before
    /// the child's exec: a frame in the parent's code that is not the
    /// child's program, or in glibc's posix_spawn child. A child that
    /// never ran another program (a shell's subshell) is the parent's
    /// code throughout, and none of its calls are told apart.
    pub fn before_exec(&self, child: &Process, shares: &[SiteShare]) -> Vec<SiteShare> {
        shares
            .iter()
            .filter(|share| {
                self.trace.call_site(share).is_some_and(|site| {
                    site.frames.iter().any(|f| {
                        f.function.as_deref() == Some("__spawni_child")
                            || (!f.in_c_runtime()
                                && child.executable.as_deref() != Some(f.module.as_str())
                                && self.code().contains(f.module.as_str()))
                    })
                })
            })
            .cloned()
            .collect()
    }
}
