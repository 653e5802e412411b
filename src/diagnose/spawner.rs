//! What a process did in its children between their fork and their exec:
//! a spawner's work repeated per child (signals reset, fds swept) is the
//! parent's cost and the parent's fix, though each child's counts hold it.

use std::collections::{BTreeMap, HashSet};

use crate::model::{Process, SiteShare, Trace};

/// Every process's children, by parent pid.
pub fn children(trace: &Trace) -> BTreeMap<u32, Vec<&Process>> {
    let mut children: BTreeMap<u32, Vec<&Process>> = BTreeMap::new();
    for c in trace.processes.iter().filter(|c| c.ppid != c.pid) {
        children.entry(c.ppid).or_default().push(c);
    }
    children
}

/// A parent's code, to tell its calls in a child from the child's own.
pub struct Spawner<'a> {
    trace: &'a Trace,
    /// Its executable and the modules of its call sites, the C runtime's
    /// left out (the child's program uses it too).
    code: HashSet<&'a str>,
}

impl<'a> Spawner<'a> {
    pub fn new(trace: &'a Trace, parent: &'a Process) -> Spawner<'a> {
        let mut code: HashSet<&str> = parent.executable.iter().map(String::as_str).collect();
        for share in parent.syscalls.iter().flat_map(|s| &s.sites) {
            if let Some(site) = trace.call_site(share) {
                code.extend(site.frames.iter().filter(|f| !f.in_c_runtime()).map(|f| f.module.as_str()));
            }
        }
        Spawner { trace, code }
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
                            || (!f.in_c_runtime() && child.executable.as_deref() != Some(f.module.as_str()) && self.code.contains(f.module.as_str()))
                    })
                })
            })
            .cloned()
            .collect()
    }
}
