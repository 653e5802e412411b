//! What the running kernel's BPF can do, probed before the load (as
//! libbpf-tools and bpftrace do), and so which variant of syscount.bpf.c's
//! programs it runs.

use crate::error::{Error, Result};

/// The programs of syscount.bpf.c a kernel runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// A thread's state in its task storage (5.11); bpf_loop (5.17),
    /// bpf_task_pt_regs (5.15) and atomic exchanges (5.12).
    Current,
    /// The `_legacy` programs: a thread's state in a hash map keyed by its
    /// tid, bounded loops, no exchange. Kernels from 5.8 (the ring buffer).
    Legacy,
}

impl Variant {
    /// Its name in a run document (`run.bpf_programs`).
    pub fn name(self) -> &'static str {
        match self {
            Variant::Current => "current",
            Variant::Legacy => "legacy",
        }
    }

    /// Which variant this kernel runs; an error naming what it lacks if it
    /// runs neither. SYSDIET_BPF_VARIANT=legacy (or current) picks one, so
    /// that the legacy programs are tested on any kernel.
    pub fn for_this_kernel() -> Result<Variant> {
        match std::env::var("SYSDIET_BPF_VARIANT").as_deref() {
            Ok("legacy") => return Ok(Variant::Legacy),
            Ok("current") => return Ok(Variant::Current),
            _ => {}
        }
        // Probes that cannot tell (no rights: libbpf then says "no" to
        // everything) leave it to the load, whose error says why.
        if map_type(libbpf_sys::BPF_MAP_TYPE_ARRAY) != Some(true) {
            return Ok(Variant::Current);
        }
        let has = |probe: Option<bool>| probe.unwrap_or(true);
        if !has(map_type(libbpf_sys::BPF_MAP_TYPE_RINGBUF)) {
            return Err(Error::KernelLacks { release: release(), feature: "BPF ring buffer", since: "5.8" });
        }
        let current = has(map_type(libbpf_sys::BPF_MAP_TYPE_TASK_STORAGE))
            && has(helper(libbpf_sys::BPF_PROG_TYPE_PERF_EVENT, libbpf_sys::BPF_FUNC_loop))
            && has(helper(libbpf_sys::BPF_PROG_TYPE_PERF_EVENT, libbpf_sys::BPF_FUNC_task_pt_regs));
        Ok(if current { Variant::Current } else { Variant::Legacy })
    }

    /// The name of a program of this variant: the `_legacy` programs are
    /// their current twins' names with that suffix.
    pub fn program(self, name: &str) -> String {
        match self {
            Variant::Current => name.to_string(),
            Variant::Legacy => format!("{name}_legacy"),
        }
    }
}

fn map_type(kind: libbpf_sys::bpf_map_type) -> Option<bool> {
    // SAFETY: no options; libbpf makes and closes a map of that type.
    answer(unsafe { libbpf_sys::libbpf_probe_bpf_map_type(kind, std::ptr::null()) })
}

fn helper(prog: libbpf_sys::bpf_prog_type, helper: libbpf_sys::bpf_func_id) -> Option<bool> {
    // SAFETY: no options; libbpf loads a program calling the helper.
    answer(unsafe { libbpf_sys::libbpf_probe_bpf_helper(prog, helper, std::ptr::null()) })
}

/// libbpf's probes: 1 yes, 0 no, below 0 could not tell.
fn answer(ret: i32) -> Option<bool> {
    (ret >= 0).then_some(ret == 1)
}

/// The running kernel's release, as uname says.
fn release() -> String {
    nix::sys::utsname::uname().map(|u| u.release().to_string_lossy().into_owned()).unwrap_or_else(|_| "unknown".into())
}
