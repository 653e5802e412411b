//! The command line: bad inputs, exit status, signals, attach, and what the
//! reports say.

use crate::common::*;
use std::process::Stdio;

#[test]
fn unknown_command_exits_127_with_a_message() {
    let out = sysdiet().args(["run", "--", "no-such-command-sysdiet"]).output().unwrap();
    assert_eq!(out.status.code(), Some(127));
    let err = stderr_of(&out);
    assert!(err.contains("no-such-command-sysdiet: command not found"), "{err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
}

#[test]
fn not_executable_exits_126() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.sh");
    std::fs::write(&script, "#!/bin/sh\necho hi\n").unwrap();
    let out = sysdiet().args(["run", "--"]).arg(&script).output().unwrap();
    assert_eq!(out.status.code(), Some(126));
    assert!(stderr_of(&out).contains("permission denied: not executable"), "{}", stderr_of(&out));
}

#[test]
fn a_file_the_kernel_cannot_execute_exits_126() {
    if skip_without_bpf() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk");
    std::fs::write(&junk, [0x7f, b'E', b'L', b'F', 0, 0, 0, 0]).unwrap();
    std::fs::set_permissions(&junk, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let out = sysdiet().args(["run", "--"]).arg(&junk).output().unwrap();
    assert_eq!(out.status.code(), Some(126));
    assert!(stderr_of(&out).contains("cannot execute"), "{}", stderr_of(&out));
}

#[test]
fn unknown_subcommand_and_missing_command_are_usage_errors() {
    let out = sysdiet().arg("frobnicate").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr_of(&out).contains("unrecognized subcommand 'frobnicate'"));
    let out = sysdiet().arg("run").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr_of(&out).contains("COMMAND"));
}

