//! The text and Markdown of `sysdiet compare`.

use std::collections::BTreeSet;
use std::fmt::Write;

use super::format::thousands;
use crate::compare::{Comparison, Verdict, VariantResult};

/// Rows of syscalls and arguments shown in the diff.
const DIFF_ROWS: usize = 12;

fn secs(s: f64) -> String {
    if s >= 1.0 {
        format!("{s:.3} s")
    } else {
        format!("{:.1} ms", s * 1e3)
    }
}

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
    let _ = writeln!(out, "\n  {:<3} {:>10} {:>23} {:>21} {:>9} {:>9} {:>9}", "", "wall", "mean ± sd", "min … max", "user", "sys", "max RSS");
    for v in &c.variants {
        let _ = writeln!(
            out,
            "  {:<3} {:>10} {:>23} {:>21} {:>9} {:>9} {:>9}",
            v.label,
            secs(v.wall.median),
            format!("{} ± {}", secs(v.wall.mean), secs(v.wall.stddev)),
            format!("{} … {}", secs(v.wall.min), secs(v.wall.max)),
            secs(v.user.median),
            secs(v.sys.median),
            format!("{} MiB", v.max_rss_kib / 1024),
        );
    }
    for v in &c.variants {
        if let Some(line) = verdict(v) {
            let _ = writeln!(out, "  {} vs A: {line}", v.label);
        }
        if !v.outliers.is_empty() {
            let runs: Vec<String> = v.outliers.iter().map(|&i| format!("{} ({})", i + 1, secs(v.runs[i].wall_s))).collect();
            let _ = writeln!(out, "  {}: outlier runs {}: a busy moment? more --runs, a quieter machine", v.label, runs.join(", "));
        }
        if v.failed_runs > 0 {
            let _ = writeln!(out, "  {}: {} runs exited non-zero (--ignore-failure)", v.label, v.failed_runs);
        }
    }
    for v in &c.variants {
        if let Some(d) = &v.output_differs {
            let _ = writeln!(out, "\n  OUTPUT DIFFERS: {} does not print what the baseline prints ({d}): a fix that changes the output is not a fix", v.label);
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
    let Some(base) = c.variants.first() else { return };
    if base.syscalls.is_empty() {
        return;
    }
    for v in &c.variants[1..] {
        let _ = writeln!(out, "\nsyscalls, A → {} (one traced run each)", v.label);
        let rows = |a: &std::collections::BTreeMap<String, u64>, b: &std::collections::BTreeMap<String, u64>| {
            let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            let mut rows: Vec<(String, u64, u64)> = keys
                .into_iter()
                .map(|k| (k.clone(), a.get(k).copied().unwrap_or(0), b.get(k).copied().unwrap_or(0)))
                .filter(|(_, x, y)| x != y)
                .collect();
            rows.sort_by_key(|(_, x, y)| std::cmp::Reverse(x.abs_diff(*y)));
            rows
        };
        let calls = rows(&base.syscalls, &v.syscalls);
        let args = rows(&base.arguments, &v.arguments);
        let total = |m: &std::collections::BTreeMap<String, u64>| m.values().sum::<u64>();
        let w = calls.iter().chain(&args).map(|r| r.0.chars().count()).max().unwrap_or(5).clamp(5, 60);
        let line = |out: &mut String, name: &str, a: u64, b: u64| {
            let sign = if b >= a { "+" } else { "−" };
            let _ = writeln!(out, "  {name:<w$} {:>12} → {:>12}  {sign}{}", thousands(a), thousands(b), thousands(a.abs_diff(b)));
        };
        line(out, "total", total(&base.syscalls), total(&v.syscalls));
        for (name, a, b) in calls.iter().chain(&args).take(DIFF_ROWS) {
            line(out, name, *a, *b);
        }
        if calls.is_empty() {
            let _ = writeln!(out, "  (the same calls, the same counts)");
        }
        let gone: Vec<&String> = base.findings.iter().filter(|f| !v.findings.contains(f)).collect();
        let new: Vec<&String> = v.findings.iter().filter(|f| !base.findings.contains(f)).collect();
        for f in gone {
            let _ = writeln!(out, "  gone in {}: {f}", v.label);
        }
        for f in new {
            let _ = writeln!(out, "  new in {}: {f}", v.label);
        }
    }
}

pub fn markdown(c: &Comparison) -> String {
    let mut out = String::from("| variant | change | wall (median) | mean ± sd | min … max | user | sys | vs A |\n|---|---|---:|---:|---:|---:|---:|---|\n");
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
            secs(v.wall.median),
            secs(v.wall.mean),
            secs(v.wall.stddev),
            secs(v.wall.min),
            secs(v.wall.max),
            secs(v.user.median),
            secs(v.sys.median)
        );
    }
    let _ = writeln!(out, "\n{} runs per variant after {} warm-up, interleaved, untraced; 95% bootstrap intervals of the ratio of medians.", c.runs, c.warmup);
    out
}
