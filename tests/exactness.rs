//! sysdiet's counts equal strace -f -c's, exactly, on deterministic victims.

use crate::common::*;

fn check(name: &str, args: &[&str], skip: &[&str]) {
    check_env(name, args, skip, &[]);
}

fn check_env(name: &str, args: &[&str], skip: &[&str], env: &[(&str, &str)]) -> serde_json::Value {
    let exe = victim(name);
    let mut argv = vec![exe.to_str().unwrap()];
    argv.extend_from_slice(args);
    let oracle = strace_counts(&[], &argv);
    let (doc, out) = sysdiet_json_env(&[], &argv, env);
    assert!(out.status.success(), "{name}: sysdiet failed: {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(doc["lost"]["exit_records"], 0);
    assert_eq!(doc["lost"]["tasks_untraced"], 0);
    // The document says which programs counted: the forced ones, if any.
    let programs = doc["run"]["bpf_programs"].as_str();
    match env.iter().find(|(k, _)| *k == "SYSDIET_BPF_VARIANT") {
        Some((_, forced)) => assert_eq!(programs, Some(*forced)),
        None => assert!(matches!(programs, Some("current" | "bounded" | "legacy")), "{programs:?}"),
    }
    assert_counts_as_strace(name, &oracle, &doc, skip);
    doc
}

/// What `sysdiet __programs` loads with `env`: a line per program.
fn programs_loaded(env: &[(&str, &str)]) -> String {
    let out = sysdiet().arg("__programs").envs(env.iter().copied()).output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Asserts the run's counts equal strace's; a failure says what else the
/// run saw.
fn assert_counts_as_strace(what: &str, oracle: &Counts, doc: &serde_json::Value, skip: &[&str]) {
    if let Err(e) = same_counts_but_missed(what, oracle, &counts_of(doc), skip, hook_runs_missed(doc)) {
        panic!("{e}\nwhat sysdiet saw: {}", seen(doc));
    }
}

/// The run's facts beside its counts, for a failure's message: a run with
/// no counts at all says here whether its process was seen to exec and end.
fn seen(doc: &serde_json::Value) -> String {
    let run = &doc["run"];
    let processes: Vec<String> = doc["processes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| format!("pid {} {} exit {} executable {} env {}", p["pid"], p["comm"], p["exit"], p["executable"], !p["environment"].is_null()))
        .collect();
    let lost: Vec<String> =
        doc["lost"].as_object().into_iter().flatten().filter(|(_, n)| n.as_u64() != Some(0)).map(|(what, n)| format!("{what} {n}")).collect();
    format!(
        "programs {} duration {} ns, exit {}, user CPU {} ns, setup {} ns; lost [{}]; processes [{}]",
        run["bpf_programs"],
        run["duration_ns"],
        run["exit"],
        run["user_cpu_ns"],
        run["setup_ns"],
        lost.join(", "),
        processes.join("; ")
    )
}

#[test]
fn timeloop_every_mode() {
    if skip_without_bpf() {
        return;
    }
    for mode in ["none", "localtime", "localtime_r", "gettimeofday", "strftime", "mktime"] {
        check("timeloop", &[mode, "2000"], &[]);
    }
}

#[test]
fn signal_mask_victims() {
    if skip_without_bpf() {
        return;
    }
    check("sigprocmask", &["5000"], &[]);
    check("context", &["3000"], &[]);
    check("sigjmp", &["3000", "1"], &[]);
    check("sigjmp", &["3000", "0"], &[]);
}

#[test]
fn file_and_io_victims() {
    if skip_without_bpf() {
        return;
    }
    check("statloop", &["/etc/passwd", "3000"], &[]);
    check("openclose", &["/etc/passwd", "2000"], &[]);
    check("tinywrite", &["3000"], &[]);
    check("pollzero", &["3000"], &[]);
}

#[test]
fn a_null_path_is_counted_as_such() {
    if skip_without_bpf() {
        return;
    }
    check("futimens", &["200"], &[]);
    null_paths_are_keys_not_losses(&[]);
}

#[test]
fn byte_histograms_stay_exact_when_keys_take_turns_in_the_cache() {
    if skip_without_bpf() {
        return;
    }
    check("manyfds", &["100"], &[]);
    let exe = victim("manyfds");
    let (doc, _) = sysdiet_json(&[], &[exe.to_str().unwrap(), "100"]);
    let writes: Vec<_> = doc["arguments"].as_array().unwrap().iter().filter(|a| a["syscall"] == "write" && a["calls"] == 100).collect();
    let keys: Vec<(&serde_json::Value, &serde_json::Value, &serde_json::Value)> =
        doc["arguments"].as_array().unwrap().iter().filter(|a| a["syscall"] == "write").map(|a| (&a["pid"], &a["argument"], &a["calls"])).collect();
    assert_eq!(writes.len(), 40, "one key per fd; write keys {keys:?}; lost {}; {}", doc["lost"], seen(&doc));
    for w in writes {
        let fd = w["argument"]["fd"].as_u64().unwrap();
        // 1 byte: bucket 1; 101: bucket 8, (64, 128]; 201: bucket 9, (128, 256].
        let mut buckets = vec![0; [1, 8, 9][fd as usize % 3] + 1];
        *buckets.last_mut().unwrap() = 100;
        assert_eq!(w["calls"], 100, "{w}");
        assert_eq!(w["requested"]["buckets"], serde_json::json!(buckets), "{w}");
        assert_eq!(w["returned"]["buckets"], serde_json::json!(buckets), "{w}");
    }
}

/// Every byte-count bucket's edges, counts the kernel cuts and counts it
/// refuses: the buckets are computed without branches in the kernel
/// (bits.bpf.h), so each edge is checked against the formula here.
#[test]
fn byte_histograms_hold_every_bucket_edge() {
    if skip_without_bpf() {
        return;
    }
    check("sizes", &["10"], &[]);
    let exe = victim("sizes");
    let (doc, _) = sysdiet_json(&[], &[exe.to_str().unwrap(), "10"]);
    let w = doc["arguments"].as_array().unwrap().iter().find(|a| a["syscall"] == "write" && a["argument"]["fd"] == 3).expect("writes to /dev/null");
    // Bucket 0 holds 0, 1 holds 1, k >= 2 holds (2^(k-2), 2^(k-1)], the last the rest.
    let bucket = |v: u64| if v <= 1 { v as usize } else { (63 - (v - 1).leading_zeros() as usize + 2).min(31) };
    let sizes: [u64; 12] = [0, 1, 2, 3, 4, 5, 4096, 4097, 1 << 20, 1 << 40, (1 << 63) + 5, u64::MAX];
    // /dev/null takes all it is given, up to 0x7ffff000 bytes a call; from 2^63, EFAULT.
    let returned = |v: u64| if v >= 1 << 63 { 0 } else { v.min(0x7fff_f000) };
    let histogram = |f: &dyn Fn(u64) -> usize| {
        let mut h = vec![0u64; 32];
        for &v in &sizes {
            h[f(v)] += 10;
        }
        while h.last() == Some(&0) {
            h.pop();
        }
        serde_json::json!(h)
    };
    assert_eq!(w["calls"], 120, "{w}");
    assert_eq!(w["errors"], 20, "{w}");
    assert_eq!(w["requested"]["buckets"], histogram(&|v| bucket(v)), "{w}");
    assert_eq!(w["returned"]["buckets"], histogram(&|v| bucket(returned(v))), "{w}");
}

/// A thread that makes more kinds of syscall than its state holds
/// (THREAD_SYSCALLS): the rest, its exit_group among them, are counted
/// apart, by process, and as exactly.
#[test]
fn a_thread_of_more_syscall_kinds_than_its_state_holds() {
    if skip_without_bpf() {
        return;
    }
    check("manykinds", &["100"], &[]);
    let exe = victim("manykinds");
    let (doc, _) = sysdiet_json(&[], &[exe.to_str().unwrap(), "20"]);
    assert_eq!(doc["lost"]["syscall_spill_full"], 0);
    let kinds = counts_of(&doc).values().filter(|(calls, _)| *calls >= 20).count();
    assert!(kinds > 48, "the victim makes {kinds} kinds 20 times or more: not past a thread's own");
}

#[test]
fn failing_calls_count_errors() {
    if skip_without_bpf() {
        return;
    }
    check("failing", &["500"], &[]);
}

#[test]
fn fork_vfork_exec_pipeline_is_followed() {
    if skip_without_bpf() {
        return;
    }
    check("pipeline", &["500"], &[]);
}

#[test]
fn clean_program() {
    if skip_without_bpf() {
        return;
    }
    check("clean", &[], &[]);
}

/// Lock contention makes futex counts (and the allocator's arenas) depend
/// on timing, and strace's slowdown changes the timing: compare the rest.
#[test]
fn threads_calling_localtime() {
    if skip_without_bpf() {
        return;
    }
    let exe = victim("threads");
    let argv = [exe.to_str().unwrap(), "4", "500"];
    let oracle = strace_counts(&[], &argv);
    let (doc, _) = sysdiet_json(&[], &argv);
    let ours = counts_of(&doc);
    let compared = |c: &Counts| -> Counts {
        c.iter().filter(|(k, _)| ["newfstatat", "clone3", "execve", "openat", "read"].contains(&k.as_str())).map(|(k, v)| (k.clone(), *v)).collect()
    };
    same_counts_but_missed("threads", &compared(&oracle), &compared(&ours), &[], hook_runs_missed(&doc)).unwrap();
    assert!(ours["newfstatat"].0 > 0);
    assert_eq!(doc["processes"][0]["threads"].as_array().unwrap().len(), 5, "main + 4 threads");
}

/// A thread other than the leader that execs takes the leader's tid: its
/// state follows it (from the slot of its old tid, or the legacy programs'
/// key), so the new program's calls count. The main thread's wait, cut by
/// the exec, is timing's.
fn a_thread_that_execs_counts_as_strace_does(env: &[(&str, &str)]) {
    let exe = victim("threadexec");
    let argv = [exe.to_str().unwrap(), "300"];
    let oracle = strace_counts(&[], &argv);
    let (doc, out) = sysdiet_json_env(&[], &argv, env);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let ours = counts_of(&doc);
    let compared = |c: &Counts| -> Counts {
        c.iter()
            .filter(|(k, _)| ["getppid", "getuid", "getpid", "execve", "exit_group"].contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), *v))
            .collect()
    };
    same_counts_but_missed("threadexec", &compared(&oracle), &compared(&ours), &[], hook_runs_missed(&doc)).unwrap();
    assert_eq!(ours.get("getpid").map(|c| c.0), Some(300), "{env:?}: the new program's calls");
    assert_eq!(ours.get("getuid").map(|c| c.0), Some(300), "{env:?}: the exec'ing thread's calls before it");
}

#[test]
fn a_thread_that_execs_keeps_counting_under_the_leaders_tid() {
    if skip_without_bpf() {
        return;
    }
    a_thread_that_execs_counts_as_strace_does(&[]);
}

/// -e trace=SET counts exactly what strace's own -e trace=SET counts.
#[test]
fn filter_matches_strace_classes() {
    if skip_without_bpf() {
        return;
    }
    let exe = victim("failing");
    let argv = [exe.to_str().unwrap(), "50"];
    for expr in ["trace=%file", "trace=%desc", "trace=%memory", "trace=!close,ioctl", "trace=/^(open|acc)", "trace=%%stat"] {
        let oracle = strace_counts(&["-e", expr], &argv);
        let (doc, _) = sysdiet_json(&["-e", expr], &argv);
        assert_counts_as_strace(expr, &oracle, &doc, &[]);
        assert_eq!(doc["run"]["filter"], expr);
    }
}

/// A process the command leaves running is read from its storage at the
/// end (the read-out skips looking for live ones only when the counts of
/// targets forked and ended say none can be).
#[test]
fn a_process_left_running_is_counted_too() {
    if skip_without_bpf() {
        return;
    }
    // Long enough to outlive the run on a slow guest (TCG took over 5 s
    // once); killed below.
    let (doc, out) = sysdiet_json(&[], &["sh", "-c", "sleep 120 >/dev/null 2>&1 & sleep 0.3"]);
    assert!(out.status.success(), "{}", stderr_of(&out));
    let procs = doc["processes"].as_array().unwrap();
    let left: Vec<_> = procs.iter().filter(|p| p["comm"] == "sleep" && p["exit"].is_null()).collect();
    for p in &left {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(p["pid"].as_i64().unwrap() as i32), nix::sys::signal::Signal::SIGKILL);
    }
    assert_eq!(left.len(), 1, "the background sleep, still running: {procs:?}");
    let execve = left[0]["syscalls"].as_array().unwrap().iter().find(|s| s["name"] == "execve").expect("its execve");
    assert_eq!(execve["calls"], 1);
    assert!(procs.iter().any(|p| p["comm"] == "sleep" && p["exit"]["code"] == 0), "the other sleep ended: {procs:?}");
}

