//! `sysdiet top`: one row per program, with what it calls per second and
//! what it wastes, most expensive first. The rows are computed here once;
//! the plain-text table and the live screen (commands/top.rs) print them.

use std::fmt::Write;

use crate::diagnose::Finding;
use crate::human::{duration, escaped, thousands};
use crate::model::window::Window;

/// What the rows are ordered by.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SortBy {
    /// The estimated saving of the program's findings per second, then calls/s.
    #[default]
    Waste,
    Calls,
    Errors,
    Name,
}

impl SortBy {
    pub fn next(self) -> SortBy {
        match self {
            SortBy::Waste => SortBy::Calls,
            SortBy::Calls => SortBy::Errors,
            SortBy::Errors => SortBy::Name,
            SortBy::Name => SortBy::Waste,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            SortBy::Waste => "waste",
            SortBy::Calls => "calls/s",
            SortBy::Errors => "errors/s",
            SortBy::Name => "name",
        }
    }
}

/// One program's row. Names are escaped: they come from the traced host.
#[derive(Debug, Clone, PartialEq)]
pub struct TopRow {
    pub unit: String,
    pub program: String,
    /// The file it runs, when known.
    pub executable: Option<String>,
    pub processes: usize,
    pub calls_per_s: f64,
    pub errors_per_s: f64,
    /// Its three busiest syscalls, `name rate`.
    pub busiest: Vec<(String, f64)>,
    /// Its findings, as indices into the window's findings, most saving first.
    pub findings: Vec<usize>,
    /// The findings' estimated saving, in ns per second of the window.
    pub waste_ns_per_s: f64,
}

/// The rows of a window, sorted, with only those whose unit, program or
/// executable contains `filter` (when not empty).
pub fn rows(window: &Window, findings: &[Finding], sort: SortBy, filter: &str) -> Vec<TopRow> {
    let secs = (window.trace.run.duration_ns as f64 / 1e9).max(1e-9);
    let mut rows: Vec<TopRow> = window
        .trace
        .processes
        .iter()
        .filter_map(|p| {
            let key = window.program(p.pid)?;
            let calls: u64 = p.syscalls.iter().map(|s| s.calls).sum();
            let errors: u64 = p.syscalls.iter().map(|s| s.errors).sum();
            let mut busiest: Vec<(String, f64)> = p.syscalls.iter().map(|s| (s.name.clone(), s.calls as f64 / secs)).collect();
            busiest.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            busiest.truncate(3);
            let mut mine: Vec<(usize, f64)> = findings
                .iter()
                .enumerate()
                .filter_map(|(i, f)| window.programs_of(f.pid, &f.processes).into_iter().find(|(k, _)| *k == key).map(|(_, share)| (i, share)))
                .collect();
            let saving = |&(i, share): &(usize, f64)| findings[i].saving_ns as f64 * share;
            mine.sort_by(|a, b| saving(b).total_cmp(&saving(a)));
            Some(TopRow {
                unit: escaped(&key.unit),
                program: escaped(&key.program),
                executable: key.executable.as_deref().map(escaped),
                processes: window.live.get(p.pid as usize - 1).map_or(0, Vec::len),
                calls_per_s: calls as f64 / secs,
                errors_per_s: errors as f64 / secs,
                busiest,
                findings: mine.iter().map(|&(i, _)| i).collect(),
                waste_ns_per_s: mine.iter().map(saving).sum::<f64>() / secs,
            })
        })
        .filter(|r| {
            filter.is_empty() || r.unit.contains(filter) || r.program.contains(filter) || r.executable.as_ref().is_some_and(|e| e.contains(filter))
        })
        .collect();
    rows.sort_by(|a, b| match sort {
        SortBy::Waste => b.waste_ns_per_s.total_cmp(&a.waste_ns_per_s).then(b.calls_per_s.total_cmp(&a.calls_per_s)),
        SortBy::Calls => b.calls_per_s.total_cmp(&a.calls_per_s),
        SortBy::Errors => b.errors_per_s.total_cmp(&a.errors_per_s).then(b.calls_per_s.total_cmp(&a.calls_per_s)),
        SortBy::Name => a.program.cmp(&b.program).then(a.unit.cmp(&b.unit)).then(a.executable.cmp(&b.executable)),
    });
    rows
}

