//! A strace log read into the same records as a BPF trace: strace's text
//! (`-f`, `-ff`, `-t`/`-tt`/`-ttt`/`-r`, `-T`, `-y`, `-k`) line by line,
//! in bounded memory, into a TraceBuilder. What the log cannot tell (no
//! `-T`: no time; no `-f`: one process) is recorded, not guessed.

mod args;
mod keys;
mod line;

use std::collections::{HashMap, HashSet};
use std::io::BufRead;

use keys::{argument, string_array};
use line::{Body, Line, RawFrame, Return, Stamp};

use crate::backend::calls::{BrkState, Call, Calls, MaskState};
use crate::backend::filter::SyscallSet;
use crate::backend::Tracer;
use crate::linux::syscalls;
use crate::model::builder::{TaskRecord, TraceBuilder};
use crate::model::{Argument, Exit, LogFacts, Lost, TimeKind};

/// The pid of the lines that carry none, until the log names it.
const UNNAMED: u32 = 0;

/// A `-k` frame, owned.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LogFrame {
    pub module: String,
    pub symbol: Option<String>,
    /// `sym+0xOFF`: OFF.
    pub symbol_offset: u64,
    /// The offset in the file.
    pub offset: u64,
    /// `-kk`: the source file and line.
    pub source: Option<(String, u32)>,
}

/// What reading a log found besides the calls.
#[derive(Debug, Default)]
pub struct LogRead {
    pub facts: LogFacts,
    /// The distinct `-k` stacks, innermost frame first; calls index them.
    pub stacks: Vec<Vec<LogFrame>>,
    /// The first execve's argv: the command that was traced.
    pub command: Vec<String>,
    pub root_pid: Option<u32>,
    pub exit: Option<Exit>,
    /// From the first line's time to the last call's end.
    pub duration_ns: u64,
    /// Seconds since the epoch at the first line (`-ttt` only).
    pub started_at: Option<f64>,
    /// `TZ` and the knobs rules read, from execve's environment (`-v`).
    pub environment: Option<crate::model::Environment>,
    /// Each process's, by pid (its last execve with `-v`).
    pub environments: HashMap<u32, crate::model::Environment>,
}

/// Why a log cannot be read.
#[derive(Debug)]
pub enum LogError {
    /// The first line with text is not strace's.
    NotStrace {
        line: u64,
        text: String,
    },
    Io(std::io::Error),
}

#[derive(Debug, Default)]
pub(super) struct Task {
    /// The call begun on an `<unfinished ...>` line: name, its arguments so far.
    pending: Option<(String, String)>,
    pending_frames: Vec<LogFrame>,
    parent: Option<u32>,
    thread_of_parent: bool,
    comm: String,
    exit: Option<Exit>,
    /// rt_sigprocmask: what the mask is known to be.
    mask: MaskState,
    brk: BrkState,
}

/// A finished call waiting for the `-k` frames printed under it.
struct Waiting {
    call: Call,
    frames: Vec<LogFrame>,
}

#[derive(Default)]
pub struct LogReader {
    calls: Calls,
    tasks: HashMap<u32, Task>,
    names: HashMap<String, u32>,
    stacks: Vec<Vec<LogFrame>>,
    stack_index: HashMap<Vec<LogFrame>, usize>,
    waiting: Option<Waiting>,
    /// Frames under an `<unfinished ...>` line go with that call.
    frames_to_pending: Option<u32>,
    out: LogRead,
    /// The pid of unprefixed lines in this file (`-ff`: from its name).
    file_pid: Option<u32>,
    clock: Clock,
    next_unknown_nr: u32,
    children: HashMap<u32, u32>,
    line_no: u64,
    seen_strace: bool,
    filter: SyscallSet,
    /// The pid of the last line that had one.
    last_pid: u32,
    /// The first part of a line that strace's message cut in two.
    carry: Option<String>,
    /// Processes strace said it attached to after unprefixed lines began:
    /// new tasks, whose prefixed lines can come before their fork returns.
    attached: HashSet<u32>,
}

#[derive(Default)]
struct Clock {
    first: Option<f64>,
    last: f64,
    /// Added to times of day after midnight passed.
    day_offset: f64,
}