#[test]
fn bad_filter_is_a_usage_error() {
    let out = sysdiet().args(["run", "-e", "trace=opne", "--", "true"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = stderr_of(&out);
    assert!(err.starts_with("sysdiet: -e trace=opne: unknown syscall or class `opne`"), "{err}");
}

#[test]
fn report_file_that_cannot_be_written_names_the_file() {
    let out = sysdiet().args(["run", "-o", "/nonexistent/dir/report.txt", "--", "true"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr_of(&out).contains("/nonexistent/dir/report.txt: No such file or directory"), "{}", stderr_of(&out));
}

#[test]
fn outputs_are_opened_before_the_command_runs() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    for flag in ["-o", "--folded", "--flamegraph"] {
        let out = sysdiet().args(["run", flag, "/nonexistent/dir/x", "--", "touch"]).arg(&marker).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{flag}");
        assert_eq!(stderr_of(&out).trim(), "sysdiet: /nonexistent/dir/x: No such file or directory (os error 2)", "{flag}");
        assert!(!marker.exists(), "{flag}: the command must not run when its report cannot be written");
    }
}

#[test]
fn a_bad_filter_creates_no_report_file() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report.txt");
    let out = sysdiet().args(["run", "-o"]).arg(&report).args(["-e", "trace=nonesuch", "--", "true"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(!report.exists(), "usage errors come before any output is opened");
}

#[test]
fn dash_means_stdout() {
    if skip_without_bpf() {
        return;
    }
    let out = sysdiet().args(["run", "--no-stacks", "--json", "-o", "-", "--", "true"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("the JSON report on stdout");
    assert_eq!(doc["version"], 1);
    assert!(out.stderr.is_empty(), "{}", stderr_of(&out));
}

#[test]
fn exit_status_passes_through() {
    if skip_without_bpf() {
        return;
    }
    let exe = victim("exitwith");
    let out = sysdiet().args(["run", "-o", "/dev/null", "--"]).arg(&exe).arg("7").output().unwrap();
    assert_eq!(out.status.code(), Some(7));
    // Killed by SIGTERM (15): 128 + 15, as a shell says.
    let out = sysdiet().args(["run", "-o", "/dev/null", "--"]).arg(&exe).args(["signal", "15"]).output().unwrap();
    assert_eq!(out.status.code(), Some(143));
    let (doc, _) = sysdiet_json(&[], &[exe.to_str().unwrap(), "signal", "9"]);
    assert_eq!(doc["run"]["exit"], serde_json::json!({"kind": "signal", "signal": 9, "core_dumped": false}));
}

/// Started by a parent with no descriptor above 2 open (as hyperfine,
/// sudo or make start it), sysdiet's table begins at 64 and a run holds
/// more: it must grow before the loading threads start, where the kernel
/// grows it at once, not after an RCU grace period. Its size when the
/// command runs (FDSize, read by the command from its parent's status)
/// tells which: a run's own descriptors alone grow it less.
#[test]
fn a_run_grows_its_descriptor_table_before_its_threads_start() {
    use std::os::unix::process::CommandExt;
    if skip_without_bpf() {
        return;
    }
    let script = r#""$0" run --no-stacks -o /dev/null -- sh -c 'grep FDSize /proc/$PPID/status'; exit $?"#;
    let mut sh = std::process::Command::new("sh");
    sh.args(["-c", script, env!("CARGO_BIN_EXE_sysdiet")]).env("SYSDIET_KEEP", "0").env_remove("LD_LIBRARY_PATH");
    // SAFETY: between fork and exec, only close_range, async-signal-safe.
    unsafe {
        sh.pre_exec(|| {
            libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32);
            Ok(())
        });
    }
    let out = sh.output().unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    let size: usize = text.trim().strip_prefix("FDSize:").and_then(|v| v.trim().parse().ok()).unwrap_or_else(|| panic!("no FDSize in {text:?}"));
    let want = sysdiet::linux::descriptors::for_tracing();
    assert!(size >= want, "the table holds {size} descriptors when the command runs, {want} reserved");
}

#[test]
fn commands_stdout_stays_clean_and_report_goes_to_stderr() {
    if skip_without_bpf() {
        return;
    }
    let exe = victim("clean");
    let out = sysdiet().args(["run", "--"]).arg(&exe).output().unwrap();
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout), "hello\n");
    let err = stderr_of(&out);
    assert!(err.contains("% time     seconds  usecs/call"), "{err}");
    assert!(err.contains("nothing lost"), "{err}");
}

#[test]
fn text_report_shows_repeated_paths_and_tiny_writes() {
    if skip_without_bpf() {
        return;
    }
    let exe = victim("timeloop");
    let out = sysdiet().args(["run", "--"]).arg(&exe).args(["localtime", "20000"]).env_remove("TZ").output().unwrap();
    let err = stderr_of(&out);
    assert!(err.contains("19,999 × newfstatat(\"/etc/localtime\")"), "{err}");
    let exe = victim("tinywrite");
    let out = sysdiet().args(["run", "--"]).arg(&exe).arg("3000").stdout(Stdio::null()).output().unwrap();
    let err = stderr_of(&out);
    assert!(err.contains("3,000 × write(fd 1) of ≤ 1 byte"), "{err}");
}

#[test]
fn localtime_r_does_not_repeat_the_stat() {
    if skip_without_bpf() {
        return;
    }
    let exe = victim("timeloop");
    let (doc, _) = sysdiet_json(&[], &[exe.to_str().unwrap(), "localtime_r", "20000"]);
    let stats = counts_of(&doc);
    assert!(stats.get("newfstatat").map_or(0, |c| c.0) < 10, "{stats:?}");
    let (doc, _) = sysdiet_json(&[], &[exe.to_str().unwrap(), "localtime", "20000"]);
    let path = doc["arguments"].as_array().unwrap().iter().find(|a| a["argument"]["path"] == "/etc/localtime").unwrap();
    assert_eq!(path["calls"], 20000 - 1, "the first call opens the zone file, every later one stats it");
}

#[test]
fn errors_are_broken_down_by_errno() {
    if skip_without_bpf() {
        return;
    }
    let exe = victim("failing");
    let (doc, _) = sysdiet_json(&[], &[exe.to_str().unwrap(), "100"]);
    let by_name = |n: &str| doc["syscalls"].as_array().unwrap().iter().find(|s| s["name"] == n).unwrap().clone();
    assert_eq!(by_name("ioctl")["errnos"]["ENOTTY"], 100);
    assert_eq!(by_name("close")["errnos"]["EBADF"], 100);
    assert_eq!(by_name("openat")["errnos"]["ENOENT"], 100);
    let missing =
        doc["arguments"].as_array().unwrap().iter().find(|a| a["argument"]["path"] == "/nonexistent/sysdiet" && a["syscall"] == "openat").unwrap();
    assert_eq!((missing["calls"].as_u64(), missing["errors"].as_u64()), (Some(100), Some(100)));
}

#[test]
fn json_has_version_and_whole_trace() {
    if skip_without_bpf() {
        return;
    }
    let exe = victim("pipeline");
    let (doc, _) = sysdiet_json(&[], &[exe.to_str().unwrap(), "100"]);
    assert_eq!(doc["version"], 1);
    assert_eq!(doc["run"]["backend"], "bpf");
    assert_eq!(doc["processes"].as_array().unwrap().len(), 3, "parent, forked writer, spawned reader");
    let stdin_reads = doc["arguments"].as_array().unwrap().iter().find(|a| a["syscall"] == "read" && a["argument"]["fd"] == 0).unwrap();
    assert_eq!(stdin_reads["calls"], 101, "the reader read 100 bytes one at a time, then EOF");
    let reader = doc["processes"].as_array().unwrap().iter().find(|p| p["pid"] == stdin_reads["pid"]).unwrap();
    assert_eq!(reader["exit"], serde_json::json!({"kind": "code", "code": 0}));
    assert_eq!(stdin_reads["returned"]["buckets"], serde_json::json!([1, 100]), "1 EOF, 100 single bytes");
}

#[test]
fn per_thread_breakdown_lists_threads() {
    if skip_without_bpf() {
        return;
    }
    let exe = victim("threads");
    let out = sysdiet().args(["run", "--per-thread", "--"]).arg(&exe).args(["3", "100"]).output().unwrap();
    let err = stderr_of(&out);
    assert!(err.contains("per process and thread"), "{err}");
    let rows = err.lines().skip_while(|l| !l.contains("per process and thread")).filter(|l| l.contains("newfstatat")).count();
    assert!(rows >= 3, "a row per worker thread:\n{err}");
}

#[test]
fn signal_sent_to_sysdiet_is_forwarded_and_report_printed() {
    if skip_without_bpf() {
        return;
    }
    let exe = victim("exitwith");
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("r.txt");
    let mut child = sysdiet().args(["run", "-o"]).arg(&report).arg("--").arg(&exe).arg("sleep").stdout(Stdio::piped()).spawn().unwrap();
    // The command prints its pid once it runs.
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(child.stdout.take().unwrap()), &mut line).unwrap();
    let target: i32 = line.trim().parse().unwrap();
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(128 + 15), "the command died of the forwarded SIGTERM");
    let text = std::fs::read_to_string(&report).unwrap();
    assert!(text.contains("killed by SIGTERM"), "{text}");
    assert!(text.contains(&format!("pid {target}: 1 process, 1 thread")), "{text}");
    assert!(unsafe { libc::kill(target, 0) } != 0, "the command is gone");
}

