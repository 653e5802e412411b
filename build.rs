//! Builds the BPF programs under src/bpf/ into skeletons (libbpf-cargo): the
//! bpftop way. The kernel's types come from the committed
//! src/bpf/vmlinux/<arch>/vmlinux.h of the target architecture (CO-RE
//! relocates them to the running kernel at load, so a build host needs no
//! BTF), or from $SYSDIET_VMLINUX_H. Also compiles the C loops `sysdiet
//! bench` times.
use std::env;
use std::fs;
use std::path::{Path, PathBuf};

use libbpf_cargo::SkeletonBuilder;

const PROGRAMS: &[&str] = &["syscount", "tally", "floor", "live"];

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR is set by cargo"));
    let vmlinux_dir = out.join("vmlinux");
    fs::create_dir_all(&vmlinux_dir).expect("create OUT_DIR/vmlinux");
    write_vmlinux_h(&vmlinux_dir.join("vmlinux.h"));

    for name in PROGRAMS {
        let src = format!("src/bpf/{name}.bpf.c");
        SkeletonBuilder::new()
            .source(&src)
            // Kept: kernel_types.rs hands it to bpftool.
            .obj(out.join(format!("{name}.bpf.o")))
            .clang_args(["-I".as_ref(), vmlinux_dir.as_os_str(), "-I".as_ref(), "src/bpf".as_ref()])
            .build_and_generate(out.join(format!("{name}.skel.rs")))
            .unwrap_or_else(|e| panic!("building {src} failed: {e:#}\n(is clang installed? `make deps`)"));
        println!("cargo:rerun-if-changed={src}");
    }
    // Every header the programs include (a directory: cargo looks at
    // every file under it).
    println!("cargo:rerun-if-changed=src/bpf");
    // -O2 and nothing clever: each loop must make its call every time.
    cc::Build::new().file("src/bench/loops.c").opt_level(2).warnings(true).compile("sysdiet_loops");
    println!("cargo:rerun-if-changed=src/bench/loops.c");
    println!("cargo:rerun-if-env-changed=SYSDIET_VMLINUX_H");
}

/// The committed vmlinux.h of the target architecture (`make vmlinux`
/// dumps it anew), or $SYSDIET_VMLINUX_H.
fn write_vmlinux_h(dest: &Path) {
    let arch = match env::var("CARGO_CFG_TARGET_ARCH").as_deref() {
        Ok("x86_64") => "x86",
        Ok("aarch64") => "arm64",
        other => panic!("sysdiet's BPF programs are written for x86_64 and aarch64, not {other:?}"),
    };
    let committed = PathBuf::from(format!("src/bpf/vmlinux/{arch}/vmlinux.h"));
    let given = env::var_os("SYSDIET_VMLINUX_H").map(PathBuf::from);
    let src = given.as_deref().unwrap_or(&committed);
    fs::copy(src, dest).unwrap_or_else(|e| panic!("copying {}: {e} (set SYSDIET_VMLINUX_H to a vmlinux.h, or run `make vmlinux`)", src.display()));
    println!("cargo:rerun-if-changed={}", committed.display());
}
