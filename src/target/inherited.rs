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

/// In a forked child before exec: puts back the inherited dispositions
/// (exec resets caught signals to default; ignored ones must be ignored
/// again) and the inherited mask; SIGPIPE to its default, as
/// std::process::Command does. Async-signal-safe: sigaction and
/// sigprocmask only.
///
/// # Safety
/// Only between fork and exec, in the child.
pub unsafe fn restore_in_child() {
    let (ignored, blocked) = (IGNORED.load(Ordering::Relaxed), BLOCKED.load(Ordering::Relaxed));
    libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    let mut mask: libc::sigset_t = std::mem::zeroed();
    libc::sigemptyset(&mut mask);
    for sig in 1..=64 {
        if ignored & (1 << (sig - 1)) != 0 {
            libc::signal(sig, libc::SIG_IGN);
        }
        if blocked & (1 << (sig - 1)) != 0 {
            libc::sigaddset(&mut mask, sig);
        }
    }
    libc::sigprocmask(libc::SIG_SETMASK, &mask, std::ptr::null_mut());
}
