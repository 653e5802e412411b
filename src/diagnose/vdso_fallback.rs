//! vdso-fallback: clock_gettime, gettimeofday, time and getcpu made as real
//! syscalls. The vDSO answers them in user space when the clocksource lets
//! it (tsc, kvm-clock, the Hyper-V page); hpet, acpi_pm and (often) xen do
//! not, and then every clock read enters the kernel. With a capable
//! clocksource, real syscalls mean the program goes around the vDSO. CPU-time
//! clocks are always syscalls: a cost only when read very often.

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
                what: format!("{} × clock_gettime(CPU-time clock)", thousands(cpu.0)),
                pid: Some(p.pid),
                evidence: Evidence::new(trace, "clock_gettime", cpu.0, cpu.1),
                sites: vec![],
                saving_ns: cpu.1,
                why: format!("CPU-time clocks (CLOCK_PROCESS_CPUTIME_ID, CLOCK_THREAD_CPUTIME_ID) are always syscalls, the vDSO cannot read them; this process reads one {cpu_rate:.0} times a second"),
                fixes: vec![
                    Fix::code("for elapsed time use CLOCK_MONOTONIC, which the vDSO serves"),
                    Fix::code("read CPU time less often: per batch, not per operation"),
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
    fn no_clock_syscalls_nothing_to_say() {
        assert!(check(&trace(1_000, &[("read", 100, 100)])).is_empty());
    }
}
