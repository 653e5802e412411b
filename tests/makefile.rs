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

/// `ci/kernels ARGS`: (exit code, stderr without its last newline).
fn kernels(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/ci/kernels")).args(args).output().expect("ci/kernels runs");
    (out.status.code(), String::from_utf8_lossy(&out.stderr).trim_end().to_string())
}

#[test]
fn the_kernel_matrix_refuses_an_unknown_argument_in_one_line() {
    let (code, err) = kernels(&["--bogus"]);
    assert_eq!(code, Some(2));
    assert_eq!(err, "ci/kernels: unknown argument --bogus (ci/kernels --help)");
}

#[test]
fn the_kernel_matrix_names_the_kernels_it_knows() {
    let (code, err) = kernels(&["--kernel", "debian99"]);
    assert_eq!(code, Some(2));
    assert_eq!(err, "ci/kernels: no kernel named debian99 (ci/kernels --help)");
}

#[test]
fn a_deb_for_an_architecture_sysdiet_does_not_build_is_refused() {
    let (code, line) = make(&["deb", "ARCH=s390x"]);
    assert_eq!(code, Some(2));
    assert_eq!(line, "make deb ARCH=s390x: sysdiet builds for amd64 and arm64 (ARCH=arm64 on an amd64 host)");
}

/// ci/image-btf finds the kernel's BTF inside an image's bytes (here the
/// running kernel's own, between padding and a decoy header), and says so
/// in one line when there is none.
#[test]
fn the_btf_of_a_kernel_image_is_cut_out_whole() {
    let Ok(btf) = std::fs::read("/sys/kernel/btf/vmlinux") else { return };
    let dir = tempfile::tempdir().unwrap();
    let image = dir.path().join("Image");
    let mut bytes = vec![0u8; 4096];
    bytes.extend_from_slice(&[0x9f, 0xeb, 1, 0, 24, 0, 0, 0]);
    bytes.extend_from_slice(&btf);
    bytes.extend(std::iter::repeat_n(0xffu8, 4096));
    std::fs::write(&image, &bytes).unwrap();
    let cut = dir.path().join("out.btf");
    let tool = concat!(env!("CARGO_MANIFEST_DIR"), "/ci/image-btf");
    let out = Command::new(tool).arg(&image).arg(&cut).output().expect("python3 runs ci/image-btf");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(std::fs::read(&cut).unwrap() == btf, "the cut is not the kernel's BTF");

    std::fs::write(&image, vec![0u8; 8192]).unwrap();
    let out = Command::new(tool).arg(&image).arg(&cut).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim_end(), format!("ci/image-btf: no BTF in {} (a kernel built without CONFIG_DEBUG_INFO_BTF?)", image.display()));
}

#[test]
fn the_kernel_matrix_names_the_checks_it_knows() {
    let (code, err) = kernels(&["--checks", "load,bogus"]);
    assert_eq!(code, Some(2));
    assert_eq!(err, "ci/kernels: no check named bogus (ci/kernels --help)");
}
