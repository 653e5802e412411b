//! compare: runs a command and its variants (environment changes, other
//! command lines) untraced, interleaved (A B A B, the order alternating),
//! after warm-ups, and measures each run; then traces one run of each to
//! say which syscalls and findings the change removed.

pub mod budget;
mod diff;
pub mod gate;
mod saved;
mod timing;

use std::ffi::OsString;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::pipeline::{trace_command, TraceOptions};
use crate::stats::{self, Summary};
pub use diff::{diff, ArgumentChange, ArgumentCount, Change, Counted, Diff, FindingChange, FindingSummary, SiteChange, SiteCount, SyscallChange};
pub use saved::{diff_runs, MachineDependent, RunDiff};
pub use timing::{Executor, RunTiming, Untraced};

/// One thing to run: the baseline or a variant.
#[derive(Debug, Clone)]
pub struct Variant {
    /// `A`, `B`, ...
    pub label: String,
    /// How it differs from the baseline, as given (`--env TZ=:/etc/localtime`).
    pub change: String,
    pub command: Vec<OsString>,
    pub env: Vec<(OsString, OsString)>,
}

#[derive(Debug, Clone)]
pub struct CompareOptions {
    pub runs: usize,
    pub warmup: usize,
    pub check_output: bool,
    /// Replaced by `<normalized>` in outputs before they are compared.
    pub normalize: Vec<regex::Regex>,
    pub ignore_failure: bool,
    /// Trace one run of each variant for the syscall diff.
    pub trace: bool,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Comparison {
    pub runs: usize,
    pub warmup: usize,
    pub variants: Vec<VariantResult>,
    /// Why there are no syscall counts, when there are none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_error: Option<String>,
    /// A signal ended the comparison early: `runs` is the rounds every
    /// variant completed, and nothing was traced.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct VariantResult {
    pub label: String,
    pub change: String,
    pub command: Vec<String>,
    pub runs: Vec<RunTiming>,
    /// Seconds.
    pub wall: Summary,
    pub user: Summary,
    pub sys: Summary,
    pub max_rss_kib: u64,
    /// Indices of runs flagged as outliers (wall time).
    pub outliers: Vec<usize>,
    /// Against the baseline (absent for the baseline itself).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vs_baseline: Option<VsBaseline>,
    /// With --check-output: how this variant's output differs from the
    /// baseline's, if it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_differs: Option<String>,
    /// Runs that exited non-zero (with --ignore-failure).
    pub failed_runs: usize,
    /// What its traced run counted (absent with --no-trace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counted: Option<Counted>,
    /// The baseline's counts against this variant's (absent for the
    /// baseline itself).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff: Option<Diff>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct VsBaseline {
    /// Median wall time of this variant over the baseline's.
    pub ratio: f64,
    pub ci_low: f64,
    pub ci_high: f64,
    pub verdict: Verdict,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Faster,
    Slower,
    NoSignificantDifference,
}

/// The variants: the baseline A, then B with the environment changes (if
/// any), then each --vs command line.
pub fn variants(command: &[OsString], set_env: &[String], unset_env: &[String], vs: &[String]) -> Result<Vec<Variant>> {
    if command.is_empty() {
        return Err(Error::Usage("no command given: sysdiet compare [--env K=V | --vs 'CMD'] -- COMMAND [ARGS...]".into()));
    }
    let base_env: Vec<(OsString, OsString)> = std::env::vars_os().collect();
    let mut out = vec![Variant { label: "A".into(), change: String::new(), command: command.to_vec(), env: base_env.clone() }];
    if !set_env.is_empty() || !unset_env.is_empty() {
        let mut env = base_env.clone();
        let mut change = Vec::new();
        for kv in set_env {
            let (k, v) = kv.split_once('=').ok_or_else(|| Error::Usage(format!("--env {kv}: write it as NAME=VALUE (NAME= for empty)")))?;
            if k.is_empty() {
                return Err(Error::Usage(format!("--env {kv}: the name is empty")));
            }
            env.retain(|(name, _)| name != k);
            env.push((k.into(), v.into()));
            change.push(format!("--env {}", crate::diagnose::shell_quote(kv)));
        }
        for k in unset_env {
            env.retain(|(name, _)| name != k.as_str());
            change.push(format!("--unset-env {k}"));
        }
        out.push(Variant { label: "B".into(), change: change.join(" "), command: command.to_vec(), env });
    }
    for vs in vs {
        let command = split_words(vs)?;
        if command.is_empty() {
            return Err(Error::Usage("--vs needs a command line".into()));
        }
        let label = ((b'A' + out.len() as u8) as char).to_string();
        out.push(Variant { label, change: format!("--vs {}", crate::diagnose::shell_quote(vs)), command, env: base_env.clone() });
    }
    if out.len() < 2 {
        return Err(Error::Usage("nothing to compare with: give --env K=V, --unset-env K or --vs 'CMD'".into()));
    }
    Ok(out)
}

/// Differences smaller than this are not called faster or slower even when
/// the interval excludes 1: on a shared machine that is drift, not a fix.
const MIN_EFFECT: f64 = 0.05;
/// Fewer runs than this are too few to call any of them an outlier.
const MIN_RUNS_FOR_OUTLIERS: usize = 5;

pub fn verdict(ratio: f64, lo: f64, hi: f64) -> Verdict {
    if hi < 1.0 && ratio < 1.0 - MIN_EFFECT {
        Verdict::Faster
    } else if lo > 1.0 && ratio > 1.0 + MIN_EFFECT {
        Verdict::Slower
    } else {
        Verdict::NoSignificantDifference
    }
}

/// Measures the variants, each run by `executor`; `progress` hears of each
/// run as it starts (runs done, runs in all, the variant's label). `stop`
/// becomes a signal's number when the user interrupts: the run under way
/// ends (and is not kept), and the rounds every variant completed are the
/// result.
pub fn compare(
    variants: &[Variant],
    opts: &CompareOptions,
    executor: &mut dyn Executor,
    progress: &mut dyn FnMut(usize, usize, &str),
    stop: &std::sync::atomic::AtomicUsize,
) -> Result<Comparison> {
    use std::sync::atomic::Ordering;
    if opts.runs == 0 {
        return Err(Error::Usage("--runs must be at least 1".into()));
    }
    // Every command must start before any is timed.
    for v in variants {
        let name = v.command.first().ok_or_else(|| Error::Usage(format!("variant {} has no command", v.label)))?;
        crate::target::spawn::resolve_program(name)?;
    }
    let n = variants.len();
    let mut runs: Vec<Vec<RunTiming>> = vec![Vec::new(); n];
    let mut outputs: Vec<Option<Vec<u8>>> = vec![None; n];
    let total = (opts.warmup + opts.runs) * n;
    let mut done = 0;
    'rounds: for round in 0..opts.warmup + opts.runs {
        // Interleaved, the order alternating, so drift hits all alike.
        let order: Vec<usize> = if round % 2 == 0 { (0..n).collect() } else { (0..n).rev().collect() };
        for i in order {
            let v = &variants[i];
            if stop.load(Ordering::Relaxed) != 0 {
                break 'rounds;
            }
            progress(done, total, &v.label);
            let (t, out) = executor.run(v, opts.check_output)?;
            // Interrupted meanwhile: the run was cut short (a Ctrl-C
            // reaches it too), so it measures nothing.
            if stop.load(Ordering::Relaxed) != 0 {
                break 'rounds;
            }
            done += 1;
            if t.status != 0 && !opts.ignore_failure {
                return Err(Error::VariantFailed { label: v.label.clone(), change: v.change.clone(), status: t.status });
            }
            if outputs[i].is_none() {
                outputs[i] = out;
            }
            if round >= opts.warmup {
                runs[i].push(t);
            }
        }
    }
    progress(done, total, "");
    let signal = stop.load(Ordering::Relaxed);
    if signal != 0 {
        // Only rounds every variant completed compare like with like.
        let complete = runs.iter().map(Vec::len).min().unwrap_or(0);
        if complete == 0 {
            return Err(Error::Interrupted { signal: signal as i32 });
        }
        runs.iter_mut().for_each(|r| r.truncate(complete));
    }
    let normalized: Vec<Option<String>> =
        outputs.iter().map(|o| o.as_ref().map(|b| normalize(&String::from_utf8_lossy(b), &opts.normalize))).collect();
    let base_wall: Vec<f64> = runs[0].iter().map(|r| r.wall_s).collect();
    let mut result = Comparison { runs: runs[0].len(), warmup: opts.warmup, interrupted: signal != 0, ..Default::default() };
    for (i, v) in variants.iter().enumerate() {
        let wall: Vec<f64> = runs[i].iter().map(|r| r.wall_s).collect();
        let vs_baseline = (i > 0).then(|| {
            let (ratio, lo, hi) = stats::ratio_interval(&base_wall, &wall);
            VsBaseline { ratio, ci_low: lo, ci_high: hi, verdict: verdict(ratio, lo, hi) }
        });
        let mut rss: Vec<f64> = runs[i].iter().map(|r| r.max_rss_kib as f64).collect();
        rss.sort_by(f64::total_cmp);
        result.variants.push(VariantResult {
            label: v.label.clone(),
            change: v.change.clone(),
            command: v.command.iter().map(|a| a.to_string_lossy().into_owned()).collect(),
            wall: stats::summarize(&wall),
            user: stats::summarize(&runs[i].iter().map(|r| r.user_s).collect::<Vec<_>>()),
            sys: stats::summarize(&runs[i].iter().map(|r| r.sys_s).collect::<Vec<_>>()),
            max_rss_kib: stats::median(&rss) as u64,
            outliers: if wall.len() >= MIN_RUNS_FOR_OUTLIERS { stats::outliers(&wall) } else { Vec::new() },
            vs_baseline,
            output_differs: (i > 0 && opts.check_output).then(|| first_difference(&normalized[0], &normalized[i])).flatten(),
            failed_runs: runs[i].iter().filter(|r| r.status != 0).count(),
            runs: std::mem::take(&mut runs[i]),
            ..Default::default()
        });
    }
    if opts.trace && !result.interrupted {
        if let Err(e) = trace_each(variants, &mut result) {
            result.trace_error = Some(e.to_string());
        }
    }
    Ok(result)
}

