//! The call-site part of the text report: for the syscalls made most, the
//! code that made them: `by` the program's own frame and its callers,
//! `from` the library functions between it and the syscall.

use std::fmt::Write;

use crate::human::{escaped, thousands};
use crate::model::{CallSite, SiteShare, SyscallStats, Trace};

/// How many syscalls, and sites under each, the report shows; a syscall
/// below MIN_SHARE of all calls, or a site below it of its syscall's, is
/// left to the JSON and the flame graph.
const TOP_SYSCALLS: usize = 5;
const TOP_SITES: usize = 3;
const MIN_SHARE: f64 = 0.01;
/// Frames shown on one line before the middle is elided.
const CHAIN: usize = 5;

pub fn section(out: &mut String, trace: &Trace) {
    let Some(sampling) = &trace.sampling else { return };
    let floor = (MIN_SHARE * trace.total_calls() as f64).max(2.0) as u64;
    let mut by_calls: Vec<&SyscallStats> = trace.syscalls.iter().filter(|s| s.calls >= floor && !s.sites.is_empty()).collect();
    by_calls.sort_by(|a, b| b.calls.cmp(&a.calls).then(a.name.cmp(&b.name)));
    if by_calls.is_empty() {
        return;
    }
    match 1_000_000_000u64.checked_div(sampling.interval_ns) {
        // A log with every call's stack (strace -k): nothing is sampled.
        None => {
            let _ = writeln!(out, "\ncall sites (every call's stack, {} of them, as the log has them)", thousands(sampling.samples));
        }
        Some(per_second) => {
            let gaps = if sampling.max_gap > 1 { format!(", gaps up to {} calls", thousands(sampling.max_gap)) } else { String::new() };
            let _ = writeln!(
                out,
                "\ncall sites ({} stack samples, at most ~{}/s per thread{gaps}; counts are exact, samples split them among sites)",
                thousands(sampling.samples),
                thousands(per_second)
            );
        }
    }
    for s in by_calls.into_iter().take(TOP_SYSCALLS) {
        let _ = writeln!(out, "  {} × {}", thousands(s.calls), s.name);
        sites(out, trace, &s.sites, s.calls, "    ");
    }
    let unnamed = trace.unnamed_modules();
    if !unnamed.is_empty() {
        let files: Vec<String> = unnamed.iter().map(|m| escaped(crate::model::callsite::module_name(m))).collect();
        let _ = writeln!(
            out,
            "  (no names for code in {}: stripped, and no MiniDebugInfo, debug link or build-id file found; its debug symbols would name it: Debian's -dbgsym package, or any file under /usr/lib/debug/.build-id/)",
            files.join(", ")
        );
    }
    if trace.call_sites.iter().flat_map(|s| &s.frames).any(|f| f.module == "?") {
        let _ = writeln!(out, "  (frames shown as ?+0x… are in memory no file backs, such as a JIT's code, and no perf map names them: a JIT writes /tmp/perf-PID.map when started with node --perf-basic-prof, python -X perf (3.12+) or a JVM perf agent)");
    }
}

/// The top sites of one count, each as a `by` line and a `from` line.
/// Sites that differ only where the report does not look (a line inside
/// glibc) are shown as one.
pub fn sites(out: &mut String, trace: &Trace, shares: &[SiteShare], calls: u64, indent: &str) {
    // Every call sampled: the split is a count, not an estimate.
    let approx = if shares.len() > 1 && shares.iter().map(|s| s.samples).sum::<u64>() < calls { "≈" } else { "" };
    let mut shown: Vec<(String, Option<String>, u64)> = Vec::new();
    for share in shares {
        let Some(site) = trace.call_site(share) else { continue };
        let (head, tail) = match site.responsible_frame() {
            Some(_) => (format!("by    {}", by_chain(site)), Some(format!("from  {}", from_chain(site)))),
            None => (format!("in    {}", from_chain(site)), None),
        };
        let tail = tail.filter(|_| !site.library_chain().is_empty());
        match shown.iter_mut().find(|(h, t, _)| *h == head && *t == tail) {
            Some(s) => s.2 += share.calls,
            None => shown.push((head, tail, share.calls)),
        }
    }
    shown.sort_by_key(|s| std::cmp::Reverse(s.2));
    let big = |n: u64| n as f64 >= MIN_SHARE * calls as f64;
    let keep = shown.iter().take(TOP_SITES).filter(|s| big(s.2)).count().max(1);
    let label = |n: u64| format!("{approx}{}", thousands(n));
    let w = shown.iter().take(keep).map(|s| label(s.2).chars().count()).max().unwrap_or(1);
    for (head, tail, n) in shown.iter().take(keep) {
        let pct = if calls > 0 { 100.0 * *n as f64 / calls as f64 } else { 0.0 };
        let lead = format!("{indent}{:>w$} {pct:>4.0}%", label(*n));
        let _ = writeln!(out, "{lead}  {head}");
        if let Some(tail) = tail {
            let _ = writeln!(out, "{}  {tail}", " ".repeat(lead.chars().count()));
        }
    }
    if shown.len() > keep {
        let rest: u64 = shown[keep..].iter().map(|s| s.2).sum();
        let n = shown.len() - keep;
        let _ = writeln!(out, "{indent}{:>w$} from {n} other {}", label(rest), if n == 1 { "site" } else { "sites" });
    }
}

/// `use_localtime (timeloop.c:9) ← main (timeloop.c:61)`: the program's
/// own frames.
pub fn by_chain(site: &CallSite) -> String {
    // Symbols come from the traced binaries: escaped before a terminal sees them.
    let user: Vec<String> = site.user_chain().iter().map(|f| crate::human::escaped(&f.label())).collect();
    elide(&user, " ← ")
}

/// `localtime → __tz_convert → tzset_internal`: the library functions the
/// call went through, from the program's side to the syscall.
pub fn from_chain(site: &CallSite) -> String {
    let lib: Vec<String> = site.library_chain().iter().rev().map(|f| crate::human::escaped(&f.public_name())).collect();
    let mut s = elide(&lib, " → ");
    if !site.complete {
        s.push_str("  (stack cut short)");
    }
    s
}

fn elide(frames: &[String], sep: &str) -> String {
    if frames.len() <= CHAIN {
        return frames.join(sep);
    }
    let head = &frames[..CHAIN - 2];
    let tail = &frames[frames.len() - 2..];
    format!("{}{sep}…{sep}{}", head.join(sep), tail.join(sep))
}