#[test]
fn the_legacy_programs_count_as_strace_does() {
    // The programs older kernels (5.8 to 5.14) run, loaded here on purpose.
    forced_programs_count_as_strace_does(
        "legacy",
        &["sys_exit_legacy ", "on_tick_legacy ", "sched_process_exit_legacy "],
        &["sys_exit ", "on_tick "],
    );
}

#[test]
fn the_bounded_programs_count_as_strace_does() {
    // Those of 5.15 and 5.16 (no bpf_loop): their own exit hooks (bounded
    // loops: a slot's flush, a thread's exit record), the current others.
    forced_programs_count_as_strace_does(
        "bounded",
        &["sys_exit_bounded ", "sched_process_exit_bounded ", "on_tick "],
        &["sys_exit ", "sched_process_exit ", "copy_logged ", "kernel_tick ", "_legacy "],
    );
}

fn forced_programs_count_as_strace_does(variant: &str, loaded: &[&str], not_loaded: &[&str]) {
    if skip_without_bpf() {
        return;
    }
    // A kernel that runs the legacy programs (before 5.15: Debian 11's
    // 5.10) lacks what the others need: forced, they fall back to legacy.
    if variant != "legacy" && programs_loaded(&[]).contains("sys_exit_legacy ") {
        eprintln!("{variant}: this kernel runs the legacy programs: skipped");
        return;
    }
    let forced: &[(&str, &str)] = &[("SYSDIET_BPF_VARIANT", variant)];
    let programs = programs_loaded(forced);
    for name in loaded {
        assert!(programs.contains(name), "{variant}: {name}: {programs}");
    }
    for name in not_loaded {
        assert!(!programs.contains(name), "{variant}: not {name}: {programs}");
    }
    check_env("timeloop", &["localtime", "2000"], &[], forced);
    check_env("sigprocmask", &["3000"], &[], forced);
    check_env("openclose", &["/etc/passwd", "2000"], &[], forced);
    check_env("tinywrite", &["3000"], &[], forced);
    check_env("pipeline", &["500"], &[], forced);
    check_env("futimens", &["200"], &[], forced);
    check_env("manykinds", &["50"], &[], forced);
    a_thread_that_execs_counts_as_strace_does(forced);
}

