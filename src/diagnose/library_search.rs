//! library-search: the dynamic loader looks for every library in each
//! directory of LD_LIBRARY_PATH, and of the RUNPATH (or RPATH) of the
//! program or of a library, and in each one's glibc-hwcaps, tls and
//! platform subdirectories, before it asks ld.so.cache: an openat and a
//! newfstatat failing with ENOENT per directory tried, per library, in
//! every process started (NixOS/nixpkgs #206180). An empty entry (a
//! leading, trailing or doubled `:`) searches the current directory as
//! well (gluster #2348).

use foldhash::HashSet;

use super::{environment_of, prove, Evidence, Finding, Fix};
use crate::human::{quoted, thousands};
use crate::model::{Argument, ArgumentStats, Process, Trace};

pub const ID: &str = "library-search";

/// The variable the loader reads.
pub const VARIABLE: &str = "LD_LIBRARY_PATH";

/// The calls the loader's search makes: it opens the library, then stats
/// the directory to skip it for the next library when it is missing.
const SEARCH_CALLS: &[&str] = &["openat", "open", "newfstatat", "stat", "stat64", "fstatat64"];

/// Subdirectories the loader tries in each directory it searches before
/// the directory itself: glibc before 2.37 tries `tls` and the platform's
/// names (x86-64's and arm64's), glibc 2.33 and later `glibc-hwcaps/NAME`.
const LEGACY_SUBDIRS: &[&str] = &["tls", "x86_64", "haswell", "xeon_phi", "avx512_1", "aarch64", "atomics"];

/// The system's own library directories, searched last when ld.so.cache
/// has no entry: not a RUNPATH's.
fn is_default_dir(dir: &str) -> bool {
    matches!(dir, "/lib" | "/usr/lib" | "/lib64" | "/usr/lib64" | "/lib32" | "/usr/lib32")
        || ["/lib/", "/usr/lib/"].iter().any(|root| dir.strip_prefix(root).is_some_and(|rest| !rest.contains('/') && rest.contains("-linux-")))
}

/// For a path the loader tries while it searches a directory (a library
/// in it or in one of its subdirectories, or a subdirectory stat'ed):
/// that directory, and whether the path went through a subdirectory,
/// which only the loader's search tries. Asked for every failed lookup
/// of a process by other rules: no allocation.
fn searched_dir(path: &str) -> Option<(&str, bool)> {
    let (dir, name) = path.rsplit_once('/')?;
    let mut dir = if is_library(name) { dir } else { path };
    let mut through = false;
    if let Some((up, _)) = dir.rsplit_once('/').filter(|(up, _)| up.ends_with("/glibc-hwcaps")) {
        dir = &up[..up.len() - "/glibc-hwcaps".len()];
        through = true;
    }
    while let Some((up, last)) = dir.rsplit_once('/') {
        if !LEGACY_SUBDIRS.contains(&last) {
            break;
        }
        (dir, through) = (up, true);
    }
    (!dir.is_empty() && (through || is_library(name))).then_some((dir, through))
}

/// A shared object's file name: `libm.so.6`, `libfoo.so`.
fn is_library(name: &str) -> bool {
    name.ends_with(".so") || name.contains(".so.")
}

/// Per process, the directories outside LD_LIBRARY_PATH and the system's
/// own that its loader searched, by the libraries it looked for in their
/// subdirectories: a RUNPATH's or an RPATH's, the program's or a library's.
pub fn runpath_dirs(trace: &Trace) -> HashSet<(u32, &str)> {
    let mut dirs = HashSet::default();
    for a in failed_lookups(trace.arguments.iter().chain(&trace.failed_once)) {
        let Argument::Path { path: Some(path), .. } = &a.argument else { continue };
        let Some((dir, true)) = path.rsplit_once('/').filter(|(_, name)| is_library(name)).and(searched_dir(path)) else { continue };
        if !is_default_dir(dir) && !search_path(trace, a.pid).is_some_and(|value| in_search_path(value, path)) {
            dirs.insert((a.pid, dir));
        }
    }
    dirs
}

