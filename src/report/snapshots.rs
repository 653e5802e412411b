//! Snapshot tests of every renderer (insta), from traces and results built
//! by hand: a change to what a report looks like shows as a diff of
//! `src/report/snapshots/*.snap` to review (`cargo insta review`, or
//! `INSTA_UPDATE=always cargo test` and read the git diff).

use crate::bench::host::Host;
use crate::bench::{CallTime, LoopCost, Measurements, SyscallShare, SyscallsPerCall};
use crate::compare::{diff, ArgumentCount, Comparison, Counted, FindingSummary, RunTiming, VariantResult, Verdict, VsBaseline};
use crate::diagnose::testing::{argument, path, site, trace};
use crate::linux::host::RunningProcess;
use crate::model::{Argument, Trace};
use crate::stats::summarize;

/// `./app` stats /etc/localtime 100,000 times from one call site, with TZ
/// unset, and writes tiny records to fd 1.
fn localtime_trace() -> Trace {
    let mut t = trace(2_000_000_000, &[("newfstatat", 100_003, 900_000_000), ("write", 5_000, 40_000_000), ("openat", 4, 40_000)]);
    t.run.exit = Some(crate::model::Exit::Code { code: 0 });
    t.run.root_pids = vec![7];
    t.run.backend = "bpf".into();
    let sites = site(&mut t, &["__GI___fstatat64", "__tzfile_read", "tzset_internal", "__tz_convert", "use_localtime"]);
    let a = argument(&mut t, "newfstatat", path("/etc/localtime"), 100_000, 899_000_000);
    a.sites = sites;
    a.sites[0].calls = 100_000;
    argument(&mut t, "write", Argument::Fd { fd: 1 }, 5_000, 40_000_000);
    t
}

#[test]
fn text_report_with_findings_and_call_sites() {
    let t = localtime_trace();
    let findings = crate::diagnose::diagnose(&t, false);
    assert!(findings.iter().any(|f| f.id == "tz-unset"), "the trace shows the tz-unset finding");
    insta::assert_snapshot!("text", super::text::render(&t, &findings, false));
}

#[test]
fn text_report_per_thread() {
    let t = localtime_trace();
    insta::assert_snapshot!("text_per_thread", super::text::render(&t, &[], true));
}

#[test]
fn folded_stacks() {
    insta::assert_snapshot!("folded", super::folded::render(&localtime_trace(), super::Weight::Count));
}

fn comparison() -> Comparison {
    let timing = |wall_s: f64| RunTiming { wall_s, user_s: wall_s / 10.0, sys_s: wall_s / 2.0, max_rss_kib: 4096, status: 0 };
    let a_walls = [0.31, 0.30, 0.32];
    let b_walls = [0.010, 0.011, 0.009];
    let finding = |what: &str| FindingSummary { rule: "tz-unset".into(), program: "app".into(), what: what.into(), saving_ns: 1 };
    let path = |calls| ArgumentCount { syscall: "newfstatat".into(), argument: path("/etc/localtime"), calls };
    let a_counts = Counted {
        syscalls: [("newfstatat".to_string(), 200_003), ("write".to_string(), 10)].into(),
        arguments: vec![path(199_999)],
        findings: vec![finding("199,999 × newfstatat(\"/etc/localtime\")")],
        ..Default::default()
    };
    let b_counts = Counted { syscalls: [("newfstatat".to_string(), 4), ("write".to_string(), 10)].into(), ..Default::default() };
    let d = diff(&a_counts, &b_counts);
    let variant = |label: &str, change: &str, walls: &[f64]| VariantResult {
        label: label.into(),
        change: change.into(),
        command: vec!["./app".into()],
        runs: walls.iter().map(|&w| timing(w)).collect(),
        wall: summarize(walls),
        user: summarize(&walls.iter().map(|w| w / 10.0).collect::<Vec<_>>()),
        sys: summarize(&walls.iter().map(|w| w / 2.0).collect::<Vec<_>>()),
        max_rss_kib: 4096,
        ..Default::default()
    };
    let mut a = variant("A", "", &a_walls);
    a.counted = Some(a_counts);
    let mut b = variant("B", "--env TZ=:/etc/localtime", &b_walls);
    b.vs_baseline = Some(VsBaseline { ratio: 0.0323, ci_low: 0.029, ci_high: 0.036, verdict: Verdict::Faster });
    b.counted = Some(b_counts);
    b.diff = Some(d);
    Comparison { runs: 3, warmup: 1, variants: vec![a, b], trace_error: None, interrupted: false }
}