#[test]
fn attach_counts_a_running_process_until_duration() {
    if skip_without_bpf() {
        return;
    }
    let mut target = Running(std::process::Command::new(victim("statloop")).args(["/etc/passwd", "100000000"]).spawn().unwrap());
    let doc = attach_for_300ms(target.0.id());
    // Some calls, however slow the machine: a TCG guest stats about 300
    // times a second (the exact counts are attach_to_gated's tests').
    assert!(doc["syscalls"][0]["calls"].as_u64().unwrap() > 0, "{doc}");
    assert_eq!(doc["syscalls"][0]["name"], "newfstatat");
    assert_eq!(doc["run"]["interrupted"], false, "--duration ran out: not an interruption");
    assert_eq!(doc["run"]["root_pids"][0], target.0.id());
    // Detaching left the target running, untouched.
    assert!(target.0.try_wait().unwrap().is_none(), "target still runs");
}

#[test]
fn attach_ends_when_the_process_exits() {
    if skip_without_bpf() {
        return;
    }
    let (doc, err) = attach_to_gated(1, 1000, &[]);
    let pid = doc["run"]["root_pids"][0].as_u64().unwrap();
    assert!(err.starts_with(&format!("sysdiet: attached to pid {pid} (2 threads): tracing until it exits, or Ctrl-C\n")), "{err}");
    // Every call made after the attach, exactly (or as many fewer as the
    // kernel said it ran no hook for: 7.x).
    assert!(exact_but_missed(counts_of(&doc)["newfstatat"].0, 1000, hook_runs_missed(&doc)), "{doc}");
    assert_eq!(doc["run"]["interrupted"], false);
}

