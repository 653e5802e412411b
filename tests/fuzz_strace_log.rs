//! The strace-log parser against arbitrary input: whatever the bytes, it
//! ends with a result or an error, never a panic. `make test` runs the
//! default number of cases; `make fuzz` (PROPTEST_CASES, FUZZ_MINUTES)
//! runs it for as long as asked.

use proptest::prelude::*;
use sysdiet::backend::filter::SyscallSet;
use sysdiet::backend::strace_log::LogReader;
use sysdiet::model::builder::TraceBuilder;

/// Pieces strace's lines are made of, so that random lines get deep into
/// the parser rather than failing at the first byte.
const PIECES: &[&str] = &[
    "1234 ",
    "[pid  77] ",
    "20:22:18.712867 ",
    "1700000000.123456 ",
    "     0.000123 ",
    "newfstatat(",
    "rt_sigprocmask(",
    "read(",
    "write(",
    "clone(",
    "clone3({flags=CLONE_VM|CLONE_THREAD}",
    "execve(\"/bin/x\", [\"x\", \"y\"], [\"TZ=:/etc/localtime\"]",
    "AT_FDCWD",
    "3</tmp/a>",
    "\"/etc/localtime\"",
    "\"a\\\"b\\x41\\101\\",
    "\"...\"...",
    ", ",
    ")",
    ") = ",
    ")          = ",
    "0",
    "-1",
    "?",
    "0x7f",
    "ENOENT (No such file or directory)",
    " <0.000019>",
    " <unfinished ...>",
    "<... read resumed>",
    "+++ exited with 0 +++",
    "+++ killed by SIGKILL (core dumped) +++",
    "--- SIGCHLD {si_signo=SIGCHLD} ---",
    " > /usr/lib/libc.so.6(fstatat+0xa) [0xf786a]",
    " > /tmp/a() [0x10]",
    "strace: Process 78 attached",
    "[SIG_BLOCK",
    "[INT TERM]",
    "~[]",
    "{tv_sec=0, tv_nsec=0}",
    "{mask=[]}",
    "SIG_SETMASK",
    "NULL",
    "\n",
    "\n",
    "\n",
    "(",
    "[",
    "{",
    "<",
    ">",
    "\\",
    "\"",
    "é",
    "\u{0}",
];

fn log() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(
        prop_oneof![4 => prop::sample::select(PIECES).prop_map(|s| s.as_bytes().to_vec()), 1 => prop::collection::vec(any::<u8>(), 0..8)],
        0..200,
    )
    .prop_map(|parts| parts.concat())
}

fn read(bytes: &[u8], file_pid: Option<u32>) {
    let mut reader = LogReader::new(SyscallSet::default());
    let _ = reader.read(bytes, file_pid);
    let mut builder = TraceBuilder::default();
    let read = reader.finish(&mut builder);
    let _ = sysdiet::stacks::logged::call_sites(&read.stacks);
    let _ = builder.finish(Default::default(), Default::default());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(512), ..ProptestConfig::default() })]

    #[test]
    fn any_log_reads_without_a_panic(bytes in log(), pid in prop::option::of(0u32..5)) {
        read(&bytes, pid);
    }

    #[test]
    fn any_bytes_read_without_a_panic(bytes in prop::collection::vec(any::<u8>(), 0..2000)) {
        read(&bytes, None);
    }
}
