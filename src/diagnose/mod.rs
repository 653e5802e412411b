//! Diagnosis: rules that read a Trace and say which calls are avoidable,
//! why they happen and how to stop them. One rule per file, each a pure
//! function of the Trace (with the host and environment facts recorded in
//! it); what several rules read of it (a loader's lookups) is worked out
//! once, in Shared. Rules look at behaviour, never at program names.

mod finding;
pub mod host;
mod programs;
mod spawner;

mod busy_poll;
mod descriptor_sweep;
mod failing_calls;
mod flush_per_record;
mod identity_calls;
mod library_search;
mod memory_churn;
mod module_search;
mod path_search;
mod process_per_item;
mod repeated_path;
mod signal_dispositions;
mod signal_mask;
mod sync_per_op;
mod tiny_io;
mod tz_unset;
pub mod vdso_fallback;

pub use finding::{prove, shell_quote, Evidence, Finding, Fix, FixKind};

use crate::model::{CallSite, Environment, SiteShare, Trace};

pub struct Rule {
    pub id: &'static str,
    pub check: Check,
    /// Reads per-argument stats (paths, fds, clocks, timeouts), which a
    /// full argument table can leave incomplete.
    pub reads_arguments: bool,
}

/// How a rule reads a trace: by itself, or with what other rules read of
/// it too (worked out once per diagnosis, by the first that asks).
pub enum Check {
    Trace(fn(&Trace) -> Vec<Finding>),
    Shared(fn(&Trace, &Shared) -> Vec<Finding>),
}

impl Rule {
    pub fn check(&self, trace: &Trace, shared: &Shared) -> Vec<Finding> {
        match self.check {
            Check::Trace(check) => check(trace),
            Check::Shared(check) => check(trace, shared),
        }
    }
}

/// Every rule, in no particular order: findings are ranked by saving.
pub const RULES: &[Rule] = &[
    Rule { id: tz_unset::ID, check: Check::Trace(tz_unset::check), reads_arguments: true },
    Rule { id: signal_mask::ID, check: Check::Trace(signal_mask::check), reads_arguments: false },
    Rule { id: vdso_fallback::ID, check: Check::Trace(vdso_fallback::check), reads_arguments: true },
    Rule { id: repeated_path::ID, check: Check::Shared(repeated_path::check_shared), reads_arguments: true },
    Rule { id: tiny_io::ID, check: Check::Trace(tiny_io::check), reads_arguments: true },
    Rule { id: sync_per_op::ID, check: Check::Trace(sync_per_op::check), reads_arguments: false },
    Rule { id: busy_poll::ID, check: Check::Trace(busy_poll::check), reads_arguments: true },
    Rule { id: identity_calls::ID, check: Check::Trace(identity_calls::check), reads_arguments: false },
    Rule { id: failing_calls::ID, check: Check::Shared(failing_calls::check_shared), reads_arguments: true },
    Rule { id: memory_churn::ID, check: Check::Trace(memory_churn::check), reads_arguments: false },
    Rule { id: descriptor_sweep::ID, check: Check::Trace(descriptor_sweep::check), reads_arguments: false },
    Rule { id: signal_dispositions::ID, check: Check::Trace(signal_dispositions::check), reads_arguments: false },
    Rule { id: flush_per_record::ID, check: Check::Trace(flush_per_record::check), reads_arguments: true },
    Rule { id: library_search::ID, check: Check::Shared(library_search::check_shared), reads_arguments: true },
    Rule { id: module_search::ID, check: Check::Shared(module_search::check_shared), reads_arguments: true },
    Rule { id: path_search::ID, check: Check::Trace(path_search::check), reads_arguments: true },
    Rule { id: process_per_item::ID, check: Check::Trace(process_per_item::check), reads_arguments: false },
];

/// The rules whose findings may be missing when argument stats were lost.
pub fn rules_reading_arguments() -> Vec<&'static str> {
    RULES.iter().filter(|r| r.reads_arguments).map(|r| r.id).collect()
}