#[test]
fn compare_text_and_markdown() {
    let c = comparison();
    insta::assert_snapshot!("compare_text", super::compare::render(&c));
    insta::assert_snapshot!("compare_markdown", super::compare::markdown(&c));
}

#[test]
fn check_audit() {
    let processes = [
        RunningProcess { pid: 100, comm: "nginx".into(), tz: None, unit: Some("nginx.service".into()) },
        RunningProcess { pid: 200, comm: "bash".into(), tz: Some(":/etc/localtime".into()), unit: None },
        RunningProcess { pid: 300, comm: "cron".into(), tz: None, unit: Some("cron.service".into()) },
    ];
    let counts = |pid: u32| if pid == 100 { 5_000 } else { 0 };
    let a = crate::diagnose::host::audit(
        Some("hpet".into()),
        vec!["hpet".into(), "tsc".into(), "acpi_pm".into()],
        None,
        Some("Europe/Paris".into()),
        &processes,
        2,
        Some((1_000_000_000, &counts)),
    );
    insta::assert_snapshot!("check", super::check::render(&a));
}

fn measurements() -> Measurements {
    let bench_loop = |id: &str, label: &str, ns: f64, syscalls: &[(&str, f64)]| LoopCost {
        id: id.into(),
        name: id.split(':').next().unwrap().into(),
        label: label.into(),
        tz: None,
        times: vec![CallTime { threads: 1, iterations: 100_000, ns_per_call: summarize(&[ns, ns * 1.02, ns * 0.99]), runs_ns_per_call: vec![ns] }],
        syscalls: Some(SyscallsPerCall {
            total: syscalls.iter().map(|s| s.1).sum(),
            by_syscall: syscalls.iter().map(|&(name, per_call)| SyscallShare { name: name.into(), per_call }).collect(),
        }),
        contended_syscalls: vec![],
    };
    Measurements {
        host: Host {
            cpu: "Test CPU".into(),
            cpus: 2,
            kernel: "6.18.0".into(),
            machine: "x86_64".into(),
            glibc: "2.41".into(),
            clocksource: Some("tsc".into()),
            vdso_clock: true,
            tz: None,
            zone: Some("Etc/UTC".into()),
        },
        threads: vec![1],
        runs: 3,
        iterations: Some(100_000),
        loops: vec![
            bench_loop("localtime:tz_unset", "localtime (TZ unset)", 1712.3, &[("newfstatat", 1.0)]),
            bench_loop("localtime_r", "localtime_r", 210.4, &[]),
            bench_loop("getpid", "getpid", 48.2, &[("getpid", 1.0)]),
        ],
        ..Default::default()
    }
}

#[test]
fn bench_table_and_markdown() {
    let m = measurements();
    insta::assert_snapshot!("bench_text", super::bench::render(&m));
    insta::assert_snapshot!("bench_markdown", super::bench::markdown(&m));
}

/// A shell running a program 503 times, each asking twice for an IPv6
/// socket the kernel lacks: 3 processes kept whole, 500 folded into their
/// program's row.
#[test]
fn text_report_program_with_folded_processes() {
    use crate::model::Process;
    let mut t = trace(1_000_000_000, &[("socket", 1509, 30_000_000)]);
    t.run.backend = "bpf".into();
    let template = t.processes.pop().unwrap();
    let mut failing = template.syscalls.clone();
    failing[0].errnos.insert("EAFNOSUPPORT".into(), 2);
    failing[0].calls = 3;
    for pid in 11..=13 {
        t.processes.push(Process { pid, comm: "true".into(), syscalls: failing.clone(), ..template.clone() });
    }
    failing[0].errnos.insert("EAFNOSUPPORT".into(), 1000);
    failing[0].calls = 1500;
    t.processes.push(Process { pid: 1 << 30, comm: "true".into(), folded: 500, syscalls: failing, ..template });
    let findings = crate::diagnose::diagnose(&t, true);
    assert!(findings.iter().any(|f| f.id == "failing-calls" && f.program.is_some()), "{findings:?}");
    let mut out = String::new();
    super::findings::section(&mut out, &t, &findings);
    insta::assert_snapshot!("text_program_folded", out);
}
