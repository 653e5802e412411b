//! 100 SIGKILLs (SYSDIET_KILLS) of `sysdiet run` at random moments (while the BPF loads,
//! while the command forks and threads, while the report is read out) over
//! a victim that forks and threads: every victim that was started finishes
//! with its own exit code, none is left stopped, and no BPF program of
//! sysdiet stays loaded. Its own test binary, so nothing else runs beside it.

mod common;
use common::*;

use std::os::unix::process::ExitStatusExt;
use std::time::Duration;

/// SIGKILLs in one run; SYSDIET_KILLS sets another number (ci/kernels'
/// guests, where a run under TCG takes seconds, ask for fewer).
fn kills() -> usize {
    std::env::var("SYSDIET_KILLS").ok().and_then(|n| n.parse().ok()).unwrap_or(100)
}

/// Names of the programs sysdiet loads (the kernel keeps 15 bytes).
const OURS: &[&str] = &["sys_exit", "sys_enter", "on_tick", "sched_process_f", "sched_process_e", "signal_deliver", "tally_enter", "tally_exec"];

/// How many loaded BPF programs carry one of sysdiet's names.
fn our_programs() -> usize {
    let (mut id, mut n) = (0u32, 0);
    // SAFETY: plain libbpf calls over ids the kernel hands out; each fd
    // is closed after its info is read.
    unsafe {
        while libbpf_sys::bpf_prog_get_next_id(id, &mut id) == 0 {
            let fd = libbpf_sys::bpf_prog_get_fd_by_id(id);
            if fd < 0 {
                continue;
            }
            let mut info = libbpf_sys::bpf_prog_info::default();
            let mut len = std::mem::size_of::<libbpf_sys::bpf_prog_info>() as u32;
            if libbpf_sys::bpf_prog_get_info_by_fd(fd, &mut info, &mut len) == 0 {
                let name: String = info.name.iter().take_while(|&&c| c != 0).map(|&c| c as u8 as char).collect();
                n += OURS.contains(&name.as_str()) as usize;
            }
            libc::close(fd);
        }
    }
    n
}

#[test]
fn sigkill_at_any_moment_never_hurts_the_target() {
    if skip_without_bpf() {
        return;
    }
    // Orphans (the victims of a killed sysdiet) come to us to be reaped.
    // SAFETY: prctl with plain integer arguments.
    assert_eq!(unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) }, 0);
    let before = our_programs();
    let forks = victim("forkexec");
    let threads = victim("threads");
    // Forks 20 processes, then threads, then exits 3.
    let script = format!("{} 20 /bin/true && {} 4 2000 && exit 3", forks.display(), threads.display());
    let mut seed: u64 = 0x5eed_1234_abcd_0042;
    let mut random = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    // Kills fall anywhere from sysdiet's start to past the command's end:
    // over twice what a whole run takes here (a guest under TCG takes
    // seconds to load the BPF), and at least 50 ms (a larger floor, on a
    // fast host, puts most kills after the command's end). A whole run is the
    // median of those seen to end by themselves so far: on a host whose
    // load changes, one first run's time would aim every later kill too
    // early or too late.
    let t0 = std::time::Instant::now();
    // Runs that end clean leave their programs with a keeper (keeper.rs):
    // kept for a second here, so that what is left at the end is only what
    // killed runs would leak (a keeper exits and frees its set, or drops a
    // set a killed borrower held).
    let keep = ("SYSDIET_KEEP", "1");
    let whole = sysdiet()
        .env(keep.0, keep.1)
        .args(["run", "--", "sh", "-c", &script])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status();
    assert_eq!(whole.unwrap().code(), Some(3), "an unkilled run passes the command's status on");
    let mut whole_runs = vec![t0.elapsed()];
    let kills = kills();
    let (mut started, mut finished, mut killed) = (0, 0, 0);
    for kill in 0..kills {
        whole_runs.sort();
        let span = (whole_runs[whole_runs.len() / 2] * 2).max(Duration::from_millis(50));
        let mut sysdiet = sysdiet()
            .env(keep.0, keep.1)
            .args(["run", "--", "sh", "-c", &script])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // Anywhere from during start-up to after the command's end.
        let delay = Duration::from_micros(random() % span.as_micros() as u64);
        let t0 = std::time::Instant::now();
        let (mut victim, mut ended) = (None, None);
        while t0.elapsed() < delay {
            victim = victim.or_else(|| first_child(sysdiet.id()));
            if let Some(status) = sysdiet.try_wait().unwrap() {
                whole_runs.push(t0.elapsed());
                ended = Some(status);
                break;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        let status = match ended {
            Some(status) => status,
            None => {
                victim = victim.or_else(|| first_child(sysdiet.id()));
                let _ = sysdiet.kill();
                sysdiet.wait().unwrap()
            }
        };
        // Shown with --nocapture (ci/kernel-tests): a guest that runs out
        // of time shows how far the storm got, and each run's pace.
        eprintln!("kill {kill}: at {delay:?} of {span:?}, {status}, after {:?}", t0.elapsed());
        let Some(victim) = victim else { continue };
        started += 1;
        if status.code().is_some() {
            // sysdiet ended by itself first: it reaped the victim itself
            // and passed its status on.
            assert_eq!(status.code(), Some(3), "sysdiet's status is the command's");
            finished += 1;
            continue;
        }
        assert_eq!(status.signal(), Some(libc::SIGKILL));
        killed += 1;
        // The victim, orphaned to us: it must run to its own end.
        let pid = nix::unistd::Pid::from_raw(victim as i32);
        loop {
            match nix::sys::wait::waitpid(pid, Some(nix::sys::wait::WaitPidFlag::WUNTRACED)) {
                Ok(nix::sys::wait::WaitStatus::Exited(_, code)) => {
                    assert_eq!(code, 3, "the victim finishes with its own exit code");
                    finished += 1;
                    break;
                }
                Ok(nix::sys::wait::WaitStatus::Stopped(_, sig)) => panic!("the victim was left stopped by {sig:?}"),
                Ok(other) => panic!("the victim did not finish by itself: {other:?}"),
                // Reaped already (sysdiet's own waiter got there first).
                Err(nix::errno::Errno::ECHILD) => {
                    finished += 1;
                    break;
                }
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => panic!("waitpid: {e}"),
            }
        }
    }
    // Reap any grandchildren orphaned to us on the way.
    while nix::sys::wait::waitpid(None, Some(nix::sys::wait::WaitPidFlag::WNOHANG)).is_ok_and(|s| s != nix::sys::wait::WaitStatus::StillAlive) {}
    eprintln!("{started} of {kills} killed runs had started the command, {killed} of them killed under way; {finished} finished by themselves");
    assert!(started > kills / 2, "most runs got as far as the command: {started}");
    assert!(killed >= kills / 5, "kills while the command ran: {killed}");
    assert_eq!(finished, started);
    // The kernel drops a dead process's programs as its fds close; the
    // last keepers exit a second after their last run.
    let mut left = our_programs();
    for _ in 0..50 {
        if left <= before {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
        left = our_programs();
    }
    assert!(left <= before, "BPF programs left loaded: {left} (before: {before})");
}
