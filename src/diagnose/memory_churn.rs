//! memory-churn: mmap/munmap pairs or brk going up and down over and over.
//! glibc's malloc serves a block above its mmap threshold (128 KiB at
//! first) with its own mmap and gives it back on free; and it trims the
//! heap top with brk when more than its trim threshold is free. Allocating
//! and freeing such blocks in a loop makes a syscall pair each time.

use super::{prove, Evidence, Finding, Fix};
use crate::human::thousands;
use crate::model::Trace;

pub const ID: &str = "memory-churn";

pub fn check(trace: &Trace) -> Vec<Finding> {
    let mut out = Vec::new();
    for p in &trace.processes {
        let get = |name: &str| p.syscalls.iter().find(|s| s.name == name);
        let (mmap, munmap, brk) = (get("mmap"), get("munmap"), get("brk"));
        let maps = mmap.map_or(0, |s| s.calls);
        let unmaps = munmap.map_or(0, |s| s.calls);
        let pairs = maps.min(unmaps);
        let brks = brk.map_or(0, |s| s.calls);
        let mut what = Vec::new();
        let mut ns = 0;
        let mut sites = Vec::new();
        let mut knobs = Vec::new();
        // Loading a program maps a handful of regions: churn is many pairs.
        if pairs >= 2 && pairs * 10 >= maps.max(unmaps) * 8 {
            what.push(format!("{} × mmap with {} × munmap", thousands(maps), thousands(unmaps)));
            for s in [mmap, munmap].into_iter().flatten() {
                ns += s.total_ns;
                sites.extend(s.sites.clone());
            }
            knobs.push(
                "MALLOC_MMAP_THRESHOLD_=1048576 (serve blocks up to 1 MiB from the heap; also stops the threshold from moving; \
                 larger blocks need a larger value, at most 33554432; blocks over 32 MiB stay mapped unless MALLOC_MMAP_MAX_=0 turns mmap off, with MALLOC_TRIM_THRESHOLD_ \
                 above the block size so that the heap keeps them)",
            );
        }
        // A program's start-up moves brk a few times.
        if brks >= 10 {
            what.push(format!("{} × brk", thousands(brks)));
            let s = brk.expect("counted");
            ns += s.total_ns;
            sites.extend(s.sites.clone());
            knobs.push("MALLOC_TRIM_THRESHOLD_=16777216 (keep up to 16 MiB free at the heap top instead of trimming it)");
        }
        if what.is_empty() {
            continue;
        }
        let mut fixes: Vec<Fix> = knobs.iter().map(|k| Fix::env(format!("raise glibc malloc's thresholds: {k}"))).collect();
        fixes.push(Fix::code("reuse the buffer across iterations instead of allocating and freeing it each time"));
        let variant = knobs.iter().map(|k| format!("--env {}", k.split_whitespace().next().unwrap_or_default())).collect::<Vec<_>>().join(" ");
        out.push(Finding {
            id: ID.into(),
            what: what.join(", "),
            pid: Some(p.pid),
            evidence: Evidence::new(trace, if pairs >= 2 { "mmap" } else { "brk" }, pairs * 2 + brks, ns),
            sites,
            saving_ns: ns,
            why: "memory is mapped and given back again and again: each round trip is a syscall pair and page faults on the fresh pages".into(),
            fixes,
            tradeoff: Some("the process keeps more memory mapped between uses".into()),
            prove: prove(trace, &variant),
            ..Default::default()
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::testing::*;

    #[test]
    fn mmap_munmap_pairs() {
        let f = check(&trace(1_000_000_000, &[("mmap", 10_008, 10_000_000), ("munmap", 10_001, 10_000_000)]));
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].what, "10,008 × mmap with 10,001 × munmap");
        assert_eq!(f[0].prove.as_deref(), Some("sysdiet compare --env MALLOC_MMAP_THRESHOLD_=1048576 -- ./app"));
    }

    #[test]
    fn brk_churn() {
        let f = check(&trace(1_000_000_000, &[("brk", 5000, 1_000_000)]));
        assert!(f[0].fixes[0].text.contains("MALLOC_TRIM_THRESHOLD_"));
    }

    #[test]
    fn a_program_loading_is_not_churn() {
        assert!(check(&trace(1_000_000_000, &[("mmap", 8, 8000), ("munmap", 1, 1000), ("brk", 3, 100)])).is_empty());
    }
}
