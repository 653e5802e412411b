//! Syscall budgets for CI: `sysdiet diff BASE NEW` between saved runs (run
//! --json documents and strace logs) with its limits, and `run --budget`.

use crate::common::*;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Exit status of a broken limit (docs, README).
const BREACH: i32 = 3;

/// `c` with TZ unset, or set to `tz`.
fn with_tz<'a>(c: &'a mut Command, tz: Option<&str>) -> &'a mut Command {
    c.env_remove("TZ");
    if let Some(tz) = tz {
        c.env("TZ", tz);
    }
    c
}

/// `sysdiet run --json -o DIR/NAME.json` of timeloop localtime 2000, with
/// TZ set or not.
fn saved_run(dir: &Path, name: &str, tz: Option<&str>) -> PathBuf {
    let json = dir.join(format!("{name}.json"));
    let mut c = sysdiet();
    c.args(["run", "--backend", "bpf", "--json", "-o"]).arg(&json).arg("--").arg(victim("timeloop")).args(["localtime", "2000"]);
    let out = with_tz(&mut c, tz).stdout(std::process::Stdio::null()).output().unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    json
}

/// A log of `strace -f -o` of the same, with TZ set or not.
fn strace_log(dir: &Path, name: &str, tz: Option<&str>) -> PathBuf {
    let log = dir.join(format!("{name}.strace"));
    let mut c = Command::new("strace");
    c.args(["-f", "-qq", "-o"]).arg(&log).arg(victim("timeloop")).args(["localtime", "2000"]);
    assert!(with_tz(&mut c, tz).stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null()).status().unwrap().success());
    log
}

fn diff(args: &[&str], base: &Path, new: &Path) -> Output {
    sysdiet().arg("diff").args(args).arg(base).arg(new).output().unwrap()
}