/// The findings of every rule, most saving first; small ones (a few calls,
/// well under 1% of the run) only when `all`.
pub fn diagnose(trace: &Trace, all: bool) -> Vec<Finding> {
    let raw = raw_findings(trace);
    let mut found: Vec<Finding> = programs::group(trace, raw).into_iter().filter(|f| all || !f.is_small()).collect();
    // Each removed call saves at least a syscall's round trip, which
    // sampled kernel time undercounts for the cheapest calls (getpid, a
    // 1-byte write: about half of it is entering and leaving the kernel).
    if let Some(each) = trace.run.syscall_ns {
        for f in &mut found {
            let least = f.evidence.calls * each;
            if least > f.saving_ns {
                f.measured_saving_ns = Some(f.saving_ns);
                f.saving_ns = least;
            }
        }
    }
    found.sort_by(|a, b| b.saving_ns.cmp(&a.saving_ns).then(b.evidence.calls.cmp(&a.evidence.calls)).then(a.id.cmp(&b.id)));
    found
}

/// Argument rows and processes from which the rules run on two threads:
/// a rule's pass over such a trace takes milliseconds (a build's), a
/// thread's start some tens of microseconds.
const TWO_THREADS_FROM: usize = 2_000;

/// Every rule's findings, in the rules' order.
fn raw_findings(trace: &Trace) -> Vec<Finding> {
    let shared = Shared::new(trace);
    if trace.arguments.len() + trace.processes.len() < TWO_THREADS_FROM {
        return RULES.iter().flat_map(|r| r.check(trace, &shared)).collect();
    }
    // Each thread takes the next rule not yet taken.
    let next = std::sync::atomic::AtomicUsize::new(0);
    let take = || {
        let mut done = Vec::new();
        while let Some(rule) = RULES.get(next.fetch_add(1, std::sync::atomic::Ordering::Relaxed)) {
            done.push((rule.id, rule.check(trace, &shared)));
        }
        done
    };
    // Without a second thread (a limit on them), this one takes them all.
    let mut done = std::thread::scope(|scope| {
        let other = std::thread::Builder::new().spawn_scoped(scope, take).ok();
        let mut done = take();
        if let Some(other) = other {
            done.extend(other.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)));
        }
        done
    });
    done.sort_by_key(|(id, _)| RULES.iter().position(|r| r.id == *id));
    done.into_iter().flat_map(|(_, found)| found).collect()
}

/// The environment process `pid` had at its exec (TZ, the knobs), where
/// the tracer saw it; else the one sysdiet gave the command.
fn environment_of(trace: &Trace, pid: Option<u32>) -> &Environment {
    pid.and_then(|p| trace.process(p)).and_then(|p| p.environment.as_ref()).unwrap_or(&trace.run.environment)
}

/// Output per item of work, not waste: a tool that prints a line for each
/// item it handles (du -a, git log, a dry run's file list) writes to its
/// standard output or error once per item, between at least two calls of
/// the item's own work, and full buffering would save a few percent; a
/// program that flushes every record makes the writes most of its calls.
/// Not when the environment turned buffering off (PYTHONUNBUFFERED,
/// stdbuf's _STDBUF_O/_STDBUF_E): that is a knob to undo.
fn output_per_item(trace: &Trace, a: &crate::model::ArgumentStats) -> bool {
    let crate::model::Argument::Fd { fd: fd @ (1 | 2) } = a.argument else { return false };
    if !(a.syscall.contains("write") || a.syscall.starts_with("send")) {
        return false;
    }
    let knobs = &environment_of(trace, Some(a.pid)).knobs;
    let forced = knobs.contains_key(if fd == 1 { "_STDBUF_O" } else { "_STDBUF_E" }) || python_unbuffered(trace, a).is_some();
    let calls: u64 = trace.process(a.pid).map_or(0, |p| p.syscalls.iter().map(|s| s.calls).sum());
    !forced && a.calls * 3 <= calls
}

/// A read that asked for more than `few` bytes and got at most that took
/// what its writer had sent: the pace is the writer's (a pipe from a
/// program writing lines), not the reader's.
fn paced_by_its_writer(a: &crate::model::ArgumentStats, few: u64) -> bool {
    let writing = a.syscall.contains("write") || a.syscall.starts_with("send");
    !writing && a.typical_request().is_some_and(|asked| asked > few)
}

