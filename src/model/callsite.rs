//! Call sites: the code that makes a syscall, and how many of an exact
//! count each one made. Stacks are sampled; counts are not: the samples
//! only share an exact count out among the sites that made it.

use serde::{Deserialize, Serialize};

/// One stack, innermost frame first (the syscall wrapper), `main` and
/// `_start` last.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq, Hash, PartialOrd, Ord, schemars::JsonSchema)]
pub struct CallSite {
    pub frames: Vec<Frame>,
    /// The first frame in the program's own code, outside libc, ld.so, the
    /// vDSO and recognised language runtimes: who to blame.
    pub responsible: Option<usize>,
    /// How many frames from `responsible` outward are the program's own
    /// before library code again (libc's start-up code, a qsort).
    #[serde(default)]
    pub own_frames: usize,
    /// The unwinder reached the stack's root; false when it stopped early
    /// (missing unwind info, a stack copy too short).
    pub complete: bool,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq, Hash, PartialOrd, Ord, schemars::JsonSchema)]
pub struct Frame {
    /// The function, demangled; `None` when no symbol covers the address.
    pub function: Option<String>,
    pub file: Option<String>,
    pub line: Option<u32>,
    /// The ELF file the code is in (`[vdso]` for the vDSO).
    pub module: String,
    /// Address in the module (ELF virtual address), for frames with no name.
    pub address: u64,
    /// Inlined into the next frame outward.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub inlined: bool,
    /// The name the library exports for this function when `function` is
    /// an internal alias: `mktime` for glibc's `__GI_mktime`, `malloc` for
    /// `__libc_malloc`. The call a program made, as its source spells it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public: Option<String>,
}

impl Frame {
    /// `use_localtime (timeloop.c:9)`, `__tz_convert`, `libfoo.so+0x1234`.
    pub fn label(&self) -> String {
        let name = match &self.function {
            Some(f) => f.clone(),
            None => format!("{}+{:#x}", module_name(&self.module), self.address),
        };
        match (&self.file, self.line) {
            (Some(file), Some(line)) => format!("{name} ({}:{line})", base_name(file)),
            _ => name,
        }
    }

    pub fn name(&self) -> String {
        self.function.clone().unwrap_or_else(|| format!("{}+{:#x}", module_name(&self.module), self.address))
    }

    /// The exported name where there is one, else `name()`.
    pub fn public_name(&self) -> String {
        self.public.clone().unwrap_or_else(|| self.name())
    }
}

/// The C and C++ runtimes' shared objects: glibc's (libc, ld.so,
/// libpthread, libm, its NSS modules, ...), libstdc++ and libgcc_s. Their
/// code runs on a program's behalf; it is how, never why.
const C_RUNTIME: &[&str] = &[
    "libc.so",
    "libm.so",
    "libpthread.so",
    "libdl.so",
    "librt.so",
    "libresolv.so",
    "libanl.so",
    "libutil.so",
    "libmvec.so",
    "libnss_",
    "libc_malloc_debug.so",
    "ld-linux",
    "ld64.so",
    "libstdc++.so",
    "libgcc_s.so",
    "libc++.so",
    "libc++abi.so",
];

/// Whether `module` (a file, or `[vdso]`) is the C or C++ runtime.
pub fn in_c_runtime(module: &str) -> bool {
    let file = base_name(module);
    module == "[vdso]" || C_RUNTIME.iter().any(|lib| file.starts_with(lib))
}

impl Frame {
    /// In the C or C++ runtime's shared objects, or the vDSO.
    pub fn in_c_runtime(&self) -> bool {
        in_c_runtime(&self.module)
    }
}

fn base_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

pub fn module_name(path: &str) -> &str {
    base_name(path)
}

impl CallSite {
    pub fn responsible_frame(&self) -> Option<&Frame> {
        self.responsible.and_then(|i| self.frames.get(i))
    }

