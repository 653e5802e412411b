//! The Makefile's set-up says what a machine lacks in one line, before any
//! long build starts: no apt, no BTF, not root, a Rust too old. Each case
//! is simulated by pointing the check elsewhere; nothing is installed.

use std::process::Command;

/// `make -s ARGS` in the project: (exit code, first line of stderr).
fn make(args: &[&str]) -> (Option<i32>, String) {
    let out =
        Command::new("make").arg("-s").arg("-C").arg(env!("CARGO_MANIFEST_DIR")).args(args).output().expect("make is installed (build-essential)");
    let err = String::from_utf8_lossy(&out.stderr);
    (out.status.code(), err.lines().next().unwrap_or_default().to_string())
}

#[test]
fn a_kernel_without_btf_is_said_first() {
    let (code, line) = make(&["preflight", "BTF=/nonexistent/vmlinux"]);
    assert_eq!(code, Some(2));
    assert!(
        line.starts_with("this kernel has no BTF (/nonexistent/vmlinux): sysdiet's BPF needs a kernel built with CONFIG_DEBUG_INFO_BTF=y"),
        "{line}"
    );
}

#[test]
fn a_distribution_without_apt_is_told_what_to_install() {
    let (code, line) = make(&["preflight", "APT_GET=no-such-apt-get"]);
    assert_eq!(code, Some(2));
    assert!(line.starts_with("no apt-get here: ") && line.contains("Rust >= 1.88"), "{line}");
}

#[test]
fn not_root_is_refused_before_anything_runs() {
    for goal in ["test", "demo"] {
        let (code, line) = make(&[goal, "EUID=1000"]);
        assert_eq!(code, Some(2), "{goal}");
        assert_eq!(line, format!("run this as root (sudo make {goal}): it installs Debian packages and the tests load BPF programs"));
    }
}

#[test]
fn a_rust_too_old_names_the_way_out() {
    let (code, line) = make(&["rust", "RUST_VERSION=99.0", "EUID=1000"]);
    assert_eq!(code, Some(2));
    assert!(
        line.contains("and sysdiet needs >= 99.0: run as root to install Debian's cargo-web and rustc-web, or install Rust with rustup"),
        "{line}"
    );
}

#[test]
fn the_kernel_matrix_refuses_an_unknown_argument_in_one_line() {
    let out = Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/ci/kernels")).arg("--bogus").output().expect("ci/kernels runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(err.trim_end(), "ci/kernels: unknown argument --bogus (ci/kernels --help)");
}