/// Per process, its reads that came back short of what they asked for:
/// a relay (cat, tee, a pager) writes those bytes on as they come, so its
/// small writes are its writer's, and so is the fix.
fn relays(trace: &Trace) -> foldhash::HashMap<u32, u64> {
    let mut short: foldhash::HashMap<u32, u64> = foldhash::HashMap::default();
    for a in &trace.arguments {
        let got = a.typical_bytes().unwrap_or(u64::MAX);
        if paced_by_its_writer(a, got) {
            *short.entry(a.pid).or_default() += a.calls;
        }
    }
    short
}

/// The fix for writes that PYTHONUNBUFFERED (or `python -u`) made
/// unbuffered, when it applies to `a`'s process and writes: the fix, and
/// the `compare` option that proves it when the variable came from outside
/// the command (`--unset-env` cannot reach one a script exports).
fn python_unbuffered(trace: &Trace, a: &crate::model::ArgumentStats) -> Option<(Fix, Option<&'static str>)> {
    let set = environment_of(trace, Some(a.pid)).knobs.get("PYTHONUNBUFFERED").is_some_and(|v| !v.is_empty());
    if !set || !python_writes(trace, &a.sites) {
        return None;
    }
    Some(if trace.run.environment.knobs.contains_key("PYTHONUNBUFFERED") {
        (
            Fix::env("PYTHONUNBUFFERED is set: unset it (and drop python -u), and Python buffers its output again"),
            Some("--unset-env PYTHONUNBUFFERED"),
        )
    } else {
        (Fix::env("PYTHONUNBUFFERED is set inside the command (a script exports it): drop that, and Python buffers its output again"), None)
    })
}

/// A logger stamping each record with the pid, seen in one process.
struct PidPerRecord {
    getpid: u64,
    /// Its writes of any kind (RECORD_WRITES).
    writes: u64,
    /// CPython asked (its logging module: LogRecord.process).
    python: bool,
    /// Ruby asked (its Logger's default formatter: Process.pid).
    ruby: bool,
}

/// Writes that may carry log records.
const RECORD_WRITES: &[&str] = &["write", "writev", "pwrite64", "sendto", "sendmsg"];

/// A getpid for about every write, 1,000 or more, in process `pid` (glibc
/// stopped caching the pid in 2.25: each is a syscall).
fn pid_per_record(trace: &Trace, pid: u32) -> Option<PidPerRecord> {
    let p = trace.process(pid)?;
    let getpid = p.syscalls.iter().find(|s| s.name == "getpid")?;
    let writes: u64 = p.syscalls.iter().filter(|s| RECORD_WRITES.contains(&s.name.as_str())).map(|s| s.calls).sum();
    let n = getpid.calls;
    (n >= 1_000 && writes * 2 >= n && writes <= n * 2).then(|| PidPerRecord {
        getpid: n,
        writes,
        python: runs_python(trace, &getpid.sites),
        ruby: runs_ruby(trace, &getpid.sites),
    })
}

/// Who writes each record out at once, when the sampled sites say: the
/// fix that takes that out of the code. No buffering knob (stdbuf, setvbuf
/// from outside) stops any of them.
/// - A C program's fflush after each record (GNU tar's listing).
/// - A shell's own echo or printf (bash's, dash's, zsh's, busybox's): the
///   shell writes each one out at once (bash line-buffers its stdout
///   itself, after any stdbuf), so a loop of them is a write per line.
/// - Perl's autoflush ($| = 1): pp_print flushes after every print; a
///   full buffer is flushed from PerlIOBuf_write instead.
/// - Python's print(..., flush=True), or the script's own flush(): the
///   text layer's flush, which its line buffering never calls.
/// - Go's *os.File, which has no buffer: each Write (fmt.Fprintln,
///   fmt.Println, log's records) is a write(2), unless a bufio.Writer's
///   flush made it.
fn written_each_time(trace: &Trace, shares: &[SiteShare]) -> Option<&'static str> {
    if called_through(trace, shares, SHELL_OUTPUT) {
        Some(SHELL_OUTPUT_FIX)
    } else if called_through(trace, shares, &["fflush", "fflush_unlocked", "_IO_fflush"]) {
        Some(FFLUSH_FIX)
    } else if called_by(trace, shares, "Perl_PerlIO_flush", &["Perl_pp_print", "Perl_pp_prtf"]) {
        Some(PERL_AUTOFLUSH_FIX)
    } else if called_through(trace, shares, &["_io_TextIOWrapper_flush"]) {
        Some(PYTHON_FLUSH_FIX)
    } else if called_through(trace, shares, &["os.(*File).Write", "os.(*File).WriteString"])
        && !called_through(trace, shares, &["bufio.(*Writer).Flush"])
    {
        Some(GO_FILE_FIX)
    } else {
        None
    }
}