/// Whether `path`, which process `pid` looked for in vain, lies in a
/// directory of its LD_LIBRARY_PATH (or, for an empty entry, is relative),
/// or in one of `runpath`'s.
pub fn searched(trace: &Trace, pid: u32, path: &str, runpath: &HashSet<(u32, &str)>) -> bool {
    search_path(trace, pid).is_some_and(|value| in_search_path(value, path))
        || searched_dir(path).is_some_and(|(dir, _)| runpath.contains(&(pid, dir)))
}

/// The search's failed lookups among `arguments`: repeated ones, and
/// those a process made once (Trace::failed_once), which most of a
/// loader's are where each directory is tried once per library.
fn failed_lookups<'a>(arguments: impl Iterator<Item = &'a ArgumentStats>) -> impl Iterator<Item = &'a ArgumentStats> {
    arguments.filter(|a| a.errors > 0 && SEARCH_CALLS.contains(&a.syscall.as_str()))
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

/// The rule alone, as its tests run it.
#[cfg(test)]
fn check(trace: &Trace) -> Vec<Finding> {
    check_shared(trace, &super::Shared::new(trace))
}

pub fn check_shared(trace: &Trace, shared: &super::Shared) -> Vec<Finding> {
    // Per process, its own rows: a filter of the whole list per process
    // is quadratic (see Trace::arguments_by_pid).
    let mut by_pid = trace.arguments_by_pid();
    for a in &trace.failed_once {
        by_pid.entry(a.pid).or_default().push(a);
    }
    // Each process's RUNPATH directories, sorted.
    let mut runpaths: foldhash::HashMap<u32, Vec<&str>> = foldhash::HashMap::default();
    for &(pid, dir) in shared.runpath() {
        runpaths.entry(pid).or_default().push(dir);
    }
    runpaths.values_mut().for_each(|dirs| dirs.sort_unstable());
    trace
        .processes
        .iter()
        .filter_map(|p| {
            let runpath = runpaths.get(&p.pid).map_or(&[][..], Vec::as_slice);
            finding(trace, p, by_pid.get(&p.pid).map_or(&[][..], Vec::as_slice), runpath)
        })
        .collect()
}

fn finding(trace: &Trace, p: &Process, arguments: &[&ArgumentStats], runpath: &[&str]) -> Option<Finding> {
    let value = search_path(trace, p.pid);
    // The failed lookups in those directories that were kept by name.
    let named: Vec<(&str, u64)> = failed_lookups(arguments.iter().copied())
        .filter_map(|a| match &a.argument {
            Argument::Path { path: Some(path), .. }
                if value.is_some_and(|v| in_search_path(v, path)) || searched_dir(path).is_some_and(|(dir, _)| runpath.contains(&dir)) =>
            {
                Some((path.as_str(), a.errors))
            }
            _ => None,
        })
        .collect();
    if named.is_empty() {
        return None;
    }
    // Most of the search's lookups are of paths seen once, of which only a
    // sample is named: the process's failed lookups count them all.
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
    let holding = libraries_elsewhere(trace, p, value.unwrap_or_default(), runpath);
    let list = |dirs: &mut dyn Iterator<Item = &str>| dirs.map(quoted).collect::<Vec<_>>().join(", ");
    // What the loader was told to search, as the user would write it.
    let mut told = Vec::new();
    let mut places = Vec::new();
    let mut empty = false;
    if let Some(value) = value.filter(|v| named.iter().any(|(path, _)| in_search_path(v, path))) {
        empty = value.split(':').any(str::is_empty);
        let dirs =
            list(&mut value.split(':').filter(|e| !e.is_empty()).map(|e| Some(e.trim_end_matches('/')).filter(|d| !d.is_empty()).unwrap_or("/")));
        places.push(format!("{VARIABLE} ({dirs}{})", if empty { ", and the current directory for its empty entry" } else { "" }));
        told.push(format!("{VARIABLE}={}", quoted(value)));
    }
    if !runpath.is_empty() {
        let dirs = list(&mut runpath.iter().copied());
        places.push(format!("the RUNPATH (or RPATH) of the program or of one of its libraries ({dirs}: not in {VARIABLE})"));
        told.push(format!("RUNPATH {dirs}"));
    }
    let mut why = format!(
        "the dynamic loader looks for each library in every directory of {}, and in their glibc-hwcaps, tls and \
         platform subdirectories, before it asks ld.so.cache; {} of these failed lookups were kept by name, all in those directories ({} …)",
        places.join(" and of "),
        thousands(named_calls.min(calls)),
        quoted(example),
    );
    if !holding.is_empty() {
        why.push_str(&format!("; the libraries seen running were found in {}", list(&mut holding.iter().map(String::as_str))));
    }
    let mut fixes = Vec::new();
    if told.iter().any(|t| t.starts_with(VARIABLE)) {
        fixes.push(Fix::env(format!(
            "unset {VARIABLE} for programs that do not need it, or keep in it only the directories that hold the program's own libraries, those first"
        )));
        if empty {
            fixes.push(Fix::env(format!(
                "drop the empty entry of {VARIABLE} (a leading, trailing or doubled ':'): it searches the current directory"
            )));
        }
        fixes.push(Fix::config(
            "give the program a RUNPATH instead (-Wl,-rpath,DIR at link time, or patchelf --set-rpath), or list the directory in \
             /etc/ld.so.conf.d and run ldconfig: the loader then finds system libraries in ld.so.cache first",
        ));
    }
    if !runpath.is_empty() {
        fixes.push(Fix::config(
            "keep in the RUNPATH only the directories that hold the program's own libraries (patchelf --print-rpath shows it, \
             patchelf --set-rpath sets it; or link without those -Wl,-rpath entries); patchelf --remove-rpath when the system's \
             directories hold them all",
        ));
    }
    let from_outside = value.is_some() && trace.run.environment.knobs.contains_key(VARIABLE) && told.iter().any(|t| t.starts_with(VARIABLE));
    Some(Finding {
        id: ID.into(),
        what: format!("{} × {} failing with ENOENT: {}", thousands(calls), syscalls.join("/"), told.join(", ")),
        pid: Some(p.pid),
        evidence: Evidence::new(trace, syscalls[0], calls, kernel_ns),
        sites: search.iter().flat_map(|s| s.sites.iter().cloned()).collect(),
        saving_ns: kernel_ns,
        why,
        fixes,
        tradeoff: Some("a program that needs a library from a directory taken out of the search no longer starts".into()),
        // Only a variable given from outside can be unset by compare.
        prove: from_outside.then(|| prove(trace, &format!("--unset-env {VARIABLE}"))).flatten(),
        ..Default::default()
    })
}

