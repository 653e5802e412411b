//! Call sites from stack samples: mappings and samples arrive while the
//! target runs (collector), each sample is unwound at once (unwind), and at
//! the end the distinct stacks are named (symbolize) and blamed on the
//! program's own frame (responsible).

pub mod collector;
pub mod images;
pub mod responsible;
pub mod spaces;
pub mod symbolize;
pub mod unwind;

use std::time::Instant;

use crate::model::builder::{SampleRecord, TraceBuilder};
use crate::model::{Argument, Sampling};
use collector::Collected;

/// Names the collected stacks and gives every sample to the builder with
/// its call site. `argument_for(nr, fd, path_hash)` turns a sample's key
/// into the argument the counts use.
pub fn resolve(
    collected: Collected,
    budget: (u32, u64),
    argument_for: impl Fn(u32, i64, u64) -> Option<Argument>,
    out: &mut TraceBuilder,
) {
    let t = Instant::now();
    let (sites, site_of) = symbolize::call_sites(&collected.unwinder.images, &collected.stacks);
    let symbolize_ns = t.elapsed().as_nanos() as u64;

    let n = collected.samples.len() as u64;
    let mut used: Vec<u64> = collected.facts.iter().map(|f| f.bytes_used).collect();
    used.sort_unstable();
    let sampling = Sampling {
        first_gap: budget.0,
        interval_ns: budget.1,
        samples: n,
        max_gap: collected.samples.iter().map(|s| s.period).max().unwrap_or(0),
        complete: collected.samples.iter().filter(|s| sites[site_of[s.stack]].complete).count() as u64,
        stack_too_short: collected.facts.iter().filter(|f| f.too_short).count() as u64,
        stack_bytes_max: used.last().copied().unwrap_or(0),
        stack_bytes_p99: used.get((used.len() * 99).div_ceil(100).saturating_sub(1)).copied().unwrap_or(0),
        stack_bytes_copied: collected.stack_bytes_copied,
        frames_unmapped: collected.facts.iter().map(|f| f.unmapped_frames).sum(),
        mappings_lost: collected.mappings_lost,
        unwind_ns_per_sample: collected.unwind_ns.checked_div(n).unwrap_or(0),
        symbolize_ns,
    };
    for s in collected.samples {
        out.add_sample(SampleRecord {
            tgid: s.tgid,
            nr: s.nr,
            argument: argument_for(s.nr, s.fd, s.path_hash),
            site: site_of[s.stack],
            period: s.period,
            ns: s.ns,
        });
    }
    out.set_call_sites(sites, sampling);
}
