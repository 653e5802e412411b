//! Spawning the command held back before its execve, so the tracer is
//! armed before the first instruction of the command runs.
//!
//! std::process::Command cannot do this: its spawn() waits for the exec to
//! happen, and ours waits for the tracer. So: a child of our own, blocked
//! on a pipe. If sysdiet dies while the child waits, the pipe closes and
//! the child runs on, untraced.
//!
//! The child shares sysdiet's memory until its exec (clone with CLONE_VM,
//! as posix_spawn does), on a stack of its own: a forked one would make
//! every page sysdiet writes while it loads (its heap, libbpf's copies of
//! the object) a copy-on-write fault, each with a TLB flush on the other
//! CPUs. So the child touches nothing but what it is given, makes raw
//! syscalls only (no errno, no libc state), and runs none of sysdiet's
//! signal handlers: signals are blocked across the clone until it has put
//! back the inherited dispositions. On kernels before 5.16 a core dump of
//! sysdiet kills every process sharing its memory: a held child then never
//! runs the command (a SIGKILL still lets it run).

use std::ffi::{CString, OsStr, OsString};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use nix::sys::wait::waitpid;
use nix::unistd::{pipe2, Pid};
use syscalls::{syscall1, syscall3, Errno, Sysno};

use crate::error::{Error, Result};

/// The program `name` would run as, found like execvp(3) and the shell do.
pub fn resolve_program(name: &OsStr) -> Result<PathBuf> {
    let shown = crate::human::escaped(&name.to_string_lossy());
    if name.is_empty() {
        return Err(Error::Usage("the command name is empty".into()));
    }
    if name.as_bytes().contains(&b'/') {
        let path = Path::new(name);
        return match std::fs::metadata(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(Error::NoSuchFile(shown)),
            Err(e) => Err(Error::Exec { name: shown, source: e }),
            Ok(m) if m.is_dir() => Err(Error::IsADirectory(shown)),
            Ok(m) if !is_executable(&m) => Err(Error::NotExecutable(shown)),
            Ok(_) => Ok(path.to_path_buf()),
        };
    }
    let search = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    let mut found_unexecutable = false;
    for dir in std::env::split_paths(&search) {
        let candidate = dir.join(name);
        if let Ok(m) = std::fs::metadata(&candidate) {
            if is_executable(&m) {
                return Ok(candidate);
            }
            found_unexecutable |= m.is_file();
        }
    }
    Err(if found_unexecutable { Error::NotExecutable(shown) } else { Error::CommandNotFound(shown) })
}

fn is_executable(m: &std::fs::Metadata) -> bool {
    m.is_file() && m.permissions().mode() & 0o111 != 0
}

/// A child blocked before its execve.
pub struct HeldChild {
    pid: Pid,
    name: String,
    /// The file it will exec, as it names it.
    program: String,
    go: Option<OwnedFd>,
    exec_error: OwnedFd,
    /// What the child reads, and its stack: freed once it has exec'd or
    /// been waited for, never while it may still run on them.
    shared: Option<(Box<ChildPlan>, ChildStack)>,
}

/// Everything the held child reads, in sysdiet's memory (which it shares).
struct ChildPlan {
    path: CString,
    arg_ptrs: Vec<*const libc::c_char>,
    env_ptrs: Vec<*const libc::c_char>,
    /// Owned here for the pointers above.
    _strings: Vec<CString>,
    wait: RawFd,
    go: RawFd,
    exec_error_read: RawFd,
    exec_error: RawFd,
    /// /dev/null for the child's stdin, stdout and stderr, or -1.
    null: RawFd,
}

/// The held child's stack, mapped for it.
struct ChildStack {
    base: *mut libc::c_void,
}

impl ChildStack {
    /// Enough for the few calls the child makes, with room to spare.
    const BYTES: usize = 64 * 1024;

    fn map() -> Result<ChildStack> {
        // SAFETY: a new private anonymous mapping, unmapped on drop.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                Self::BYTES,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(Error::Io(std::io::Error::last_os_error()));
        }
        Ok(ChildStack { base })
    }

    /// Where the child's stack starts: it grows down from the top.
    fn top(&self) -> *mut libc::c_void {
        // SAFETY: one past the mapping's end, which the stack grows down from.
        unsafe { self.base.cast::<u8>().add(Self::BYTES).cast() }
    }
}

impl Drop for ChildStack {
    fn drop(&mut self) {
        // SAFETY: the mapping made in map(), no longer used by any child.
        unsafe { libc::munmap(self.base, Self::BYTES) };
    }
}

