//! The findings part of the text report, in the shape of design.md:
//!
//! ```text
//! [tz-unset] 1,000,000 × newfstatat("/etc/localtime") — 1.21 s in the kernel, of a 1.98 s run
//!   by    use_localtime (timeloop.c:9) ← main (timeloop.c:61)
//!   from  __tz_convert → tzset_internal → __tzfile_read → __GI___fstatat64
//!   why   TZ is unset, so glibc checks /etc/localtime for a change on every localtime()
//!   fix   start it with TZ=:/etc/localtime
//!   prove sysdiet compare --env TZ=:/etc/localtime -- ./timeloop localtime 1000000
//! ```

use std::fmt::Write;

use super::callsites::{by_chain, from_chain};
use crate::diagnose::{Finding, FixKind};
use crate::human::{duration, escaped, thousands};
use crate::model::Trace;

pub fn section(out: &mut String, trace: &Trace, findings: &[Finding]) {
    let run_ns = trace.run.duration_ns;
    if findings.is_empty() {
        let _ = writeln!(out, "\nno problems found");
        return;
    }
    let saving: u64 = findings.iter().map(|f| f.saving_ns).sum();
    let share = if run_ns > 0 { format!(", about {:.0}% of the run's time", 100.0 * saving as f64 / run_ns as f64) } else { String::new() };
    let n = findings.len();
    let _ = writeln!(out, "\n{n} {}{share}", if n == 1 { "problem" } else { "problems" });
    for f in findings {
        let e = &f.evidence;
        let pid = match (&f.program, f.pid) {
            (Some(program), _) => format!(" ({} processes of {})", thousands(trace.processes_in(&f.processes)), escaped(program)),
            (None, Some(p)) if trace.processes.len() > 1 => format!(" ({})", super::who(trace, p)),
            _ => String::new(),
        };
        // A log without -T has no time per call; without timestamps, no run time.
        let cost = match (e.untimed, run_ns) {
            (false, 0) => format!("{} in the kernel, no run time in the log; ", duration(e.kernel_ns)),
            (false, _) => {
                format!("{} in the kernel, of a {} run; {}/s, ", duration(e.kernel_ns), duration(run_ns), thousands(e.per_second.round() as u64))
            }
            (true, 0) => "no times in the log; ".to_string(),
            (true, _) => format!("no time per call in the log, a {} run; {}/s, ", duration(run_ns), thousands(e.per_second.round() as u64)),
        };
        let _ = writeln!(out, "\n[{}] {}{pid} — {cost}{:.0}% of all calls", f.id, f.what, 100.0 * e.share_of_calls);
        if !f.processes.is_empty() {
            // The processes of a finding about a program, most calls first.
            let shown: Vec<String> = f.processes.iter().take(5).map(|p| format!("{} × {}", super::who(trace, p.pid), thousands(p.calls))).collect();
            let more = f.processes.len().saturating_sub(shown.len());
            let more = if more > 0 { format!(", and {more} more") } else { String::new() };
            let _ = writeln!(out, "  in    {}{more}", shown.join(", "));
        }
        if let Some(site) = f.sites.first().and_then(|s| trace.call_site(s)) {
            if site.responsible.is_some() {
                let _ = writeln!(out, "  by    {}", by_chain(site));
            }
            if !site.library_chain().is_empty() {
                let _ = writeln!(out, "  from  {}", from_chain(site));
            }
        }
        let _ = writeln!(out, "  why   {}", f.why);
        for fix in &f.fixes {
            let kind = match fix.kind {
                FixKind::Environment => "env",
                FixKind::Configuration => "config",
                FixKind::Code => "code",
            };
            let _ = writeln!(out, "  fix   {} ({kind})", fix.text);
        }
        if let Some(t) = &f.tradeoff {
            let _ = writeln!(out, "  but   {t}");
        }
        if let Some(p) = &f.prove {
            let _ = writeln!(out, "  prove {p}");
        }
        if f.saving_ns > 0 {
            use crate::model::TimeKind;
            let slack = f.evidence.time_slack_ns();
            if let (Some(measured), Some(each)) = (f.measured_saving_ns, trace.run.syscall_ns) {
                let _ = writeln!(
                    out,
                    "  saves ≈ {} ({} calls × {each} ns, what a syscall costs on this host at least; {} of kernel time was {})",
                    duration(f.saving_ns),
                    thousands(f.evidence.calls),
                    duration(measured),
                    if trace.run.time == TimeKind::Wall { "measured" } else { "sampled" },
                );
            } else if f.saving_ns < slack {
                let _ = writeln!(
                    out,
                    "  saves ≤ ~{} (too few CPU-time ticks landed in these calls to say more; --latency measures each call)",
                    duration(f.saving_ns + slack)
                );
            } else {
                let what = match trace.run.time {
                    TimeKind::CpuSampled { .. } => "the kernel CPU time of the calls it removes, sampled while traced",
                    TimeKind::Wall => "the kernel time of the calls it removes, measured while traced",
                    TimeKind::Unmeasured => "",
                };
                let _ = writeln!(out, "  saves ≈ {} ({what})", duration(f.saving_ns));
            }
        }
    }
}
