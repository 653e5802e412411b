//! busy-poll: poll/ppoll/select/epoll_wait with a zero timeout at a high
//! rate (asking "anything yet?" in a loop instead of waiting), and
//! sched_yield spins. Each burns a syscall and a CPU for nothing. An
//! event loop that looks once more without waiting after each wake
//! (libuv, asyncio: about one zero-timeout call per waiting one) is not
//! spinning.

use foldhash::HashMap;

use super::{called_through, runs_python, sites_of, Evidence, Finding, Fix};
use crate::human::thousands;
use crate::model::{Argument, Timeout, Trace};

pub const ID: &str = "busy-poll";

/// Zero-timeout calls per waiting one above which a loop spins: an event
/// loop's look before it waits makes about one.
const SPIN_RATIO: u64 = 4;

/// select, pselect6 and ppoll write the time left back, so at their exit a
/// zero timeout and one that ran out look alike (`RanOut`). Made this often
/// (calls a second, over the run), they cannot have waited: 10,000 a
/// second leaves 100 µs a call at most, beyond any timer a loop means.
const NO_WAIT_RATE: u64 = 10_000;

/// sched_yield calls of a process below which they are a lock's back-off
/// (V8's worker threads yield a few times a run, node's loop idle), not a
/// thread spinning on another, which yields thousands of times a second.
const MIN_YIELDS: u64 = super::finding::MIN_CALLS;

/// libuv's loop, which polls without waiting while callbacks are queued
/// for its next turn.
const LIBUV_LOOP: &[&str] = &["uv__io_poll", "uv_run"];

/// An event loop that polls without waiting spins because its program
/// keeps queueing work for the next turn, one item at a time: the cure is
/// in the program, not in the loop's timeout.
fn event_loop_fix(trace: &Trace, a: &crate::model::ArgumentStats) -> Option<(&'static str, Fix)> {
    // Debian's node links libuv, whose uv__io_poll is not exported: its
    // file tells it then.
    let in_libuv =
        || sites_of(trace, &a.sites).flat_map(|s| &s.frames).any(|f| f.module.rsplit('/').next().is_some_and(|m| m.starts_with("libuv.so")));
    if called_through(trace, &a.sites, LIBUV_LOOP) || in_libuv() {
        return Some((
            "libuv's loop",
            Fix::code(
                "libuv does not wait while callbacks are queued for the next turn (setImmediate, idle or pending handles): \
                 do a batch of work per callback instead of yielding with setImmediate per item",
            ),
        ));
    }
    runs_python(trace, &a.sites).then(|| {
        (
            "the interpreter's event loop",
            Fix::code(
                "asyncio does not wait while callbacks are ready: a task that awaits asyncio.sleep(0) per item, or a chain of \
                 call_soon, keeps it polling; do a batch of items per turn",
            ),
        )
    })
}

