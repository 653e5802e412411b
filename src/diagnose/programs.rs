//! One program, many processes: the same finding in several processes of
//! one executable (a shell loop running it, xargs, a program spawning
//! helpers) is one finding for the program, with the processes listed,
//! and the thresholds apply to the sum. Each process alone is often under
//! them.

use std::collections::BTreeMap;

use super::{Evidence, Finding};
use crate::human::thousands;
use crate::model::{callsite, ProcessShare, Trace};

/// Merges the findings of one rule about the same thing in processes of
/// the same program.
pub fn group(trace: &Trace, findings: Vec<Finding>) -> Vec<Finding> {
    // Two files of one name are two programs, where the tracer knows files.
    let program_of = |pid: u32| trace.process(pid).map(|p| (p.comm.clone(), p.executable.clone()));
    type Key = (String, String, Option<String>, String, String);
    let mut groups: BTreeMap<Key, Vec<Finding>> = BTreeMap::new();
    let mut out = Vec::new();
    for f in findings {
        // The finding without its count: `newfstatat("/etc/passwd")`.
        let (Some(pid), Some((_, what))) = (f.pid, f.what.split_once(" × ")) else {
            out.push(f);
            continue;
        };
        let Some((program, executable)) = program_of(pid) else {
            out.push(f);
            continue;
        };
        let what = strip_pid(what);
        groups.entry((f.id.clone(), program, executable, f.evidence.syscall.clone(), what)).or_default().push(f);
    }
    for ((_, program, _, syscall, what), mut same) in groups {
        if same.len() == 1 {
            out.extend(same);
            continue;
        }
        same.sort_by(|a, b| b.evidence.calls.cmp(&a.evidence.calls).then(a.pid.cmp(&b.pid)));
        let processes: Vec<ProcessShare> = same.iter().filter_map(|f| Some(ProcessShare { pid: f.pid?, calls: f.evidence.calls })).collect();
        // A row folding many ended processes counts as them all; its
        // figures are theirs summed, so the why is told by a real process.
        let folded = |f: &Finding| f.pid.and_then(|pid| trace.process(pid)).is_some_and(|p| p.folded > 0);
        if let Some(one) = same.iter().position(|f| !folded(f)) {
            same.swap(0, one);
        }
        let calls: u64 = same.iter().map(|f| f.evidence.calls).sum();
        let kernel_ns: u64 = same.iter().map(|f| f.evidence.kernel_ns).sum();
        let mut sites = Vec::new();
        for f in &same {
            callsite::merge_shares(&mut sites, &f.sites);
        }
        let mut merged = same.swap_remove(0);
        // The counts after the first were the same in each: times as many.
        merged.what = format!("{} × {}", thousands(calls), scale_counts(&what, same.len() as u64 + 1));
        merged.saving_ns += same.iter().map(|f| f.saving_ns).sum::<u64>();
        let per_item = merged.evidence.per_item && same.iter().all(|f| f.evidence.per_item);
        merged.evidence = Evidence { untimed: merged.evidence.untimed, per_item, ..Evidence::new(trace, &syscall, calls, kernel_ns) };
        merged.why = format!("{} (in each of {} processes of {program})", merged.why, thousands(trace.processes_in(&processes)));
        merged.pid = None;
        merged.sites = sites;
        merged.program = Some(program);
        merged.processes = processes;
        out.push(merged);
    }
    out
}

/// `what` with every count before a `×` multiplied by `k`: "getpid, 12 ×
/// getuid" of one process is "getpid, 36 × getuid" of three alike.
fn scale_counts(what: &str, k: u64) -> String {
    let words: Vec<&str> = what.split(' ').collect();
    let scaled: Vec<String> = words
        .iter()
        .enumerate()
        .map(|(i, w)| {
            let count = w.replace(',', "").parse::<u64>().ok().filter(|_| words.get(i + 1) == Some(&"×"));
            count.map_or_else(|| w.to_string(), |n| thousands(n * k))
        })
        .collect();
    scaled.join(" ")
}

