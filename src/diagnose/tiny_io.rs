//! tiny-io: many reads or writes of a few bytes on one fd: unbuffered
//! output (a write per line or per field), byte-at-a-time reads from a
//! pipe. Buffering turns thousands of syscalls into a few.

use super::{environment_of, output_per_item, paced_by_its_writer, prove, python_unbuffered, relays, Evidence, Finding, Fix};
use crate::human::{bytes, thousands};
use crate::model::{Argument, Trace};

pub const ID: &str = "tiny-io";

/// At most this many bytes moved per call, for 90% of the calls.
const TINY: u64 = 64;

/// glibc's wide-character output, to the write it makes: on a wide stream
/// glibc writes the bytes it converted 16 at a time, whatever buffer
/// setvbuf gave the stream (glibc 2.36: putwchar, fputws and wprintf alike).
const WIDE_OUTPUT: &[&str] = &[
    "putwchar",
    "putwc",
    "fputwc",
    "fputws",
    "wprintf",
    "fwprintf",
    "vwprintf",
    "vfwprintf",
    "_IO_wfile_overflow",
    "_IO_wfile_xsputn",
    "_IO_wdo_write",
    "__woverflow",
];
const WIDE_OUTPUT_FIX: &str = "the writes come from glibc's wide-character output (putwchar, fputws, wprintf), which writes \
     what it converts 16 bytes at a time whatever buffer setvbuf gives the stream: convert to multibyte yourself (wcrtomb, \
     wcstombs) into a buffer and write the bytes to a byte-oriented stream (fwrite with a full buffer)";

