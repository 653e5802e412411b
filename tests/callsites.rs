//! Call sites: stacks unwound through glibc (with and without frame
//! pointers), named down to the victim's file:line, and the folded and SVG
//! outputs.

use crate::common::*;
use serde_json::Value;

/// (site, calls, samples) of every share in `shares`.
fn shares<'a>(doc: &'a Value, shares: &'a Value) -> Vec<(&'a Value, u64, u64)> {
    shares
        .as_array()
        .map(|a| {
            a.iter()
                .map(|s| (&doc["call_sites"][s["site"].as_u64().unwrap() as usize], s["calls"].as_u64().unwrap(), s["samples"].as_u64().unwrap()))
                .collect()
        })
        .unwrap_or_default()
}

fn syscall<'a>(doc: &'a Value, name: &str) -> &'a Value {
    doc["syscalls"].as_array().unwrap().iter().find(|s| s["name"] == name).unwrap_or_else(|| panic!("no {name} in {doc}"))
}

fn path_argument<'a>(doc: &'a Value, path: &str) -> &'a Value {
    doc["arguments"].as_array().unwrap().iter().find(|a| a["argument"]["path"] == path).unwrap_or_else(|| panic!("no {path} in {doc}"))
}

fn functions(site: &Value) -> Vec<&str> {
    site["frames"].as_array().unwrap().iter().filter_map(|f| f["function"].as_str()).collect()
}

fn has_function(site: &Value, name: &str) -> bool {
    functions(site).iter().any(|f| f.contains(name))
}

/// The share of samples whose stack reaches `main` (or another of `roots`:
/// a coroutine's stack starts at its own function).
fn reaching(doc: &Value, counted: &Value, roots: &[&str]) -> f64 {
    let s = shares(doc, &counted["sites"]);
    let all: u64 = s.iter().map(|x| x.2).sum();
    let to_main: u64 = s.iter().filter(|x| functions(x.0).iter().any(|f| roots.contains(f))).map(|x| x.2).sum();
    assert!(all > 0, "no samples: {counted}");
    to_main as f64 / all as f64
}

/// The program's own frame the report blames, as `function file:line`.
fn blamed(site: &Value) -> Option<String> {
    let f = &site["frames"][site["responsible"].as_u64()? as usize];
    Some(format!("{} {}:{}", f["function"].as_str()?, f["file"].as_str()?.rsplit('/').next()?, f["line"].as_u64()?))
}

#[test]
fn localtime_is_traced_through_glibc_to_the_victims_line() {
    if skip_without_bpf() {
        return;
    }
    for exe in ["timeloop", "timeloop-fp"] {
        let (doc, _) = sysdiet_json(&[], &[victim(exe).to_str().unwrap(), "localtime", "200000"]);
        let tz = path_argument(&doc, "/etc/localtime");
        let ratio = reaching(&doc, tz, &["main"]);
        assert!(ratio >= 0.99, "{exe}: only {:.1}% of samples unwound to main", ratio * 100.0);
        let s = shares(&doc, &tz["sites"]);
        let (top, calls, _) = s[0];
        assert!(has_function(top, "__tz_convert"), "{exe}: {top}");
        assert_eq!(blamed(top).as_deref(), Some("use_localtime timeloop.c:9"), "{exe}: {top}");
        // Exact counts, split: the shares add up.
        assert_eq!(s.iter().map(|x| x.1).sum::<u64>(), tz["calls"].as_u64().unwrap());
        assert!(calls as f64 >= 0.99 * tz["calls"].as_u64().unwrap() as f64);
    }
}

/// `tests/victims/gostat.go` built stripped (`-ldflags=-s -w`, as Go
/// programs ship: no symbols, no DWARF) by the Go toolchain `go` in
/// `buildmode` (exe, or pie as distributions build), in `dir`.
fn stripped_go_victim(go: &std::path::Path, buildmode: &str, dir: &std::path::Path) -> std::path::PathBuf {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/victims/gostat.go");
    let exe = dir.join(format!("gostat-{buildmode}"));
    let out = std::process::Command::new(go)
        .args(["build", &format!("-buildmode={buildmode}"), "-ldflags=-s -w", "-o"])
        .arg(&exe)
        .arg(&src)
        // This toolchain, whatever the file asks; nothing fetched.
        .env("GOTOOLCHAIN", "local")
        .env("GOFLAGS", "-mod=mod")
        .env("GOPROXY", "off")
        .output()
        .unwrap();
    assert!(out.status.success(), "{} build: {}", go.display(), String::from_utf8_lossy(&out.stderr));
    exe
}

