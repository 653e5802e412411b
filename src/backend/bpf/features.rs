//! What the running kernel's BPF can do, probed before the load (as
//! libbpf-tools and bpftrace do), and so which variant of syscount.bpf.c's
//! programs it runs.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// The programs of syscount.bpf.c a kernel runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// A thread's state in its task storage (which every hook may use by
    /// 5.15); bpf_loop (5.17), bpf_task_pt_regs (5.15) and atomic
    /// exchanges (5.12).
    Current,
    /// The current programs but `sys_exit_bounded` and
    /// `sched_process_exit_bounded`: bounded loops where the others use
    /// bpf_loop, and the CPU clock's ticks alone (the kernel's tick is
    /// found by a helper of 5.16). Kernels 5.15 and 5.16 (Ubuntu 22.04's).
    Bounded,
    /// The `_legacy` programs: a thread's state in a hash map keyed by its
    /// tid, bounded loops, no exchange. Kernels from 5.8 (the ring buffer).
    Legacy,
}

/// The programs the bounded variant has of its own; it runs the current
/// ones for the rest.
const BOUNDED_TWINS: &[&str] = &["sys_exit", "sched_process_exit"];

impl Variant {
    /// Every variant, newest first.
    pub const ALL: [Variant; 3] = [Variant::Current, Variant::Bounded, Variant::Legacy];

    /// Its name in a run document (`run.bpf_programs`).
    pub fn name(self) -> &'static str {
        match self {
            Variant::Current => "current",
            Variant::Bounded => "bounded",
            Variant::Legacy => "legacy",
        }
    }

    /// Whether a thread's state is in its task storage (found by the
    /// thread's pidfd from user space), not in a table by tid.
    pub fn task_storage(self) -> bool {
        self != Variant::Legacy
    }

    /// Which variant this kernel runs; an error naming what it lacks if it
    /// runs none. SYSDIET_BPF_VARIANT=legacy (or bounded, or current) picks
    /// one, so that each is tested on any kernel. A kernel's BPF does not
    /// change while it runs, so the answer is kept in the cache under the
    /// kernel's build id (`kernel`; None: nothing is kept): probing makes
    /// and drops five maps and programs, a part of every short command's
    /// start-up.
    pub fn for_this_kernel(kernel: Option<&str>) -> Result<Variant> {
        if let Ok(name) = std::env::var("SYSDIET_BPF_VARIANT") {
            if let Some(v) = Variant::ALL.into_iter().find(|v| v.name() == name) {
                return Ok(v);
            }
        }
        super::maps::quiet_libbpf();
        let kept = crate::linux::host::cache_dir().zip(kernel).filter(|_| !super::maps::kernel_btf_overridden()).map(|(dir, id)| kept_in(&dir, id));
        if let Some(v) = kept.as_deref().and_then(read_kept) {
            return Ok(v);
        }
        // Probes that cannot tell (no rights: libbpf then says "no" to
        // everything) leave it to the load, whose error says why; but a
        // kernel whose BTF has no typed tracepoints (before 5.5: Ubuntu
        // 20.04's 5.4) loads no tp_btf program with any rights, which is
        // said instead (its BTF is readable without them).
        let Some(v) = probe()? else {
            if super::tracepoint_ids::typed("sys_exit") == Some(false) {
                return Err(Error::KernelLacks { release: crate::linux::host::kernel_release(), feature: "BTF-typed tracepoints", since: "5.5" });
            }
            return Ok(Variant::Current);
        };
        if let Some(path) = kept {
            crate::linux::host::replace_file(&path, |tmp| std::fs::write(tmp, v.name()).is_ok());
        }
        Ok(v)
    }

    /// The name of a program of this variant: the `_legacy` programs (and
    /// the bounded ones it has) are their current twins' names with that
    /// suffix.
    pub fn program(self, name: &str) -> String {
        match self {
            Variant::Bounded if BOUNDED_TWINS.contains(&name) => format!("{name}_bounded"),
            Variant::Current | Variant::Bounded => name.to_string(),
            Variant::Legacy => format!("{name}_legacy"),
        }
    }
}

