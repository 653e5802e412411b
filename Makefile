# sysdiet: `make demo` and `make test` each install what is missing, build, and run.

# Debian packages the build and the tests need: clang/llvm build the BPF
# programs (against the committed src/bpf/vmlinux/x86/vmlinux.h), libelf/zlib/
# pkg-config build libbpf, strace is the tests' oracle, util-linux has setpriv, procps pgrep,
# libc6-dbg names glibc's own frames in call sites (found by build-id); sqlite3
# is a real, stripped program the diagnosis tests run, python3 a real
# interpreter whose start-up analyze must not call waste; bpftool cuts the kernel
# types the tracer relocates against, once (a faster start-up after that);
# patchelf gives a copy of a real program a RUNPATH (library-search's test);
# rsync's dry run is a listing that must not be called waste; golang-go
# builds a stripped Go victim whose inlined code must be named.
DEBS := build-essential clang llvm libelf-dev zlib1g-dev pkg-config strace util-linux procps libc6-dbg sqlite3 python3 xz-utils binutils prometheus tmux bpftool nodejs git zsh tcsh ruby patchelf rsync golang-go
# Only for the benchmarks (bench/): the tools sysdiet is compared
# against, and the workloads' programs.
BENCH_DEBS := strace linux-perf bpftrace bpftool sqlite3 python3 make eatmydata php-cli golang-go hyperfine
# Only for test-kernels: qemu boots Debian's kernels (virtme-ng, from PyPI,
# with busybox for its initramfs) with this machine's root file system, and
# Debian's arm64 kernel with an arm64 one (debootstrap, its second stage run
# by qemu-user-static).
KERNEL_DEBS := qemu-system-x86 qemu-system-arm qemu-user-static debootstrap busybox-static python3-pip
# Only for arm64 builds on an amd64 host (cross, deb ARCH=arm64): Debian's
# cross gcc, and arm64's libelf and zlib (multiarch) for libbpf.
CROSS_DEBS := gcc-aarch64-linux-gnu libc6-dev-arm64-cross binutils-aarch64-linux-gnu libelf-dev:arm64 zlib1g-dev:arm64

export PATH := $(HOME)/.cargo/bin:$(PATH)
SYSDIET := target/release/sysdiet
DEMO := target/demo/timeloop
VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
RUST_VERSION := $(shell sed -n 's/^rust-version = "\(.*\)"/\1/p' Cargo.toml)
# What the checks look at (tests point them elsewhere).
BTF ?= /sys/kernel/btf/vmlinux
APT_GET ?= apt-get
EUID ?= $(shell id -u)

.PHONY: all preflight need-root deps rust bench-deps build cross unknown-arch demo test test-kernels lint install deb vmlinux bench bench-workloads bench-short bench-savings bench-field bench-analyze fuzz schema clean

all: build

# One line each, before anything long starts: what this machine lacks.
preflight:
	@command -v $(APT_GET) >/dev/null || { echo "no apt-get here: this Makefile installs what sysdiet needs from Debian (12 or newer); elsewhere install clang, llvm, libelf, zlib, pkg-config, strace and Rust >= $(RUST_VERSION), then run cargo build --release" >&2; exit 1; }
	@test -e $(BTF) || { echo "this kernel has no BTF ($(BTF)): sysdiet's BPF needs a kernel built with CONFIG_DEBUG_INFO_BTF=y (Debian's kernels are)" >&2; exit 1; }

need-root:
	@[ "$(EUID)" = 0 ] || { echo "run this as root (sudo make $(MAKECMDGOALS)): it installs Debian packages and the tests load BPF programs" >&2; exit 1; }

