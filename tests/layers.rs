//! The library's layers import downwards only: each top-level module may
//! use the modules listed for it here and no other (read from every
//! `crate::` path in its files). A new edge is a design decision: add it
//! here, with the reason, or move the code.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Module → the modules it may import. Lowest layers first.
const ALLOWED: &[(&str, &[&str])] = &[
    ("error", &[]),
    ("linux", &[]),
    ("stats", &[]),
    ("model", &["linux"]),
    // Formats model values (timeouts, mask changes) for people.
    ("human", &["linux", "model"]),
    // Names in its messages are escaped as the reports escape them.
    ("target", &["error", "human", "linux", "model"]),
    ("trace", &["error", "linux", "model", "target"]),
    ("stacks", &["error", "linux", "model", "trace"]),
    ("diagnose", &["human", "linux", "model"]),
    ("pipeline", &["diagnose", "error", "human", "linux", "model", "stacks", "target", "trace"]),
    // Its limits' breaches are one-line messages, in the reports' numbers;
    // a budget names syscalls as the table does.
    ("compare", &["diagnose", "error", "human", "linux", "model", "pipeline", "stats", "target"]),
    ("bench", &["error", "linux", "stats", "target", "trace"]),
    ("report", &["bench", "compare", "diagnose", "error", "human", "linux", "model", "stats"]),
];

/// Every top-level module named after `crate::` in `text`, `crate::{a, b}` included.
fn imports(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let ident = |s: &str| s.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect::<String>();
    for (i, _) in text.match_indices("crate::") {
        let rest = &text[i + "crate::".len()..];
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
    let text = "use crate::model::Trace;\nuse crate::{report, trace::bpf};\nlet x = crate::human::thousands(1);";
    assert_eq!(imports(text), ["human", "model", "report", "trace"].iter().map(|s| s.to_string()).collect());
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