/// One traced run per variant: its syscall counts and findings, and the
/// diff of each variant against the baseline.
fn trace_each(variants: &[Variant], result: &mut Comparison) -> Result<()> {
    let opts = TraceOptions { stacks: false, quiet: true, ..Default::default() };
    for (v, r) in variants.iter().zip(&mut result.variants) {
        let traced = trace_command(&v.command, &v.env, &opts, std::time::Instant::now())?;
        r.counted = Some(Counted::of(&traced.trace, &traced.findings));
    }
    if let Some((base, rest)) = result.variants.split_first_mut() {
        let base = base.counted.as_ref().expect("counted above");
        for r in rest {
            r.diff = Some(diff(base, r.counted.as_ref().expect("counted above")));
        }
    }
    Ok(())
}

fn normalize(text: &str, patterns: &[regex::Regex]) -> String {
    patterns.iter().fold(text.to_string(), |t, re| re.replace_all(&t, "<normalized>").into_owned())
}

/// Where two outputs first differ, said in one line; None if they agree.
fn first_difference(a: &Option<String>, b: &Option<String>) -> Option<String> {
    let (a, b) = (a.as_deref().unwrap_or(""), b.as_deref().unwrap_or(""));
    if a == b {
        return None;
    }
    let mut la = a.lines();
    let mut lb = b.lines();
    for n in 1.. {
        match (la.next(), lb.next()) {
            (Some(x), Some(y)) if x == y => continue,
            (x, y) => {
                let show = |l: Option<&str>| l.map_or_else(|| "(end of output)".to_string(), |l| format!("{:?}", truncate(l, 60)));
                return Some(format!("line {n}: baseline {} vs {}", show(x), show(y)));
            }
        }
    }
    unreachable!("the outputs differ somewhere")
}

