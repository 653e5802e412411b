//! One untraced run: wall time, and user and system time and peak memory
//! from the kernel (wait4's rusage).

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::Variant;
use crate::error::{Error, Result};

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct RunTiming {
    pub wall_s: f64,
    pub user_s: f64,
    pub sys_s: f64,
    pub max_rss_kib: u64,
    /// As a shell reports it: the code, or 128 + the signal.
    pub status: i32,
}

/// Runs a variant once, as hyperfine's benchmark asks its Executor: the
/// comparison is tested with timings chosen in advance (a mock in the
/// tests below `compare`), not with the machine's wall clock.
pub trait Executor {
    /// One run of `v`: its timing and, when `capture`, its stdout.
    fn run(&mut self, v: &Variant, capture: bool) -> Result<(RunTiming, Option<Vec<u8>>)>;
}

/// The real thing: the command started untraced, timed, reaped by wait4.
pub struct Untraced;

impl Executor for Untraced {
    fn run(&mut self, v: &Variant, capture: bool) -> Result<(RunTiming, Option<Vec<u8>>)> {
        run_once(v, capture)
    }
}

/// Runs `v` once; returns its timing and, when `capture`, its stdout.
fn run_once(v: &Variant, capture: bool) -> Result<(RunTiming, Option<Vec<u8>>)> {
    let name = v.command.first().ok_or_else(|| Error::Usage("an empty command line".into()))?;
    let program = crate::target::spawn::resolve_program(name)?;
    let t0 = Instant::now();
    let mut child = Command::new(&program)
        .args(&v.command[1..])
        .env_clear()
        .envs(v.env.iter().map(|(k, val)| (k, val)))
        .stdin(Stdio::null())
        .stdout(if capture { Stdio::piped() } else { Stdio::null() })
        .stderr(Stdio::null())
        .spawn()
        .map_err(|source| Error::Exec { name: name.to_string_lossy().into_owned(), source })?;
    let mut out = Vec::new();
    if let Some(mut stdout) = child.stdout.take() {
        stdout.read_to_end(&mut out)?;
    }
    let mut status = 0;
    // SAFETY: an all-zero rusage is valid; wait4 fills it for our own child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: pid is our child, not yet reaped (std's wait is not used).
        let r = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
        if r >= 0 {
            break;
        }
        if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return Err(std::io::Error::last_os_error().into());
        }
    }
    let wall_s = t0.elapsed().as_secs_f64();
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    let timing = RunTiming {
        wall_s,
        user_s: secs(usage.ru_utime),
        sys_s: secs(usage.ru_stime),
        max_rss_kib: usage.ru_maxrss as u64,
        status: crate::model::Exit::from_wait_status(status).shell_status(),
    };
    Ok((timing, capture.then_some(out)))
}
