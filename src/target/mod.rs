//! The processes being traced: spawned held before exec (`run`) or found by
//! pid (`attach`), and the events that end a trace.

pub mod inherited;
pub mod spawn;

use std::os::fd::{AsFd, FromRawFd, OwnedFd};
use std::sync::mpsc::Sender;
use std::time::Duration;

use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM};
use signal_hook::iterator::exfiltrator::origin::WithOrigin;
use signal_hook::iterator::SignalsInfo;
use signal_hook::low_level::siginfo::Cause;

use crate::error::{Error, Result};
use crate::model::Exit;

/// What the main loop of a trace waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// The spawned command ended.
    Exited(Exit),
    /// Every attached process is gone.
    AllGone,
    /// A signal to sysdiet. `from_terminal`: the kernel sent it (Ctrl-C,
    /// Ctrl-\, hang-up), so the command's process group got it too.
    Signal { signal: i32, from_terminal: bool },
    /// --duration ran out.
    Timeout,
}

/// Reaps `pid` (sysdiet's child) on a thread, and sends its exit.
pub fn watch_child(pid: u32, tx: Sender<Event>) {
    use nix::sys::wait::{waitpid, WaitStatus};
    std::thread::spawn(move || loop {
        let exit = match waitpid(nix::unistd::Pid::from_raw(pid as i32), None) {
            Ok(WaitStatus::Exited(_, code)) => Exit::Code { code },
            Ok(WaitStatus::Signaled(_, signal, core_dumped)) => Exit::Signal { signal: signal as i32, core_dumped },
            // Stops and continues are not asked for; EINTR: again.
            Ok(_) | Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => return,
        };
        let _ = tx.send(Event::Exited(exit));
        return;
    });
}

/// Catches the signals that would end sysdiet, so it can report first.
pub fn watch_signals(tx: Sender<Event>) -> Result<()> {
    inherited::remember();
    let mut signals = SignalsInfo::<WithOrigin>::new([SIGINT, SIGTERM, SIGHUP, SIGQUIT])?;
    std::thread::spawn(move || {
        for info in signals.forever() {
            let from_terminal = matches!(info.cause, Cause::Kernel);
            if tx.send(Event::Signal { signal: info.signal, from_terminal }).is_err() {
                return;
            }
        }
    });
    Ok(())
}

/// Sends `Timeout` after `d`.
pub fn watch_timeout(d: Duration, tx: Sender<Event>) {
    std::thread::spawn(move || {
        std::thread::sleep(d);
        let _ = tx.send(Event::Timeout);
    });
}

/// Sends `AllGone` once every one of `pids` has exited (pidfds poll
/// readable when their process ends).
pub fn watch_pids(pids: &[u32], tx: Sender<Event>) -> Result<()> {
    let fds: Vec<OwnedFd> = pids.iter().map(|&p| pidfd(p).ok_or(Error::NoSuchProcess(p))).collect::<Result<_>>()?;
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    std::thread::spawn(move || {
        let mut alive: Vec<&OwnedFd> = fds.iter().collect();
        while !alive.is_empty() {
            let mut polls: Vec<PollFd> = alive.iter().map(|fd| PollFd::new(fd.as_fd(), PollFlags::POLLIN)).collect();
            match poll(&mut polls, PollTimeout::NONE) {
                Ok(_) | Err(nix::errno::Errno::EINTR) => {}
                Err(_) => return,
            }
            let ended: Vec<bool> = polls.iter().map(|p| p.revents().is_some_and(|r| !r.is_empty())).collect();
            let mut i = 0;
            alive.retain(|_| {
                i += 1;
                !ended[i - 1]
            });
        }
        let _ = tx.send(Event::AllGone);
    });
    Ok(())
}

/// pidfd_open flag for a thread's own pidfd (Linux 6.9).
const PIDFD_THREAD: u32 = libc::O_EXCL as u32;