/// The probes' answer; None when they cannot tell.
fn probe() -> Result<Option<Variant>> {
    if map_type(libbpf_sys::BPF_MAP_TYPE_ARRAY) != Some(true) {
        return Ok(None);
    }
    let has = |probe: Option<bool>| probe.unwrap_or(true);
    if !has(map_type(libbpf_sys::BPF_MAP_TYPE_RINGBUF)) {
        return Err(Error::KernelLacks { release: crate::linux::host::kernel_release(), feature: "BPF ring buffer", since: "5.8" });
    }
    // on_tick, a perf_event program, finds a thread's state in task
    // storage and its registers by bpf_task_pt_regs: both there by 5.15.
    let perf_event = |f| has(helper(libbpf_sys::BPF_PROG_TYPE_PERF_EVENT, f));
    let storage = has(map_type(libbpf_sys::BPF_MAP_TYPE_TASK_STORAGE))
        && perf_event(libbpf_sys::BPF_FUNC_task_storage_get)
        && perf_event(libbpf_sys::BPF_FUNC_task_pt_regs);
    Ok(Some(match (storage, perf_event(libbpf_sys::BPF_FUNC_loop)) {
        (true, true) => Variant::Current,
        (true, false) => Variant::Bounded,
        (false, _) => Variant::Legacy,
    }))
}

/// Which probes' answer a kept one is: one more each time probe() asks
/// something new (2: the bounded variant).
const PROBES: u32 = 2;

/// Where the answer for the kernel of build id `kernel` is kept: named by
/// sysdiet's version and the probes', whose answers may differ.
fn kept_in(cache: &Path, kernel: &str) -> PathBuf {
    cache.join("features").join(format!("{kernel}-{}-{PROBES}.variant", env!("CARGO_PKG_VERSION")))
}

/// A kept answer, if the file is this user's own and says one.
fn read_kept(path: &Path) -> Option<Variant> {
    let mut text = String::new();
    std::io::Read::read_to_string(&mut crate::linux::host::open_own(path)?, &mut text).ok()?;
    Variant::ALL.into_iter().find(|v| v.name() == text)
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn the_bounded_variant_has_its_own_exit_hooks_and_the_current_others() {
        assert_eq!(Variant::Current.program("sys_exit"), "sys_exit");
        assert_eq!(Variant::Bounded.program("sys_exit"), "sys_exit_bounded");
        assert_eq!(Variant::Bounded.program("sched_process_exit"), "sched_process_exit_bounded");
        assert_eq!(Variant::Bounded.program("on_tick"), "on_tick");
        assert_eq!(Variant::Legacy.program("on_tick"), "on_tick_legacy");
        assert!(Variant::Bounded.task_storage() && !Variant::Legacy.task_storage());
    }

    #[test]
    fn a_kept_answer_is_read_back_only_when_it_says_one_and_is_ours_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = kept_in(dir.path(), "abc123");
        assert!(path.starts_with(dir.path().join("features")) && path.to_string_lossy().contains("abc123"));
        assert_eq!(read_kept(&path), None, "none kept yet");
        crate::linux::host::replace_file(&path, |tmp| std::fs::write(tmp, Variant::Legacy.name()).is_ok()).unwrap();
        assert_eq!(read_kept(&path), Some(Variant::Legacy));
        std::fs::write(&path, "newest").unwrap();
        assert_eq!(read_kept(&path), None, "not a variant");
        std::fs::write(&path, "current").unwrap();
        assert_eq!(read_kept(&path), Some(Variant::Current));
        std::fs::write(&path, "bounded").unwrap();
        assert_eq!(read_kept(&path), Some(Variant::Bounded));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
        assert_eq!(read_kept(&path), None, "others may write it");
    }
}

