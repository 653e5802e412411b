//! Syscalls per call, counted: each loop runs in a process of its own
//! twice, for N and for 2N calls, and the kernel counts both processes'
//! syscalls (tally.bpf.c). The difference is what N calls cost: the start,
//! the exit and any first-call work (a zone file read once) cancel out.

use std::ffi::OsString;

use nix::sys::wait::{waitpid, WaitStatus};
use nix::unistd::Pid;

use super::loops::LOOPS;
use super::tally::Tally;
use super::worker::Job;
use super::{SyscallShare, SyscallsPerCall};
use crate::error::{Error, Result};
use crate::target::spawn;

/// Calls in the shorter of the two runs.
pub const CALLS: u64 = 5000;

/// Counts loop `index`'s syscalls per call, with `threads` threads each
/// making `calls` calls, then twice as many. With one thread the count is
/// exact; with more, what contention adds (futex waits on a lock) varies
/// from run to run.
pub fn syscalls_per_call(tally: &Tally, index: usize, threads: usize, calls: u64) -> Result<SyscallsPerCall> {
    let once = run_counted(tally, index, threads, calls)?;
    let twice = run_counted(tally, index, threads, 2 * calls)?;
    Ok(per_call(&once, &twice, calls * threads as u64))
}

/// (twice − once) / calls, per syscall, largest first.
fn per_call(once: &std::collections::BTreeMap<u32, u64>, twice: &std::collections::BTreeMap<u32, u64>, calls: u64) -> SyscallsPerCall {
    let mut by_syscall: Vec<SyscallShare> = twice
        .iter()
        .filter_map(|(nr, &n)| {
            // A process that made fewer calls of a kind in the longer run
            // did so by chance, not per call: not counted.
            let extra = n.saturating_sub(once.get(nr).copied().unwrap_or(0));
            (extra > 0).then(|| SyscallShare { name: crate::linux::syscalls::name(*nr), per_call: extra as f64 / calls as f64 })
        })
        .collect();
    by_syscall.sort_by(|a, b| b.per_call.total_cmp(&a.per_call).then_with(|| a.name.cmp(&b.name)));
    SyscallsPerCall { total: by_syscall.iter().fold(0.0, |sum, s| sum + s.per_call), by_syscall }
}

/// Runs the loop `calls` times on each of `threads` threads in a counted
/// process; its syscalls.
fn run_counted(tally: &Tally, index: usize, threads: usize, calls: u64) -> Result<std::collections::BTreeMap<u32, u64>> {
    let job = Job { bench_loop: index, threads, iterations: calls, runs: 1, count: true };
    let exe = super::self_exe()?;
    let mut argv: Vec<OsString> = vec!["sysdiet".into()];
    argv.extend(job.args().into_iter().map(OsString::from));
    let held = spawn::spawn_held(&exe, &argv, &super::worker_env(LOOPS[index].tz), true)?;
    tally.watch(held.pid())?;
    let pid = held.release()?;
    let status = waitpid(Pid::from_raw(pid as i32), None).map_err(|e| Error::Io(e.into()));
    let counts = tally.take(pid)?;
    match status? {
        WaitStatus::Exited(_, 0) => Ok(counts),
        other => Err(super::worker_failed(index, &format!("{other:?}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_difference_of_two_runs_is_per_call() {
        // 0 = read, 4 = stat, 14 = rt_sigprocmask.
        let once = [(0, 7), (4, 5003), (14, 2)].into_iter().collect();
        let twice = [(0, 7), (4, 10003), (14, 1)].into_iter().collect();
        let p = per_call(&once, &twice, 5000);
        assert_eq!(p.total, 1.0);
        assert_eq!(p.by_syscall.len(), 1);
        assert_eq!(p.by_syscall[0].name, "stat");
    }
}
