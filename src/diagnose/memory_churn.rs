//! memory-churn: mmap/munmap pairs or brk going up and down over and over.
//! glibc's malloc serves a block above its mmap threshold (128 KiB at
//! first) with its own mmap and gives it back on free; and it trims the
//! heap top with brk when more than its trim threshold is free. Allocating
//! and freeing such blocks in a loop makes a syscall pair each time.
//! A program can also map and unmap itself (a file per item, a buffer per
//! request): its call sites then show no allocator frame, and malloc's
//! knobs would change nothing.

use foldhash::HashMap;
use std::collections::BTreeMap;

use super::{called_through, prove, Evidence, Finding, Fix};
use crate::human::thousands;
use crate::model::{callsite, Argument, BrkChange, Process, SiteShare, Trace};

pub const ID: &str = "memory-churn";

/// More mmap/munmap pairs than a runtime's start-up makes (CPython ~3,
/// node ~50, a JVM ~20 unmaps for its ~170 maps): churn is a loop's.
const MIN_PAIRS: u64 = 256;
/// Heap trims: a program that only grows its heap (gcc, a loader) never
/// shrinks it; each shrink in a churn is followed by a grow.
const MIN_SHRINKS: u64 = 10;

/// The knobs and what each does; the first pair is what `prove` tries.
const MMAP_OFF: &str = "MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=1073741824";
const MMAP_FIX: &str = "MALLOC_MMAP_MAX_=0 with MALLOC_TRIM_THRESHOLD_=1073741824 (serve every block from the heap, and keep up to 1 GiB \
     free at its top; glibc maps blocks over 32 MiB whatever its threshold says), or for blocks up to 32 MiB \
     MALLOC_MMAP_THRESHOLD_=33554432 alone (also stops the threshold from moving)";
const TRIM: &str = "MALLOC_TRIM_THRESHOLD_=16777216";
const TRIM_FIX: &str = "MALLOC_TRIM_THRESHOLD_=16777216 (keep up to 16 MiB free at the heap top instead of trimming it)";

/// glibc malloc's functions on the way to its own mmap and munmap (a
/// block over its threshold is mapped in sysmalloc, given back in
/// munmap_chunk), and the entry points that lead there.
const ALLOCATOR: &[&str] = &[
    "malloc",
    "free",
    "calloc",
    "realloc",
    "sysmalloc",
    "munmap_chunk",
    "mremap_chunk",
    "_int_malloc",
    "_int_free",
    "_int_realloc",
    "_int_memalign",
    "memalign",
    "posix_memalign",
    "aligned_alloc",
    "valloc",
    "pvalloc",
    "tcache_init",
    "__libc_malloc",
    "__libc_free",
    "__libc_calloc",
    "__libc_realloc",
    "__libc_memalign",
];

/// Whether the sampled sites of these calls say the program maps memory
/// itself: most of the calls they share out come from sites whose
/// library frames are all named and none of whose frames is the
/// allocator's. Unnamed
/// or unsampled sites cannot tell: malloc is assumed, as before.
fn mapped_by_the_program(trace: &Trace, shares: &[SiteShare]) -> bool {
    let (mut own, mut allocator) = (0u64, 0u64);
    for share in shares {
        let Some(site) = trace.call_site(share) else { continue };
        // The frames from the syscall's wrapper out to the program's code.
        let library = &site.frames[..site.responsible.map_or(site.frames.len(), |r| r.min(site.frames.len()))];
        if called_through(trace, std::slice::from_ref(share), ALLOCATOR) {
            allocator += share.calls;
        } else if site.responsible.is_some() && !library.is_empty() && library.iter().all(|f| f.function.is_some()) {
            own += share.calls;
        }
    }
    own > allocator
}

/// glibc's posix_spawn, which maps a stack for each child it clones and
/// unmaps it after: part of every spawn (make's recipes, a Python
/// subprocess), whose cost is the number of processes.
const SPAWN: &[&str] = &["__spawnix", "__spawni", "posix_spawn", "posix_spawnp"];

/// Whether most of the calls the sampled sites share out come through
/// posix_spawn.
fn mapped_by_a_spawn(trace: &Trace, shares: &[SiteShare]) -> bool {
    let through: u64 = shares.iter().filter(|s| called_through(trace, std::slice::from_ref(*s), SPAWN)).map(|s| s.calls).sum();
    through * 2 > shares.iter().map(|s| s.calls).sum::<u64>()
}

