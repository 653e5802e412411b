//! Call sites from stack samples: mappings and samples arrive while the
//! target runs (collector), each sample is unwound at once (unwind), and at
//! the end the distinct stacks are named (symbolize) and blamed on the
//! program's own frame (responsible).

pub mod collector;
pub mod debug_cache;
pub mod go_table;
pub mod images;
pub mod logged;
pub mod name_cache;
pub mod perf_map;
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
pub fn resolve(collected: Collected, budget: (u32, u64), argument_for: impl Fn(u32, i64, u64) -> Option<Argument>, out: &mut TraceBuilder) {
    let t = Instant::now();
    let named_ns = collected.names.ns;
    let (sites, site_of) = symbolize::call_sites(&collected.unwinder.images, &collected.stacks, collected.names);
    // Naming done while the target ran, and what was left at its end.
    let symbolize_ns = named_ns + t.elapsed().as_nanos() as u64;

    let n = collected.count;
    // The bytes unwinding needed, at most and for 99% of the samples.
    let p99_rank = (n * 99).div_ceil(100).max(1);
    let mut seen = 0;
    let p99 = collected.bytes_used.iter().find(|(_, c)| {
        seen += **c;
        seen >= p99_rank
    });
    let sampling = Sampling {
        first_gap: budget.0,
        interval_ns: budget.1,
        samples: n,
        max_gap: collected.max_gap,
        complete: collected.samples.iter().filter(|(k, _)| sites[site_of[k.stack]].complete).map(|(_, v)| v.samples).sum(),
        stack_too_short: collected.too_short,
        stack_bytes_max: collected.bytes_used.keys().next_back().copied().unwrap_or(0),
        stack_bytes_p99: p99.map_or(0, |(b, _)| *b),
        stack_bytes_copied: collected.stack_bytes_copied,
        frames_unmapped: collected.frames_unmapped,
        mappings_lost: collected.mappings_lost,
        unwind_ns_per_sample: collected.unwind_ns.checked_div(n).unwrap_or(0),
        symbolize_ns,
    };
    for (k, v) in collected.samples {
        out.add_sample(SampleRecord {
            tgid: k.tgid,
            nr: k.nr,
            argument: argument_for(k.nr, k.fd, k.path_hash),
            site: site_of[k.stack],
            period: v.periods,
            ns: v.weighted_ns.checked_div(v.periods).unwrap_or(0),
            samples: v.samples,
        });
    }
    out.set_call_sites(sites, sampling);
}
