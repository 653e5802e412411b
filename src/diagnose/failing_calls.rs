//! failing-calls: the same syscall failing with the same errno over and
//! over: ENOTTY ioctls asking whether a file is a terminal, EBADF sweeps
//! closing fds that are not open, ENOENT on one path looked for again and
//! again. A failure that repeats is an answer that could be kept.

use super::{Evidence, Finding, Fix};
use crate::human::{quoted, thousands};
use crate::linux::syscalls::{self, ArgKind};
use crate::model::{Argument, ArgumentStats, Trace};
use foldhash::HashMap;

pub const ID: &str = "failing-calls";

fn advice(syscall: &str, errno: &str) -> &'static str {
    match (syscall, errno) {
        ("ioctl", "ENOTTY") => "the program asks again and again whether a file is a terminal (isatty): ask once per fd",
        ("execve" | "execveat", "ENOENT") => {
            "execvp or the shell tries each directory of PATH in turn: put the one that holds the program earlier in PATH, or run it by its full path"
        }
        ("close", "EBADF") => "closing fds that are not open (a close-everything sweep): use close_range(2) or closefrom(), or track what is open",
        ("connect", "ENOENT" | "ECONNREFUSED") => {
            "connecting again and again to a service that is not there (a Unix socket's path that does not exist, a port \
             nobody listens on: nscd, uuidd, a syslog or metrics daemon): run the service, or stop asking after the first \
             failure and retry on a timer"
        }
        (_, "ENOENT") => {
            "looking for a file that is not there, again and again: remember that it is missing, or fix the search path so it is found first"
        }
        (_, "EAGAIN") => "retrying a non-blocking call that is not ready: wait for readiness (poll/epoll) instead",
        _ => "the same call keeps failing the same way: find out why once and stop making it, or keep the answer",
    }
}

/// Failures that are how a call normally ends, not a question asked again:
/// a shell's wait4 finding no child left, a blocking call interrupted by a
/// signal (and restarted by the kernel), a signal wait ending by a signal,
/// a timed wait running out (a thread pool's condition variable: xz -T2),
/// a futex whose word changed before the wait (the lock protocol's lost
/// race), a non-blocking connect under way, a readlink of a file that is
/// not a link (realpath() asks each component of a path so: gcc's cc1
/// resolves every include directory that way; a path asked again is
/// repeated-path's).
fn is_normal(syscall: &str, errno: &str) -> bool {
    errno.starts_with("ERESTART")
        || matches!(errno, "EINTR" | "ETIMEDOUT" | "EINPROGRESS")
        || matches!(
            (syscall, errno),
            ("wait4" | "waitid", "ECHILD") | ("rt_sigsuspend" | "pause" | "rt_sigtimedwait" | "futex", _) | ("readlink" | "readlinkat", "EINVAL")
        )
}

/// The rule alone, as its tests run it.
#[cfg(test)]
fn check(trace: &Trace) -> Vec<Finding> {
    check_shared(trace, &super::Shared::new(trace))
}

