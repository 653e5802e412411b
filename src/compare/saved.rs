//! `sysdiet diff`: two saved runs (their traces and findings, however they
//! were read), their counts compared, judged against the limits.

use serde::{Deserialize, Serialize};

use super::diff::{diff, Counted, Diff};
use super::gate::{diff_breaches, Breach, Ignore, Limits};
use crate::diagnose::Finding;
use crate::model::{Argument, Trace};

/// What `diff` found between BASE and NEW.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct RunDiff {
    /// The files, as given.
    pub base: String,
    pub new: String,
    pub diff: Diff,
    /// Changed rows whose counts depend on the machine or its environment,
    /// not only on the program: candidates for `--ignore`.
    pub machine_dependent: Vec<MachineDependent>,
    /// Limits broken; empty when none were given or all were kept.
    pub breaches: Vec<Breach>,
}

/// A count that moves with the machine, and on what.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct MachineDependent {
    /// A syscall, or a path.
    pub what: String,
    /// What it depends on.
    pub on: String,
}

/// Syscalls a vDSO answers unless the clock source cannot.
const CLOCK_CALLS: &[&str] = &["clock_gettime", "gettimeofday", "time", "clock_getres"];

/// What a path's lookups depend on, if more than the program: the
/// loader's cache and library directories, the zone file (TZ).
fn machine_path(path: &str) -> Option<&'static str> {
    if path == "/etc/localtime" || path.starts_with("/usr/share/zoneinfo/") {
        Some("TZ in the environment")
    } else if path == "/etc/ld.so.cache" || ["/lib/", "/lib64/", "/usr/lib/", "/usr/lib64/"].iter().any(|d| path.starts_with(d)) {
        Some("the loader and the libraries installed")
    } else {
        None
    }
}

/// BASE against NEW, both without `ignore`d counts, judged by `limits`.
pub fn diff_runs(base: (&str, &Trace, &[Finding]), new: (&str, &Trace, &[Finding]), ignore: &Ignore, limits: &Limits) -> RunDiff {
    let (a, b) = (ignore.apply(&Counted::of(base.1, base.2)), ignore.apply(&Counted::of(new.1, new.2)));
    let d = diff(&a, &b);
    let mut machine_dependent: Vec<MachineDependent> = d
        .syscalls
        .iter()
        .filter(|s| CLOCK_CALLS.contains(&s.syscall.as_str()))
        .map(|s| MachineDependent { what: s.syscall.clone(), on: "the clock source (a vDSO answers only with tsc and its kin)".into() })
        .collect();
    for c in &d.arguments {
        if let Argument::Path { path: Some(p), .. } = &c.argument {
            if let Some(on) = machine_path(p) {
                if !machine_dependent.iter().any(|m| &m.what == p) {
                    machine_dependent.push(MachineDependent { what: p.clone(), on: on.into() });
                }
            }
        }
    }
    let breaches = diff_breaches(&d, limits);
    RunDiff { base: base.0.to_string(), new: new.0.to_string(), diff: d, machine_dependent, breaches }
}
