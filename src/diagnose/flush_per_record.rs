//! flush-per-record: many writes of a line or a record each (more than
//! tiny-io's few bytes, far less than a pipe buffer) at a high rate: the
//! program flushes after every record (Python's -u, a logger's flush, a
//! line-buffered stdio stream). A full buffer writes the same bytes in a
//! few large calls.

use super::{output_per_item, prove, python_unbuffered, relays, Evidence, Finding, Fix};
use crate::human::{bytes, thousands};
use crate::model::{Argument, Trace};

pub const ID: &str = "flush-per-record";

/// Writes of at most this much (90% of them) are records, not blocks. A
/// C stdio stream's full buffer is 4 KiB on a pipe, a terminal or a file
/// of 4 KiB blocks (its st_blksize): writes of up to 4 KiB are that
/// buffer, flushed full (seq | sort, gzip > file).
const RECORD: u64 = 2048;
/// tiny-io covers writes of this much or less.
const TINY: u64 = 64;
/// Records per second below which flushing each one costs little.
const MIN_RATE: f64 = 1000.0;
/// What a full buffer would write at once: a pipe's capacity.
const BLOCK: u64 = 65536;

/// stdbuf's option for the stdio stream on `fd`, if it has one.
fn stdbuf_option(fd: i64) -> Option<&'static str> {
    match fd {
        1 => Some("-o"),
        2 => Some("-e"),
        _ => None,
    }
}

pub fn check(trace: &Trace) -> Vec<Finding> {
    let mut out = Vec::new();
    let relays = relays(trace);
    for a in &trace.arguments {
        let Argument::Fd { fd } = a.argument else { continue };
        // Positioned writes (pwrite64) put pages where a database or an
        // index wants them: no stream is flushed per record.
        if !(a.syscall == "write" || a.syscall == "sendto") {
            continue;
        }
        let Some(moved) = a.typical_bytes() else { continue };
        let evidence = Evidence::new(trace, &a.syscall, a.calls, a.total_ns);
        if moved <= TINY || moved > RECORD || evidence.per_second < MIN_RATE || output_per_item(trace, a) {
            continue;
        }
        if relays.get(&a.pid).is_some_and(|&reads| reads >= a.calls) {
            continue; // a relay: the records are its writer's
        }
        let mut fixes = if let Some(fix) = super::written_each_time(trace, &a.sites) {
            vec![Fix::code(fix)]
        } else {
            let mut fixes = vec![Fix::code(
                "buffer whole blocks and flush on a timer or at exit, not after every record (setvbuf(_IOFBF); Go's bufio.Writer, Rust's BufWriter, Java's BufferedOutputStream; a logger's buffering)",
            )];
            // stdbuf sets the buffers of stdout and stderr alone: a
            // socket or a file the program opened is out of its reach.
            if let Some(stream) = stdbuf_option(fd) {
                fixes.push(Fix::config(format!("for a program using C stdio: stdbuf {stream}1M (or a larger {stream}) in front of it")));
            }
            fixes
        };
        fixes.splice(0..0, super::log_flush(trace, a));
        let mut variant = None;
        if let Some((fix, v)) = python_unbuffered(trace, a) {
            fixes.insert(0, fix);
            variant = v;
        }
        out.push(Finding {
            id: ID.into(),
            what: format!("{} × {}(fd {fd}) of ≤ {} each", thousands(a.calls), a.syscall, bytes(moved)),
            pid: Some(a.pid),
            evidence,
            sites: a.sites.clone(),
            saving_ns: a.total_ns - a.total_ns * moved.min(BLOCK) / BLOCK,
            why: format!(
                "a write per record: 90% of them carry at most {}, far less than a {} buffer would, {:.0} times a second",
                bytes(moved),
                bytes(BLOCK),
                Evidence::new(trace, &a.syscall, a.calls, a.total_ns).per_second
            ),
            fixes,
            tradeoff: Some(
                "buffered records reach the reader later: flush where one must be seen at once (a prompt, the last words before a crash)".into(),
            ),
            prove: variant.and_then(|v| prove(trace, v)),
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

    fn writes(t: &mut crate::model::Trace, calls: u64, size: u64) {
        let mut buckets = vec![0; Histogram::bucket_of(size) + 1];
        *buckets.last_mut().unwrap() = calls;
        argument(t, "write", Argument::Fd { fd: 1 }, calls, calls * 1000).returned = Some(Histogram::from_buckets(buckets));
    }

    #[test]
    fn a_write_per_line_at_a_high_rate() {
        let mut t = trace(1_000_000_000, &[("write", 20_000, 20_000_000)]);
        writes(&mut t, 20_000, 200);
        let f = check(&t);
        assert_eq!(f[0].what, "20,000 × write(fd 1) of ≤ 256 bytes each");
        assert!(f[0].saving_ns > 0);
        assert!(f[0].fixes.iter().any(|x| x.text.contains("stdbuf -o1M")), "{:?}", f[0].fixes);
    }

    #[test]
    fn a_shells_printf_per_record_gets_no_stdbuf() {
        // A script printing a 200-byte line per item with printf.
        let mut t = trace(1_000_000_000, &[("write", 20_000, 20_000_000)]);
        writes(&mut t, 20_000, 200);
        t.arguments[0].sites = site(&mut t, &["__GI___libc_write", "_IO_file_overflow", "printf_builtin", "execute_command"]);
        let f = check(&t);
        assert!(f[0].fixes[0].text.starts_with("the shell writes each echo or printf"), "{:?}", f[0].fixes);
        assert!(f[0].fixes.iter().all(|x| !x.text.contains("stdbuf")), "{:?}", f[0].fixes);
    }

    #[test]
    fn stdbuf_is_offered_for_stdout_and_stderr_alone() {
        // rsync's small writes to the socket between its processes (fd 4).
        for (fd, stdbuf) in [(1, Some("stdbuf -o1M")), (2, Some("stdbuf -e1M")), (4, None)] {
            let mut t = trace(1_000_000_000, &[("write", 20_000, 20_000_000)]);
            writes(&mut t, 20_000, 200);
            t.arguments[0].argument = Argument::Fd { fd };
            let f = check(&t);
            assert_eq!(f.len(), 1, "fd {fd}");
            let offered = f[0].fixes.iter().find(|x| x.text.contains("stdbuf")).map(|x| x.text.clone());
            match stdbuf {
                Some(option) => assert!(offered.is_some_and(|t| t.contains(option)), "fd {fd}: {:?}", f[0].fixes),
                None => assert_eq!(offered, None, "fd {fd}"),
            }
        }
    }

    #[test]
    fn tiny_writes_blocks_and_slow_logs_are_not_records() {
        for (calls, size, run_ns) in [(20_000, 8, 1_000_000_000u64), (20_000, 65_536, 1_000_000_000), (500, 200, 10_000_000_000)] {
            let mut t = trace(run_ns, &[("write", calls, calls * 1000)]);
            writes(&mut t, calls, size);
            assert!(check(&t).is_empty(), "{calls} × {size} B in {run_ns} ns");
        }
    }
}