/// A stripped Go program's frames are named from its own line table, and
/// code inlined into a function from its inline tree: the helper the
/// compiler inlined, at its line, then its caller at the call's. With
/// Debian's Go (1.19 on Debian 12: the table format of Go 1.18, and a
/// position-independent binary's table in a section of another name) and
/// the one on PATH, where it is another (1.20's format and later); built
/// as a plain executable and position-independent.
#[test]
fn a_stripped_go_programs_inlined_helper_is_named_to_its_line() {
    if skip_without_bpf() {
        return;
    }
    let mut gos: Vec<std::path::PathBuf> =
        [Some("/usr/lib/go/bin/go".into()), which("go")].into_iter().flatten().filter_map(|p| p.canonicalize().ok()).collect();
    gos.dedup();
    assert!(!gos.is_empty(), "no Go toolchain: make deps installs Debian's golang-go");
    for (go, buildmode) in gos.iter().flat_map(|go| [(go, "exe"), (go, "pie")]) {
        let dir = tempfile::tempdir().unwrap();
        let exe = stripped_go_victim(go, buildmode, dir.path());
        let go = format!("{} {buildmode}", go.display());
        let (doc, out) = sysdiet_json(&[], &[exe.to_str().unwrap(), "20000"]);
        assert!(out.status.success(), "{}", stderr_of(&out));
        let root = path_argument(&doc, "/");
        let s = shares(&doc, &root["sites"]);
        let (top, calls, _) = s[0];
        assert!(calls as f64 >= 0.9 * root["calls"].as_u64().unwrap() as f64, "{go}: {top}");
        let frames = top["frames"].as_array().unwrap();
        let at = frames.iter().position(|f| f["function"] == "main.exists").unwrap_or_else(|| panic!("{go}: no main.exists in {top}"));
        let (helper, caller) = (&frames[at], &frames[at + 1]);
        assert_eq!((helper["line"].as_u64(), helper["inlined"].as_bool()), (Some(12), Some(true)), "{go}: {helper}");
        assert_eq!((caller["function"].as_str(), caller["line"].as_u64()), (Some("main.main"), Some(20)), "{go}: {caller}");
        assert!(helper["file"].as_str().is_some_and(|f| f.ends_with("gostat.go")), "{helper}");
        assert_eq!(blamed(top).as_deref(), Some("main.exists gostat.go:12"), "{go}: {top}");
    }
}

/// A main thread's sample is copied up to its stack's start, where its
/// frames end, not through its environment above it; a thread's stack is
/// elsewhere and copied whole (16 KiB). Both unwind to their roots.
#[test]
fn a_main_threads_sample_copies_its_frames_not_its_environment() {
    if skip_without_bpf() {
        return;
    }
    let environment = "x".repeat(12_000);
    let (doc, _) = sysdiet_json_env(&[], &[victim("timeloop").to_str().unwrap(), "localtime", "50000"], &[("SYSDIET_TEST_BIG", &environment)]);
    let sampling = &doc["sampling"];
    let copied = sampling["stack_bytes_copied"].as_u64().unwrap();
    // The environment alone is 12,000 bytes above the stack's start. The
    // frames are not always shallow: a sample of the loop's last write,
    // fprintf to unbuffered stderr, is below glibc's 8 KiB buffer on the
    // stack (buffered_vfprintf): 9,416 bytes to unwind.
    assert!(copied < 12_000, "a main thread's sample copied {copied} bytes, its environment with it: {sampling}");
    assert!(copied >= sampling["stack_bytes_max"].as_u64().unwrap(), "{sampling}");
    assert_eq!(sampling["stack_too_short"], 0, "{sampling}");
    assert!(reaching(&doc, path_argument(&doc, "/etc/localtime"), &["main"]) >= 0.99, "{sampling}");

    let (doc, _) = sysdiet_json(&[], &[victim("threads").to_str().unwrap(), "2", "50000"]);
    let sampling = &doc["sampling"];
    let copied = sampling["stack_bytes_copied"].as_u64().unwrap();
    assert!(copied > 12_000, "a thread's sample copied only {copied} bytes: {sampling}");
    assert_eq!(sampling["stack_too_short"], 0, "{sampling}");
    assert!(reaching(&doc, path_argument(&doc, "/etc/localtime"), &["worker"]) >= 0.99, "{sampling}");
}

