//! busy-poll: poll/ppoll/select/epoll_wait with a zero timeout at a high
//! rate (asking "anything yet?" in a loop instead of waiting), and
//! sched_yield spins. Each burns a syscall and a CPU for nothing. An
//! event loop that looks once more without waiting after each wake
//! (libuv, asyncio: about one zero-timeout call per waiting one) is not
//! spinning.

use std::collections::HashMap;

use super::{Evidence, Finding, Fix};
use crate::human::thousands;
use crate::model::{Argument, Timeout, Trace};

pub const ID: &str = "busy-poll";

/// Zero-timeout calls per waiting one above which a loop spins: an event
/// loop's look before it waits makes about one.
const SPIN_RATIO: u64 = 4;

pub fn check(trace: &Trace) -> Vec<Finding> {
    let mut out = Vec::new();
    // Per process, its polls that waited (a timeout, or none).
    let mut waited: HashMap<u32, u64> = HashMap::new();
    for a in &trace.arguments {
        if matches!(a.argument, Argument::Timeout { timeout: Timeout::Finite | Timeout::None }) {
            *waited.entry(a.pid).or_default() += a.calls;
        }
    }
    for a in &trace.arguments {
        if a.argument != (Argument::Timeout { timeout: Timeout::Zero }) || a.calls < 2 {
            continue;
        }
        if a.calls < SPIN_RATIO * waited.get(&a.pid).copied().unwrap_or(0) {
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
    fn an_event_loop_looking_once_more_before_it_waits_is_not_spinning() {
        // node's libuv with a 10 ms timer: 591 looks, 502 waits.
        let mut t = trace(1_000_000_000, &[("epoll_pwait", 1_093, 5_000_000)]);
        argument(&mut t, "epoll_pwait", Argument::Timeout { timeout: Timeout::Zero }, 591, 500_000);
        argument(&mut t, "epoll_pwait", Argument::Timeout { timeout: Timeout::Finite }, 502, 4_500_000);
        assert!(check(&t).is_empty());
        t.arguments[0].calls = 2_008;
        assert_eq!(check(&t).len(), 1, "four looks per wait: a spin");
    }

    #[test]
    fn waiting_polls_are_fine() {
        let mut t = trace(1_000_000_000, &[("epoll_wait", 50_000, 50_000_000)]);
        argument(&mut t, "epoll_wait", Argument::Timeout { timeout: Timeout::Finite }, 40_000, 40_000_000);
        argument(&mut t, "epoll_wait", Argument::Timeout { timeout: Timeout::None }, 10_000, 10_000_000);
        assert!(check(&t).is_empty());
    }
}