/// Whether a syscall's hook may be preempted on this kernel, the kernel
/// then skipping it for every other task's syscall end on that CPU until it
/// resumes: so under the full, lazy (7.x's default) or real-time
/// preemption models, not under none or voluntary. SYSDIET_BACKUP_HOOK=1
/// (or 0) says so instead. Where it may, sys_exit_backup loads too.
pub fn syscall_hooks_preemptible() -> bool {
    match std::env::var("SYSDIET_BACKUP_HOOK").as_deref() {
        Ok("1") => return true,
        Ok("0") => return false,
        _ => {}
    }
    let release = crate::linux::host::kernel_release();
    let model = running_preemption(std::fs::read_to_string("/sys/kernel/debug/sched/preempt").ok().as_deref())
        .or_else(|| booted_preemption(&std::fs::read_to_string("/proc/cmdline").unwrap_or_default()))
        .or_else(|| built_preemption(&std::fs::read_to_string(format!("/boot/config-{release}")).unwrap_or_default()));
    match model {
        Some(m) => matches!(m, "full" | "lazy" | "rt"),
        // 7.0 dropped none and voluntary where lazy is built (x86-64, arm64).
        None => release.split('.').next().and_then(|major| major.parse::<u32>().ok()).is_some_and(|major| major >= 7),
    }
}

/// The model debugfs says runs: "none voluntary (full) lazy".
fn running_preemption(text: Option<&str>) -> Option<&'static str> {
    let chosen = text?.split_whitespace().find(|w| w.starts_with('('))?.trim_matches(|c| c == '(' || c == ')');
    model_named(chosen)
}

/// The model the kernel's command line asks for (`preempt=`).
fn booted_preemption(cmdline: &str) -> Option<&'static str> {
    cmdline.split_whitespace().find_map(|w| w.strip_prefix("preempt=")).and_then(model_named)
}

/// The model the kernel was built with, from its config.
fn built_preemption(config: &str) -> Option<&'static str> {
    let set = |name: &str| {
        let line = format!("CONFIG_{name}=y");
        config.lines().any(|l| l == line)
    };
    [("PREEMPT_RT", "rt"), ("PREEMPT_LAZY", "lazy"), ("PREEMPT", "full"), ("PREEMPT_VOLUNTARY", "voluntary"), ("PREEMPT_NONE", "none")]
        .into_iter()
        .find(|(name, _)| set(name))
        .map(|(_, model)| model)
}

fn model_named(name: &str) -> Option<&'static str> {
    ["none", "voluntary", "full", "lazy", "rt"].into_iter().find(|m| *m == name)
}

#[cfg(test)]
mod preemption_tests {
    use super::*;

    #[test]
    fn the_preemption_model_is_read_from_debugfs_the_command_line_or_the_config() {
        assert_eq!(running_preemption(Some("none voluntary (full) lazy\n")), Some("full"));
        assert_eq!(running_preemption(Some("(none) voluntary full lazy")), Some("none"));
        assert_eq!(running_preemption(None), None);
        assert_eq!(booted_preemption("BOOT_IMAGE=/vmlinuz root=/dev/vda preempt=lazy quiet"), Some("lazy"));
        assert_eq!(booted_preemption("root=/dev/vda quiet"), None);
        // Debian 13's backports kernel (7.3) and this project's host (6.18).
        assert_eq!(
            built_preemption("CONFIG_PREEMPT_BUILD=y\n# CONFIG_PREEMPT is not set\nCONFIG_PREEMPT_LAZY=y\nCONFIG_PREEMPT_DYNAMIC=y\n"),
            Some("lazy")
        );
        assert_eq!(built_preemption("CONFIG_PREEMPT_BUILD=y\nCONFIG_PREEMPT_NONE=y\nCONFIG_PREEMPTION=y\n"), Some("none"));
        assert_eq!(built_preemption("CONFIG_PREEMPT_VOLUNTARY=y\nCONFIG_PREEMPT_DYNAMIC=y\n"), Some("voluntary"));
    }
}
