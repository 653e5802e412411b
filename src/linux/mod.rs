//! Facts about Linux that every layer reads: syscall names and numbers,
//! errno names, the host's clocksource, its processes and time zone. No
//! tracing here; nothing above is imported.

pub mod arch;
pub mod cgroup;
pub mod descriptors;
pub mod errno;
pub mod host;
pub mod syscalls;

const CLOCKSOURCE: &str = "/sys/devices/system/clocksource/clocksource0";

/// Clocksources the vDSO reads the time from without a syscall.
const VDSO_CAPABLE: &[&str] = &["tsc", "kvm-clock", "hyperv_clocksource_tsc_page"];

/// Bytes as lowercase hex: a build id as debug file paths and caches name it.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// What one syscall's round trip costs on this host, untraced: the fastest
/// of 8 batches of 250 getppid, in ns (the fastest batch reads as with
/// 1,000, and the CPU is shared with the maps made at start-up). Each call
/// a fix removes saves at least this, wherever a tick of sampled time
/// landed.
pub fn syscall_cost_ns() -> u64 {
    const CALLS: u64 = 250;
    let mut best = u64::MAX;
    for _ in 0..8 {
        let t = std::time::Instant::now();
        for _ in 0..CALLS {
            // SAFETY: getppid takes no arguments and cannot fail.
            unsafe { libc::syscall(libc::SYS_getppid) };
        }
        best = best.min(t.elapsed().as_nanos() as u64 / CALLS);
    }
    best
}

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

/// The host's current clocksource (tsc, hpet, xen, ...).
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

/// This process's CPU time (user + system) and resident memory, for the
/// cost sysdiet reports of itself.
pub fn own_usage() -> (std::time::Duration, u64) {
    // SAFETY: getrusage writes the struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| std::time::Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    let rss_pages: u64 = std::fs::read_to_string("/proc/self/statm").ok().and_then(|s| s.split_whitespace().nth(1)?.parse().ok()).unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(0) as u64;
    (tv(ru.ru_utime) + tv(ru.ru_stime), rss_pages * page)
}