/// The backup hooks that preemptible kernels load, each after its hook
/// (sys_exit's, and the forks', execs', thread exits' and signals'), take
/// only the events the kernel skipped that hook for: forced on here, where
/// none is skipped, they count nothing twice, and follow every child and
/// thread.
#[test]
fn the_backup_hook_counts_nothing_twice() {
    if skip_without_bpf() {
        return;
    }
    const BACKUP: &[(&str, &str)] = &[("SYSDIET_BACKUP_HOOK", "1")];
    let loaded = programs_loaded(BACKUP);
    // The legacy and bounded programs' kernels (before 5.17) hook
    // syscalls with preemption off: only the current programs have a backup.
    let current = loaded.contains("sys_exit ");
    for hook in ["sys_exit", "sched_process_fork", "sched_process_exec", "sched_process_exit", "signal_deliver"] {
        assert_eq!(loaded.contains(&format!("{hook}_backup ")), current, "{loaded}");
    }
    check_env("timeloop", &["localtime", "2000"], &[], BACKUP);
    check_env("manykinds", &["50"], &[], BACKUP);
    check_env("pipeline", &["500"], &[], BACKUP);
    // Threads that end while traced: each one's record sent once.
    check_env("manythreads", &["40", "8"], &["futex"], BACKUP);
}

