//! Shared by the integration tests: building the victims, running sysdiet
//! and strace (the oracle for counts) on them.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Mutex;

static BUILD: Mutex<()> = Mutex::new(());

fn victims_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("victims")
}

/// The victim `name` (tests/victims/NAME.c), compiled once, with `-O2 -g`
/// (so without frame pointers); `NAME-fp` is the same with frame pointers.
pub fn victim(name: &str) -> PathBuf {
    let _guard = BUILD.lock().unwrap_or_else(|e| e.into_inner());
    let src_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/victims");
    let (base, frame_pointers) = match name.strip_suffix("-fp") {
        Some(base) => (base, true),
        None => (name, false),
    };
    let src = src_dir.join(format!("{base}.c"));
    let out = victims_dir().join(name);
    let fresh = |out: &Path| {
        let built = std::fs::metadata(out).and_then(|m| m.modified()).ok();
        let newest_src = [src.clone(), src_dir.join("victim.h")].iter().filter_map(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok()).max();
        matches!((built, newest_src), (Some(b), Some(s)) if b >= s)
    };
    if !fresh(&out) {
        std::fs::create_dir_all(victims_dir()).unwrap();
        // Build to a private name, then rename: test binaries run in parallel.
        let tmp = out.with_extension(format!("tmp{}", std::process::id()));
        let status = Command::new("cc")
            .args(["-O2", "-g", "-pthread", "-Wall"])
            .args(if frame_pointers { &["-fno-omit-frame-pointer"][..] } else { &["-fomit-frame-pointer"][..] })
            .arg("-o")
            .arg(&tmp)
            .arg(&src)
            .status()
            .expect("cc runs (install build-essential: `make deps`)");
        assert!(status.success(), "compiling {}", src.display());
        std::fs::rename(&tmp, &out).unwrap();
    }
    out
}

/// sysdiet, in the environment a user's shell would give it: cargo's
/// LD_LIBRARY_PATH would make every victim's loader probe extra directories.
pub fn sysdiet() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_sysdiet"));
    c.env_remove("LD_LIBRARY_PATH");
    c
}

/// Per-syscall (calls, errors).
pub type Counts = BTreeMap<String, (u64, u64)>;

/// Runs `argv` under `sysdiet run --json`, with TZ unset; returns the JSON
/// document and the run's output.
pub fn sysdiet_json(args: &[&str], argv: &[&str]) -> (serde_json::Value, Output) {
    sysdiet_json_env(args, argv, &[])
}

/// The same, with these variables set for sysdiet.
pub fn sysdiet_json_env(args: &[&str], argv: &[&str], env: &[(&str, &str)]) -> (serde_json::Value, Output) {
    sysdiet_json_via(&[], args, argv, env)
}

/// The same, sysdiet started by `wrapper` (a command that runs the rest of
/// its arguments: `setpriv ... --`), if not empty.
pub fn sysdiet_json_via(wrapper: &[&str], args: &[&str], argv: &[&str], env: &[(&str, &str)]) -> (serde_json::Value, Output) {
    fixed_layout();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("trace.json");
    // BPF unless the test names a backend: a fallback must not pass for it.
    let backend: &[&str] = if args.contains(&"--backend") { &[] } else { &["--backend", "bpf"] };
    let mut command = match wrapper.split_first() {
        Some((first, rest)) => {
            let mut c = Command::new(first);
            c.args(rest).arg(env!("CARGO_BIN_EXE_sysdiet")).env_remove("LD_LIBRARY_PATH");
            c
        }
        None => sysdiet(),
    };
    let out = command
        .arg("run")
        .args(backend)
        .args(args)
        .arg("--json")
        .arg("-o")
        .arg(&json)
        .arg("--")
        .args(argv)
        .env_remove("TZ")
        .envs(env.iter().copied())
        // The same stdout strace's run gets: glibc probes a char device.
        .stdout(std::process::Stdio::null())
        .output()
        .unwrap();
    let text = std::fs::read_to_string(&json).unwrap_or_else(|e| panic!("no JSON from sysdiet ({e}): {}", String::from_utf8_lossy(&out.stderr)));
    let doc = serde_json::from_str(&text).unwrap_or_else(|e| panic!("no valid JSON from sysdiet ({e}): {}", String::from_utf8_lossy(&out.stderr)));
    (doc, out)
}