pub fn check(trace: &Trace) -> Vec<Finding> {
    let mut out = Vec::new();
    let relays = relays(trace);
    let closes = super::closes_by_fd(trace);
    for a in &trace.arguments {
        let Argument::Fd { fd } = a.argument else { continue };
        let knobs = &environment_of(trace, Some(a.pid)).knobs;
        let Some(moved) = a.typical_bytes() else { continue };
        // Reads that asked for more than they got took what there was (a
        // shell reading a command's few bytes of output): a bigger buffer
        // would make as many.
        if a.calls < 2 || moved > TINY || output_per_item(trace, a) || paced_by_its_writer(a, moved) {
            continue;
        }
        let writing = a.syscall.contains("write") || a.syscall.starts_with("send");
        if writing && relays.get(&a.pid).is_some_and(|&reads| reads >= a.calls) {
            continue; // a relay: the fix is in the program that writes to it
        }
        // Two calls or fewer an opening (its closes): each file opened on
        // the fd is read or written whole in a call or two (node's
        // readFileSync of a 3-byte file asks for its 3 bytes, its
        // appendFileSync writes a line and closes). Its files are small,
        // not its calls; a bigger buffer would make as many, and a file
        // opened again and again is repeated-path's.
        if closes.get(&(a.pid, fd)).is_some_and(|&c| a.calls <= c * 2) {
            continue;
        }
        let mut fixes = vec![Fix::code(if let Some(fix) = super::written_each_time(trace, &a.sites).filter(|_| writing) {
            fix
        } else if writing && super::called_through(trace, &a.sites, WIDE_OUTPUT) {
            WIDE_OUTPUT_FIX
        } else if writing {
            "buffer the output (stdio with a full buffer, setvbuf; Go's bufio.Writer around os.Stdout, Rust's BufWriter, Java's BufferedOutputStream) and write in blocks"
        } else {
            "read in blocks (4 KiB or more) into a buffer and take the bytes from there"
        })];
        fixes.splice(0..0, super::log_flush(trace, a));
        let mut variants = Vec::new();
        // Knobs in the environment that turn buffering off.
        if let Some((fix, variant)) = python_unbuffered(trace, a) {
            fixes.insert(0, fix);
            variants.extend(variant);
        }
        for k in ["_STDBUF_O", "_STDBUF_E", "_STDBUF_I"] {
            if let Some(v) = knobs.get(k) {
                fixes.insert(0, Fix::env(format!("{k}={v} is set (stdbuf): run it without stdbuf, or with a full buffer")));
            }
        }
        if knobs.contains_key("_STDBUF_O") {
            variants.push("--unset-env _STDBUF_O");
        }
        out.push(Finding {
            id: ID.into(),
            what: format!("{} × {}(fd {fd}) of ≤ {}", thousands(a.calls), a.syscall, bytes(moved)),
            pid: Some(a.pid),
            evidence: Evidence::new(trace, &a.syscall, a.calls, a.total_ns),
            sites: a.sites.clone(),
            // Block-sized calls would take about calls × moved / 4 KiB.
            saving_ns: a.total_ns - a.total_ns * moved.clamp(1, 4096) / 4096,
            why: format!("each call moves at most {} (90% of them); every one pays a full syscall for it", bytes(moved)),
            fixes,
            tradeoff: writing
                .then(|| "buffered output reaches the reader later: flush where a line must be seen at once (prompts, logs before a crash)".into()),
            prove: (!variants.is_empty()).then(|| prove(trace, &variants.join(" "))).flatten(),
            ..Default::default()
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::testing::*;
    use crate::model::Histogram;

    fn writes(size_bucket: usize, calls: u64) -> crate::model::Trace {
        let mut t = trace(1_000_000_000, &[("write", calls, calls * 1000)]);
        let mut buckets = vec![0; size_bucket + 1];
        buckets[size_bucket] = calls;
        argument(&mut t, "write", Argument::Fd { fd: 1 }, calls, calls * 1000).returned = Some(Histogram::from_buckets(buckets));
        t
    }

    #[test]
    fn one_byte_writes() {
        let f = check(&writes(1, 3000));
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].what, "3,000 × write(fd 1) of ≤ 1 byte");
        assert!(f[0].fixes[0].text.starts_with("buffer the output"));
        assert_eq!(f[0].prove, None);
    }

    #[test]
    fn a_buffering_knob_in_the_environment_is_named() {
        let mut t = writes(1, 3000);
        t.run.environment.knobs.insert("PYTHONUNBUFFERED".into(), "1".into());
        let f = check(&t);
        assert!(f[0].fixes[0].text.starts_with("PYTHONUNBUFFERED is set: unset it"));
        assert_eq!(f[0].prove.as_deref(), Some("sysdiet compare --unset-env PYTHONUNBUFFERED -- ./app"));
        // Set by a script inside the command: unsetting it outside proves nothing.
        t.run.environment.knobs.clear();
        let mut env = crate::model::Environment::default();
        env.knobs.insert("PYTHONUNBUFFERED".into(), "1".into());
        t.processes[0].environment = Some(env);
        let f = check(&t);
        assert!(f[0].fixes[0].text.contains("inside the command"), "{}", f[0].fixes[0].text);
        assert_eq!(f[0].prove, None);
    }

    #[test]
    fn reads_that_got_less_than_they_asked_for_are_paced_by_their_writer() {
        let mut t = trace(1_000_000_000, &[("read", 2000, 2_000_000)]);
        let bucket = |b: usize| {
            let mut v = vec![0; b + 1];
            v[b] = 2000;
            Histogram::from_buckets(v)
        };
        // zsh reading $(...): asks 64 bytes, gets "12\n".
        let a = argument(&mut t, "read", Argument::Fd { fd: 12 }, 2000, 2_000_000);
        (a.requested, a.returned) = (Some(bucket(7)), Some(bucket(3)));
        assert!(check(&t).is_empty());
        // A byte at a time, asked for a byte at a time: the reader's choice.
        t.arguments[0].requested = Some(bucket(1));
        t.arguments[0].returned = Some(bucket(1));
        assert_eq!(check(&t)[0].what, "2,000 × read(fd 12) of ≤ 1 byte");
    }

    #[test]
    fn wide_character_output_is_told_as_glibcs_not_the_buffers() {
        let mut t = writes(5, 6250);
        let s = site(&mut t, &["__GI___libc_write", "_IO_new_file_write", "_IO_wdo_write", "_IO_wfile_overflow", "putwchar", "main"]);
        t.arguments[0].sites = s;
        let f = check(&t);
        assert!(f[0].fixes[0].text.starts_with("the writes come from glibc's wide-character output"), "{:?}", f[0].fixes);
        // A byte stream's writes: the buffering advice.
        let f = check(&writes(5, 6250));
        assert!(f[0].fixes[0].text.starts_with("buffer the output"), "{:?}", f[0].fixes);
    }

    #[test]
    fn a_file_written_whole_per_opening_is_not_small_writes() {
        // appendFileSync per item: open, write a line, close.
        let mut t = writes(4, 5000);
        t.arguments[0].argument = Argument::Fd { fd: 18 };
        argument(&mut t, "close", Argument::Fd { fd: 18 }, 5000, 1_000_000);
        assert!(check(&t).is_empty());
        t.arguments[1].calls = 10;
        assert_eq!(check(&t).len(), 1, "a file kept open and written a line at a time");
    }

    #[test]
    fn small_files_read_whole_are_not_small_reads() {
        let mut t = trace(1_000_000_000, &[("read", 5000, 5_000_000), ("close", 5000, 1_000_000)]);
        let mut three = vec![0; 4];
        three[3] = 5000;
        let a = argument(&mut t, "read", Argument::Fd { fd: 18 }, 5000, 5_000_000);
        (a.requested, a.returned) = (Some(Histogram::from_buckets(three.clone())), Some(Histogram::from_buckets(three)));
        argument(&mut t, "close", Argument::Fd { fd: 18 }, 5000, 1_000_000);
        assert!(check(&t).is_empty());
        // Another fd's closes say nothing of this one's reads.
        t.arguments[1].argument = Argument::Fd { fd: 19 };
        assert_eq!(check(&t)[0].what, "5,000 × read(fd 18) of ≤ 4 bytes");
        // Nor do a few closes of many reads: a file read a few bytes at a time.
        t.arguments[1].argument = Argument::Fd { fd: 18 };
        t.arguments[1].calls = 100;
        assert_eq!(check(&t).len(), 1);
    }

    #[test]
    fn a_stream_flushed_after_each_write_is_told() {
        // GNU tar's listing: fflush(stdout) after each name.
        let mut t = writes(5, 3000);
        let s = site(&mut t, &["__GI___libc_write", "_IO_new_file_write", "fflush_unlocked", "list_archive"]);
        t.arguments[0].sites = s;
        let f = check(&t);
        assert!(f[0].fixes[0].text.starts_with("the program calls fflush after each write"), "{:?}", f[0].fixes);
    }

    #[test]
    fn a_shells_echo_in_a_loop_is_told_to_the_script() {
        // bash -c 'for i in $(seq 3000); do echo $i; done': bash's stdout is
        // line-buffered by bash itself, so each echo is a write.
        let mut t = writes(3, 3000);
        let s = site(&mut t, &["__GI___libc_write", "_IO_file_overflow", "echo_builtin", "execute_command_internal"]);
        t.arguments[0].sites = s;
        let f = check(&t);
        assert!(f[0].fixes[0].text.starts_with("the shell writes each echo or printf out at once"), "{:?}", f[0].fixes);
        assert!(f[0].fixes[0].text.contains("printf '%s\\n'"), "{:?}", f[0].fixes);
        // A C program's own line writes keep the buffering advice.
        let mut t = writes(3, 3000);
        let s = site(&mut t, &["__GI___libc_write", "_IO_file_overflow", "putchar", "main"]);
        t.arguments[0].sites = s;
        assert!(check(&t)[0].fixes[0].text.starts_with("buffer the output"));
    }

    #[test]
    fn an_interpreters_own_flush_per_line_is_told_to_the_script() {
        // perl -e '$| = 1; print ... for 1..20000': pp_print flushes itself.
        let mut t = writes(6, 20_000);
        let autoflush = ["__GI___libc_write", "PerlIOUnix_write", "PerlIOBuf_flush", "Perl_PerlIO_flush", "Perl_pp_print", "main"];
        t.arguments[0].sites = site(&mut t, &autoflush);
        assert!(check(&t)[0].fixes[0].text.contains("$| = 1"), "{:?}", check(&t)[0].fixes);
        // Without $|, a full buffer is flushed from PerlIOBuf_write: not the
        // script's doing (and such writes are blocks, not tiny-io's).
        let mut t = writes(6, 20_000);
        let full = ["__GI___libc_write", "PerlIOUnix_write", "PerlIOBuf_flush", "Perl_PerlIO_flush", "PerlIOBuf_write", "Perl_pp_print", "main"];
        t.arguments[0].sites = site(&mut t, &full);
        assert!(check(&t)[0].fixes[0].text.starts_with("buffer the output"), "{:?}", check(&t)[0].fixes);
        // python3: print(..., flush=True).
        let mut t = writes(6, 20_000);
        let flushed = ["__GI___libc_write", "_Py_write_impl", "buffered_flush", "_io_TextIOWrapper_flush", "builtin_print_impl", "main"];
        t.arguments[0].sites = site(&mut t, &flushed);
        assert!(check(&t)[0].fixes[0].text.contains("flush=True"), "{:?}", check(&t)[0].fixes);
    }

    #[test]
    fn gos_unbuffered_file_is_told_to_wrap_it() {
        // fmt.Fprintln(f, ...) per line: *os.File has no buffer.
        let mut t = writes(5, 20_000);
        let direct = ["internal/runtime/syscall/linux.Syscall6", "syscall.write", "os.(*File).Write", "fmt.Fprintln", "main.main"];
        t.arguments[0].sites = site(&mut t, &direct);
        assert!(check(&t)[0].fixes[0].text.contains("bufio.NewWriter(f)"), "{:?}", check(&t)[0].fixes);
        // A bufio.Writer's flush writes its buffer: not the file's doing.
        let mut t = writes(5, 20_000);
        let flushed = ["internal/runtime/syscall/linux.Syscall6", "syscall.write", "os.(*File).Write", "bufio.(*Writer).Flush", "main.main"];
        t.arguments[0].sites = site(&mut t, &flushed);
        assert!(check(&t)[0].fixes[0].text.starts_with("buffer the output"), "{:?}", check(&t)[0].fixes);
    }

    #[test]
    fn large_writes_are_fine() {
        // bucket 14: up to 8 KiB
        assert!(check(&writes(14, 3000)).is_empty());
    }
}
