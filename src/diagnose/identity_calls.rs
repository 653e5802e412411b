//! identity-calls: getpid, gettid, getuid and the like over and over. glibc
//! no longer caches getpid (since 2.25), so each is a real syscall; the
//! answer does not change (getppid only when the parent dies). The working
//! directory too (getcwd), in a process that does not change it: Python's
//! os.path.abspath() asks for it on every call.

use super::{Evidence, Finding, Fix};
use crate::human::thousands;
use crate::model::Trace;

pub const ID: &str = "identity-calls";

const IDENTITY: &[&str] = &["getpid", "gettid", "getppid", "getuid", "geteuid", "getgid", "getegid", "getpgrp", "getsid"];

pub fn check(trace: &Trace) -> Vec<Finding> {
    let mut out = Vec::new();
    for p in &trace.processes {
        // The working directory is a fixed answer only where it stays put.
        let moves: u64 = p.syscalls.iter().filter(|s| s.name == "chdir" || s.name == "fchdir").map(|s| s.calls).sum();
        let fixed_cwd = |s: &&crate::model::SyscallStats| s.name == "getcwd" && moves * 10 < s.calls;
        let mut ids: Vec<_> = p.syscalls.iter().filter(|s| IDENTITY.contains(&s.name.as_str()) || fixed_cwd(s)).collect();
        // The most asked first, and named by the evidence: the process's
        // syscalls are in order of sampled time, where three calls that
        // caught a tick can come before 5,000 that caught none.
        ids.sort_by_key(|s| std::cmp::Reverse(s.calls));
        let calls: u64 = ids.iter().map(|s| s.calls).sum();
        if calls < 2 {
            continue;
        }
        let ns: u64 = ids.iter().map(|s| s.total_ns).sum();
        let what: Vec<String> = ids.iter().map(|s| format!("{} × {}", thousands(s.calls), s.name)).collect();
        let sites: Vec<_> = ids.iter().flat_map(|s| s.sites.clone()).collect();
        let mut why = String::from("the process asks for its own identity again and again; the answer does not change while it runs");
        let mut fixes = vec![Fix::code("ask once and keep the answer (refresh a cached pid after fork())")];
        let cwd = ids.iter().find(|s| s.name == "getcwd").map_or(0, |s| s.calls);
        if cwd * 2 > calls {
            why = format!(
                "the process asks for its working directory again and again ({} × getcwd, {} chdir): it changes only when the \
                 process changes directory",
                thousands(cwd),
                thousands(moves)
            );
            fixes = vec![Fix::code(
                "read the working directory once and keep it (again after a chdir); Python's os.path.abspath() and \
                 os.path.realpath() of a relative path call os.getcwd() each time: join relative paths to a directory read once",
            )];
        }
        let per_record = super::pid_per_record(trace, p.pid);
        if let Some(r) = &per_record {
            why = format!(
                "a getpid for about every write ({} and {}): a logger stamping each record with the pid; glibc stopped \
                 caching the pid in 2.25, so each one is a syscall",
                thousands(r.getpid),
                thousands(r.writes)
            );
            if r.python {
                fixes.insert(
                    0,
                    Fix::code(
                        "Python's logging asks os.getpid() for every record (LogRecord.process): set logging.logProcesses = False \
                         where no format shows %(process)d",
                    ),
                );
            }
            if r.ruby {
                fixes.insert(
                    0,
                    Fix::code(
                        "Ruby's Logger stamps every record with Process.pid (its default formatter): set log.formatter to a proc \
                         that prints a pid kept once (taken again after fork), or none",
                    ),
                );
            }
        }
        out.push(Finding {
            id: ID.into(),
            what: what.join(", "),
            pid: Some(p.pid),
            // A pid per log record comes with each record written.
            evidence: Evidence { per_item: per_record.is_some(), ..Evidence::new(trace, &ids[0].name, calls, ns) },
            sites,
            saving_ns: ns,
            why,
            fixes,
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
    fn a_pid_per_log_record() {
        let mut t = trace(1_000_000_000, &[("getpid", 10_000, 1_000_000), ("write", 10_000, 9_000_000)]);
        let f = check(&t);
        assert!(f[0].why.starts_with("a getpid for about every write (10,000 and 10,000)"), "{}", f[0].why);
        assert!(!f[0].fixes[0].text.contains("logProcesses"), "no Python frames");
        let s = site(&mut t, &["__getpid", "PyOS_getpid", "_PyEval_EvalFrameDefault"]);
        t.processes[0].syscalls[0].sites = s;
        assert!(check(&t)[0].fixes[0].text.contains("logging.logProcesses = False"));
        // Writes ten times as many as the pids: not one per record.
        let f = check(&trace(1_000_000_000, &[("getpid", 10_000, 1_000_000), ("write", 100_000, 9_000_000)]));
        assert!(f[0].why.starts_with("the process asks"));
    }

    #[test]
    fn the_working_directory_asked_again_and_again() {
        let f = check(&trace(1_000_000_000, &[("getcwd", 20_000, 10_000_000)]));
        assert_eq!(f[0].what, "20,000 × getcwd");
        assert!(f[0].why.contains("working directory"), "{}", f[0].why);
        assert!(f[0].fixes[0].text.contains("os.path.abspath"));
        // A walk that changes directory for each: its answers change.
        assert!(check(&trace(1_000_000_000, &[("getcwd", 20_000, 10_000_000), ("chdir", 10_000, 1_000)])).is_empty());
    }

    #[test]
    fn the_most_asked_leads_whatever_the_ticks() {
        // Three getcwd caught a tick, 5,000 getpid none (sampled time).
        let f = check(&trace(1_000_000_000, &[("getcwd", 3, 250_000), ("getpid", 5_000, 0), ("gettid", 2, 0)]));
        assert_eq!(f[0].what, "5,000 × getpid, 3 × getcwd, 2 × gettid");
        assert_eq!(f[0].evidence.syscall, "getpid");
    }

    #[test]
    fn once_is_fine() {
        assert!(check(&trace(1_000_000_000, &[("getpid", 1, 100), ("read", 1000, 1000)])).is_empty());
    }
}
