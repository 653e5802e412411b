//! path-search: a program started by name is looked for in each directory
//! of PATH in turn. execvp (and dash) tries an execve in each, failing
//! with ENOENT until the one that holds the program; make and ruby stat
//! each candidate first. With the program's directory late in a long
//! PATH (a toolchain's bin, a version manager's shims put in front), every
//! start pays for each directory before it: a path lookup each, a few µs
//! beside the exec's hundreds, so it shows where programs are started
//! by the thousand through a long PATH.

use foldhash::HashSet;
use std::collections::BTreeSet;

use super::{environment_of, prove, shell_quote, Evidence, Finding, Fix};
use crate::human::{quoted, thousands};
use crate::model::{Argument, Process, Trace};

pub const ID: &str = "path-search";

/// The variable execvp and shells read.
pub const VARIABLE: &str = "PATH";

/// The calls a search makes of a candidate: an exec, or a look first.
const EXECS: &[&str] = &["execve", "execveat"];
const LOOKS: &[&str] = &["newfstatat", "stat", "statx", "access", "faccessat", "faccessat2"];

/// PATH's entries as execvp reads them (an empty entry is the current
/// directory), trailing slashes dropped.
fn entries(value: &str) -> Vec<&str> {
    value.split(':').map(|e| if e.is_empty() { "." } else { e.trim_end_matches('/') }).map(|e| if e.is_empty() { "/" } else { e }).collect()
}

fn search_path(trace: &Trace, pid: u32) -> Option<&str> {
    environment_of(trace, Some(pid)).knobs.get(VARIABLE).map(String::as_str)
}

/// Whether `path`, which process `pid` looked for in vain, is a program's
/// name in a directory of its PATH: `/usr/local/bin/true`.
pub fn searched(trace: &Trace, pid: u32, path: &str) -> bool {
    let Some(value) = search_path(trace, pid) else { return false };
    let Some((dir, name)) = path.rsplit_once('/') else { return false };
    !name.is_empty()
        && value.split(':').any(|e| !e.is_empty() && e.trim_end_matches('/') == if dir.is_empty() { "/" } else { dir }.trim_end_matches('/'))
}

/// The processes whose failed execs were a search of PATH: their own
/// program (its file) lies in a PATH directory after as many entries as
/// execs failed, or more.
pub fn exec_searches(trace: &Trace) -> HashSet<u32> {
    trace.processes.iter().filter(|p| exec_search(trace, p).is_some()).map(|p| p.pid).collect()
}

/// For a process that was looked for in PATH by execvp: its failed execs,
/// the directory that held it, and PATH's entries before that one.
fn exec_search<'a>(trace: &'a Trace, p: &'a Process) -> Option<(u64, &'a str, Vec<&'a str>)> {
    let failed: u64 = p.syscalls.iter().filter(|s| EXECS.contains(&s.name.as_str())).map(|s| s.errnos.get("ENOENT").copied().unwrap_or(0)).sum();
    if failed == 0 {
        return None;
    }
    let (dir, _) = p.executable.as_deref()?.rsplit_once('/')?;
    let dir = if dir.is_empty() { "/" } else { dir };
    let path = entries(search_path(trace, p.pid)?);
    let at = path.iter().position(|e| *e == dir)?;
    (at > 0 && failed <= at as u64 * p.folded.max(1)).then(|| (failed, dir, path[..at].to_vec()))
}

