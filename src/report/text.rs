//! The text report: a header, a `strace -c` style table, the most repeated
//! arguments, and with --per-thread a breakdown per process and thread.

use std::fmt::Write;

use crate::human::{bytes, duration, escaped, quoted, thousands};
use crate::model::{Argument, ArgumentStats, Exit, SyscallStats, TimeKind, Trace};

/// How many repeated arguments the report lists.
const TOP_ARGUMENTS: usize = 10;
/// How many process rows the breakdown lists.
const TOP_PROCESSES: usize = 20;

pub fn render(trace: &Trace, findings: &[crate::diagnose::Finding], per_thread: bool) -> String {
    let mut out = String::new();
    header(&mut out, trace);
    out.push('\n');
    table(&mut out, &trace.syscalls);
    errors(&mut out, &trace.syscalls);
    arguments(&mut out, trace);
    super::callsites::section(&mut out, trace);
    if per_thread || trace.processes.len() > 1 {
        breakdown(&mut out, trace, per_thread);
    }
    super::findings::section(&mut out, trace, findings);
    out
}

fn header(out: &mut String, trace: &Trace) {
    let run = &trace.run;
    let what = if run.command.is_empty() {
        format!("pid {}", run.root_pids.iter().map(u32::to_string).collect::<Vec<_>>().join(","))
    } else {
        // The command line is the user's, but may hold anything: escaped.
        run.command.iter().map(|a| escaped(a)).collect::<Vec<_>>().join(" ")
    };
    let _ = writeln!(out, "sysdiet: {what}");
    let pids = run.root_pids.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
    let mut facts = vec![
        format!(
            "pid {pids}: {} {}, {} {}",
            thousands(trace.process_count() as u64),
            plural(trace.process_count(), "process", "processes"),
            thousands(trace.thread_count() as u64),
            plural(trace.thread_count(), "thread", "threads")
        ),
        duration(run.duration_ns),
    ];
    match run.exit {
        Some(Exit::Code { code }) => facts.push(format!("exit {code}")),
        Some(Exit::Signal { signal, core_dumped }) => {
            facts.push(format!("killed by {}{}", signal_name(signal), if core_dumped { " (core dumped)" } else { "" }))
        }
        None => {}
    }
    if run.interrupted {
        facts.push("interrupted: counts so far".into());
    }
    match &run.fallback {
        Some(why) => facts.push(format!("counted by {}: {why}", run.backend)),
        None => facts.push(format!("counted by {}", run.backend)),
    }
    if let Some(first) = &run.ptrace_first {
        let calls = plural(first.calls as usize, "call", "calls");
        let mut fact = format!("ptrace counted the first {} while BPF loaded ({} {calls}, untimed)", duration(first.ns), thousands(first.calls));
        if first.threads_kept > 0 {
            let threads = plural(first.threads_kept as usize, "thread", "threads");
            fact.push_str(&format!("; {} {threads} stayed with ptrace (no thread pidfd before Linux 6.9)", thousands(first.threads_kept)));
        }
        facts.push(fact);
    }
    if let Some(f) = &run.filter {
        facts.push(format!("only -e {f}"));
    }
    let _ = writeln!(out, "  {}", facts.join(" · "));
    let lost = super::lost::lost_lines(&trace.lost);
    if lost.is_empty() {
        let _ = writeln!(out, "  nothing lost: every syscall counted");
    } else {
        let items: Vec<String> = lost.iter().map(|(what, n)| format!("{} {what}", thousands(*n))).collect();
        let what = if trace.lost.counts_incomplete() { "counts incomplete" } else { "counts complete" };
        let _ = writeln!(out, "  LOST ({what}): {}", items.join(", "));
        if trace.lost.arguments_incomplete() {
            let _ =
                writeln!(out, "  findings that read arguments may be missing ({}): see LOST", crate::diagnose::rules_reading_arguments().join(", "));
        }
    }
    if let Some(log) = &run.log {
        let _ = writeln!(out, "  {}", log_line(log));
    }
    let _ = writeln!(out, "  {}", time_line(trace));
}