impl LogReader {
    /// A reader that counts only the calls in `filter` (`-e trace=...`).
    pub fn new(filter: SyscallSet) -> LogReader {
        LogReader { filter, ..Default::default() }
    }

    /// Reads one file (or stdin) of the log. `file_pid`: the pid a `-ff`
    /// file's name gives its unprefixed lines.
    pub fn read(&mut self, input: impl BufRead, file_pid: Option<u32>) -> Result<(), LogError> {
        self.file_pid = file_pid;
        self.line_no = 0;
        self.seen_strace = false;
        self.out.facts.files += 1;
        let mut input = input;
        let mut buf = Vec::with_capacity(4096);
        loop {
            buf.clear();
            let n = input.read_until(b'\n', &mut buf).map_err(LogError::Io)?;
            if n == 0 {
                break;
            }
            self.line_no += 1;
            let complete = buf.last() == Some(&b'\n');
            let text = String::from_utf8_lossy(trim_newline(&buf));
            // On stderr, strace's own `strace: Process N attached` can land
            // in the middle of a call's line; the call goes on below it.
            let text = match (self.carry.take(), text.find("strace: Process ")) {
                // (A line is not longer than this; a log that says
                // otherwise is not kept in memory.)
                (carry, Some(at)) if at > 0 => {
                    self.attaching(&text[at..]);
                    let carry = format!("{}{}", carry.unwrap_or_default(), &text[..at]);
                    self.carry = (carry.len() < 1 << 20).then_some(carry);
                    continue;
                }
                (Some(carry), _) => std::borrow::Cow::Owned(format!("{carry}{text}")),
                (None, _) => text,
            };
            if !self.line(&text) {
                if !self.seen_strace {
                    return Err(LogError::NotStrace { line: self.line_no, text: text.chars().take(80).collect() });
                }
                if !complete {
                    self.out.facts.incomplete = true;
                } else {
                    self.out.facts.unparsed += 1;
                    self.out.facts.first_unparsed.get_or_insert(self.line_no);
                }
            }
            if !complete {
                self.out.facts.incomplete = true;
            }
        }
        self.flush_waiting();
        self.out.facts.lines += self.line_no;
        Ok(())
    }

    /// One line; false when it is not strace's (empty lines are).
    fn line(&mut self, text: &str) -> bool {
        if text.trim().is_empty() {
            return true;
        }
        let Some(line) = line::parse(text) else { return false };
        self.seen_strace = true;
        if let Body::Frame(f) = &line.body {
            self.frame(f);
            return true;
        }
        self.flush_waiting();
        let pid = self.pid_of(line.pid);
        self.stamp(&line);
        match line.body {
            Body::Call { name, args, ret } => self.call(pid, name, args, ret),
            Body::Unfinished { name, args } => {
                self.out.facts.unfinished += 1;
                let t = self.tasks.entry(pid).or_default();
                t.pending = Some((name.to_string(), args.to_string()));
                t.pending_frames.clear();
                self.frames_to_pending = Some(pid);
            }
            Body::Resumed { name, args, ret } => {
                let t = self.tasks.entry(pid).or_default();
                let (begun, frames) = match t.pending.take() {
                    Some((n, a)) if n == name => (a, std::mem::take(&mut t.pending_frames)),
                    _ => (String::new(), Vec::new()),
                };
                let whole = if begun.is_empty() { args.to_string() } else { format!("{begun} {args}") };
                self.call(pid, name, &whole, ret);
                if let Some(w) = &mut self.waiting {
                    w.frames = frames;
                }
            }
            Body::Exited { code } => self.exited(pid, Exit::Code { code }),
            Body::Killed { signal, core_dumped } => {
                let signal = args::signal_number(signal).unwrap_or(0) as i32;
                self.exited(pid, Exit::Signal { signal, core_dumped })
            }
            Body::Signal => self.out.facts.signals += 1,
            Body::Message(m) => {
                self.attaching(m);
                if m.starts_with("strace: ") && self.out.facts.messages.len() < 5 {
                    self.out.facts.messages.push(m.to_string());
                }
            }
            Body::Frame(_) => unreachable!(),
        }
        true
    }

