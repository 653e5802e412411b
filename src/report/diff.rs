//! The text and Markdown of `sysdiet diff`.

use std::fmt::Write;

use super::compare::finding_change;
use super::text::describe_key;
use crate::compare::budget::BudgetResult;
use crate::compare::{Change, RunDiff};
use crate::human::{escaped, thousands};

/// Rows shown of each kind.
const ROWS: usize = 20;

/// `+1,999 (+99,950%)`, `−3 (−100%)`, `+5 (new)`.
fn change(c: &Change) -> String {
    let sign = if c.variant >= c.baseline { "+" } else { "−" };
    let pct = match c.percent() {
        Some(p) if p.abs() >= 100.0 => format!(" ({}{}%)", if p >= 0.0 { "+" } else { "−" }, thousands(p.abs().round() as u64)),
        Some(p) if p.abs() >= 0.05 => format!(" ({}{:.1}%)", if p >= 0.0 { "+" } else { "−" }, p.abs()),
        Some(_) => String::new(),
        None => " (new)".into(),
    };
    format!("{sign}{}{pct}", thousands(c.size()))
}

/// Calls per process on each side, when the number of processes differs
/// or is more than one.
fn per_process(d: &RunDiff, c: &Change) -> Option<String> {
    let p = d.diff.processes;
    (p.baseline > 1 || p.variant > 1)
        .then(|| format!("{:.1} → {:.1} a process", c.baseline as f64 / p.baseline.max(1) as f64, c.variant as f64 / p.variant.max(1) as f64))
}

pub fn render(d: &RunDiff) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "sysdiet diff: {} → {}", escaped(&d.base), escaped(&d.new));
    let t = &d.diff.total;
    let _ = writeln!(out, "  total      {:>12} → {:>12}  {}", thousands(t.baseline), thousands(t.variant), change(t));
    let p = &d.diff.processes;
    if p.size() > 0 {
        let _ = writeln!(out, "  processes  {:>12} → {:>12}  {}", thousands(p.baseline), thousands(p.variant), change(p));
    }
    if d.diff.syscalls.is_empty() && d.diff.findings.is_empty() {
        let _ = writeln!(out, "\n  the same calls, the same counts");
    }
    let rows = |out: &mut String, title: &str, rows: Vec<(String, Change, Option<String>)>| {
        if rows.is_empty() {
            return;
        }
        let _ = writeln!(out, "\n{title}");
        let w = rows.iter().take(ROWS).map(|r| r.0.chars().count()).max().unwrap_or(5).clamp(5, 60);
        for (name, c, extra) in rows.iter().take(ROWS) {
            let extra = extra.as_ref().map(|e| format!("  {e}")).unwrap_or_default();
            let _ = writeln!(out, "  {name:<w$} {:>12} → {:>12}  {}{extra}", thousands(c.baseline), thousands(c.variant), change(c));
        }
        if rows.len() > ROWS {
            let _ = writeln!(out, "  … {} more (--json has them all)", rows.len() - ROWS);
        }
    };
    rows(
        &mut out,
        "syscalls (calls)",
        d.diff
            .syscalls
            .iter()
            .map(|s| {
                let errors = (s.errors.size() > 0).then(|| format!("errors {} → {}", thousands(s.errors.baseline), thousands(s.errors.variant)));
                let extra = [errors, per_process(d, &s.calls)].into_iter().flatten().collect::<Vec<_>>().join(", ");
                (escaped(&s.syscall), s.calls, (!extra.is_empty()).then_some(extra))
            })
            .collect(),
    );
    rows(&mut out, "repeated arguments", d.diff.arguments.iter().map(|a| (describe_key(&a.syscall, &a.argument), a.calls, None)).collect());
    rows(
        &mut out,
        "call sites",
        d.diff
            .sites
            .iter()
            .map(|s| {
                let place = s.place.as_ref().map(|p| format!(" ({})", escaped(p))).unwrap_or_default();
                (format!("{} by {}{place}", escaped(&s.syscall), escaped(&s.function)), s.calls, None)
            })
            .collect(),
    );
    if !d.diff.findings.is_empty() {
        let _ = writeln!(out, "\nfindings");
        for f in &d.diff.findings {
            let _ = writeln!(out, "  {}", finding_change(f, "NEW"));
        }
    }
    if !d.machine_dependent.is_empty() {
        let _ = writeln!(out, "\ncounts that move with the machine, not only the program (--ignore leaves them out)");
        for m in &d.machine_dependent {
            let _ = writeln!(out, "  {}: {}", escaped(&m.what), m.on);
        }
    }
    if !d.breaches.is_empty() {
        let _ = writeln!(out);
        for b in &d.breaches {
            let _ = writeln!(out, "LIMIT BROKEN ({}): {}", b.limit, escaped(&b.what));
        }
    }
    out
}

/// For a pull-request comment.
pub fn markdown(d: &RunDiff) -> String {
    // Escaped for a terminal's sake first where the text is raw; then
    // kept inside its table cell.
    let cell = |s: &str| s.replace('|', "\\|");
    let raw = |s: &str| cell(&escaped(s));
    let mut out = format!("**Syscalls, `{}` → `{}`**\n\n| calls | base | new | change |\n|---|---:|---:|---:|\n", raw(&d.base), raw(&d.new));
    let row = |out: &mut String, name: &str, c: &Change| {
        let _ = writeln!(out, "| {name} | {} | {} | {} |", thousands(c.baseline), thousands(c.variant), change(c));
    };
    row(&mut out, "total", &d.diff.total);
    for s in d.diff.syscalls.iter().take(ROWS) {
        row(&mut out, &format!("`{}`", raw(&s.syscall)), &s.calls);
    }
    for a in d.diff.arguments.iter().take(ROWS) {
        row(&mut out, &format!("`{}`", cell(&describe_key(&a.syscall, &a.argument))), &a.calls);
    }
    for s in d.diff.sites.iter().take(ROWS) {
        let place = s.place.as_ref().map(|p| format!(" ({})", raw(p))).unwrap_or_default();
        row(&mut out, &format!("`{}` by `{}`{place}", raw(&s.syscall), raw(&s.function)), &s.calls);
    }
    for f in &d.diff.findings {
        let _ = writeln!(out, "\n- {}", cell(&finding_change(f, "new")));
    }
    if !d.breaches.is_empty() {
        let _ = writeln!(out);
        for b in &d.breaches {
            let _ = writeln!(out, "- :x: **limit broken** ({}): {}", cell(&b.limit), raw(&b.what));
        }
    }
    out
}

/// After a run's report: the budget kept, or each limit broken.
pub fn budget(b: &BudgetResult) -> String {
    let mut out = String::from("\n");
    if b.breaches.is_empty() {
        let _ = writeln!(out, "budget {}: kept", escaped(&b.file));
    }
    for br in &b.breaches {
        let _ = writeln!(out, "BUDGET BROKEN ({}, {}): {}", escaped(&b.file), br.limit, escaped(&br.what));
    }
    out
}