/// What a strace log held, and what it lacked that the report would use.
fn log_line(log: &crate::model::LogFacts) -> String {
    let had = [format!("{} lines", thousands(log.lines)), format!("{} calls", thousands(log.calls))];
    let mut lacked = Vec::new();
    for (has, flag, what) in [
        (log.follow_forks, "-f", "children"),
        (log.durations, "-T", "time per call"),
        (log.stacks, "-k", "call sites"),
        (log.timestamps, "-tt", "run length, rates"),
    ] {
        if !has {
            lacked.push(format!("{flag} ({what})"));
        }
    }
    let files = if log.paths.len() == 1 { escaped(&log.paths[0]) } else { format!("{} files", log.paths.len()) };
    let mut line = format!("read from {files}: {}", had.join(", "));
    if !lacked.is_empty() {
        line.push_str(&format!("; the log has no {}", lacked.join(", ")));
    }
    if log.incomplete {
        line.push_str("; INCOMPLETE: the log ends mid-way");
    } else if log.ends_before_exit {
        line.push_str("; the log ends before the first process exited (cut, or strace detached)");
    }
    if log.unparsed > 0 {
        line.push_str(&format!("; {} lines not strace's (first: line {})", thousands(log.unparsed), log.first_unparsed.unwrap_or(0)));
    }
    line
}

/// What the report's times are.
fn time_line(trace: &Trace) -> String {
    match trace.run.time {
        TimeKind::CpuSampled { tick_ns, fine_tick_ns, fine_for_ns, middle_tick_ns, middle_until_ns } => format!(
            "time: CPU time in syscalls, sampled every {}{} (strace -c); {} of CPU outside them; --latency for wall time per call",
            duration(tick_ns),
            match (fine_tick_ns, middle_tick_ns) {
                (0, _) => String::new(),
                (_, 0) => format!(" (every {} in the first {})", duration(fine_tick_ns), duration(fine_for_ns)),
                _ => format!(
                    " (every {} in the first {}, then every {} up to {})",
                    duration(fine_tick_ns),
                    duration(fine_for_ns),
                    duration(middle_tick_ns),
                    duration(middle_until_ns)
                ),
            },
            duration(trace.run.user_cpu_ns)
        ),
        TimeKind::Wall => "time: wall time per call, entry to exit, measured (strace -c -w)".into(),
        TimeKind::Unmeasured => "time: not in the log (strace without -T): findings are ranked by calls".into(),
    }
}

fn table(out: &mut String, syscalls: &[SyscallStats]) {
    let total_ns: u64 = syscalls.iter().map(|s| s.total_ns).sum();
    let total = syscalls.iter().fold(SyscallStats { name: "total".into(), ..Default::default() }, |mut t, s| {
        t.calls += s.calls;
        t.errors += s.errors;
        t.total_ns += s.total_ns;
        t
    });
    let w = thousands(total.calls).len().max(9);
    let rule = format!("------ ----------- ----------- {:-<w$} {:-<w$} ----------------", "", "");
    let _ = writeln!(out, "% time     seconds  usecs/call {:>w$} {:>w$} syscall", "calls", "errors");
    let _ = writeln!(out, "{rule}");
    let row = |out: &mut String, s: &SyscallStats| {
        let share = if total_ns > 0 { 100.0 * s.total_ns as f64 / total_ns as f64 } else { 0.0 };
        let per_call = s.total_ns.checked_div(s.calls).unwrap_or(0) / 1000;
        let errors = if s.errors > 0 { thousands(s.errors) } else { String::new() };
        let _ = writeln!(out, "{share:>6.2} {:>11.6} {per_call:>11} {:>w$} {errors:>w$} {}", s.total_ns as f64 / 1e9, thousands(s.calls), s.name);
    };
    for s in syscalls {
        row(out, s);
    }
    let _ = writeln!(out, "{rule}");
    row(out, &total);
}

/// The calls whose argument was seen once: counted, summarised, not listed.
fn one_shot(out: &mut String, trace: &Trace, alone: bool) {
    let mut once: Vec<&crate::model::OneShot> = trace.one_shot.iter().filter(|o| o.calls >= 1000).collect();
    if once.is_empty() {
        return;
    }
    once.sort_by(|a, b| b.calls.cmp(&a.calls).then(a.syscall.cmp(&b.syscall)));
    let items: Vec<String> = once.iter().take(4).map(|o| format!("{} × {}", thousands(o.calls), o.syscall)).collect();
    let _ = writeln!(
        out,
        "
arguments seen once (summarised, not listed): {}",
        items.join(", ")
    );
    if alone {
        let _ = writeln!(out, "no argument repeated");
    }
}

