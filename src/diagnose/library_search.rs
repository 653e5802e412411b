//! library-search: the dynamic loader looks for every library in each
//! directory of LD_LIBRARY_PATH, and in each one's glibc-hwcaps, tls and
//! platform subdirectories, before it asks ld.so.cache: an openat and a
//! newfstatat failing with ENOENT per directory tried, per library, in
//! every process started with the variable (NixOS/nixpkgs #206180). An
//! empty entry (a leading, trailing or doubled `:`) searches the current
//! directory as well (gluster #2348).

use super::{environment_of, prove, Evidence, Finding, Fix};
use crate::human::{quoted, thousands};
use crate::model::{Argument, ArgumentStats, Process, Trace};

pub const ID: &str = "library-search";

/// The variable the loader reads.
pub const VARIABLE: &str = "LD_LIBRARY_PATH";

/// The calls the loader's search makes: it opens the library, then stats
/// the directory to skip it for the next library when it is missing.
const SEARCH_CALLS: &[&str] = &["openat", "open", "newfstatat", "stat", "stat64", "fstatat64"];

/// Whether `path`, which process `pid` looked for in vain, lies in a
/// directory of its LD_LIBRARY_PATH (or, for an empty entry, is relative).
pub fn searched(trace: &Trace, pid: u32, path: &str) -> bool {
    search_path(trace, pid).is_some_and(|value| in_search_path(value, path))
}

fn search_path(trace: &Trace, pid: u32) -> Option<&str> {
    environment_of(trace, Some(pid)).knobs.get(VARIABLE).map(String::as_str)
}

/// Whether `path` lies in a directory of `value` (a colon-separated
/// list), read as the loader reads it: "/" is the root, only an empty
/// entry is the current directory. Asked for every failed lookup of the
/// process by other rules: no allocation.
fn in_search_path(value: &str, path: &str) -> bool {
    value.split(':').any(|entry| match entry.trim_end_matches('/') {
        "" if entry.is_empty() => !path.starts_with('/'),
        "" => path.starts_with('/'),
        dir => path.strip_prefix(dir).is_some_and(|rest| rest.is_empty() || rest.starts_with('/')),
    })
}

pub fn check(trace: &Trace) -> Vec<Finding> {
    // Per process, its own rows: a filter of the whole list per process
    // is quadratic (see Trace::arguments_by_pid).
    let by_pid = trace.arguments_by_pid();
    trace.processes.iter().filter_map(|p| finding(trace, p, by_pid.get(&p.pid).map_or(&[][..], Vec::as_slice))).collect()
}

fn finding(trace: &Trace, p: &Process, arguments: &[&ArgumentStats]) -> Option<Finding> {
    let value = search_path(trace, p.pid)?;
    // The failed lookups that name those directories: the search itself.
    let named: Vec<(&str, u64)> = arguments
        .iter()
        .filter(|a| a.errors > 0 && SEARCH_CALLS.contains(&a.syscall.as_str()))
        .filter_map(|a| match &a.argument {
            Argument::Path { path: Some(path), .. } if in_search_path(value, path) => Some((path.as_str(), a.errors)),
            _ => None,
        })
        .collect();
    if named.is_empty() {
        return None;
    }
    // A path seen once in a process is counted, not kept: most of the
    // search's lookups are, so the process's failed lookups count them.
    let failed = |s: &crate::model::SyscallStats| s.errnos.get("ENOENT").copied().unwrap_or(0);
    let search: Vec<_> = SEARCH_CALLS.iter().filter_map(|name| p.syscalls.iter().find(|s| s.name == *name)).filter(|s| failed(s) > 0).collect();
    let calls: u64 = search.iter().map(|s| failed(s)).sum();
    let named_calls: u64 = named.iter().map(|(_, n)| n).sum();
    if calls < 2 {
        return None;
    }
    let kernel_ns: u64 = search.iter().map(|s| s.total_ns * failed(s) / s.calls.max(1)).sum();
    let syscalls: Vec<&str> = search.iter().map(|s| s.name.as_str()).collect();
    // A library's path says more than a directory's.
    let example =
        named.iter().max_by_key(|(path, n)| (path.contains(".so"), *n, std::cmp::Reverse(*path))).map(|(path, _)| *path).unwrap_or_default();
    let holding = libraries_elsewhere(trace, p, value);
    let dirs: Vec<String> =
        value.split(':').filter(|e| !e.is_empty()).map(|e| quoted(Some(e.trim_end_matches('/')).filter(|d| !d.is_empty()).unwrap_or("/"))).collect();
    let empty = value.split(':').any(str::is_empty);
    let mut why = format!(
        "the dynamic loader looks for each library in every directory of {VARIABLE} ({}{}), and in their glibc-hwcaps, tls and \
         platform subdirectories, before it asks ld.so.cache; {} of these failed lookups were kept by name, all in those directories ({} …)",
        dirs.join(", "),
        if empty { ", and the current directory for its empty entry" } else { "" },
        thousands(named_calls.min(calls)),
        quoted(example),
    );
    if !holding.is_empty() {
        why.push_str(&format!("; the libraries seen running were found in {}", holding.iter().map(|d| quoted(d)).collect::<Vec<_>>().join(", ")));
    }
    let mut fixes = vec![Fix::env(format!(
        "unset {VARIABLE} for programs that do not need it, or keep in it only the directories that hold the program's own libraries, those first"
    ))];
    if empty {
        fixes.push(Fix::env(format!("drop the empty entry of {VARIABLE} (a leading, trailing or doubled ':'): it searches the current directory")));
    }
    fixes.push(Fix::config(
        "give the program a RUNPATH instead (-Wl,-rpath,DIR at link time, or patchelf --set-rpath), or list the directory in \
         /etc/ld.so.conf.d and run ldconfig: the loader then finds system libraries in ld.so.cache first",
    ));
    Some(Finding {
        id: ID.into(),
        what: format!("{} × {} failing with ENOENT: {VARIABLE}={}", thousands(calls), syscalls.join("/"), quoted(value)),
        pid: Some(p.pid),
        evidence: Evidence::new(trace, syscalls[0], calls, kernel_ns),
        sites: search.iter().flat_map(|s| s.sites.iter().cloned()).collect(),
        saving_ns: kernel_ns,
        why,
        fixes,
        tradeoff: Some(format!("a program that needs a library from those directories no longer starts without {VARIABLE} or a RUNPATH")),
        // Only a variable given from outside can be unset by compare.
        prove: trace.run.environment.knobs.contains_key(VARIABLE).then(|| prove(trace, &format!("--unset-env {VARIABLE}"))).flatten(),
        ..Default::default()
    })
}

