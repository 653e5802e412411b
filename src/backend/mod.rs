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
pub mod replay;
pub mod samples;
pub mod strace_log;
pub mod wake;

use crate::error::Result;
use crate::model::builder::TraceBuilder;
use crate::model::{Argument, Lost, TimeKind};

/// What the pipeline asks of a backend once the targets are traced (as
/// hyperfine's benchmark asks its Executor): what it is, how it measured,
/// and its counts read out into a TraceBuilder. Each backend follows its
/// targets its own way (BPF counts in the kernel while sysdiet waits;
/// ptrace must wait on the thread that attached; a log is read), so
/// starting and following stay theirs. `replay::Replay`, a recorded Trace
/// played back, lets the pipeline, the rules and the reports be tested
/// without root or a kernel.
pub trait Tracer {
    /// The backend's name, as a run document's `run.backend` says it.
    fn backend(&self) -> &str;
    /// Which of its program sets counted (BPF's `current` or `legacy`).
    fn programs(&self) -> Option<&'static str> {
        None
    }
    /// Whether its programs came loaded from a keeper (a previous run's).
    fn programs_kept(&self) -> bool {
        false
    }
    /// What the syscalls' times measure.
    fn time_kind(&self) -> TimeKind;
    /// How stacks are sampled: a new thread's first gap (calls), and the
    /// time between samples aimed at (ns).
    fn sample_rate(&self) -> (u32, u64);
    /// Stops counting and sampling now, before `read_into` (which stops
    /// them too if this was not called): a stack reader's last pass can
    /// then run beside the read-out.
    fn stop(&mut self) {}
    /// Stops counting and files every count into `out`; returns what was
    /// lost. Called once.
    fn read_into(&mut self, out: &mut TraceBuilder) -> Result<Lost>;
    /// The argument a stack sample's key stands for (after `read_into`);
    /// None for syscalls without one.
    fn argument_of_sample(&self, nr: u32, fd: i64, key: u64) -> Option<Argument>;
}
