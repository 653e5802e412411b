//! Stopping a reader thread that sleeps on a ring buffer: a flag it looks
//! at, and an eventfd that wakes it at once. Shared by the exit-record
//! reader and the stack-sample collector.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

pub struct Stop {
    flag: AtomicBool,
    wake: OwnedFd,
}

impl Stop {
    pub fn new() -> std::io::Result<Stop> {
        // SAFETY: eventfd has no preconditions; a new fd we own, or -1.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: fresh fd, ours.
        Ok(Stop { flag: AtomicBool::new(false), wake: unsafe { OwnedFd::from_raw_fd(fd) } })
    }

    /// Wakes the reader, to look again (or to stop, after `stop`).
    pub fn poke(&self) {
        // SAFETY: writing 8 bytes to our own eventfd.
        unsafe { libc::write(self.wake.as_raw_fd(), 1u64.to_ne_bytes().as_ptr().cast(), 8) };
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
        let mut fds = [
            libc::pollfd { fd: ring_fd, events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: self.wake.as_raw_fd(), events: libc::POLLIN, revents: 0 },
        ];
        // SAFETY: two valid pollfds; an error or EINTR just means look again.
        unsafe { libc::poll(fds.as_mut_ptr(), 2, timeout.as_millis() as i32) };
        if fds[1].revents & libc::POLLIN != 0 {
            let mut buf = [0u8; 8];
            // SAFETY: draining our own eventfd into an 8-byte buffer.
            unsafe { libc::read(self.wake.as_raw_fd(), buf.as_mut_ptr().cast(), 8) };
        }
    }
}