/// A rate for a column: 1234567 -> "1.2M".
pub fn rate(v: f64) -> String {
    match v {
        v if v >= 1e6 => format!("{:.1}M", v / 1e6),
        v if v >= 1e4 => format!("{:.0}k", v / 1e3),
        v if v >= 10.0 => format!("{v:.0}"),
        v => format!("{v:.1}"),
    }
}

/// The waste column: the share of one CPU the findings' calls cost.
pub fn waste(ns_per_s: f64) -> String {
    if ns_per_s <= 0.0 {
        return "-".into();
    }
    format!("{:.1}%", ns_per_s / 1e7)
}

pub const HEADER: [&str; 8] = ["UNIT", "PROGRAM", "EXECUTABLE", "PROCS", "CALLS/S", "ERR/S", "WASTE", "BUSIEST, FINDINGS"];
/// The columns before these are text, left-aligned; these are numbers.
pub const FIRST_NUMBER: usize = 3;

/// A row's cells, as HEADER; `findings` are the window's, which the row's
/// indices point into.
pub fn cells(r: &TopRow, findings: &[Finding]) -> [String; 8] {
    let busiest = r.busiest.iter().map(|(n, v)| format!("{n} {}", rate(*v))).collect::<Vec<_>>().join(", ");
    let ids: Vec<&str> = r.findings.iter().map(|&i| findings[i].id.as_str()).collect();
    let findings = if ids.is_empty() { String::new() } else { format!("  [{}]", ids.join("] [")) };
    [
        r.unit.clone(),
        r.program.clone(),
        r.executable.clone().unwrap_or_else(|| "?".into()),
        r.processes.to_string(),
        rate(r.calls_per_s),
        rate(r.errors_per_s),
        waste(r.waste_ns_per_s),
        format!("{busiest}{findings}"),
    ]
}

/// The one-line summary above the rows.
pub fn summary(window: &Window, shown: usize) -> String {
    let t = &window.trace;
    let secs = (t.run.duration_ns as f64 / 1e9).max(1e-9);
    let lost = super::lost::lost_lines(&t.lost);
    let lost = if lost.is_empty() {
        String::new()
    } else {
        format!("; LOST {}", lost.iter().map(|(what, n)| format!("{} {what}", thousands(*n))).collect::<Vec<_>>().join(", "))
    };
    format!(
        "sysdiet top: {} programs ({shown} shown), {} syscalls/s, window {}; waste = CPU the findings' calls cost{lost}",
        t.processes.len(),
        rate(t.total_calls() as f64 / secs),
        duration(t.run.duration_ns)
    )
}

