//! Tracers: each turns a running target into a Trace. The BPF one counts in
//! the kernel; others (ptrace, strace logs) fill the same TraceBuilder.

pub mod bpf;
pub mod errno;
pub mod exits;
pub mod filter;
pub mod floor;
pub mod fold;
pub mod mappings;
pub mod perf;
pub mod readout;
pub mod samples;
pub mod syscalls;
pub mod tally;
pub mod wake;

const CLOCKSOURCE: &str = "/sys/devices/system/clocksource/clocksource0";

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
