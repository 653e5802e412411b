//! repeated-path: the same path looked up (stat, access, readlink) or
//! opened over and over: config files re-read per request, name-service
//! files re-read per lookup, open/read/close of one file in a loop; and
//! many files looked up alike, polled for changes, as one finding. The
//! zone file with TZ unset is tz-unset's.

use foldhash::HashMap;

use super::{called_through, environment_of, Evidence, Finding, Fix, FixKind, PATH_LOOKUPS, PATH_OPENS};
use crate::human::{duration, quoted, thousands};
use crate::model::{callsite, Argument, ArgumentStats, Trace};

pub const ID: &str = "repeated-path";

/// Libraries behind a repeated path, recognised by their functions, and
/// what makes them cache: a knob (a daemon) or the caller's code.
const KNOWN: &[(&[&str], FixKind, &str)] = &[
    (
        &["getpwnam", "getpwuid", "getgrnam", "getgrgid", "initgroups", "getpwnam_r", "getpwuid_r"],
        FixKind::Configuration,
        "the user/group lookups re-read /etc/passwd and /etc/group each time: run nscd (or sssd) to cache them, or look each user up once",
    ),
    (
        &["getaddrinfo", "gethostbyname", "gethostbyname2", "res_init", "__res_maybe_init"],
        FixKind::Configuration,
        "name resolution re-reads /etc/hosts, /etc/resolv.conf and nsswitch.conf: run a caching resolver (nscd, systemd-resolved) or resolve once",
    ),
    (
        &["iconv_open"],
        FixKind::Code,
        "iconv_open per conversion: glibc loads the charset's gconv module (dlopen: open, mmap, mprotect) and unloads it a few \
         iconv_close calls after its last user; open one iconv_t per charset pair once and keep it (iconv(cd, NULL, NULL, NULL, NULL) resets it)",
    ),
    (&["setlocale", "newlocale"], FixKind::Code, "locale set-up per call: create it once (newlocale) and reuse it (uselocale)"),
];

/// Files whose re-reading has a known cause, by where they are, and what
/// stops it.
const KNOWN_PATHS: &[(&str, &str)] = &[(
    "/sys/fs/cgroup/",
    "the program asks for its container's limits (cgroup files) again each time: read them once and again on a timer; \
     a JVM re-reads them on each Runtime.availableProcessors() and memory query (JDK-8227006, JDK-8232207; \
     newer JDKs keep the CPU count for 20 ms, and OpenJDK 17's OperatingSystemMXBean memory figures read them on every \
     call): -XX:ActiveProcessorCount=N fixes the CPU count; ask for memory figures once per interval, not per request",
)];

/// Where apt keeps its package lists, and why it re-reads a compressed one:
/// with Acquire::GzipIndexes (Debian's container images set it, to keep
/// their layers small) the lists stay compressed on disk, and each record
/// apt looks up (a description for `apt-cache search`, `show`) reopens the
/// list and decompresses it again from its start up to the record.
const APT_LISTS: &str = "/var/lib/apt/lists/";
const APT_LISTS_FIX: &str = "apt keeps its package lists compressed (Acquire::GzipIndexes \"true\", which Debian's container \
     images set in /etc/apt/apt.conf.d/docker-gzip-indexes), so each package record it reads reopens a list and \
     decompresses it again from its start: remove that setting (or set it to \"false\") and run apt-get update, which \
     stores the lists uncompressed";

/// The kernel's random devices: opened per use, each opening gives new
/// bytes, so keeping what one read said is no fix (it would hand out the
/// same bytes again); getrandom(2) needs no descriptor at all.
const RANDOM_DEVICES: &[&str] = &["/dev/urandom", "/dev/random"];
const RANDOM_FIX: &str = "call getrandom(2) for the bytes (glibc 2.25, Linux 3.17 and later; getentropy() for up to 256 bytes): no \
     open, read and close per use; or open the device once and keep the fd";

/// Names of compressed files: a compressed stream cannot seek back, so a
/// reader that goes back in it starts again from its beginning.
const COMPRESSED: &[&str] = &[".gz", ".lz4", ".xz", ".zst", ".bz2", ".lzma", ".Z", ".br"];

fn compressed(path: &str) -> bool {
    COMPRESSED.iter().any(|suffix| path.ends_with(suffix))
}

/// Syscalls that read an fd's file.
const READS: &[&str] = &["read", "pread64", "readv", "preadv", "preadv2"];

/// The reads and closes that follow a path's opens: those of the one fd
/// the process closes about as often as it opens the path (within 5%). The
/// opens' fds are not recorded, but a program that opens, reads and closes
/// one file in a loop gets the same fd back each time; an fd that other
/// files share, or two that match, say nothing.
struct AfterOpens {
    fd: i64,
    reads: u64,
    reads_ns: u64,
    closes: u64,
    closes_ns: u64,
}

/// Each process's closes and reads by fd, gathered once: a trace can hold
/// hundreds of thousands of arguments and as many repeats.
#[derive(Default)]
struct FdCalls {
    /// (calls, fd, ns) of each fd's closes, per process, by calls.
    closes: HashMap<u32, Vec<(u64, i64, u64)>>,
    /// (calls, ns) of each fd's reads.
    reads: HashMap<(u32, i64), (u64, u64)>,
    /// Each fd's syncs.
    syncs: HashMap<(u32, i64), u64>,
}

