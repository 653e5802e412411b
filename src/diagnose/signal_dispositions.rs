//! signal-disposition-churn: rt_sigaction over and over. Setting up a
//! process's handlers touches each signal once or twice (a query, a set:
//! at most 2 × 64 calls, what a runtime's start-up does); more is setting
//! and restoring a handler around every operation. In a process that
//! starts others, many calls per child started are the dispositions gone
//! through for each one (a shell's job-control handlers around each fork).

use std::collections::HashMap;

use super::{Evidence, Finding, Fix};
use crate::human::thousands;
use crate::model::Trace;

pub const ID: &str = "signal-disposition-churn";

/// One query and one set for each of the 64 signals: a whole set-up.
const SET_UP: u64 = 128;
/// Calls per child started that mean handlers are redone for each.
const PER_CHILD: u64 = 16;

pub fn check(trace: &Trace) -> Vec<Finding> {
    let mut out = Vec::new();
    // Children per parent, counted once: a folded row stands for many.
    let mut started: HashMap<u32, u64> = HashMap::new();
    for c in trace.processes.iter().filter(|c| c.ppid != c.pid) {
        *started.entry(c.ppid).or_default() += c.folded.max(1);
    }
    for p in &trace.processes {
        let Some(s) = p.syscalls.iter().find(|s| s.name == "rt_sigaction") else { continue };
        let children = started.get(&p.pid).copied().unwrap_or(0);
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
            evidence: Evidence::new(trace, "rt_sigaction", s.calls, s.total_ns),
            sites: s.sites.clone(),
            // A set-up's worth stays.
            saving_ns: s.total_ns - s.total_ns * SET_UP.min(s.calls) / s.calls.max(1),
            why,
            fixes: vec![fix],
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
    fn dispositions_per_child_started() {
        let mut t = trace(100_000_000, &[("rt_sigaction", 100, 100_000)]);
        t.processes.extend((100..105).map(|pid| Process { pid, ppid: 7, comm: "true".into(), ..Default::default() }));
        let f = check(&t);
        assert!(f[0].why.contains("20 rt_sigaction calls for each of the 5 processes"), "{}", f[0].why);
    }
}