/// The backups count what their hooks were skipped for: sys_exit and the
/// fork, exec and exit hooks made to skip runs at random (SYSDIET_TEST_SKIP,
/// as the kernel skips a preempted hook's), every one of them, or none.
#[test]
fn the_backups_count_what_their_hooks_skipped() {
    if skip_without_bpf() {
        return;
    }
    // Only the current programs can skip, and have backups.
    let loaded = programs_loaded(&[]);
    if !loaded.contains("sys_exit ") {
        return;
    }
    // Where the kernel preempts hooks (backups by default), a backup can
    // be skipped too, its call missed and counted so; elsewhere none is.
    let preempts = loaded.contains("sys_exit_backup ");
    // Skipped, and no backup: nothing counted, so the knob works.
    let argv = [victim("timeloop").to_str().unwrap().to_owned(), "localtime".into(), "200".into()];
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let (doc, _) = sysdiet_json_env(&[], &argv, &[("SYSDIET_BACKUP_HOOK", "0"), ("SYSDIET_TEST_SKIP", "1")]);
    assert_eq!(counts_of(&doc).values().map(|c| c.0).sum::<u64>(), 0, "{doc}");
    for every in ["1", "2", "3"] {
        let env = [("SYSDIET_BACKUP_HOOK", "1"), ("SYSDIET_TEST_SKIP", every)];
        let timeloop = check_env("timeloop", &["localtime", "2000"], &[], &env);
        let pipeline = check_env("pipeline", &["500"], &[], &env);
        if preempts {
            // A thread whose exit hook and its backup were both skipped
            // is missed whole: one run missed, many calls.
            continue;
        }
        // Threads made and ended: the fork and exit hooks skipped too.
        let threads = check_env("manythreads", &["40", "8"], &["futex"], &env);
        // Children that exec: each named by its new program, whose exec
        // hook may have been skipped (its backup's work then).
        let children = check_env("forkexec", &["3", "/bin/true"], &[], &env);
        let names: Vec<&str> = children["processes"].as_array().unwrap().iter().map(|p| p["comm"].as_str().unwrap()).collect();
        assert_eq!(names.iter().filter(|&&n| n == "true").count(), 3, "one in {every}: {names:?}");
        for doc in [timeloop, pipeline, threads, children] {
            assert_eq!(hook_runs_missed(&doc), 0, "{doc}");
        }
    }
}

