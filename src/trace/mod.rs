//! The tracer: BPF programs that count every syscall of the targets in the
//! kernel (bpf.rs loads src/bpf/syscount.bpf.c), the readers that bring
//! their records out while the target runs (exits.rs) and at its end
//! (readout.rs) into a TraceBuilder, and the small tracers beside it: bench's
//! counter (tally.rs) and the empty hooks of the benchmark's floor (floor.rs).

pub mod bpf;
pub mod calls;
pub mod exits;
pub mod features;
pub mod filter;
pub mod floor;
pub mod fold;
pub mod kernel_types;
pub mod mappings;
pub mod perf;
pub mod premade;
pub mod ptrace;
pub mod readout;
pub mod samples;
pub mod strace_log;
pub mod tally;
pub mod wake;
