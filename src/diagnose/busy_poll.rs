//! busy-poll: poll/ppoll/select/epoll_wait with a zero timeout at a high
//! rate (asking "anything yet?" in a loop instead of waiting), and
//! sched_yield spins. Each burns a syscall and a CPU for nothing.

use super::{Evidence, Finding, Fix};
use crate::human::thousands;
use crate::model::{Argument, Timeout, Trace};

pub const ID: &str = "busy-poll";

pub fn check(trace: &Trace) -> Vec<Finding> {
    let mut out = Vec::new();
    for a in &trace.arguments {
        if a.argument != (Argument::Timeout { timeout: Timeout::Zero }) || a.calls < 2 {
            continue;
        }
        out.push(Finding {
            id: ID.into(),
            what: format!("{} × {}(timeout 0)", thousands(a.calls), a.syscall),
            pid: Some(a.pid),
            evidence: Evidence::new(trace, &a.syscall, a.calls, a.total_ns),
            sites: a.sites.clone(),
            saving_ns: a.total_ns,
            why: format!(
                "{} with a zero timeout returns at once: called in a loop it spins, asking whether anything is ready instead of waiting for it",
                a.syscall
            ),
            fixes: vec![
                Fix::code("wait with a timeout (or -1) and let the kernel wake the thread when an fd is ready"),
                Fix::code("if a loop must also do other work, wait until that work's deadline instead of 0"),
            ],
            ..Default::default()
        });
    }
    for p in &trace.processes {
        let Some(s) = p.syscalls.iter().find(|s| s.name == "sched_yield") else { continue };
        if s.calls < 2 {
            continue;
        }
        out.push(Finding {
            id: ID.into(),
            what: format!("{} × sched_yield", thousands(s.calls)),
            pid: Some(p.pid),
            evidence: Evidence::new(trace, "sched_yield", s.calls, s.total_ns),
            sites: s.sites.clone(),
            saving_ns: s.total_ns,
            why: "sched_yield in a loop spins: it waits for another thread by burning a CPU and a syscall per turn".into(),
            fixes: vec![Fix::code("block on what is awaited (a futex, a condition variable, a pipe) instead of yielding in a loop")],
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
    fn zero_timeout_polls_and_yield_spins() {
        let mut t = trace(1_000_000_000, &[("poll", 50_000, 50_000_000), ("sched_yield", 9_000, 1_000_000)]);
        argument(&mut t, "poll", Argument::Timeout { timeout: Timeout::Zero }, 50_000, 50_000_000);
        let f = check(&t);
        assert_eq!(f.len(), 2);
        assert_eq!(f[0].what, "50,000 × poll(timeout 0)");
        assert_eq!(f[1].what, "9,000 × sched_yield");
    }

    #[test]
    fn waiting_polls_are_fine() {
        let mut t = trace(1_000_000_000, &[("epoll_wait", 50_000, 50_000_000)]);
        argument(&mut t, "epoll_wait", Argument::Timeout { timeout: Timeout::Finite }, 40_000, 40_000_000);
        argument(&mut t, "epoll_wait", Argument::Timeout { timeout: Timeout::None }, 10_000, 10_000_000);
        assert!(check(&t).is_empty());
    }
}
