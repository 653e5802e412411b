//! The library's layers import downwards only: each top-level module may
//! use the modules listed for it here and no other (read from every
//! `crate::` path in its files). A new edge is a design decision: add it
//! here, with the reason, or move the code.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Module → the modules it may import. Lowest layers first.
const ALLOWED: &[(&str, &[&str])] = &[
    ("error", &[]),
    ("timings", &[]),
    ("linux", &[]),
    ("stats", &[]),
    ("model", &["linux"]),
    // Formats model values (timeouts, mask changes) for people.
    ("human", &["linux", "model"]),
    // Names in its messages are escaped as the reports escape them.
    ("target", &["error", "human", "linux", "model"]),
    ("backend", &["error", "linux", "model", "target", "timings"]),
    ("stacks", &["backend", "error", "linux", "model", "timings"]),
    ("diagnose", &["human", "linux", "model"]),
    ("pipeline", &["backend", "diagnose", "error", "human", "linux", "model", "stacks", "target", "timings"]),
    // Its limits' breaches are one-line messages, in the reports' numbers;
    // a budget names syscalls as the table does.
    ("compare", &["diagnose", "error", "human", "linux", "model", "pipeline", "stats", "target"]),
    ("bench", &["backend", "error", "linux", "stats", "target"]),
    ("report", &["bench", "compare", "diagnose", "error", "human", "linux", "model", "stats", "timings"]),
];

/// The backends (`--backend`): none imports another.
const BACKENDS: &[&str] = &["bpf", "ptrace", "strace_log"];

/// The files of `backend/bpf/`, lowest first: each may use only those
/// before it (mod.rs, the top, loads, attaches and adds targets).
const BPF_FILES: &[&str] = &[
    "skel",
    "maps",
    "ring",
    "records",
    "kernel_types",
    "tracepoint_ids",
    "features",
    "set_spec",
    "premade",
    "split",
    "keeper",
    "tables",
    "live",
    "ticks",
    "fold",
    "word_counts",
    "exits",
    "readout",
    "mod",
];

/// Every top-level module named after `crate::` in `text`, `crate::{a, b}` included.
fn imports(text: &str) -> BTreeSet<String> {
    named_after("crate::", text)
}

/// Every module named after `prefix` in `text`, `prefix{a, b}` included.
fn named_after(prefix: &str, text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let ident = |s: &str| s.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect::<String>();
    for (i, _) in text.match_indices(prefix) {
        let rest = &text[i + prefix.len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let body = &group[..group.find('}').unwrap_or(group.len())];
            out.extend(body.split(',').map(|p| ident(p.trim())).filter(|n| !n.is_empty()));
        } else {
            out.insert(ident(rest));
        }
    }
    out.remove("");
    out
}

/// (module, file) for every library source file: the binary's files
/// (main.rs, cli.rs, commands/) are the top layer and may use anything.
fn library_files(dir: &Path, out: &mut Vec<(String, std::path::PathBuf)>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let rel = path.strip_prefix(concat!(env!("CARGO_MANIFEST_DIR"), "/src")).unwrap().to_path_buf();
        let top = rel.components().next().unwrap().as_os_str().to_string_lossy().trim_end_matches(".rs").to_string();
        if ["main", "cli", "commands", "lib", "bpf"].contains(&top.as_str()) {
            continue;
        }
        if path.is_dir() {
            library_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push((top, path));
        }
    }
}

#[test]
fn imports_run_downwards() {
    let allowed: BTreeMap<&str, &[&str]> = ALLOWED.iter().copied().collect();
    let mut files = Vec::new();
    library_files(Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/src")), &mut files);
    assert!(files.len() > 50, "found the sources");
    let mut wrong = Vec::new();
    for (module, path) in &files {
        let Some(may) = allowed.get(module.as_str()) else {
            wrong.push(format!("{}: module `{module}` has no entry in ALLOWED", path.display()));
            continue;
        };
        let text = std::fs::read_to_string(path).unwrap();
        for used in imports(&text) {
            if used != *module && !may.contains(&used.as_str()) {
                wrong.push(format!("{}: `{module}` imports `{used}`, above it or beside it", path.display()));
            }
        }
    }
    assert!(wrong.is_empty(), "imports against the layers:\n{}", wrong.join("\n"));
}

#[test]
fn the_reader_sees_grouped_and_plain_paths() {
    let text = "use crate::model::Trace;\nuse crate::{report, backend::bpf};\nlet x = crate::human::thousands(1);";
    assert_eq!(imports(text), ["backend", "human", "model", "report"].iter().map(|s| s.to_string()).collect());
}

/// The source files under `src/<dir>`, with their text.
fn sources(dir: &str) -> Vec<(std::path::PathBuf, String)> {
    let mut files = Vec::new();
    let mut dirs = vec![Path::new(env!("CARGO_MANIFEST_DIR")).join("src").join(dir)];
    while let Some(d) = dirs.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                files.push((path, text));
            }
        }
    }
    files
}

#[test]
fn backends_do_not_import_each_other() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/backend");
    let files = sources("backend");
    assert!(files.len() > 20, "found the backends");
    let mut wrong = Vec::new();
    for (path, text) in &files {
        let rel = path.strip_prefix(&root).unwrap();
        // A backend's own folder; None for the shared files beside them.
        let own = rel.components().next().filter(|_| rel.components().count() > 1).map(|c| c.as_os_str().to_string_lossy().into_owned());
        let used = named_after("backend::", text);
        for other in BACKENDS.iter().filter(|b| own.as_deref() != Some(**b)) {
            if used.contains(*other) {
                wrong.push(format!("{}: imports the {other} backend", path.display()));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_bpf_backend_imports_one_way() {
    let files = sources("backend/bpf");
    let mut wrong = Vec::new();
    for (path, text) in &files {
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        let at = BPF_FILES.iter().position(|f| *f == name).unwrap_or_else(|| panic!("{}: not in BPF_FILES", path.display()));
        let used = named_after("super::", text).into_iter().chain(named_after("backend::bpf::", text));
        for u in used.filter(|u| BPF_FILES.contains(&u.as_str())) {
            if BPF_FILES.iter().position(|f| *f == u).unwrap() >= at && u != name {
                wrong.push(format!("{}: imports {u}, which is above it", path.display()));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert_eq!(files.len(), BPF_FILES.len(), "every file of backend/bpf is in BPF_FILES");
}

#[test]
fn the_allowed_edges_have_no_cycle() {
    // Each module may use only modules listed before it.
    for (i, (module, may)) in ALLOWED.iter().enumerate() {
        for m in *may {
            let pos = ALLOWED.iter().position(|(n, _)| n == m).unwrap_or_else(|| panic!("{m} is not a module"));
            assert!(pos < i, "{module} may use {m}, which comes after it");
        }
    }
}
