//! Limits for CI: how much a diff may grow (`diff --max-increase`,
//! `--fail-on-new-findings`), and which counts to leave out of it
//! (`--ignore`: the machine's, not the program's). Each limit broken is a
//! `Breach`, said in one line.

use serde::{Deserialize, Serialize};

use super::diff::{Change, Counted, Diff};
use crate::error::{Error, Result};
use crate::model::Argument;

/// The exit status of a command whose limits broke: not a usage error
/// (2), not an error (1); `run --budget` gives the traced command's own
/// status instead when that is not 0.
pub const BREACH_STATUS: i32 = 3;

/// What `diff` may let through.
#[derive(Debug, Clone, Default)]
pub struct Limits {
    /// Most growth allowed, in percent of the baseline, per syscall and in
    /// total.
    pub max_increase_pct: Option<f64>,
    /// Rows with fewer calls than this on both sides are not judged.
    pub min_calls: u64,
    /// A finding NEW has and BASE has not breaks the limits.
    pub fail_on_new_findings: bool,
}

/// One limit broken.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Breach {
    /// The limit, as given (`--max-increase 10%`, `newfstatat = 100`):
    /// numbers, known syscall names and escaped paths, safe to print.
    pub limit: String,
    /// What broke it (`newfstatat: 1 → 2,000 calls`).
    pub what: String,
}

/// Counts left out of a comparison: syscalls by name, arguments by path
/// (a glob: `*` any run of characters, `?` one).
#[derive(Debug, Clone, Default)]
pub struct Ignore {
    names: Vec<String>,
    globs: Vec<regex::Regex>,
}

impl Ignore {
    /// From `--ignore` values: a path glob if it has a `/`, else a syscall.
    pub fn new(patterns: &[String]) -> Result<Ignore> {
        let mut ignore = Ignore::default();
        for p in patterns {
            if p.contains('/') {
                ignore.globs.push(glob(p)?);
            } else if p.is_empty() {
                return Err(Error::Usage("--ignore: give a syscall name or a path glob (/usr/lib/*)".into()));
            } else {
                ignore.names.push(p.clone());
            }
        }
        Ok(ignore)
    }

    fn path(&self, path: &str) -> bool {
        self.globs.iter().any(|g| g.is_match(path))
    }

    /// `counted` without the ignored syscalls, nor the ignored paths'
    /// calls (taken off their syscall's count too).
    pub fn apply(&self, counted: &Counted) -> Counted {
        let mut out = counted.clone();
        out.syscalls.retain(|name, _| !self.names.contains(name));
        out.errors.retain(|name, _| !self.names.contains(name));
        out.sites.retain(|s| !self.names.contains(&s.syscall));
        out.arguments.retain(|a| {
            let ignored_path = matches!(&a.argument, Argument::Path { path: Some(p), .. } if self.path(p));
            if ignored_path {
                if let Some(n) = out.syscalls.get_mut(&a.syscall) {
                    *n = n.saturating_sub(a.calls);
                }
            }
            !self.names.contains(&a.syscall) && !ignored_path
        });
        out
    }
}

/// A glob as an anchored regex.
fn glob(pattern: &str) -> Result<regex::Regex> {
    let mut re = String::from("^");
    for c in pattern.chars() {
        match c {
            '*' => re.push_str(".*"),
            '?' => re.push('.'),
            c => re.push_str(&regex::escape(&c.to_string())),
        }
    }
    re.push('$');
    regex::Regex::new(&re).map_err(|e| Error::Usage(format!("--ignore {pattern}: {e}")))
}

/// `1,000 → 2,000 calls (+100%)`.
pub fn describe(c: &Change) -> String {
    let pct = match c.percent() {
        Some(p) => format!(" ({p:+.0}%)"),
        None => " (new)".into(),
    };
    format!("{} → {} calls{pct}", crate::human::thousands(c.baseline), crate::human::thousands(c.variant), pct = pct)
}

/// Every limit the diff breaks, the total first.
pub fn diff_breaches(d: &Diff, limits: &Limits) -> Vec<Breach> {
    let mut out = Vec::new();
    if let Some(max) = limits.max_increase_pct {
        let limit = format!("--max-increase {}%", trim(max));
        let over = |c: &Change| c.variant > c.baseline && c.baseline.max(c.variant) >= limits.min_calls && c.percent().is_none_or(|p| p > max);
        if over(&d.total) {
            out.push(Breach { limit: limit.clone(), what: format!("total: {}", describe(&d.total)) });
        }
        for s in d.syscalls.iter().filter(|s| over(&s.calls)) {
            out.push(Breach { limit: limit.clone(), what: format!("{}: {}", s.syscall, describe(&s.calls)) });
        }
    }
    if limits.fail_on_new_findings {
        for f in d.findings.iter().filter(|f| f.baseline.is_none()) {
            let program = if f.program.is_empty() { String::new() } else { format!(" ({})", f.program) };
            out.push(Breach {
                limit: "--fail-on-new-findings".into(),
                what: format!("new finding [{}]{program}: {}", f.rule, f.variant.as_deref().unwrap_or_default()),
            });
        }
    }
    out
}