pub fn check(trace: &Trace) -> Vec<Finding> {
    let by_pid = trace.arguments_by_pid();
    let children = super::spawner::children(trace);
    let mut out = Vec::new();
    for p in &trace.processes {
        let Some(value) = search_path(trace, p.pid) else { continue };
        let path = entries(value);
        // Candidates it stat'ed itself before starting a program (make,
        // ruby), kept by name because each is asked again.
        let mut looked = 0;
        let mut looks = BTreeSet::new();
        let mut names = BTreeSet::new();
        let mut sites = Vec::new();
        let mut ns = 0;
        for a in by_pid.get(&p.pid).into_iter().flatten().filter(|a| a.errors > 0 && LOOKS.contains(&a.syscall.as_str())) {
            let Argument::Path { path: Some(file), .. } = &a.argument else { continue };
            if searched(trace, p.pid, file) {
                looked += a.errors;
                looks.insert(a.syscall.as_str());
                ns += a.total_ns * a.errors / a.calls.max(1);
                names.insert(file.rsplit_once('/').map_or(file.as_str(), |(_, name)| name));
                crate::model::callsite::merge_shares(&mut sites, &a.sites);
            }
        }
        let exec = exec_search(trace, p);
        if looked < 2 && exec.is_none() {
            continue;
        }
        let mut syscalls = Vec::new();
        let mut calls = looked;
        // Where the programs were found: this one's own directory, or where
        // the children it started by those names run from.
        let mut holders = BTreeSet::new();
        if let Some((failed, dir, _)) = &exec {
            calls += failed;
            holders.insert(*dir);
            // No time of theirs: the exec that succeeded took the ticks
            // (a failed one is a path lookup, a few µs; the one that runs
            // the program, hundreds), so the calls' least cost stands.
            for s in p.syscalls.iter().filter(|s| EXECS.contains(&s.name.as_str())) {
                crate::model::callsite::merge_shares(&mut sites, &s.sites);
            }
            syscalls.push("execve");
        }
        if looked > 0 {
            syscalls.extend(looks);
            for c in children.get(&p.pid).into_iter().flatten() {
                if let Some((dir, name)) = c.executable.as_deref().and_then(|e| e.rsplit_once('/')) {
                    if names.contains(name) && path.contains(&dir) {
                        holders.insert(dir);
                    }
                }
            }
        }
        let program = match &exec {
            Some(_) => p.executable.as_deref().and_then(|e| e.rsplit_once('/')).map_or(p.comm.as_str(), |(_, name)| name).to_string(),
            None => names.iter().copied().collect::<Vec<_>>().join(", "),
        };
        // The first directory that held one: the entries before it are
        // the ones every start tried in vain.
        let first = holders.iter().filter_map(|h| path.iter().position(|e| e == h)).min();
        let before: Vec<&str> = first.map_or_else(Vec::new, |i| path[..i].to_vec());
        let mut twice: Vec<&str> = before.iter().copied().filter(|d| before.iter().filter(|e| *e == d).count() > 1).collect();
        twice.sort_unstable();
        twice.dedup();
        let list = |dirs: &[&str]| dirs.iter().map(|d| quoted(d)).collect::<Vec<_>>().join(", ");
        let mut why = format!("{program} is started by name, so each directory of PATH is tried in turn until one holds it");
        if let Some(i) = first {
            why.push_str(&format!(
                "; {} comes after {} {} that did not: {}",
                quoted(path[i]),
                i,
                if i == 1 { "entry" } else { "entries" },
                list(&before)
            ));
        }
        if !twice.is_empty() {
            why.push_str(&format!(" ({} listed twice)", list(&twice)));
        }
        let mut fixes = Vec::new();
        if let Some(i) = first {
            fixes.push(Fix::env(format!(
                "put {} before the {} {} ahead of it in PATH, or take out of PATH those that hold none of the programs it starts{}",
                quoted(path[i]),
                i,
                if i == 1 { "entry" } else { "entries" },
                if twice.is_empty() { String::new() } else { format!(" (the second {} at least)", list(&twice)) }
            )));
        }
        fixes.push(Fix::code(match first {
            Some(i) => {
                format!("start {program} by its full path ({}/{}), or look it up once and keep the path", path[i].trim_end_matches('/'), program)
            }
            None => format!("start {program} by its full path, or look it up once and keep the path"),
        }));
        // Only a PATH given from outside is one compare can change.
        let proof = first.filter(|_| trace.run.environment.knobs.get(VARIABLE).map(String::as_str) == Some(value)).and_then(|i| {
            let mut reordered = vec![path[i]];
            reordered.extend(path.iter().enumerate().filter(|&(j, _)| j != i).map(|(_, e)| *e));
            prove(trace, &format!("--env {}", shell_quote(&format!("{VARIABLE}={}", reordered.join(":")))))
        });
        out.push(Finding {
            id: ID.into(),
            what: format!("{} × {} failing with ENOENT: PATH searched for {program}", thousands(calls), syscalls.join("/")),
            pid: Some(p.pid),
            evidence: Evidence::new(trace, syscalls[0], calls, ns),
            sites,
            saving_ns: ns,
            why,
            fixes,
            tradeoff: first.map(|i| {
                format!(
                    "with {} earlier in PATH, a program of the same name in a directory it now comes before is no longer the one started",
                    quoted(path[i])
                )
            }),
            prove: proof,
            ..Default::default()
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::testing::*;

    const PATH: &str = "/opt/go/bin:/root/.cargo/bin:/root/.cargo/bin:/usr/local/bin:/usr/bin:/bin";

    /// A process that execvp found in /usr/bin after `failed` failed execs.
    fn started(failed: u64) -> Trace {
        let mut t = trace(100_000_000, &[("execve", failed + 1, (failed + 1) * 20_000)]);
        t.processes[0].syscalls[0].errnos.insert("ENOENT".into(), failed);
        t.processes[0].executable = Some("/usr/bin/as".into());
        t.run.environment.knobs.insert(VARIABLE.into(), PATH.into());
        t
    }

    #[test]
    fn execvp_trying_each_directory_before_the_programs() {
        let f = check(&started(4));
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].what, "4 × execve failing with ENOENT: PATH searched for as");
        assert!(f[0].why.contains("\"/usr/bin\" comes after 4 entries that did not"), "{}", f[0].why);
        assert!(f[0].why.contains("(\"/root/.cargo/bin\" listed twice)"), "{}", f[0].why);
        assert!(f[0].fixes[0].text.starts_with("put \"/usr/bin\" before the 4 entries ahead of it"), "{}", f[0].fixes[0].text);
        assert!(f[0].fixes[0].text.ends_with("(the second \"/root/.cargo/bin\" at least)"), "{}", f[0].fixes[0].text);
        assert!(f[0].fixes[1].text.contains("(/usr/bin/as)"));
        assert_eq!(
            f[0].prove.as_deref(),
            Some("sysdiet compare --env PATH=/usr/bin:/opt/go/bin:/root/.cargo/bin:/root/.cargo/bin:/usr/local/bin:/bin -- ./app")
        );
        assert_eq!(exec_searches(&started(4)), HashSet::from_iter([7]));
    }

    #[test]
    fn failed_execs_that_are_no_search_of_path() {
        // More failures than entries before its directory: something else.
        assert!(check(&started(5)).is_empty());
        // Found first in PATH, or outside it, or no PATH known.
        let mut t = started(1);
        t.processes[0].executable = Some("/opt/go/bin/go".into());
        assert!(check(&t).is_empty());
        t.processes[0].executable = Some("/tmp/x/as".into());
        assert!(check(&t).is_empty());
        let mut t = started(4);
        t.run.environment.knobs.clear();
        assert!(check(&t).is_empty());
    }

    #[test]
    fn a_spawner_stating_each_candidate() {
        let mut t = trace(100_000_000, &[("newfstatat", 900, 900_000)]);
        t.run.environment.knobs.insert(VARIABLE.into(), PATH.into());
        for dir in ["/opt/go/bin", "/root/.cargo/bin", "/usr/local/bin"] {
            argument(&mut t, "newfstatat", path(&format!("{dir}/true")), 300, 300_000).errors = 300;
        }
        t.processes.push(Process { pid: 8, ppid: 7, comm: "true".into(), executable: Some("/usr/bin/true".into()), ..Default::default() });
        let f = check(&t);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].what, "900 × newfstatat failing with ENOENT: PATH searched for true");
        assert!(f[0].why.contains("\"/usr/bin\" comes after 4 entries"), "{}", f[0].why);
        assert!(searched(&t, 7, "/root/.cargo/bin/true") && !searched(&t, 7, "/root/.cargo/true") && !searched(&t, 7, "/usr/local/bin/"));
    }
}
