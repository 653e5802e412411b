//! The backends, one per `--backend`, each in its own room: `bpf` counts in
//! the kernel (src/bpf/syscount.bpf.c), `ptrace` stops the targets at each
//! call, `strace_log` reads a saved `strace -f` log. None imports another;
//! what they share sits beside them: the counter of calls seen one by one
//! (calls.rs: ptrace, strace_log), the syscall filter, the stack sample,
//! the mapping events stacks unwind against, and the wake-up of a reader
//! thread.

pub mod bpf;
pub mod calls;
pub mod filter;
pub mod mappings;
pub mod perf;
pub mod ptrace;
pub mod samples;
pub mod strace_log;
pub mod wake;
