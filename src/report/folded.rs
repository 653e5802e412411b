//! Call sites as folded stacks (`flamegraph.pl`, inferno, speedscope):
//! one line per (process, call site, syscall), root first, the syscall as
//! the leaf, weighted by calls or by kernel time. Calls no sample saw are
//! kept under `[no stack sample]`, so the lines add up to the exact totals.

use crate::model::{SiteShare, SyscallStats, Trace};

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Weight {
    #[default]
    Count,
    Time,
}

pub fn render(trace: &Trace, weight: Weight) -> String {
    lines(trace, weight).join("\n") + "\n"
}

pub fn lines(trace: &Trace, weight: Weight) -> Vec<String> {
    let value = |calls: u64, ns: u64| if weight == Weight::Count { calls } else { ns };
    let mut out = Vec::new();
    for p in &trace.processes {
        let root = clean(if p.comm.is_empty() { "?" } else { &p.comm });
        for s in &p.syscalls {
            for share in &s.sites {
                let Some(site) = trace.call_site(share) else { continue };
                let frames: Vec<String> = site.frames.iter().rev().map(|f| clean(&f.name())).collect();
                push(&mut out, format!("{root};{};{}", frames.join(";"), s.name), value(share.calls, share.total_ns));
            }
            let (calls, ns) = unsampled(s, &s.sites);
            push(&mut out, format!("{root};[no stack sample];{}", s.name), value(calls, ns));
        }
    }
    out
}

fn push(out: &mut Vec<String>, stack: String, n: u64) {
    if n > 0 {
        out.push(format!("{stack} {n}"));
    }
}

fn unsampled(s: &SyscallStats, sites: &[SiteShare]) -> (u64, u64) {
    let calls: u64 = sites.iter().map(|x| x.calls).sum();
    let ns: u64 = sites.iter().map(|x| x.total_ns).sum();
    (s.calls.saturating_sub(calls), s.total_ns.saturating_sub(ns))
}

/// `;` separates frames and the last space the count: keep them out of names.
fn clean(name: &str) -> String {
    name.replace(';', ":").replace(['\n', '\r'], " ")
}

/// Reads folded lines back: (frames root first, count).
pub fn parse(text: &str) -> Result<Vec<(Vec<String>, u64)>, String> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let (stack, n) = l.rsplit_once(' ').ok_or_else(|| format!("no count in `{l}`"))?;
            let n = n.parse().map_err(|_| format!("bad count in `{l}`"))?;
            Ok((stack.split(';').map(str::to_string).collect(), n))
        })
        .collect()
}