#[test]
fn signal_mask_calls_name_their_glibc_source() {
    if skip_without_bpf() {
        return;
    }
    for (victim_name, args, source, blame, roots) in [
        ("sigprocmask", vec!["200000"], "sigprocmask", "main sigprocmask.c:12", &["main"][..]),
        ("context", vec!["100000"], "swapcontext", "main context.c:30", &["main", "coroutine"][..]),
        ("sigjmp", vec!["100000"], "siglongjmp", "jump_back sigjmp.c:8", &["main"][..]),
    ] {
        for exe in [victim_name.to_string(), format!("{victim_name}-fp")] {
            let mut argv = vec![victim(&exe).to_str().unwrap().to_string()];
            argv.extend(args.iter().map(|a| a.to_string()));
            let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
            let (doc, _) = sysdiet_json(&[], &argv);
            let mask = syscall(&doc, "rt_sigprocmask");
            let ratio = reaching(&doc, mask, roots);
            assert!(ratio >= 0.99, "{exe}: only {:.1}% of samples unwound to main", ratio * 100.0);
            let s = shares(&doc, &mask["sites"]);
            assert!(
                s.iter().any(|(site, _, _)| has_function(site, source) && blamed(site).as_deref() == Some(blame)),
                "{exe}: no {source} site blamed on {blame}: {s:?}"
            );
        }
    }
}

#[test]
fn two_sites_taking_turns_are_both_seen() {
    if skip_without_bpf() {
        return;
    }
    // The coroutine and main alternate: sampling at a fixed stride would see
    // only one of them.
    let (doc, _) = sysdiet_json(&[], &[victim("context").to_str().unwrap(), "200000"]);
    let s = shares(&doc, &syscall(&doc, "rt_sigprocmask")["sites"]);
    let main = s.iter().find(|x| blamed(x.0).is_some_and(|b| b.starts_with("main context.c:30"))).expect("main's site").1;
    let co = s.iter().find(|x| blamed(x.0).is_some_and(|b| b.starts_with("coroutine"))).expect("coroutine's site").1;
    // 200,000 each; the split is an estimate, but not a wild one.
    for n in [main, co] {
        assert!((140_000..=260_000).contains(&n), "main {main}, coroutine {co}");
    }
}

#[test]
fn a_20ms_program_still_gets_named_call_sites() {
    if skip_without_bpf() {
        return;
    }
    // The process (5,000 calls: 20 ms untraced) is gone long before
    // sysdiet reads its stacks: its mappings were recorded as they were
    // made. (Not asserted on its time: a loaded host stretches it.)
    let (doc, _) = sysdiet_json(&[], &[victim("timeloop").to_str().unwrap(), "localtime", "5000"]);
    let s = shares(&doc, &path_argument(&doc, "/etc/localtime")["sites"]);
    assert_eq!(blamed(s[0].0).as_deref(), Some("use_localtime timeloop.c:9"), "{s:?}");
}

#[test]
fn children_and_exec_resolve_in_their_own_address_space() {
    if skip_without_bpf() {
        return;
    }
    // A shell forks, and the child execs the victim: its samples resolve
    // against the victim's mappings, not the shell's.
    let exe = victim("timeloop");
    let script = format!("{} localtime 3000; true", exe.display());
    let (doc, _) = sysdiet_json(&[], &["/bin/sh", "-c", &script]);
    let s = shares(&doc, &path_argument(&doc, "/etc/localtime")["sites"]);
    assert_eq!(blamed(s[0].0).as_deref(), Some("use_localtime timeloop.c:9"), "{s:?}");
}

#[test]
fn attach_gets_call_sites_too() {
    if skip_without_bpf() {
        return;
    }
    let target = Running(std::process::Command::new(victim("timeloop")).args(["localtime", "1000000000"]).env_remove("TZ").spawn().unwrap());
    let doc = attach_for_300ms(target.0.id());
    let s = shares(&doc, &path_argument(&doc, "/etc/localtime")["sites"]);
    assert_eq!(blamed(s[0].0).as_deref(), Some("use_localtime timeloop.c:9"), "{s:?}");
}

