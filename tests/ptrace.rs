//! The ptrace backend: counts equal strace -f -c's; without the rights to
//! load BPF, `run` falls back to it by itself and still finds what BPF
//! finds; a plain user gets a full report; the target is never hurt.

use crate::common::*;

use std::process::{Command, Stdio};
use std::time::Duration;

/// `sysdiet run --backend ptrace --json` on `argv`: the counts.
fn ptrace_counts(args: &[&str], argv: &[&str]) -> (serde_json::Value, Counts) {
    ptrace_counts_via(&[], args, argv)
}

/// The same, sysdiet started by `wrapper` (a command that runs the rest of
/// its arguments), if not empty.
fn ptrace_counts_via(wrapper: &[&str], args: &[&str], argv: &[&str]) -> (serde_json::Value, Counts) {
    let mut all = vec!["--backend", "ptrace"];
    all.extend_from_slice(args);
    let (doc, out) = sysdiet_json_via(wrapper, &all, argv, &[]);
    assert!(out.status.success(), "{argv:?}: {}", stderr_of(&out));
    assert_eq!(doc["run"]["backend"], "ptrace");
    assert!(doc["run"].get("bpf_programs").is_none(), "ptrace names no BPF programs");
    let counts = counts_of(&doc);
    (doc, counts)
}

#[test]
fn counts_equal_strace_c_on_the_victims() {
    let victims: &[(&str, &[&str])] = &[
        ("timeloop", &["localtime", "2000"]),
        ("sigprocmask", &["3000"]),
        ("context", &["1000"]),
        ("sigjmp", &["1000", "1"]),
        ("failing", &["300"]),
        ("pipeline", &["100"]),
        ("statloop", &["/etc/passwd", "2000"]),
        ("openclose", &["/etc/passwd", "1000"]),
        ("tinywrite", &["2000"]),
        ("pollzero", &["2000"]),
        ("clean", &[]),
        ("futimens", &["200"]),
    ];
    for (name, args) in victims {
        let exe = victim(name);
        let mut argv = vec![exe.to_str().unwrap()];
        argv.extend_from_slice(args);
        let oracle = strace_counts(&[], &argv);
        let (doc, ours) = ptrace_counts(&[], &argv);
        assert_same_counts(name, &oracle, &ours, &[]);
        assert_eq!(doc["lost"]["compat_syscalls"], 0);
    }
    null_paths_are_keys_not_losses(&["--backend", "ptrace"]);
    // -e as strace takes it.
    let exe = victim("failing");
    let argv = [exe.to_str().unwrap(), "50"];
    for expr in ["trace=%file", "trace=!close,ioctl"] {
        assert_same_counts(expr, &strace_counts(&["-e", expr], &argv), &ptrace_counts(&["-e", expr], &argv).1, &[]);
    }
}

/// Before Linux 5.3 (Debian 10's 4.19, RHEL 8's 4.18) the kernel has no
/// PTRACE_GET_SYSCALL_INFO: a stop is read from the registers, its entry
/// and exit told apart by turns. sysdiet run where ptrace answers it as
/// those kernels did (the `oldptrace` victim's seccomp filter): the counts
/// strace makes, and the argument keys the kernel's own report gives,
/// through threads, forks, execs, signals and failing calls.
#[test]
fn counts_equal_strace_c_where_the_kernel_has_no_syscall_info() {
    let old = victim("oldptrace");
    let old: &[&str] = &[old.to_str().unwrap()];
    let victims: &[(&str, &[&str])] = &[
        ("timeloop", &["localtime", "500"]),
        ("sigprocmask", &["1000"]),
        ("failing", &["100"]),
        ("pipeline", &["50"]),
        ("manykinds", &["3"]),
        ("openclose", &["/etc/passwd", "300"]),
    ];
    // What each report says of its argument keys, but their time and sites.
    let keys = |doc: &serde_json::Value| -> Vec<String> {
        let mut keys: Vec<String> = doc["arguments"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| format!("{} {} {} {}", a["syscall"], a["argument"], a["calls"], a["errors"]))
            .collect();
        keys.sort();
        keys
    };
    for (name, args) in victims {
        let exe = victim(name);
        let mut argv = vec![exe.to_str().unwrap()];
        argv.extend_from_slice(args);
        let (doc, ours) = ptrace_counts_via(old, &[], &argv);
        assert_same_counts(name, &strace_counts(&[], &argv), &ours, &[]);
        assert_eq!(doc["lost"]["compat_syscalls"], 0);
        let (told, _) = ptrace_counts(&[], &argv);
        assert_eq!(keys(&doc), keys(&told), "{name}'s argument keys");
    }
    // Threads: how often they wait on each other, and glibc's stacks they
    // unmap, are each run's own; their stat calls are not.
    let exe = victim("threads");
    let argv = [exe.to_str().unwrap(), "4", "100"];
    let (doc, ours) = ptrace_counts_via(old, &[], &argv);
    assert_eq!(doc["processes"][0]["threads"].as_array().unwrap().len(), 5, "main + 4 threads");
    assert_eq!(ours["newfstatat"].0, strace_counts(&[], &argv)["newfstatat"].0);
}