/// A signal's handler runs with its signal blocked, so the handler's own
/// sigprocmask blocking it again changes nothing: each of sighandler's is
/// "same". A skipped signal_deliver would leave the thread's mask from
/// before the signal known, and the call classed a block; its backup
/// forgets that mask again. (Without the backup, every skip misclasses.)
#[test]
fn a_skipped_signal_hook_leaves_no_stale_mask() {
    if skip_without_bpf() {
        return;
    }
    if !programs_loaded(&[]).contains("sys_exit ") {
        return;
    }
    let exe = victim("sighandler");
    let argv = [exe.to_str().unwrap(), "300"];
    for env in [&[("SYSDIET_BACKUP_HOOK", "1")][..], &[("SYSDIET_BACKUP_HOOK", "1"), ("SYSDIET_TEST_SKIP", "1")]] {
        let (doc, _) = sysdiet_json_env(&[], &argv, env);
        let classes: Vec<(String, u64)> = doc["arguments"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|a| a["syscall"] == "rt_sigprocmask")
            .map(|a| (a["argument"]["change"].as_str().unwrap_or("?").to_owned(), a["calls"].as_u64().unwrap()))
            .collect();
        // Where the kernel skips hooks too, a call it skipped with its
        // backup goes uncounted (and counted as missed).
        let [(class, calls)] = &classes[..] else { panic!("{env:?}: {classes:?}") };
        assert_eq!(class, "same", "{env:?}: {classes:?}");
        assert!(exact_but_missed(*calls, 300, hook_runs_missed(&doc)), "{env:?}: {classes:?}");
    }
}

