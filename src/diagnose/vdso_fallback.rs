//! vdso-fallback: clock_gettime, gettimeofday, time and getcpu made as real
//! syscalls. The vDSO answers them in user space when the clocksource lets
//! it (tsc, kvm-clock, the Hyper-V page); hpet, acpi_pm and (often) xen do
//! not, and then every clock read enters the kernel. With a capable
//! clocksource, real syscalls mean the program goes around the vDSO. CPU-time
//! reads (the CPU-time clocks, getrusage, times) are always syscalls: a cost
//! only when made very often.

use super::{Evidence, Finding, Fix};
use crate::human::{clock_name, thousands};
use crate::linux::vdso_capable;
use crate::model::{Argument, Trace};

pub const ID: &str = "vdso-fallback";

/// Clock ids the vDSO serves.
const VDSO_CLOCKS: &[i64] = &[0, 1, 4, 5, 6, 7, 11];
const CPU_CLOCKS: &[i64] = &[2, 3];

/// Clock reads per second below which a CPU-time clock is not worth a word.
const FREQUENT: f64 = 1000.0;

/// Syscalls that read the CPU time used, besides the CPU-time clocks: node's
/// process.cpuUsage() and Python's resource.getrusage() call getrusage,
/// perl's times() times.
const CPU_READS: &[&str] = &["getrusage", "times"];

