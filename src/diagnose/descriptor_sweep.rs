//! descriptor-sweep: close (or fcntl, fstat) over a range of fds, most of
//! them not open, failing with EBADF: the classic close-everything loop
//! before an exec, from 3 up to the fd limit. One close_range(2) does it.

use super::{Evidence, Finding, Fix};
use crate::human::thousands;
use crate::model::Trace;

pub const ID: &str = "descriptor-sweep";

/// The syscalls a sweep is made of, and the fix for each.
const SWEEPS: &[(&str, &str)] = &[
    ("close", "close them all with one close_range(first, ~0U, 0) (Linux 5.9, glibc 2.34), or closefrom(3)"),
    ("fcntl", "mark them close-on-exec with one close_range(first, ~0U, CLOSE_RANGE_CLOEXEC) (Linux 5.11)"),
    ("fstat", "list the open fds from /proc/self/fd instead of probing every number"),
];

pub fn check(trace: &Trace) -> Vec<Finding> {
    let mut out = Vec::new();
    for p in &trace.processes {
        for s in &p.syscalls {
            let Some((_, fix)) = SWEEPS.iter().find(|(name, _)| *name == s.name) else { continue };
            let bad = s.errnos.get("EBADF").copied().unwrap_or(0);
            // A sweep mostly misses: most fds in the range are not open.
            if bad < 2 || bad * 2 < s.calls {
                continue;
            }
            let ns = s.total_ns * bad / s.calls.max(1);
            out.push(Finding {
                id: ID.into(),
                what: format!("{} × {} failing with EBADF, of {} calls", thousands(bad), s.name, thousands(s.calls)),
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
                fixes: vec![Fix::code(*fix)],
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

    #[test]
    fn a_close_sweep() {
        let mut t = trace(1_000_000, &[("close", 1024, 500_000)]);
        t.processes[0].syscalls[0].errnos.insert("EBADF".into(), 1020);
        let f = check(&t);
        assert_eq!(f[0].what, "1,020 × close failing with EBADF, of 1,024 calls");
        assert!(f[0].fixes[0].text.contains("close_range"));
        assert!(!f[0].is_small());
    }

    #[test]
    fn closing_open_fds_is_no_sweep() {
        let mut t = trace(1_000_000, &[("close", 1024, 500_000)]);
        t.processes[0].syscalls[0].errnos.insert("EBADF".into(), 10);
        assert!(check(&t).is_empty());
    }
}
