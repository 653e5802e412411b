//! The host audit of `sysdiet check`: can the vDSO serve clock reads, is
//! TZ set for everything, and which running processes have no TZ (and, when
//! sampled, how often they stat the zone file), each with its fix.

use serde::{Deserialize, Serialize};

use crate::linux::host::RunningProcess;
use crate::linux::vdso_capable;

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct HostAudit {
    pub clocksource: Option<String>,
    pub available_clocksources: Vec<String>,
    /// The vDSO answers clock reads without a syscall.
    pub vdso_clocks: bool,
    /// How to switch to a clocksource the vDSO can read, when needed.
    pub clocksource_fix: Option<String>,
    /// Where TZ is set system-wide ("/etc/environment"), and to what.
    pub system_tz: Option<(String, String)>,
    pub zone: Option<String>,
    /// Processes without TZ, the busiest zone-file users first.
    pub processes: Vec<ProcessAudit>,
    pub processes_seen: usize,
    /// Processes whose environment could not be read (not root).
    #[serde(default)]
    pub processes_unreadable: usize,
    /// How long zone-file lookups were counted, when they were.
    pub sampled_ns: Option<u64>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct ProcessAudit {
    pub pid: u32,
    pub comm: String,
    pub unit: Option<String>,
    /// Zone-file stats per second while sampled.
    pub zone_stats_per_s: Option<f64>,
    pub fix: String,
}

pub fn audit(
    clocksource: Option<String>,
    available: Vec<String>,
    system_tz: Option<(String, String)>,
    zone: Option<String>,
    processes: &[RunningProcess],
    unreadable: usize,
    sampled: Option<(u64, &dyn Fn(u32) -> u64)>,
) -> HostAudit {
    let vdso_clocks = clocksource.as_deref().is_some_and(vdso_capable);
    let clocksource_fix = (!vdso_clocks).then(|| match available.iter().find(|c| vdso_capable(c)) {
        Some(c) => {
            format!("echo {c} > /sys/devices/system/clocksource/clocksource0/current_clocksource, and clocksource={c} on the kernel command line")
        }
        None => "no clocksource here lets the vDSO read the time: on a VM, give the guest a stable TSC or kvm-clock".into(),
    });
    let mut out: Vec<ProcessAudit> = processes
        .iter()
        .filter(|p| p.tz.is_none())
        .map(|p| ProcessAudit {
            pid: p.pid,
            comm: p.comm.clone(),
            unit: p.unit.clone(),
            zone_stats_per_s: sampled.map(|(ns, count)| count(p.pid) as f64 * 1e9 / ns.max(1) as f64),
            fix: match &p.unit {
                Some(u) => format!("systemctl edit {u}: [Service] Environment=TZ=:/etc/localtime, then restart it"),
                None => "start it with TZ=:/etc/localtime in its environment".into(),
            },
        })
        .collect();
    if sampled.is_some() {
        out.sort_by(|a, b| b.zone_stats_per_s.partial_cmp(&a.zone_stats_per_s).unwrap_or(std::cmp::Ordering::Equal).then(a.pid.cmp(&b.pid)));
    }
    HostAudit {
        clocksource,
        available_clocksources: available,
        vdso_clocks,
        clocksource_fix,
        system_tz,
        zone,
        processes_seen: processes.len(),
        processes_unreadable: unreadable,
        processes: out,
        sampled_ns: sampled.map(|s| s.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(pid: u32, tz: Option<&str>, unit: Option<&str>) -> RunningProcess {
        RunningProcess { pid, comm: format!("p{pid}"), tz: tz.map(Into::into), unit: unit.map(Into::into) }
    }

    #[test]
    fn processes_without_tz_get_a_fix_and_the_busiest_come_first() {
        let procs = [p(1, None, Some("db.service")), p(2, Some(":/etc/localtime"), None), p(3, None, None)];
        let counts = |pid: u32| if pid == 3 { 500 } else { 5 };
        let a = audit(Some("tsc".into()), vec!["tsc".into()], None, None, &procs, 0, Some((1_000_000_000, &counts)));
        assert!(a.vdso_clocks && a.clocksource_fix.is_none());
        assert_eq!(a.processes.iter().map(|p| p.pid).collect::<Vec<_>>(), vec![3, 1]);
        assert_eq!(a.processes[0].zone_stats_per_s, Some(500.0));
        assert!(a.processes[1].fix.starts_with("systemctl edit db.service"));
        assert_eq!(a.processes_seen, 3);
    }

    #[test]
    fn a_clocksource_the_vdso_cannot_read() {
        let a = audit(Some("hpet".into()), vec!["hpet".into(), "tsc".into()], None, None, &[], 0, None);
        assert!(!a.vdso_clocks);
        assert!(a.clocksource_fix.unwrap().starts_with("echo tsc >"));
        let a = audit(Some("acpi_pm".into()), vec!["acpi_pm".into()], None, None, &[], 0, None);
        assert!(a.clocksource_fix.unwrap().contains("no clocksource here"));
    }
}
