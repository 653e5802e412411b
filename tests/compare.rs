//! sysdiet compare: a fix measured, an A/A run, outputs checked, bad input.

use crate::common::*;
use serde_json::Value;

fn compare(args: &[&str], command: &[&str]) -> (Option<i32>, Value, String) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("c.json");
    let out = sysdiet().arg("compare").args(args).args(["--json", "-o"]).arg(&json).arg("--").args(command).env_remove("TZ").output().unwrap();
    // The file is opened before anything runs: empty when compare failed.
    let doc = std::fs::read_to_string(&json).ok().filter(|t| !t.is_empty()).map_or(Value::Null, |t| serde_json::from_str(&t).unwrap());
    (out.status.code(), doc, String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn the_tz_fix_is_measured_and_its_stats_are_gone() {
    if skip_without_bpf() {
        return;
    }
    let exe = victim("timeloop");
    let (code, doc, err) = compare(&["--runs", "5", "--env", "TZ=:/etc/localtime"], &[exe.to_str().unwrap(), "localtime", "100000"]);
    assert_eq!(code, Some(0), "{err}");
    let (a, b) = (&doc["variants"][0], &doc["variants"][1]);
    assert_eq!(a["runs"].as_array().unwrap().len(), 5);
    assert_eq!(b["change"], "--env TZ=:/etc/localtime");
    // A verdict on wall time, not asserted: on a busy machine even an ~8x
    // effect can read otherwise. Which verdict the times give is the unit
    // tests' (a scripted executor); the counts below are the fix's proof.
    let vs = &b["vs_baseline"];
    assert!(["faster", "slower", "no_significant_difference"].contains(&vs["verdict"].as_str().unwrap()), "{doc}");
    assert!(vs["ci_low"].as_f64().unwrap() <= vs["ratio"].as_f64().unwrap(), "{doc}");
    assert!(vs["ratio"].as_f64().unwrap() <= vs["ci_high"].as_f64().unwrap(), "{doc}");
    assert_eq!(doc["version"], 1);
    let zone = |v: &Value| {
        v["counted"]["arguments"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["syscall"] == "newfstatat" && a["argument"]["path"] == "/etc/localtime")
            .map(|a| a["calls"].clone())
    };
    assert_eq!(zone(a), Some(99_999.into()));
    assert_eq!(zone(b), None, "gone with TZ set: {}", b["counted"]["arguments"]);
    assert!(a["counted"]["findings"].as_array().unwrap().iter().any(|f| f["rule"] == "tz-unset" && f["program"] == "timeloop"));
    assert!(b["counted"]["findings"].as_array().unwrap().is_empty(), "{b}");
    // The diff, keyed by (syscall, argument) and (rule, program).
    let d = &b["diff"];
    assert!(
        d["arguments"]
            .as_array()
            .unwrap()
            .iter()
            .any(|x| x["argument"]["path"] == "/etc/localtime" && x["calls"]["baseline"] == 99_999 && x["calls"]["variant"] == 0),
        "{d}"
    );
    let tz: Vec<&Value> = d["findings"].as_array().unwrap().iter().filter(|f| f["rule"] == "tz-unset").collect();
    assert_eq!(tz.len(), 1, "{d}");
    assert!(tz[0]["baseline"].is_string() && tz[0]["variant"].is_null(), "gone, not changed: {d}");
}

/// The verdicts on timings are the unit tests' (a scripted executor): a
/// wall-clock A/A here would fail whenever the machine is busy.
#[test]
fn each_variant_runs_untraced_in_alternating_rounds() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("order");
    let append = |label: &str| format!("echo {label} >> '{}'", log.display());
    let vs = format!("sh -c \"{}\"", append("B"));
    let (code, doc, err) = compare(&["--runs", "3", "--no-trace", "--vs", &vs], &["sh", "-c", &append("A")]);
    assert_eq!(code, Some(0), "{err}");
    let order = std::fs::read_to_string(&log).unwrap().split_whitespace().collect::<String>();
    assert_eq!(order, "ABBAABBA", "a warm-up round, then three, the order alternating");
    for v in doc["variants"].as_array().unwrap() {
        let runs = v["runs"].as_array().unwrap();
        assert_eq!(runs.len(), 3, "{v}");
        assert!(runs.iter().all(|r| r["status"] == 0 && r["wall_s"].as_f64().unwrap() > 0.0), "{v}");
    }
    let verdict = &doc["variants"][1]["vs_baseline"]["verdict"];
    assert!(["faster", "slower", "no_significant_difference"].contains(&verdict.as_str().unwrap()), "{doc}");
    assert!(doc["variants"][1].get("counted").is_none(), "--no-trace traces nothing");
}

