//! The fake backend: a recorded Trace played back through the Tracer
//! trait, record by record, as a tracer would file it. The pipeline, the
//! rules and the reports run on it without root, BPF or a target.

use super::Tracer;
use crate::error::Result;
use crate::model::builder::{TaskRecord, TraceBuilder};
use crate::model::{Argument, Lost, SyscallStats, TimeKind, Trace};

/// A recorded Trace, played back. Call sites are not: they come from
/// stack samples, which a Trace keeps only as their result.
pub struct Replay {
    trace: Trace,
}

impl Replay {
    pub fn new(trace: Trace) -> Replay {
        Replay { trace }
    }
}

impl Tracer for Replay {
    fn backend(&self) -> &str {
        &self.trace.run.backend
    }

    fn time_kind(&self) -> TimeKind {
        self.trace.run.time
    }

    fn sample_rate(&self) -> (u32, u64) {
        self.trace.sampling.as_ref().map_or((1, 0), |s| (s.first_gap, s.interval_ns))
    }

    fn read_into(&mut self, out: &mut TraceBuilder) -> Result<Lost> {
        let t = &self.trace;
        for p in &t.processes {
            // A process recorded without its threads: its counts as one.
            let own = [crate::model::Thread { tid: p.pid, comm: p.comm.clone(), syscalls: p.syscalls.clone() }];
            let threads = if p.threads.is_empty() { &own[..] } else { &p.threads[..] };
            for thread in threads {
                for s in &thread.syscalls {
                    out.add_syscall(p.pid, thread.tid, SyscallStats { errnos: Default::default(), sites: Vec::new(), ..s.clone() });
                }
                let exit = if thread.tid == p.pid { p.exit } else { None };
                let task =
                    TaskRecord { tgid: p.pid, ppid: p.ppid, comm: thread.comm.clone(), exit, cgroup: p.cgroup, executable: p.executable.clone() };
                out.add_task(thread.tid, task);
            }
            for s in &p.syscalls {
                for (errno, &n) in &s.errnos {
                    out.add_errno(p.pid, s.nr, errno, n);
                }
            }
            if p.folded > 0 {
                out.set_folded(p.pid, p.folded);
            }
            if let Some(env) = &p.environment {
                out.set_environment(p.pid, env.clone());
            }
        }
        for a in &t.arguments {
            out.add_argument(crate::model::ArgumentStats { sites: Vec::new(), ..a.clone() });
        }
        for o in &t.one_shot {
            out.add_one_shot(o.nr, o.calls, o.errors, o.total_ns);
        }
        for a in &t.failed_once {
            out.add_failed_once(a.clone());
        }
        out.add_user_cpu(t.run.user_cpu_ns);
        Ok(t.lost.clone())
    }

    fn argument_of_sample(&self, _: u32, _: i64, _: u64) -> Option<Argument> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ArgumentStats, Exit};

    /// What a tracer of two processes, one with two threads, files.
    fn recorded() -> Trace {
        let mut b = TraceBuilder::default();
        let stats = |name: &str, calls, errors| {
            let nr = crate::linux::syscalls::by_name(name).unwrap().nr;
            SyscallStats { calls, errors, total_ns: calls * 100, min_ns: 90, max_ns: 200, ..SyscallStats::new(nr) }
        };
        b.add_syscall(10, 10, stats("openat", 5, 2));
        b.add_syscall(10, 11, stats("read", 7, 0));
        b.add_syscall(12, 12, stats("newfstatat", 3, 0));
        let nr_openat = crate::linux::syscalls::by_name("openat").unwrap().nr;
        b.add_errno(10, nr_openat, "ENOENT", 2);
        let task = |tgid, ppid, comm: &str, exit| TaskRecord { tgid, ppid, comm: comm.into(), exit, cgroup: 5, executable: Some("/bin/app".into()) };
        b.add_task(10, task(10, 1, "app", Some(Exit::Code { code: 3 })));
        b.add_task(11, task(10, 1, "worker", None));
        b.add_task(12, task(12, 10, "child", Some(Exit::Code { code: 0 })));
        b.add_argument(ArgumentStats {
            pid: 10,
            syscall: "openat".into(),
            nr: nr_openat,
            argument: Argument::Path { path: Some("/etc/localtime".into()), dirfd: None, null: false, cut: false, raw: None },
            calls: 5,
            errors: 2,
            total_ns: 500,
            requested: None,
            returned: None,
            sites: Vec::new(),
        });
        b.add_one_shot(crate::linux::syscalls::by_name("newfstatat").unwrap().nr, 2, 0, 200);
        b.add_failed_once(ArgumentStats {
            argument: Argument::Path { path: Some("/opt/lib/tls/libc.so.6".into()), dirfd: None, null: false, cut: false, raw: None },
            calls: 1,
            errors: 1,
            total_ns: 100,
            pid: 10,
            syscall: "openat".into(),
            nr: nr_openat,
            requested: None,
            returned: None,
            sites: Vec::new(),
        });
        b.add_user_cpu(1_000);
        b.set_folded(12, 4);
        let run = crate::model::RunInfo { backend: "bpf".into(), duration_ns: 1_000_000, ..Default::default() };
        b.finish(run, Lost { exit_records: 1, ..Default::default() })
    }

    #[test]
    fn a_trace_played_back_is_the_same_trace() {
        let original = recorded();
        assert_eq!(original.processes.len(), 2, "two processes recorded");
        let mut replay = Replay::new(original.clone());
        let mut b = TraceBuilder::default();
        let lost = replay.read_into(&mut b).unwrap();
        let run = crate::model::RunInfo { user_cpu_ns: 0, ..original.run.clone() };
        assert_eq!(b.finish(run, lost), original);
    }

    #[test]
    fn a_process_without_threads_plays_back_as_one() {
        let mut t = recorded();
        t.processes[1].threads.clear();
        let mut b = TraceBuilder::default();
        let lost = Replay::new(t.clone()).read_into(&mut b).unwrap();
        let played = b.finish(crate::model::RunInfo::default(), lost);
        assert_eq!(played.processes[1].syscalls, t.processes[1].syscalls);
        assert_eq!(played.total_calls(), t.total_calls());
    }
}