/// Starts a child that will execve(program, argv, env) once released.
/// `quiet`: the command's stdin, stdout and stderr are /dev/null (compare's
/// traced runs), not sysdiet's own.
pub fn spawn_held(program: &Path, argv: &[OsString], env: &[(OsString, OsString)], quiet: bool) -> Result<HeldChild> {
    let cstr = |s: &[u8]| CString::new(s).map_err(|_| Error::Usage("arguments cannot contain NUL bytes".into()));
    let path = cstr(program.as_os_str().as_bytes())?;
    let args: Vec<CString> = argv.iter().map(|a| cstr(a.as_bytes())).collect::<Result<_>>()?;
    let envs: Vec<CString> = env.iter().map(|(k, v)| cstr(&[k.as_bytes(), b"=", v.as_bytes()].concat())).collect::<Result<_>>()?;
    let mut arg_ptrs: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
    arg_ptrs.push(std::ptr::null());
    let mut env_ptrs: Vec<*const libc::c_char> = envs.iter().map(|e| e.as_ptr()).collect();
    env_ptrs.push(std::ptr::null());

    let (wait_r, go_w) = pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(io_err)?;
    let (err_r, err_w) = pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(io_err)?;

    let null = if quiet { Some(std::fs::OpenOptions::new().read(true).write(true).open("/dev/null")?) } else { None };
    super::inherited::remember();
    let plan = Box::new(ChildPlan {
        path,
        arg_ptrs,
        env_ptrs,
        _strings: args.into_iter().chain(envs).collect(),
        wait: wait_r.as_raw_fd(),
        go: go_w.as_raw_fd(),
        exec_error_read: err_r.as_raw_fd(),
        exec_error: err_w.as_raw_fd(),
        null: null.as_ref().map_or(-1, |f| f.as_raw_fd()),
    });
    let stack = ChildStack::map()?;
    // SAFETY: every signal blocked on this thread for the clone (the child
    // starts with this mask), the old mask put back after it.
    let mut all: libc::sigset_t = unsafe { std::mem::zeroed() };
    let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
    unsafe {
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
    }
    let plan_ptr: *const ChildPlan = &*plan;
    // SAFETY: the child runs held_child on its own stack and reads only
    // `plan`, both kept until it has exec'd or been waited for.
    let pid = unsafe { libc::clone(held_child, stack.top(), libc::CLONE_VM | libc::SIGCHLD, plan_ptr as *mut libc::c_void) };
    let cloned = std::io::Error::last_os_error();
    // SAFETY: the mask saved above.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut()) };
    if pid < 0 {
        return Err(Error::Io(cloned));
    }
    // The child has its own copies of the descriptors: these close here.
    drop((wait_r, err_w, null));
    Ok(HeldChild {
        pid: Pid::from_raw(pid),
        name: argv.first().map_or_else(String::new, |a| a.to_string_lossy().into_owned()),
        program: program.to_string_lossy().into_owned(),
        go: Some(go_w),
        exec_error: err_r,
        shared: Some((plan, stack)),
    })
}

/// The held child: waits for a byte on its pipe, then execs. One byte: go.
/// EOF: sysdiet is gone; run anyway.
extern "C" fn held_child(plan: *mut libc::c_void) -> libc::c_int {
    // SAFETY: spawn_held's plan, alive until this child execs or is waited
    // for; raw syscalls on its descriptors and its strings only.
    unsafe {
        let plan = &*(plan as *const ChildPlan);
        let _ = syscall1(Sysno::close, plan.go as usize);
        let _ = syscall1(Sysno::close, plan.exec_error_read as usize);
        // The command gets the signal state sysdiet was given, not
        // sysdiet's own handlers; signals are blocked until then.
        super::inherited::restore_in_child();
        if plan.null >= 0 {
            for fd in 0..3usize {
                if plan.null as usize != fd {
                    let _ = syscall3(Sysno::dup3, plan.null as usize, fd, 0);
                }
            }
        }
        let mut byte = 0u8;
        while syscall3(Sysno::read, plan.wait as usize, std::ptr::addr_of_mut!(byte) as usize, 1) == Err(Errno::EINTR) {}
        let errno = match syscall3(Sysno::execve, plan.path.as_ptr() as usize, plan.arg_ptrs.as_ptr() as usize, plan.env_ptrs.as_ptr() as usize) {
            Err(e) => e.into_raw(),
            Ok(_) => 0,
        };
        let _ = syscall3(Sysno::write, plan.exec_error as usize, std::ptr::addr_of!(errno) as usize, 4);
        let _ = syscall1(Sysno::exit_group, 127);
    }
    127
}