fn errors(out: &mut String, syscalls: &[SyscallStats]) {
    let items: Vec<String> = syscalls
        .iter()
        .filter(|s| !s.errnos.is_empty())
        .map(|s| {
            let e: Vec<String> = s.errnos.iter().map(|(e, n)| format!("{e} × {}", thousands(*n))).collect();
            format!("{} {}", s.name, e.join(", "))
        })
        .collect();
    if !items.is_empty() {
        let _ = writeln!(out, "\nerrors: {}", items.join("; "));
    }
}

fn arguments(out: &mut String, trace: &Trace) {
    let repeated: Vec<&ArgumentStats> = trace.arguments.iter().filter(|a| a.calls > 1).take(TOP_ARGUMENTS).collect();
    one_shot(out, trace, repeated.is_empty());
    if repeated.is_empty() {
        return;
    }
    let _ = writeln!(out, "\nmost repeated arguments");
    let w = thousands(repeated[0].calls).len();
    let lines: Vec<(String, &ArgumentStats)> = repeated.iter().map(|a| (describe_argument(a), *a)).collect();
    let dw = lines.iter().map(|(d, _)| d.chars().count()).max().unwrap_or(0);
    for (d, a) in lines {
        let pid = if trace.processes.len() > 1 { format!("  {}", super::who(trace, a.pid)) } else { String::new() };
        let _ = writeln!(
            out,
            "  {:>w$} × {d:<dw$}  {:>9}{pid}",
            thousands(a.calls),
            // Not timed per argument (the mask-change classes): no "0 ns".
            if a.total_ns > 0 { duration(a.total_ns) } else { "-".into() }
        );
        // The main site, when several made the calls or it is the only one.
        if let Some(site) = a.sites.first().and_then(|s| trace.call_site(s)).filter(|s| s.responsible.is_some()) {
            let _ = writeln!(out, "  {:>w$}   by {}", "", super::callsites::by_chain(site));
        }
    }
}

/// `newfstatat("/etc/localtime")`, `read(fd 3)`: the call and its argument.
pub fn describe_key(syscall: &str, argument: &Argument) -> String {
    let syscall = crate::human::escaped(syscall);
    match argument {
        Argument::Path { path, dirfd, null, cut, raw } => {
            // The exact bytes when they are not UTF-8 (\xe9); as strace
            // marks a string it cut: "…"...
            let shown = match (raw, path) {
                (Some(raw), _) => Some(crate::human::quoted_bytes(raw)),
                (None, Some(p)) => Some(quoted(p)),
                (None, None) => None,
            };
            let path = match shown {
                Some(p) => p + if *cut { "..." } else { "" },
                None if *null => "NULL".to_string(),
                None => "(unreadable)".to_string(),
            };
            match dirfd {
                Some(fd) => format!("{syscall}(fd {fd}, {path})"),
                None => format!("{syscall}({path})"),
            }
        }
        Argument::Fd { fd } => format!("{syscall}(fd {fd})"),
        Argument::Clock { clock } => format!("{syscall}({})", crate::human::clock_name(*clock)),
        Argument::Timeout { timeout } => format!("{syscall}(timeout {})", crate::human::timeout(*timeout)),
        Argument::SigMask { change } => format!("{syscall}({})", crate::human::mask_change(*change)),
        Argument::Brk { change } => format!("{syscall}({})", crate::human::brk_change(*change)),
    }
}

/// `newfstatat("/etc/localtime")`, `write(fd 1) of ≤ 16 bytes`.
pub fn describe_argument(a: &ArgumentStats) -> String {
    let mut s = describe_key(&a.syscall, &a.argument);
    if let Some(moved) = a.typical_bytes() {
        let _ = write!(s, " of ≤ {}", bytes(moved));
        if let Some(asked) = a.typical_request().filter(|&asked| asked > moved) {
            let _ = write!(s, " (asked ≤ {})", bytes(asked));
        }
    }
    if a.errors > 0 {
        let _ = write!(s, ", {} failed", thousands(a.errors));
    }
    s
}