impl FdCalls {
    fn of(trace: &Trace) -> FdCalls {
        let mut calls = FdCalls::default();
        for x in &trace.arguments {
            let Argument::Fd { fd } = x.argument else { continue };
            if x.syscall == "close" {
                calls.closes.entry(x.pid).or_default().push((x.calls, fd, x.total_ns));
            } else if READS.contains(&x.syscall.as_str()) {
                let r = calls.reads.entry((x.pid, fd)).or_default();
                *r = (r.0 + x.calls, r.1 + x.total_ns);
            } else if super::sync_per_op::SYNCS.contains(&x.syscall.as_str()) {
                *calls.syncs.entry((x.pid, fd)).or_default() += x.calls;
            }
        }
        for closes in calls.closes.values_mut() {
            closes.sort_unstable();
        }
        calls
    }

    /// The closes, by fd, of the process's fds closed about as often as
    /// `a`'s path is opened.
    fn closed_as_often(&self, a: &ArgumentStats) -> &[(u64, i64, u64)] {
        let opened = a.calls - a.errors.min(a.calls);
        let Some(closes) = self.closes.get(&a.pid) else { return &[] };
        let from = closes.partition_point(|c| c.0 * 100 < opened * 95);
        let to = closes.partition_point(|c| c.0 * 100 <= opened * 105);
        &closes[from..to]
    }

    /// The fd's reads count when at least every other opening is read:
    /// fewer are other files' that got the same fd (node's start-up reads
    /// its modules on the fd its appendFileSync gets later).
    fn after_opens(&self, a: &ArgumentStats) -> Option<AfterOpens> {
        let [(calls, fd, ns)] = *self.closed_as_often(a) else { return None };
        let (reads, reads_ns) = self.reads.get(&(a.pid, fd)).copied().filter(|&(reads, _)| reads * 2 >= a.calls).unwrap_or_default();
        Some(AfterOpens { fd, reads, reads_ns, closes: calls, closes_ns: ns })
    }

    /// Whether every fd that may be the path's is synced at least every
    /// other opening: a file (a directory) opened to be synced.
    fn synced_each_time(&self, a: &ArgumentStats) -> bool {
        let fds = self.closed_as_often(a);
        !fds.is_empty() && fds.iter().all(|&(_, fd, _)| self.syncs.get(&(a.pid, fd)).is_some_and(|&n| n * 2 >= a.calls))
    }
}

/// Calls that take a path's file away: a file opened after one of them is a
/// new file, not the same one again.
const REMOVALS: &[&str] = &["unlink", "unlinkat", "rename", "renameat", "renameat2"];

/// The rule alone, as its tests run it.
#[cfg(test)]
fn check(trace: &Trace) -> Vec<Finding> {
    check_shared(trace, &super::Shared::new(trace))
}