pub fn check_shared(trace: &Trace, shared: &super::Shared) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut failed_again: HashMap<(u32, u32), Vec<&ArgumentStats>> = HashMap::default();
    let loaders = shared.loader_lookups();
    // An xattr call's key has no attribute name: ls -l asks each directory
    // for its access and its default ACL, two questions, not one twice.
    // A relative name under a directory fd is another file under another
    // directory: rsync's receiver asks each destination directory by name.
    let again = |a: &ArgumentStats| {
        let asked_again = a.errors >= if a.syscall.ends_with("xattr") { 3 } else { 2 };
        asked_again && super::names_one_file(trace, a)
    };
    // An fd closed about as often as it was asked about is a new file at
    // each question: Python's open() asks each file it opens whether it
    // is a terminal, and the number comes back for the next one.
    let closes = super::closes_by_fd(trace);
    // Not a connect: its question is the address, whatever new socket asks
    // it (libuuid's uuid1() tries uuidd on a fresh socket each time).
    let reused = |a: &ArgumentStats| match a.argument {
        Argument::Fd { fd } => a.syscall != "connect" && closes.get(&(a.pid, fd)).is_some_and(|&c| c * 2 >= a.errors),
        _ => false,
    };
    for a in trace.arguments.iter().filter(|a| again(a) && !reused(a) && !loaders.made(a)) {
        failed_again.entry((a.pid, a.nr)).or_default().push(a);
    }
    // A process found in PATH after failed execs: path-search's.
    let searched_path = super::path_search::exec_searches(trace);
    for p in &trace.processes {
        for s in &p.syscalls {
            let path_search = searched_path.contains(&p.pid) && matches!(s.name.as_str(), "execve" | "execveat");
            let keyed = syscalls::by_nr(s.nr).is_some_and(|i| i.arg != ArgKind::None);
            // The arguments of this syscall that failed more than once.
            let repeated = failed_again.get(&(p.pid, s.nr)).map_or(&[][..], Vec::as_slice);
            // Their failures with a normal ending (a readlink's EINVAL,
            // gcc's /usr asked 205 times) are none of another errno's.
            let normal: u64 = s.errnos.iter().filter(|(e, _)| is_normal(&s.name, e)).map(|(_, &n)| n).sum();
            let repeated_failures = repeated.iter().map(|a| a.errors).sum::<u64>().saturating_sub(normal);
            for (errno, &failed) in &s.errnos {
                if failed < 2 || is_normal(&s.name, errno) || (path_search && errno == "ENOENT") {
                    continue;
                }
                // With an argument to tell calls apart, only the failures
                // of an argument asked about again count: a walk whose
                // every file fails once (ls -l's lgetxattr ENODATA) asks
                // new questions. Per-argument stats do not split errors by
                // errno, so a syscall failing in several ways names no
                // argument, and counts at most its failures with this errno,
                // and at most those of repeated arguments that cannot be
                // normal endings.
                let n = if keyed { failed.min(repeated_failures) } else { failed };
                if n < 2 {
                    continue;
                }
                let arg = if s.errnos.len() == 1 { repeated.iter().rev().max_by_key(|a| a.errors).copied() } else { None };
                // Failures spread over many arguments, each asked about a
                // few times (make stats each missing target twice): the
                // one named does not hold them.
                let more = match arg {
                    Some(a) if a.errors * 2 < n && repeated.len() > 1 => format!(" and {} more", thousands(repeated.len() as u64 - 1)),
                    _ => String::new(),
                };
                let on = match arg.map(|a| &a.argument) {
                    Some(Argument::Path { path: Some(path), .. }) => format!("({}{more})", quoted(path)),
                    Some(Argument::Fd { fd }) => format!("(fd {fd}{more})"),
                    _ => String::new(),
                };
                // An exec that fails is a path lookup; the one that runs a
                // program took the ticks: no share of their time.
                let ns = if matches!(s.name.as_str(), "execve" | "execveat") { 0 } else { s.total_ns * n / s.calls.max(1) };
                out.push(Finding {
                    id: ID.into(),
                    what: format!("{} × {}{on} failing with {errno}", thousands(n), s.name),
                    pid: Some(p.pid),
                    evidence: Evidence::new(trace, &s.name, n, ns),
                    sites: arg.map_or_else(|| s.sites.clone(), |a| a.sites.clone()),
                    saving_ns: ns,
                    why: format!(
                        "{} of {} {} calls failed with {errno}{}: the same question, the same answer",
                        thousands(n),
                        thousands(s.calls),
                        s.name,
                        if keyed { ", on arguments asked about before" } else { "" }
                    ),
                    fixes: vec![Fix::code(advice(&s.name, errno))],
                    ..Default::default()
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
    fn a_readlink_of_a_file_that_is_no_link_is_an_answer() {
        // realpath() asks each component: EINVAL is "not a link".
        let mut t = trace(1_000_000_000, &[("readlink", 944, 900_000)]);
        t.processes[0].syscalls[0].errnos.insert("EINVAL".into(), 944);
        argument(&mut t, "readlink", path("/usr/lib/gcc"), 20, 20_000).errors = 20;
        assert!(check(&t).is_empty());
        t.processes[0].syscalls[0].errnos = [("ENOENT".to_string(), 944)].into();
        assert_eq!(check(&t).len(), 1, "a missing file asked again is still one");
    }

    #[test]
    fn a_normal_ending_asked_again_lends_no_repeats_to_another_errno() {
        // gcc's cc1: 944 readlinks answering "not a link" (205 of them of
        // /usr), and 137 of include directories that do not exist, each
        // asked once.
        let mut t = trace(1_000_000_000, &[("readlink", 1081, 900_000)]);
        t.processes[0].syscalls[0].errnos = [("EINVAL".to_string(), 944), ("ENOENT".to_string(), 137)].into();
        argument(&mut t, "readlink", path("/usr"), 205, 20_000).errors = 205;
        assert!(check(&t).is_empty(), "{:?}", check(&t).iter().map(|f| &f.what).collect::<Vec<_>>());
        // A missing directory asked 300 times beside 100 normal endings:
        // at least 200 of the repeated failures are ENOENT, whichever
        // arguments the normal ones fell on.
        t.processes[0].syscalls[0].errnos = [("EINVAL".to_string(), 100), ("ENOENT".to_string(), 437)].into();
        t.arguments[0].calls = 50;
        t.arguments[0].errors = 50;
        argument(&mut t, "readlink", path("/usr/local/include/x"), 300, 30_000).errors = 300;
        let f = check(&t);
        assert_eq!(f.len(), 1);
        assert!(f[0].what.starts_with("250 × readlink failing with ENOENT"), "{}", f[0].what);
    }

    #[test]
    fn an_fd_closed_between_questions_is_a_new_file_each_time() {
        // Python's open() asks each file it opens whether it is a terminal.
        let mut t = trace(1_000_000_000, &[("ioctl", 300, 30_000), ("close", 300, 30_000)]);
        t.processes[0].syscalls[0].errnos.insert("ENOTTY".into(), 300);
        argument(&mut t, "ioctl", Argument::Fd { fd: 3 }, 300, 30_000).errors = 300;
        argument(&mut t, "close", Argument::Fd { fd: 3 }, 300, 30_000);
        assert!(check(&t).is_empty());
        // Closed once at the end: the same file asked about 300 times.
        t.arguments.last_mut().unwrap().calls = 1;
        assert_eq!(check(&t).len(), 1);
    }

    #[test]
    fn new_questions_each_failing_once_are_not_repeats() {
        // ls -l: lgetxattr fails with ENODATA once per file.
        let mut t = trace(1_000_000_000, &[("lgetxattr", 1000, 100_000)]);
        t.processes[0].syscalls[0].errnos.insert("ENODATA".into(), 1000);
        argument(&mut t, "lgetxattr", path("/d"), 3, 300).errors = 3;
        // ls -l's two ACL questions per directory: different attributes.
        argument(&mut t, "lgetxattr", path("/e"), 2, 200).errors = 2;
        let f = check(&t);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].evidence.calls, 3, "only the path asked about again: {}", f[0].what);
        assert!(f[0].is_small());
    }

    #[test]
    fn a_relative_name_under_a_directory_fd_is_a_new_question() {
        let mut t = trace(1_000_000_000, &[("openat", 400, 400_000)]);
        t.processes[0].syscalls[0].errnos.insert("ENOENT".into(), 400);
        let under = |dirfd| Argument::Path { path: Some("5.36.0".into()), dirfd, null: false, cut: false, raw: None };
        argument(&mut t, "openat", under(Some(7)), 400, 400_000).errors = 400;
        assert!(check(&t).is_empty());
        t.arguments[0].argument = under(None);
        assert_eq!(check(&t).len(), 1, "relative to a working directory that never moves: one file");
    }

    #[test]
    fn a_connect_failing_on_a_new_socket_each_time_is_asked_again() {
        // libuuid's uuid1(): socket, connect to uuidd's missing path, close.
        let mut t = trace(1_000_000_000, &[("connect", 20_000, 90_000_000), ("close", 20_000, 80_000_000)]);
        t.processes[0].syscalls[0].errnos.insert("ENOENT".into(), 20_000);
        argument(&mut t, "connect", Argument::Fd { fd: 3 }, 20_000, 90_000_000).errors = 20_000;
        argument(&mut t, "close", Argument::Fd { fd: 3 }, 20_000, 80_000_000);
        let f = check(&t);
        assert_eq!(f.len(), 1);
        assert!(f[0].fixes[0].text.contains("a service that is not there"), "{:?}", f[0].fixes);
    }

    #[test]
    fn failures_spread_over_many_arguments_say_so() {
        // make stats each of its 300 missing targets twice.
        let mut t = trace(1_000_000_000, &[("stat", 600, 600_000)]);
        t.processes[0].syscalls[0].errnos.insert("ENOENT".into(), 600);
        for i in 0..300 {
            argument(&mut t, "stat", path(&format!("t{i}")), 2, 2_000).errors = 2;
        }
        let f = check(&t);
        assert_eq!(f[0].what, "600 × stat(\"t0\" and 299 more) failing with ENOENT");
    }

    #[test]
    fn a_syscall_failing_in_several_ways_names_no_argument() {
        let mut t = trace(1_000_000_000, &[("openat", 1000, 100_000)]);
        t.processes[0].syscalls[0].errnos.insert("ENOENT".into(), 600);
        t.processes[0].syscalls[0].errnos.insert("ENOTDIR".into(), 400);
        argument(&mut t, "openat", path("/etc/passwd/x"), 400, 1).errors = 400;
        argument(&mut t, "openat", path("/missing"), 600, 1).errors = 600;
        let f = check(&t);
        assert_eq!(f.len(), 2);
        assert!(f.iter().all(|f| !f.what.contains('"')), "no argument named: {:?}", f.iter().map(|f| &f.what).collect::<Vec<_>>());
    }

    #[test]
    fn normal_endings_are_not_failures() {
        let mut t = trace(
            1_000_000_000,
            &[("wait4", 500, 1_000_000), ("rt_sigsuspend", 500, 1000), ("read", 500, 1000), ("futex", 500, 1000), ("connect", 500, 1000)],
        );
        let errnos = [("ECHILD", 500), ("ERESTARTNOHAND", 500), ("EINTR", 500), ("ETIMEDOUT", 300), ("EINPROGRESS", 500)];
        for (s, (errno, n)) in t.processes[0].syscalls.iter_mut().zip(errnos) {
            s.errnos.insert(errno.into(), n);
        }
        t.processes[0].syscalls[3].errnos.insert("EAGAIN".into(), 200);
        assert!(check(&t).is_empty(), "{:?}", check(&t).iter().map(|f| &f.what).collect::<Vec<_>>());
    }

    #[test]
    fn a_single_failure_is_fine() {
        let mut t = trace(1_000_000_000, &[("access", 1, 100)]);
        t.processes[0].syscalls[0].errnos.insert("ENOENT".into(), 1);
        assert!(check(&t).is_empty());
    }
}