/// Runs beside strace tracing other programs, all at once: each still
/// counts exactly. (Debian 12's arm64 kernel under TCG lost every call of
/// whole rounds of such runs: docs/kernels.md.)
#[test]
fn counts_beside_straced_programs() {
    if skip_without_bpf() {
        return;
    }
    let exe = victim("sigprocmask");
    let argv = [exe.to_str().unwrap(), "300"];
    let heavy = [exe.to_str().unwrap(), "3000"];
    let oracle = strace_counts(&[], &argv);
    for _round in 0..3 {
        std::thread::scope(|s| {
            let runs: Vec<_> = (0..3).map(|_| (s.spawn(|| strace_counts(&[], &heavy)), s.spawn(|| sysdiet_json(&[], &argv).0))).collect();
            for (strace, ours) in runs {
                assert_eq!(strace.join().unwrap()["rt_sigprocmask"].0, 3000);
                assert_counts_as_strace("sigprocmask beside strace", &oracle, &ours.join().unwrap(), &[]);
            }
        });
    }
}

/// The read-out of a run whose keys the programs logged all (1,000 paths
/// twice, under ARG_KEYS_LOGGED's 4,096) has copy_logged copy their entries
/// in one run of it; one with more keys (5,000) walks the table. Both read
/// each path's own entry: every third path is a file, whose calls succeed,
/// so an entry read for a neighbour's key shows. The legacy programs log
/// no keys: they always walk.
#[test]
fn logged_keys_are_copied_and_more_keys_walked() {
    if skip_without_bpf() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for i in (0..5000).step_by(3) {
        std::fs::write(dir.path().join(i.to_string()), "").unwrap();
    }
    let root = dir.path().to_str().unwrap();
    let filter = ["-e", "trace=newfstatat,openat,close"];
    let exe = victim("manypaths");
    // The bounded programs (5.15, 5.16) have no bpf_loop to copy with: each
    // logged key is looked up instead.
    let runs = [(1000, None, "copy the logged entries"), (5000, None, "walk the argument table"), (1000, Some("bounded"), "look up the logged keys")];
    for (paths, variant, read) in runs {
        let n = paths.to_string();
        let argv = [exe.to_str().unwrap(), n.as_str(), "5", "2", "1", "0", root];
        let oracle = strace_counts(&filter, &argv);
        let mut env = vec![("SYSDIET_KEEP", "0"), ("SYSDIET_TIMINGS", "1")];
        env.extend(variant.map(|v| ("SYSDIET_BPF_VARIANT", v)));
        let (doc, out) = sysdiet_json_env(&filter, &argv, &env);
        assert!(out.status.success(), "sysdiet failed: {}", stderr_of(&out));
        assert_counts_as_strace(&format!("manypaths {paths}"), &oracle, &doc, &[]);
        let own = argument_counts(&doc)
            .iter()
            .filter(|(syscall, argument, calls, errors)| {
                let i = argument.split(&format!("{root}/")).nth(1).and_then(|rest| rest.split('"').next()?.parse::<u32>().ok());
                let failed = if i.is_some_and(|i| i % 3 == 0) { 0 } else { 2 };
                syscall == "\"newfstatat\"" && i.is_some() && (*calls, *errors) == (2, failed)
            })
            .count();
        assert!(exact_but_missed(own as u64, paths, hook_runs_missed(&doc)), "{paths} paths read twice each, {own} rows of their own counts");
        let read = match doc["run"]["bpf_programs"].as_str() {
            Some("legacy") => "walk the argument table",
            Some("bounded") if paths == 1000 => "look up the logged keys",
            _ => read,
        };
        let steps = stderr_of(&out);
        let ways = ["copy the logged entries", "look up the logged keys", "walk the argument table"];
        let taken: Vec<&str> = ways.into_iter().filter(|way| steps.contains(way)).collect();
        assert_eq!(taken, [read], "{paths} paths:\n{steps}");
    }
}