pub fn check(trace: &Trace) -> Vec<Finding> {
    let env = &trace.run.environment;
    let source = env.clocksource.as_deref().unwrap_or("unknown");
    let capable = vdso_capable(source);
    let better: Vec<&str> = env.available_clocksources.iter().map(String::as_str).filter(|c| vdso_capable(c)).collect();
    let (why_source, fixes_source) = if capable {
        (
            format!("the clocksource ({source}) lets the vDSO answer these in user space, yet they entered the kernel: the program goes around the vDSO (a raw syscall(), a static binary with an old libc, a sandbox that forbids the vDSO)"),
            vec![Fix::code("call clock_gettime()/gettimeofday() through the C library, which uses the vDSO")],
        )
    } else {
        let mut fixes = Vec::new();
        match better.first() {
            Some(c) => {
                fixes.push(Fix::config(format!("echo {c} > /sys/devices/system/clocksource/clocksource0/current_clocksource (now), clocksource={c} on the kernel command line (for good)")));
            }
            None => fixes.push(Fix::config("this host offers no vDSO-capable clocksource: on a VM, enable a stable TSC or kvm-clock for the guest")),
        }
        (format!("the clocksource is {source}, which the vDSO cannot read, so every clock read is a syscall"), fixes)
    };

    let mut out = Vec::new();
    let arguments = trace.arguments_by_pid();
    for p in &trace.processes {
        // Plain clock reads: every one of these could be a vDSO call.
        let mut calls = 0;
        let mut ns = 0;
        let mut what = Vec::new();
        for s in p.syscalls.iter().filter(|s| matches!(s.name.as_str(), "gettimeofday" | "time" | "getcpu")) {
            calls += s.calls;
            ns += s.total_ns;
            what.push(format!("{} × {}", thousands(s.calls), s.name));
        }
        let mut cpu = (0, 0);
        // Each kind of CPU-time read: its syscall, how it is shown, calls.
        let mut cpu_what: Vec<(&str, String)> = Vec::new();
        for a in arguments.get(&p.pid).into_iter().flatten().filter(|a| a.syscall == "clock_gettime") {
            let Argument::Clock { clock } = a.argument else { continue };
            if VDSO_CLOCKS.contains(&clock) {
                calls += a.calls;
                ns += a.total_ns;
                what.push(format!("{} × clock_gettime({})", thousands(a.calls), clock_name(clock)));
            } else if CPU_CLOCKS.contains(&clock) || clock < 0 {
                cpu.0 += a.calls;
                cpu.1 += a.total_ns;
            }
        }
        if cpu.0 > 0 {
            cpu_what.push(("clock_gettime", format!("{} × clock_gettime(CPU-time clock)", thousands(cpu.0))));
        }
        for s in p.syscalls.iter().filter(|s| CPU_READS.contains(&s.name.as_str())) {
            cpu.0 += s.calls;
            cpu.1 += s.total_ns;
            cpu_what.push((&s.name, format!("{} × {}", thousands(s.calls), s.name)));
        }
        if calls >= 2 {
            out.push(Finding {
                id: ID.into(),
                what: what.join(", "),
                pid: Some(p.pid),
                evidence: Evidence::new(trace, "clock_gettime", calls, ns),
                sites: vec![],
                saving_ns: ns,
                why: why_source.clone(),
                fixes: fixes_source.clone(),
                ..Default::default()
            });
        }
        let cpu_rate = if trace.run.duration_ns > 0 { cpu.0 as f64 * 1e9 / trace.run.duration_ns as f64 } else { 0.0 };
        if cpu.0 >= 2 && cpu_rate >= FREQUENT {
            out.push(Finding {
                id: format!("{ID}-cputime"),
                what: cpu_what.iter().map(|(_, w)| w.as_str()).collect::<Vec<_>>().join(", "),
                pid: Some(p.pid),
                evidence: Evidence::new(trace, cpu_what[0].0, cpu.0, cpu.1),
                sites: vec![],
                saving_ns: cpu.1,
                why: format!(
                    "reads of the CPU time used (the CPU-time clocks CLOCK_PROCESS_CPUTIME_ID and CLOCK_THREAD_CPUTIME_ID, getrusage, \
                     times) are always syscalls, the vDSO cannot answer them; this process reads it {cpu_rate:.0} times a second"
                ),
                fixes: vec![
                    Fix::code("for elapsed time use CLOCK_MONOTONIC, which the vDSO serves (Python's time.monotonic(), node's process.hrtime())"),
                    Fix::code(
                        "read CPU time less often: per batch, not per operation (time.process_time(), resource.getrusage(), node's \
                         process.cpuUsage(), perl's times(), Ruby's Process.clock_gettime(:CLOCK_PROCESS_CPUTIME_ID) each make one)",
                    ),
                ],
                ..Default::default()
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::testing::*;

    fn clocks(source: &str, clock: i64, calls: u64) -> Trace {
        let mut t = trace(1_000_000_000, &[("clock_gettime", calls, calls * 300)]);
        t.run.environment.clocksource = Some(source.into());
        t.run.environment.available_clocksources = vec!["tsc".into(), "hpet".into(), "acpi_pm".into()];
        argument(&mut t, "clock_gettime", Argument::Clock { clock }, calls, calls * 300);
        t
    }

    #[test]
    fn hpet_makes_every_read_a_syscall_and_tsc_is_offered() {
        let f = check(&clocks("hpet", 1, 50_000));
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].what, "50,000 × clock_gettime(CLOCK_MONOTONIC)");
        assert!(f[0].why.contains("hpet"));
        assert!(f[0].fixes[0].text.starts_with("echo tsc > /sys/devices/system/clocksource"));
    }

    #[test]
    fn on_tsc_real_syscalls_mean_the_vdso_is_bypassed() {
        let f = check(&clocks("tsc", 0, 50_000));
        assert!(f[0].why.contains("goes around the vDSO"));
    }

    #[test]
    fn cpu_clocks_only_when_frequent() {
        let f = check(&clocks("tsc", 2, 50_000));
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].id, "vdso-fallback-cputime");
        assert!(check(&clocks("tsc", 2, 10)).is_empty());
    }

    #[test]
    fn getrusage_and_times_are_cpu_time_reads_too() {
        let mut t = trace(1_000_000_000, &[("getrusage", 50_000, 15_000_000), ("times", 10, 3_000)]);
        t.run.environment.clocksource = Some("tsc".into());
        let f = check(&t);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].id, "vdso-fallback-cputime");
        assert_eq!(f[0].what, "50,000 × getrusage, 10 × times");
        assert_eq!(f[0].evidence.syscall, "getrusage");
        let t = trace(1_000_000_000, &[("getrusage", 100, 30_000)]);
        assert!(check(&t).is_empty(), "100 a second is no cost");
    }

    #[test]
    fn no_clock_syscalls_nothing_to_say() {
        assert!(check(&trace(1_000, &[("read", 100, 100)])).is_empty());
    }
}