pub fn check_shared(trace: &Trace, shared: &super::Shared) -> Vec<Finding> {
    // Per (process, path): how often the file was removed or renamed away.
    let mut removed: HashMap<(u32, &str), u64> = HashMap::default();
    for a in trace.arguments.iter().filter(|a| REMOVALS.contains(&a.syscall.as_str())) {
        if let Argument::Path { path: Some(path), .. } = &a.argument {
            *removed.entry((a.pid, path.as_str())).or_default() += a.calls;
        }
    }
    let loaders = shared.loader_lookups();
    // The repeats of one file each, with what each is: a lookup or an open.
    let mut repeats: Vec<(&ArgumentStats, &str, bool)> = Vec::new();
    for a in &trace.arguments {
        let lookup = PATH_LOOKUPS.contains(&a.syscall.as_str());
        let open = PATH_OPENS.contains(&a.syscall.as_str());
        let Argument::Path { path: Some(path), .. } = &a.argument else { continue };
        // "" with AT_EMPTY_PATH is fstat of the dirfd: no path is looked up.
        // With TZ unset, a repeated stat of the zone file is tz-unset's.
        let tz_unset = || environment_of(trace, Some(a.pid)).tz.is_none();
        if path.is_empty() || !(lookup || open) || a.calls < 2 || (lookup && path == "/etc/localtime" && tz_unset()) {
            continue;
        }
        // A path that is missing each time it is asked (most calls fail):
        // failing-calls tells it, as a file looked for in vain.
        if a.errors * 2 > a.calls || loaders.made(a) {
            continue;
        }
        if !super::names_one_file(trace, a) {
            continue; // a relative name under a moving directory: other files each time
        }
        if removed.get(&(a.pid, path.as_str())).is_some_and(|r| r * 2 >= a.calls) {
            continue; // created and deleted per operation (a journal, a lock file): the answer changes
        }
        repeats.push((a, path, open));
    }
    let fd_calls = FdCalls::of(trace);
    let polled = polled_sets(&repeats);
    let mut out: Vec<Finding> = polled.iter().map(|set| polling(trace, &set.iter().map(|&i| repeats[i].0).collect::<Vec<_>>())).collect();
    let mut in_a_set: foldhash::HashSet<usize> = polled.iter().flatten().copied().collect();
    let together = together_sets(&repeats, &in_a_set);
    out.extend(together.iter().map(|set| read_together(trace, &set.iter().map(|&i| repeats[i]).collect::<Vec<_>>())));
    in_a_set.extend(together.iter().flatten().copied());
    for (i, &(a, path, open)) in repeats.iter().enumerate() {
        if in_a_set.contains(&i) {
            continue;
        }
        // Opened to be synced each time (sqlite syncs its database's
        // directory after each transaction, beside its journal): the syncs
        // are the cost, and sync-per-op's fix, fewer transactions, is the
        // fix of both.
        if open && fd_calls.synced_each_time(a) {
            continue;
        }
        let after = if open { fd_calls.after_opens(a) } else { None };
        let read_again = after.as_ref().filter(|f| f.reads > 0);
        let random = RANDOM_DEVICES.contains(&path);
        let mut fixes = known_fixes(trace, a, path);
        if random {
            fixes.push(Fix::code(RANDOM_FIX));
        }
        if read_again.is_some() && compressed(path) {
            fixes.push(Fix::code(
                "the file is compressed: each opening decompresses it again from its start (a compressed stream cannot \
                 seek back), so keep it uncompressed, or decompress it once and keep what it says",
            ));
        }
        // A library's own remedy in code (iconv's, locale set-up) is the
        // fix: the file is its, not the program's to keep open.
        if !library_code(&fixes) && !random {
            fixes.push(Fix::code(if open {
                "open it once and keep the fd (or read it once and keep the contents)"
            } else {
                "look it up once and cache the result (re-check on a timer or on inotify if it can change)"
            }));
        }
        // The churn: each open comes with its reads and a close, which
        // go too when it is read once.
        let (what, saving_ns) = match (&after, open) {
            (Some(f), _) => (
                format!(
                    "{} × {}({}) with {}{} closes of fd {}",
                    thousands(a.calls),
                    a.syscall,
                    quoted(path),
                    if f.reads > 0 { format!("{} reads and ", thousands(f.reads)) } else { String::new() },
                    thousands(f.closes),
                    f.fd
                ),
                all_but_one(a) + (f.reads_ns + f.closes_ns) - (f.reads_ns + f.closes_ns) / a.calls,
            ),
            (None, true) => {
                (format!("{} × {}({}) and the reads and closes that go with them", thousands(a.calls), a.syscall, quoted(path)), all_but_one(a))
            }
            (None, false) => (format!("{} × {}({})", thousands(a.calls), a.syscall, quoted(path)), all_but_one(a)),
        };
        out.push(Finding {
            id: ID.into(),
            what,
            pid: Some(a.pid),
            evidence: Evidence::new(trace, &a.syscall, a.calls, a.total_ns + after.as_ref().map_or(0, |f| f.reads_ns + f.closes_ns)),
            sites: a.sites.clone(),
            saving_ns,
            why: match read_again {
                _ if random => format!(
                    "random bytes are read by opening {} for each use ({} times): a descriptor opened, read and closed \
                     each time, where one getrandom() call needs none",
                    quoted(path),
                    thousands(a.calls)
                ),
                Some(f) => format!(
                    "the same file is opened {} times and read again after each opening ({}){}; what it says \
                     rarely changes between two of them",
                    thousands(a.calls),
                    match f.reads / a.calls.max(1) {
                        0 => format!("{} reads in all", thousands(f.reads)),
                        1 => "a read each".to_string(),
                        n => format!("{} reads each", thousands(n)),
                    },
                    if compressed(path) {
                        ", decompressed again each time: CPU time of the program's own, which the saving below does not count"
                    } else {
                        ""
                    }
                ),
                None => format!(
                    "the same path is {} {} times; the answer rarely changes between two of them",
                    if open { "opened" } else { "looked up" },
                    thousands(a.calls)
                ),
            },
            fixes,
            tradeoff: (!random).then(|| "a cached answer misses changes to the file until it is re-read".into()),
            ..Default::default()
        });
    }
    out
}

/// The fixes known for a file, by the library that made the calls or by
/// where the file is.
fn known_fixes(trace: &Trace, a: &ArgumentStats, path: &str) -> Vec<Fix> {
    let mut fixes = Vec::new();
    for (functions, kind, advice) in KNOWN {
        if called_through(trace, &a.sites, functions) {
            fixes.push(Fix { kind: *kind, text: advice.to_string() });
        }
    }
    for (prefix, advice) in KNOWN_PATHS {
        if path.starts_with(prefix) {
            fixes.push(Fix::config(*advice));
        }
    }
    if path.starts_with(APT_LISTS) && compressed(path) {
        fixes.push(Fix::config(APT_LISTS_FIX));
    }
    fixes
}

/// Whether a library's own remedy in code is among `fixes` (iconv's).
fn library_code(fixes: &[Fix]) -> bool {
    fixes.iter().any(|f| f.kind == FixKind::Code)
}

/// Files one process looks up or opens about as often as each other (within
/// 5%), at least `MIN_TOGETHER_CALLS` times each and `MIN_TOGETHER` of them:
/// one operation asks about them all each time (a memory or CPU query
/// reading its cgroup files, realpath() stat'ing each component of a path,
/// getpwuid() stat'ing nsswitch.conf and opening /etc/passwd).
const MIN_TOGETHER: usize = 2;
const MIN_TOGETHER_CALLS: u64 = 50;

/// The sets of files read together, by their indices in `repeats`, those
/// in `taken` (polled sets) left out.
fn together_sets(repeats: &[(&ArgumentStats, &str, bool)], taken: &foldhash::HashSet<usize>) -> Vec<Vec<usize>> {
    let mut by_pid: HashMap<u32, Vec<usize>> = HashMap::default();
    for (i, (a, _, _)) in repeats.iter().enumerate() {
        if !taken.contains(&i) && a.calls >= MIN_TOGETHER_CALLS {
            by_pid.entry(a.pid).or_default().push(i);
        }
    }
    let calls = |i: usize| repeats[i].0.calls;
    let mut sets = Vec::new();
    for mut files in by_pid.into_values() {
        files.sort_by_key(|&i| (calls(i), i));
        let mut start = 0;
        while start < files.len() {
            let end = (start..files.len()).take_while(|&j| calls(files[j]) * 100 <= calls(files[start]) * 105).count() + start;
            if end - start >= MIN_TOGETHER {
                sets.push(files[start..end].to_vec());
            }
            start = end;
        }
    }
    sets.sort_unstable();
    sets
}

