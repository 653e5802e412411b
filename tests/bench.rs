//! sysdiet bench: syscalls per call counted right, every loop in the JSON,
//! a valid plot, and bad input refused. Timings are never asserted.

use crate::common::*;
use serde_json::Value;

/// `sysdiet bench ARGS --json`: (exit code, document, stderr).
fn bench(args: &[&str]) -> (Option<i32>, Value, String) {
    let out = sysdiet().arg("bench").args(args).arg("--json").output().unwrap();
    let doc = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out.status.code(), doc, String::from_utf8_lossy(&out.stderr).into_owned())
}

fn bench_loop<'a>(doc: &'a Value, id: &str) -> &'a Value {
    doc["loops"].as_array().unwrap().iter().find(|k| k["id"] == id).unwrap_or_else(|| panic!("{id} in {doc}"))
}

fn syscalls(doc: &Value, id: &str) -> f64 {
    bench_loop(doc, id)["syscalls"]["total"].as_f64().unwrap_or_else(|| panic!("{id} counted: {doc}"))
}

/// The syscall a loop makes most.
fn top_syscall(doc: &Value, id: &str) -> String {
    bench_loop(doc, id)["syscalls"]["by_syscall"][0]["name"].as_str().unwrap_or("").to_string()
}

fn about(x: f64, want: f64) -> bool {
    (x - want).abs() < 0.01
}

