//! What an adversarial run found, kept: escape sequences from the traced
//! system, non-UTF-8 paths, durations too large for a Duration, absurd
//! counts, thread ids and kernel threads given to attach, signals while
//! the BPF loads (SIGKILL, Ctrl-C in a terminal), a hang-up to the session
//! leader, SIGTERM twice, an interrupted compare, messages that name the
//! real problem, the vDSO copy, a planted -o symlink. The SIGKILL storm is
//! tests/kill_storm.rs.

use crate::common::*;

/// No ESC, BEL or other control byte but newline in what a terminal would show.
fn assert_no_control_bytes(text: &str) {
    let bad: Vec<char> = text.chars().filter(|c| c.is_control() && *c != '\n').collect();
    assert!(bad.is_empty(), "control characters {bad:?} reached the terminal in:\n{text}");
}

#[test]
fn escape_sequences_in_names_are_escaped_in_every_text_report() {
    if skip_without_bpf() {
        return;
    }
    // A command line and a process name (comm, from argv[0]'s file name)
    // that would retitle the terminal and clear the screen.
    let dir = tempfile::tempdir().unwrap();
    let evil = dir.path().join("x\x1b]0;PWN\x07\x1b[2J");
    std::os::unix::fs::symlink(victim("statloop"), &evil).unwrap();
    let out = sysdiet().args(["run", "--per-thread", "--all", "--"]).arg(&evil).args(["/etc/hostname", "50"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let text = stderr_of(&out);
    assert_no_control_bytes(&text);
    assert!(text.contains("\\x1b]0;PWN\\x07"), "shown escaped: {text}");

    // check lists it by its comm while it runs: in a PID namespace of their
    // own, so that no other process without TZ (a busy host has dozens,
    // and check shows 25) pushes it off the list.
    let script = r#""$1" /etc/hostname 100000000 & sleep 0.3; "$2" check; kill $!"#;
    let out = std::process::Command::new("unshare")
        .args(["--pid", "--fork", "--mount-proc", "sh", "-c", script, "sh"])
        .arg(&evil)
        .arg(env!("CARGO_BIN_EXE_sysdiet"))
        .env_remove("TZ")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("\\x1b]0;PWN"), "the process is listed, escaped: {text}");
    assert_no_control_bytes(&text);
}

#[test]
fn durations_too_large_are_refused_not_a_panic() {
    for args in [
        &["attach", "-p", "1", "--duration", "18446744073709551616"][..],
        &["attach", "-p", "1", "--duration", "5124095576030432h"],
        &["check", "--sample", "18446744073709551616"],
    ] {
        let out = sysdiet().args(args).output().unwrap();
        let err = stderr_of(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("is too long") && !err.contains("panicked"), "{args:?}: {err}");
    }
}

#[test]
fn sigterm_twice_ends_with_sigterms_status() {
    if skip_without_bpf() {
        return;
    }
    // A command that ignores SIGTERM, so only sysdiet gives up on it.
    let mut child = sysdiet()
        .args(["run", "--no-stacks", "--", "sh", "-c", "trap '' TERM; exec sleep 37"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(700));
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    for _ in 0..2 {
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let status = child.wait().unwrap();
    // The command ran on, untraced (and holds the stderr pipe): end it.
    let _ = std::process::Command::new("pkill").args(["-KILL", "-f", "^sleep 37$"]).status();
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(128 + 15), "{err}");
    assert!(err.contains("syscalls"), "the report of what ran is printed: {err}");
}

#[test]
fn the_vdso_copy_is_private() {
    if skip_without_bpf() {
        return;
    }
    // Call sites in the vDSO (a CPU-time clock's syscall is made there) are
    // named from a copy of it: a private file (random name, O_EXCL) in
    // TMPDIR, gone at the end.
    let tmp = tempfile::tempdir().unwrap();
    let out = sysdiet()
        .args(["run", "--json", "-o", "-", "--"])
        .arg(victim("clocks"))
        .args(["cputime", "2000"])
        .env("TMPDIR", tmp.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let run: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let frames = run["call_sites"].as_array().unwrap().iter().flat_map(|s| s["frames"].as_array().unwrap().iter());
    let named_in_vdso = frames.filter(|f| f["module"] == "[vdso]" && f["function"].is_string()).count();
    assert!(named_in_vdso > 0, "a frame in the vDSO, named from the copy: {}", run["call_sites"]);
    let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().filter_map(|e| e.ok()).map(|e| e.file_name()).collect();
    assert!(left.is_empty(), "the copy is removed at the end: {left:?}");
}

/// Waits until `pid` has a child (the held command), and returns it.
fn held_child_of(pid: u32) -> Option<u32> {
    for _ in 0..2000 {
        if let Some(c) = first_child(pid) {
            return Some(c);
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    None
}

#[test]
fn killed_while_loading_the_command_still_runs() {
    if skip_without_bpf() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    // --backend bpf holds the command while the programs load (auto starts
    // it under ptrace meanwhile: tests/handover.rs).
    let mut child = sysdiet().args(["run", "--backend", "bpf", "--", "touch"]).arg(&marker).spawn().unwrap();
    held_child_of(child.id()).expect("the command is held before the BPF loads");
    child.kill().unwrap();
    let _ = child.wait();
    for _ in 0..500 {
        if marker.exists() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    panic!("sysdiet was killed and the command never ran");
}

#[test]
fn an_interrupt_while_loading_starts_nothing_or_reaches_the_command() {
    if skip_without_bpf() {
        return;
    }
    let child = sysdiet()
        .args(["run", "--backend", "bpf", "--", "sleep", "30"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    held_child_of(child.id()).expect("the command is held");
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), nix::sys::signal::Signal::SIGINT).unwrap();
    let out = child.wait_with_output().unwrap();
    let err = stderr_of(&out);
    // Before the release: not started; after: the command got SIGINT.
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert!(err.contains("before the command started: it was not run") || err.contains("% time "), "{err}");
}

#[test]
fn attach_to_a_thread_traces_its_process_and_a_kernel_thread_is_refused() {
    if skip_without_bpf() {
        return;
    }
    let out = sysdiet().args(["attach", "-p", "2", "--duration", "100ms"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr_of(&out).starts_with("sysdiet: pid 2 is a kernel thread (kthreadd)"), "{}", stderr_of(&out));

    let mut threads = std::process::Command::new(victim("threads")).args(["4", "100000000"]).stdout(std::process::Stdio::null()).spawn().unwrap();
    let pid = threads.id();
    let mut tid = None;
    for _ in 0..500 {
        tid = std::fs::read_dir(format!("/proc/{pid}/task"))
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .find(|&t| t != pid);
        if tid.is_some() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    let tid = tid.expect("the victim starts threads");
    let out =
        sysdiet().args(["attach", "--no-stacks", "--json", "-o", "-", "-p"]).arg(tid.to_string()).args(["--duration", "200ms"]).output().unwrap();
    let _ = threads.kill();
    let _ = threads.wait();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(stderr_of(&out).contains(&format!("{tid} is a thread of process {pid}: tracing the whole process")), "{}", stderr_of(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["run"]["root_pids"], serde_json::json!([pid]));
}

#[test]
fn attach_shows_the_exit_of_the_process_it_watched_end() {
    if skip_without_bpf() {
        return;
    }
    let mut target = std::process::Command::new("sh").args(["-c", "sleep 0.5; exit 7"]).spawn().unwrap();
    let out = sysdiet().args(["attach", "--no-stacks", "-p"]).arg(target.id().to_string()).output().unwrap();
    assert_eq!(target.wait().unwrap().code(), Some(7));
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let err = stderr_of(&out);
    assert!(err.starts_with("sysdiet: attached to pid "), "{err}");
    // The report's header: the line after the command's.
    let header = err.lines().nth(2).unwrap_or_default();
    assert!(header.contains(" · exit 7 · "), "{err}");
}

#[test]
fn messages_say_what_is_wrong_with_the_name() {
    let cases: &[(&str, i32, &str)] = &[
        ("./no/such", 127, "sysdiet: ./no/such: no such file (check the path)"),
        ("", 2, "sysdiet: the command name is empty"),
        ("/etc", 126, "sysdiet: /etc: is a directory, not a program"),
    ];
    for (name, code, message) in cases {
        let out = sysdiet().args(["run", "--", name]).output().unwrap();
        assert_eq!((out.status.code(), stderr_of(&out).trim()), (Some(*code), *message), "{name:?}");
    }
    let out = sysdiet().args(["compare", "--runs", "1", "--no-trace", "--env", "A=1", "--", "false"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr_of(&out).contains("variant A (the baseline) exited with status 1"), "{}", stderr_of(&out));
}

#[test]
fn compare_interrupted_prints_what_it_measured_and_leaves_no_run_behind() {
    let child = sysdiet()
        .args(["compare", "--json", "--runs", "1000", "--no-trace", "--vs", "sleep 0.0502", "--", "sleep", "0.0501"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), nix::sys::signal::Signal::SIGTERM).unwrap();
    let out = child.wait_with_output().unwrap();
    let left = std::process::Command::new("pgrep").args(["-f", "^sleep 0.050[12]$"]).output().unwrap();
    assert!(left.stdout.is_empty(), "a timed run left running: {}", String::from_utf8_lossy(&left.stdout));
    assert_eq!(out.status.code(), Some(143), "{}", stderr_of(&out));
    if out.stdout.is_empty() {
        // Not one round complete (a very slow machine): said in one line.
        assert!(stderr_of(&out).contains("before every variant ran once"), "{}", stderr_of(&out));
        return;
    }
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["interrupted"], true);
    let runs = doc["runs"].as_u64().unwrap();
    assert!((1..1000).contains(&runs), "{runs}");
    for v in doc["variants"].as_array().unwrap() {
        assert_eq!(v["runs"].as_array().unwrap().len() as u64, runs, "complete rounds only");
    }
}

#[test]
fn check_as_another_user_says_what_it_could_not_read() {
    if !nix::unistd::geteuid().is_root() {
        return; // needs root to become another user
    }
    let as_nobody = |arg: &str| {
        std::process::Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
            .arg(env!("CARGO_BIN_EXE_sysdiet"))
            .arg(arg)
            .current_dir("/")
            .output()
            .unwrap()
    };
    if !as_nobody("--version").status.success() {
        return; // the build tree is private to root here (under /root): nobody cannot run it
    }
    let out = as_nobody("check");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("more could not be read: their environment is private to their owner (run as root"), "{text}");
}

#[test]
fn a_hang_up_reaches_the_command_when_sysdiet_leads_the_session() {
    if skip_without_bpf() {
        return;
    }
    // script(1) gives sysdiet a terminal of its own, as the session leader;
    // killing script closes that terminal: the kernel hangs up on sysdiet.
    let cmd = format!("exec {} run --no-stacks -- sleep 43", env!("CARGO_BIN_EXE_sysdiet"));
    let mut script = std::process::Command::new("script");
    script
        .args(["-qc", &cmd, "/dev/null"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    // Under nohup the hang-up is ignored, by sysdiet and the command alike,
    // as it should be: this test wants it heard.
    // SAFETY: signal(2) is async-signal-safe, as pre_exec requires.
    unsafe {
        use std::os::unix::process::CommandExt;
        script.pre_exec(|| {
            libc::signal(libc::SIGHUP, libc::SIG_DFL);
            Ok(())
        });
    }
    let mut script = script.spawn().unwrap();
    let running = || !std::process::Command::new("pgrep").args(["-f", "^sleep 43$"]).output().unwrap().stdout.is_empty();
    for _ in 0..500 {
        if running() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(running(), "the command started");
    script.kill().unwrap();
    let _ = script.wait();
    // The command would sleep 43 s; hung up, it ends at once.
    for _ in 0..500 {
        if !running() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let _ = std::process::Command::new("pkill").args(["-f", "^sleep 43$"]).status();
    panic!("the terminal closed and the command ran on");
}

#[test]
fn a_path_that_is_not_utf8_keeps_its_bytes() {
    if skip_without_bpf() {
        return;
    }
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::OsStr::from_bytes(b"/tmp/sysdiet-caf\xe9");
    let out = sysdiet().args(["run", "--no-stacks", "--all", "--"]).arg(victim("statloop")).arg(path).arg("20").output().unwrap();
    let text = stderr_of(&out);
    assert!(text.contains(r#"20 × newfstatat("/tmp/sysdiet-caf\xe9")"#), "shown as strace does: {text}");
    let out = sysdiet().args(["run", "--no-stacks", "--json", "-o", "-", "--"]).arg(victim("statloop")).arg(path).arg("20").output().unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let arg = doc["arguments"].as_array().unwrap().iter().find(|a| a["calls"] == 20).expect("the repeated path").clone();
    let raw: Vec<u8> = arg["argument"]["raw"].as_array().unwrap().iter().map(|b| b.as_u64().unwrap() as u8).collect();
    assert_eq!(raw, path.as_bytes(), "{arg}");
    assert_eq!(arg["argument"]["path"], "/tmp/sysdiet-caf\u{fffd}");
}

#[test]
fn an_early_ctrl_c_in_a_terminal_is_not_swallowed() {
    if skip_without_bpf() {
        return;
    }
    // sysdiet in a terminal of its own (script(1)), Ctrl-C typed as soon
    // as the command is held, while the BPF loads.
    let cmd = format!("exec {} run -- sleep 44", env!("CARGO_BIN_EXE_sysdiet"));
    let mut script = std::process::Command::new("script")
        .args(["-qc", &cmd, "/dev/null"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let sleeping = || {
        let out = std::process::Command::new("pgrep").args(["-f", "^sleep 44$"]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).split_whitespace().next().map(str::to_string)
    };
    let held = || std::process::Command::new("pgrep").args(["-f", &format!("^{}", regex_escape(&cmd[5..]))]).output().unwrap();
    // The held child carries sysdiet's command line until it execs sleep.
    for _ in 0..1000 {
        if String::from_utf8_lossy(&held().stdout).split_whitespace().count() >= 2 || sleeping().is_some() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    std::io::Write::write_all(script.stdin.as_mut().unwrap(), b"\x03").unwrap();
    let out = script.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    // Either the command was not started, or it got the signal: it is not
    // left sleeping its 44 s.
    for _ in 0..300 {
        if sleeping().is_none() {
            assert!(text.contains("it was not run") || text.contains("% time "), "{text}");
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let _ = std::process::Command::new("pkill").args(["-f", "^sleep 44$"]).status();
    panic!("Ctrl-C was swallowed: the command ran on\n{text}");
}

fn regex_escape(s: &str) -> String {
    s.chars().flat_map(|c| if "\\.+*?()|[]{}^$".contains(c) { vec!['\\', c] } else { vec![c] }).collect()
}

#[test]
fn a_symlink_planted_in_a_sticky_directory_is_not_followed() {
    if skip_without_bpf() {
        return;
    }
    use std::os::unix::fs::{symlink, PermissionsExt};
    let dir = tempfile::tempdir().unwrap();
    let shared = dir.path().join("tmp");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let victim = dir.path().join("precious");
    std::fs::write(&victim, "keep me").unwrap();
    let link = shared.join("report.txt");
    symlink(&victim, &link).unwrap();
    // Owned by another user (nobody), as if planted.
    std::os::unix::fs::lchown(&link, Some(65534), Some(65534)).unwrap();
    let out = sysdiet().args(["run", "-o"]).arg(&link).args(["--", "true"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    assert!(stderr_of(&out).contains("a symlink owned by uid 65534 in a shared sticky directory"), "{}", stderr_of(&out));
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me");
    // Our own symlink there is followed, as the kernel would.
    std::os::unix::fs::lchown(&link, Some(0), Some(0)).unwrap();
    let out = sysdiet().args(["run", "--no-stacks", "-o"]).arg(&link).args(["--", "true"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(std::fs::read_to_string(&victim).unwrap().contains("% time "));
}
