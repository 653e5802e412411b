//! `run --budget FILE`: the most calls a run may make (in total, per
//! syscall, per path) and the findings it may have, from a TOML file;
//! what a run broke of it.
//!
//! ```toml
//! [calls]          # most calls allowed: in total, per syscall
//! total = 5000
//! newfstatat = 100
//! [paths]          # most calls naming the path, of any syscall
//! "/etc/localtime" = 1
//! [findings]
//! allow = ["tiny-io"]   # any other finding breaks the budget
//! ```

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use toml::Spanned;

use super::gate::Breach;
use crate::diagnose::Finding;
use crate::error::{Error, Result};
use crate::human::thousands;
use crate::model::{Argument, Trace};

/// A budget, as read.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Budget {
    /// The file it came from.
    #[serde(skip)]
    pub file: String,
    /// Most calls in all.
    pub total: Option<u64>,
    /// Most calls per syscall.
    pub calls: BTreeMap<String, u64>,
    /// Most calls naming each path.
    pub paths: BTreeMap<String, u64>,
    /// The findings allowed; None: findings are not judged.
    pub allow: Option<Vec<String>>,
}

/// A budget and what a run broke of it (the run document's `budget`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct BudgetResult {
    pub file: String,
    pub limits: Budget,
    pub breaches: Vec<Breach>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BudgetFile {
    #[serde(default)]
    calls: BTreeMap<Spanned<String>, u64>,
    #[serde(default)]
    paths: BTreeMap<String, u64>,
    findings: Option<FindingsSection>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FindingsSection {
    #[serde(default)]
    allow: Vec<String>,
}

impl Budget {
    /// Reads and checks a budget file: a key it does not know, a value of
    /// the wrong type or a syscall sysdiet does not know is one line
    /// naming it and its line.
    pub fn read(path: &Path) -> Result<Budget> {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| Error::Log {
            path: name.clone(),
            why: if e.kind() == std::io::ErrorKind::NotFound { "no such file (check the path)".into() } else { e.to_string() },
        })?;
        Budget::parse(&name, &text)
    }

    pub fn parse(name: &str, text: &str) -> Result<Budget> {
        let line_of = |at: usize| text[..at.min(text.len())].matches('\n').count() + 1;
        let file: BudgetFile = toml::from_str(text).map_err(|e| {
            let line = e.span().map(|s| format!(":{}", line_of(s.start))).unwrap_or_default();
            Error::Usage(format!("{name}{line}: {} (a budget has [calls], [paths] and [findings] allow = [...])", e.message().trim()))
        })?;
        let mut budget = Budget { file: name.to_string(), paths: file.paths, allow: file.findings.map(|f| f.allow), ..Default::default() };
        for (key, most) in file.calls {
            let syscall = key.get_ref();
            if syscall == "total" {
                budget.total = Some(most);
            } else if crate::linux::syscalls::by_name(syscall).is_some() {
                budget.calls.insert(syscall.clone(), most);
            } else {
                return Err(Error::Usage(format!(
                    "{name}:{}: [calls] {}: no syscall of that name (name them as strace does, or total)",
                    line_of(key.span().start),
                    crate::human::escaped(syscall)
                )));
            }
        }
        Ok(budget)
    }

    /// What `trace` and its findings broke of the budget.
    pub fn check(&self, trace: &Trace, findings: &[Finding]) -> BudgetResult {
        let mut breaches = Vec::new();
        let over = |limit: String, what: String, calls: u64, most: u64| {
            (calls > most).then(|| Breach { limit, what: format!("{what}: {} calls, over {}", thousands(calls), thousands(most)) })
        };
        if let Some(most) = self.total {
            breaches.extend(over(format!("total = {most}"), "total".into(), trace.total_calls(), most));
        }
        for (syscall, &most) in &self.calls {
            let calls = trace.syscall(syscall).map_or(0, |s| s.calls);
            breaches.extend(over(format!("{syscall} = {most}"), syscall.clone(), calls, most));
        }
        for (path, &most) in &self.paths {
            let calls: u64 =
                trace.arguments.iter().filter(|a| matches!(&a.argument, Argument::Path { path: Some(p), .. } if p == path)).map(|a| a.calls).sum();
            breaches.extend(over(format!("\"{}\" = {most}", crate::human::escaped(path)), format!("calls naming {path}"), calls, most));
        }
        if let Some(allow) = &self.allow {
            for f in findings.iter().filter(|f| !allow.contains(&f.id)) {
                breaches.push(Breach { limit: "[findings] allow".into(), what: format!("finding [{}] {}", f.id, f.what) });
            }
        }
        BudgetResult { file: self.file.clone(), limits: self.clone(), breaches }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_budget_reads_as_written() {
        let b =
            Budget::parse("b.toml", "[calls]\ntotal = 5000\nnewfstatat = 100\n[paths]\n\"/etc/localtime\" = 1\n[findings]\nallow = [\"tiny-io\"]\n")
                .unwrap();
        assert_eq!(b.total, Some(5000));
        assert_eq!(b.calls, [("newfstatat".to_string(), 100)].into());
        assert_eq!(b.paths, [("/etc/localtime".to_string(), 1)].into());
        assert_eq!(b.allow, Some(vec!["tiny-io".to_string()]));
    }

    #[test]
    fn a_bad_budget_is_one_line_naming_the_key_and_its_line() {
        let err = |text: &str| Budget::parse("b.toml", text).unwrap_err().to_string();
        assert_eq!(
            err("[calls]\ntotal = 1\nnewfstatt = 100\n"),
            "b.toml:3: [calls] newfstatt: no syscall of that name (name them as strace does, or total)"
        );
        let unknown = err("[calls]\ntotal = 1\n[limits]\nx = 1\n");
        assert!(unknown.starts_with("b.toml:3: unknown field `limits`"), "{unknown}");
        assert!(!unknown.contains('\n'), "{unknown}");
        let wrong_type = err("[calls]\nnewfstatat = \"many\"\n");
        assert!(wrong_type.starts_with("b.toml:2: invalid type: string \"many\", expected u64"), "{wrong_type}");
    }
}