/// The directories outside the search path that the process's libraries
/// were mapped from, as its call sites show them.
fn libraries_elsewhere(trace: &Trace, p: &Process, value: &str) -> Vec<String> {
    let mut dirs: Vec<String> = p
        .syscalls
        .iter()
        .flat_map(|s| &s.sites)
        .filter_map(|share| trace.call_sites.get(share.site))
        .flat_map(|site| &site.frames)
        .map(|f| f.module.as_str())
        .filter(|m| m.contains(".so") && !in_search_path(value, m))
        .filter_map(|m| m.rsplit_once('/').map(|(dir, _)| dir.to_string()))
        .filter(|d| !d.is_empty())
        .collect();
    dirs.sort();
    dirs.dedup();
    dirs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::testing::*;

    fn searching(value: Option<&str>) -> Trace {
        let mut t = trace(100_000_000, &[("openat", 50, 50_000), ("newfstatat", 48, 20_000)]);
        t.processes[0].syscalls[0].errnos.insert("ENOENT".into(), 44);
        t.processes[0].syscalls[1].errnos.insert("ENOENT".into(), 44);
        if let Some(v) = value {
            t.run.environment.knobs.insert(VARIABLE.into(), v.into());
        }
        argument(&mut t, "openat", path("/opt/d/x86_64/libc.so.6"), 2, 2_000).errors = 2;
        argument(&mut t, "newfstatat", path("/opt/d/x86_64"), 2, 1_000).errors = 2;
        t
    }

    #[test]
    fn the_loader_searching_ld_library_path() {
        let f = check(&searching(Some("/opt/a:/opt/b:/opt/c:/opt/d")));
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].what, "88 × openat/newfstatat failing with ENOENT: LD_LIBRARY_PATH=\"/opt/a:/opt/b:/opt/c:/opt/d\"");
        assert!(f[0].why.contains("\"/opt/a\", \"/opt/b\", \"/opt/c\", \"/opt/d\""), "{}", f[0].why);
        assert!(f[0].why.contains("4 of these failed lookups were kept by name"), "{}", f[0].why);
        assert!(f[0].fixes[0].text.starts_with("unset LD_LIBRARY_PATH"));
        assert_eq!(f[0].prove.as_deref(), Some("sysdiet compare --unset-env LD_LIBRARY_PATH -- ./app"));
    }

    #[test]
    fn an_empty_entry_searches_the_current_directory() {
        let mut t = searching(Some("/opt/a:"));
        argument(&mut t, "openat", path("tls/libc.so.6"), 2, 2_000).errors = 2;
        let f = check(&t);
        assert!(f[0].why.contains("the current directory"), "{}", f[0].why);
        assert!(f[0].fixes.iter().any(|x| x.text.contains("empty entry")));
        assert!(searched(&t, 7, "x86_64/libc.so.6") && !searched(&t, 7, "/opt/d/libc.so.6"));
    }

    #[test]
    fn without_the_variable_or_its_misses_nothing() {
        assert!(check(&searching(None)).is_empty());
        assert!(check(&searching(Some("/usr/local/lib"))).is_empty(), "no failed lookup under its directories");
        // A directory named like an entry's prefix is not in it.
        assert!(check(&searching(Some("/opt/d/x"))).is_empty());
        assert!(check(&searching(Some("/opt"))).len() == 1);
        assert!(check(&searching(Some("/opt/d/"))).len() == 1, "a trailing slash is the same directory");
        assert!(check(&searching(Some("/"))).len() == 1, "the root holds every path; it is not the current directory");
        assert!(!searched(&searching(Some("/")), 7, "libc.so.6"));
    }
}