    /// The frames below the responsible one: the library chain the call
    /// went through, outermost first (`localtime ← __tz_convert ...` read
    /// from the user's side).
    pub fn library_chain(&self) -> &[Frame] {
        &self.frames[..self.responsible.unwrap_or(self.frames.len()).min(self.frames.len())]
    }

    /// The responsible frame and its callers in the program's own code,
    /// innermost first.
    pub fn user_chain(&self) -> &[Frame] {
        self.responsible.map_or(&[], |i| &self.frames[i..(i + self.own_frames).min(self.frames.len())])
    }
}

/// A call site's share of one exact count.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
pub struct SiteShare {
    /// Index into `Trace::call_sites`.
    pub site: usize,
    /// Calls attributed to this site; the shares of one count add up to it.
    pub calls: u64,
    /// Kernel time attributed to this site, likewise.
    pub total_ns: u64,
    /// The stack samples behind the share.
    pub samples: u64,
}

/// How the stacks were sampled and what it cost.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Sampling {
    /// A thread starts at one sample per `first_gap` calls (random gaps);
    /// the gap then doubles or halves to keep about one sample per
    /// `interval_ns` of the thread's time: a budget per thread and second.
    /// 0 when every call's stack is known (a strace log with -k).
    pub first_gap: u32,
    pub interval_ns: u64,
    pub samples: u64,
    /// The longest gap between two samples of one thread, in calls.
    pub max_gap: u64,
    /// Samples whose unwinding reached the root of the stack.
    pub complete: u64,
    /// Samples that stopped early because the stack copy ended.
    pub stack_too_short: u64,
    /// Bytes above the stack pointer the unwinder needed, at most.
    pub stack_bytes_max: u64,
    /// ... for 99% of the samples.
    pub stack_bytes_p99: u64,
    pub stack_bytes_copied: u64,
    /// Frames in code with no known mapping (no unwind info, no symbol).
    pub frames_unmapped: u64,
    /// Mapping records the kernel dropped (perf ring full).
    pub mappings_lost: u64,
    /// Time spent unwinding, per sample, and symbolizing, once.
    pub unwind_ns_per_sample: u64,
    pub symbolize_ns: u64,
}

/// Shares `calls` and `total_ns` out among sites in proportion to the
/// samples' weights, by largest remainder so that the shares add up to the
/// exact totals. `samples`: (site, weight for calls, weight for time, how
/// many samples).
pub fn apportion(calls: u64, total_ns: u64, samples: &[(usize, f64, f64, u64)]) -> Vec<SiteShare> {
    use std::collections::BTreeMap;
    let mut by_site: BTreeMap<usize, (f64, f64, u64)> = BTreeMap::new();
    for &(site, w, t, n) in samples {
        let e = by_site.entry(site).or_default();
        e.0 += w;
        e.1 += t;
        e.2 += n;
    }
    if by_site.is_empty() {
        return Vec::new();
    }
    let sites: Vec<(usize, f64, f64, u64)> = by_site.into_iter().map(|(s, (w, t, n))| (s, w, t, n)).collect();
    let call_shares = largest_remainder(calls, &sites.iter().map(|s| s.1).collect::<Vec<_>>());
    // Time: by sampled time, or by calls when no sample took any time.
    let time_weights: Vec<f64> =
        if sites.iter().any(|s| s.2 > 0.0) { sites.iter().map(|s| s.2).collect() } else { sites.iter().map(|s| s.1).collect() };
    let ns_shares = largest_remainder(total_ns, &time_weights);
    let mut out: Vec<SiteShare> = sites
        .iter()
        .zip(call_shares.iter().zip(ns_shares))
        .map(|(s, (&calls, total_ns))| SiteShare { site: s.0, calls, total_ns, samples: s.3 })
        .filter(|s| s.calls > 0 || s.total_ns > 0)
        .collect();
    out.sort_by(|a, b| b.calls.cmp(&a.calls).then(b.total_ns.cmp(&a.total_ns)).then(a.site.cmp(&b.site)));
    out
}