/// The directories outside the search path that the process's libraries
/// were mapped from, as its call sites show them.
fn libraries_elsewhere(trace: &Trace, p: &Process, value: &str, runpath: &[&str]) -> Vec<String> {
    let mut dirs: Vec<String> = p
        .syscalls
        .iter()
        .flat_map(|s| &s.sites)
        .filter_map(|share| trace.call_sites.get(share.site))
        .flat_map(|site| &site.frames)
        .map(|f| f.module.as_str())
        .filter(|m| m.contains(".so") && !in_search_path(value, m))
        .filter_map(|m| m.rsplit_once('/').map(|(dir, _)| dir.to_string()))
        .filter(|d| !runpath.contains(&d.as_str()))
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
    fn lookups_each_made_once_are_read_from_the_named_ones() {
        // A loader that tries each path once: no repeated row at all.
        let mut t = searching(Some("/opt/a:/opt/d"));
        let once: Vec<ArgumentStats> = t.arguments.drain(..).map(|a| ArgumentStats { calls: 1, errors: 1, ..a }).collect();
        t.failed_once = once.clone();
        let f = check(&t);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].what, "88 × openat/newfstatat failing with ENOENT: LD_LIBRARY_PATH=\"/opt/a:/opt/d\"");
        assert!(f[0].why.contains("2 of these failed lookups were kept by name"), "{}", f[0].why);
        // Named, but not in the variable's directories: nothing.
        let mut t = searching(Some("/usr/local/lib"));
        t.arguments.clear();
        t.failed_once = once;
        assert!(check(&t).iter().all(|f| !f.what.contains(VARIABLE)));
    }

    #[test]
    fn an_empty_entry_searches_the_current_directory() {
        let mut t = searching(Some("/opt/a:"));
        argument(&mut t, "openat", path("tls/libc.so.6"), 2, 2_000).errors = 2;
        let f = check(&t);
        assert!(f[0].why.contains("the current directory"), "{}", f[0].why);
        assert!(f[0].fixes.iter().any(|x| x.text.contains("empty entry")));
        let none = HashSet::default();
        assert!(searched(&t, 7, "x86_64/libc.so.6", &none) && !searched(&t, 7, "/opt/d/libc.so.6", &none));
    }

    #[test]
    fn a_runpath_is_told_by_the_loaders_subdirectories() {
        assert_eq!(searched_dir("/opt/rp/a/tls/x86_64/libm.so.6"), Some(("/opt/rp/a", true)));
        assert_eq!(searched_dir("/opt/rp/a/glibc-hwcaps/x86-64-v3/libm.so.6"), Some(("/opt/rp/a", true)));
        assert_eq!(searched_dir("/opt/rp/a/glibc-hwcaps/x86-64-v3"), Some(("/opt/rp/a", true)));
        assert_eq!(searched_dir("/opt/rp/a/x86_64"), Some(("/opt/rp/a", true)));
        assert_eq!(searched_dir("/opt/rp/a/libm.so.6"), Some(("/opt/rp/a", false)));
        assert_eq!(searched_dir("/opt/rp/a/config.json"), None, "not a library, no loader subdirectory");

        let mut t = trace(100_000_000, &[("openat", 50, 50_000), ("newfstatat", 48, 20_000)]);
        t.processes[0].syscalls[0].errnos.insert("ENOENT".into(), 30);
        t.processes[0].syscalls[1].errnos.insert("ENOENT".into(), 30);
        argument(&mut t, "openat", path("/opt/rp/b/tls/x86_64/libm.so.6"), 2, 2_000).errors = 2;
        argument(&mut t, "openat", path("/opt/rp/a/tls/x86_64/libm.so.6"), 2, 2_000).errors = 2;
        argument(&mut t, "newfstatat", path("/opt/rp/a/x86_64"), 2, 1_000).errors = 2;
        let f = check(&t);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].what, "60 × openat/newfstatat failing with ENOENT: RUNPATH \"/opt/rp/a\", \"/opt/rp/b\"");
        assert!(f[0].fixes.iter().all(|x| !x.text.contains("LD_LIBRARY_PATH")), "{:?}", f[0].fixes);
        assert!(f[0].fixes[0].text.contains("patchelf --set-rpath"));
        assert_eq!(f[0].prove, None);
        let runpath = runpath_dirs(&t);
        assert!(searched(&t, 7, "/opt/rp/a/x86_64", &runpath), "a subdirectory stat'ed by the same search");
        assert!(!searched(&t, 7, "/opt/other/x86_64", &runpath));
    }

    #[test]
    fn the_systems_own_directories_are_no_runpath() {
        // A library missing from ld.so.cache is looked for in the defaults.
        let mut t = trace(100_000_000, &[("openat", 50, 50_000)]);
        t.processes[0].syscalls[0].errnos.insert("ENOENT".into(), 30);
        argument(&mut t, "openat", path("/lib/x86_64-linux-gnu/tls/x86_64/libfoo.so.1"), 2, 2_000).errors = 2;
        argument(&mut t, "openat", path("/usr/lib/tls/libfoo.so.1"), 2, 2_000).errors = 2;
        assert!(check(&t).is_empty());
        assert!(runpath_dirs(&t).is_empty());
    }

    #[test]
    fn without_the_variable_or_its_misses_nothing() {
        // The same misses outside the variable are a RUNPATH's.
        let runpath = |t: &Trace| check(t).iter().all(|f| f.what.ends_with("RUNPATH \"/opt/d\"") && !f.what.contains(VARIABLE));
        assert!(runpath(&searching(None)));
        assert!(runpath(&searching(Some("/usr/local/lib"))), "no failed lookup under its directories");
        // A directory named like an entry's prefix is not in it.
        assert!(runpath(&searching(Some("/opt/d/x"))));
        // Misses that are not the loader's: nothing.
        let mut t = searching(None);
        t.arguments.clear();
        argument(&mut t, "openat", path("/opt/d/settings.json"), 2, 2_000).errors = 2;
        assert!(check(&t).is_empty());
        assert!(check(&searching(Some("/opt"))).len() == 1);
        assert!(check(&searching(Some("/opt/d/"))).len() == 1, "a trailing slash is the same directory");
        assert!(check(&searching(Some("/"))).len() == 1, "the root holds every path; it is not the current directory");
        assert!(!searched(&searching(Some("/")), 7, "libc.so.6", &HashSet::default()));
    }
}
