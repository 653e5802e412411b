//! The signal state sysdiet inherited, handed on unchanged to the command
//! it starts: a command started with SIGINT ignored (a background job of a
//! script, nohup) must still ignore it under sysdiet, though sysdiet itself
//! catches SIGINT to report first. Also the inherited signal mask.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Once;

static ONCE: Once = Once::new();
/// Bit N-1 set: signal N was ignored / blocked when sysdiet started.
static IGNORED: AtomicU64 = AtomicU64::new(0);
static BLOCKED: AtomicU64 = AtomicU64::new(0);

/// Records the state; call before sysdiet installs any handler. Later
/// calls keep the first record.
pub fn remember() {
    ONCE.call_once(|| {
        let (mut ignored, mut blocked) = (0u64, 0u64);
        for sig in 1..=64 {
            // Rust's runtime ignores SIGPIPE before main: not inherited.
            if sig == libc::SIGPIPE || sig == libc::SIGKILL || sig == libc::SIGSTOP {
                continue;
            }
            // SAFETY: querying a disposition; `old` is written by the kernel.
            let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
            if unsafe { libc::sigaction(sig, std::ptr::null(), &mut old) } == 0 && old.sa_sigaction == libc::SIG_IGN {
                ignored |= 1 << (sig - 1);
            }
        }
        // SAFETY: querying this thread's mask, the one the process started with.
        let mut mask: libc::sigset_t = unsafe { std::mem::zeroed() };
        if unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut mask) } == 0 {
            for sig in 1..=64 {
                if unsafe { libc::sigismember(&mask, sig) } == 1 {
                    blocked |= 1 << (sig - 1);
                }
            }
        }
        IGNORED.store(ignored, Ordering::Relaxed);
        BLOCKED.store(blocked, Ordering::Relaxed);
    });
}

/// In the held child before exec (spawn.rs): puts back the inherited
/// dispositions and mask. Every signal not inherited ignored goes to its
/// default (exec would reset a caught one, but not one sysdiet ignores
/// itself, and the child must not run sysdiet's handlers: it shares
/// sysdiet's memory); SIGPIPE to its default, as std::process::Command
/// does. Raw syscalls only: libc's wrappers would write errno, which is
/// the spawning thread's.
///
/// # Safety
/// Only in the held child, between its clone and its exec.
pub unsafe fn restore_in_child() {
    use syscalls::{syscall4, Sysno};
    let (ignored, blocked) = (IGNORED.load(Ordering::Relaxed), BLOCKED.load(Ordering::Relaxed));
    for sig in 1..=64usize {
        if sig == libc::SIGKILL as usize || sig == libc::SIGSTOP as usize {
            continue;
        }
        let handler = if ignored & (1 << (sig - 1)) != 0 { libc::SIG_IGN } else { libc::SIG_DFL };
        let action = KernelSigaction { handler, flags: 0, restorer: 0, mask: 0 };
        let _ = syscall4(Sysno::rt_sigaction, sig, std::ptr::addr_of!(action) as usize, 0, 8);
    }
    let _ = syscall4(Sysno::rt_sigprocmask, libc::SIG_SETMASK as usize, std::ptr::addr_of!(blocked) as usize, 0, 8);
}

/// The kernel's struct sigaction (x86-64 and arm64 alike), not libc's.
#[repr(C)]
struct KernelSigaction {
    handler: libc::sighandler_t,
    flags: u64,
    restorer: usize,
    mask: u64,
}
