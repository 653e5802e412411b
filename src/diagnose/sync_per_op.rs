//! sync-per-op: fsync/fdatasync (and friends) at a high rate: a flush to
//! stable storage per record or per statement. Each waits for the device;
//! batching many operations into one flush (a transaction) keeps the
//! durability of the batch at a fraction of the cost.

use super::{shell_quote, Evidence, Finding, Fix};
use crate::human::thousands;
use crate::model::Trace;

pub const ID: &str = "sync-per-op";

pub(super) const SYNCS: &[&str] = &["fsync", "fdatasync", "sync_file_range", "msync", "syncfs", "sync"];
/// Flushes per second that mean "per operation" rather than "per batch".
const HIGH_RATE: f64 = 10.0;
/// At most this many writes per flush: a flush per record (a record can
/// take a few writes: a header, a body).
const WRITES_PER_RECORD: u64 = 4;

pub fn check(trace: &Trace) -> Vec<Finding> {
    let secs = trace.run.duration_ns as f64 / 1e9;
    let mut out = Vec::new();
    for p in &trace.processes {
        let syncs: Vec<_> = p.syscalls.iter().filter(|s| SYNCS.contains(&s.name.as_str())).collect();
        let calls: u64 = syncs.iter().map(|s| s.calls).sum();
        let ns: u64 = syncs.iter().map(|s| s.total_ns).sum();
        if calls < 2 || (secs > 0.0 && (calls as f64 / secs) < HIGH_RATE) {
            continue;
        }
        let writes: u64 = p.syscalls.iter().filter(|s| s.name.contains("write")).map(|s| s.calls).sum();
        let per_write = if writes > 0 { format!(", one per {:.1} writes", writes as f64 / calls as f64) } else { String::new() };
        let names: Vec<String> = syncs.iter().map(|s| format!("{} × {}", thousands(s.calls), s.name)).collect();
        out.push(Finding {
            id: ID.into(),
            what: names.join(", "),
            pid: Some(p.pid),
            // A flush waits for the device off the CPU, which sampled CPU
            // time does not see: on a busy disk the run grows and the
            // flushes' share of it shrinks. Flushes that go with each
            // record are judged by their count instead.
            evidence: Evidence { per_item: writes > 0 && writes <= calls * WRITES_PER_RECORD, ..Evidence::new(trace, &syncs[0].name, calls, ns) },
            sites: syncs.iter().flat_map(|s| s.sites.clone()).collect(),
            saving_ns: ns - ns / calls,
            why: format!("a flush to stable storage {:.0} times a second{per_write}: each waits for the device", calls as f64 / secs.max(1e-9)),
            fixes: vec![
                Fix::code("batch: group many operations into one transaction (BEGIN … COMMIT) or one flush per batch"),
                Fix::config("for databases: the commit/sync settings (e.g. SQLite PRAGMA synchronous=NORMAL with WAL, PostgreSQL commit_delay)"),
            ],
            tradeoff: Some("a crash loses the operations of the batch not yet flushed; each flush still makes everything before it durable".into()),
            // eatmydata (Debian's package of that name) turns every flush
            // into nothing: what the flushes cost, the most batching saves.
            // A measurement, not a fix: a crash under it loses everything.
            prove: prove_without_syncs(trace),
            ..Default::default()
        });
    }
    out
}

/// `sysdiet compare --vs 'eatmydata CMD' -- CMD`.
fn prove_without_syncs(trace: &Trace) -> Option<String> {
    if trace.run.command.is_empty() {
        return None;
    }
    let command = trace.run.command.iter().map(|a| shell_quote(a)).collect::<Vec<_>>().join(" ");
    Some(format!(
        "sysdiet compare --vs {} -- {command}   (eatmydata: what the flushes cost; not a fix)",
        shell_quote(&format!("eatmydata {command}"))
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::testing::*;

    #[test]
    fn a_flush_per_write() {
        let f = check(&trace(1_000_000_000, &[("write", 1000, 1_000_000), ("fdatasync", 1000, 500_000_000)]));
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].what, "1,000 × fdatasync");
        assert!(f[0].why.contains("one per 1.0 writes"));
        assert_eq!(f[0].prove.as_deref(), Some("sysdiet compare --vs 'eatmydata ./app' -- ./app   (eatmydata: what the flushes cost; not a fix)"));
        assert!(f[0].tradeoff.is_some());
    }

    #[test]
    fn a_flush_per_write_on_a_slow_disk_is_shown_whatever_its_cpu_time() {
        // 20 s of waiting for the device, 10 ms of it on the CPU.
        let f = check(&trace(20_000_000_000, &[("write", 1000, 1_000_000), ("fdatasync", 1000, 10_000_000)]));
        assert!(f[0].evidence.per_item && !f[0].is_small());
        // A flush per batch of records is judged by its time.
        let f = check(&trace(20_000_000_000, &[("write", 10_000, 1_000_000), ("fdatasync", 1000, 10_000_000)]));
        assert!(!f[0].evidence.per_item && f[0].is_small());
    }

    #[test]
    fn one_flush_at_the_end_is_fine() {
        assert!(check(&trace(1_000_000_000, &[("write", 1000, 1_000_000), ("fsync", 1, 5_000_000)])).is_empty());
        // A few flushes over a long run: a batch each, not per operation.
        assert!(check(&trace(100_000_000_000, &[("fsync", 50, 5_000_000)])).is_empty());
    }
}
