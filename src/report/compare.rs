//! The text and Markdown of `sysdiet compare`.

use std::fmt::Write;

use super::text::describe_key;
use crate::compare::{Change, FindingChange};
use crate::compare::{Comparison, VariantResult, Verdict};
use crate::human::{escaped, seconds, thousands};

/// Rows of syscalls and arguments shown in the diff.
const DIFF_ROWS: usize = 12;

fn verdict(v: &VariantResult) -> Option<String> {
    let b = v.vs_baseline.as_ref()?;
    let how = match b.verdict {
        Verdict::Faster => format!("faster: {:.2}× as fast", 1.0 / b.ratio),
        Verdict::Slower => format!("slower: {:.2}× as slow", b.ratio),
        Verdict::NoSignificantDifference => "no significant difference".into(),
    };
    Some(format!("{:.3}× the baseline's median (95% CI {:.3}–{:.3}): {how}", b.ratio, b.ci_low, b.ci_high))
}

pub fn render(c: &Comparison) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "sysdiet compare: {} variants, {} runs each after {} warm-up{}, interleaved, untraced",
        c.variants.len(),
        c.runs,
        c.warmup,
        if c.warmup == 1 { "" } else { "s" }
    );
    for v in &c.variants {
        let _ = writeln!(out, "  {}  {}", v.label, if v.change.is_empty() { v.command.join(" ") } else { v.change.clone() });
    }
    if c.interrupted {
        let _ = writeln!(out, "  interrupted: {} complete round{} of each variant, not traced", c.runs, if c.runs == 1 { "" } else { "s" });
    }
    let _ = writeln!(out, "\n  {:<3} {:>10} {:>23} {:>21} {:>9} {:>9} {:>9}", "", "wall", "mean ± sd", "min … max", "user", "sys", "max RSS");
    for v in &c.variants {
        let _ = writeln!(
            out,
            "  {:<3} {:>10} {:>23} {:>21} {:>9} {:>9} {:>9}",
            v.label,
            seconds(v.wall.median),
            format!("{} ± {}", seconds(v.wall.mean), seconds(v.wall.stddev)),
            format!("{} … {}", seconds(v.wall.min), seconds(v.wall.max)),
            seconds(v.user.median),
            seconds(v.sys.median),
            format!("{} MiB", v.max_rss_kib / 1024),
        );
    }
    for v in &c.variants {
        if let Some(line) = verdict(v) {
            let _ = writeln!(out, "  {} vs A: {line}", v.label);
        }
        if !v.outliers.is_empty() {
            let runs: Vec<String> = v.outliers.iter().map(|&i| format!("{} ({})", i + 1, seconds(v.runs[i].wall_s))).collect();
            let _ = writeln!(
                out,
                "  {}: runs {} were far slower than the rest (over 10 robust sigmas): a busy moment? more --runs, a quieter machine",
                v.label,
                runs.join(", ")
            );
        }
        if v.failed_runs > 0 {
            let _ = writeln!(out, "  {}: {} runs exited non-zero (--ignore-failure)", v.label, v.failed_runs);
        }
    }
    for v in &c.variants {
        if let Some(d) = &v.output_differs {
            let _ = writeln!(
                out,
                "\n  OUTPUT DIFFERS: {} does not print what the baseline prints ({d}): a fix that changes the output is not a fix",
                v.label
            );
        }
    }
    match &c.trace_error {
        Some(e) => {
            let _ = writeln!(out, "\n  no syscall counts: {e}");
        }
        None => diff(&mut out, c),
    }
    out
}