const SHELL_OUTPUT: &[&str] = &["echo_builtin", "printf_builtin", "echocmd", "printfcmd", "bin_print", "bin_echo", "echo_main", "printf_main"];

const SHELL_OUTPUT_FIX: &str = "the shell writes each echo or printf out at once, and no buffering knob changes that: make the \
     lines with one command (printf '%s\\n' \"${lines[@]}\", or seq, awk or paste instead of the loop), or collect them in a \
     variable and print it once";
const FFLUSH_FIX: &str = "the program calls fflush after each write: no buffering knob stops that; flush once per batch \
     of records or on a timer, or leave the stream to its buffer";
const PERL_AUTOFLUSH_FIX: &str = "the script turns autoflush on ($| = 1, or $fh->autoflush(1)), so Perl flushes after every \
     print, whatever the stream: turn it off ($| = 0) where a line need not be seen at once";
const PYTHON_FLUSH_FIX: &str = "the script flushes after each line (print(..., flush=True), or sys.stdout.flush()): no \
     buffering knob stops that; flush once per batch or on a timer, or leave the stream to its buffer";

const GO_FILE_FIX: &str = "Go's *os.File has no buffer: each Write to it (fmt.Fprintln, fmt.Println, a log record) is a \
     write(2), and no buffering knob changes that: wrap the file (or os.Stdout) once in a bufio.Writer (w := bufio.NewWriter(f)), write to \
     w, and w.Flush() before closing it or exiting";

/// The fix for writes of a record each from an interpreter's logger (a
/// getpid for every write, in CPython or Ruby): it flushes every record.
fn log_flush(trace: &Trace, a: &crate::model::ArgumentStats) -> Option<Fix> {
    let r = pid_per_record(trace, a.pid)?;
    if r.python {
        Some(Fix::code(
            "Python's logging handlers flush every record: put a logging.handlers.MemoryHandler(capacity, \
             flushLevel=logging.ERROR, target=handler) in front of the handler, and records are written in batches",
        ))
    } else if r.ruby {
        Some(Fix::code(
            "Ruby's Logger opens a file it is given by name with sync = true, a write per record: give it an IO you opened \
             (File.open(path, 'a'), sync false) and flush it on a timer or at exit",
        ))
    } else {
        None
    }
}

/// Whether calls may be Python's own output, which PYTHONUNBUFFERED
/// governs: made under CPython's API (a stripped interpreter still exports
/// `PyFile_WriteObject`, `_PyEval_EvalFrameDefault`), through its writer,
/// or with nothing to tell (no site, or a stack that never left the C
/// runtime). Code outside the C runtime with no names at all is not an
/// interpreter, which always exports its API: a stripped dash that
/// inherited the variable is not told to unset it, nor is a C program, nor
/// a stripped one whose libraries have names (sqlite3 and its libsqlite3).
fn python_writes(trace: &Trace, shares: &[SiteShare]) -> bool {
    let own = || sites_of(trace, shares).flat_map(|s| &s.frames).filter(|f| !f.in_c_runtime());
    own().next().is_none()
        || own().filter_map(|f| f.function.as_deref()).any(is_python_api)
        || called_through(
            trace,
            shares,
            &["_Py_write", "_io__Buffered_write", "_io_FileIO_write", "_io_FileIO_write_impl", "_bufferedwriter_raw_write"],
        )
}

