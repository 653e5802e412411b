//! What a change did to the syscalls: one traced run of the baseline
//! against one of a variant, keyed by what a call is (syscall; syscall and
//! argument; rule and program), never by how it is printed, so a finding
//! whose count changed is "changed", not "gone" and "new".

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::diagnose::Finding;
use crate::model::{Argument, Trace};

/// What one traced run of a variant counted.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Counted {
    /// Calls per syscall.
    pub syscalls: BTreeMap<String, u64>,
    /// Failed calls per syscall, for those that failed.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub errors: BTreeMap<String, u64>,
    /// Processes traced.
    #[serde(default)]
    pub processes: u64,
    /// Calls per (syscall, argument), for arguments seen more than once.
    pub arguments: Vec<ArgumentCount>,
    /// Calls per (syscall, responsible function), from the call sites'
    /// shares (estimates when stacks were sampled).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sites: Vec<SiteCount>,
    pub findings: Vec<FindingSummary>,
}

/// The calls of one syscall one function of the program made.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct SiteCount {
    pub syscall: String,
    /// The responsible frame's function (`use_localtime`), or the innermost
    /// named frame when none in the program's own code is known.
    pub function: String,
    /// Where it is, as the report prints it (`timeloop.c:9`), if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub place: Option<String>,
    pub calls: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct ArgumentCount {
    pub syscall: String,
    pub argument: Argument,
    pub calls: u64,
}

/// A finding, as far as a comparison needs it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct FindingSummary {
    /// The rule's id (`tz-unset`).
    pub rule: String,
    /// The program it is about (its comm), empty for the whole run.
    pub program: String,
    pub what: String,
    pub saving_ns: u64,
}

/// The baseline's counts against a variant's.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Diff {
    pub total: Change,
    /// Processes traced on each side (for calls per process).
    #[serde(default)]
    pub processes: Change,
    /// Syscalls whose count changed, the largest change first.
    pub syscalls: Vec<SyscallChange>,
    /// Repeated arguments whose count changed, the largest change first.
    pub arguments: Vec<ArgumentChange>,
    /// Call sites whose count changed, the largest change first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sites: Vec<SiteChange>,
    /// Findings gone, new, or changed, keyed by (rule, program).
    pub findings: Vec<FindingChange>,
    /// The variant made the same syscalls as the baseline (every count
    /// within 1%): the change did not reach the program.
    #[serde(default)]
    pub no_effect: bool,
}

#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
pub struct Change {
    pub baseline: u64,
    pub variant: u64,
}

impl Change {
    pub fn size(&self) -> u64 {
        self.baseline.abs_diff(self.variant)
    }

