//! This process's table of file descriptors, grown while it has one thread.
//!
//! A new process's table holds 64 descriptors, or as many as its parent's
//! highest open one needed. The kernel grows a table that threads share
//! only after an RCU grace period (`expand_fdtable`), each time; a lone
//! thread's table grows at once. A tracing run holds more than 64 (maps,
//! programs, links, a clock per CPU), and by then its loading threads run
//! (docs/overhead.md, "The descriptor table grown before the threads").

/// The descriptors a tracing run may hold at once, with room: its maps,
/// programs and links, and a few per CPU (the CPU clock, stack samples,
/// mapping events).
pub fn for_tracing() -> usize {
    // SAFETY: sysconf has no preconditions.
    let cpus = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) }.max(1) as usize;
    128 + 8 * cpus
}

/// RLIMIT_NOFILE's soft limit: no descriptor reaches it.
fn limit() -> Option<u64> {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes the struct it is given.
    (unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0).then_some(limit.rlim_cur)
}

/// Grows the table to hold `n` descriptors, or as many as RLIMIT_NOFILE
/// allows, by duplicating one descriptor that high and closing it. Call
/// it before any thread starts; best effort (a table that stays small
/// only costs the wait above).
pub fn reserve(n: usize) {
    let Some(limit) = limit() else { return };
    let highest = (n as u64).min(limit).saturating_sub(1);
    if highest < 64 || highest > libc::c_int::MAX as u64 {
        return;
    }
    // SAFETY: plain descriptor calls on descriptors this function owns.
    unsafe {
        let fd = libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return;
        }
        let high = libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, highest as libc::c_int);
        if high >= 0 {
            libc::close(high);
        }
        libc::close(fd);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// How many descriptors this process's table holds now.
    fn table_size() -> Option<usize> {
        let status = std::fs::read_to_string("/proc/self/status").ok()?;
        status.lines().find_map(|l| l.strip_prefix("FDSize:")).and_then(|v| v.trim().parse().ok())
    }

    #[test]
    fn the_table_grows_to_hold_what_is_reserved() {
        let before = table_size().expect("FDSize in /proc/self/status");
        let want = (before + 1).min(limit().unwrap() as usize);
        if want <= before {
            return; // the limit leaves no room to grow here
        }
        reserve(want);
        let after = table_size().unwrap();
        assert!(after >= want, "reserved {want}, the table holds {after} (was {before})");
    }
}
