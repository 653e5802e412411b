//! sysdiet's tests, one binary (ripgrep's tests/tests.rs): a module per
//! area. The kill storm has a binary of its own: it makes itself the
//! subreaper of every orphan and reaps them all, which would take other
//! tests' children.

mod common;

mod adversarial;
mod analyze;
mod bench;
mod callsites;
mod cli;
mod compare;
mod diagnose;
mod diff;
mod exactness;
mod fleet;
mod fuzz_strace_log;
mod handover;
mod layers;
mod makefile;
mod ptrace;
mod scale;
mod schema;