fn diff(out: &mut String, c: &Comparison) {
    for v in c.variants.iter().skip(1) {
        let Some(d) = &v.diff else { continue };
        let _ = writeln!(out, "\nsyscalls, A → {} (one traced run each)", v.label);
        let rows: Vec<(String, Change)> = d
            .syscalls
            .iter()
            .map(|s| (escaped(&s.syscall), s.calls))
            .chain(d.arguments.iter().map(|a| (describe_key(&a.syscall, &a.argument), a.calls)))
            .collect();
        let w = rows.iter().map(|r| r.0.chars().count()).max().unwrap_or(5).clamp(5, 60);
        let line = |out: &mut String, name: &str, c: Change| {
            let sign = if c.variant >= c.baseline { "+" } else { "−" };
            let _ = writeln!(out, "  {name:<w$} {:>12} → {:>12}  {sign}{}", thousands(c.baseline), thousands(c.variant), thousands(c.size()));
        };
        line(out, "total", d.total);
        for (name, c) in rows.iter().take(DIFF_ROWS) {
            line(out, name, *c);
        }
        if d.syscalls.is_empty() {
            let _ = writeln!(out, "  (the same calls, the same counts)");
        }
        if d.no_effect {
            let _ = writeln!(
                out,
                "  {} makes the same syscalls as A (every count within 1%): the change did not take effect; check that it reaches the program (a wrapper script may reset the variable)",
                v.label
            );
        }
        // With the same calls, findings that differ only differ in what
        // sysdiet believed of the environment: not worth a line each.
        for f in d.findings.iter().filter(|_| !d.no_effect) {
            let _ = writeln!(out, "  {}", finding_change(f, &v.label));
        }
    }
}

/// `gone in B: [tz-unset] ...`, `new in B: ...`, `changed in B: [rule] x → y`.
pub(super) fn finding_change(f: &FindingChange, label: &str) -> String {
    let program = if f.program.is_empty() { String::new() } else { format!(" ({})", escaped(&f.program)) };
    match (&f.baseline, &f.variant) {
        (Some(a), None) => format!("gone in {label}: [{}]{program} {a}", f.rule),
        (None, Some(b)) => format!("new in {label}: [{}]{program} {b}", f.rule),
        (Some(a), Some(b)) => format!("changed in {label}: [{}]{program} {a} → {b}", f.rule),
        (None, None) => format!("[{}]{program}", f.rule),
    }
}

pub fn markdown(c: &Comparison) -> String {
    let mut out =
        String::from("| variant | change | wall (median) | mean ± sd | min … max | user | sys | vs A |\n|---|---|---:|---:|---:|---:|---:|---|\n");
    for v in &c.variants {
        let vs = v.vs_baseline.as_ref().map_or("baseline".to_string(), |b| {
            let word = match b.verdict {
                Verdict::Faster => "faster",
                Verdict::Slower => "slower",
                Verdict::NoSignificantDifference => "no significant difference",
            };
            format!("{:.3}× ({:.3}–{:.3}), {word}", b.ratio, b.ci_low, b.ci_high)
        });
        let change = if v.change.is_empty() { format!("`{}`", v.command.join(" ")) } else { format!("`{}`", v.change) };
        let _ = writeln!(
            out,
            "| {} | {change} | {} | {} ± {} | {} … {} | {} | {} | {vs} |",
            v.label,
            seconds(v.wall.median),
            seconds(v.wall.mean),
            seconds(v.wall.stddev),
            seconds(v.wall.min),
            seconds(v.wall.max),
            seconds(v.user.median),
            seconds(v.sys.median)
        );
    }
    let _ = writeln!(
        out,
        "\n{} runs per variant after {} warm-up, interleaved, untraced; 95% bootstrap intervals of the ratio of medians.",
        c.runs, c.warmup
    );
    for v in c.variants.iter().skip(1) {
        let Some(d) = &v.diff else { continue };
        let _ = writeln!(out, "\n**Syscalls, A → {}** (one traced run each)\n\n| calls | A | {} | change |\n|---|---:|---:|---:|", v.label, v.label);
        let row = |out: &mut String, name: &str, c: Change| {
            let sign = if c.variant >= c.baseline { "+" } else { "−" };
            let _ = writeln!(out, "| {name} | {} | {} | {sign}{} |", thousands(c.baseline), thousands(c.variant), thousands(c.size()));
        };
        row(&mut out, "total", d.total);
        for s in d.syscalls.iter().take(DIFF_ROWS) {
            row(&mut out, &format!("`{}`", s.syscall), s.calls);
        }
        for a in d.arguments.iter().take(DIFF_ROWS) {
            row(&mut out, &format!("`{}`", describe_key(&a.syscall, &a.argument).replace('|', "\\|")), a.calls);
        }
        for f in &d.findings {
            let _ = writeln!(out, "\n- {}", finding_change(f, &v.label).replace('|', "\\|"));
        }
    }
    out
}
