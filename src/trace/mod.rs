//! Tracers: each turns a running target into a Trace. The BPF one counts in
//! the kernel; others (ptrace, strace logs) fill the same TraceBuilder.

pub mod bpf;
pub mod errno;
pub mod filter;
pub mod mappings;
pub mod samples;
pub mod syscalls;

/// The host's current clocksource (tsc, hpet, xen, ...).
pub fn clocksource() -> Option<String> {
    std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource")
        .ok()
        .map(|s| s.trim().to_string())
}
