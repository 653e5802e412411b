//! identity-calls: getpid, gettid, getuid and the like over and over. glibc
//! no longer caches getpid (since 2.25), so each is a real syscall; the
//! answer does not change (getppid only when the parent dies).

use super::{Evidence, Finding, Fix};
use crate::human::thousands;
use crate::model::Trace;

pub const ID: &str = "identity-calls";

const IDENTITY: &[&str] = &["getpid", "gettid", "getppid", "getuid", "geteuid", "getgid", "getegid", "getpgrp", "getsid"];

pub fn check(trace: &Trace) -> Vec<Finding> {
    let mut out = Vec::new();
    for p in &trace.processes {
        let ids: Vec<_> = p.syscalls.iter().filter(|s| IDENTITY.contains(&s.name.as_str())).collect();
        let calls: u64 = ids.iter().map(|s| s.calls).sum();
        if calls < 2 {
            continue;
        }
        let ns: u64 = ids.iter().map(|s| s.total_ns).sum();
        let what: Vec<String> = ids.iter().map(|s| format!("{} × {}", thousands(s.calls), s.name)).collect();
        out.push(Finding {
            id: ID.into(),
            what: what.join(", "),
            pid: Some(p.pid),
            evidence: Evidence::new(trace, &ids[0].name, calls, ns),
            sites: ids.iter().flat_map(|s| s.sites.clone()).collect(),
            saving_ns: ns,
            why: "the process asks for its own identity again and again; the answer does not change while it runs".into(),
            fixes: vec![Fix::code("ask once and keep the answer (refresh a cached pid after fork())")],
            ..Default::default()
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::testing::*;

    #[test]
    fn repeated_getpid() {
        let f = check(&trace(1_000_000_000, &[("getpid", 100_000, 10_000_000), ("getuid", 5, 50)]));
        assert_eq!(f[0].what, "100,000 × getpid, 5 × getuid");
        assert_eq!(f[0].saving_ns, 10_000_050);
    }

    #[test]
    fn once_is_fine() {
        assert!(check(&trace(1_000_000_000, &[("getpid", 1, 100), ("read", 1000, 1000)])).is_empty());
    }
}