/// A pidfd for one thread (PIDFD_THREAD), or for a process on kernels
/// before 6.9 where only a thread-group leader can have one.
pub fn pidfd(tid: u32) -> Option<OwnedFd> {
    for flags in [PIDFD_THREAD, 0] {
        // SAFETY: pidfd_open returns a new fd we own, or -1.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, tid as libc::pid_t, flags) } as i32;
        if fd >= 0 {
            // SAFETY: fd is fresh and ours.
            return Some(unsafe { OwnedFd::from_raw_fd(fd) });
        }
    }
    None
}

/// Whether this kernel gives a thread its own pidfd (PIDFD_THREAD, 6.9):
/// asked of the calling thread itself.
pub fn thread_pidfds() -> bool {
    // SAFETY: gettid takes nothing; pidfd_open returns a new fd we own, or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, libc::gettid(), PIDFD_THREAD) } as i32;
    if fd < 0 {
        return false;
    }
    // SAFETY: fd is fresh and ours.
    drop(unsafe { OwnedFd::from_raw_fd(fd) });
    true
}

/// /proc/PID/stat read: the command name, and the fields after it (the
/// name may hold spaces and parentheses, so it is cut at the last ")").
/// `fields[0]` is the state, `[1]` the parent, `[6]` the flags.
struct Stat {
    name: String,
    fields: Vec<String>,
}

fn stat_of(pid: u32) -> Option<Stat> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (name, rest) = stat.split_once(" (").and_then(|(_, r)| r.rsplit_once(')'))?;
    Some(Stat { name: name.to_string(), fields: rest.split_whitespace().map(str::to_string).collect() })
}

/// Checks that `pid` is a live process (not a zombie) and lists its threads
/// as (tid, comm).
pub fn live_threads(pid: u32) -> Result<Vec<(u32, String)>> {
    let stat = stat_of(pid).ok_or(Error::NoSuchProcess(pid))?;
    if matches!(stat.fields.first().map(String::as_str), Some("Z" | "X")) {
        return Err(Error::NoSuchProcess(pid));
    }
    let mut threads = Vec::new();
    let dir = std::fs::read_dir(format!("/proc/{pid}/task")).map_err(|_| Error::NoSuchProcess(pid))?;
    for entry in dir.flatten() {
        let Some(tid) = entry.file_name().to_str().and_then(|s| s.parse().ok()) else { continue };
        let comm = std::fs::read_to_string(entry.path().join("comm")).unwrap_or_default();
        threads.push((tid, comm.trim_end().to_string()));
    }
    threads.sort();
    Ok(threads)
}

/// What `attach -p` was given, made into processes to trace: a thread id
/// The process of thread `tid`, from /proc; None once it is gone.
pub fn tgid_of(tid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    status.lines().find_map(|l| l.strip_prefix("Tgid:")).and_then(|v| v.trim().parse().ok())
}

/// becomes its process (with a note to show), a kernel thread is refused
/// (it makes no syscalls of its own from user space). Duplicates go.
pub fn processes_to_attach(pids: &[u32]) -> Result<(Vec<u32>, Vec<String>)> {
    let mut out: Vec<u32> = Vec::new();
    let mut notes = Vec::new();
    for &pid in pids {
        let stat = stat_of(pid).ok_or(Error::NoSuchProcess(pid))?;
        // The flags: PF_KTHREAD.
        let flags: u64 = stat.fields.get(6).and_then(|f| f.parse().ok()).unwrap_or(0);
        if flags & 0x0020_0000 != 0 {
            return Err(Error::KernelThread { pid, name: crate::human::escaped(&stat.name) });
        }
        let tgid = tgid_of(pid).unwrap_or(pid);
        if tgid != pid {
            notes.push(format!("{pid} is a thread of process {tgid}: tracing the whole process"));
        }
        if !out.contains(&tgid) {
            out.push(tgid);
        }
    }
    Ok((out, notes))
}