pub fn check(trace: &Trace) -> Vec<Finding> {
    let mut out = Vec::new();
    // Per process, its polls that waited (a timeout, or none).
    let mut waited: HashMap<u32, u64> = HashMap::default();
    for a in &trace.arguments {
        if matches!(a.argument, Argument::Timeout { timeout: Timeout::Finite | Timeout::None }) {
            *waited.entry(a.pid).or_default() += a.calls;
        }
    }
    let run_s = trace.run.duration_ns as f64 / 1e9;
    for a in &trace.arguments {
        let zero = a.argument == (Argument::Timeout { timeout: Timeout::Zero });
        let ran_out_at_once = a.argument == (Argument::Timeout { timeout: Timeout::RanOut }) && a.calls as f64 >= NO_WAIT_RATE as f64 * run_s;
        if !(zero || ran_out_at_once) || a.calls < 2 {
            continue;
        }
        if a.calls < SPIN_RATIO * waited.get(&a.pid).copied().unwrap_or(0) {
            continue;
        }
        let event_loop = event_loop_fix(trace, a);
        out.push(Finding {
            id: ID.into(),
            what: format!("{} × {}(timeout 0)", thousands(a.calls), a.syscall),
            pid: Some(a.pid),
            evidence: Evidence::new(trace, &a.syscall, a.calls, a.total_ns),
            sites: a.sites.clone(),
            saving_ns: a.total_ns,
            why: match &event_loop {
                Some((who, _)) => format!(
                    "{} with a zero timeout returns at once: {who} asks whether anything is ready without waiting, turn after turn, \
                     because more work is always queued for the next turn",
                    a.syscall
                ),
                None => format!(
                    "{} with a zero timeout returns at once: called in a loop it spins, asking whether anything is ready instead of waiting for it",
                    a.syscall
                ),
            },
            fixes: match event_loop {
                Some((_, fix)) => vec![fix],
                None => vec![
                    Fix::code("wait with a timeout (or -1) and let the kernel wake the thread when an fd is ready"),
                    Fix::code("if a loop must also do other work, wait until that work's deadline instead of 0"),
                ],
            },
            ..Default::default()
        });
    }
    for p in &trace.processes {
        let Some(s) = p.syscalls.iter().find(|s| s.name == "sched_yield") else { continue };
        if s.calls < MIN_YIELDS {
            continue;
        }
        out.push(Finding {
            id: ID.into(),
            what: format!("{} × sched_yield", thousands(s.calls)),
            pid: Some(p.pid),
            evidence: Evidence::new(trace, "sched_yield", s.calls, s.total_ns),
            sites: s.sites.clone(),
            saving_ns: s.total_ns,
            why: "sched_yield in a loop spins: it waits for another thread by burning a CPU and a syscall per turn".into(),
            fixes: vec![Fix::code("block on what is awaited (a futex, a condition variable, a pipe) instead of yielding in a loop")],
            ..Default::default()
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::testing::*;

    #[test]
    fn timeouts_that_ran_out_too_often_to_have_waited_are_zero() {
        // Python's select.select([], [], [], 0): select writes 0 back.
        let mut t = trace(130_000_000, &[("select", 50_000, 40_000_000)]);
        argument(&mut t, "select", Argument::Timeout { timeout: Timeout::RanOut }, 50_000, 40_000_000);
        let f = check(&t);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].what, "50,000 × select(timeout 0)");
        // A loop whose 10 ms timeouts run out: 100 a second.
        let mut t = trace(1_000_000_000, &[("select", 100, 1_000)]);
        argument(&mut t, "select", Argument::Timeout { timeout: Timeout::RanOut }, 100, 1_000);
        assert!(check(&t).is_empty());
    }

    #[test]
    fn zero_timeout_polls_and_yield_spins() {
        let mut t = trace(1_000_000_000, &[("poll", 50_000, 50_000_000), ("sched_yield", 9_000, 1_000_000)]);
        argument(&mut t, "poll", Argument::Timeout { timeout: Timeout::Zero }, 50_000, 50_000_000);
        let f = check(&t);
        assert_eq!(f.len(), 2);
        assert_eq!(f[0].what, "50,000 × poll(timeout 0)");
        assert_eq!(f[1].what, "9,000 × sched_yield");
        // node under sysdiet, a run of 100 timers: V8's threads yielded 9
        // times. A back-off, not a spin.
        let t = trace(1_100_000_000, &[("sched_yield", 9, 10_000)]);
        assert!(check(&t).is_empty());
    }

    #[test]
    fn an_event_loop_looking_once_more_before_it_waits_is_not_spinning() {
        // node's libuv with a 10 ms timer: 591 looks, 502 waits.
        let mut t = trace(1_000_000_000, &[("epoll_pwait", 1_093, 5_000_000)]);
        argument(&mut t, "epoll_pwait", Argument::Timeout { timeout: Timeout::Zero }, 591, 500_000);
        argument(&mut t, "epoll_pwait", Argument::Timeout { timeout: Timeout::Finite }, 502, 4_500_000);
        assert!(check(&t).is_empty());
        t.arguments[0].calls = 2_008;
        assert_eq!(check(&t).len(), 1, "four looks per wait: a spin");
    }

    #[test]
    fn an_event_loop_spinning_is_told_to_batch_its_work() {
        let spin = |functions: &[&str]| {
            let mut t = trace(1_000_000_000, &[("epoll_pwait", 20_000, 5_000_000)]);
            let s = site(&mut t, functions);
            argument(&mut t, "epoll_pwait", Argument::Timeout { timeout: Timeout::Zero }, 20_000, 5_000_000).sites = s;
            check(&t).remove(0)
        };
        let f = spin(&["epoll_pwait", "uv__io_poll", "uv_run", "node_main"]);
        assert!(f.fixes[0].text.contains("setImmediate"), "{:?}", f.fixes);
        assert!(f.why.contains("libuv"), "{}", f.why);
        // Debian's node: libuv's own file, its internals unnamed.
        let mut t = trace(1_000_000_000, &[("epoll_pwait", 20_000, 5_000_000)]);
        let s = site(&mut t, &["epoll_pwait", "x", "node_main"]);
        t.call_sites[0].frames[1] =
            crate::model::Frame { module: "/usr/lib/x86_64-linux-gnu/libuv.so.1".into(), address: 0x1234, ..Default::default() };
        argument(&mut t, "epoll_pwait", Argument::Timeout { timeout: Timeout::Zero }, 20_000, 5_000_000).sites = s;
        assert!(check(&t)[0].fixes[0].text.contains("setImmediate"));
        let f = spin(&["epoll_wait", "select_epoll_poll", "_PyEval_EvalFrameDefault"]);
        assert!(f.fixes[0].text.contains("asyncio.sleep(0)"), "{:?}", f.fixes);
        // A C program's own loop: wait with a timeout.
        let f = spin(&["epoll_wait", "main_loop"]);
        assert!(f.fixes[0].text.starts_with("wait with a timeout"), "{:?}", f.fixes);
    }

    #[test]
    fn waiting_polls_are_fine() {
        let mut t = trace(1_000_000_000, &[("epoll_wait", 50_000, 50_000_000)]);
        argument(&mut t, "epoll_wait", Argument::Timeout { timeout: Timeout::Finite }, 40_000, 40_000_000);
        argument(&mut t, "epoll_wait", Argument::Timeout { timeout: Timeout::None }, 10_000, 10_000_000);
        assert!(check(&t).is_empty());
    }
}
