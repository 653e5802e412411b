//! perf_event_open(2), as the tracers use it: software events only.

use std::fs;
use std::os::fd::{FromRawFd, OwnedFd};

use crate::error::Error;

/// perf_event_attr up to PERF_ATTR_SIZE_VER5.
#[repr(C)]
#[derive(Default)]
pub struct PerfEventAttr {
    pub kind: u32,
    pub size: u32,
    pub config: u64,
    pub sample_period: u64,
    pub sample_type: u64,
    pub read_format: u64,
    pub flags: u64,
    pub wakeup_events: u32,
    pub bp_type: u32,
    pub config1: u64,
    pub config2: u64,
    pub branch_sample_type: u64,
    pub sample_regs_user: u64,
    pub sample_stack_user: u32,
    pub clockid: i32,
    pub sample_regs_intr: u64,
    pub aux_watermark: u32,
    pub sample_max_stack: u16,
    pub reserved: u16,
}

pub const PERF_TYPE_SOFTWARE: u32 = 1;
pub const PERF_COUNT_SW_CPU_CLOCK: u64 = 0;
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 8;

/// Opens one event for task `pid` (-1: every task) on `cpu` (-1: any).
pub fn open(attr: &PerfEventAttr, pid: i32, cpu: i32) -> std::io::Result<OwnedFd> {
    // SAFETY: a valid attr; the kernel reads `size` bytes of it.
    let fd = unsafe { libc::syscall(libc::SYS_perf_event_open, attr as *const PerfEventAttr, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a new fd we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// The error for `what`'s events refused (EACCES, EPERM): at a paranoid
/// level past 2 (Debian's kernels add 3), only CAP_SYS_ADMIN opens any,
/// whatever else the process holds; below, the rights are missing.
pub fn refused(what: &'static str) -> Error {
    let level = fs::read_to_string("/proc/sys/kernel/perf_event_paranoid").ok().and_then(|l| l.trim().parse().ok());
    refused_at(what, level)
}

fn refused_at(what: &'static str, level: Option<i32>) -> Error {
    match level {
        Some(level) if level > 2 => Error::PerfEventsRestricted { what, level },
        _ => Error::NoBpfRights,
    }
}

/// CPU numbers from /sys/devices/system/cpu/online ("0-3,5").
pub fn online_cpus() -> Vec<i32> {
    let text = fs::read_to_string("/sys/devices/system/cpu/online").unwrap_or_default();
    let cpus: Vec<i32> = text
        .trim()
        .split(',')
        .filter_map(|part| match part.split_once('-') {
            Some((a, b)) => Some((a.parse().ok()?..=b.parse().ok()?).collect::<Vec<i32>>()),
            None => part.parse().ok().map(|c| vec![c]),
        })
        .flatten()
        .collect();
    if cpus.is_empty() {
        (0..std::thread::available_parallelism().map_or(1, |n| n.get() as i32)).collect()
    } else {
        cpus
    }
}

pub fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) as usize }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_refused_past_level_2_name_the_setting_else_the_rights() {
        let restricted = refused_at("CPU-time ticks", Some(3));
        assert!(matches!(restricted, Error::PerfEventsRestricted { level: 3, .. }));
        let text = restricted.to_string();
        assert!(text.contains("CPU-time ticks") && text.contains("kernel.perf_event_paranoid is 3"), "{text}");
        assert!(matches!(refused_at("mapping events", Some(2)), Error::NoBpfRights));
        assert!(matches!(refused_at("mapping events", None), Error::NoBpfRights));
    }
}