/// Some findings name their pid in `what`; the group is about all of them.
fn strip_pid(what: &str) -> String {
    match what.find(" (pid ") {
        Some(at) => what[..at].to_string(),
        None => what.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::{testing::*, Fix};
    use crate::model::Process;

    fn finding(t: &Trace, pid: u32, calls: u64) -> Finding {
        Finding {
            id: "repeated-path".into(),
            what: format!("{calls} × newfstatat(\"/etc/passwd\")"),
            pid: Some(pid),
            evidence: Evidence::new(t, "newfstatat", calls, calls * 1000),
            sites: Vec::new(),
            saving_ns: calls * 1000,
            why: "the same path".into(),
            fixes: vec![Fix::code("cache it")],
            ..Default::default()
        }
    }

    #[test]
    fn processes_of_one_program_make_one_finding() {
        let mut t = trace(100_000_000, &[("newfstatat", 1200, 1_200_000)]);
        t.processes =
            (1..=20).map(|pid| Process { pid, comm: if pid == 20 { "other".into() } else { "statloop".into() }, ..Default::default() }).collect();
        let raw: Vec<Finding> = (1..=20).map(|pid| finding(&t, pid, 60)).collect();
        assert!(raw.iter().all(Finding::is_small), "each alone is under the thresholds");
        let grouped = group(&t, raw);
        assert_eq!(grouped.len(), 2, "19 statloops in one, the other alone");
        let g = grouped.iter().find(|f| f.program.is_some()).unwrap();
        assert_eq!(g.what, "1,140 × newfstatat(\"/etc/passwd\")");
        assert_eq!((g.processes.len(), g.pid, g.evidence.calls), (19, None, 1140));
        assert!(!g.is_small());
    }

    #[test]
    fn a_folded_row_counts_as_its_processes_and_does_not_tell_the_why() {
        let mut t = trace(100_000_000, &[("newfstatat", 1200, 1_200_000)]);
        t.processes = (1..=3).map(|pid| Process { pid, comm: "statloop".into(), ..Default::default() }).collect();
        t.processes.push(Process { pid: 1 << 30, comm: "statloop".into(), folded: 500, ..Default::default() });
        let mut raw: Vec<Finding> = (1..=3).map(|pid| finding(&t, pid, 60)).collect();
        raw.push(Finding { why: "the same path, summed".into(), ..finding(&t, 1 << 30, 30_000) });
        let g = group(&t, raw);
        assert_eq!(g.len(), 1);
        assert_eq!(g[0].why, "the same path (in each of 503 processes of statloop)");
        assert_eq!(g[0].evidence.calls, 30_180);
        assert_eq!(g[0].processes[0], ProcessShare { pid: 1 << 30, calls: 30_000 }, "most calls first");
    }

    #[test]
    fn counts_after_the_first_are_summed_too() {
        let mut t = trace(100_000_000, &[("getpid", 300, 300_000)]);
        t.processes = (1..=3).map(|pid| Process { pid, comm: "node".into(), ..Default::default() }).collect();
        let raw = (1..=3)
            .map(|pid| Finding { id: "identity-calls".into(), what: "73 × getpid, 12 × getuid, 1,000 × getgid".into(), ..finding(&t, pid, 73) })
            .collect();
        assert_eq!(group(&t, raw)[0].what, "219 × getpid, 36 × getuid, 3,000 × getgid");
    }

    #[test]
    fn two_files_of_one_name_are_two_programs() {
        let mut t = trace(100_000_000, &[("newfstatat", 1200, 1_200_000)]);
        let exe = |pid: u32| Some(if pid.is_multiple_of(2) { "/usr/bin/statloop" } else { "/opt/statloop" }.to_string());
        t.processes = (1..=4).map(|pid| Process { pid, comm: "statloop".into(), executable: exe(pid), ..Default::default() }).collect();
        let grouped = group(&t, (1..=4).map(|pid| finding(&t, pid, 60)).collect());
        assert_eq!(grouped.len(), 2);
        assert!(grouped.iter().all(|g| g.processes.len() == 2 && g.program.as_deref() == Some("statloop")));
    }
}