/// Programs kept between runs (keeper.rs): a run borrows the previous
/// run's, counts as strace does with them, and gives them back reset; a
/// run that leaves a target alive does not give them back; SYSDIET_KEEP=0
/// neither borrows nor leaves them.
#[test]
fn kept_programs_count_as_strace_run_after_run() {
    if skip_without_bpf() {
        return;
    }
    // A filter no other test uses: a set of programs of this test's own.
    let filter = ["-e", "trace=newfstatat,openat,close,read,execve,exit_group"];
    let exe = victim("manypaths");
    // 5,000 paths twice each: first sightings, then promotions; more keys
    // than the programs log (ARG_KEYS_LOGGED, 4,096), so the read-out walks
    // the table and the keeper empties it whole.
    let argv = [exe.to_str().unwrap(), "5000", "50", "2"];
    // Long enough for a run between two borrowers to load its own in a
    // guest under TCG (tens of seconds there).
    let keep = [("SYSDIET_KEEP", "300")];
    let run = |env: &[(&str, &str)], argv: &[&str]| {
        let (doc, out) = sysdiet_json_env(&filter, argv, env);
        assert!(out.status.success(), "sysdiet failed: {}", stderr_of(&out));
        let kept = doc["run"]["bpf_programs_kept"].as_bool().unwrap_or(false);
        (doc, kept)
    };
    let oracle = strace_counts(&filter, &argv);
    let (first, _) = run(&keep, &argv);
    assert_counts_as_strace("manypaths, programs loaded", &oracle, &first, &[]);
    let second = until_borrowed(|| run(&keep, &argv));
    assert_counts_as_strace("manypaths, programs kept", &oracle, &second, &[]);
    // A call the kernel ran no hook for (7.x) leaves a path seen twice
    // seen once: its row then differs, as the LOST line says.
    let same_rows = |a: &serde_json::Value, b: &serde_json::Value, what: &str| {
        if hook_runs_missed(a) + hook_runs_missed(b) == 0 {
            assert_eq!(argument_counts(a), argument_counts(b), "{what}");
        }
    };
    same_rows(&second, &first, "per-path counts after a reset");
    // Stack samples dropped depend on how fast the reader keeps up, and
    // the hook's runs the kernel skipped on when other tasks ran.
    let counted_lost = |doc: &serde_json::Value| {
        let mut lost = doc["lost"].clone();
        lost.as_object_mut().map(|l| {
            l.remove("samples_dropped");
            l.remove("hook_runs_missed")
        });
        lost
    };
    assert_eq!(counted_lost(&second), counted_lost(&first));
    let (third, kept) = run(&keep, &argv);
    assert!(kept, "given back clean, lent again");
    assert_counts_as_strace("manypaths, programs kept twice", &oracle, &third, &[]);
    same_rows(&third, &first, "per-path counts, kept twice");

    // 100 paths twice: keys few enough for the programs to log them all, so
    // the read-out has copy_logged copy their entries and the keeper deletes
    // them by key (after a run that made too many to log, it walks the
    // table).
    let small = [exe.to_str().unwrap(), "100", "5", "2"];
    let small_oracle = strace_counts(&filter, &small);
    let paths = |doc: &serde_json::Value| {
        let rows = argument_counts(doc);
        rows.iter()
            .filter(|(syscall, argument, calls, errors)| {
                syscall == "\"newfstatat\"" && argument.contains("/nonexistent/sysdiet/") && (*calls, *errors) == (2, 2)
            })
            .count()
    };
    let (fresh, _) = run(&[("SYSDIET_KEEP", "0")], &small);
    assert!(exact_but_missed(paths(&fresh) as u64, 100, hook_runs_missed(&fresh)), "every logged key read: {:?}", argument_counts(&fresh));
    for after in ["a run of 5,000 keys", "a run of 100"] {
        let (doc, kept) = run(&keep, &small);
        assert!(kept, "lent after {after}");
        assert_counts_as_strace("manypaths 100, programs kept", &small_oracle, &doc, &[]);
        same_rows(&doc, &fresh, &format!("per-path counts after {after}"));
    }
    let (doc, kept) = run(&keep, &argv);
    assert!(kept);
    same_rows(&doc, &first, "5,000 keys after a reset by key");

    let (_, kept) = run(&[("SYSDIET_KEEP", "0")], &argv);
    assert!(!kept, "SYSDIET_KEEP=0 borrows nothing");
    // Alive past the run's end until killed here: a run in a guest under
    // TCG on a busy host takes seconds to minutes (Debian 11's outlived a
    // 2-second sleep; Ubuntu 22.04's, it seems, a 30-second one).
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let left = format!("sleep 3600 >/dev/null 2>&1 & echo $! > {}", pid_file.display());
    let (_, kept) = run(&keep, &["sh", "-c", &left]);
    let alive = KillOnDrop(std::fs::read_to_string(&pid_file).unwrap().trim().parse().unwrap());
    let (_, kept_after) = run(&keep, &argv);
    drop(alive);
    assert!(kept, "the keeper is still there after a run that did not ask");
    assert!(!kept_after, "a run that left a target alive gave nothing back");
}