/// Whether `paths` are the components of one path, walked down: three
/// depths or more, and each one's parent among them but at the top.
fn components_of_one_path(paths: &[&str]) -> bool {
    let depth = |p: &str| p.matches('/').count();
    let depths: std::collections::BTreeSet<usize> = paths.iter().map(|p| depth(p)).collect();
    let top = depths.first().copied().unwrap_or(0);
    depths.len() >= 3
        && paths.iter().all(|p| p.starts_with('/'))
        && paths.iter().filter(|p| depth(p) > top).all(|p| p.rsplit_once('/').is_some_and(|(parent, _)| paths.contains(&parent)))
}

/// One finding for files read together.
fn read_together(trace: &Trace, set: &[(&ArgumentStats, &str, bool)]) -> Finding {
    let calls: u64 = set.iter().map(|(a, _, _)| a.calls).sum();
    let ns: u64 = set.iter().map(|(a, _, _)| a.total_ns).sum();
    let each = calls / set.len() as u64;
    let mut syscalls: Vec<&str> = set.iter().map(|(a, _, _)| a.syscall.as_str()).collect();
    syscalls.sort_unstable();
    syscalls.dedup();
    let mut sites = Vec::new();
    let mut fixes: Vec<Fix> = Vec::new();
    for (a, path, _) in set {
        callsite::merge_shares(&mut sites, &a.sites);
        for fix in known_fixes(trace, a, path) {
            if !fixes.contains(&fix) {
                fixes.push(fix);
            }
        }
    }
    let mut paths: Vec<&str> = set.iter().map(|(_, p, _)| *p).collect();
    paths.sort_unstable();
    paths.dedup();
    let opens = set.iter().any(|(_, _, open)| *open);
    let library_code = library_code(&fixes);
    let walk = components_of_one_path(&paths);
    let (what, why) = if walk {
        let leaf = paths.iter().max_by_key(|p| (p.matches('/').count(), **p)).copied().unwrap_or_default();
        fixes.push(Fix::code("resolve the path once and keep the result; resolve it again only where a link on the way may have changed"));
        (
            format!(
                "{} × {} of the {} components of {}, each about {} times",
                thousands(calls),
                syscalls.join("/"),
                paths.len(),
                quoted(leaf),
                thousands(each)
            ),
            "one path is resolved component by component again and again (realpath(), a language's path resolution): each \
             directory and link on the way is asked about each time, and the answers rarely change"
                .to_string(),
        )
    } else {
        // A library's own remedy in code (iconv's) is the fix, not keeping
        // its files.
        if !library_code {
            fixes.push(Fix::code(if opens {
                "read them once and keep what they say; read them again on a timer (or when inotify says so) if it can change"
            } else {
                "look them up once and keep the answers; again on a timer (or when inotify says so) if they can change"
            }));
        }
        let shown: Vec<String> = paths.iter().take(3).map(|p| quoted(p)).collect();
        (
            format!(
                "{} × {} of {} files read together, each about {} times ({}{}){}",
                thousands(calls),
                syscalls.join("/"),
                paths.len(),
                thousands(each),
                shown.join(", "),
                if paths.len() > 3 { ", …" } else { "" },
                if opens { " and the reads and closes that go with them" } else { "" }
            ),
            format!(
                "these {} files are {} about as often as each other{}",
                set.len(),
                if opens { "opened" } else { "looked up" },
                if library_code {
                    ", by a library call made per item that does not keep them"
                } else {
                    ": one operation asks about them all each time (a status or metrics query, a configuration reload), and \
                     the answers rarely change between two of them"
                }
            ),
        )
    };
    Finding {
        id: ID.into(),
        what,
        pid: Some(set[0].0.pid),
        evidence: Evidence::new(trace, &set[0].0.syscall, calls, ns),
        sites,
        saving_ns: set.iter().map(|(a, _, _)| all_but_one(a)).sum(),
        why,
        fixes,
        tradeoff: (!library_code).then(|| "a cached answer misses changes to the files until they are read again".into()),
        ..Default::default()
    }
}

/// What a file's repeats cost beyond its first look: what looking it up
/// once would save.
fn all_but_one(a: &ArgumentStats) -> u64 {
    a.total_ns - a.total_ns / a.calls
}

/// A poller looks at each of its files about as often as the others, at
/// its period: at least this many files, each looked up at least
/// `MIN_POLLS` times, four in five of them within a quarter of the median.
const MIN_POLLED_FILES: usize = 20;
const MIN_POLLS: u64 = 5;