/// 10 for 10.0, 2.5 for 2.5.
fn trim(x: f64) -> String {
    if x.fract() == 0.0 {
        format!("{x:.0}")
    } else {
        format!("{x}")
    }
}

/// `--max-increase 10%` (or `10`): the percent.
pub fn parse_percent(s: &str) -> std::result::Result<f64, String> {
    let n = s.trim().trim_end_matches('%');
    match n.parse::<f64>() {
        Ok(v) if v >= 0.0 && v.is_finite() => Ok(v),
        _ => Err(format!("`{s}` is not a percentage (10%, 0.5%, 0)")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::{diff, ArgumentCount, FindingSummary};

    fn counted(stats: u64, reads: u64) -> Counted {
        Counted { syscalls: [("newfstatat".to_string(), stats), ("read".to_string(), reads)].into(), ..Default::default() }
    }

    #[test]
    fn growth_over_the_limit_breaks_it_per_syscall_and_in_total() {
        let d = diff(&counted(1, 100), &counted(2000, 100));
        let limits = Limits { max_increase_pct: Some(10.0), ..Default::default() };
        let lines: Vec<String> = diff_breaches(&d, &limits).iter().map(|b| format!("{}: {}", b.limit, b.what)).collect();
        assert_eq!(lines, ["--max-increase 10%: total: 101 → 2,100 calls (+1979%)", "--max-increase 10%: newfstatat: 1 → 2,000 calls (+199900%)"]);
        assert!(diff_breaches(&diff(&counted(1, 100), &counted(1, 100)), &limits).is_empty(), "a run against itself");
        assert!(diff_breaches(&diff(&counted(2000, 100), &counted(1, 100)), &limits).is_empty(), "fewer calls break nothing");
        assert!(diff_breaches(&diff(&counted(100, 100), &counted(109, 100)), &limits).is_empty(), "9% is within 10%");
    }

    #[test]
    fn rows_under_min_calls_are_not_judged() {
        let d = diff(&counted(1, 1000), &counted(5, 1000));
        let limits = Limits { max_increase_pct: Some(10.0), min_calls: 10, ..Default::default() };
        assert!(diff_breaches(&d, &limits).is_empty());
        let limits = Limits { max_increase_pct: Some(10.0), min_calls: 5, ..Default::default() };
        assert_eq!(diff_breaches(&d, &limits).len(), 1);
    }

    #[test]
    fn only_new_findings_break_fail_on_new_findings() {
        let f = |rule: &str, what: &str| FindingSummary { rule: rule.into(), program: "tzv".into(), what: what.into(), saving_ns: 0 };
        let base = Counted { findings: vec![f("tiny-io", "x")], ..Default::default() };
        let new = Counted { findings: vec![f("tiny-io", "y"), f("tz-unset", "1,999 × newfstatat")], ..Default::default() };
        let limits = Limits { fail_on_new_findings: true, ..Default::default() };
        let breaches = diff_breaches(&diff(&base, &new), &limits);
        assert_eq!(breaches.len(), 1, "a changed finding is not new: {breaches:?}");
        assert_eq!(breaches[0].what, "new finding [tz-unset] (tzv): 1,999 × newfstatat");
        assert!(diff_breaches(&diff(&new, &base), &limits).is_empty(), "a finding gone breaks nothing");
    }

    #[test]
    fn ignored_syscalls_and_paths_leave_the_counts() {
        let path = |p: &str| Argument::Path { path: Some(p.into()), dirfd: None, null: false, cut: false, raw: None };
        let mut c = counted(1000, 5);
        c.arguments = vec![
            ArgumentCount { syscall: "newfstatat".into(), argument: path("/usr/lib/x86_64-linux-gnu/libc.so.6"), calls: 600 },
            ArgumentCount { syscall: "newfstatat".into(), argument: path("/etc/localtime"), calls: 400 },
        ];
        let out = Ignore::new(&["read".into(), "/usr/lib/*".into()]).unwrap().apply(&c);
        assert_eq!(out.syscalls, [("newfstatat".to_string(), 400)].into());
        assert_eq!(out.arguments.len(), 1);
        assert!(Ignore::new(&[String::new()]).is_err());
    }

    #[test]
    fn percentages_read_as_people_write_them() {
        assert_eq!(parse_percent("10%"), Ok(10.0));
        assert_eq!(parse_percent("0.5"), Ok(0.5));
        assert!(parse_percent("ten").is_err());
        assert!(parse_percent("-1%").is_err());
    }
}