    /// The pid a line is of: its prefix, the file's, or the only process
    /// so far (strace prefixes lines only once there are two).
    fn pid_of(&mut self, prefix: Option<u32>) -> u32 {
        let Some(pid) = prefix else {
            if let Some(pid) = self.file_pid {
                return pid;
            }
            // Back to one process after others ended: the one still live.
            if self.out.facts.follow_forks {
                let mut live = self.tasks.iter().filter(|(_, t)| t.exit.is_none()).map(|(pid, _)| *pid);
                if let (Some(only), None) = (live.next(), live.next()) {
                    return only;
                }
                return self.last_pid;
            }
            return UNNAMED;
        };
        self.last_pid = pid;
        self.out.facts.follow_forks = true;
        // The first prefixed pid that is no known child (nor a task strace
        // attached to since) names the unprefixed lines before it.
        if !self.tasks.contains_key(&pid)
            && !self.children.contains_key(&pid)
            && !self.attached.contains(&pid)
            && self.tasks.contains_key(&UNNAMED)
            && self.file_pid.is_none()
        {
            self.rename(UNNAMED, pid);
        }
        pid
    }

    /// `strace: Process N attached` once unprefixed lines have begun: N is
    /// a new task (with -p, the message for the traced process comes
    /// before any of its lines).
    fn attaching(&mut self, message: &str) {
        let pid = message.strip_prefix("strace: Process ").and_then(|r| r.split(' ').next()).and_then(|n| n.parse().ok());
        if let Some(pid) = pid.filter(|_| self.tasks.contains_key(&UNNAMED)) {
            self.attached.insert(pid);
        }
    }

    fn rename(&mut self, from: u32, to: u32) {
        if let Some(t) = self.tasks.remove(&from) {
            self.tasks.insert(to, t);
        }
        self.calls.rename_thread(from, to);
        for parent in self.children.values_mut().chain(self.tasks.values_mut().filter_map(|t| t.parent.as_mut())) {
            if *parent == from {
                *parent = to;
            }
        }
        if self.out.root_pid == Some(from) {
            self.out.root_pid = Some(to);
        }
        if let Some(env) = self.out.environments.remove(&from) {
            self.out.environments.insert(to, env);
        }
    }

    fn stamp(&mut self, line: &Line) {
        let Some(stamp) = line.time else { return };
        self.out.facts.timestamps = true;
        let t = match stamp {
            Stamp::Epoch(t) => {
                self.out.started_at.get_or_insert(t);
                t
            }
            Stamp::Relative(d) => self.clock.last + d,
            Stamp::OfDay(t) => {
                if t + self.clock.day_offset + 43_200.0 < self.clock.last {
                    self.clock.day_offset += 86_400.0;
                }
                t + self.clock.day_offset
            }
        };
        self.clock.first.get_or_insert(t);
        self.clock.last = self.clock.last.max(t);
        // A whole line is stamped at the call's entry, its -T time after;
        // a resumed one at its return, -T counting from the entry before.
        let end = match &line.body {
            Body::Call { ret, .. } => Some(t + ret.duration_ns.unwrap_or(0) as f64 / 1e9),
            Body::Resumed { .. } => Some(t),
            _ => None,
        };
        if let Some(end) = end {
            let first = self.clock.first.unwrap_or(t);
            self.out.duration_ns = self.out.duration_ns.max(((end - first) * 1e9).round() as u64);
        }
    }

    fn frame(&mut self, f: &RawFrame) {
        self.out.facts.stacks = true;
        let frame = LogFrame {
            module: f.module.to_string(),
            symbol: f.symbol.map(str::to_string),
            symbol_offset: f.symbol_offset,
            offset: f.offset,
            source: f.source.map(|(file, line)| (file.to_string(), line)),
        };
        if let Some(w) = &mut self.waiting {
            w.frames.push(frame);
        } else if let Some(pid) = self.frames_to_pending {
            self.tasks.entry(pid).or_default().pending_frames.push(frame);
        }
    }

    /// Counts the call that waited for its frames, with its stack.
    fn flush_waiting(&mut self) {
        self.frames_to_pending = None;
        let Some(Waiting { mut call, frames }) = self.waiting.take() else { return };
        if !frames.is_empty() {
            let next = self.stacks.len();
            let id = *self.stack_index.entry(frames.clone()).or_insert(next);
            if id == next {
                self.stacks.push(frames);
            }
            call.site = Some(id);
        }
        self.calls.add(call);
    }

