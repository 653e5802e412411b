//! failing-calls: the same syscall failing with the same errno over and
//! over: ENOTTY ioctls asking whether a file is a terminal, EBADF sweeps
//! closing fds that are not open, ENOENT on one path looked for again and
//! again. A failure that repeats is an answer that could be kept.

use super::{Evidence, Finding, Fix};
use crate::human::{quoted, thousands};
use crate::model::{Argument, Trace};

pub const ID: &str = "failing-calls";

fn advice(syscall: &str, errno: &str) -> &'static str {
    match (syscall, errno) {
        ("ioctl", "ENOTTY") => "the program asks again and again whether a file is a terminal (isatty): ask once per fd",
        ("close", "EBADF") => "closing fds that are not open (a close-everything sweep): use close_range(2) or closefrom(), or track what is open",
        (_, "ENOENT") => {
            "looking for a file that is not there, again and again: remember that it is missing, or fix the search path so it is found first"
        }
        (_, "EAGAIN") => "retrying a non-blocking call that is not ready: wait for readiness (poll/epoll) instead",
        _ => "the same call keeps failing the same way: find out why once and stop making it, or keep the answer",
    }
}

pub fn check(trace: &Trace) -> Vec<Finding> {
    let mut out = Vec::new();
    for p in &trace.processes {
        for s in &p.syscalls {
            for (errno, &n) in &s.errnos {
                if n < 2 {
                    continue;
                }
                // The path or fd that failed most, when there is one.
                let arg = trace.arguments.iter().filter(|a| a.pid == p.pid && a.nr == s.nr && a.errors > 0).max_by_key(|a| a.errors);
                let on = match arg.map(|a| &a.argument) {
                    Some(Argument::Path { path: Some(path), .. }) => format!("({})", quoted(path)),
                    Some(Argument::Fd { fd }) => format!("(fd {fd})"),
                    _ => String::new(),
                };
                let ns = s.total_ns * n / s.calls.max(1);
                out.push(Finding {
                    id: ID.into(),
                    what: format!("{} × {}{on} failing with {errno}", thousands(n), s.name),
                    pid: Some(p.pid),
                    evidence: Evidence::new(trace, &s.name, n, ns),
                    sites: arg.map_or_else(|| s.sites.clone(), |a| a.sites.clone()),
                    saving_ns: ns,
                    why: format!(
                        "{} of {} {} calls failed with {errno}: the same question, the same answer",
                        thousands(n),
                        thousands(s.calls),
                        s.name
                    ),
                    fixes: vec![Fix::code(advice(&s.name, errno))],
                    tradeoff: None,
                    prove: None,
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::testing::*;

    #[test]
    fn the_same_failure_over_and_over() {
        let mut t = trace(1_000_000_000, &[("ioctl", 1000, 100_000)]);
        t.processes[0].syscalls[0].errnos.insert("ENOTTY".into(), 1000);
        argument(&mut t, "ioctl", Argument::Fd { fd: 3 }, 1000, 100_000).errors = 1000;
        let f = check(&t);
        assert_eq!(f[0].what, "1,000 × ioctl(fd 3) failing with ENOTTY");
        assert!(f[0].fixes[0].text.contains("isatty"));
    }

    #[test]
    fn a_single_failure_is_fine() {
        let mut t = trace(1_000_000_000, &[("access", 1, 100)]);
        t.processes[0].syscalls[0].errnos.insert("ENOENT".into(), 1);
        assert!(check(&t).is_empty());
    }
}