#[test]
fn syscalls_per_call_are_counted_not_guessed() {
    if skip_without_bpf() {
        return;
    }
    let only = "localtime,clock_gettime:monotonic,clock_gettime:process_cputime,sigprocmask,getcontext,sigsetjmp,_setjmp";
    let (code, doc, err) = bench(&["--only", only, "--iterations", "2000", "--runs", "1"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(doc["syscalls_not_counted"].is_null(), "{doc}");

    // TZ unset: a stat of the zone file per call; set: none.
    assert!(about(syscalls(&doc, "localtime:tz_unset"), 1.0), "{doc}");
    assert!(top_syscall(&doc, "localtime:tz_unset").contains("stat"), "{doc}");
    assert_eq!(syscalls(&doc, "localtime:tz_set"), 0.0, "{doc}");

    // The vDSO answers MONOTONIC when it can read the clocksource; a
    // process's CPU clock is always the kernel's.
    let monotonic = syscalls(&doc, "clock_gettime:monotonic");
    if doc["host"]["vdso_clock"] == true {
        assert_eq!(monotonic, 0.0, "{doc}");
    } else {
        assert!(about(monotonic, 1.0), "no vDSO on this clocksource: {doc}");
    }
    assert!(about(syscalls(&doc, "clock_gettime:process_cputime"), 1.0), "{doc}");
    assert_eq!(top_syscall(&doc, "clock_gettime:process_cputime"), "clock_gettime");

    // The signal mask: every call asks the kernel, unless nothing is saved.
    assert!(about(syscalls(&doc, "sigprocmask"), 1.0), "{doc}");
    assert_eq!(top_syscall(&doc, "sigprocmask"), "rt_sigprocmask");
    assert!(syscalls(&doc, "getcontext") >= 1.0 - 0.01, "{doc}");
    assert_eq!(top_syscall(&doc, "getcontext"), "rt_sigprocmask");
    assert!(syscalls(&doc, "sigsetjmp:mask") >= 1.0 - 0.01, "{doc}");
    assert_eq!(syscalls(&doc, "sigsetjmp:no_mask"), 0.0, "{doc}");
    assert_eq!(syscalls(&doc, "_setjmp"), 0.0, "{doc}");
}

#[test]
fn the_json_has_every_loop_timed_and_counted() {
    if skip_without_bpf() {
        return;
    }
    let list = sysdiet().args(["bench", "--list"]).output().unwrap();
    assert_eq!(list.status.code(), Some(0));
    let ids: Vec<String> = String::from_utf8_lossy(&list.stdout).lines().skip(1).map(|l| l.split_whitespace().next().unwrap().to_string()).collect();
    assert!(ids.len() > 25, "{ids:?}");

    let (code, doc, err) = bench(&["--iterations", "200", "--runs", "2"]);
    assert_eq!(code, Some(0), "{err}");
    let got: Vec<&str> = doc["loops"].as_array().unwrap().iter().map(|k| k["id"].as_str().unwrap()).collect();
    assert_eq!(got, ids);
    for k in doc["loops"].as_array().unwrap() {
        let t = &k["times"][0];
        assert_eq!(t["threads"], 1, "{k}");
        assert_eq!(t["iterations"], 200, "{k}");
        assert_eq!(t["runs_ns_per_call"].as_array().unwrap().len(), 2, "{k}");
        assert!(t["ns_per_call"]["median"].as_f64().unwrap() >= 0.0, "{k}");
        assert!(k["syscalls"]["total"].is_number(), "{k}");
    }
    for fact in ["cpu", "kernel", "glibc"] {
        assert!(!doc["host"][fact].as_str().unwrap().is_empty(), "{fact}: {doc}");
    }
    assert_eq!(doc["interrupted"], false);
}

#[test]
fn threads_give_one_time_per_count() {
    if skip_without_bpf() {
        return;
    }
    let (code, doc, err) = bench(&["--only", "getpid,localtime_r", "--threads", "1,2", "--iterations", "500", "--runs", "1"]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(doc["threads"], serde_json::json!([1, 2]));
    for id in ["getpid", "localtime_r"] {
        let threads: Vec<u64> = bench_loop(&doc, id)["times"].as_array().unwrap().iter().map(|t| t["threads"].as_u64().unwrap()).collect();
        assert_eq!(threads, [1, 2], "{doc}");
    }
    // Counted again on two threads: getpid still makes its one call (the
    // futex waits contention may add vary, and are not asserted).
    let contended = &bench_loop(&doc, "getpid")["contended_syscalls"][0];
    assert_eq!(contended["threads"], 2, "{doc}");
    let getpid = contended["syscalls"]["by_syscall"].as_array().unwrap().iter().find(|s| s["name"] == "getpid").unwrap();
    assert!(about(getpid["per_call"].as_f64().unwrap(), 1.0), "{doc}");
    assert_eq!(bench_loop(&doc, "getpid")["contended_syscalls"].as_array().unwrap().len(), 1);
}

#[test]
fn the_table_shows_the_host_and_the_seeds_three_cases() {
    if skip_without_bpf() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (md, json) = (dir.path().join("b.md"), dir.path().join("b.json"));
    let out = sysdiet()
        .args(["bench", "--only", "none,localtime,gettimeofday", "--iterations", "20000", "--runs", "1", "--export-markdown"])
        .arg(&md)
        .arg("--export-json")
        .arg(&json)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    for want in ["cpu ", "kernel ", "glibc 2.", "clocksource ", "tz ", "20,000 calls per thread", "per run"] {
        assert!(text.contains(want), "{want:?} in\n{text}");
    }
    let rows: Vec<&str> =
        text.lines().filter(|l| l.starts_with("  none") || l.starts_with("  localtime") || l.starts_with("  gettimeofday")).collect();
    assert_eq!(rows.len(), 4, "none, localtime twice, gettimeofday:\n{text}");
    let unset = rows.iter().find(|r| r.contains("TZ unset")).unwrap();
    assert!(unset.contains("1.00  newfstatat") || unset.contains("1.00  stat"), "{unset}");
    // The exports, besides the table: the same loops.
    let table = std::fs::read_to_string(&md).unwrap();
    assert!(table.starts_with("| loop | ns/call, 1 thread | syscalls/call |\n|---|---:|---|\n"), "{table}");
    assert!(table.lines().any(|l| l.starts_with("| localtime") && l.contains("TZ unset") && l.ends_with("| 1.00  newfstatat |")), "{table}");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!((doc["version"].clone(), doc["loops"].as_array().unwrap().len()), (1.into(), 4));
}

/// The text of every <text> element of an SVG, which must be well-formed.
fn svg_texts(svg: &str) -> Vec<String> {
    let mut reader = quick_xml::Reader::from_str(svg);
    let (mut texts, mut in_text) = (Vec::<String>::new(), false);
    loop {
        let event = reader.read_event().unwrap_or_else(|e| panic!("not well-formed XML at {}: {e}", reader.buffer_position()));
        match event {
            quick_xml::events::Event::Eof => break,
            quick_xml::events::Event::Start(e) if e.name().as_ref() == b"text" => {
                in_text = true;
                texts.push(String::new());
            }
            quick_xml::events::Event::End(_) => in_text = false,
            quick_xml::events::Event::Text(t) if in_text => texts.last_mut().unwrap().push_str(&t.decode().unwrap()),
            quick_xml::events::Event::GeneralRef(r) if in_text => {
                let ch = match r.decode().unwrap().as_ref() {
                    "quot" => '"',
                    "amp" => '&',
                    "lt" => '<',
                    "gt" => '>',
                    other => panic!("unexpected entity &{other};"),
                };
                texts.last_mut().unwrap().push(ch);
            }
            _ => {}
        }
    }
    texts
}

#[test]
fn the_svg_is_valid_and_names_the_loops() {
    if skip_without_bpf() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for threads in ["1", "1,2"] {
        let svg = dir.path().join(format!("plot-{threads}.svg"));
        let (code, doc, err) = bench(&[
            "--only",
            "strftime,sigsetjmp,getpid",
            "--threads",
            threads,
            "--iterations",
            "300",
            "--runs",
            "1",
            "--svg",
            svg.to_str().unwrap(),
        ]);
        assert_eq!(code, Some(0), "{err}");
        let text = std::fs::read_to_string(&svg).unwrap();
        assert!(text.starts_with("<svg"), "{text}");
        let texts = svg_texts(&text);
        for k in doc["loops"].as_array().unwrap() {
            let label = k["label"].as_str().unwrap();
            assert!(texts.iter().any(|t| t == label), "{threads}: {label:?} in {texts:?}");
        }
    }
}

#[test]
fn without_bpf_rights_times_are_shown_and_counts_say_why_not() {
    if skip_without_bpf() {
        return;
    }
    let out = std::process::Command::new("setpriv")
        .args(["--inh-caps=-all", "--bounding-set=-all", "--"])
        .arg(env!("CARGO_BIN_EXE_sysdiet"))
        .args(["bench", "--only", "getpid", "--iterations", "1000", "--runs", "1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    let row = text.lines().find(|l| l.starts_with("  getpid")).unwrap();
    assert!(row.trim_end().ends_with('?'), "{row}");
    assert!(text.contains("not counted") && text.contains("CAP_BPF"), "{text}");

    // No kernel BTF: the same, with that reason.
    let (code, doc, err) = {
        let out = sysdiet()
            .args(["bench", "--only", "getpid", "--iterations", "1000", "--runs", "1", "--json"])
            .env("SYSDIET_KERNEL_BTF", "/no/such/btf")
            .output()
            .unwrap();
        (out.status.code(), serde_json::from_slice::<Value>(&out.stdout).unwrap(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    assert_eq!(code, Some(0), "{err}");
    assert!(doc["syscalls_not_counted"].as_str().unwrap().contains("no BTF"), "{doc}");
    assert!(bench_loop(&doc, "getpid")["syscalls"].is_null());
    assert_eq!(bench_loop(&doc, "getpid")["times"][0]["iterations"], 1000);
}

#[test]
fn bad_input_is_refused_with_a_reason() {
    let cases: &[(&[&str], i32, &str)] = &[
        (&["--only", "localtim"], 2, "unknown loop `localtim` (see `sysdiet bench --list`)"),
        (&["--threads", "0"], 2, "--threads 0"),
        (&["--threads", "two"], 2, "invalid value"),
        (&["--runs", "0"], 2, "--runs 0"),
        (&["--runs", "4294967295"], 2, "--runs 4294967295: give at most 10000 runs"),
        (&["--iterations", "0"], 2, "--iterations 0"),
        (&["--only", "getpid", "--runs", "1", "--iterations", "10", "--svg", "/no/such/dir/p.svg"], 1, "/no/such/dir/p.svg"),
    ];
    for (args, code, message) in cases {
        let out = sysdiet().arg("bench").args(*args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(*code), "{args:?}: {err}");
        assert!(err.contains(message), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    let out = sysdiet().args(["__bench-worker", "99999", "1"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("run by `sysdiet bench`"));
}