pub fn counts_of(doc: &serde_json::Value) -> Counts {
    doc["syscalls"]
        .as_array()
        .expect("syscalls array")
        .iter()
        .map(|s| (s["name"].as_str().unwrap().to_string(), (s["calls"].as_u64().unwrap(), s["errors"].as_u64().unwrap())))
        .collect()
}

/// The same address-space layout for every run of a victim: this thread's
/// children start without ASLR (a personality is inherited). arm64's
/// libraries align their segments to 64 KiB, and ld.so trims the slack
/// with one munmap or two as the random base falls: a victim's munmap
/// count would differ from run to run, whoever counts it.
pub fn fixed_layout() {
    // SAFETY: personality(0xffffffff) only reads the current persona.
    let persona = unsafe { libc::personality(0xffff_ffff) };
    // SAFETY: adds ADDR_NO_RANDOMIZE to it, for this thread's children.
    unsafe { libc::personality((persona | libc::ADDR_NO_RANDOMIZE) as libc::c_ulong) };
}

/// Waits until `check` returns Some, for up to `limit`.
pub fn wait_for<T>(limit: std::time::Duration, mut check: impl FnMut() -> Option<T>) -> Option<T> {
    let t0 = std::time::Instant::now();
    while t0.elapsed() < limit {
        if let Some(v) = check() {
            return Some(v);
        }
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
    None
}

/// `strace -f -c` on `argv` (TZ unset), parsed.
pub fn strace_counts(args: &[&str], argv: &[&str]) -> Counts {
    fixed_layout();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("strace.txt");
    let status = Command::new("strace")
        .env_remove("LD_LIBRARY_PATH")
        .args(["-f", "-qq", "-c", "-o"])
        .arg(&out)
        .args(args)
        .arg("--")
        .args(argv)
        .env_remove("TZ")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .expect("strace runs (install it: `make deps`)");
    assert!(status.code().is_some(), "strace died");
    parse_strace_summary(&std::fs::read_to_string(out).unwrap())
}

/// The table `strace -c` prints: "% time seconds usecs/call calls errors syscall".
pub fn parse_strace_summary(text: &str) -> Counts {
    let mut counts = Counts::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 5 || !f[0].chars().next().is_some_and(|c| c.is_ascii_digit()) {
            continue;
        }
        let name = f[f.len() - 1];
        if name == "total" {
            continue;
        }
        let calls: u64 = f[3].parse().unwrap();
        let errors: u64 = if f.len() == 6 { f[4].parse().unwrap() } else { 0 };
        counts.insert(name.to_string(), (calls, errors));
    }
    counts
}

/// Syscalls that never return: strace cannot count them, sysdiet does.
pub const NEVER_RETURN: &[&str] = &["exit", "exit_group"];

/// Asserts sysdiet's counts equal strace's, but for `skip`ped syscalls.
pub fn assert_same_counts(what: &str, strace: &Counts, sysdiet: &Counts, skip: &[&str]) {
    if let Err(e) = same_counts(what, strace, sysdiet, skip) {
        panic!("{e}");
    }
}

/// The differences between sysdiet's counts and strace's, if any.
pub fn same_counts(what: &str, strace: &Counts, sysdiet: &Counts, skip: &[&str]) -> Result<(), String> {
    same_counts_but_missed(what, strace, sysdiet, skip, 0)
}

/// As `same_counts`, but sysdiet may be short of strace by as many calls in
/// all (none more, no errors) as the kernel said it ran no hook for
/// (`lost.hook_runs_missed`: on the whole host, so an upper bound).
pub fn same_counts_but_missed(what: &str, strace: &Counts, sysdiet: &Counts, skip: &[&str], missed: u64) -> Result<(), String> {
    let keep = |c: &Counts| -> Counts {
        c.iter().filter(|(k, _)| !skip.contains(&k.as_str()) && !NEVER_RETURN.contains(&k.as_str())).map(|(k, v)| (k.clone(), *v)).collect()
    };
    let (a, b) = (keep(strace), keep(sysdiet));
    if missed > 0 {
        let short = |k: &String| {
            let (s, o) = (a.get(k).copied().unwrap_or_default(), b.get(k).copied().unwrap_or_default());
            (o.0 <= s.0 && o.1 <= s.1).then_some(s.0 - o.0)
        };
        let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
        let shortfalls: Option<Vec<u64>> = keys.into_iter().map(short).collect();
        if shortfalls.is_some_and(|s| s.iter().sum::<u64>() <= missed) {
            return Ok(());
        }
    }
    let diff: Vec<String> = a
        .keys()
        .chain(b.keys())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .filter(|k| a.get(*k) != b.get(*k))
        .map(|k| format!("{k}: strace {:?} sysdiet {:?}", a.get(k), b.get(k)))
        .collect();
    if diff.is_empty() {
        Ok(())
    } else {
        Err(format!("{what}: counts differ from strace -f -c (hook runs missed: {missed}):\n  {}", diff.join("\n  ")))
    }
}

