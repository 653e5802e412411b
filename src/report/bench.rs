//! The table of `sysdiet bench`, and its list of loops.

use std::fmt::Write;

use crate::bench::{LoopCost, Measurements, SyscallsPerCall};
use crate::human::{duration, ns, thousands};

/// "0", "<0.01", "1.00", with the syscalls when there are any.
pub fn syscalls(s: &SyscallsPerCall) -> String {
    let total = match s.total {
        0.0 => return format!("{:>5}", 0),
        t if t < 0.005 => "<0.01".to_string(),
        t => format!("{t:.2}"),
    };
    let shown: Vec<_> = s.by_syscall.iter().filter(|x| x.per_call >= 0.005).collect();
    let names = match shown.as_slice() {
        [] => String::new(),
        [one] => one.name.clone(),
        many => many.iter().map(|x| format!("{} {:.2}", x.name, x.per_call)).collect::<Vec<_>>().join(", "),
    };
    if names.is_empty() {
        return format!("{total:>5}");
    }
    format!("{total:>5}  {names}")
}

pub fn render(m: &Measurements) -> String {
    let mut out = String::new();
    header(&mut out, m);
    let width = m.loops.iter().map(|k| k.label.chars().count()).max().unwrap_or(6).max(6);
    let multi = m.threads.len() > 1;
    if multi {
        let _ = write!(out, "\n  {:<width$}", "");
        let _ = writeln!(out, "  ns per call, by threads calling at once");
        let _ = write!(out, "  {:<width$}", "loop");
        for t in &m.threads {
            let _ = write!(out, " {:>9}", t);
        }
        let span = format!("{}→{}", m.threads[0], m.threads[m.threads.len() - 1]);
        let _ = writeln!(out, " {span:>8}   syscalls/call");
    } else {
        let _ = write!(out, "\n  {:<width$} {:>9} {:>21}", "loop", "ns/call", "min … max");
        // With --iterations, what timeloop printed: the time for all the calls.
        if m.iterations.is_some() {
            let _ = write!(out, " {:>9}", "per run");
        }
        let _ = writeln!(out, "   syscalls/call");
    }
    for k in &m.loops {
        let _ = write!(out, "  {:<width$}", k.label);
        if multi {
            for t in &m.threads {
                let cell = k.times.iter().find(|c| c.threads == *t).map_or("-".into(), |c| ns(c.ns_per_call.median));
                let _ = write!(out, " {cell:>9}");
            }
            let _ = write!(out, " {:>8}", growth(k).unwrap_or_default());
        } else {
            match k.times.first() {
                Some(c) => {
                    let s = &c.ns_per_call;
                    let _ = write!(out, " {:>9} {:>21}", ns(s.median), format!("{} … {}", ns(s.min), ns(s.max)));
                    if m.iterations.is_some() {
                        let _ = write!(out, " {:>9}", duration((s.median * c.iterations as f64) as u64));
                    }
                }
                None => {
                    let _ = write!(out, " {:>9} {:>21}", "-", "");
                    if m.iterations.is_some() {
                        let _ = write!(out, " {:>9}", "");
                    }
                }
            }
        }
        let count = k.syscalls.as_ref().map_or_else(|| "    ?".to_string(), syscalls);
        let _ = writeln!(out, "   {count}");
        // Contention can add syscalls of its own (futex waits on a lock).
        for c in k.contended_syscalls.iter().filter(|c| differs(k.syscalls.as_ref(), &c.syscalls)) {
            let cells = " ".repeat(10 * m.threads.len() + 9);
            let _ = writeln!(out, "  {:<width$}{cells}   {}", format!("    on {} threads", c.threads), syscalls(&c.syscalls));
        }
    }
    footer(&mut out, m);
    out
}

/// The table as Markdown: one row per loop, a column per thread count.
pub fn markdown(m: &Measurements) -> String {
    let mut out = String::from("| loop |");
    for t in &m.threads {
        let _ = write!(out, " ns/call, {t} thread{} |", if *t == 1 { "" } else { "s" });
    }
    out.push_str(" syscalls/call |\n|---|");
    out.push_str(&"---:|".repeat(m.threads.len()));
    out.push_str("---|\n");
    for k in &m.loops {
        let _ = write!(out, "| {} |", k.label);
        for t in &m.threads {
            let cell = k.times.iter().find(|c| c.threads == *t).map_or("-".into(), |c| ns(c.ns_per_call.median));
            let _ = write!(out, " {cell} |");
        }
        let count = k.syscalls.as_ref().map_or_else(|| "?".to_string(), |s| syscalls(s).trim().to_string());
        let _ = writeln!(out, " {count} |");
    }
    let h = &m.host;
    let _ = writeln!(
        out,
        "\nMedians of {} runs; {} ({} CPUs), {} {}, glibc {}, clocksource {}.",
        m.runs,
        h.cpu,
        h.cpus,
        h.kernel,
        h.machine,
        h.glibc,
        h.clocksource.as_deref().unwrap_or("unknown")
    );
    out
}

