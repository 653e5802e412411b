//! A cold start of `run --backend auto`: the command starts under ptrace
//! while the BPF programs load, and each thread goes to BPF at a syscall
//! exit (src/pipeline/handover.rs). The counts stay strace's whichever
//! tracer counted a call.

use crate::common::*;

/// No keeper: the run loads its own programs.
const COLD: (&str, &str) = ("SYSDIET_KEEP", "0");

/// No hand-over for a minute (and the command runs on under ptrace
/// meanwhile, not held for BPF).
const NEVER: (&str, &str) = ("SYSDIET_TEST_HANDOVER_MS", "60000");

fn auto_run(argv: &[&str], env: &[(&str, &str)]) -> serde_json::Value {
    let (doc, out) = sysdiet_json_env(&["--backend", "auto"], argv, env);
    assert!(out.status.success(), "{argv:?}: {}", String::from_utf8_lossy(&out.stderr));
    doc
}

fn assert_as_strace(what: &str, oracle: &Counts, doc: &serde_json::Value, compared: &[&str]) {
    let only = |c: &Counts| -> Counts {
        c.iter().filter(|(k, _)| compared.is_empty() || compared.contains(&k.as_str())).map(|(k, v)| (k.clone(), *v)).collect()
    };
    if let Err(e) = same_counts_but_missed(what, &only(oracle), &only(&counts_of(doc)), &[], hook_runs_missed(doc)) {
        panic!("{e}\nrun: {}", doc["run"]);
    }
}

/// How many threads went to BPF, and how many stayed with ptrace.
fn handed(doc: &serde_json::Value) -> (u64, u64) {
    let first = &doc["run"]["ptrace_first"];
    (first["threads_handed"].as_u64().unwrap_or(0), first["threads_kept"].as_u64().unwrap_or(0))
}

#[test]
fn a_cold_start_hands_the_command_to_bpf_and_counts_as_strace() {
    if skip_without_bpf() {
        return;
    }
    // Seconds under ptrace: the load ends long before.
    let exe = victim("timeloop");
    let argv = [exe.to_str().unwrap(), "localtime", "100000"];
    let oracle = strace_counts(&[], &argv);
    let doc = auto_run(&argv, &[COLD]);
    assert_eq!(doc["run"]["backend"], "bpf", "{}", doc["run"]);
    assert!(doc["run"]["fallback"].is_null());
    assert_eq!(handed(&doc), (1, 0));
    let first = &doc["run"]["ptrace_first"];
    let ptrace_calls = first["calls"].as_u64().unwrap();
    // execve at least; not the whole loop.
    assert!((1..100_000).contains(&ptrace_calls), "{first}");
    assert!(first["ns"].as_u64().unwrap() > 0);
    assert_as_strace("timeloop", &oracle, &doc, &[]);
    // Ptrace's calls are counted untimed: the times are BPF's samples.
    assert_eq!(doc["run"]["time"]["kind"], "cpu_sampled", "{}", doc["run"]["time"]);

    let out = sysdiet().args(["run", "--backend", "auto", "--"]).args(argv).env(COLD.0, COLD.1).output().unwrap();
    assert!(out.status.success());
    // The report goes to stderr when no -o names a file.
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("counted by bpf · ptrace counted the first "), "{text}");
    assert!(text.contains(" while BPF loaded ("), "{text}");
}

/// With the hand-over held back, the command's children and threads are
/// under ptrace when it comes: each goes over at its own next exit.
#[test]
fn children_and_threads_made_before_the_hand_over_go_over_too() {
    if skip_without_bpf() {
        return;
    }
    // Two processes that run for seconds under ptrace, beside their shell.
    let exe = victim("timeloop");
    let script = format!("{0} localtime 100000 & {0} localtime 100000; wait", exe.display());
    let argv = ["sh", "-c", script.as_str()];
    let oracle = strace_counts(&[], &argv);
    let doc = auto_run(&argv, &[COLD, ("SYSDIET_TEST_HANDOVER_MS", "100")]);
    assert_eq!(doc["run"]["backend"], "bpf", "{}", doc["run"]);
    let (went, stayed) = handed(&doc);
    assert!(went >= 2 && stayed == 0, "both loops, and the shell once its wait returns: {}", doc["run"]);
    // The shell's wait may be cut by SIGCHLD: what it waits with is timing's.
    assert_as_strace("two loops", &oracle, &doc, &["newfstatat", "execve", "openat", "mmap", "write"]);

    // Threads: their futex calls are timing's (threads_calling_localtime).
    let exe = victim("threads");
    let argv = [exe.to_str().unwrap(), "4", "20000"];
    let oracle = strace_counts(&[], &argv);
    let doc = auto_run(&argv, &[COLD, ("SYSDIET_TEST_HANDOVER_MS", "30")]);
    let (went, stayed) = handed(&doc);
    // Before Linux 6.9 a thread has no pidfd to be handed by: it stays.
    assert_eq!(went + stayed, 5, "main + 4 threads: {}", doc["run"]);
    assert_as_strace("threads", &oracle, &doc, &["newfstatat", "clone3", "execve", "openat", "read", "mmap"]);
}

#[test]
fn a_command_that_ends_while_bpf_loads_is_counted_by_ptrace() {
    if skip_without_bpf() {
        return;
    }
    let exe = victim("clean");
    let argv = [exe.to_str().unwrap()];
    let oracle = strace_counts(&[], &argv);
    // BPF not ready for a minute: the command ends first, however slow
    // the host (a guest under TCG).
    let doc = auto_run(&argv, &[COLD, NEVER]);
    assert_eq!(doc["run"]["backend"], "ptrace", "{}", doc["run"]);
    assert_eq!(doc["run"]["fallback"], "the command ended before BPF took it over");
    assert!(doc["run"]["ptrace_first"].is_null());
    assert_as_strace("clean", &oracle, &doc, &[]);
}

#[test]
fn the_exit_status_passes_through_either_way() {
    if skip_without_bpf() {
        return;
    }
    let exe = victim("timeloop");
    for (work, code, backend, env) in [("1", 7, "ptrace", NEVER), ("100000", 9, "bpf", COLD)] {
        let script = format!("{} localtime {work} >/dev/null; exit {code}", exe.display());
        let (doc, out) = sysdiet_json_env(&["--backend", "auto"], &["sh", "-c", &script], &[COLD, env]);
        assert_eq!(out.status.code(), Some(code), "{}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(doc["run"]["backend"], backend, "{}", doc["run"]);
        assert_eq!(doc["run"]["exit"]["code"], code, "{}", doc["run"]);
    }
}
