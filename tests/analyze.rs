//! `sysdiet analyze`: a strace log gives the counts strace -c gives, and
//! the findings `sysdiet run` gives; every form of log strace writes is
//! read; bad input gets one clear line.

use crate::common::*;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// `strace ARGS -- argv` with TZ unset and stdout to /dev/null.
fn strace(args: &[&str], argv: &[&str]) -> std::process::Output {
    Command::new("strace")
        .env_remove("LD_LIBRARY_PATH")
        .env_remove("TZ")
        .args(args)
        .arg("--")
        .args(argv)
        .stdout(Stdio::null())
        .output()
        .expect("strace runs (install it: `make deps`)")
}

/// `strace -f -tt -T -k -o LOG argv`; the log's path (in `dir`).
fn log_of(dir: &Path, argv: &[&str]) -> PathBuf {
    let log = dir.join("trace.log");
    let out = strace(&["-f", "-tt", "-T", "-k", "-o", log.to_str().unwrap()], argv);
    assert!(out.status.code().is_some(), "strace died");
    log
}

fn analyze_json(args: &[&str]) -> serde_json::Value {
    let out = sysdiet().arg("analyze").arg("--json").args(args).output().unwrap();
    assert!(out.status.success(), "analyze {args:?}: {}", stderr_of(&out));
    serde_json::from_slice(&out.stdout).expect("valid JSON")
}

