//! Builds the BPF programs under src/bpf/ into skeletons (libbpf-cargo), with
//! a vmlinux.h dumped from this kernel's BTF by bpftool: the bpftop way.
//! Also compiles the C kernels `sysdiet bench` times (the cc crate).
use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use libbpf_cargo::SkeletonBuilder;

const PROGRAMS: &[&str] = &["syscount", "tally", "floor"];

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR is set by cargo"));
    let vmlinux_dir = out.join("vmlinux");
    fs::create_dir_all(&vmlinux_dir).expect("create OUT_DIR/vmlinux");
    write_vmlinux_h(&vmlinux_dir.join("vmlinux.h"));

    for name in PROGRAMS {
        let src = format!("src/bpf/{name}.bpf.c");
        SkeletonBuilder::new()
            .source(&src)
            .clang_args(["-I".as_ref(), vmlinux_dir.as_os_str(), "-I".as_ref(), "src/bpf".as_ref()])
            .build_and_generate(out.join(format!("{name}.skel.rs")))
            .unwrap_or_else(|e| panic!("building {src} failed: {e:#}\n(is clang installed? `make deps`)"));
        println!("cargo:rerun-if-changed={src}");
    }
    println!("cargo:rerun-if-changed=src/bpf/syscount.h");
    println!("cargo:rerun-if-changed=src/bpf/arguments.bpf.h");
    println!("cargo:rerun-if-changed=src/bpf/samples.bpf.h");
    println!("cargo:rerun-if-changed=src/bpf/tally.h");

    // -O2 and nothing clever: each kernel must make its call every time.
    cc::Build::new().file("src/bench/kernels.c").opt_level(2).warnings(true).compile("sysdiet_kernels");
    println!("cargo:rerun-if-changed=src/bench/kernels.c");
    println!("cargo:rerun-if-env-changed=SYSDIET_VMLINUX_H");
}

/// vmlinux.h from $SYSDIET_VMLINUX_H, or dumped from the running kernel's BTF.
fn write_vmlinux_h(dest: &Path) {
    if let Some(given) = env::var_os("SYSDIET_VMLINUX_H") {
        fs::copy(&given, dest).unwrap_or_else(|e| panic!("copying SYSDIET_VMLINUX_H: {e}"));
        return;
    }
    if dest.exists() {
        return;
    }
    let btf = "/sys/kernel/btf/vmlinux";
    let bpftool = ["bpftool", "/usr/sbin/bpftool"]
        .into_iter()
        .find(|b| Command::new(b).arg("version").output().is_ok())
        .unwrap_or_else(|| panic!("bpftool not found: install it (`make deps`) or set SYSDIET_VMLINUX_H"));
    let dump = Command::new(bpftool).args(["btf", "dump", "file", btf, "format", "c"]).output().unwrap_or_else(|e| panic!("running bpftool: {e}"));
    if !dump.status.success() {
        panic!(
            "bpftool could not dump {btf}: {}\n(the kernel needs CONFIG_DEBUG_INFO_BTF=y, or set SYSDIET_VMLINUX_H)",
            String::from_utf8_lossy(&dump.stderr).trim()
        );
    }
    fs::write(dest, dump.stdout).expect("write vmlinux.h");
}