fn largest_remainder(total: u64, weights: &[f64]) -> Vec<u64> {
    let sum: f64 = weights.iter().sum();
    if sum <= 0.0 {
        // No weights: split evenly.
        return largest_remainder(total, &vec![1.0; weights.len()]);
    }
    let exact: Vec<f64> = weights.iter().map(|w| total as f64 * w / sum).collect();
    let mut shares: Vec<u64> = exact.iter().map(|x| x.floor() as u64).collect();
    let mut left = total.saturating_sub(shares.iter().sum());
    let mut order: Vec<usize> = (0..weights.len()).collect();
    order.sort_by(|&a, &b| (exact[b] - exact[b].floor()).total_cmp(&(exact[a] - exact[a].floor())).then(a.cmp(&b)));
    for i in order.into_iter().cycle() {
        if left == 0 {
            break;
        }
        shares[i] += 1;
        left -= 1;
    }
    shares
}

/// Adds shares of the same sites together (processes into totals).
pub fn merge_shares(into: &mut Vec<SiteShare>, from: &[SiteShare]) {
    for s in from {
        match into.iter_mut().find(|m| m.site == s.site) {
            Some(m) => {
                m.calls += s.calls;
                m.total_ns += s.total_ns;
                m.samples += s.samples;
            }
            None => into.push(s.clone()),
        }
    }
    into.sort_by(|a, b| b.calls.cmp(&a.calls).then(b.total_ns.cmp(&a.total_ns)).then(a.site.cmp(&b.site)));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_add_up_to_the_exact_count() {
        let s = apportion(1000, 999, &[(0, 1.0, 1.0, 1), (1, 1.0, 1.0, 1), (2, 1.0, 1.0, 1)]);
        assert_eq!(s.iter().map(|s| s.calls).sum::<u64>(), 1000);
        assert_eq!(s.iter().map(|s| s.total_ns).sum::<u64>(), 999);
        assert_eq!(s[0].calls, 334);
    }

    #[test]
    fn weights_decide_the_split() {
        // Site 1 sampled at a period 3 times site 0's.
        let s = apportion(400, 0, &[(0, 1.0, 0.0, 1), (1, 3.0, 0.0, 1)]);
        assert_eq!((s[0].site, s[0].calls, s[1].calls), (1, 300, 100));
        assert_eq!(s[0].samples, 1);
    }

    #[test]
    fn no_samples_no_shares() {
        assert!(apportion(10, 10, &[]).is_empty());
    }

    #[test]
    fn zero_weights_split_evenly() {
        let s = apportion(3, 0, &[(4, 0.0, 0.0, 1), (5, 0.0, 0.0, 1)]);
        assert_eq!(s.iter().map(|s| s.calls).collect::<Vec<_>>(), vec![2, 1]);
    }

    #[test]
    fn merged_shares_sum() {
        let mut a = vec![SiteShare { site: 1, calls: 5, total_ns: 5, samples: 1 }];
        merge_shares(&mut a, &[SiteShare { site: 1, calls: 2, total_ns: 1, samples: 1 }, SiteShare { site: 2, calls: 9, total_ns: 0, samples: 1 }]);
        assert_eq!((a[0].site, a[0].calls, a[1].calls), (2, 9, 7));
    }

    #[test]
    fn chains_split_at_the_responsible_frame() {
        let f = |n: &str| Frame { function: Some(n.into()), module: "m".into(), ..Default::default() };
        let site = CallSite {
            frames: vec![f("stat"), f("__tz_convert"), f("use_localtime"), f("main"), f("__libc_start_call_main")],
            responsible: Some(2),
            own_frames: 2,
            complete: true,
        };
        assert_eq!(site.user_chain().len(), 2);
        assert_eq!(site.library_chain().len(), 2);
        assert_eq!(site.user_chain()[0].name(), "use_localtime");
        assert_eq!(site.responsible_frame().unwrap().name(), "use_localtime");
    }
}
