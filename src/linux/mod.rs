//! Facts about Linux that every layer reads: syscall names and numbers,
//! errno names, the host's clocksource, its processes and time zone. No
//! tracing here; nothing above is imported.

pub mod errno;
pub mod host;
pub mod syscalls;

const CLOCKSOURCE: &str = "/sys/devices/system/clocksource/clocksource0";

/// Clocksources the vDSO reads the time from without a syscall.
const VDSO_CAPABLE: &[&str] = &["tsc", "kvm-clock", "hyperv_clocksource_tsc_page"];

/// The host's current clocksource (tsc, hpet, xen, ...).
/// The clock ids' names, by id (include/uapi/linux/time.h); 10 was
/// CLOCK_SGI_CYCLE, never implemented.
pub const CLOCK_NAMES: [&str; 12] = [
    "CLOCK_REALTIME",
    "CLOCK_MONOTONIC",
    "CLOCK_PROCESS_CPUTIME_ID",
    "CLOCK_THREAD_CPUTIME_ID",
    "CLOCK_MONOTONIC_RAW",
    "CLOCK_REALTIME_COARSE",
    "CLOCK_MONOTONIC_COARSE",
    "CLOCK_BOOTTIME",
    "CLOCK_REALTIME_ALARM",
    "CLOCK_BOOTTIME_ALARM",
    "CLOCK_SGI_CYCLE",
    "CLOCK_TAI",
];

pub fn clocksource() -> Option<String> {
    std::fs::read_to_string(format!("{CLOCKSOURCE}/current_clocksource")).ok().map(|s| s.trim().to_string())
}

/// The clocksources the host offers.
pub fn available_clocksources() -> Vec<String> {
    std::fs::read_to_string(format!("{CLOCKSOURCE}/available_clocksource"))
        .map(|s| s.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default()
}

/// Whether the vDSO can read the time from this clocksource.
pub fn vdso_capable(source: &str) -> bool {
    VDSO_CAPABLE.contains(&source)
}
