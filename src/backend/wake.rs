//! Stopping a reader thread that sleeps on a ring buffer: a flag it looks
//! at, and an eventfd that wakes it at once. Shared by the exit-record
//! reader and the stack-sample collector.

use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::eventfd::{EfdFlags, EventFd};

pub struct Stop {
    flag: AtomicBool,
    wake: EventFd,
}

impl Stop {
    pub fn new() -> std::io::Result<Stop> {
        let wake = EventFd::from_value_and_flags(0, EfdFlags::EFD_CLOEXEC | EfdFlags::EFD_NONBLOCK)?;
        Ok(Stop { flag: AtomicBool::new(false), wake })
    }

    /// Wakes the reader, to look again (or to stop, after `stop`).
    pub fn poke(&self) {
        // Fails only when the counter would overflow: it is awake anyway.
        let _ = self.wake.write(1);
    }

    pub fn stop(&self) {
        self.flag.store(true, Ordering::Release);
        self.poke();
    }

    /// Told to stop: the pass after this is the last, and sees everything
    /// sent before.
    pub fn stopped(&self) -> bool {
        self.flag.load(Ordering::Acquire)
    }

    /// Sleeps until `ring_fd` has data (the kernel wakes it), the reader is
    /// poked, or `timeout` passes.
    pub fn wait(&self, ring_fd: i32, timeout: Duration) {
        // SAFETY: the ring's fd stays open while its reader runs.
        let ring = unsafe { BorrowedFd::borrow_raw(ring_fd) };
        let mut fds = [PollFd::new(ring, PollFlags::POLLIN), PollFd::new(self.wake.as_fd(), PollFlags::POLLIN)];
        let timeout = PollTimeout::try_from(timeout.as_millis().min(i32::MAX as u128) as i32).unwrap_or(PollTimeout::MAX);
        // An error or EINTR just means look again.
        let _ = poll(&mut fds, timeout);
        if fds[1].revents().is_some_and(|r| r.contains(PollFlags::POLLIN)) {
            // Drains the counter (non-blocking: EAGAIN when already empty).
            let _ = self.wake.read();
        }
    }
}