/// The syscall ends the kernel ran no sysdiet hook for during a run
/// (`lost.hook_runs_missed`): how far short of exact its counts may be.
pub fn hook_runs_missed(doc: &serde_json::Value) -> u64 {
    doc["lost"]["hook_runs_missed"].as_u64().unwrap_or(0)
}

/// Whether `counted` is `exact`, or short of it by no more than `missed`.
pub fn exact_but_missed(counted: u64, exact: u64, missed: u64) -> bool {
    counted <= exact && exact - counted <= missed
}

/// A process by pid (one the test did not spawn itself, so not a Child)
/// killed when the test ends, passed or failed: a stubborn command would
/// hold the test's output pipe open, a left sleep outlive the test.
pub struct KillOnDrop(pub i32);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        // SAFETY: a signal to a process the test started.
        unsafe { libc::kill(self.0, libc::SIGKILL) };
    }
}

/// A target process killed when the test ends, even by a failed assert.
pub struct Running(pub std::process::Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `sysdiet attach -p PID --duration 300ms --json`, once the target has
/// had time to start; the JSON document.
pub fn attach_for_300ms(pid: u32) -> serde_json::Value {
    std::thread::sleep(std::time::Duration::from_millis(150));
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("a.json");
    let out = sysdiet().args(["attach", "-p", &pid.to_string(), "--duration", "300ms", "--json", "-o"]).arg(&json).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap()
}

/// `gated THREADS N` (with `hold`, its workers stay alive after their work
/// and it prints "worked"), its input and output piped, returned once every
/// thread has started (none at work until its input ends).
pub fn gated(threads: usize, n: u32, hold: bool) -> Running {
    use std::process::Stdio;
    let target = Running(
        Command::new(victim("gated"))
            .args([threads.to_string(), n.to_string()])
            .args(hold.then_some("hold"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let pid = target.0.id();
    let tasks = || std::fs::read_dir(format!("/proc/{pid}/task")).map_or(0, |d| d.count());
    for _ in 0..60_000 {
        if tasks() == threads + 1 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    assert_eq!(tasks(), threads + 1, "gated started its threads");
    target
}

/// A `sysdiet attach -p PID --json -o FILE ARGS` that has said it attached.
pub struct Attached {
    pub child: std::process::Child,
    err: std::io::BufReader<std::process::ChildStderr>,
    /// What it has said so far.
    pub said: String,
    json: PathBuf,
    _dir: tempfile::TempDir,
}

/// Starts `sysdiet attach` to `pid` with `args` and `env`, and waits until
/// it says it attached.
pub fn attached(pid: u32, args: &[&str], env: &[(&str, &str)]) -> Attached {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("a.json");
    let mut child = sysdiet()
        .args(["attach", "-p", &pid.to_string(), "--json", "-o"])
        .arg(&json)
        .args(args)
        .envs(env.iter().copied())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut said = String::new();
    while !said.contains("sysdiet: attached to") {
        let before = said.len();
        err.read_line(&mut said).unwrap();
        assert!(said.len() > before, "sysdiet ended before it attached: {said}");
    }
    Attached { child, err, said, json, _dir: dir }
}

impl Attached {
    /// Waits for it to end: its status, its JSON document, all it said.
    pub fn finish(mut self) -> (std::process::ExitStatus, serde_json::Value, String) {
        use std::io::Read;
        self.err.read_to_string(&mut self.said).unwrap();
        let status = self.child.wait().unwrap();
        let said = self.said;
        let doc = serde_json::from_str(&std::fs::read_to_string(&self.json).unwrap_or_default()).unwrap_or_else(|e| panic!("{e}: {said}"));
        (status, doc, said)
    }
}

/// `sysdiet attach -p PID --json ARGS` to `gated THREADS N` (every thread
/// started, none at work), which is let go once sysdiet says it attached:
/// the JSON document and sysdiet's stderr. Every call of the work falls
/// inside the trace, whatever the machine's speed (a TCG guest's too).
pub fn attach_to_gated(threads: u32, n: u32, args: &[&str]) -> (serde_json::Value, String) {
    let mut target = gated(threads as usize, n, false);
    let attach = attached(target.0.id(), args, &[]);
    drop(target.0.stdin.take());
    let (status, doc, said) = attach.finish();
    assert!(status.success(), "{said}");
    assert!(target.0.wait().unwrap().success());
    (doc, said)
}

/// What a finished command wrote on stderr.
pub fn stderr_of(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The first child of `pid` now (sysdiet's held command), if it has one.
pub fn first_child(pid: u32) -> Option<u32> {
    let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).ok()?;
    children.split_whitespace().next()?.parse().ok()
}

pub use sysdiet::linux::host::kernel_release;

/// Why `run` counts with ptrace when it has no capabilities, and how
/// `--backend bpf` then starts its refusal: no rights, unless the kernel
/// lacks what rights would not mend, which is said first: BTF (Ubuntu
/// 18.04's 4.15), or its typed tracepoints (20.04's 5.4, whose BTF names no
/// `btf_trace_sys_exit`).
pub fn no_capabilities_reason() -> (String, String) {
    let kernel = format!("this kernel ({})", kernel_release());
    match std::fs::read("/sys/kernel/btf/vmlinux") {
        Err(_) => (format!("{kernel} has no BTF"), format!("{kernel} has no BTF (")),
        Ok(btf) if !btf.windows(19).any(|w| w == b"btf_trace_sys_exit\0") => {
            (format!("{kernel} has no BTF-typed tracepoints (Linux 5.5)"), format!("{kernel} has no BTF-typed tracepoints, which"))
        }
        Ok(_) => ("no rights to load BPF".to_string(), "no rights to load BPF programs".to_string()),
    }
}

/// Whether this test must be skipped because BPF cannot be loaded here (not
/// root, or a kernel without BTF). Says so once per test binary, on the
/// real stderr (the harness captures only the print macros).
pub fn skip_without_bpf() -> bool {
    static SAID: std::sync::Once = std::sync::Once::new();
    let why = if !nix::unistd::geteuid().is_root() {
        "not root"
    } else if !Path::new("/sys/kernel/btf/vmlinux").exists() {
        "the kernel has no BTF (/sys/kernel/btf/vmlinux)"
    } else {
        return false;
    };
    SAID.call_once(|| {
        use std::io::Write;
        let test = std::env::args().next().unwrap_or_default();
        let name = Path::new(&test).file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let _ = writeln!(std::io::stderr(), "{name}: skipping the tests that load BPF: {why} (run them as root on a kernel with BTF)");
    });
    true
}

/// `cmd` as the shell would find it on PATH.
pub fn which(cmd: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|p| std::env::split_paths(&p).map(|d| d.join(cmd)).find(|p| p.is_file()))
}

/// futimens(fd) is utimensat(fd, NULL, NULL, 0): a NULL path is a key of
/// its own, not a path lost. `extra`: options before the command.
pub fn null_paths_are_keys_not_losses(extra: &[&str]) {
    let exe = victim("futimens");
    let (doc, out) = sysdiet_json(extra, &[exe.to_str().unwrap(), "200"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(doc["lost"]["path_unreadable"], 0, "{extra:?}: {}", doc["lost"]);
    let key =
        doc["arguments"].as_array().unwrap().iter().find(|a| a["syscall"] == "utimensat").unwrap_or_else(|| panic!("{extra:?}: no utimensat key"));
    assert_eq!(
        (key["calls"].as_u64(), &key["argument"]["null"], &key["argument"]["path"]),
        (Some(200), &serde_json::json!(true), &serde_json::Value::Null),
        "{key}"
    );
    assert!(key["argument"]["dirfd"].as_i64() > Some(2), "{key}");
}

/// The kernel's tick in ns: what its coarse clocks advance by.
pub fn kernel_tick_ns() -> u64 {
    let mut res = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: writes one timespec.
    assert_eq!(unsafe { libc::clock_getres(libc::CLOCK_MONOTONIC_COARSE, &mut res) }, 0);
    res.tv_sec as u64 * 1_000_000_000 + res.tv_nsec as u64
}