#[test]
fn text_report_says_who_makes_the_calls() {
    if skip_without_bpf() {
        return;
    }
    let out = sysdiet().args(["run", "--"]).arg(victim("timeloop")).args(["localtime", "100000"]).env_remove("TZ").output().unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("call sites ("), "{text}");
    assert!(text.contains("by    use_localtime (timeloop.c:9) ← main (timeloop.c:"), "{text}");
    assert!(text.contains("from  __tz_convert"), "{text}");
    // The chain starts at the call the program made, by its exported name
    // (glibc's debug info calls it __GI_mktime; malloc is __libc_malloc).
    let out = sysdiet().args(["run", "--"]).arg(victim("timeloop")).args(["mktime", "20000"]).env_remove("TZ").output().unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("from  mktime → tzset → tzset_internal"), "{text}");
    let out = sysdiet().args(["run", "--all", "--"]).arg(victim("churn")).args(["big", "1000"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("from  malloc → _int_malloc →") && text.contains("→ mmap\n"), "{text}");
}

#[test]
fn no_stacks_means_no_call_sites() {
    if skip_without_bpf() {
        return;
    }
    let (doc, _) = sysdiet_json(&["--no-stacks"], &[victim("timeloop").to_str().unwrap(), "localtime", "1000"]);
    assert!(doc.get("call_sites").is_none() && doc.get("sampling").is_none(), "{doc}");
    let out = sysdiet().args(["run", "--no-stacks", "--folded", "x", "--", "true"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("drop --no-stacks"));
}

#[test]
fn folded_stacks_round_trip_to_the_exact_counts() {
    if skip_without_bpf() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let folded = dir.path().join("out.folded");
    let (doc, _) = sysdiet_json(&["--folded", folded.to_str().unwrap()], &[victim("timeloop").to_str().unwrap(), "localtime", "20000"]);
    let text = std::fs::read_to_string(&folded).unwrap();
    let lines = sysdiet::report::folded::parse(&text).expect("folded lines parse");
    // Every call is on some line, and no line invents calls.
    let mut per_syscall = std::collections::BTreeMap::<String, u64>::new();
    for (frames, n) in &lines {
        *per_syscall.entry(frames.last().unwrap().clone()).or_default() += n;
    }
    for s in doc["syscalls"].as_array().unwrap() {
        assert_eq!(per_syscall.get(s["name"].as_str().unwrap()).copied(), s["calls"].as_u64(), "{}", s["name"]);
    }
    let hot = lines.iter().max_by_key(|l| l.1).unwrap();
    assert_eq!(hot.0.first().map(String::as_str), Some("timeloop"), "the process is the root: {hot:?}");
    assert!(hot.0.iter().any(|f| f == "use_localtime") && hot.0.iter().any(|f| f == "__tz_convert"), "{hot:?}");
    assert_eq!(hot.0.last().map(String::as_str), Some("newfstatat"));
    assert!(sysdiet::report::folded::parse("a;b 1\nno-count\n").is_err());
}

#[test]
fn flamegraph_is_a_valid_svg_naming_the_victim() {
    if skip_without_bpf() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for weight in ["count", "time"] {
        let svg = dir.path().join(format!("{weight}.svg"));
        let out = sysdiet()
            .args(["run", "--weight", weight, "--flamegraph"])
            .arg(&svg)
            .arg("--")
            .arg(victim("timeloop"))
            .args(["localtime", "20000"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let text = std::fs::read_to_string(&svg).unwrap();
        let mut reader = quick_xml::Reader::from_str(&text);
        let mut elements = 0;
        loop {
            match reader.read_event() {
                Ok(quick_xml::events::Event::Eof) => break,
                Ok(quick_xml::events::Event::Start(_)) => elements += 1,
                Ok(_) => {}
                Err(e) => panic!("{weight}: not well-formed XML at {}: {e}", reader.buffer_position()),
            }
        }
        assert!(elements > 10 && text.contains("<svg"), "{weight}");
        assert!(text.contains("use_localtime"), "{weight}: the victim's function is in the graph");
    }
    let out = sysdiet().args(["run", "--weight", "bytes", "--", "true"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// A stripped distribution binary: its frames show as offsets, and the
/// report says once what would name them.
#[test]
fn a_stripped_binary_says_what_would_name_it() {
    if skip_without_bpf() {
        return;
    }
    let out = sysdiet().args(["run", "--", "tar", "-cf", "/dev/null", "/usr/share/doc"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("by    tar+0x"), "{text}");
    assert!(text.contains("(no names for code in tar"), "{text}");
    assert!(text.contains("-dbgsym package"), "{text}");
}

#[test]
fn an_interpreter_is_blamed_by_its_native_function_not_main() {
    if skip_without_bpf() {
        return;
    }
    // Debian's perl: localtime() is the op Perl_pp_gmtime, run by the
    // dispatch loop Perl_runops_standard under perl_run and main.
    let out = sysdiet().args(["run", "--", "perl", "-e", "for (1..20000) { my @t = localtime($_) }"]).env_remove("TZ").output().unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("[tz-unset]"), "{text}");
    let by = text.lines().find(|l| l.trim_start().starts_with("by ")).unwrap_or_default();
    assert!(by.contains("Perl_pp_gmtime"), "{text}");
    assert!(!by.contains("main") && !by.contains("runops"), "{text}");
}

/// Runs `sh -c script` in `dir`, which must succeed.
fn shell(dir: &std::path::Path, script: &str) {
    let out = std::process::Command::new("sh").arg("-c").arg(script).current_dir(dir).output().unwrap();
    assert!(out.status.success(), "{script}: {}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn stripped_binaries_are_named_from_minidebuginfo_and_debug_links() {
    if skip_without_bpf() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(victim("timeloop"), dir.path().join("tl")).unwrap();
    // MiniDebugInfo as Fedora builds it (gdb's manual): the function
    // symbols, xz-compressed in .gnu_debugdata of a fully stripped file.
    shell(
        dir.path(),
        "cp tl mini && nm -D mini --format=posix --defined-only | awk '{print $1}' | sort > dynsyms \
         && nm mini --format=posix --defined-only | awk '$2 ~ /^[TtD]$/ {print $1}' | sort > funcsyms \
         && comm -13 dynsyms funcsyms > keep && objcopy --only-keep-debug mini dbg \
         && objcopy -S --remove-section .gdb_index --remove-section .comment --keep-symbols=keep dbg mini.symtab \
         && xz mini.symtab && strip --strip-all mini && objcopy --add-section .gnu_debugdata=mini.symtab.xz mini \
         && ! nm mini 2>/dev/null | grep -q main",
    );
    // A debug link to a separate file with the DWARF.
    shell(
        dir.path(),
        "cp tl linked && objcopy --only-keep-debug linked linked.debug && strip -s linked && objcopy --add-gnu-debuglink=linked.debug linked",
    );
    let by = |exe: &str| {
        let out = sysdiet().args(["run", "--"]).arg(dir.path().join(exe)).args(["localtime", "20000"]).env_remove("TZ").output().unwrap();
        let text = String::from_utf8_lossy(&out.stderr).into_owned();
        let by = text.lines().find(|l| l.trim_start().starts_with("by ")).unwrap_or_default().to_string();
        (by, text)
    };
    let (mini, text) = by("mini");
    assert!(mini.trim_start().strip_prefix("by").is_some_and(|f| f.trim_start().starts_with("main")), "{text}");
    assert!(!text.contains("no names for code") && !text.contains("mini+0x"), "{text}");
    let (linked, text) = by("linked");
    assert!(linked.contains("use_localtime (timeloop.c:"), "{text}");
}

#[test]
fn jit_code_is_named_from_its_perf_map() {
    if skip_without_bpf() {
        return;
    }
    if which("node").is_none() {
        eprintln!("node not installed: skipped");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("st.js");
    std::fs::write(
        &script,
        "const fs = require('fs');\nfunction statLoop() { for (let i = 0; i < 20000; i++) fs.statSync('/etc/hostname'); }\nstatLoop();\n",
    )
    .unwrap();
    let run = |perf_map: bool| {
        let json = dir.path().join("t.json");
        let mut cmd = sysdiet();
        cmd.args(["run", "--json", "-o"]).arg(&json).args(["--", "node"]);
        if perf_map {
            cmd.args(["--perf-basic-prof", "--interpreted-frames-native-stack"]);
        }
        // node writes isolate-*-v8.log into its working directory.
        let out = cmd.arg(&script).current_dir(dir.path()).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        for p in doc["processes"].as_array().unwrap() {
            let _ = std::fs::remove_file(format!("/tmp/perf-{}.map", p["pid"]));
        }
        let counted = path_argument(&doc, "/etc/hostname");
        let jit: Vec<String> = shares(&doc, &counted["sites"])
            .iter()
            .flat_map(|(site, _, _)| site["frames"].as_array().unwrap().clone())
            .filter(|f| f["module"] == "[jit]")
            .filter_map(|f| f["function"].as_str().map(str::to_string))
            .collect();
        jit
    };
    // The JS function that loops, by the name node wrote for it.
    let named = run(true);
    assert!(named.iter().any(|f| f.contains("statLoop") && f.contains("st.js")), "{named:?}");
    assert!(run(false).is_empty());
}