fn stdout_of(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn two_runs_of_the_zone_file_loop_differ_by_its_lookups() {
    if skip_without_bpf() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (set, unset) = (saved_run(dir.path(), "set", Some(":/etc/localtime")), saved_run(dir.path(), "unset", None));

    let out = diff(&["--json"], &set, &unset);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let doc: serde_json::Value = serde_json::from_str(&stdout_of(&out)).unwrap();
    let d = &doc["diff"];
    let stat = d["syscalls"].as_array().unwrap().iter().find(|s| s["syscall"] == "newfstatat").expect("newfstatat changed");
    assert_eq!(stat["calls"]["variant"].as_u64().unwrap() - stat["calls"]["baseline"].as_u64().unwrap(), 1999);
    let path = d["arguments"].as_array().unwrap().iter().find(|a| a["argument"]["path"] == "/etc/localtime").expect("the path");
    assert_eq!(path["calls"]["variant"], 1999);
    assert!(d["sites"].as_array().unwrap().iter().any(|s| s["syscall"] == "newfstatat" && s["function"] == "use_localtime"), "{d}");
    assert!(d["findings"].as_array().unwrap().iter().any(|f| f["rule"] == "tz-unset" && f["baseline"].is_null()), "{d}");
    assert!(doc["machine_dependent"].as_array().unwrap().iter().any(|m| m["what"] == "/etc/localtime"));

    let text = stdout_of(&diff(&[], &set, &unset));
    assert!(text.contains("newfstatat by use_localtime (timeloop.c:"), "{text}");
    assert!(text.contains("new in NEW: [tz-unset]"), "{text}");

    // The limits: growth past 10% breaks them, a run against itself not.
    let out = diff(&["--max-increase", "10%"], &set, &unset);
    assert_eq!(out.status.code(), Some(BREACH));
    let text = stdout_of(&out);
    assert!(text.lines().any(|l| l.starts_with("LIMIT BROKEN (--max-increase 10%): newfstatat: ")), "{text}");
    assert_eq!(diff(&["--max-increase", "10%", "--fail-on-new-findings"], &unset, &unset).status.code(), Some(0));
    let out = diff(&["--fail-on-new-findings"], &set, &unset);
    assert_eq!(out.status.code(), Some(BREACH));
    assert!(stdout_of(&out).contains("LIMIT BROKEN (--fail-on-new-findings): new finding [tz-unset]"));
    // Fewer calls break nothing.
    assert_eq!(diff(&["--max-increase", "10%", "--fail-on-new-findings"], &unset, &set).status.code(), Some(0));
    // What the machine decides can be left out: then nothing grew.
    let ignored = diff(&["--max-increase", "10%", "--ignore", "newfstatat"], &set, &unset);
    assert_eq!(ignored.status.code(), Some(0), "{}", stdout_of(&ignored));

    let md = stdout_of(&diff(&["--markdown"], &set, &unset));
    assert!(md.contains("| `newfstatat` |") && md.contains("| `newfstatat(\"/etc/localtime\")` | 0 | 1,999 | +1,999 (new) |"), "{md}");
}

#[test]
fn two_strace_logs_diff_the_same_way() {
    let dir = tempfile::tempdir().unwrap();
    let (set, unset) = (strace_log(dir.path(), "set", Some(":/etc/localtime")), strace_log(dir.path(), "unset", None));
    let out = diff(&["--json", "--max-increase", "10%"], &set, &unset);
    assert_eq!(out.status.code(), Some(BREACH), "{}", stderr_of(&out));
    let doc: serde_json::Value = serde_json::from_str(&stdout_of(&out)).unwrap();
    let stat = doc["diff"]["syscalls"].as_array().unwrap().iter().find(|s| s["syscall"] == "newfstatat").expect("newfstatat changed");
    assert_eq!(stat["calls"]["variant"].as_u64().unwrap() - stat["calls"]["baseline"].as_u64().unwrap(), 1999);
    assert!(doc["diff"]["findings"].as_array().unwrap().iter().any(|f| f["rule"] == "tz-unset"));
    assert!(doc["breaches"].as_array().unwrap().iter().any(|b| b["what"].as_str().unwrap().starts_with("newfstatat: ")));
}

#[test]
fn bad_inputs_to_diff_are_one_line_each() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    let run = write("run.json", r#"{"version": 1, "run": {}, "syscalls": []}"#);
    let cases = [
        (dir.path().join("missing.json"), "no such file (check the path)", 1),
        (
            write("v9.json", r#"{"version": 9, "run": {}, "syscalls": []}"#),
            "a sysdiet document of version 9; this sysdiet reads version 1: save the run again with it",
            1,
        ),
        (
            write("compare.json", r#"{"version": 1, "variants": []}"#),
            "a compare result, not a run's: give what sysdiet run --json wrote, or a strace -f -o log",
            1,
        ),
        (
            write("other.json", r#"{"name": "x"}"#),
            "JSON, but no sysdiet document (it has no version): give what sysdiet run --json wrote, or a strace -f -o log",
            1,
        ),
        (write("notes.txt", "hello\n"), "line 1 is not strace output: `hello` (give a log written by strace -f -o FILE)", 1),
    ];
    for (path, why, code) in cases {
        let out = diff(&[], &path, &run);
        assert_eq!(out.status.code(), Some(code), "{}: {}", path.display(), stderr_of(&out));
        assert_eq!(stderr_of(&out).trim_end(), format!("sysdiet: {}: {why}", path.display()));
    }
    let out = diff(&["--max-increase", "ten"], &run, &run);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr_of(&out).contains("`ten` is not a percentage (10%, 0.5%, 0)"), "{}", stderr_of(&out));
}

#[test]
fn a_budget_fails_the_zone_file_loop_only_with_tz_unset() {
    if skip_without_bpf() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let budget = dir.path().join("budget.toml");
    std::fs::write(&budget, "[calls]\nnewfstatat = 100\n[paths]\n\"/etc/localtime\" = 1\n").unwrap();
    let run = |tz: Option<&str>| {
        let mut c = sysdiet();
        c.arg("run").arg("--budget").arg(&budget).arg("--").arg(victim("timeloop")).args(["localtime", "2000"]);
        with_tz(&mut c, tz).stdout(std::process::Stdio::null()).output().unwrap()
    };
    let out = run(None);
    assert_eq!(out.status.code(), Some(BREACH));
    let err = stderr_of(&out);
    let broken: Vec<&str> = err.lines().filter(|l| l.starts_with("BUDGET BROKEN")).collect();
    assert_eq!(broken.len(), 2, "{err}");
    let file = budget.display().to_string();
    assert!(broken[0].starts_with(&format!("BUDGET BROKEN ({file}, newfstatat = 100): newfstatat: 2,0")), "{err}");
    assert!(broken[0].ends_with(" calls, over 100"), "{err}");
    assert_eq!(broken[1], format!("BUDGET BROKEN ({file}, \"/etc/localtime\" = 1): calls naming /etc/localtime: 1,999 calls, over 1"));
    let out = run(Some(":/etc/localtime"));
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(stderr_of(&out).contains("budget ") && stderr_of(&out).contains(": kept"));

    // A malformed budget: one line, exit 2, and the command is not run.
    let marker = dir.path().join("ran");
    std::fs::write(&budget, "[calls]\nnewfstatat = \"many\"\n").unwrap();
    let out = sysdiet().arg("run").arg("--budget").arg(&budget).args(["--", "touch"]).arg(&marker).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = stderr_of(&out);
    assert!(err.starts_with(&format!("sysdiet: {}:2: invalid type: string \"many\", expected u64", budget.display())), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(!marker.exists(), "the command ran");
    let out = sysdiet().arg("run").arg("--budget").arg(dir.path().join("none.toml")).args(["--", "true"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stderr_of(&out).trim_end(), format!("sysdiet: {}: no such file (check the path)", dir.path().join("none.toml").display()));
}

/// docs/ci.md's plain shell job, run as written: a clean run keeps the
/// budget and leaves its document; a run that stats the zone file on every
/// call breaks the budget and the diff against the first, writes the
/// Markdown comment, and fails the job with status 3.
#[test]
fn the_shell_job_of_docs_ci_works_as_written() {
    if skip_without_bpf() {
        return;
    }
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/ci.md")).unwrap();
    let section = &doc[doc.find("## A plain shell job").expect("the section")..];
    let start = section.find("```sh\n").expect("its sh block") + "```sh\n".len();
    let recipe = &section[start..start + section[start..].find("```").unwrap()];

    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("job.sh"), recipe).unwrap();
    std::fs::write(d.join("syscalls.toml"), "[calls]\nnewfstatat = 100\n").unwrap();
    std::fs::write(d.join("run-tests"), format!("#!/bin/sh\nexec {} localtime 2000 > /dev/null\n", victim("timeloop").display())).unwrap();
    std::fs::set_permissions(d.join("run-tests"), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let bin = Path::new(env!("CARGO_BIN_EXE_sysdiet")).parent().unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let job = |tz: Option<&str>| {
        let mut c = Command::new("bash");
        c.arg("job.sh").current_dir(d).env("PATH", &path).env_remove("LD_LIBRARY_PATH");
        with_tz(&mut c, tz).output().unwrap()
    };

    let out = job(Some(":/etc/localtime"));
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(d.join("new.json").exists() && !d.join("diff.md").exists());
    std::fs::rename(d.join("new.json"), d.join("main.json")).unwrap();

    let out = job(None);
    assert_eq!(out.status.code(), Some(BREACH), "{}", stderr_of(&out));
    assert!(stderr_of(&out).lines().any(|l| l.starts_with("BUDGET BROKEN (syscalls.toml, newfstatat = 100): ")), "{}", stderr_of(&out));
    let said = stdout_of(&out);
    assert!(said.lines().any(|l| l.starts_with("LIMIT BROKEN (--max-increase 10%): newfstatat: ")), "{said}");
    assert!(said.lines().any(|l| l.starts_with("LIMIT BROKEN (--fail-on-new-findings): new finding [tz-unset]")), "{said}");
    let comment = std::fs::read_to_string(d.join("diff.md")).unwrap();
    assert!(comment.contains("| `newfstatat` |") && comment.contains("tz-unset"), "{comment}");
}