impl HeldChild {
    /// The file it will exec, as its execve names it.
    pub fn program(&self) -> &str {
        &self.program
    }

    pub fn pid(&self) -> u32 {
        self.pid.as_raw() as u32
    }

    /// Lets the child exec; returns once the exec has happened.
    pub fn release(mut self) -> Result<u32> {
        let go = self.go.take().expect("released once");
        if nix::unistd::write(&go, b"g").is_err() {
            // Only a dead child closes its end: a Ctrl-C from the terminal
            // reached it (it is in our process group) before it was let go.
            let signal = match waitpid(self.pid, None) {
                Ok(nix::sys::wait::WaitStatus::Signaled(_, sig, _)) => sig as i32,
                _ => libc::SIGINT,
            };
            self.shared = None;
            return Err(Error::NotStarted { signal });
        }
        drop(go);
        let mut buf = [0u8; 4];
        let n = loop {
            match nix::unistd::read(&self.exec_error, &mut buf) {
                Err(nix::errno::Errno::EINTR) => continue,
                other => break other.map_err(io_err)?,
            }
        };
        if n == 4 {
            let _ = waitpid(self.pid, None);
            self.shared = None;
            let errno = i32::from_ne_bytes(buf);
            return Err(Error::Exec { name: std::mem::take(&mut self.name), source: std::io::Error::from_raw_os_error(errno) });
        }
        // The pipe closed at the exec: the child has memory of its own now.
        self.shared = None;
        Ok(self.pid())
    }
}

impl Drop for HeldChild {
    /// A child never released never ran the command: end it quietly.
    fn drop(&mut self) {
        if self.go.is_some() {
            let _ = nix::sys::signal::kill(self.pid, nix::sys::signal::Signal::SIGKILL);
            let _ = waitpid(self.pid, None);
            self.shared = None;
        }
        // Released, but its exec never seen: it may still read them.
        if let Some(shared) = self.shared.take() {
            std::mem::forget(shared);
        }
    }
}

fn io_err(e: nix::errno::Errno) -> Error {
    Error::Io(std::io::Error::from(e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> HeldChild {
        let argv: Vec<OsString> = ["sh", "-c", script].iter().map(OsString::from).collect();
        spawn_held(Path::new("/bin/sh"), &argv, &[], true).unwrap()
    }

    #[test]
    fn a_released_child_runs_the_command_and_exits_its_way() {
        let pid = Pid::from_raw(sh("exit 3").release().unwrap() as i32);
        assert_eq!(waitpid(pid, None), Ok(nix::sys::wait::WaitStatus::Exited(pid, 3)));
    }

    #[test]
    fn a_child_never_released_is_ended_and_waited_for() {
        let held = sh("exit 0");
        let pid = Pid::from_raw(held.pid() as i32);
        drop(held);
        assert_eq!(waitpid(pid, None), Err(nix::errno::Errno::ECHILD), "reaped, none left");
    }

    #[test]
    fn a_failed_exec_is_told_with_its_errno() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty");
        std::fs::write(&empty, b"\x7fELF").unwrap();
        std::fs::set_permissions(&empty, std::fs::Permissions::from_mode(0o755)).unwrap();
        let held = spawn_held(&empty, &[OsString::from("empty")], &[], true).unwrap();
        match held.release() {
            Err(Error::Exec { source, .. }) => assert_eq!(source.raw_os_error(), Some(libc::ENOEXEC)),
            other => panic!("{:?}", other.map_err(|e| e.to_string())),
        }
    }

    #[test]
    fn resolves_like_the_shell() {
        assert!(resolve_program(OsStr::new("sh")).unwrap().is_absolute());
        assert!(matches!(resolve_program(OsStr::new("no-such-cmd-xyz")), Err(Error::CommandNotFound(_))));
        assert!(matches!(resolve_program(OsStr::new("./no/such")), Err(Error::NoSuchFile(_))));
        assert!(matches!(resolve_program(OsStr::new("/etc")), Err(Error::IsADirectory(_))));
        assert!(matches!(resolve_program(OsStr::new("")), Err(Error::Usage(_))));
        assert!(matches!(resolve_program(OsStr::new("/etc/passwd")), Err(Error::NotExecutable(_))));
    }
}
