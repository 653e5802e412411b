//! The call-site part of the text report: for the syscalls made most, the
//! code that made them: `by` the program's own frame and its callers,
//! `from` the library functions between it and the syscall.

use std::fmt::Write;

use super::format::thousands;
use crate::model::{CallSite, Frame, SiteShare, SyscallStats, Trace};


/// How many syscalls, and sites under each, the report shows.
const TOP_SYSCALLS: usize = 5;
const TOP_SITES: usize = 3;
/// Frames shown on one line before the middle is elided.
const CHAIN: usize = 5;

pub fn section(out: &mut String, trace: &Trace) {
    let Some(sampling) = &trace.sampling else { return };
    let mut by_calls: Vec<&SyscallStats> = trace.syscalls.iter().filter(|s| s.calls > 1 && !s.sites.is_empty()).collect();
    by_calls.sort_by(|a, b| b.calls.cmp(&a.calls).then(a.name.cmp(&b.name)));
    if by_calls.is_empty() {
        return;
    }
    let rate = if sampling.max_gap > 1 {
        format!(", gaps up to {} calls", thousands(sampling.max_gap))
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "\ncall sites ({} stack samples{rate}; counts are exact, samples split them among sites)",
        thousands(sampling.samples)
    );
    for s in by_calls.into_iter().take(TOP_SYSCALLS) {
        let _ = writeln!(out, "  {} × {}", thousands(s.calls), s.name);
        sites(out, trace, &s.sites, s.calls, "    ");
    }
}

/// The top sites of one count, each as a `by` line and a `from` line.
pub fn sites(out: &mut String, trace: &Trace, shares: &[SiteShare], calls: u64, indent: &str) {
    // Every call sampled: the split is a count, not an estimate.
    let approx = if shares.len() > 1 && shares.iter().map(|s| s.samples).sum::<u64>() < calls { "≈" } else { " " };
    let w = 1 + shares.iter().take(TOP_SITES).map(|s| thousands(s.calls).len()).max().unwrap_or(1);
    for share in shares.iter().take(TOP_SITES) {
        let Some(site) = trace.call_site(share) else { continue };
        let pct = if calls > 0 { 100.0 * share.calls as f64 / calls as f64 } else { 0.0 };
        let lead = format!("{indent}{:>w$} {pct:>4.0}%", format!("{approx}{}", thousands(share.calls)).trim());
        let pad = " ".repeat(lead.chars().count());
        match site.responsible_frame() {
            Some(_) => {
                let _ = writeln!(out, "{lead}  by    {}", by_chain(site));
                if !site.library_chain().is_empty() {
                    let _ = writeln!(out, "{pad}  from  {}", from_chain(site));
                }
            }
            None => {
                let _ = writeln!(out, "{lead}  in    {}", from_chain(site));
            }
        }
    }
    if shares.len() > TOP_SITES {
        let rest: u64 = shares[TOP_SITES..].iter().map(|s| s.calls).sum();
        let rest = format!("{approx}{}", thousands(rest));
        let _ = writeln!(out, "{indent}{:>w$} from {} more sites", rest.trim(), shares.len() - TOP_SITES);
    }
}

/// `use_localtime (timeloop.c:9) ← main (timeloop.c:61)`: the program's
/// own frames.
pub fn by_chain(site: &CallSite) -> String {
    let user: Vec<String> = site.user_chain().iter().map(Frame::label).collect();
    elide(&user, " ← ")
}

/// `localtime → __tz_convert → tzset_internal`: the library functions the
/// call went through, from the program's side to the syscall.
pub fn from_chain(site: &CallSite) -> String {
    let lib: Vec<String> = site.library_chain().iter().rev().map(Frame::name).collect();
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