/// Thread counts and the processes of a fork/exec tree are followed.
#[test]
fn threads_and_processes_are_followed() {
    let exe = victim("threads");
    let (doc, ours) = ptrace_counts(&[], &[exe.to_str().unwrap(), "4", "200"]);
    assert_eq!(doc["processes"][0]["threads"].as_array().unwrap().len(), 5, "main + 4 threads");
    assert_eq!(ours["newfstatat"].0, strace_counts(&[], &[exe.to_str().unwrap(), "4", "200"])["newfstatat"].0);
}

/// The loader's search of LD_LIBRARY_PATH tries each path once: ptrace
/// names a sample of those failed lookups, in every directory searched,
/// and library-search finds the variable from them, as with BPF.
#[test]
fn failed_lookups_made_once_are_named() {
    let (doc, _) = ptrace_counts(&["--all"], &["env", "LD_LIBRARY_PATH=/opt/pa:/opt/pb", "/bin/true"]);
    let named: Vec<&str> =
        doc["failed_once"].as_array().expect("failed lookups named").iter().map(|a| a["argument"]["path"].as_str().unwrap()).collect();
    for dir in ["/opt/pa/", "/opt/pb/"] {
        assert!(named.iter().any(|p| p.starts_with(dir)), "none in {dir}: {named:?}");
    }
    assert!(doc["failed_once"].as_array().unwrap().iter().all(|a| a["calls"] == 1 && a["errors"] == 1));
    let f = doc["findings"].as_array().unwrap().iter().find(|f| f["id"] == "library-search").expect("a library-search finding");
    assert!(f["what"].as_str().unwrap().ends_with("LD_LIBRARY_PATH=\"/opt/pa:/opt/pb\""), "{f}");
}

/// Each process's file, as BPF names it: the one it exec'd, by the path
/// its execve gave (/bin/true, where /bin is a link to /usr/bin), or its
/// parent's for a child that never ran another (a shell's subshell). The
/// rules that tell a spawner's work in a child from the child's own read it.
#[test]
fn each_process_has_its_file() {
    let (doc, _) = ptrace_counts(&[], &["sh", "-c", "x=$(/bin/echo a); y=$(echo b); /bin/true"]);
    let files: Vec<(&str, &str)> =
        doc["processes"].as_array().unwrap().iter().map(|p| (p["comm"].as_str().unwrap(), p["executable"].as_str().unwrap_or("-"))).collect();
    let dash = which("sh").unwrap();
    let dash = dash.to_str().unwrap();
    assert!(files.contains(&("echo", "/bin/echo")) && files.contains(&("true", "/bin/true")), "{files:?}");
    // The shell and its subshell for `echo b` (a builtin: no exec).
    assert_eq!(files.iter().filter(|f| **f == ("sh", dash)).count(), 2, "{files:?}");
}