/// Whether CPython made the calls: a frame in its C API, or in code of
/// the interpreter's own file (`libpython3.11.so`, or a `python3.11`
/// built without it), whose unexported functions have no names.
fn runs_python(trace: &Trace, shares: &[SiteShare]) -> bool {
    let interpreter = |module: &str| {
        let file = module.rsplit('/').next().unwrap_or(module);
        let rest = file.strip_prefix("lib").unwrap_or(file);
        rest.strip_prefix("python").is_some_and(|v| v.starts_with(|c: char| c.is_ascii_digit()))
    };
    sites_of(trace, shares).flat_map(|s| &s.frames).any(|f| f.function.as_deref().is_some_and(is_python_api) || interpreter(&f.module))
}

/// Whether Ruby made the calls: a frame in libruby (or in a ruby built
/// without it). Not by `rb_` names: C programs name red-black trees so.
fn runs_ruby(trace: &Trace, shares: &[SiteShare]) -> bool {
    let interpreter = |module: &str| {
        let file = module.rsplit('/').next().unwrap_or(module);
        file.strip_prefix("lib").unwrap_or(file).starts_with("ruby")
    };
    sites_of(trace, shares).flat_map(|s| &s.frames).any(|f| interpreter(&f.module))
}

/// CPython's C API: `PyFile_WriteObject`, `_PyEval_EvalFrameDefault`; not
/// `Pythagoras`.
fn is_python_api(name: &str) -> bool {
    let rest = name.strip_prefix("_Py").or_else(|| name.strip_prefix("Py"));
    rest.and_then(|r| r.chars().next()).is_some_and(|c| c == '_' || c.is_ascii_uppercase())
}

/// The call sites behind some shares.
fn sites_of<'a>(trace: &'a Trace, shares: &'a [SiteShare]) -> impl Iterator<Item = &'a CallSite> + 'a {
    shares.iter().filter_map(|s| trace.call_site(s))
}

/// Whether any frame of the sites behind `shares` is a function named one
/// of `names` (glibc's internal aliases `__GI_x`, `__x` included).
fn called_through(trace: &Trace, shares: &[SiteShare], names: &[&str]) -> bool {
    sites_of(trace, shares)
        .flat_map(|s| &s.frames)
        .filter_map(|f| f.function.as_deref())
        .any(|f| names.iter().any(|n| f.trim_start_matches("__GI_").trim_start_matches('_') == n.trim_start_matches('_')))
}

/// Whether a sampled site at `shares` has `callee` called straight from
/// one of `callers` (its next frame out).
fn called_by(trace: &Trace, shares: &[SiteShare], callee: &str, callers: &[&str]) -> bool {
    sites_of(trace, shares).any(|s| {
        s.frames.windows(2).any(|w| w[0].function.as_deref() == Some(callee) && w[1].function.as_deref().is_some_and(|f| callers.contains(&f)))
    })
}

/// What more than one rule reads of a trace, worked out once per
/// diagnosis by the first rule that asks (the others on the other thread
/// wait for it): on a build's trace each is milliseconds.
pub struct Shared<'a> {
    trace: &'a Trace,
    walks: std::sync::OnceLock<Vec<module_search::Walk<'a>>>,
    loader_lookups: std::sync::OnceLock<LoaderLookups<'a>>,
}

impl<'a> Shared<'a> {
    pub fn new(trace: &'a Trace) -> Shared<'a> {
        Shared { trace, walks: Default::default(), loader_lookups: Default::default() }
    }

    /// The module walks of runtimes' loaders (module-search's).
    fn walks(&self) -> &[module_search::Walk<'a>] {
        self.walks.get_or_init(|| module_search::walks(self.trace))
    }

    /// Per process, the RUNPATH directories its loader searched
    /// (library-search's).
    fn runpath(&self) -> &foldhash::HashSet<(u32, &'a str)> {
        &self.loader_lookups().runpath
    }

    fn loader_lookups(&self) -> &LoaderLookups<'a> {
        self.loader_lookups.get_or_init(|| LoaderLookups {
            trace: self.trace,
            walked: module_search::steps(self.walks()),
            runpath: library_search::runpath_dirs(self.trace),
        })
    }
}