fn argv_of(exe: &Path, args: &[&'static str]) -> Vec<String> {
    std::iter::once(exe.to_str().unwrap().to_string()).chain(args.iter().map(|a| a.to_string())).collect()
}

#[test]
fn counts_equal_strace_c_on_the_victims() {
    let victims: &[(&str, &[&str])] = &[
        ("timeloop", &["localtime", "2000"]),
        ("sigprocmask", &["3000"]),
        ("context", &["1000"]),
        ("failing", &["300"]),
        ("pipeline", &["100"]),
        ("statloop", &["/etc/passwd", "2000"]),
        ("tinywrite", &["2000"]),
        ("pollzero", &["2000"]),
    ];
    for (name, args) in victims {
        let dir = tempfile::tempdir().unwrap();
        let argv = argv_of(&victim(name), args);
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        let oracle = strace_counts(&[], &argv);
        let log = log_of(dir.path(), &argv);
        let doc = analyze_json(&[log.to_str().unwrap()]);
        assert_same_counts(name, &oracle, &counts_of(&doc), &[]);
        assert_eq!(doc["run"]["backend"], "strace log");
        assert_eq!(doc["run"]["log"]["incomplete"], false, "{name}");
        assert_eq!(doc["run"]["command"][0], argv[0]);
    }
}

#[test]
fn findings_and_call_sites_match_run() {
    if skip_without_bpf() {
        return;
    }
    for (name, args) in [("timeloop", &["localtime", "3000"][..]), ("sigprocmask", &["5000"][..]), ("tinywrite", &["5000"][..])] {
        let dir = tempfile::tempdir().unwrap();
        let argv = argv_of(&victim(name), args);
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        let (run, _) = sysdiet_json(&[], &argv);
        let log = log_of(dir.path(), &argv);
        let analyzed = analyze_json(&[log.to_str().unwrap()]);
        let ids = |d: &serde_json::Value| -> Vec<String> {
            let mut v: Vec<String> = d["findings"].as_array().unwrap().iter().map(|f| f["id"].as_str().unwrap().to_string()).collect();
            v.sort();
            v
        };
        assert_eq!(ids(&analyzed), ids(&run), "{name}");
        assert!(!ids(&run).is_empty(), "{name} has a finding");
    }
    // The tz finding names the line of code, as run does.
    let dir = tempfile::tempdir().unwrap();
    let exe = victim("timeloop");
    let log = log_of(dir.path(), &[exe.to_str().unwrap(), "localtime", "1000"]);
    let out = sysdiet().args(["analyze", log.to_str().unwrap()]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("[tz-unset]"), "{text}");
    assert!(text.contains("by    use_localtime (timeloop.c:"), "{text}");
    assert!(text.contains("call sites (every call's stack"), "{text}");
}

/// A log with -T and no timestamps has each call's time but not the
/// run's: the finding says the first, and no rate or share of a run.
#[test]
fn a_log_without_timestamps_has_no_run_time() {
    let dir = tempfile::tempdir().unwrap();
    let exe = victim("timeloop");
    let log = dir.path().join("t.log");
    let out = strace(&["-f", "-T", "-o", log.to_str().unwrap()], &[exe.to_str().unwrap(), "localtime", "1000"]);
    assert!(out.status.success(), "strace: {}", stderr_of(&out));
    let out = sysdiet().args(["analyze", log.to_str().unwrap()]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().find(|l| l.starts_with("[tz-unset]")).unwrap_or_else(|| panic!("a tz-unset finding: {text}"));
    assert!(line.contains(" in the kernel, no run time in the log; "), "{line}");
    assert!(!line.contains("of a 0 ns run") && !line.contains("/s,"), "{line}");
}

/// Without -o, strace writes `[pid N]` prefixes on stderr (none while
/// there is one process).
#[test]
fn the_stderr_form_with_pid_brackets() {
    let dir = tempfile::tempdir().unwrap();
    let exe = victim("pipeline");
    let argv = [exe.to_str().unwrap(), "50"];
    let oracle = strace_counts(&[], &argv);
    let out = strace(&["-f", "-T"], &argv);
    let log = dir.path().join("stderr.log");
    std::fs::write(&log, &out.stderr).unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("[pid "), "the log has the bracket form");
    let doc = analyze_json(&[log.to_str().unwrap()]);
    assert_same_counts("[pid N] form", &oracle, &counts_of(&doc), &[]);
    assert!(doc["processes"].as_array().unwrap().len() > 1);
    assert!(doc["processes"].as_array().unwrap().iter().all(|p| p["pid"].as_u64().unwrap() > 0), "the unprefixed lines got their pid");
}

#[test]
fn a_ff_set_and_stdin() {
    let dir = tempfile::tempdir().unwrap();
    let exe = victim("pipeline");
    let argv = [exe.to_str().unwrap(), "50"];
    let oracle = strace_counts(&[], &argv);
    let base = dir.path().join("t");
    strace(&["-ff", "-o", base.to_str().unwrap()], &argv);
    let doc = analyze_json(&[base.to_str().unwrap()]);
    assert_same_counts("-ff set", &oracle, &counts_of(&doc), &[]);
    assert!(doc["run"]["log"]["files"].as_u64().unwrap() > 1);

    let log = log_of(dir.path(), &argv);
    let out = sysdiet().args(["analyze", "--json", "-"]).stdin(std::fs::File::open(&log).unwrap()).output().unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_same_counts("stdin", &oracle, &counts_of(&doc), &[]);
}

/// Without -T there is no time; findings still come, ranked by calls, and
/// the report says what the log lacked.
#[test]
fn a_log_without_times_or_stacks() {
    let dir = tempfile::tempdir().unwrap();
    let exe = victim("timeloop");
    let log = dir.path().join("plain.log");
    strace(&["-o", log.to_str().unwrap()], &[exe.to_str().unwrap(), "localtime", "2000"]);
    let out = sysdiet().args(["analyze", log.to_str().unwrap()]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert!(text.contains("the log has no -f (children), -T (time per call), -k (call sites)"), "{text}");
    assert!(text.contains("time: not in the log"), "{text}");
    assert!(text.contains("[tz-unset] 1,999 × newfstatat(\"/etc/localtime\")"), "{text}");
    assert!(!text.contains("saves"), "no time, no saving: {text}");
}

/// A statloop's whole log, and its first `at(bytes)` bytes in cut.log.
fn statloop_log_cut(dir: &Path, at: impl Fn(&[u8]) -> usize) -> (PathBuf, PathBuf) {
    let exe = victim("statloop");
    let log = log_of(dir, &[exe.to_str().unwrap(), "/etc/passwd", "500"]);
    let bytes = std::fs::read(&log).unwrap();
    let cut = dir.join("cut.log");
    std::fs::write(&cut, &bytes[..at(&bytes)]).unwrap();
    (log, cut)
}

/// Cut in the middle of a line: the log says it ends mid-way.
#[test]
fn a_cut_log_is_read_and_marked_incomplete() {
    let dir = tempfile::tempdir().unwrap();
    // Two thirds in, moved off any line's end so the last line is cut.
    let (_, cut) = statloop_log_cut(dir.path(), |bytes| {
        let mut at = bytes.len() * 2 / 3;
        while bytes[at - 1] == b'\n' || bytes[at] == b'\n' {
            at += 1;
        }
        at
    });
    let doc = analyze_json(&[cut.to_str().unwrap()]);
    assert_eq!(doc["run"]["log"]["incomplete"], true);
    assert!(counts_of(&doc)["newfstatat"].0 > 100);
    let out = sysdiet().args(["analyze", cut.to_str().unwrap()]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("INCOMPLETE: the log ends mid-way"));
}

/// Cut at a line's end, nothing in it looks cut; but the first process has
/// no exit line, and the report says so rather than calling it whole.
#[test]
fn a_log_cut_between_lines_says_it_ends_before_the_exit() {
    let dir = tempfile::tempdir().unwrap();
    let (log, cut) = statloop_log_cut(dir.path(), |bytes| {
        let third = bytes.len() * 2 / 3;
        third + bytes[third..].iter().position(|&b| b == b'\n').unwrap() + 1
    });
    let doc = analyze_json(&[cut.to_str().unwrap()]);
    assert_eq!(doc["run"]["log"]["incomplete"], false);
    assert_eq!(doc["run"]["log"]["ends_before_exit"], true);
    let out = sysdiet().args(["analyze", cut.to_str().unwrap()]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("the log ends before the first process exited (cut, or strace detached)"), "{text}");
    // The whole log has the exit line.
    let whole = analyze_json(&[log.to_str().unwrap()]);
    assert_eq!(whole["run"]["log"]["ends_before_exit"], false);
}

#[test]
fn bad_input_gets_one_line_and_exit_1() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("empty.log"), "").unwrap();
    std::fs::write(d.join("binary.log"), b"\x7fELF\x02\x01\x01\x00\x00\x00").unwrap();
    std::fs::write(d.join("notes.txt"), "\nmeeting notes\nopen(the door)\n").unwrap();
    std::fs::write(d.join("summary.txt"), "% time     seconds  usecs/call     calls    errors syscall\n").unwrap();
    let cases: &[(&str, &str)] = &[
        ("empty.log", "empty.log: is empty: no strace output in it"),
        ("binary.log", "binary.log: is a binary file, not strace's text output"),
        ("notes.txt", "notes.txt: line 2 is not strace output: `meeting notes`"),
        ("summary.txt", "summary.txt: line 1 is not strace output"),
        ("missing.log", "missing.log: no such file (nor a -ff set of it: PATH.PID)"),
        (".", "is a directory: give the log file (strace -o FILE)"),
    ];
    for (file, message) in cases {
        let out = sysdiet().current_dir(d).args(["analyze", file]).output().unwrap();
        let err = stderr_of(&out);
        assert_eq!(out.status.code(), Some(1), "{file}: {err}");
        assert!(err.starts_with("sysdiet: ") && err.contains(message), "{file}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{file}: one line: {err}");
        assert!(out.stdout.is_empty());
    }
    let out = sysdiet().arg("analyze").output().unwrap();
    assert_eq!(out.status.code(), Some(2), "no file: a usage error");
}