fn breakdown(out: &mut String, trace: &Trace, per_thread: bool) {
    let _ = writeln!(out, "\nper process{}", if per_thread { " and thread" } else { "" });
    let _ = writeln!(out, "  {:>8} {:>8}  {:<16} {:>11} {:>8} {:>11}  top syscalls", "pid", "tid", "comm", "calls", "errors", "seconds");
    let line = |out: &mut String, pid: String, tid: Option<u32>, comm: &str, stats: &[SyscallStats]| {
        let calls: u64 = stats.iter().map(|s| s.calls).sum();
        let errors: u64 = stats.iter().map(|s| s.errors).sum();
        let ns: u64 = stats.iter().map(|s| s.total_ns).sum();
        let mut by_calls: Vec<&SyscallStats> = stats.iter().collect();
        by_calls.sort_by_key(|s| std::cmp::Reverse(s.calls));
        let top: Vec<String> = by_calls.iter().take(3).map(|s| format!("{} {}", s.name, thousands(s.calls))).collect();
        let tid = tid.map_or_else(|| "-".to_string(), |t| t.to_string());
        let _ = writeln!(
            out,
            "  {pid:>8} {tid:>8}  {comm:<16} {:>11} {:>8} {:>11.6}  {}",
            thousands(calls),
            thousands(errors),
            ns as f64 / 1e9,
            top.join(", ")
        );
    };
    // Most calls first; a row folding many exited processes of one program
    // shows how many, in place of a pid.
    let calls = |p: &&crate::model::Process| p.syscalls.iter().map(|s| s.calls).sum::<u64>();
    let mut shown: Vec<&crate::model::Process> = trace.processes.iter().collect();
    shown.sort_by_key(|p| std::cmp::Reverse(calls(p)));
    for p in shown.iter().take(TOP_PROCESSES) {
        let (pid, comm) = if p.folded > 0 {
            ("folded".to_string(), format!("{} ×{}", escaped(&p.comm), thousands(p.folded)))
        } else {
            (p.pid.to_string(), escaped(&p.comm))
        };
        line(out, pid.clone(), None, &comm, &p.syscalls);
        if per_thread && p.folded == 0 {
            for t in &p.threads {
                line(out, pid.clone(), Some(t.tid), &escaped(&t.comm), &t.syscalls);
            }
        }
    }
    if shown.len() > TOP_PROCESSES {
        let _ = writeln!(out, "  … {} more rows, fewer calls each (--json has every one)", thousands((shown.len() - TOP_PROCESSES) as u64));
    }
}

fn plural<'a>(n: usize, one: &'a str, many: &'a str) -> &'a str {
    if n == 1 {
        one
    } else {
        many
    }
}

fn signal_name(signal: i32) -> String {
    nix::sys::signal::Signal::try_from(signal).map_or_else(|_| format!("signal {signal}"), |s| s.as_str().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Lost;

    #[test]
    fn a_full_argument_table_names_the_findings_it_may_hide() {
        let mut t = Trace { lost: Lost { once_table_full: 5, ..Default::default() }, ..Default::default() };
        let text = render(&t, &[], false);
        assert!(text.contains("LOST (counts complete): 5 calls not checked for repeats"), "{text}");
        assert!(text.contains("findings that read arguments may be missing (tz-unset, vdso-fallback, repeated-path"), "{text}");
        // Lost samples leave every argument: no such line.
        t.lost = Lost { samples_dropped: 5, ..Default::default() };
        assert!(!render(&t, &[], false).contains("may be missing"));
    }

    #[test]
    fn the_header_says_what_time_is() {
        let mut t = Trace::default();
        t.run.time = TimeKind::sampled_every(250_000);
        t.run.user_cpu_ns = 12_000_000;
        let text = render(&t, &[], false);
        assert!(text.contains("time: CPU time in syscalls, sampled every 250 µs (strace -c); 12 ms of CPU outside them"), "{text}");
        t.run.time =
            TimeKind::CpuSampled { tick_ns: 1_000_000, fine_tick_ns: 250_000, fine_for_ns: 100_000_000, middle_tick_ns: 0, middle_until_ns: 0 };
        let text = render(&t, &[], false);
        assert!(text.contains("sampled every 1.0 ms (every 250 µs in the first 100 ms) (strace -c)"), "{text}");
        t.run.time = TimeKind::CpuSampled {
            tick_ns: 4_000_000,
            fine_tick_ns: 250_000,
            fine_for_ns: 25_000_000,
            middle_tick_ns: 1_000_000,
            middle_until_ns: 1_000_000_000,
        };
        let text = render(&t, &[], false);
        assert!(text.contains("sampled every 4.0 ms (every 250 µs in the first 25 ms, then every 1.0 ms up to 1.000 s) (strace -c)"), "{text}");
        t.run.time = TimeKind::Wall;
        assert!(render(&t, &[], false).contains("time: wall time per call, entry to exit, measured (strace -c -w)"));
    }
}
