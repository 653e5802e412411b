//! Tracers: each turns a running target into a Trace. The BPF one counts in
//! the kernel; others (ptrace, strace logs) fill the same TraceBuilder.

pub mod bpf;
pub mod exits;
pub mod filter;
pub mod floor;
pub mod fold;
pub mod mappings;
pub mod perf;
pub mod readout;
pub mod samples;
pub mod tally;
pub mod wake;
