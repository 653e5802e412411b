//! A strace log, diagnosed: the log (or a `-ff` set of them) → backend
//! (strace_log) + stacks (`-k`) → model → diagnose, as for a traced run.

use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::{TraceOptions, Traced};
use crate::backend::strace_log::{LogError, LogReader};
use crate::backend::Tracer;
use crate::error::{Error, Result};
use crate::model::builder::TraceBuilder;
use crate::model::{RunInfo, Sampling};

/// One input: a file, with the pid its name gives (`-ff`: `LOG.1234`).
struct Input {
    path: PathBuf,
    pid: Option<u32>,
}

/// Reads the logs at `paths` (`-` for stdin) and diagnoses them.
pub fn analyze(paths: &[PathBuf], opts: &TraceOptions) -> Result<Traced> {
    let started = Instant::now();
    let inputs = inputs(paths)?;
    let mut reader = LogReader::new(opts.filter.clone());
    for input in &inputs {
        let name = input.path.display().to_string();
        let result = if input.path.as_os_str() == "-" {
            reader.read(std::io::stdin().lock(), None)
        } else {
            let file = open(&input.path)?;
            reader.read(BufReader::with_capacity(1 << 16, file), input.pid)
        };
        match result {
            Ok(()) => {}
            Err(LogError::NotStrace { line, text }) => {
                return Err(Error::Log {
                    path: name,
                    why: format!("line {line} is not strace output: `{}` (give a log written by strace -f -o FILE)", crate::human::escaped(&text)),
                })
            }
            Err(LogError::Io(e)) => return Err(Error::File { path: input.path.clone(), source: e }),
        }
    }
    let mut builder = TraceBuilder::default();
    let lost = reader.read_into(&mut builder)?;
    let time = reader.time_kind();
    let mut read = reader.take_read();
    for (pid, env) in std::mem::take(&mut read.environments) {
        builder.set_environment(pid, env);
    }
    if read.facts.calls == 0 {
        let name = paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ");
        return Err(Error::Log { path: name, why: "no system calls in it: is it the output of strace?".into() });
    }
    if read.facts.stacks {
        let sites = crate::stacks::logged::call_sites(&read.stacks);
        // Every call's stack is in the log: a sample each, a gap of one.
        builder.set_call_sites(sites, Sampling { first_gap: 1, max_gap: 1, samples: read.facts.calls, ..Default::default() });
    }
    read.facts.paths = inputs.iter().map(|i| i.path.display().to_string()).collect();
    let environment = read.environment.take().unwrap_or_default();
    let run = RunInfo {
        command: read.command.clone(),
        root_pids: read.root_pid.into_iter().filter(|p| *p != 0).collect(),
        backend: reader.backend().into(),
        filter: opts.filter.expr.clone(),
        started_at: read.started_at.unwrap_or(0.0),
        duration_ns: read.duration_ns,
        exit: read.exit,
        interrupted: false,
        readout_ns: started.elapsed().as_nanos() as u64,
        time,
        environment,
        log: Some(read.facts),
        ..Default::default()
    };
    let mut trace = builder.finish(run, lost);
    let complete: u64 =
        trace.syscalls.iter().flat_map(|s| &s.sites).filter(|s| trace.call_sites.get(s.site).is_some_and(|c| c.complete)).map(|s| s.calls).sum();
    if let Some(sampling) = &mut trace.sampling {
        sampling.complete = complete;
    }
    let findings = crate::diagnose::diagnose(&trace, opts.all);
    // A log has no process to pass the status of.
    Ok(Traced { trace, findings, status: 0 })
}

/// The files to read: each path, or for a path that does not exist, the
/// `-ff` set `PATH.PID` beside it.
fn inputs(paths: &[PathBuf]) -> Result<Vec<Input>> {
    let mut out = Vec::new();
    for path in paths {
        if path.as_os_str() == "-" || path.exists() {
            out.push(Input { path: path.clone(), pid: pid_suffix(path) });
            continue;
        }
        let set = ff_set(path);
        if set.is_empty() {
            return Err(Error::Log { path: path.display().to_string(), why: "no such file (nor a -ff set of it: PATH.PID)".into() });
        }
        out.extend(set);
    }
    Ok(out)
}

/// `-ff` writes `PATH.PID` per process.
fn ff_set(path: &Path) -> Vec<Input> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let Some(stem) = path.file_name().map(|n| n.to_string_lossy().into_owned()) else { return Vec::new() };
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut set: Vec<Input> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let pid = name.strip_prefix(&stem)?.strip_prefix('.')?.parse().ok()?;
            Some(Input { path: e.path(), pid: Some(pid) })
        })
        .collect();
    set.sort_by_key(|i| i.pid);
    set
}

/// `trace.1234` → 1234, for a file of a `-ff` set given by its name.
fn pid_suffix(path: &Path) -> Option<u32> {
    path.extension()?.to_str()?.parse().ok()
}

/// Opens a log, refusing what cannot be one with a line that says so.
fn open(path: &Path) -> Result<File> {
    let name = path.display().to_string();
    let meta = std::fs::metadata(path).map_err(|source| Error::File { path: path.to_path_buf(), source })?;
    if meta.is_dir() {
        return Err(Error::Log { path: name, why: "is a directory: give the log file (strace -o FILE)".into() });
    }
    let mut file = File::open(path).map_err(|source| Error::File { path: path.to_path_buf(), source })?;
    let mut head = [0u8; 4096];
    let n = file.read(&mut head).map_err(|source| Error::File { path: path.to_path_buf(), source })?;
    if n == 0 {
        return Err(Error::Log { path: name, why: "is empty: no strace output in it".into() });
    }
    if head[..n].contains(&0) {
        return Err(Error::Log { path: name, why: "is a binary file, not strace's text output".into() });
    }
    file.seek(SeekFrom::Start(0)).map_err(|source| Error::File { path: path.to_path_buf(), source })?;
    Ok(file)
}
