//! The text of `sysdiet check`.

use std::fmt::Write;

use crate::diagnose::host::HostAudit;
use crate::human::{escaped, thousands};

/// Rows of processes shown; the JSON has them all.
const ROWS: usize = 25;

pub fn render(a: &HostAudit) -> String {
    let mut out = String::from("sysdiet check\n");
    let source = a.clocksource.as_deref().unwrap_or("unknown");
    let serves = if a.vdso_clocks { "the vDSO serves clock reads" } else { "the vDSO cannot read it: every clock read is a syscall" };
    let _ = writeln!(out, "  clocksource  {source}: {serves} (available: {})", a.available_clocksources.join(" "));
    if let Some(fix) = &a.clocksource_fix {
        let _ = writeln!(out, "               fix: {fix}");
    }
    let zone = a.zone.as_deref().map(|z| format!(" (/etc/localtime is {z})")).unwrap_or_default();
    match &a.system_tz {
        Some((file, v)) => {
            let _ = writeln!(out, "  TZ           set system-wide in {file}: TZ={v}{zone}");
        }
        None => {
            let _ = writeln!(out, "  TZ           not set system-wide{zone}: processes without it stat /etc/localtime on every localtime()");
        }
    }
    let _ = writeln!(out, "  processes    {} of {} have no TZ", a.processes.len(), a.processes_seen);
    if a.processes_unreadable > 0 {
        let _ = writeln!(
            out,
            "               {} more could not be read: their environment is private to their owner (run as root to see every process)",
            thousands(a.processes_unreadable as u64)
        );
    }
    if a.processes.is_empty() {
        return out;
    }
    let sampled = a.sampled_ns.is_some();
    let _ = writeln!(out, "\n  {:>7}  {:<16} {:<28} {}fix", "pid", "comm", "unit", if sampled { "zone stats/s  " } else { "" });
    for p in a.processes.iter().take(ROWS) {
        let rate = p.zone_stats_per_s.map(|r| format!("{:>12}  ", thousands(r.round() as u64))).unwrap_or_default();
        // Names from the running system: escaped before the terminal sees them.
        let _ = writeln!(out, "  {:>7}  {:<16} {:<28} {rate}{}", p.pid, escaped(&p.comm), escaped(p.unit.as_deref().unwrap_or("-")), escaped(&p.fix));
    }
    if a.processes.len() > ROWS {
        let _ = writeln!(out, "  … and {} more (--json lists them all)", a.processes.len() - ROWS);
    }
    if !sampled {
        let _ = writeln!(out, "\n  --sample 5s counts how often each of them stats the zone file");
    }
    out
}
