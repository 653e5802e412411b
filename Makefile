# sysdiet: `make demo` and `make test` each install what is missing, build, and run.

# Debian packages the build and the tests need: clang/llvm build the BPF
# programs (against the committed src/bpf/vmlinux/x86/vmlinux.h), libelf/zlib/
# pkg-config build libbpf, strace is the tests' oracle, util-linux has setpriv,
# libc6-dbg names glibc's own frames in call sites (found by build-id).
DEBS := build-essential clang llvm libelf-dev zlib1g-dev pkg-config strace util-linux libc6-dbg
# Only for bench/overhead and bench/workloads: the tools sysdiet is compared
# against, and the workloads' programs.
BENCH_DEBS := strace linux-perf bpftrace bpftool sqlite3 python3 make

export PATH := $(HOME)/.cargo/bin:$(PATH)
SYSDIET := target/release/sysdiet
DEMO := target/demo/timeloop

.PHONY: all deps bench-deps build demo test lint install vmlinux bench bench-workloads schema clean

all: build

# $(call install,PACKAGES): apt-get install those not installed yet.
define install
	@missing=$$(for p in $(1); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing:" $$missing; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi
endef

deps:
	$(call install,$(DEBS))
	@command -v cargo >/dev/null || { echo "cargo not found: install Rust (rustup) first" >&2; exit 1; }
	@test -e /sys/kernel/btf/vmlinux || { echo "this kernel has no BTF (/sys/kernel/btf/vmlinux): sysdiet needs CONFIG_DEBUG_INFO_BTF=y" >&2; exit 1; }

bench-deps: deps
	$(call install,$(BENCH_DEBS))

build: deps
	cargo build --release

$(DEMO): tests/victims/timeloop.c tests/victims/victim.h
	@mkdir -p $(dir $@)
	cc -O2 -g -o $@ $<

demo: build $(DEMO)
	@echo "== sysdiet run -- $(DEMO) localtime 500000   (TZ unset)"
	@env -u TZ $(SYSDIET) run -- $(DEMO) localtime 500000

# Release: the tests trace with the binary users run, whose readers keep up
# with the kernel's rings as the debug build's may not.
test: deps
	cargo test --release

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

# Formatting and clippy's lints, as CI runs them (rustup's default profile
# has both; a minimal one gets them added).
lint: deps
	@cargo fmt --version >/dev/null 2>&1 && cargo clippy --version >/dev/null 2>&1 || rustup component add rustfmt clippy
	cargo fmt --check
	cargo clippy --release --all-targets -- -D warnings

# src/bpf/vmlinux/x86/vmlinux.h dumped anew from the running kernel's BTF
# (only when a program needs a type the committed one lacks).
vmlinux:
	$(call install,bpftool)
	bpftool btf dump file /sys/kernel/btf/vmlinux format c > src/bpf/vmlinux/x86/vmlinux.h

# docs/schema/*.json, generated from the model types (tests/schema.rs
# fails when they are stale).
schema: deps
	SYSDIET_BLESS=1 cargo test --release --test schema

bench: bench-deps build
	bench/overhead

bench-workloads: bench-deps build
	bench/workloads

clean:
	cargo clean