    /// The change in percent of the baseline; None from nothing.
    pub fn percent(&self) -> Option<f64> {
        (self.baseline > 0).then(|| (self.variant as f64 - self.baseline as f64) * 100.0 / self.baseline as f64)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct SyscallChange {
    pub syscall: String,
    pub calls: Change,
    #[serde(default)]
    pub errors: Change,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct SiteChange {
    pub syscall: String,
    pub function: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub place: Option<String>,
    pub calls: Change,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct ArgumentChange {
    pub syscall: String,
    pub argument: Argument,
    pub calls: Change,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct FindingChange {
    pub rule: String,
    pub program: String,
    /// What the baseline's finding said; None when the variant's is new.
    pub baseline: Option<String>,
    /// What the variant's finding says; None when it is gone.
    pub variant: Option<String>,
}

impl Counted {
    pub fn of(trace: &Trace, findings: &[Finding]) -> Counted {
        let syscalls = trace.syscalls.iter().map(|s| (s.name.clone(), s.calls)).collect();
        let errors = trace.syscalls.iter().filter(|s| s.errors > 0).map(|s| (s.name.clone(), s.errors)).collect();
        let mut sites: BTreeMap<(String, String), (Option<String>, u64)> = BTreeMap::new();
        for s in &trace.syscalls {
            for share in &s.sites {
                let Some(site) = trace.call_site(share) else { continue };
                let frame = site.responsible_frame().or_else(|| site.frames.iter().find(|f| f.function.is_some()));
                let Some(frame) = frame else { continue };
                let place = frame.file.as_ref().map(|f| {
                    let base = f.rsplit('/').next().unwrap_or(f);
                    frame.line.map_or(base.to_string(), |l| format!("{base}:{l}"))
                });
                let e = sites.entry((s.name.clone(), frame.public_name())).or_insert((place, 0));
                e.1 += share.calls;
            }
        }
        let mut arguments: BTreeMap<(String, Argument), u64> = BTreeMap::new();
        for a in trace.arguments.iter().filter(|a| a.calls > 1) {
            *arguments.entry((a.syscall.clone(), a.argument.clone())).or_default() += a.calls;
        }
        let program = |pid: Option<u32>| pid.and_then(|p| trace.processes.iter().find(|x| x.pid == p)).map(|p| p.comm.clone()).unwrap_or_default();
        Counted {
            syscalls,
            errors,
            processes: trace.process_count() as u64,
            arguments: arguments.into_iter().map(|((syscall, argument), calls)| ArgumentCount { syscall, argument, calls }).collect(),
            sites: sites.into_iter().map(|((syscall, function), (place, calls))| SiteCount { syscall, function, place, calls }).collect(),
            findings: findings
                .iter()
                .map(|f| FindingSummary {
                    rule: f.id.clone(),
                    program: f.program.clone().unwrap_or_else(|| program(f.pid)),
                    what: f.what.clone(),
                    saving_ns: f.saving_ns,
                })
                .collect(),
        }
    }
}

/// Pairs keys present on either side with their counts, changed ones only,
/// the largest change first.
fn changes<K: Ord + Clone>(a: &BTreeMap<K, u64>, b: &BTreeMap<K, u64>) -> Vec<(K, Change)> {
    let mut keys: Vec<&K> = a.keys().chain(b.keys()).collect();
    keys.sort();
    keys.dedup();
    let mut out: Vec<(K, Change)> = keys
        .into_iter()
        .map(|k| (k.clone(), Change { baseline: a.get(k).copied().unwrap_or(0), variant: b.get(k).copied().unwrap_or(0) }))
        .filter(|(_, c)| c.size() > 0)
        .collect();
    out.sort_by_key(|(_, c)| std::cmp::Reverse(c.size()));
    out
}

pub fn diff(base: &Counted, variant: &Counted) -> Diff {
    let total = Change { baseline: base.syscalls.values().sum(), variant: variant.syscalls.values().sum() };
    let errors_of = |c: &Counted, s: &str| c.errors.get(s).copied().unwrap_or(0);
    let syscalls: Vec<SyscallChange> = changes(&base.syscalls, &variant.syscalls)
        .into_iter()
        .map(|(syscall, calls)| {
            let errors = Change { baseline: errors_of(base, &syscall), variant: errors_of(variant, &syscall) };
            SyscallChange { syscall, calls, errors }
        })
        .collect();
    let by_site =
        |c: &Counted| -> BTreeMap<(String, String), u64> { c.sites.iter().map(|s| ((s.syscall.clone(), s.function.clone()), s.calls)).collect() };
    let place_of = |k: &(String, String)| {
        [variant, base].iter().find_map(|c| c.sites.iter().find(|s| s.syscall == k.0 && s.function == k.1).and_then(|s| s.place.clone()))
    };
    // Sites share out exact counts by samples: for a syscall whose count
    // did not change, a change of shares is the sampling's, not the program's.
    let sites = changes(&by_site(base), &by_site(variant))
        .into_iter()
        .filter(|(k, _)| syscalls.iter().any(|s| s.syscall == k.0))
        .map(|(k, calls)| SiteChange { place: place_of(&k), syscall: k.0, function: k.1, calls })
        .collect();
    let by_argument = |c: &Counted| -> BTreeMap<(String, Argument), u64> {
        c.arguments.iter().map(|a| ((a.syscall.clone(), a.argument.clone()), a.calls)).collect()
    };
    let arguments = changes(&by_argument(base), &by_argument(variant))
        .into_iter()
        .map(|((syscall, argument), calls)| ArgumentChange { syscall, argument, calls })
        .collect();
    // A rule can report a program more than once (tiny-io on two fds): the
    // n-th of a (rule, program) pairs with the n-th of the other side.
    let keyed = |c: &Counted| -> BTreeMap<(String, String, usize), String> {
        let mut seen: BTreeMap<(String, String), usize> = BTreeMap::new();
        c.findings
            .iter()
            .map(|f| {
                let n = seen.entry((f.rule.clone(), f.program.clone())).or_default();
                *n += 1;
                ((f.rule.clone(), f.program.clone(), *n), f.what.clone())
            })
            .collect()
    };
    let (a, b) = (keyed(base), keyed(variant));
    let mut keys: Vec<&(String, String, usize)> = a.keys().chain(b.keys()).collect();
    keys.sort();
    keys.dedup();
    let findings = keys
        .into_iter()
        .filter(|k| a.get(*k) != b.get(*k))
        .map(|k| FindingChange { rule: k.0.clone(), program: k.1.clone(), baseline: a.get(k).cloned(), variant: b.get(k).cloned() })
        .collect();
    let close = |c: &Change| c.size() * 100 <= c.baseline.max(c.variant);
    // Findings may still differ: a rule reads the environment sysdiet
    // gave the command, which a wrapper can change before the program runs.
    let no_effect = close(&total) && syscalls.iter().all(|s| close(&s.calls));
    let processes = Change { baseline: base.processes, variant: variant.processes };
    Diff { total, processes, syscalls, arguments, sites, findings, no_effect }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finding(rule: &str, program: &str, what: &str) -> FindingSummary {
        FindingSummary { rule: rule.into(), program: program.into(), what: what.into(), saving_ns: 0 }
    }

    #[test]
    fn the_same_calls_mean_the_change_had_no_effect() {
        let a = Counted {
            syscalls: [("newfstatat".to_string(), 1000), ("read".to_string(), 5)].into(),
            findings: vec![finding("tz-unset", "app", "999 × x")],
            ..Default::default()
        };
        let mut b = a.clone();
        b.syscalls.insert("newfstatat".into(), 1003);
        assert!(diff(&a, &b).no_effect);
        b.syscalls.insert("newfstatat".into(), 3);
        assert!(!diff(&a, &b).no_effect);
    }

    #[test]
    fn a_finding_whose_count_changed_is_changed_not_gone_and_new() {
        let a = Counted { findings: vec![finding("tz-unset", "app", "1,000 × newfstatat"), finding("tiny-io", "app", "x")], ..Default::default() };
        let b = Counted { findings: vec![finding("tz-unset", "app", "10 × newfstatat"), finding("busy-poll", "app", "y")], ..Default::default() };
        let d = diff(&a, &b);
        let show: Vec<(&str, Option<&str>, Option<&str>)> =
            d.findings.iter().map(|f| (f.rule.as_str(), f.baseline.as_deref(), f.variant.as_deref())).collect();
        assert_eq!(
            show,
            vec![("busy-poll", None, Some("y")), ("tiny-io", Some("x"), None), ("tz-unset", Some("1,000 × newfstatat"), Some("10 × newfstatat"))]
        );
    }

    #[test]
    fn counts_keyed_by_syscall_and_argument() {
        let path = |p: &str| Argument::Path { path: Some(p.into()), dirfd: None, null: false, cut: false, raw: None };
        let arg = |p: &str, calls| ArgumentCount { syscall: "newfstatat".into(), argument: path(p), calls };
        let a = Counted {
            syscalls: [("newfstatat".to_string(), 1000), ("read".to_string(), 5)].into(),
            arguments: vec![arg("/etc/localtime", 998), arg("/x", 2)],
            ..Default::default()
        };
        let b = Counted {
            syscalls: [("newfstatat".to_string(), 3), ("read".to_string(), 5)].into(),
            arguments: vec![arg("/x", 2)],
            ..Default::default()
        };
        let d = diff(&a, &b);
        assert_eq!(d.total, Change { baseline: 1005, variant: 8 });
        assert_eq!(
            d.syscalls,
            vec![SyscallChange { syscall: "newfstatat".into(), calls: Change { baseline: 1000, variant: 3 }, errors: Change::default() }]
        );
        assert_eq!(d.arguments.len(), 1, "/x did not change");
        assert_eq!(d.arguments[0].argument, path("/etc/localtime"));
        assert_eq!(d.arguments[0].calls, Change { baseline: 998, variant: 0 });
    }
}