/// The rows as a plain table (top --once without --json, or no terminal),
/// with each finding's one-line summary below.
pub fn text(window: &Window, findings: &[Finding], rows: &[TopRow]) -> String {
    let mut out = summary(window, rows.len());
    out.push_str("\n\n");
    let all: Vec<[String; 8]> = std::iter::once(HEADER.map(String::from)).chain(rows.iter().map(|r| cells(r, findings))).collect();
    let last = HEADER.len() - 1;
    let widths: Vec<usize> = (0..last).map(|i| all.iter().map(|c| c[i].chars().count()).max().unwrap_or(0)).collect();
    for c in &all {
        for (i, w) in widths.iter().enumerate() {
            let _ = if i >= FIRST_NUMBER { write!(out, "{:>w$}  ", c[i]) } else { write!(out, "{:<w$}  ", c[i]) };
        }
        let _ = writeln!(out, "{}", c[last]);
    }
    if !findings.is_empty() {
        out.push_str("\nfindings:\n");
        for f in findings {
            let programs: Vec<String> =
                window.programs_of(f.pid, &f.processes).iter().map(|(k, _)| format!("{} ({})", escaped(&k.program), escaped(&k.unit))).collect();
            let _ = writeln!(out, "  [{}] {}: {}", f.id, programs.join(", "), f.what);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::window::{Totals, Windows};
    use crate::model::{Process, RunInfo, SyscallStats, Trace};

    fn window() -> Window {
        let mut t = Trace::default();
        for (pid, comm, calls, errors) in [(10, "quiet", 10, 0), (11, "busy", 5000, 9), (12, "bad\x1b[31m", 100, 100)] {
            let s = SyscallStats { calls, errors, name: "read".into(), ..SyscallStats::new(0) };
            t.processes.push(Process { pid, comm: comm.into(), syscalls: vec![s], ..Default::default() });
        }
        let mut w = Windows::start(Totals::default());
        w.next(Totals::of(&t, &mut |_| "/".into()), RunInfo { duration_ns: 2_000_000_000, ..Default::default() })
    }

    #[test]
    fn rows_are_rates_sorted_and_filtered_and_names_escaped() {
        let w = window();
        let by_calls = rows(&w, &[], SortBy::Calls, "");
        assert_eq!(by_calls.iter().map(|r| r.program.as_str()).collect::<Vec<_>>(), ["busy", "bad\\x1b[31m", "quiet"]);
        assert_eq!(by_calls[0].calls_per_s, 2500.0);
        assert_eq!(rows(&w, &[], SortBy::Errors, "")[0].errors_per_s, 50.0);
        assert_eq!(rows(&w, &[], SortBy::Name, "")[0].program, "bad\\x1b[31m");
        assert_eq!(rows(&w, &[], SortBy::Calls, "qui").len(), 1);
        assert!(!text(&w, &[], &by_calls).contains('\x1b'));
    }

    #[test]
    fn two_programs_of_one_name_are_two_rows_told_apart_by_their_file() {
        let mut t = Trace::default();
        for (pid, exe) in [(10, "/usr/bin/python3.11"), (11, "/opt/venv/bin/python3"), (12, "/opt/venv/bin/python3")] {
            let s = SyscallStats { calls: 10, name: "read".into(), ..SyscallStats::new(0) };
            t.processes.push(Process { pid, comm: "python3".into(), executable: Some(exe.into()), syscalls: vec![s], ..Default::default() });
        }
        let mut w = Windows::start(Totals::default());
        let w = w.next(Totals::of(&t, &mut |_| "/".into()), RunInfo { duration_ns: 1_000_000_000, ..Default::default() });
        let r = rows(&w, &[], SortBy::Calls, "");
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].calls_per_s, 20.0, "the venv's two processes count together");
        assert_eq!(r[0].executable.as_deref(), Some("/opt/venv/bin/python3"));
        assert_eq!(rows(&w, &[], SortBy::Calls, "venv").len(), 1, "the filter reads the file too");
        let table = text(&w, &[], &r);
        assert!(table.contains("/usr/bin/python3.11") && table.contains("/opt/venv/bin/python3"), "{table}");
    }

    #[test]
    fn a_finding_is_charged_to_its_program() {
        let w = window();
        let f = Finding { id: "tiny-io".into(), pid: Some(1), saving_ns: 1_000_000_000, ..Default::default() };
        let r = rows(&w, std::slice::from_ref(&f), SortBy::Waste, "");
        // Rows are numbered by program key: bad..., busy, quiet.
        assert_eq!(r[0].findings, [0]);
        assert!(cells(&r[0], std::slice::from_ref(&f))[7].ends_with("[tiny-io]"));
        assert_eq!(r[0].waste_ns_per_s, 5e8);
        assert_eq!(waste(r[0].waste_ns_per_s), "50.0%");
    }
}