#[test]
fn a_variant_that_prints_something_else_is_caught() {
    let (code, doc, _) = compare(&["--runs", "2", "--no-trace", "--check-output", "--vs", "echo 2 apples"], &["echo", "1 apple"]);
    assert_eq!(code, Some(1), "a fix that changes the output fails");
    assert_eq!(doc["variants"][1]["output_differs"], "line 1: baseline \"1 apple\" vs \"2 apples\"");
    // Normalized away, the outputs agree.
    let (code, doc, _) =
        compare(&["--runs", "2", "--no-trace", "--check-output", "--normalize", "[0-9]+ apples?", "--vs", "echo 2 apples"], &["echo", "1 apple"]);
    assert_eq!(code, Some(0));
    assert!(doc["variants"][1].get("output_differs").is_none());
}

#[test]
fn text_and_markdown() {
    if skip_without_bpf() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("r.md");
    let json = dir.path().join("r.json");
    let out = sysdiet()
        .args(["compare", "--runs", "3", "--export-markdown"])
        .arg(&md)
        .arg("--export-json")
        .arg(&json)
        .args(["--env", "TZ=:/etc/localtime", "--"])
        .arg(victim("timeloop"))
        .args(["localtime", "20000"])
        .env_remove("TZ")
        .output()
        .unwrap();
    // The result is the command's output: stdout.
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.starts_with("sysdiet compare: 2 variants, 3 runs each after 1 warm-up, interleaved, untraced"), "{text}");
    assert!(text.contains("B vs A: "), "{text}");
    assert!(text.contains("gone in B: [tz-unset]"), "{text}");
    assert!(!text.contains("loop_ns="), "the commands' own output stays out of the report");
    let table = std::fs::read_to_string(&md).unwrap();
    assert!(table.starts_with("| variant | change |") && table.contains("| B | `--env TZ=:/etc/localtime` |"), "{table}");
    assert!(table.contains("| `newfstatat(\"/etc/localtime\")` | 19,999 | 0 | −19,999 |"), "{table}");
    assert!(table.contains("- gone in B: [tz-unset] (timeloop) "), "{table}");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!((doc["version"].clone(), doc["variants"].as_array().unwrap().len()), (1.into(), 2));
}

#[test]
fn bad_input_is_refused_clearly() {
    if skip_without_bpf() {
        return;
    }
    let (code, _, err) = compare(&["--vs", "no-such-command-here"], &["true"]);
    assert_eq!(code, Some(127));
    assert!(err.contains("no-such-command-here: command not found"), "{err}");
    let (code, _, err) = compare(&["--runs", "0", "--env", "A=1"], &["true"]);
    assert_eq!((code, err.trim()), (Some(2), "sysdiet: --runs must be at least 1"));
    let (code, _, err) = compare(&["--env", "FOO"], &["true"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("--env FOO: write it as NAME=VALUE"), "{err}");
    let (code, _, err) = compare(&[], &["true"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("nothing to compare with"), "{err}");
    let (code, _, err) = compare(&["--runs", "2", "--vs", "false"], &["true"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("variant B (--vs false) exited with status 1") && err.contains("--ignore-failure"), "{err}");
    let (code, doc, _) = compare(&["--runs", "2", "--no-trace", "--ignore-failure", "--vs", "false"], &["true"]);
    assert_eq!(code, Some(0));
    assert_eq!(doc["variants"][1]["failed_runs"], 2);
}

/// A wrapper that resets the variable: B makes the same calls as A, and
/// the report says the change did not take effect.
#[test]
fn a_fix_that_does_not_reach_the_program_is_named() {
    if skip_without_bpf() {
        return;
    }
    let exe = victim("timeloop");
    let script = format!("unset TZ; exec {} localtime 5000", exe.display());
    let (code, doc, err) = compare(&["--runs", "3", "--env", "TZ=:/etc/localtime"], &["sh", "-c", &script]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(doc["variants"][1]["diff"]["no_effect"], true, "{}", doc["variants"][1]["diff"]);
    let out = sysdiet().args(["compare", "--runs", "3", "--env", "TZ=:/etc/localtime", "--", "sh", "-c", &script]).env_remove("TZ").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("B makes the same syscalls as A (every count within 1%): the change did not take effect"), "{text}");
    assert!(!text.contains("gone in B"), "{text}");
    // The real fix is not called that.
    let (_, doc, _) = compare(&["--runs", "3", "--env", "TZ=:/etc/localtime"], &[exe.to_str().unwrap(), "localtime", "5000"]);
    assert_eq!(doc["variants"][1]["diff"]["no_effect"], false);
}