/// A log is untrusted input: names in it reach the terminal escaped.
#[test]
fn names_from_the_log_are_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("evil.log");
    let lines: String =
        (0..200).map(|_| "7 newfstatat(AT_FDCWD, \"/tmp/\\33[2J\\33]0;pwned\\7\", 0x7ffd, 0) = -1 ENOENT (No such file or directory)\n").collect();
    std::fs::write(&log, format!("7 execve(\"/bin/x\\33[31m\", [\"x\\33[31m\"], 0x1 /* 1 var */) = 0\n{lines}")).unwrap();
    let out = sysdiet().args(["analyze", "--all", log.to_str().unwrap()]).output().unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    assert!(!out.stdout.contains(&0x1b), "no raw escape reaches the terminal");
    assert!(String::from_utf8_lossy(&out.stdout).contains("\\x1b"), "shown escaped");
}

/// The loader's LD_LIBRARY_PATH search, read from a log: with `-v`, the
/// log holds each execve's environment, and the finding names the
/// variable, as run does; the same lookups are not repeated-path's too.
#[test]
fn a_log_with_environments_names_ld_library_path() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("trace.log");
    let script = "for i in $(seq 50); do LD_LIBRARY_PATH=/opt/a:/opt/b /bin/true; done";
    let out = strace(&["-f", "-v", "-o", log.to_str().unwrap()], &["sh", "-c", script]);
    assert!(out.status.success());
    let doc = analyze_json(&[log.to_str().unwrap()]);
    let ids: Vec<&str> = doc["findings"].as_array().unwrap().iter().map(|f| f["id"].as_str().unwrap()).collect();
    assert_eq!(ids.iter().filter(|i| **i == "library-search").count(), 1, "{ids:?}");
    assert!(!ids.contains(&"repeated-path") && !ids.contains(&"failing-calls"), "{ids:?}");
    let f = doc["findings"].as_array().unwrap().iter().find(|f| f["id"] == "library-search").unwrap();
    assert!(f["what"].as_str().unwrap().ends_with("LD_LIBRARY_PATH=\"/opt/a:/opt/b\""), "{f}");
    assert_eq!(f["processes"].as_array().unwrap().len(), 50);
}

/// A log without times of a short start-up (an interpreter importing a
/// few modules: about 2,000 calls, a hundred of them its isatty checks)
/// has no finding worth a report; --all shows the small ones.
#[test]
fn a_short_start_up_without_times_reports_nothing_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("python.log");
    let out = strace(&["-f", "-o", log.to_str().unwrap()], &["python3", "-c", "import json, email, http.client, asyncio"]);
    assert!(out.status.success());
    let doc = analyze_json(&[log.to_str().unwrap()]);
    assert_eq!(doc["run"]["time"]["kind"], "unmeasured");
    assert_eq!(doc["findings"].as_array().unwrap().len(), 0, "{}", doc["findings"]);
    let all = analyze_json(&["--all", log.to_str().unwrap()]);
    assert!(!all["findings"].as_array().unwrap().is_empty(), "--all shows the small ones");
}