/// A child per item: a process that started about as many processes as it
/// unmapped regions, as posix_spawn does with the stack it maps for each
/// child (its call sites say so too, when samples reached them; a loaded
/// host's run can leave them unsampled).
fn a_child_per_item(p: &Process, children: &BTreeMap<u32, Vec<&Process>>, unmaps: u64) -> bool {
    let started = super::spawner::started(p.pid, children);
    started >= MIN_PAIRS / 2 && started * 2 >= unmaps
}

/// A thread per item: a process that started about as many threads as it
/// unmapped regions. glibc gives each new thread a stack of its own
/// mapping (8 MiB by default) and keeps up to 40 MiB of them for reuse;
/// past that each ended thread's stack is unmapped, so a thread started per
/// request maps and unmaps a stack each time.
fn a_thread_per_item(p: &Process, unmaps: u64) -> bool {
    let threads = p.threads.len() as u64;
    threads >= MIN_PAIRS / 2 && threads * 2 >= unmaps
}

/// A process's heap moves by brk, and where the sampled ones came from.
#[derive(Default)]
struct HeapMoves {
    grows: u64,
    shrinks: u64,
    sites: Vec<SiteShare>,
}

pub fn check(trace: &Trace) -> Vec<Finding> {
    // brk calls per process by direction, and the sites of the moves, in
    // one pass: the heap's queries (the loader's first brk among them)
    // are no part of a churn, so their samples must not name its site.
    let mut moves: HashMap<u32, HeapMoves> = HashMap::default();
    for a in &trace.arguments {
        if let Argument::Brk { change } = a.argument {
            let m = moves.entry(a.pid).or_default();
            match change {
                BrkChange::Grow => m.grows += a.calls,
                BrkChange::Shrink => m.shrinks += a.calls,
                _ => continue,
            }
            callsite::merge_shares(&mut m.sites, &a.sites);
        }
    }
    let children = super::spawner::children(trace);
    let mut out = Vec::new();
    for p in &trace.processes {
        let get = |name: &str| p.syscalls.iter().find(|s| s.name == name);
        let (mmap, munmap, brk) = (get("mmap"), get("munmap"), get("brk"));
        let maps = mmap.map_or(0, |s| s.calls);
        let unmaps = munmap.map_or(0, |s| s.calls);
        let pairs = maps.min(unmaps);
        let heap = moves.remove(&p.pid).unwrap_or_default();
        let (grows, shrinks) = (heap.grows, heap.shrinks);
        let mut what = Vec::new();
        let mut ns = 0;
        let mut sites = Vec::new();
        let mut knobs = Vec::new();
        let mut fixes = Vec::new();
        let mut its_own = false;
        let spawning = mmap.is_some_and(|s| mapped_by_a_spawn(trace, &s.sites)) || a_child_per_item(p, &children, unmaps);
        let threads = a_thread_per_item(p, unmaps);
        if pairs >= MIN_PAIRS && pairs * 10 >= maps.max(unmaps) * 8 && !spawning {
            what.push(format!("{} × mmap with {} × munmap", thousands(maps), thousands(unmaps)));
            for s in [mmap, munmap].into_iter().flatten() {
                ns += s.total_ns;
                sites.extend(s.sites.clone());
            }
            its_own = !threads && mmap.is_some_and(|s| mapped_by_the_program(trace, &s.sites));
            if threads {
                what.push(format!("in {} threads", thousands(p.threads.len() as u64)));
                fixes.push(Fix::code(
                    "start a pool of threads once and hand them the work (Python's concurrent.futures.ThreadPoolExecutor, a \
                     fixed set of workers) instead of a thread per item; glibc keeps up to 40 MiB of ended threads' stacks for \
                     new ones, so smaller stacks (pthread_attr_setstacksize, threading.stack_size()) also keep more of them",
                ));
            } else if its_own {
                fixes.push(Fix::code(
                    "map once and keep the mapping for the next item (or read small files with read() into a buffer you keep): \
                     malloc's knobs do not apply, the program calls mmap itself",
                ));
            } else {
                knobs.push(MMAP_OFF);
                fixes.push(Fix::env(format!("turn glibc malloc's mmap off: {MMAP_FIX}")));
            }
        }
        if let Some(s) = brk.filter(|_| shrinks >= MIN_SHRINKS && grows >= shrinks) {
            what.push(format!("{} × brk ({} shrinking the heap, {} growing it again)", thousands(s.calls), thousands(shrinks), thousands(grows)));
            // Queries and first moves are not churn.
            let churn = (2 * shrinks).min(s.calls);
            ns += s.total_ns * churn / s.calls.max(1);
            sites.extend(heap.sites);
            knobs.push(TRIM);
            fixes.push(Fix::env(format!("raise glibc malloc's trim threshold: {TRIM_FIX}")));
        }
        if what.is_empty() {
            continue;
        }
        if (!its_own && !threads) || !knobs.is_empty() {
            fixes.push(Fix::code("reuse the buffer across iterations instead of allocating and freeing it each time"));
        }
        let why = if threads {
            "a thread is started per item and ends: each new thread's stack is a mapping of its own, and once glibc's cache of \
             ended threads' stacks (40 MiB) is full, each one that ends is unmapped: a syscall pair, page faults on the fresh \
             stack and a TLB flush on every CPU the process ran on"
        } else if its_own {
            "the program maps memory (or a file) itself and unmaps it again, again and again (its call sites show no allocator): \
             each round trip is a syscall pair, page faults on the fresh pages and a TLB flush at each unmap"
        } else {
            "memory is mapped and given back again and again: each round trip is a syscall pair and page faults on the fresh pages"
        };
        let mut variant: Vec<&str> = knobs.iter().flat_map(|k| k.split_whitespace()).collect();
        variant.dedup_by(|a, b| a.split('=').next() == b.split('=').next());
        let variant = variant.iter().map(|k| format!("--env {k}")).collect::<Vec<_>>().join(" ");
        out.push(Finding {
            id: ID.into(),
            what: what.join(", "),
            pid: Some(p.pid),
            evidence: Evidence::new(trace, if pairs >= MIN_PAIRS { "mmap" } else { "brk" }, pairs * 2 + 2 * shrinks, ns),
            sites,
            saving_ns: ns,
            why: why.into(),
            fixes,
            tradeoff: Some("the process keeps more memory mapped between uses".into()),
            // A program's own mappings have no knob to prove a fix with.
            prove: if knobs.is_empty() { None } else { prove(trace, &variant) },
            ..Default::default()
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::testing::*;

    fn brk(change: BrkChange) -> Argument {
        Argument::Brk { change }
    }

    #[test]
    fn mmap_munmap_pairs() {
        let f = check(&trace(1_000_000_000, &[("mmap", 10_008, 10_000_000), ("munmap", 10_001, 10_000_000)]));
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].what, "10,008 × mmap with 10,001 × munmap");
        assert_eq!(f[0].prove.as_deref(), Some("sysdiet compare --env MALLOC_MMAP_MAX_=0 --env MALLOC_TRIM_THRESHOLD_=1073741824 -- ./app"));
    }

    #[test]
    fn a_thread_per_item_maps_a_stack_each() {
        // Python's ThreadingHTTPServer: a thread per request.
        let mut t = trace(1_000_000_000, &[("mmap", 575, 10_000_000), ("munmap", 512, 10_000_000)]);
        t.processes[0].threads = (0..501).map(|tid| crate::model::Thread { tid, ..Default::default() }).collect();
        let f = check(&t);
        assert_eq!(f[0].what, "575 × mmap with 512 × munmap, in 501 threads");
        assert!(f[0].fixes[0].text.contains("ThreadPoolExecutor"), "{:?}", f[0].fixes);
        assert!(f[0].fixes.iter().all(|x| !x.text.contains("MALLOC_")), "no malloc knob: {:?}", f[0].fixes);
        assert_eq!(f[0].prove, None);
    }

    #[test]
    fn a_program_mapping_itself_gets_no_malloc_knob() {
        // git reading loose objects: mmap and munmap called by its own code.
        let mut t = trace(1_000_000_000, &[("mmap", 2_291, 10_000_000), ("munmap", 2_253, 10_000_000)]);
        t.syscalls[0].sites = site(&mut t, &["mmap", "read_object"]);
        t.processes[0].syscalls = t.syscalls.clone();
        let f = check(&t);
        assert_eq!(f.len(), 1);
        assert!(f[0].why.contains("no allocator"), "{}", f[0].why);
        assert!(f[0].fixes.iter().all(|x| !x.text.contains("MALLOC_")), "{:?}", f[0].fixes);
        assert_eq!(f[0].prove, None);
        // The same counts through malloc: the knob, and its proof.
        let mut t = trace(1_000_000_000, &[("mmap", 2_291, 10_000_000), ("munmap", 2_253, 10_000_000)]);
        t.syscalls[0].sites = site(&mut t, &["__mmap", "sysmalloc", "_int_malloc", "malloc", "make_buffer"]);
        t.processes[0].syscalls = t.syscalls.clone();
        let f = check(&t);
        assert!(f[0].fixes[0].text.contains("MALLOC_MMAP_MAX_"), "{:?}", f[0].fixes);
        assert!(f[0].prove.is_some());
    }

    #[test]
    fn a_spawns_stack_is_the_spawns() {
        // make running 300 recipes through posix_spawn: a stack mapped and
        // unmapped for each child.
        let mut t = trace(1_000_000_000, &[("mmap", 325, 5_000_000), ("munmap", 301, 5_000_000)]);
        t.syscalls[0].sites = site(&mut t, &["mmap", "__spawnix", "__spawni", "posix_spawn", "child_execute_job"]);
        t.processes[0].syscalls = t.syscalls.clone();
        assert!(check(&t).is_empty());
    }

    #[test]
    fn a_spawns_stack_is_the_spawns_unsampled() {
        // The same without samples of its mmap: its 300 children say it.
        let mut t = trace(1_000_000_000, &[("mmap", 325, 5_000_000), ("munmap", 301, 5_000_000)]);
        assert_eq!(check(&t).len(), 1, "no children: churn");
        let make = t.processes[0].pid;
        t.processes.extend((0..300).map(|i| crate::model::Process { pid: 10_000 + i, ppid: make, ..Default::default() }));
        assert!(check(&t).is_empty());
    }

    #[test]
    fn brk_up_and_down() {
        let mut t = trace(1_000_000_000, &[("brk", 5001, 1_000_000)]);
        argument(&mut t, "brk", brk(BrkChange::Query), 1, 200);
        argument(&mut t, "brk", brk(BrkChange::Grow), 2500, 500_000);
        argument(&mut t, "brk", brk(BrkChange::Shrink), 2500, 499_800);
        let f = check(&t);
        assert_eq!(f[0].what, "5,001 × brk (2,500 shrinking the heap, 2,500 growing it again)");
        assert!(f[0].fixes[0].text.contains("MALLOC_TRIM_THRESHOLD_"));
        assert_eq!(f[0].prove.as_deref(), Some("sysdiet compare --env MALLOC_TRIM_THRESHOLD_=16777216 -- ./app"));
    }

    #[test]
    fn a_churns_site_is_a_moves_not_the_loaders_query() {
        // find -ls: 108 brk, its one sample the loader's first query; the
        // shares of the whole syscall then gave all 108 calls to it.
        let mut t = trace(1_000_000_000, &[("brk", 108, 4_000_000)]);
        let loader = site(&mut t, &["__brk", "_dl_sysdep_start", "_start"]);
        t.processes[0].syscalls[0].sites = loader.clone();
        argument(&mut t, "brk", brk(BrkChange::Query), 2, 0).sites = loader.clone();
        argument(&mut t, "brk", brk(BrkChange::Grow), 56, 2_000_000);
        argument(&mut t, "brk", brk(BrkChange::Shrink), 50, 2_000_000);
        let f = check(&t);
        assert_eq!(f.len(), 1);
        assert!(f[0].sites.is_empty(), "no move sampled, no site: {:?}", f[0].sites);
        // A trim sampled: its site, not the loader's.
        let trim = site(&mut t, &["__brk", "__sbrk", "systrim", "_int_free", "free", "visit_dir"]);
        t.arguments[2].sites = trim.clone();
        let f = check(&t);
        assert_eq!(f[0].sites, trim);
    }

    #[test]
    fn a_runtime_starting_is_not_churn() {
        // node -e 0: 62 maps, 49 unmaps, its heap grown 24 times.
        let mut t = trace(1_000_000_000, &[("mmap", 62, 8000), ("munmap", 49, 1000), ("brk", 24, 100)]);
        argument(&mut t, "brk", brk(BrkChange::Query), 1, 4);
        argument(&mut t, "brk", brk(BrkChange::Grow), 23, 96);
        assert!(check(&t).is_empty());
        // A heap that grows for long (gcc) never shrinks.
        let mut t = trace(1_000_000_000, &[("brk", 3000, 100)]);
        argument(&mut t, "brk", brk(BrkChange::Grow), 3000, 100);
        assert!(check(&t).is_empty());
    }
}