#[test]
fn attach_to_a_dead_or_unknown_pid_fails_clearly() {
    let mut dead = std::process::Command::new("true").spawn().unwrap();
    let pid = dead.id();
    dead.wait().unwrap();
    for p in [pid.to_string(), "4000000".to_string()] {
        let out = sysdiet().args(["attach", "-p", &p]).output().unwrap();
        assert_eq!(out.status.code(), Some(1));
        let err = stderr_of(&out);
        assert!(err.contains(&format!("no process with pid {p}")), "{err}");
    }
    let out = sysdiet().args(["attach", "-p", "abc"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn without_bpf_rights_the_message_names_the_capability() {
    if skip_without_bpf() {
        return;
    }
    // Root without any capability: what an unprivileged container sees.
    let out = std::process::Command::new("setpriv")
        .args(["--inh-caps=-all", "--bounding-set=-all", "--"])
        .arg(env!("CARGO_BIN_EXE_sysdiet"))
        .args(["run", "--backend", "bpf", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = stderr_of(&out);
    assert!(err.contains("CAP_BPF") && err.contains("CAP_PERFMON"), "{err}");
    assert_eq!(err.lines().count(), 1, "one line, no libbpf noise: {err}");
}

#[test]
fn a_refused_load_still_writes_its_log() {
    if skip_without_bpf() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("verifier.log");
    let out = std::process::Command::new("setpriv")
        .args(["--inh-caps=-all", "--bounding-set=-all", "--"])
        .arg(env!("CARGO_BIN_EXE_sysdiet"))
        .args(["__programs", "--log"])
        .arg(&log)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    assert!(stderr_of(&out).contains("CAP_BPF"), "{}", stderr_of(&out));
    let text = std::fs::read_to_string(&log).expect("the log, written after the refusal");
    assert!(text.contains("libbpf: ") && text.contains("EPERM"), "{text}");
}

#[test]
fn without_kernel_btf_the_message_says_so() {
    let out = sysdiet().args(["run", "--backend", "bpf", "--", "true"]).env("SYSDIET_KERNEL_BTF", "/nonexistent/vmlinux").output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = stderr_of(&out);
    let release = kernel_release();
    assert!(
        err.starts_with(&format!("sysdiet: this kernel ({release}) has no BTF (/nonexistent/vmlinux is missing): "))
            && err.contains("CONFIG_DEBUG_INFO_BTF"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    // By default, ptrace counts instead, and says why.
    let out = sysdiet().args(["run", "--", "true"]).env("SYSDIET_KERNEL_BTF", "/nonexistent/vmlinux").output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let err = stderr_of(&out);
    assert!(err.starts_with(&format!("sysdiet: counting with ptrace (slower than BPF): this kernel ({release}) has no BTF\n")), "{err}");
    assert!(err.contains(&format!("counted by ptrace: this kernel ({release}) has no BTF")), "{err}");
}

/// Starts `exitwith stubborn` under sysdiet; returns sysdiet, the command's
/// pid and a reader of the command's stdout.
fn stubborn_under_sysdiet(report: &std::path::Path) -> (std::process::Child, i32, std::io::BufReader<std::process::ChildStdout>) {
    let exe = victim("exitwith");
    let mut child = sysdiet().args(["run", "-o"]).arg(report).arg("--").arg(&exe).arg("stubborn").stdout(Stdio::piped()).spawn().unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut out, &mut line).unwrap();
    (child, line.trim().parse().unwrap(), out)
}

fn still_runs(pid: i32, out: &mut std::io::BufReader<std::process::ChildStdout>) -> bool {
    unsafe { libc::kill(pid, libc::SIGUSR1) };
    let mut line = String::new();
    std::io::BufRead::read_line(out, &mut line).unwrap();
    line == "alive\n"
}

#[test]
fn second_interrupt_reports_and_leaves_the_command_running() {
    if skip_without_bpf() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("r.txt");
    let (mut child, target, mut out) = stubborn_under_sysdiet(&report);
    let _cleanup = KillOnDrop(target);
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    // Wait until sysdiet has handled it (it forwards it): a second SIGINT
    // sent before that would merge with the first in the kernel.
    let mut line = String::new();
    std::io::BufRead::read_line(&mut out, &mut line).unwrap();
    assert_eq!(line, "got SIGINT\n", "the first SIGINT is forwarded");
    assert!(still_runs(target, &mut out), "the command survives the first, forwarded SIGINT");
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    let text = std::fs::read_to_string(&report).unwrap();
    assert!(text.contains("interrupted: counts so far"), "{text}");
    assert!(text.contains("rt_sigprocmask"), "what ran was counted: {text}");
    line.clear();
    std::io::BufRead::read_line(&mut out, &mut line).unwrap();
    assert_eq!(line, "got SIGINT\n", "the second SIGINT is forwarded too");
    assert!(still_runs(target, &mut out), "left running, not stopped");
}

#[test]
fn if_sysdiet_is_killed_the_command_runs_on() {
    if skip_without_bpf() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (mut child, target, mut out) = stubborn_under_sysdiet(&dir.path().join("r.txt"));
    let _cleanup = KillOnDrop(target);
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(still_runs(target, &mut out), "the command is not stopped, traced or killed");
    let status = std::fs::read_to_string(format!("/proc/{target}/status")).unwrap();
    assert!(status.lines().any(|l| l == "TracerPid:\t0"), "never ptraced");
    unsafe { libc::kill(target, libc::SIGUSR2) };
}

#[test]
fn long_paths_are_cut_and_the_report_says_so() {
    if skip_without_bpf() {
        return;
    }
    let exe = victim("statloop");
    let long = format!("/tmp/{}", "x".repeat(300));
    let out = sysdiet().args(["run", "--"]).arg(&exe).args([long.as_str(), "10"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "the victim fails: no such file");
    let err = stderr_of(&out);
    assert!(err.contains("LOST (counts complete): 10 calls with paths cut at 255 bytes"), "{err}");
    assert!(err.contains(&format!("10 × newfstatat(\"/tmp/{}\"...), 10 failed", "x".repeat(250))), "cut, and marked so: {err}");
    assert!(!err.contains("nothing lost"));
    // 255 bytes fill the buffer exactly, and are all there is: not cut.
    let full = format!("/tmp/{}", "y".repeat(250));
    assert_eq!(full.len(), 255);
    let out = sysdiet().args(["run", "--"]).arg(&exe).args([full.as_str(), "10"]).output().unwrap();
    let err = stderr_of(&out);
    assert!(err.contains("nothing lost"), "{err}");
    assert!(err.contains(&format!("10 × newfstatat(\"{full}\"), 10 failed")), "{err}");
}

#[test]
fn attach_covers_every_running_thread() {
    if skip_without_bpf() {
        return;
    }
    let (doc, _) = attach_to_gated(3, 500, &["--duration", "1h"]);
    let stats: Vec<u64> = doc["processes"][0]["threads"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["syscalls"].as_array().unwrap().iter().find(|s| s["name"] == "newfstatat")?["calls"].as_u64())
        .collect();
    assert_eq!(stats.len(), 3, "{doc}");
    let short: u64 = stats.iter().map(|&n| 500u64.saturating_sub(n)).sum();
    assert!(stats.iter().all(|&n| n <= 500) && short <= hook_runs_missed(&doc), "each worker thread counted exactly: {doc}");
}

/// `attach` (with `env`) to `gated` with HELD_WORKERS workers that stay alive
/// after their work, ended by SIGINT once they have worked: the run's
/// document, and what sysdiet said with its timings.
fn attach_to_held_workers(env: &[(&str, &str)]) -> (serde_json::Value, String) {
    use std::io::BufRead;
    let mut target = gated(HELD_WORKERS, 300, true);
    let timed: Vec<(&str, &str)> = [("SYSDIET_TIMINGS", "1")].into_iter().chain(env.iter().copied()).collect();
    let attach = attached(target.0.id(), &["--no-stacks"], &timed);
    drop(target.0.stdin.take());
    let mut worked = String::new();
    std::io::BufReader::new(target.0.stdout.take().unwrap()).read_line(&mut worked).unwrap();
    assert_eq!(worked, "worked\n");
    // SAFETY: a signal to our own child.
    unsafe { libc::kill(attach.child.id() as i32, libc::SIGINT) };
    let (_, doc, said) = attach.finish();
    (doc, said)
}

const HELD_WORKERS: usize = 40;

#[test]
fn attach_reads_the_threads_alive_at_its_end_exactly() {
    if skip_without_bpf() {
        return;
    }
    // A kernel before 6.9 attaches with the legacy programs whatever is
    // forced (no pidfd reaches a thread's task storage): what the default
    // run loads says which kernel this is.
    let mut attached_by_default = String::new();
    for env in [&[][..], &[("SYSDIET_BPF_VARIANT", "bounded")][..], &[("SYSDIET_BPF_VARIANT", "legacy")][..]] {
        let (doc, said) = attach_to_held_workers(env);
        if env.is_empty() {
            attached_by_default = doc["run"]["bpf_programs"].as_str().unwrap_or_default().to_string();
        }
        let workers: Vec<(String, u64)> = doc["processes"][0]["threads"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["comm"].as_str().is_some_and(|c| c.starts_with('w')))
            .map(|t| {
                let stats = t["syscalls"].as_array().unwrap().iter().find(|s| s["name"] == "newfstatat").map_or(0, |s| s["calls"].as_u64().unwrap());
                (t["comm"].as_str().unwrap().to_string(), stats)
            })
            .collect();
        assert_eq!(workers.len(), HELD_WORKERS, "{env:?}: every worker alive at the end, by the name it took after its work: {doc}");
        let short: u64 = workers.iter().map(|(_, n)| 300u64.saturating_sub(*n)).sum();
        assert!(workers.iter().all(|(_, n)| *n <= 300) && short <= hook_runs_missed(&doc), "{env:?}: each counted exactly: {workers:?}");
        if let Some((_, forced)) = env.first() {
            let expected = if attached_by_default == "legacy" { "legacy" } else { forced };
            assert_eq!(doc["run"]["bpf_programs"], expected, "{said}");
        }
        // Task storage is read by the kernel's task iterator, the legacy
        // programs' table by tid in batches: neither by a walk of /proc.
        let how = match doc["run"]["bpf_programs"].as_str() {
            Some("current" | "bounded") => "read the live threads from the kernel's task list",
            _ => "read the live threads from the legacy programs' table",
        };
        assert!(said.contains(how), "{env:?}: {said}");
    }
}

/// A signal mask line (`SigIgn`, `SigBlk`) of `grep` run under sysdiet,
/// sysdiet itself started with SIGINT and SIGQUIT ignored (as a script's
/// background job is) or not, and with SIGUSR1 blocked or not.
fn mask_under_sysdiet(field: &str, ignore: bool, block: bool) -> u64 {
    use std::os::unix::process::CommandExt;
    let mut c = sysdiet();
    c.args(["run", "-o", "/dev/null", "--", "grep", &format!("{field}:"), "/proc/self/status"]);
    // Set either way: the test itself may run with them ignored (CI runs
    // as a background job).
    let how = if ignore { libc::SIG_IGN } else { libc::SIG_DFL };
    // SAFETY: only signal(2) and sigprocmask(2) between fork and exec.
    unsafe {
        c.pre_exec(move || {
            libc::signal(libc::SIGINT, how);
            libc::signal(libc::SIGQUIT, how);
            let mut mask: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut mask);
            if block {
                libc::sigaddset(&mut mask, libc::SIGUSR1);
            }
            libc::sigprocmask(libc::SIG_SETMASK, &mask, std::ptr::null_mut());
            Ok(())
        });
    }
    let out = c.output().unwrap();
    let line = String::from_utf8_lossy(&out.stdout).into_owned();
    u64::from_str_radix(line.trim().trim_start_matches(&format!("{field}:")).trim(), 16).unwrap_or_else(|_| panic!("{line}"))
}

#[test]
fn the_command_inherits_ignored_signals_not_sysdiets_handlers() {
    if skip_without_bpf() {
        return;
    }
    let both = (1 << (libc::SIGINT - 1)) | (1 << (libc::SIGQUIT - 1));
    let pipe = 1 << (libc::SIGPIPE - 1);
    let ignored = mask_under_sysdiet("SigIgn", true, false);
    assert_eq!(ignored & both, both, "still ignored, though sysdiet catches them");
    assert_eq!(ignored & pipe, 0, "SIGPIPE at its default, though sysdiet ignores it");
    assert_eq!(mask_under_sysdiet("SigIgn", false, false) & (both | pipe), 0);
}

/// The command is held with every signal blocked until it has put back the
/// inherited mask (spawn.rs): it must run with that mask, not with all.
#[test]
fn the_command_inherits_the_blocked_mask() {
    if skip_without_bpf() {
        return;
    }
    assert_eq!(mask_under_sysdiet("SigBlk", false, true), 1 << (libc::SIGUSR1 - 1));
    assert_eq!(mask_under_sysdiet("SigBlk", false, false), 0);
}

#[test]
fn time_is_sampled_cpu_by_default_and_wall_with_latency() {
    if skip_without_bpf() {
        return;
    }
    let exe = victim("idloop");
    let (doc, out) = sysdiet_json(&["--no-stacks"], &[exe.to_str().unwrap(), "12000000", "rusage"]);
    assert_eq!(doc["run"]["time"]["kind"], "cpu_sampled");
    // 250 µs ticks for the first 25 ms, then 1 ms; after the first second
    // the kernel's own (its HZ: what its coarse clocks advance by), a
    // whole number of fine ones here, or right after the first 25 ms where
    // it is 1 ms (HZ 1000), the same tick as the clock's; the legacy and
    // bounded programs (no bpf_kallsyms_lookup_name) keep their clock at 1 ms. 12,000,000 calls run about two
    // seconds here (4,000,000 ran 0.7 s, and 1.0-1.1 s in CI beside a qemu
    // guest, handed over).
    let duration = doc["run"]["duration_ns"].as_u64().unwrap();
    assert!(duration > 150_000_000, "{}", doc["run"]);
    let time = &doc["run"]["time"];
    let kernel_tick = kernel_tick_ns();
    assert!(kernel_tick.is_multiple_of(250_000), "this host's HZ gives whole fine ticks");
    let fine = serde_json::json!({"kind": "cpu_sampled", "tick_ns": 1_000_000, "fine_tick_ns": 250_000, "fine_for_ns": 25_000_000});
    let mut handed = fine.clone();
    handed["tick_ns"] = kernel_tick.into();
    handed["middle_tick_ns"] = 1_000_000.into();
    handed["middle_until_ns"] = 1_000_000_000.into();
    if doc["run"]["bpf_programs"] != "current" || duration < 900_000_000 || kernel_tick <= 1_000_000 {
        assert_eq!(time, &fine);
    } else if duration < 1_100_000_000 {
        // About a second: the clocks' second starts at their attach, a
        // little before the run's own (more on a loaded host), and the
        // hand-over waits for one of the kernel's ticks: either.
        assert!(time == &fine || time == &handed, "{time}");
    } else {
        assert_eq!(time, &handed);
    }
    let getpid = doc["syscalls"].as_array().unwrap().iter().find(|s| s["name"] == "getpid").unwrap().clone();
    assert_eq!(getpid["calls"], 12_000_000);
    assert_eq!(getpid["min_ns"], 0, "no per-call time when sampled");
    assert_eq!(getpid["total_ns"].as_u64().unwrap() % 250_000, 0, "whole ticks");
    // A tick that finds the thread in the kernel past a call's end (the
    // exit's work, sysdiet's own among it) is neither the call's nor the
    // thread's own code: the CPU outside the calls is the user time the
    // kernel accounted to the victim, sampled by the same ticks once past
    // the first second (counted as the thread's own, it was three times it).
    // The kernel splits the thread's run time by its own ticks: n of them
    // in the user time are some √n ticks off, which a loaded host shows.
    let stderr = String::from_utf8_lossy(&out.stderr);
    let kernels: u64 = stderr.lines().find_map(|l| l.strip_prefix("user_ns=")).and_then(|n| n.parse().ok()).expect("the victim's user_ns line");
    let user = doc["run"]["user_cpu_ns"].as_u64().unwrap();
    let ticks = kernels as f64 / kernel_tick as f64;
    let margin = (kernels / 3).max(40_000_000).max((4.0 * ticks.sqrt() * kernel_tick as f64) as u64);
    assert!(user.abs_diff(kernels) <= margin, "CPU outside the calls {user} ns, the kernel's user time {kernels} ns (margin {margin})");
    // A short run keeps the fine tick throughout (a slow guest's may not be short).
    let (doc, _) = sysdiet_json(&["--no-stacks"], &[exe.to_str().unwrap(), "1000"]);
    if doc["run"]["duration_ns"].as_u64().unwrap() < 20_000_000 {
        assert_eq!(doc["run"]["time"], serde_json::json!({"kind": "cpu_sampled", "tick_ns": 250_000}));
    }
    let (doc, _) = sysdiet_json(&["--no-stacks", "--latency"], &[exe.to_str().unwrap(), "20000"]);
    assert_eq!(doc["run"]["time"]["kind"], "wall");
    let getpid = doc["syscalls"].as_array().unwrap().iter().find(|s| s["name"] == "getpid").unwrap().clone();
    assert_eq!(getpid["calls"], 20_000);
    let (min, max, total) = (getpid["min_ns"].as_u64().unwrap(), getpid["max_ns"].as_u64().unwrap(), getpid["total_ns"].as_u64().unwrap());
    assert!(min > 0 && min <= max && total >= 20_000 * min, "measured per call: {getpid}");
}

#[test]
fn the_legacy_programs_take_each_threads_ticks_while_any_are_pending() {
    if skip_without_bpf() {
        return;
    }
    // Their ticks wait in a table by thread, which a syscall's exit looks
    // at only while some thread's are pending: one never taken would leave
    // getpid without time and the thread without user time.
    let exe = victim("idloop");
    let legacy = [("SYSDIET_BPF_VARIANT", "legacy")];
    let (doc, out) = sysdiet_json_env(&["--no-stacks"], &[exe.to_str().unwrap(), "12000000", "rusage"], &legacy);
    assert_eq!(doc["run"]["bpf_programs"], "legacy");
    let getpid = doc["syscalls"].as_array().unwrap().iter().find(|s| s["name"] == "getpid").unwrap().clone();
    assert_eq!(getpid["calls"], 12_000_000);
    let in_calls = getpid["total_ns"].as_u64().unwrap();
    assert!(in_calls > 0 && in_calls % 250_000 == 0, "getpid's time, in whole ticks: {getpid}");
    // As in the test above: the CPU outside the calls is the victim's user
    // time, sampled by the same ticks (here the clock's, 1 ms).
    let stderr = String::from_utf8_lossy(&out.stderr);
    let kernels: u64 = stderr.lines().find_map(|l| l.strip_prefix("user_ns=")).and_then(|n| n.parse().ok()).expect("the victim's user_ns line");
    let user = doc["run"]["user_cpu_ns"].as_u64().unwrap();
    let margin = (kernels / 3).max(40_000_000).max((4.0 * (kernels as f64 / 1e6).sqrt() * 1e6) as u64);
    assert!(user.abs_diff(kernels) <= margin, "CPU outside the calls {user} ns, the kernel's user time {kernels} ns (margin {margin})");
}

#[test]
fn the_floor_runs_a_command_under_empty_hooks_and_passes_its_status() {
    if skip_without_bpf() {
        return;
    }
    for hooks in ["enter", "exit", "both"] {
        for reads in [
            &[][..],
            &["--clock"][..],
            &["--paths"][..],
            &["--clock", "--paths"][..],
            &["--paths", "--state"][..],
            &["--paths", "--state-by-pid"][..],
            &["--paths", "--state", "--keys", "1048576"][..],
        ] {
            // The shell stats and opens paths: the path floor reads them.
            let out =
                sysdiet().args(["__floor", "--hooks", hooks]).args(reads).args(["--", "sh", "-c", "test -e /etc/hostname; exit 3"]).output().unwrap();
            assert_eq!(out.status.code(), Some(3), "{hooks} {reads:?}: {}", String::from_utf8_lossy(&out.stderr));
        }
    }
    // A key is a path's: counting keys without reading paths is no floor.
    let out = sysdiet().args(["__floor", "--hooks", "exit", "--keys", "--", "true"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--paths"), "{}", String::from_utf8_lossy(&out.stderr));
    let out = sysdiet().args(["__floor", "--hooks", "exit", "--paths", "--keys", "3000", "--", "true"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a power of two"), "{}", String::from_utf8_lossy(&out.stderr));
    // One state or the other: a floor of both is no tracer's.
    let out = sysdiet().args(["__floor", "--hooks", "exit", "--state", "--state-by-pid", "--", "true"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot be used with"), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn completions_and_man_pages_come_from_the_command_line() {
    let out = sysdiet().args(["completions", "bash"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let script = String::from_utf8_lossy(&out.stdout);
    for word in ["run", "attach", "compare", "--flamegraph", "--export-markdown"] {
        assert!(script.contains(word), "{word} in the bash completions");
    }
    assert!(!script.contains("__bench-worker"), "hidden commands are not offered");
    let out = sysdiet().args(["completions", "tcsh"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "an unknown shell is a usage error");

    let dir = tempfile::tempdir().unwrap();
    let out = sysdiet().arg("__man").arg(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let run = std::fs::read_to_string(dir.path().join("sysdiet-run.1")).unwrap();
    assert!(run.contains(".TH sysdiet-run 1") && run.contains("\\-\\-latency"), "{run}");
    assert!(dir.path().join("sysdiet.1").exists() && !dir.path().join("sysdiet-__floor.1").exists());
}