/// The sets of files one process looks up (stat, access) again and again,
/// each about as often as the others: polled for changes (node's
/// fs.watchFile, chokidar's usePolling, a build tool's watch mode). Each
/// alone is a small repeat; together they are the poller's cost.
/// Each set is given by its indices in `repeats`.
fn polled_sets(repeats: &[(&ArgumentStats, &str, bool)]) -> Vec<Vec<usize>> {
    let mut by_caller: HashMap<(u32, &str), Vec<usize>> = HashMap::default();
    for (i, &(a, path, open)) in repeats.iter().enumerate() {
        // /proc, /sys and /dev are read for their current values, which
        // inotify would not report: a monitor's sampling, not a poll.
        let pseudo = ["/proc/", "/sys/", "/dev/"].iter().any(|p| path.starts_with(p));
        if !open && !pseudo && a.calls >= MIN_POLLS {
            by_caller.entry((a.pid, a.syscall.as_str())).or_default().push(i);
        }
    }
    let calls = |i: &usize| repeats[*i].0.calls;
    let mut sets: Vec<Vec<usize>> = by_caller
        .into_values()
        .filter_map(|mut files| {
            if files.len() < MIN_POLLED_FILES {
                return None;
            }
            files.sort_by_key(calls);
            let median = calls(&files[files.len() / 2]);
            let n = files.len();
            files.retain(|i| calls(i) * 4 >= median * 3 && calls(i) * 4 <= median * 5);
            (files.len() * 5 >= n * 4 && files.len() >= MIN_POLLED_FILES).then_some(files)
        })
        .collect();
    sets.sort_unstable();
    sets
}