/// Whether a count with more threads shows a syscall the one-thread count
/// does not, or another rate of one, as the table rounds them.
fn differs(one: Option<&SyscallsPerCall>, more: &SyscallsPerCall) -> bool {
    let rate = |s: Option<&SyscallsPerCall>, name: &str| s.and_then(|s| s.by_syscall.iter().find(|x| x.name == name)).map_or(0.0, |x| x.per_call);
    more.by_syscall.iter().any(|x| (x.per_call - rate(one, &x.name)).abs() >= 0.005)
}

/// ns per call at the last thread count over at the first: "×3.90".
fn growth(k: &LoopCost) -> Option<String> {
    let first = k.times.first()?;
    let last = k.times.last().filter(|l| l.threads != first.threads)?;
    (first.ns_per_call.median > 0.0).then(|| format!("×{:.2}", last.ns_per_call.median / first.ns_per_call.median))
}

fn header(out: &mut String, m: &Measurements) {
    let h = &m.host;
    let _ = writeln!(out, "sysdiet bench: what one call costs on this host");
    let _ = writeln!(out, "  cpu          {} ({} CPU{})", h.cpu, h.cpus, if h.cpus == 1 { "" } else { "s" });
    let _ = writeln!(out, "  kernel       {} {}, glibc {}", h.kernel, h.machine, h.glibc);
    let source = h.clocksource.as_deref().unwrap_or("unknown");
    let vdso = if h.vdso_clock {
        "the vDSO reads it: clock calls stay in user space"
    } else {
        "the vDSO cannot read it: every clock call enters the kernel"
    };
    let _ = writeln!(out, "  clocksource  {source} ({vdso})");
    let tz = match &h.tz {
        Some(tz) => format!("TZ={tz} here"),
        None => "TZ unset here".into(),
    };
    let zone = h.zone.as_deref().map(|z| format!(", /etc/localtime is {z}")).unwrap_or_default();
    let _ = writeln!(out, "  tz           {tz}{zone}; each loop runs with TZ unset unless its name says otherwise");
    let calls = match m.iterations {
        Some(n) => format!("{} calls per thread each", thousands(n)),
        None => "about 40 ms each".into(),
    };
    let _ = writeln!(out, "  runs         {} per loop, {calls}; ns/call is the median run", m.runs);
}

fn footer(out: &mut String, m: &Measurements) {
    out.push('\n');
    match &m.syscalls_not_counted {
        Some(why) => {
            let _ = writeln!(out, "  syscalls/call not counted (?): {why}");
        }
        None => {
            let _ = writeln!(
                out,
                "  syscalls/call: counted by the kernel (BPF) over {} and {} calls, the difference divided by {}",
                thousands(crate::bench::count::CALLS),
                thousands(2 * crate::bench::count::CALLS),
                thousands(crate::bench::count::CALLS)
            );
        }
    }
    if m.syscalls_lost > 0 {
        let _ = writeln!(out, "  lost: {} syscalls not counted (the counter's table was full)", thousands(m.syscalls_lost));
    }
    if m.loops.iter().any(|k| k.contended_syscalls.iter().any(|c| differs(k.syscalls.as_ref(), &c.syscalls))) {
        let _ = writeln!(
            out,
            "  on N threads: syscalls/call counted with N threads calling at once, where contention changes them; they vary from run to run"
        );
    }
    if let Some(&most) = m.threads.iter().max().filter(|&&t| t > m.host.cpus) {
        let _ = writeln!(
            out,
            "  note: {most} threads on {} CPUs: beyond {} they take turns, so ns/call grows even without contention",
            m.host.cpus, m.host.cpus
        );
    }
    if m.interrupted {
        let timed = m.loops.iter().filter(|k| !k.times.is_empty()).count();
        let counted = m.loops.iter().filter(|k| k.syscalls.is_some()).count();
        let _ = writeln!(out, "  interrupted: {} loops; {counted} counted, {timed} timed", m.loops.len());
    }
}

/// `--list`: every loop's id and what it calls.
pub fn list<'a>(loops: impl Iterator<Item = (String, &'a str)>) -> String {
    let rows: Vec<(String, &str)> = loops.collect();
    let width = rows.iter().map(|(id, _)| id.len()).max().unwrap_or(0);
    let mut out = String::from("loops (--only takes a name for all its variants, or name:variant):\n");
    for (id, label) in rows {
        let _ = writeln!(out, "  {id:<width$}  {label}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::SyscallShare;

    #[test]
    fn syscall_counts_name_the_calls() {
        let share = |name: &str, per_call| SyscallShare { name: name.into(), per_call };
        assert_eq!(syscalls(&SyscallsPerCall::default()), "    0");
        let one = SyscallsPerCall { total: 1.0, by_syscall: vec![share("newfstatat", 1.0)] };
        assert_eq!(syscalls(&one), " 1.00  newfstatat");
        let two = SyscallsPerCall { total: 2.0, by_syscall: vec![share("rt_sigprocmask", 1.5), share("getpid", 0.5)] };
        assert_eq!(syscalls(&two), " 2.00  rt_sigprocmask 1.50, getpid 0.50");
        let rare = SyscallsPerCall { total: 0.0002, by_syscall: vec![share("read", 0.0002)] };
        assert_eq!(syscalls(&rare), "<0.01");
        assert_eq!(ns(0.0), "0.000");
    }
}