    fn nr_of(&mut self, name: &str) -> u32 {
        if let Some(&nr) = self.names.get(name) {
            return nr;
        }
        let nr = match syscalls::by_name(name) {
            Some(s) => s.nr,
            // `syscall_0x1c3`: a number strace has no name for.
            None => name
                .strip_prefix("syscall_0x")
                .and_then(|h| u32::from_str_radix(h, 16).ok())
                .or_else(|| name.strip_prefix("syscall_").and_then(|d| d.parse().ok()))
                .unwrap_or_else(|| {
                    self.next_unknown_nr += 1;
                    100_000 + self.next_unknown_nr
                }),
        };
        self.names.insert(name.to_string(), nr);
        nr
    }

    fn call(&mut self, pid: u32, name: &str, args_text: &str, ret: Return) {
        self.out.facts.calls += 1;
        if ret.duration_ns.is_some() {
            self.out.facts.durations = true;
        }
        let nr = self.nr_of(name);
        let errno = ret.errno.map(|e| match e.parse::<u32>() {
            Ok(n) => crate::linux::errno::name(n),
            Err(_) => e.to_string(),
        });
        let args = args::split(args_text);
        let spec = syscalls::by_nr(nr).filter(|s| s.name == name);
        let mut call = Call { tid: pid, nr, errno, ns: ret.duration_ns.unwrap_or(0), ..Default::default() };
        let counted = self.filter.expr.is_none() || self.filter.contains(nr);
        let task = self.tasks.entry(pid).or_default();
        task.mask.seq += 1;
        if self.out.root_pid.is_none() {
            self.out.root_pid = Some(pid);
        }
        if let Some(spec) = spec {
            call.argument = argument(spec.arg, &args, ret, task, &mut call);
        }
        match name {
            "execve" | "execveat" if ret.value == Some(0) => {
                let path = args.get(usize::from(name == "execveat")).and_then(|a| args::string(a)).map(|(p, _)| p);
                if let Some(p) = &path {
                    let base = p.rsplit(|c| *c == b'/').next().unwrap_or(p);
                    task.comm = String::from_utf8_lossy(&base[..base.len().min(15)]).into_owned();
                }
                let argv_at = if name == "execve" { 1 } else { 2 };
                if self.out.command.is_empty() && Some(pid) == self.out.root_pid {
                    let mut argv = string_array(args.get(argv_at).copied().unwrap_or(""));
                    // The path is printed whole; argv strings are cut at -s.
                    if let (Some(first), Some(p)) = (argv.first_mut(), &path) {
                        if first.ends_with("...") {
                            *first = String::from_utf8_lossy(p).into_owned();
                        }
                    }
                    self.out.command = argv;
                }
                if let Some(env) = args.get(argv_at + 1).filter(|e| e.starts_with('[')) {
                    self.out.facts.environment = true;
                    // This process's own, for the rules; the first, for the run.
                    let env = crate::target::environment_of_block(string_array(env).join("\0").as_bytes());
                    self.out.environment.get_or_insert_with(|| env.clone());
                    self.out.environments.insert(pid, env);
                }
            }
            "rt_sigreturn" => {
                // `{mask=[...]}`: the mask restored.
                let restored = args.first().and_then(|a| a.strip_prefix("{mask=")).and_then(|a| args::sigset(a.trim_end_matches('}')));
                if restored.is_some() {
                    task.mask.mask = restored;
                }
            }
            "clone" | "clone3" | "fork" | "vfork" => {
                if let Some(child) = ret.value.filter(|v| *v > 0) {
                    let child = child as u32;
                    let thread = args_text.contains("CLONE_THREAD");
                    let comm = task.comm.clone();
                    self.children.insert(child, pid);
                    let c = self.tasks.entry(child).or_default();
                    c.parent = Some(pid);
                    c.thread_of_parent = thread;
                    if c.comm.is_empty() {
                        c.comm = comm;
                    }
                }
            }
            _ => {}
        }
        if counted {
            self.waiting = Some(Waiting { call, frames: Vec::new() });
        }
    }