fn truncate(s: &str, n: usize) -> &str {
    s.char_indices().nth(n).map_or(s, |(i, _)| &s[..i])
}

/// Splits a command line given as one string (`--vs './app --fast'`) into
/// words as a POSIX shell would for plain words (quotes, backslashes); no
/// shell runs.
pub fn split_words(s: &str) -> Result<Vec<OsString>> {
    shell_words::split(s).map(|w| w.into_iter().map(OsString::from).collect()).map_err(|e| Error::Usage(format!("`{s}`: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words() {
        let w = |s: &str| split_words(s).unwrap().into_iter().map(|o| o.into_string().unwrap()).collect::<Vec<_>>();
        assert_eq!(w("./app --fast"), vec!["./app", "--fast"]);
        assert_eq!(w(r#"sh -c 'echo "a b"' x\ y"#), vec!["sh", "-c", "echo \"a b\"", "x y"]);
        assert_eq!(w(r#"printf "%s\n" ''"#), vec!["printf", r"%s\n", ""], "as a shell keeps it");
        assert!(split_words("echo 'oops").is_err());
    }

    #[test]
    fn verdicts_need_the_interval_and_an_effect() {
        assert_eq!(verdict(0.5, 0.45, 0.55), Verdict::Faster);
        assert_eq!(verdict(1.5, 1.4, 1.6), Verdict::Slower);
        assert_eq!(verdict(0.9, 0.8, 1.05), Verdict::NoSignificantDifference);
        assert_eq!(verdict(0.97, 0.965, 0.975), Verdict::NoSignificantDifference, "3% is drift");
    }

    /// Runs nothing: each run's wall time is `wall(run number, label)`.
    struct Scripted<F: FnMut(usize, &str) -> f64> {
        wall: F,
        order: Vec<String>,
    }

    impl<F: FnMut(usize, &str) -> f64> Executor for Scripted<F> {
        fn run(&mut self, v: &Variant, capture: bool) -> Result<(RunTiming, Option<Vec<u8>>)> {
            let wall_s = (self.wall)(self.order.len(), &v.label);
            self.order.push(v.label.clone());
            Ok((RunTiming { wall_s, ..Default::default() }, capture.then(Vec::new)))
        }
    }

    fn measured<F: FnMut(usize, &str) -> f64>(runs: usize, wall: F) -> (Comparison, String) {
        let variants = variants(&["true".into()], &[], &[], &["true".into()]).unwrap();
        let opts = CompareOptions { runs, warmup: 1, check_output: false, normalize: Vec::new(), ignore_failure: false, trace: false };
        let mut executor = Scripted { wall, order: Vec::new() };
        let result = compare(&variants, &opts, &mut executor, &mut |_, _, _| {}, &Default::default()).unwrap();
        (result, executor.order.concat())
    }

    /// A noise of ±4% that repeats every 7 rounds, the same for A and B.
    fn noise(run: usize) -> f64 {
        [1.0, 1.03, 0.98, 1.04, 0.97, 1.01, 0.96][run % 7]
    }

    #[test]
    fn the_runs_alternate_their_order_after_the_warm_up() {
        let (result, order) = measured(3, |_, _| 1.0);
        assert_eq!(order, "ABBAABBA", "a warm-up round, then three");
        assert_eq!((result.runs, result.warmup, result.variants[1].runs.len()), (3, 1, 3));
    }

    #[test]
    fn the_same_command_twice_is_no_significant_difference() {
        // The first run of each round pays 10% more (caches the other
        // command emptied): always A then B, B would be called faster;
        // the order alternating, both pay it alike.
        let (result, _) = measured(10, |run, _| noise(run / 2) * if run % 2 == 0 { 1.1 } else { 1.0 });
        let b = result.variants[1].vs_baseline.as_ref().unwrap();
        assert_eq!(b.verdict, Verdict::NoSignificantDifference, "{b:?}");
        assert!(b.ci_low < 1.0 && b.ci_high > 1.0, "{b:?}");
    }

    #[test]
    fn a_variant_taking_longer_or_shorter_is_called_so() {
        for (factor, verdict) in [(1.2, Verdict::Slower), (0.8, Verdict::Faster), (1.03, Verdict::NoSignificantDifference)] {
            let (result, _) = measured(10, |run, label| noise(run / 2) * if label == "B" { factor } else { 1.0 });
            let b = result.variants[1].vs_baseline.as_ref().unwrap();
            assert_eq!(b.verdict, verdict, "B at {factor}× A: {b:?}");
        }
    }

    #[test]
    fn output_differences() {
        let s = |t: &str| Some(t.to_string());
        assert_eq!(first_difference(&s("a\nb\n"), &s("a\nb\n")), None);
        assert_eq!(first_difference(&s("a\nb\n"), &s("a\nc\n")).unwrap(), "line 2: baseline \"b\" vs \"c\"");
        assert_eq!(first_difference(&s("a\n"), &s("a\nb\n")).unwrap(), "line 2: baseline (end of output) vs \"b\"");
        let re = vec![regex::Regex::new(r"\d+ ms").unwrap()];
        assert_eq!(normalize("took 12 ms", &re), normalize("took 9 ms", &re));
    }
}
