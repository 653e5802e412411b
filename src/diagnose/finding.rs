//! What a rule reports: the calls it found, what they cost, why they
//! happen, how to stop them, and the command that proves the fix.

use serde::{Deserialize, Serialize};

use crate::model::{SiteShare, TimeKind, Trace};

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Finding {
    /// The rule's stable id (`tz-unset`); JSON consumers key on it.
    pub id: String,
    /// What was seen, in one line: `1,000,000 × newfstatat("/etc/localtime")`.
    pub what: String,
    /// The process, when the finding is about one.
    pub pid: Option<u32>,
    pub evidence: Evidence,
    /// Who made the calls (indexes into the Trace's call sites).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sites: Vec<SiteShare>,
    /// Time the fix would save, estimated: the kernel time of the calls it
    /// removes, as the trace measured it (sampled CPU, or wall with --latency) (user-space work around them comes on
    /// top; tracing makes each call slower).
    pub saving_ns: u64,
    pub why: String,
    pub fixes: Vec<Fix>,
    /// What the fix changes besides speed, when it changes something.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tradeoff: Option<String>,
    /// Set when `saving_ns` is the calls' least cost (evidence calls ×
    /// `run.syscall_ns`), because the kernel time measured in them was
    /// less (sampling misses entering and leaving the kernel): that time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured_saving_ns: Option<u64>,
    /// The `sysdiet compare` line that measures the fix, when the fix is an
    /// environment variable or another command line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prove: Option<String>,
    // Set by diagnose's grouping; rules leave it and `processes` at their
    // default.
    /// The program, when the finding sums several of its processes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub program: Option<String>,
    /// Those processes and their calls, most first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub processes: Vec<crate::model::ProcessShare>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Evidence {
    pub syscall: String,
    pub calls: u64,
    pub per_second: f64,
    /// Of all syscalls counted in the run.
    pub share_of_calls: f64,
    /// Time in the kernel, as the trace has it (see `tick_ns`).
    pub kernel_ns: u64,
    pub run_ns: u64,
    /// The time was sampled, a tick of this many ns per sample (the run's
    /// mean, when a finer tick started it: `mean_tick_ns`); 0 when
    /// measured per call (--latency).
    #[serde(default)]
    pub tick_ns: u64,
    /// The trace has no times (a strace log without -T): the share of
    /// calls stands in for the share of time.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub untimed: bool,
    /// The run's clock includes a stopping tracer's time (a strace log,
    /// often made with -k): its share of that time is understated, so a
    /// share of the calls counts as well.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub run_includes_tracer: bool,
    /// What one syscall costs on this host at least (`run.syscall_ns`), 0
    /// when not measured: the calls' least cost, where ticks are too few.
    #[serde(default, skip_serializing_if = "crate::model::is_zero")]
    pub syscall_ns: u64,
    /// The calls come a few with each item of the program's work, told by
    /// what they go with: a fork (a shell's mask changes), a child started
    /// to do little (a spawner's reset), a record written (a pid per log
    /// record, a flush per record). A tenth of the run's calls is then shown whatever their
    /// time; other calls are judged by their time.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub per_item: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
pub struct Fix {
    pub kind: FixKind,
    pub text: String,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FixKind {
    Environment,
    Configuration,
    Code,
}

impl Fix {
    pub fn env(text: impl Into<String>) -> Fix {
        Fix { kind: FixKind::Environment, text: text.into() }
    }
    pub fn config(text: impl Into<String>) -> Fix {
        Fix { kind: FixKind::Configuration, text: text.into() }
    }
    pub fn code(text: impl Into<String>) -> Fix {
        Fix { kind: FixKind::Code, text: text.into() }
    }
}

impl Evidence {
    pub fn new(trace: &Trace, syscall: &str, calls: u64, kernel_ns: u64) -> Evidence {
        let run_ns = trace.run.duration_ns;
        let total = trace.total_calls();
        Evidence {
            syscall: syscall.to_string(),
            calls,
            per_second: if run_ns > 0 { calls as f64 * 1e9 / run_ns as f64 } else { 0.0 },
            share_of_calls: if total > 0 { calls as f64 / total as f64 } else { 0.0 },
            kernel_ns,
            run_ns,
            tick_ns: mean_tick_ns(trace.run.time, run_ns),
            untimed: trace.run.time == TimeKind::Unmeasured,
            run_includes_tracer: trace.run.log.is_some(),
            syscall_ns: trace.run.syscall_ns.unwrap_or(0),
            per_item: false,
        }
    }

    /// How far sampled time may be below the truth: one standard deviation
    /// of the ticks seen (Poisson) and one tick more, 0 when measured.
    pub fn time_slack_ns(&self) -> u64 {
        if self.tick_ns == 0 {
            return 0;
        }
        let ticks = (self.kernel_ns / self.tick_ns) as f64;
        ((ticks.sqrt() + 1.0) * self.tick_ns as f64) as u64
    }
}

/// What one sample of a run's time stands for, on average (0 when the
/// time is not sampled): a run that ticked every `fine_tick_ns` in its
/// first `fine_for_ns`, then every `middle_tick_ns`, then every `tick_ns`
/// (the kernel's 4 ms tick, on Debian), has more samples in its time than
/// its last tick says, taken as spread over the run (how many ticks landed
/// in a finding's calls, for its slack).
pub fn mean_tick_ns(time: TimeKind, run_ns: u64) -> u64 {
    let TimeKind::CpuSampled { tick_ns, fine_tick_ns, fine_for_ns, middle_tick_ns, middle_until_ns } = time else {
        return 0;
    };
    if run_ns == 0 || tick_ns == 0 {
        return tick_ns;
    }
    let (mut samples, mut from, mut finest) = (0.0, 0, tick_ns);
    for (tick, until) in [(fine_tick_ns, fine_for_ns), (middle_tick_ns, middle_until_ns)] {
        if tick > 0 && until > from {
            samples += (until.min(run_ns) - from.min(run_ns)) as f64 / tick as f64;
            (from, finest) = (until, finest.min(tick));
        }
    }
    samples += (run_ns - from.min(run_ns)) as f64 / tick_ns as f64;
    ((run_ns as f64 / samples) as u64).clamp(finest, tick_ns)
}

/// Fewer calls than this is never a pattern worth a report by default.
pub const MIN_CALLS: u64 = 100;
/// ... nor is a saving under this share of the run's time.
pub const MIN_SHARE: f64 = 0.01;
/// Without times (a strace log without -T), fewer calls than this are not
/// worth a report by default, whatever their share: a short start-up (an
/// interpreter's, a shell's) makes a few thousand calls in all, so its
/// routine ones are a few percent of them, and cost under a millisecond.
pub const UNTIMED_MIN_CALLS: u64 = 1_000;
/// Ticks of sampled time too few to say a finding is big or small.
const FEW_TICKS: u64 = 2;
/// A pattern this share of all the run's calls, and at least MANY_CALLS,
/// is shown whatever its time: it is what `strace -c` puts at the top.
pub const MOST_CALLS: f64 = 0.1;
/// ... and this many calls.
pub const MANY_CALLS: u64 = 1_000;

impl Finding {
    /// A few calls, or a saving well under 1% of the run: shown only with
    /// --all; not when they come with each item of work (`per_item`), are
    /// a tenth of the run's calls and a thousand or more in each process
    /// (a shell's mask changes around each fork, a pid per log record:
    /// cheap each, but the bulk of the count, spread over work the run's
    /// clock is full of). With sampled time, only
    /// when it is small even at the top of what the ticks allow. Where FEW_TICKS or fewer landed in the calls
    /// (in a short run one tick can be over 1% of it), unless the ticks say
    /// "big" even lowered by their slack, the calls' least cost on this
    /// host decides: a few hundred quick calls in a 5 or 30 ms run are not
    /// 1% of it, whichever call a tick happened to land in.
    pub fn is_small(&self) -> bool {
        let e = &self.evidence;
        if e.untimed {
            return e.calls < UNTIMED_MIN_CALLS || e.share_of_calls < MIN_SHARE;
        }
        // Repeated within a process: a program's processes that each make
        // a few (node's start-up asks for its pid 73 times) are not.
        let per_process = e.calls / self.processes.len().max(1) as u64;
        if e.per_item && per_process >= MANY_CALLS && e.share_of_calls >= MOST_CALLS {
            return false;
        }
        let of_run = |ns: u64| if e.run_ns > 0 { ns as f64 / e.run_ns as f64 } else { 0.0 };
        let slack = e.time_slack_ns();
        let time_share = of_run(self.saving_ns + slack);
        let share = if e.run_includes_tracer { time_share.max(e.share_of_calls) } else { time_share };
        if e.calls < MIN_CALLS || share < MIN_SHARE {
            return true;
        }
        // Two ticks or fewer in the calls say little either way.
        let few_ticks = e.tick_ns > 0 && e.kernel_ns / e.tick_ns <= FEW_TICKS;
        let undecided = few_ticks && of_run(self.saving_ns.saturating_sub(slack)) < MIN_SHARE;
        undecided && !e.run_includes_tracer && e.syscall_ns > 0 && of_run(e.calls * e.syscall_ns) < MIN_SHARE
    }
}

/// `sysdiet compare VARIANT -- COMMAND`, for a traced command; None for
/// attach, which has no command to run again.
pub fn prove(trace: &Trace, variant: &str) -> Option<String> {
    if trace.run.command.is_empty() {
        return None;
    }
    let command: Vec<String> = trace.run.command.iter().map(|a| shell_quote(a)).collect();
    Some(format!("sysdiet compare {variant} -- {}", command.join(" ")))
}

/// Quotes a word for a POSIX shell when it needs it.
pub fn shell_quote(s: &str) -> String {
    let plain = !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_./:=,+@%".contains(c));
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting() {
        assert_eq!(shell_quote("./timeloop"), "./timeloop");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(shell_quote(""), "''");
    }

    #[test]
    fn prove_needs_a_command() {
        let mut t = Trace::default();
        assert_eq!(prove(&t, "--env TZ=:/etc/localtime"), None);
        t.run.command = vec!["./timeloop".into(), "localtime".into(), "1 000".into()];
        assert_eq!(
            prove(&t, "--env TZ=:/etc/localtime").as_deref(),
            Some("sysdiet compare --env TZ=:/etc/localtime -- ./timeloop localtime '1 000'")
        );
    }

    #[test]
    fn small_is_few_calls_or_under_one_percent() {
        let f = |calls, saving_ns, share| Finding {
            id: "x".into(),
            what: String::new(),
            pid: None,
            evidence: Evidence { calls, share_of_calls: share, run_ns: 1_000_000, per_item: true, ..Default::default() },
            sites: vec![],
            saving_ns,
            why: String::new(),
            fixes: vec![],
            ..Default::default()
        };
        assert!(f(10, 900_000, 0.9).is_small());
        assert!(f(1000, 1_000, 0.001).is_small());
        assert!(!f(1000, 100_000, 0.001).is_small());
        assert!(!f(1000, 0, 0.5).is_small(), "half the calls, whatever the time");
        assert!(f(999, 0, 0.5).is_small(), "saves nothing, too few calls");
        assert!(f(100_000, 1_000, 0.09).is_small(), "under a tenth of the calls and of 1% of the time");
        // Summed over 30 processes of one program, 73 calls in each: small.
        let share = |pid| crate::model::ProcessShare { pid, calls: 73 };
        let spread = |n: u32| Finding { processes: (1..=n).map(share).collect(), ..f(2_190, 1_000, 0.15) };
        assert!(spread(30).is_small());
        assert!(!spread(2).is_small(), "1,095 in each");
        // Calls not told to come with each item (a JVM's gettid per lock, a
        // spawner's reset in compilers that each work much): by time.
        let alone = Finding { evidence: Evidence { per_item: false, ..f(1000, 0, 0.5).evidence }, ..f(1000, 0, 0.5) };
        assert!(alone.is_small());
        // A log's clock holds strace's stops: 0.1% of its time, but 50% of its calls.
        let logged = |share| Finding { evidence: Evidence { run_includes_tracer: true, ..f(1000, 1_000, share).evidence }, ..f(1000, 1_000, share) };
        assert!(!logged(0.5).is_small());
        assert!(logged(0.001).is_small());
        // No times: by calls, and a short start-up's few hundred are small.
        let untimed = |calls, share| Finding { evidence: Evidence { untimed: true, ..f(calls, 0, share).evidence }, ..f(calls, 0, share) };
        assert!(untimed(300, 0.15).is_small());
        assert!(!untimed(1_000, 0.15).is_small());
        assert!(untimed(100_000, 0.005).is_small());
    }

    #[test]
    fn sampled_time_too_coarse_to_call_a_finding_small_keeps_it() {
        let f = |kernel_ns, run_ns| Finding {
            id: "x".into(),
            what: String::new(),
            pid: None,
            evidence: Evidence { calls: 20_000, kernel_ns, run_ns, tick_ns: 250_000, ..Default::default() },
            sites: vec![],
            saving_ns: kernel_ns,
            why: String::new(),
            fixes: vec![],
            ..Default::default()
        };
        // 5 ms, no tick landed in the calls: one could have.
        assert!(!f(0, 5_000_000).is_small());
        // 117 ms, one tick (0.25 ms): under 1% even at two more.
        assert!(f(250_000, 117_000_000).is_small());
        // 10 s and no tick among 40,000: small for sure.
        assert!(f(0, 10_000_000_000).is_small());
        // Measured time is taken as it is.
        let measured = Finding { evidence: Evidence { tick_ns: 0, ..f(0, 5_000_000).evidence }, ..f(0, 5_000_000) };
        assert!(measured.is_small());
    }

    #[test]
    fn a_fine_start_makes_more_samples_than_the_last_tick_says() {
        let sampled = |tick_ns, fine_tick_ns, fine_for_ns, middle_tick_ns, middle_until_ns| TimeKind::CpuSampled {
            tick_ns,
            fine_tick_ns,
            fine_for_ns,
            middle_tick_ns,
            middle_until_ns,
        };
        // 250 µs for 25 ms, then 1 ms: a 72 ms run has 100 + 47 samples,
        // one per ~0.49 ms.
        let clock = sampled(1_000_000, 250_000, 25_000_000, 0, 0);
        assert_eq!(mean_tick_ns(clock, 72_000_000), 489_795);
        // Then the kernel's 4 ms after 1 s: a 3 s run has 100 + 975 + 500.
        let kernel = sampled(4_000_000, 250_000, 25_000_000, 1_000_000, 1_000_000_000);
        assert_eq!(mean_tick_ns(kernel, 3_000_000_000), 1_904_761);
        assert_eq!(mean_tick_ns(kernel, 72_000_000), 489_795, "as the clock's before the kernel's tick");
        // The kernel's tick after the fine start (the whole host's).
        assert_eq!(mean_tick_ns(sampled(4_000_000, 250_000, 25_000_000, 0, 0), 1_000_000_000), 2_909_090);
        // Within the fine start, the fine tick; no fine start, the tick;
        // measured time, none.
        assert_eq!(mean_tick_ns(kernel, 20_000_000), 250_000);
        assert_eq!(mean_tick_ns(sampled(250_000, 0, 0, 0, 0), 72_000_000), 250_000);
        assert_eq!(mean_tick_ns(TimeKind::Wall, 72_000_000), 0);
        // A sync loop of 72 ms, 300 fdatasync with 9 ms of CPU in them:
        // 18 samples, not nine of the last tick, nor two of the kernel's;
        // 12% of the run is shown.
        let e = Evidence { calls: 300, kernel_ns: 9_000_000, run_ns: 72_000_000, syscall_ns: 211, ..Default::default() };
        let f = |tick_ns| Finding { evidence: Evidence { tick_ns, ..e.clone() }, saving_ns: 9_000_000, ..Default::default() };
        assert!(f(4_000_000).is_small(), "two ticks of 4 ms say too little");
        assert!(!f(mean_tick_ns(clock, 72_000_000)).is_small());
    }

    #[test]
    fn where_ticks_cannot_tell_the_calls_least_cost_decides() {
        // A 5 ms run, `calls` quick calls, one tick (250 µs) landed in them.
        let f = |calls, syscall_ns| Finding {
            evidence: Evidence { calls, kernel_ns: 250_000, run_ns: 5_000_000, tick_ns: 250_000, syscall_ns, ..Default::default() },
            saving_ns: 250_000,
            ..Default::default()
        };
        // `file` reading ELF headers: 160 × 164 ns is 0.5% of the run.
        assert!(f(160, 164).is_small());
        // The same on a loaded host: a 32 ms run, where one tick is 0.8%.
        let loaded = Finding { evidence: Evidence { run_ns: 32_000_000, ..f(160, 164).evidence }, ..f(160, 164) };
        assert!(loaded.is_small());
        // 1,000 calls are 3%, whatever the tick said.
        assert!(!f(1_000, 164).is_small());
        // Not measured: kept, as before.
        assert!(!f(160, 0).is_small());
        // Many ticks in the calls (40 in 5 ms, on two CPUs): they decide.
        let slow = Finding { evidence: Evidence { kernel_ns: 10_000_000, ..f(160, 164).evidence }, saving_ns: 10_000_000, ..Default::default() };
        assert!(!slow.is_small());
        // Three ticks in the calls of a 60 ms run: judged by them, as before.
        let longer = Finding {
            evidence: Evidence { run_ns: 60_000_000, kernel_ns: 750_000, ..f(3_000, 164).evidence },
            saving_ns: 700_000,
            ..Default::default()
        };
        assert!(!longer.is_small());
    }
}
