//! Spawning the command held back before its execve, so the tracer is
//! armed before the first instruction of the command runs.
//!
//! std::process::Command cannot do this: its spawn() waits for the exec to
//! happen, and ours waits for the tracer. So: fork by hand, and have the
//! child block on a pipe. If sysdiet dies while the child waits, the pipe
//! closes and the child runs on, untraced.

use std::ffi::{CString, OsStr, OsString};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use nix::sys::wait::waitpid;
use nix::unistd::{fork, pipe2, ForkResult, Pid};

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

/// A forked child blocked before its execve.
pub struct HeldChild {
    pid: Pid,
    name: String,
    go: Option<OwnedFd>,
    exec_error: OwnedFd,
}

/// Forks a child that will execve(program, argv, env) once released.
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
    // SAFETY: the child only makes async-signal-safe calls on memory
    // prepared above, then execs or _exits.
    match unsafe { fork() }.map_err(io_err)? {
        ForkResult::Child => unsafe {
            libc::close(go_w.as_raw_fd());
            libc::close(err_r.as_raw_fd());
            // The command gets the signal state sysdiet was given, not
            // sysdiet's own handlers.
            super::inherited::restore_in_child();
            if let Some(null) = &null {
                for fd in 0..3 {
                    libc::dup2(null.as_raw_fd(), fd);
                }
            }
            let mut byte = 0u8;
            // One byte: go. EOF: sysdiet is gone; run anyway.
            while libc::read(wait_r.as_raw_fd(), (&mut byte as *mut u8).cast(), 1) < 0 && *libc::__errno_location() == libc::EINTR {}
            libc::execve(path.as_ptr(), arg_ptrs.as_ptr(), env_ptrs.as_ptr());
            let errno = *libc::__errno_location();
            libc::write(err_w.as_raw_fd(), (&errno as *const i32).cast(), 4);
            libc::_exit(127);
        },
        ForkResult::Parent { child } => Ok(HeldChild {
            pid: child,
            name: argv.first().map_or_else(String::new, |a| a.to_string_lossy().into_owned()),
            go: Some(go_w),
            exec_error: err_r,
        }),
    }
}

impl HeldChild {
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
            let errno = i32::from_ne_bytes(buf);
            return Err(Error::Exec { name: std::mem::take(&mut self.name), source: std::io::Error::from_raw_os_error(errno) });
        }
        Ok(self.pid())
    }
}

impl Drop for HeldChild {
    /// A child never released never ran the command: end it quietly.
    fn drop(&mut self) {
        if self.go.is_some() {
            let _ = nix::sys::signal::kill(self.pid, nix::sys::signal::Signal::SIGKILL);
            let _ = waitpid(self.pid, None);
        }
    }
}

fn io_err(e: nix::errno::Errno) -> Error {
    Error::Io(std::io::Error::from(e))
}

#[cfg(test)]
mod tests {
    use super::*;

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