/// With every capability dropped, BPF cannot load: `run` says so in one
/// line, counts with ptrace, and finds tz-unset with its line of code.
#[test]
fn falls_back_to_ptrace_without_capabilities() {
    let exe = victim("timeloop");
    let out = Command::new("setpriv")
        .env_remove("LD_LIBRARY_PATH")
        .args(["--inh-caps=-all", "--ambient-caps=-all", "--bounding-set=-all", "--"])
        .arg(env!("CARGO_BIN_EXE_sysdiet"))
        .args(["run", "--"])
        .arg(&exe)
        .args(["localtime", "1000"])
        .env_remove("TZ")
        .stdout(Stdio::null())
        .output()
        .expect("setpriv runs (util-linux)");
    let err = stderr_of(&out);
    let (why, refused) = no_capabilities_reason();
    assert!(out.status.success(), "{err}");
    assert!(err.starts_with(&format!("sysdiet: counting with ptrace (slower than BPF): {why}\n")), "{err}");
    assert!(err.contains(&format!("counted by ptrace: {why}")), "{err}");
    assert!(err.contains("[tz-unset] 999 × newfstatat(\"/etc/localtime\")"), "{err}");
    assert!(err.contains("by    use_localtime (timeloop.c:"), "{err}");

    // Asked for BPF by name: the error, not a fallback.
    let out = Command::new("setpriv")
        .env_remove("LD_LIBRARY_PATH")
        .args(["--inh-caps=-all", "--ambient-caps=-all", "--bounding-set=-all", "--"])
        .arg(env!("CARGO_BIN_EXE_sysdiet"))
        .args(["run", "--backend", "bpf", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr_of(&out).starts_with(&format!("sysdiet: {refused}")), "{}", stderr_of(&out));
}

/// Without capabilities the probes cannot tell what the kernel has; a BTF
/// that types no tracepoint (a kernel before 5.5, as Ubuntu 20.04's 5.4) is
/// said all the same, since no rights would let a tp_btf program load
/// there, and ptrace counts. The BTF here is one with no types at all.
#[test]
fn a_kernel_without_typed_tracepoints_is_said_without_capabilities() {
    let dir = tempfile::tempdir().unwrap();
    let btf = dir.path().join("empty.btf");
    // A raw BTF header (magic 0xeb9f, version 1, 24 bytes), no types, and
    // a string section of one NUL.
    let mut raw = vec![0x9f, 0xeb, 1, 0];
    for word in [24u32, 0, 0, 0, 1] {
        raw.extend_from_slice(&word.to_ne_bytes());
    }
    raw.push(0);
    std::fs::write(&btf, raw).unwrap();
    let release = kernel_release();
    let run = |backend: &str| {
        Command::new("setpriv")
            .env_remove("LD_LIBRARY_PATH")
            .env("SYSDIET_KERNEL_BTF", &btf)
            .args(["--inh-caps=-all", "--ambient-caps=-all", "--bounding-set=-all", "--"])
            .arg(env!("CARGO_BIN_EXE_sysdiet"))
            .args(["run", "--backend", backend, "-o", "/dev/null", "--", "true"])
            .output()
            .expect("setpriv runs (util-linux)")
    };
    let out = run("auto");
    let err = stderr_of(&out);
    assert!(out.status.success(), "{err}");
    let why = format!("this kernel ({release}) has no BTF-typed tracepoints (Linux 5.5)");
    assert!(err.starts_with(&format!("sysdiet: counting with ptrace (slower than BPF): {why}\n")), "{err}");
    let out = run("bpf");
    assert_eq!(out.status.code(), Some(1));
    let err = stderr_of(&out);
    assert_eq!(err, format!("sysdiet: this kernel ({release}) has no BTF-typed tracepoints, which sysdiet's BPF tracer needs (Linux 5.5 has it)\n"));
}

/// A kernel without BTF (Ubuntu 18.04's 4.15; elsewhere, /sys/kernel/btf
/// hidden under an empty tmpfs in a mount namespace of its own), with and
/// without capabilities: sysdiet's one line, not libbpf's own words about
/// the BTF it looked for first.
#[test]
fn a_kernel_without_btf_is_said_in_sysdiets_line_alone() {
    if !nix::unistd::geteuid().is_root() || which("unshare").is_none() {
        eprintln!("not root or no unshare: skipped");
        return;
    }
    let release = kernel_release();
    for caps in [&[][..], &["setpriv", "--inh-caps=-all", "--ambient-caps=-all", "--bounding-set=-all", "--"][..]] {
        // A cache of its own: probe answers kept for this kernel would
        // skip the probes.
        let cache = tempfile::tempdir().unwrap();
        let out = Command::new("unshare")
            .env_remove("LD_LIBRARY_PATH")
            .env("XDG_CACHE_HOME", cache.path())
            // A kernel built without BTF has no /sys/kernel/btf to hide.
            .args(["-m", "sh", "-c", "{ [ ! -d /sys/kernel/btf ] || mount -t tmpfs none /sys/kernel/btf; } && exec \"$@\"", "sh"])
            .args(caps)
            .arg(env!("CARGO_BIN_EXE_sysdiet"))
            .args(["run", "-o", "/dev/null", "--", "true"])
            .output()
            .unwrap();
        let err = stderr_of(&out);
        assert!(out.status.success(), "{caps:?}: {err}");
        // One line, sysdiet's: what the kernel lacks first (no BTF here; on
        // 4.15, with the rights to probe, its missing BPF ring buffer).
        let why = format!("sysdiet: counting with ptrace (slower than BPF): this kernel ({release}) has no ");
        assert!(err.starts_with(&why) && err.lines().count() == 1, "{caps:?}: {err}");
    }
}

/// A plain user (nobody) traces their own command and gets a full report;
/// another user's process is refused in one line.
#[test]
fn an_unprivileged_user() {
    let exe = victim("statloop");
    let nobody = ["--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all", "--bounding-set=-all", "--"];
    let argv = [exe.to_str().unwrap(), "/etc/passwd", "500"];
    let out = Command::new("setpriv")
        .env_remove("LD_LIBRARY_PATH")
        .args(nobody)
        .arg(env!("CARGO_BIN_EXE_sysdiet"))
        .args(["run", "--json", "-o", "-", "--"])
        .args(argv)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("the JSON report on stdout");
    assert_eq!(doc["run"]["backend"], "ptrace");
    assert_same_counts("as nobody", &strace_counts(&[], &argv), &counts_of(&doc), &[]);

    let target = Running(Command::new("sleep").arg("30").spawn().unwrap());
    let out = Command::new("setpriv")
        .env_remove("LD_LIBRARY_PATH")
        .args(nobody)
        .arg(env!("CARGO_BIN_EXE_sysdiet"))
        .args(["attach", "-p", &target.0.id().to_string(), "--duration", "100ms"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr_of(&out).contains(&format!("cannot ptrace pid {}: not permitted", target.0.id())), "{}", stderr_of(&out));
}

/// attach with ptrace counts a running loop, then lets it go: running, not
/// stopped, not traced.
#[test]
fn attach_lets_the_target_go() {
    let exe = victim("statloop");
    let target = Running(Command::new(&exe).args(["/etc/passwd", "1000000000"]).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap());
    let pid = target.0.id();
    std::thread::sleep(Duration::from_millis(100));
    let out = sysdiet().args(["attach", "--backend", "ptrace", "--json", "-o", "-", "-p", &pid.to_string(), "--duration", "1s"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // Any number: under TCG (ci/kernels) a stat takes milliseconds.
    assert!(counts_of(&doc).get("newfstatat").is_some_and(|c| c.0 > 0 && c.1 == 0), "{:?}", counts_of(&doc));
    assert_eq!(doc["run"]["interrupted"], false, "--duration ran out: not an interruption");
    std::thread::sleep(Duration::from_millis(100));
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    assert!(status.contains("TracerPid:\t0"), "{status}");
    assert!(!status.contains("State:\tt") && !status.contains("State:\tT"), "{status}");
}

/// The command's exit status passes through; sysdiet killed with SIGKILL
/// leaves the command running, untraced.
#[test]
fn exit_status_and_a_killed_tracer() {
    let status =
        |script: &str| sysdiet().args(["run", "--backend", "ptrace", "--", "sh", "-c", script]).stderr(Stdio::null()).status().unwrap().code();
    assert_eq!(status("exit 3"), Some(3));
    assert_eq!(status("kill -TERM $$"), Some(143));

    let dir = tempfile::tempdir().unwrap();
    let (started, marker) = (dir.path().join("started"), dir.path().join("ran"));
    let script = format!("touch {}; sleep 1; touch {}", started.display(), marker.display());
    let mut tracer = sysdiet().args(["run", "--backend", "ptrace", "--", "sh", "-c", &script]).stderr(Stdio::null()).spawn().unwrap();
    // However slow the machine (a guest under TCG): killed while the
    // command runs traced, which then gets to its end, or was left stopped.
    let waited = |path: &std::path::Path| wait_for(Duration::from_secs(60), || path.exists().then_some(())).is_some();
    assert!(waited(&started), "the command started");
    tracer.kill().unwrap();
    tracer.wait().unwrap();
    assert!(waited(&marker), "the command ran on after sysdiet died");
}