/// The parent pid of a live process, 0 when unknown.
pub fn parent_of(pid: u32) -> u32 {
    stat_of(pid).and_then(|s| s.fields.get(1)?.parse().ok()).unwrap_or(0)
}

/// `TZ` from a live process's environment as it started: None when unset.
/// Environment variables whose effect rules know: output buffering, the
/// allocator's thresholds, where zone files live, where the loader
/// looks for libraries, where programs started by name are looked for.
pub const KNOBS: &[&str] = &[
    "PYTHONUNBUFFERED",
    "_STDBUF_I",
    "_STDBUF_O",
    "_STDBUF_E",
    "MALLOC_MMAP_THRESHOLD_",
    "MALLOC_TRIM_THRESHOLD_",
    "MALLOC_TOP_PAD_",
    "GLIBC_TUNABLES",
    "TZDIR",
    "LD_LIBRARY_PATH",
    "PYTHONPATH",
    "NODE_OPTIONS",
    "PATH",
];

/// The facts rules need about a command started with `env`.
pub fn environment_of_command(env: &[(std::ffi::OsString, std::ffi::OsString)]) -> crate::model::Environment {
    let get = |name: &str| env.iter().find(|(k, _)| k == name).map(|(_, v)| v.to_string_lossy().into_owned());
    environment(get)
}

/// The same facts from an environment block (`NAME=value\0...`), as a
/// process had it at its exec.
pub fn environment_of_block(block: &[u8]) -> crate::model::Environment {
    let vars: Vec<(String, String)> = block
        .split(|&b| b == 0)
        .filter_map(|kv| {
            let kv = String::from_utf8_lossy(kv);
            kv.split_once('=').map(|(k, v)| (k.to_string(), v.to_string()))
        })
        .collect();
    let (tz, knobs) = read_by_rules(|name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()));
    crate::model::Environment { tz, knobs, ..Default::default() }
}

/// The same facts about a running process.
pub fn environment_of_process(pid: u32) -> crate::model::Environment {
    environment(|name| env_var_of(pid, name))
}

fn environment(get: impl Fn(&str) -> Option<String>) -> crate::model::Environment {
    let (tz, knobs) = read_by_rules(get);
    crate::model::Environment { tz, knobs, clocksource: crate::linux::clocksource(), available_clocksources: crate::linux::available_clocksources() }
}

/// What rules read of an environment: TZ, and the knobs that are set.
fn read_by_rules(get: impl Fn(&str) -> Option<String>) -> (Option<String>, std::collections::BTreeMap<String, String>) {
    (get("TZ"), KNOBS.iter().filter_map(|k| get(k).map(|v| (k.to_string(), v))).collect())
}

pub fn env_var_of(pid: u32, name: &str) -> Option<String> {
    let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    let prefix = format!("{name}=");
    environ.split(|&b| b == 0).find_map(|kv| kv.strip_prefix(prefix.as_bytes())).map(|v| String::from_utf8_lossy(v).into_owned())
}

#[cfg(test)]
mod tests {
    #[test]
    fn threads_have_pidfds_from_linux_6_9() {
        let release = crate::linux::host::kernel_release();
        let mut v = release.split(|c: char| !c.is_ascii_digit()).filter_map(|n| n.parse::<u32>().ok());
        let (major, minor) = (v.next().unwrap(), v.next().unwrap());
        assert_eq!(super::thread_pidfds(), (major, minor) >= (6, 9), "Linux {release}");
    }

    use super::*;

    #[test]
    fn live_threads_of_self_and_a_dead_pid() {
        let me = std::process::id();
        let threads = live_threads(me).unwrap();
        assert!(threads.iter().any(|(tid, _)| *tid == me));
        assert!(matches!(live_threads(u32::MAX / 2), Err(Error::NoSuchProcess(_))));
        assert_eq!(parent_of(me), std::os::unix::process::parent_id());
    }
}