/// A borrower without CAP_SYS_ADMIN cannot take the keeper's maps by
/// their ids (the kernel refuses BPF_MAP_GET_FD_BY_ID): it opens the object
/// and gives it the lent descriptors instead (load_borrowed), and counts as
/// strace does all the same, per path too. Where the kernel opens perf
/// events for CAP_SYS_ADMIN only (Debian's, at kernel.perf_event_paranoid
/// 3), sysdiet says so in one line instead.
#[test]
fn a_borrower_without_cap_sys_admin_counts_as_strace() {
    if skip_without_bpf() {
        return;
    }
    // Its own set (a filter no other test uses), loaded and kept without
    // CAP_SYS_ADMIN (CAP_BPF and CAP_PERFMON are enough to load it).
    let filter = ["-e", "trace=newfstatat,openat,close,exit_group"];
    let exe = victim("manypaths");
    let argv = [exe.to_str().unwrap(), "300", "20", "2"];
    let without = ["setpriv", "--inh-caps=-sys_admin", "--bounding-set=-sys_admin", "--"];
    let paranoid: i32 = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid").unwrap().trim().parse().unwrap();
    let probe = std::process::Command::new(without[0])
        .args(&without[1..])
        .arg(env!("CARGO_BIN_EXE_sysdiet"))
        .args(["run", "--backend", "bpf", "--", "true"])
        .env("SYSDIET_KEEP", "0")
        .output()
        .unwrap();
    if !probe.status.success() {
        let err = stderr_of(&probe);
        assert!(paranoid > 2, "refused at kernel.perf_event_paranoid {paranoid}: {err}");
        assert_eq!(probe.status.code(), Some(1), "{err}");
        assert!(err.contains(&format!("kernel.perf_event_paranoid is {paranoid}")) && err.trim_end().lines().count() == 1, "{err}");
        return;
    }
    let run = || {
        let (doc, out) = sysdiet_json_via(&without, &filter, &argv, &[("SYSDIET_KEEP", "300")]);
        assert!(out.status.success(), "sysdiet failed: {}", stderr_of(&out));
        let kept = doc["run"]["bpf_programs_kept"].as_bool().unwrap_or(false);
        (doc, kept)
    };
    let oracle = strace_counts(&filter, &argv);
    let (first, _) = run();
    assert_counts_as_strace("manypaths without CAP_SYS_ADMIN, loaded", &oracle, &first, &[]);
    let second = until_borrowed(run);
    assert_counts_as_strace("manypaths without CAP_SYS_ADMIN, borrowed", &oracle, &second, &[]);
    assert_eq!(argument_counts(&second), argument_counts(&first), "per-path counts of a borrower that opened the object");
}

/// The first of up to 20 runs that borrowed kept programs: the keeper a
/// run left starts on its own, so ask until it answers.
fn until_borrowed(mut run: impl FnMut() -> (serde_json::Value, bool)) -> serde_json::Value {
    for _ in 0..20 {
        let (doc, kept) = run();
        if kept {
            return doc;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    panic!("no run borrowed the kept programs")
}

/// Each repeated argument's syscall, argument, calls and errors, in order.
/// A key seen once is a row only when its one call took longer than its
/// first-sighting word holds (FIRST_NS_MAX in arguments.bpf.h): a matter
/// of the host's speed (a guest under TCG, say), not of what was counted.
fn argument_counts(doc: &serde_json::Value) -> Vec<(String, String, u64, u64)> {
    let mut rows: Vec<_> = doc["arguments"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|a| (a["syscall"].to_string(), a["argument"].to_string(), a["calls"].as_u64().unwrap_or(0), a["errors"].as_u64().unwrap_or(0)))
        .filter(|(_, _, calls, _)| *calls > 1)
        .collect();
    rows.sort();
    rows
}