/// One finding for a polled set of files.
fn polling(trace: &Trace, set: &[&ArgumentStats]) -> Finding {
    let calls: u64 = set.iter().map(|a| a.calls).sum();
    let ns: u64 = set.iter().map(|a| a.total_ns).sum();
    let each = calls / set.len() as u64;
    let syscall = &set[0].syscall;
    let mut sites = Vec::new();
    for a in set {
        callsite::merge_shares(&mut sites, &a.sites);
    }
    let mut names: Vec<&str> =
        set.iter().filter_map(|a| if let Argument::Path { path: Some(p), .. } = &a.argument { Some(p.as_str()) } else { None }).collect();
    names.sort_unstable();
    let shown: Vec<String> = names.iter().take(3).map(|p| quoted(p)).collect();
    Finding {
        id: ID.into(),
        what: format!(
            "{} × {syscall} of {} files, each about {} times ({}, …)",
            thousands(calls),
            thousands(set.len() as u64),
            thousands(each),
            shown.join(", ")
        ),
        pid: Some(set[0].pid),
        // Each poll of each file is the watcher's item of work; its run is
        // mostly the sleep between polls, so its clock says little.
        evidence: Evidence { per_item: true, ..Evidence::new(trace, syscall, calls, ns) },
        sites,
        saving_ns: set.iter().map(|a| all_but_one(a)).sum(),
        why: format!(
            "the same {} files are looked up again and again, each about as often as the others (about once every {}): \
             they are polled for changes, and nearly every look finds none",
            thousands(set.len() as u64),
            duration(trace.run.duration_ns / each.max(1))
        ),
        fixes: vec![
            Fix::code(
                "be told of changes instead of polling: inotify (node's fs.watch, or chokidar without usePolling or \
                 CHOKIDAR_USEPOLLING; webpack's and vite's watchOptions.poll off; Python watchdog's inotify observer, not its \
                 PollingObserver)",
            ),
            Fix::config("if polling must stay (a network file system, some container mounts): poll fewer files, or less often"),
        ],
        tradeoff: Some(
            "inotify does not see changes made on another host of a network file system, and takes a watch per directory \
             (fs.inotify.max_user_watches)"
                .into(),
        ),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::testing::*;

    #[test]
    fn the_same_path_stated_over_and_over() {
        let mut t = trace(1_000_000_000, &[("newfstatat", 10_000, 10_000_000)]);
        argument(&mut t, "newfstatat", path("/etc/app.conf"), 10_000, 10_000_000);
        let f = check(&t);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].what, "10,000 × newfstatat(\"/etc/app.conf\")");
        assert_eq!(f[0].saving_ns, 10_000_000 - 1000);
    }

    #[test]
    fn a_random_device_opened_per_use_is_told_to_use_getrandom_not_to_keep_its_bytes() {
        // rsync -a: /dev/urandom opened for each file it receives.
        let mut t = trace(1_000_000_000, &[("openat", 5_487, 25_000_000)]);
        argument(&mut t, "openat", path("/dev/urandom"), 5_487, 25_000_000);
        let f = check(&t);
        assert_eq!(f.len(), 1);
        assert!(f[0].why.contains("random bytes"), "{}", f[0].why);
        assert!(f[0].fixes.iter().any(|x| x.text.contains("getrandom(2)")), "{:?}", f[0].fixes);
        assert!(f[0].fixes.iter().all(|x| !x.text.contains("keep the contents")), "{:?}", f[0].fixes);
        assert_eq!(f[0].tradeoff, None);
        // Any other file opened as often keeps the generic advice.
        let mut t = trace(1_000_000_000, &[("openat", 5_487, 25_000_000)]);
        argument(&mut t, "openat", path("/etc/app.conf"), 5_487, 25_000_000);
        let f = check(&t);
        assert!(f[0].fixes.iter().all(|x| !x.text.contains("getrandom")), "{:?}", f[0].fixes);
        assert!(f[0].fixes.iter().any(|x| x.text.contains("keep the contents")), "{:?}", f[0].fixes);
    }

    #[test]
    fn a_path_missing_each_time_is_left_to_failing_calls() {
        let mut t = trace(1_000_000_000, &[("access", 20_000, 20_000_000)]);
        argument(&mut t, "access", path("/etc/app.conf"), 20_000, 20_000_000).errors = 20_000;
        assert!(check(&t).is_empty());
        t.arguments[0].errors = 100;
        assert_eq!(check(&t).len(), 1, "found most times: a repeat");
    }

    #[test]
    fn open_churn_and_a_known_library() {
        let mut t = trace(1_000_000_000, &[("openat", 500, 5_000_000)]);
        let s = site(&mut t, &["__open64", "_nss_files_getpwnam_r", "getpwnam", "lookup_user"]);
        argument(&mut t, "openat", path("/etc/passwd"), 500, 5_000_000).sites = s;
        let f = check(&t);
        assert!(f[0].what.contains("and the reads and closes"));
        assert!(f[0].fixes[0].text.contains("nscd"));
    }

    fn fd(fd: i64) -> Argument {
        Argument::Fd { fd }
    }

    #[test]
    fn the_reads_of_the_fd_closed_as_often_as_the_path_is_opened_go_with_it() {
        let mut t = trace(1_000_000_000, &[("openat", 1000, 2_000_000), ("read", 20_000, 200_000_000), ("close", 1003, 1_000_000)]);
        argument(&mut t, "openat", path("/srv/index.gz"), 1000, 2_000_000);
        argument(&mut t, "read", fd(5), 20_000, 200_000_000);
        argument(&mut t, "close", fd(5), 1003, 1_000_000);
        argument(&mut t, "read", fd(6), 7, 70_000); // another file's
        let f = check(&t);
        assert_eq!(f[0].what, "1,000 × openat(\"/srv/index.gz\") with 20,000 reads and 1,003 closes of fd 5");
        assert!(f[0].why.contains("(20 reads each), decompressed again each time"), "{}", f[0].why);
        assert!(f[0].fixes[0].text.starts_with("the file is compressed"), "{:?}", f[0].fixes);
        assert_eq!(f[0].saving_ns, 203_000_000 - 203_000);
        // Fewer reads than openings: not "a read each".
        t.arguments[1].calls = 600;
        assert!(check(&t)[0].why.contains("(600 reads in all)"), "{}", check(&t)[0].why);
        t.arguments[1].calls = 20_000;
        // Opened and closed, never read (a spawner's /dev/null for a
        // child's stdio): the closes, and no reads claimed.
        t.arguments[1].calls = 0;
        t.arguments[1].total_ns = 0;
        let f = check(&t);
        assert_eq!(f[0].what, "1,000 × openat(\"/srv/index.gz\") with 1,003 closes of fd 5");
        assert!(f[0].why.starts_with("the same path is opened 1,000 times"), "{}", f[0].why);
        assert!(!f[0].fixes.iter().any(|x| x.text.contains("compressed")), "{:?}", f[0].fixes);
        // A few reads on the fd: another file's, not these openings'.
        (t.arguments[1].calls, t.arguments[1].total_ns) = (12, 120_000);
        assert_eq!(check(&t)[0].what, "1,000 × openat(\"/srv/index.gz\") with 1,003 closes of fd 5");
        (t.arguments[1].calls, t.arguments[1].total_ns) = (20_000, 200_000_000);
        // Two fds closed as often: which one is the file's is not known.
        argument(&mut t, "close", fd(6), 1000, 1_000_000);
        let f = check(&t);
        assert!(f[0].what.ends_with("and the reads and closes that go with them"), "{}", f[0].what);
        assert_eq!(f[0].saving_ns, 2_000_000 - 2000);
        // Nor one closed far more often (other files share it).
        t.arguments.pop();
        t.arguments[2].calls = 3000; // close(fd 5)
        assert!(check(&t)[0].what.ends_with("that go with them"));
    }

    #[test]
    fn a_directory_opened_to_be_synced_each_time_is_sync_per_ops() {
        // sqlite: open the database's directory, fdatasync it, close it, per transaction.
        let mut t = trace(1_000_000_000, &[("openat", 300, 3_000_000), ("fdatasync", 300, 30_000_000), ("close", 300, 300_000)]);
        argument(&mut t, "openat", path("/srv/db"), 300, 3_000_000);
        argument(&mut t, "fdatasync", fd(5), 300, 30_000_000);
        argument(&mut t, "close", fd(5), 300, 300_000);
        assert!(check(&t).is_empty());
        // Beside a journal opened, synced and closed as often: both synced.
        argument(&mut t, "fdatasync", fd(4), 300, 30_000_000);
        argument(&mut t, "close", fd(4), 301, 300_000);
        assert!(check(&t).is_empty());
        // One of them synced now and then: which fd is the path's is not known.
        t.arguments[3].calls = 10;
        assert_eq!(check(&t).len(), 1);
        // The path's own fd synced now and then: still a file opened again and again.
        t.arguments[3].calls = 300;
        t.arguments[1].calls = 10;
        assert_eq!(check(&t).len(), 1);
    }

    #[test]
    fn compressed_apt_lists_name_the_setting_that_keeps_them_so() {
        let list = "/var/lib/apt/lists/deb.debian.org_debian_dists_bookworm_main_binary-amd64_Packages";
        for (name, apt) in [(format!("{list}.lz4"), true), (list.to_string(), false)] {
            let mut t = trace(1_000_000_000, &[("openat", 5000, 80_000_000), ("read", 900_000, 900_000_000), ("close", 5000, 40_000_000)]);
            argument(&mut t, "openat", path(&name), 5000, 80_000_000);
            argument(&mut t, "read", fd(11), 900_000, 900_000_000);
            argument(&mut t, "close", fd(11), 5000, 40_000_000);
            let f = check(&t);
            assert_eq!(f[0].fixes[0].text.contains("Acquire::GzipIndexes"), apt, "{name}: {:?}", f[0].fixes);
            assert_eq!(f[0].fixes.iter().any(|x| x.text.contains("compressed")), apt, "{name}: {:?}", f[0].fixes);
        }
    }

    #[test]
    fn container_limits_read_per_query_name_the_runtime_remedy() {
        let mut t = trace(1_000_000_000, &[("openat", 3000, 30_000_000)]);
        argument(&mut t, "openat", path("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"), 3000, 30_000_000);
        let f = check(&t);
        assert!(f[0].fixes[0].text.contains("ActiveProcessorCount"), "{:?}", f[0].fixes);
        // Any other file re-read: the plain advice alone.
        let mut t = trace(1_000_000_000, &[("openat", 3000, 30_000_000)]);
        argument(&mut t, "openat", path("/etc/app.conf"), 3000, 30_000_000);
        let f = check(&t);
        assert!(!f[0].fixes.iter().any(|x| x.text.contains("cgroup")), "{:?}", f[0].fixes);
    }

    #[test]
    fn many_paths_once_each_and_the_zone_file_are_not_repeats() {
        let mut t = trace(1_000_000_000, &[("newfstatat", 1000, 1000)]);
        for i in 0..5 {
            argument(&mut t, "newfstatat", path(&format!("/usr/bin/x{i}")), 1, 1);
        }
        argument(&mut t, "newfstatat", path("/etc/localtime"), 900, 900);
        argument(&mut t, "newfstatat", Argument::Path { path: Some(String::new()), dirfd: Some(3), null: false, cut: false, raw: None }, 900, 900);
        assert!(check(&t).is_empty());
    }

    #[test]
    fn many_files_looked_up_alike_are_one_polling_finding() {
        // fs.watchFile on 200 files: each stat'ed about 21 times in 2 s.
        let mut t = trace(2_000_000_000, &[("statx", 4_200, 15_000_000)]);
        for i in 0..200 {
            argument(&mut t, "statx", path(&format!("/srv/app/f{i:03}.js")), 20 + i % 3, 75_000);
        }
        // One file the program re-reads more often is its own repeat.
        argument(&mut t, "statx", path("/srv/app/config.json"), 400, 150_000);
        let f = check(&t);
        assert_eq!(f.len(), 2, "{:?}", f.iter().map(|x| &x.what).collect::<Vec<_>>());
        assert!(f[0].what.starts_with("4,199 × statx of 200 files, each about 20 times (\"/srv/app/f000.js\""), "{}", f[0].what);
        assert!(f[0].why.contains("about once every 100 ms"), "{}", f[0].why);
        assert!(f[0].fixes[0].text.contains("inotify"));
        assert_eq!(f[1].what, "400 × statx(\"/srv/app/config.json\")");
        // Counts that differ widely (a build looking up what each step needs) are no poll.
        let mut t = trace(2_000_000_000, &[("statx", 4_200, 15_000_000)]);
        for i in 0..200 {
            argument(&mut t, "statx", path(&format!("/srv/app/f{i:03}.js")), 5 + (i % 10) * 10, 75_000);
        }
        assert!(check(&t).iter().all(|x| !x.what.contains("files, each about")));
        // A monitor sampling /proc is not polling for changes.
        let mut t = trace(2_000_000_000, &[("newfstatat", 4_200, 15_000_000)]);
        for i in 0..200 {
            argument(&mut t, "newfstatat", path(&format!("/proc/{}", 100 + i)), 21, 75_000);
        }
        assert!(check(&t).iter().all(|x| !x.what.contains("files, each about")));
        // Too few files: each its own repeat.
        let mut t = trace(2_000_000_000, &[("statx", 210, 1_000_000)]);
        for i in 0..10 {
            argument(&mut t, "statx", path(&format!("/srv/app/f{i}.js")), 21, 100_000);
        }
        assert_eq!(check(&t).len(), 10);
    }

    #[test]
    fn files_read_together_are_one_finding() {
        // A JVM's memory query: three cgroup files opened per call.
        let mut t = trace(1_000_000_000, &[("openat", 15_048, 30_000_000)]);
        for (file, n) in [("memory.stat", 5_024), ("memory.usage_in_bytes", 5_000), ("memory.limit_in_bytes", 5_024)] {
            argument(&mut t, "openat", path(&format!("/sys/fs/cgroup/memory/{file}")), n, 10_000_000);
        }
        // A file read far more often is its own repeat.
        argument(&mut t, "openat", path("/etc/app.conf"), 20_000, 10_000_000);
        let f = check(&t);
        assert_eq!(f.len(), 2, "{:?}", f.iter().map(|x| &x.what).collect::<Vec<_>>());
        let set = f.iter().find(|x| x.what.contains("files read together")).unwrap();
        assert_eq!(
            set.what,
            "15,048 × openat of 3 files read together, each about 5,016 times (\"/sys/fs/cgroup/memory/memory.limit_in_bytes\", \
             \"/sys/fs/cgroup/memory/memory.stat\", \"/sys/fs/cgroup/memory/memory.usage_in_bytes\") and the reads and closes that go with them"
        );
        assert!(set.fixes[0].text.contains("ActiveProcessorCount"), "the known remedy, once: {:?}", set.fixes);
        assert_eq!(set.fixes.iter().filter(|x| x.text.contains("cgroup")).count(), 1);
        // Counts further apart than 5%: each its own.
        let mut t = trace(1_000_000_000, &[("openat", 3_000, 30_000_000)]);
        for (i, n) in [900, 1_000, 1_100].iter().enumerate() {
            argument(&mut t, "openat", path(&format!("/etc/f{i}")), *n, 10_000_000);
        }
        assert_eq!(check(&t).len(), 3);
    }

    #[test]
    fn a_librarys_own_code_remedy_replaces_the_generic_one() {
        // iconv_open per conversion over two charsets: iconv's remedy alone.
        let mut t = trace(1_000_000_000, &[("openat", 10_000, 30_000_000)]);
        let s = site(&mut t, &["__open64_nocancel", "__gconv_open", "iconv_open", "convert"]);
        for cs in ["KOI8-R", "CP1252"] {
            argument(&mut t, "openat", path(&format!("/usr/lib/x86_64-linux-gnu/gconv/{cs}.so")), 5_000, 15_000_000).sites = s.clone();
        }
        let f = check(&t);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].fixes.len(), 1, "{:?}", f[0].fixes);
        assert!(f[0].fixes[0].text.contains("one iconv_t per charset pair"));
        assert!(f[0].why.contains("library call"), "{}", f[0].why);
        assert!(f[0].tradeoff.is_none());
        // One module: the same.
        t.arguments.pop();
        let f = check(&t);
        assert_eq!(f[0].fixes.len(), 1, "{:?}", f[0].fixes);
    }

    #[test]
    fn two_files_of_one_lookup_are_one_finding() {
        // getpwuid() per item: nsswitch.conf stat'ed, /etc/passwd opened.
        let mut t = trace(1_000_000_000, &[("openat", 3_000, 3_000_000), ("newfstatat", 3_000, 3_000_000)]);
        let s = site(&mut t, &["__open64", "_nss_files_getpwuid_r", "getpwuid", "lookup"]);
        argument(&mut t, "openat", path("/etc/passwd"), 3_000, 3_000_000).sites = s;
        argument(&mut t, "newfstatat", path("/etc/nsswitch.conf"), 3_000, 3_000_000);
        let f = check(&t);
        assert_eq!(f.len(), 1, "{:?}", f.iter().map(|x| &x.what).collect::<Vec<_>>());
        assert!(f[0].what.starts_with("6,000 × newfstatat/openat of 2 files read together"), "{}", f[0].what);
        assert!(f[0].fixes[0].text.contains("nscd"), "{:?}", f[0].fixes);
    }

    #[test]
    fn one_path_resolved_again_and_again_is_one_walk() {
        // Python's os.path.realpath of one file, 5,000 times.
        let mut t = trace(1_000_000_000, &[("newfstatat", 35_000, 30_000_000), ("readlink", 5_000, 5_000_000)]);
        for p in ["/usr", "/usr/share", "/usr/share/perl", "/usr/share/perl/5.36", "/usr/share/perl/5.36.0", "/usr/share/perl/5.36.0/Name.pl"] {
            argument(&mut t, "newfstatat", path(p), 5_000, 5_000_000);
        }
        argument(&mut t, "readlink", path("/usr/share/perl/5.36"), 5_000, 5_000_000);
        let f = check(&t);
        assert_eq!(f.len(), 1, "{:?}", f.iter().map(|x| &x.what).collect::<Vec<_>>());
        assert_eq!(f[0].what, "35,000 × newfstatat/readlink of the 6 components of \"/usr/share/perl/5.36.0/Name.pl\", each about 5,000 times");
        assert!(f[0].why.contains("realpath()"), "{}", f[0].why);
    }

    #[test]
    fn a_file_created_and_deleted_per_operation_is_a_new_file_each_time() {
        // sqlite's rollback journal: created, written, synced, unlinked per transaction.
        let mut t = trace(1_000_000_000, &[("openat", 301, 3_000_000), ("newfstatat", 302, 30_000), ("unlink", 300, 3_000_000)]);
        argument(&mut t, "openat", path("/tmp/s.db-journal"), 301, 3_000_000);
        argument(&mut t, "newfstatat", path("/tmp/s.db-journal"), 302, 30_000);
        argument(&mut t, "unlink", path("/tmp/s.db-journal"), 300, 3_000_000);
        assert!(check(&t).is_empty());
        // Removed once at the end: the same file opened 301 times.
        let mut t = trace(1_000_000_000, &[("openat", 301, 3_000_000), ("unlink", 1, 10_000)]);
        argument(&mut t, "openat", path("/tmp/app.state"), 301, 3_000_000);
        argument(&mut t, "unlink", path("/tmp/app.state"), 1, 10_000);
        assert_eq!(check(&t).len(), 1);
    }

    #[test]
    fn one_name_under_a_moving_directory_is_many_files() {
        // tar opens each package's "copyright" relative to a directory fd.
        let mut t = trace(1_000_000_000, &[("openat", 900, 9_000_000)]);
        argument(
            &mut t,
            "openat",
            Argument::Path { path: Some("copyright".into()), dirfd: Some(4), null: false, cut: false, raw: None },
            900,
            9_000_000,
        );
        assert!(check(&t).is_empty());
        // Relative to the working directory, after chdir: the same.
        let mut t = trace(1_000_000_000, &[("openat", 900, 9_000_000), ("chdir", 900, 900)]);
        argument(&mut t, "openat", path("copyright"), 900, 9_000_000);
        assert!(check(&t).is_empty());
        // ... and without a chdir, one file opened 900 times.
        let mut t = trace(1_000_000_000, &[("openat", 900, 9_000_000)]);
        argument(&mut t, "openat", path("app.conf"), 900, 9_000_000);
        assert_eq!(check(&t).len(), 1);
    }
}