# $(call install,PACKAGES): apt-get install those not installed yet (one
# installed for two architectures, as make cross does, is asked by its
# native name: dpkg finds the bare name ambiguous).
define install
	@missing=$$(for p in $(1); do dpkg -s $$p >/dev/null 2>&1 || dpkg -s $$p:$(HOST_ARCH) >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		[ "$(EUID)" = 0 ] || { echo "missing Debian packages ($$missing): run as root (sudo make $(MAKECMDGOALS)) to install them" >&2; exit 1; }; \
		echo "installing:" $$missing; \
		$(APT_GET) update -qq && DEBIAN_FRONTEND=noninteractive $(APT_GET) install -y -qq $$missing >/dev/null; \
	fi
endef

# Rust: a cargo at least as new as the crate's rust-version (rustup's is
# kept); else Debian's own toolchain, cargo-web and rustc-web.
rust:
	@v=$$(cargo --version 2>/dev/null | cut -d' ' -f2); \
	if [ -z "$$v" ] || ! dpkg --compare-versions "$$v" ge "$(RUST_VERSION)"; then \
		[ "$(EUID)" = 0 ] || { echo "cargo $${v:-not found}, and sysdiet needs >= $(RUST_VERSION): run as root to install Debian's cargo-web and rustc-web, or install Rust with rustup" >&2; exit 1; }; \
		echo "installing Debian's Rust toolchain (cargo-web, rustc-web): cargo $${v:-not found} < $(RUST_VERSION)"; \
		$(APT_GET) update -qq && DEBIAN_FRONTEND=noninteractive $(APT_GET) install -y -qq cargo-web rustc-web >/dev/null; \
		v=$$(cargo --version 2>/dev/null | cut -d' ' -f2); \
		dpkg --compare-versions "$${v:-0}" ge "$(RUST_VERSION)" || { echo "Debian's cargo is $${v:-missing}, older than $(RUST_VERSION): enable bookworm-security in apt's sources, or install Rust with rustup" >&2; exit 1; }; \
	fi

deps: preflight
	$(call install,$(DEBS))
	@$(MAKE) -s rust

bench-deps: deps
	$(call install,$(BENCH_DEBS))

build: deps
	cargo build --release

# The arm64 binary, built on this amd64 host: target/$(ARM64)/release/sysdiet.
ARM64 := aarch64-unknown-linux-gnu
CROSS_ENV := PKG_CONFIG_ALLOW_CROSS=1 PKG_CONFIG_LIBDIR=/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig
cross: deps
	@dpkg --print-foreign-architectures | grep -qx arm64 || { [ "$(EUID)" = 0 ] || { echo "arm64 is not a dpkg architecture here: run as root (sudo make $(MAKECMDGOALS)) to add it" >&2; exit 1; }; dpkg --add-architecture arm64; }
	$(call install,$(CROSS_DEBS))
	@rustup target list --installed 2>/dev/null | grep -qx $(ARM64) || rustup target add $(ARM64)
	$(CROSS_ENV) cargo build --release --target $(ARM64)

$(DEMO): tests/victims/timeloop.c tests/victims/victim.h
	@mkdir -p $(dir $@)
	cc -O2 -g -o $@ $<

demo: need-root build $(DEMO)
	@echo "== sysdiet run -- $(DEMO) localtime 500000   (TZ unset)"
	@env -u TZ $(SYSDIET) run -- $(DEMO) localtime 500000

# Release: the tests trace with the binary users run, whose readers keep up
# with the kernel's rings as the debug build's may not.
test: need-root deps
	cargo test --release

# The kernel matrix: ci/kernels boots Debian 11's, 12's and 13's kernels in
# qemu and runs the BPF tests inside each, then on this host's kernel.
test-kernels: need-root deps cross
	$(call install,$(KERNEL_DEBS))
	@# Debian 12's own python3 refuses pip installs (PEP 668) unless told.
	@command -v vng >/dev/null || PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install --quiet virtme-ng
	ci/kernels

# The binary, its man pages and shell completions, under $(DESTDIR)$(PREFIX).
PREFIX ?= /usr/local
install: build
	install -D -m 755 $(SYSDIET) $(DESTDIR)$(PREFIX)/bin/sysdiet
	install -d $(DESTDIR)$(PREFIX)/share/man/man1
	$(SYSDIET) __man $(DESTDIR)$(PREFIX)/share/man/man1
	install -d $(DESTDIR)$(PREFIX)/share/bash-completion/completions $(DESTDIR)$(PREFIX)/share/zsh/site-functions $(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d
	$(SYSDIET) completions bash > $(DESTDIR)$(PREFIX)/share/bash-completion/completions/sysdiet
	$(SYSDIET) completions zsh > $(DESTDIR)$(PREFIX)/share/zsh/site-functions/_sysdiet
	$(SYSDIET) completions fish > $(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d/sysdiet.fish

# A Debian package: the binary, its man pages and completions, the copyright
# and a changelog, with the libraries it links declared (nothing of the
# build is needed to run it). target/sysdiet_VERSION_ARCH.deb; ARCH=arm64
# cross-builds it on an amd64 host (man pages and completions come from the
# host's build: they are the same).
HOST_ARCH := $(shell dpkg --print-architecture)
ARCH ?= $(HOST_ARCH)
DEB_ARCH = $(ARCH)
DEB_ROOT := target/deb/root
DEB_BUILD := $(if $(filter $(HOST_ARCH),$(ARCH)),build,$(if $(filter arm64,$(ARCH)),build cross,unknown-arch))
DEB_BIN := $(if $(filter $(HOST_ARCH),$(ARCH)),$(SYSDIET),target/$(ARM64)/release/sysdiet)
DEB_STRIP := $(if $(filter $(HOST_ARCH),$(ARCH)),strip,aarch64-linux-gnu-strip)
unknown-arch:
	@echo "make deb ARCH=$(ARCH): sysdiet builds for amd64 and arm64 (ARCH=arm64 on an amd64 host)" >&2; exit 1
deb: $(DEB_BUILD)
	rm -rf $(DEB_ROOT)
	$(MAKE) -s install DESTDIR=$(CURDIR)/$(DEB_ROOT) PREFIX=/usr
	install -m 755 $(DEB_BIN) $(DEB_ROOT)/usr/bin/sysdiet
	$(DEB_STRIP) --strip-debug $(DEB_ROOT)/usr/bin/sysdiet
	gzip -9n $(DEB_ROOT)/usr/share/man/man1/*.1
	install -D -m 644 packaging/copyright $(DEB_ROOT)/usr/share/doc/sysdiet/copyright
	gzip -9n < packaging/changelog > $(DEB_ROOT)/usr/share/doc/sysdiet/changelog.Debian.gz
	mkdir -p $(DEB_ROOT)/DEBIAN
	sed -e 's/@VERSION@/$(VERSION)/' -e 's/@ARCH@/$(DEB_ARCH)/' \
	    -e "s/@SIZE@/$$(du -sk $(DEB_ROOT)/usr | cut -f1)/" packaging/control > $(DEB_ROOT)/DEBIAN/control
	dpkg-deb --root-owner-group -Zxz --build $(DEB_ROOT) target/sysdiet_$(VERSION)_$(DEB_ARCH).deb
	@echo "built target/sysdiet_$(VERSION)_$(DEB_ARCH).deb"

# Formatting and clippy's lints, as CI runs them (rustup's default profile
# has both; a minimal one gets them added).
lint: deps
	@cargo fmt --version >/dev/null 2>&1 && cargo clippy --version >/dev/null 2>&1 || rustup component add rustfmt clippy
	cargo fmt --check
	cargo clippy --release --all-targets -- -D warnings

# src/bpf/vmlinux/x86/vmlinux.h dumped anew from the running kernel's BTF
# (only when a program needs a type the committed one lacks); with
# ARCH=arm64, src/bpf/vmlinux/arm64/vmlinux.h from the BTF in Debian 12's
# arm64 kernel image.
vmlinux:
	$(call install,bpftool)
ifeq ($(ARCH),arm64)
	@mkdir -p target
	python3 ci/image-btf "$$(ls $$(ci/kernels --kernel debian12-arm64)/boot/vmlinuz-*)" target/arm64.btf
	bpftool btf dump file target/arm64.btf format c > src/bpf/vmlinux/arm64/vmlinux.h
else
	bpftool btf dump file /sys/kernel/btf/vmlinux format c > src/bpf/vmlinux/x86/vmlinux.h
endif

# docs/schema/*.json, generated from the model types (tests/schema.rs
# fails when they are stale).
schema: deps
	SYSDIET_BLESS=1 cargo test --release --test tests schema::

bench: bench-deps build
	bench/overhead

bench-workloads: bench-deps build
	bench/workloads

# A short command's fixed cost, timed by hyperfine, and sysdiet's own steps.
bench-short: bench-deps build
	bench/short

# Each rule's estimated saving against what `sysdiet compare` measures.
bench-savings: bench-deps build
	bench/savings

# Diagnosis on everyday programs: known patterns found, clean ones quiet.
bench-field: bench-deps build
	bench/field

# How fast `sysdiet analyze` reads a large strace log, and in how much memory.
bench-analyze: bench-deps build
	bench/analyze

# The strace-log parser on random input, in rounds of fresh seeds, for
# FUZZ_MINUTES (a panic stops it and prints the input).
FUZZ_MINUTES ?= 10
fuzz: deps
	@end=$$(( $$(date +%s) + 60 * $(FUZZ_MINUTES) )); rounds=0; \
	while [ $$(date +%s) -lt $$end ]; do \
		PROPTEST_CASES=20000 cargo test --release --test tests -q fuzz_strace_log:: > target/fuzz.log 2>&1 || { tail -40 target/fuzz.log; exit 1; }; \
		rounds=$$((rounds + 1)); \
	done; echo "fuzz: $$rounds rounds of 2 x 20,000 cases in $(FUZZ_MINUTES) min, no panic"

clean:
	cargo clean