/// The lookups a loader's search made, which library-search (LD_LIBRARY_PATH,
/// a RUNPATH, their failed lookups), path-search (PATH's candidates) and
/// module-search (a runtime's module walk) report: repeated-path and
/// failing-calls leave them.
struct LoaderLookups<'a> {
    trace: &'a Trace,
    walked: foldhash::HashSet<(u32, &'a str)>,
    /// Per process, the RUNPATH directories its loader searched.
    runpath: foldhash::HashSet<(u32, &'a str)>,
}

impl<'a> LoaderLookups<'a> {
    fn made(&self, a: &crate::model::ArgumentStats) -> bool {
        let crate::model::Argument::Path { path: Some(path), .. } = &a.argument else { return false };
        (a.errors > 0 && (library_search::searched(self.trace, a.pid, path, &self.runpath) || path_search::searched(self.trace, a.pid, path)))
            || self.walked.contains(&(a.pid, path.as_str()))
    }
}

/// Whether a path argument names one file each time it is asked: not a
/// relative name under a directory fd, or in a process that changes its
/// working directory (tar, find, rsync's receiver): those name other files
/// from one call to the next.
fn names_one_file(trace: &Trace, a: &crate::model::ArgumentStats) -> bool {
    let crate::model::Argument::Path { path: Some(path), dirfd, .. } = &a.argument else { return true };
    let moves = || trace.process(a.pid).is_some_and(|p| p.syscalls.iter().any(|s| (s.name == "chdir" || s.name == "fchdir") && s.calls > 0));
    path.starts_with('/') || (dirfd.is_none() && !moves())
}

/// Each process's successful closes of each fd: how many files were opened
/// on it, for the rules that tell a new file on a reused fd from the same
/// one asked again.
fn closes_by_fd(trace: &Trace) -> foldhash::HashMap<(u32, i64), u64> {
    let mut closes = foldhash::HashMap::default();
    for a in trace.arguments.iter().filter(|a| a.syscall == "close") {
        if let crate::model::Argument::Fd { fd } = a.argument {
            *closes.entry((a.pid, fd)).or_default() += a.calls - a.errors.min(a.calls);
        }
    }
    closes
}

/// Syscalls that look a path up without opening it.
const PATH_LOOKUPS: &[&str] = &["stat", "lstat", "newfstatat", "statx", "access", "faccessat", "faccessat2", "readlink", "readlinkat"];

/// Syscalls that open a path.
const PATH_OPENS: &[&str] = &["open", "openat", "openat2", "creat"];

#[cfg(test)]
pub(crate) mod testing {
    //! Traces built by hand for the rules' unit tests.
    use crate::model::*;

    pub fn trace(duration_ns: u64, syscalls: &[(&str, u64, u64)]) -> Trace {
        let mut t = Trace::default();
        t.run.duration_ns = duration_ns;
        t.run.command = vec!["./app".into()];
        for &(name, calls, ns) in syscalls {
            let nr = crate::linux::syscalls::by_name(name).map_or(0, |s| s.nr);
            t.syscalls.push(SyscallStats { calls, total_ns: ns, ..SyscallStats::new(nr) });
        }
        t.processes.push(Process { pid: 7, comm: "app".into(), syscalls: t.syscalls.clone(), ..Default::default() });
        t
    }

    pub fn argument<'a>(t: &'a mut Trace, syscall: &str, argument: Argument, calls: u64, ns: u64) -> &'a mut ArgumentStats {
        let nr = crate::linux::syscalls::by_name(syscall).map_or(0, |s| s.nr);
        t.arguments.push(ArgumentStats {
            pid: 7,
            syscall: syscall.into(),
            nr,
            argument,
            calls,
            errors: 0,
            total_ns: ns,
            requested: None,
            returned: None,
            sites: vec![],
        });
        t.arguments.last_mut().unwrap()
    }

    pub fn path(p: &str) -> Argument {
        Argument::Path { path: Some(p.into()), dirfd: None, null: false, cut: false, raw: None }
    }

    /// Gives the argument (or syscall) one call site made of `functions`,
    /// innermost first, the last one the program's own.
    pub fn site(t: &mut Trace, functions: &[&str]) -> Vec<SiteShare> {
        let frames: Vec<Frame> = functions
            .iter()
            .enumerate()
            .map(|(i, f)| Frame {
                function: Some(f.to_string()),
                module: if i + 1 == functions.len() { "/app".into() } else { "/usr/lib/x86_64-linux-gnu/libc.so.6".into() },
                ..Default::default()
            })
            .collect();
        t.call_sites.push(CallSite { responsible: Some(functions.len() - 1), own_frames: 1, frames, complete: true });
        vec![SiteShare { site: t.call_sites.len() - 1, calls: 1, total_ns: 0, samples: 1 }]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_have_unique_ids() {
        let mut ids: Vec<&str> = RULES.iter().map(|r| r.id).collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), RULES.len());
    }

    #[test]
    fn a_big_trace_is_diagnosed_on_two_threads_in_the_rules_order() {
        // Many processes of one program, each repeating a path, a failed
        // one, and a tty question: three rules' findings in each.
        let mut t = testing::trace(1_000_000_000, &[]);
        t.processes.clear();
        for pid in 1..=(TWO_THREADS_FROM as u32 / 3) {
            let rows = [("newfstatat", 500, 0), ("openat", 400, 400), ("ioctl", 300, 300)];
            let mut syscalls = Vec::new();
            for (name, calls, errors) in rows {
                let nr = crate::linux::syscalls::by_name(name).unwrap().nr;
                let mut s = crate::model::SyscallStats { calls, total_ns: calls * 2_000, ..crate::model::SyscallStats::new(nr) };
                if errors > 0 {
                    s.errnos.insert(if name == "ioctl" { "ENOTTY" } else { "ENOENT" }.into(), errors);
                }
                syscalls.push(s);
            }
            t.processes.push(crate::model::Process { pid, comm: "app".into(), syscalls, ..Default::default() });
            for (name, argument, calls) in [
                ("newfstatat", testing::path("/etc/app.conf"), 500),
                ("openat", testing::path("/etc/missing.conf"), 400),
                ("ioctl", crate::model::Argument::Fd { fd: 1 }, 300),
            ] {
                let a = testing::argument(&mut t, name, argument, calls, calls * 2_000);
                a.pid = pid;
                a.errors = if name == "newfstatat" { 0 } else { calls };
            }
        }
        assert!(t.arguments.len() + t.processes.len() >= TWO_THREADS_FROM);
        let one_thread: Vec<(String, String)> = RULES.iter().flat_map(|r| r.check(&t, &Shared::new(&t))).map(|f| (f.id, f.what)).collect();
        let two_threads: Vec<(String, String)> = raw_findings(&t).into_iter().map(|f| (f.id, f.what)).collect();
        assert!(one_thread.len() >= 3 * t.processes.len(), "{} findings", one_thread.len());
        assert_eq!(two_threads, one_thread);
    }

    #[test]
    fn a_quiet_trace_has_no_findings() {
        let t = testing::trace(1_000_000_000, &[("read", 10, 1000), ("write", 3, 300)]);
        assert!(diagnose(&t, true).is_empty());
    }

    #[test]
    fn glibc_aliases_match() {
        let mut t = testing::trace(1, &[]);
        let s = testing::site(&mut t, &["__GI___sigprocmask", "main"]);
        assert!(called_through(&t, &s, &["sigprocmask"]));
        assert!(!called_through(&t, &s, &["setcontext"]));
    }

    #[test]
    fn python_output_is_told_by_its_frames() {
        let mut t = testing::trace(1, &[]);
        // No site, or a stack that stays in libc: nothing says it is not Python.
        assert!(python_writes(&t, &[]));
        let libc_only = testing::site(&mut t, &["__GI___libc_write", "_IO_file_write"]);
        t.call_sites[libc_only[0].site].frames[1].module = "/usr/lib/x86_64-linux-gnu/libc.so.6".into();
        assert!(python_writes(&t, &libc_only));
        let python = testing::site(&mut t, &["write", "_PyEval_EvalFrameDefault"]);
        assert!(python_writes(&t, &python));
        let c = testing::site(&mut t, &["write", "main"]);
        assert!(!python_writes(&t, &c));
        // A stripped program with no names (dash's echo) is not an interpreter.
        let unnamed = testing::site(&mut t, &["write", "x"]);
        t.call_sites[unnamed[0].site].frames[1].function = None;
        assert!(!python_writes(&t, &unnamed));
    }
}