    fn exited(&mut self, pid: u32, exit: Exit) {
        let t = self.tasks.entry(pid).or_default();
        t.exit = Some(exit);
        // A call that never returned (exit_group, a thread's futex while
        // the process ends) was made: count it.
        if let Some((name, _)) = t.pending.take() {
            self.out.facts.unfinished = self.out.facts.unfinished.saturating_sub(1);
            self.count_unfinished(pid, &name);
        }
        if Some(pid) == self.out.root_pid {
            self.out.exit = Some(exit);
        }
    }

    /// A call begun and never ended, counted as made (if `-e` keeps it).
    fn count_unfinished(&mut self, tid: u32, name: &str) {
        let nr = self.nr_of(name);
        if self.filter.expr.is_none() || self.filter.contains(nr) {
            self.calls.add(Call { tid, nr, ..Default::default() });
        }
    }

    /// The records, into `out`; the stacks and facts, returned.
    pub fn finish(mut self, out: &mut TraceBuilder) -> LogRead {
        self.read_out(out);
        self.out
    }

    /// The records, into `out`; the stacks and facts kept for `finish` or
    /// `take_read`.
    fn read_out(&mut self, out: &mut TraceBuilder) {
        self.flush_waiting();
        // Calls begun and never ended, with no exit after them: the log
        // was cut (or strace detached).
        let pending: Vec<(u32, String)> = self.tasks.iter_mut().filter_map(|(tid, t)| Some((*tid, t.pending.take()?.0))).collect();
        let cut = pending.len() as u64;
        for (tid, name) in pending {
            self.count_unfinished(tid, &name);
        }
        if cut > 0 {
            self.out.facts.incomplete = true;
            self.out.facts.unfinished = cut;
        }
        self.out.facts.ends_before_exit = self.out.root_pid.is_some() && self.out.exit.is_none();
        let tgid = |tid: u32| -> u32 {
            let mut t = tid;
            // Threads' parents are threads of the same process; bounded
            // against a cycle a broken log could make.
            for _ in 0..64 {
                match self.tasks.get(&t) {
                    Some(task) if task.thread_of_parent => t = task.parent.unwrap_or(t),
                    _ => break,
                }
            }
            t
        };
        let records: Vec<(u32, TaskRecord)> = self
            .tasks
            .iter()
            .map(|(&tid, t)| {
                let pid = tgid(tid);
                let ppid = t.parent.map_or(0, &tgid);
                let comm = if t.comm.is_empty() { self.tasks.get(&pid).map(|p| p.comm.clone()).unwrap_or_default() } else { t.comm.clone() };
                (tid, TaskRecord { tgid: pid, ppid, comm, exit: t.exit, cgroup: 0, executable: None })
            })
            .collect();
        let calls = std::mem::take(&mut self.calls);
        self.out.facts.keys_full = calls.keys_full;
        calls.finish(tgid, records, out);
        self.out.stacks = std::mem::take(&mut self.stacks);
    }

    /// What reading found besides the calls (after `read_into`).
    pub fn take_read(&mut self) -> LogRead {
        std::mem::take(&mut self.out)
    }
}

/// The backend's name, as a run document says it.
pub const NAME: &str = "strace log";

impl Tracer for LogReader {
    fn backend(&self) -> &str {
        NAME
    }

    fn time_kind(&self) -> TimeKind {
        if self.out.facts.durations {
            TimeKind::Wall
        } else {
            TimeKind::Unmeasured
        }
    }

    /// Every call's stack is in the log (`-k`): a sample each.
    fn sample_rate(&self) -> (u32, u64) {
        (1, 1)
    }

    fn read_into(&mut self, out: &mut TraceBuilder) -> crate::error::Result<Lost> {
        self.read_out(out);
        Ok(Lost::default())
    }

    fn argument_of_sample(&self, _: u32, _: i64, _: u64) -> Option<Argument> {
        None
    }
}

fn trim_newline(b: &[u8]) -> &[u8] {
    let b = b.strip_suffix(b"\n").unwrap_or(b);
    b.strip_suffix(b"\r").unwrap_or(b)
}

#[cfg(test)]
mod tests;
