//! What a set of programs and maps is, besides the object: the variant,
//! the read-only data, which hooks load and the sizes a run picks. It is
//! all `open` writes into the object, so it names the set a keeper holds
//! (keeper.rs), and a run that borrows one never opens the object.

use super::features::Variant;
use super::maps::{bpf_error, fnv1a, OBJECT_HASH};
use super::skel::types::{arg_kind, rodata, syscall_spec};
use super::skel::{OpenSyscountSkel, SyscountSkelBuilder};
use crate::backend::filter::SyscallSet;
use crate::backend::perf;
use crate::error::Result;
use crate::linux::syscalls::{self, ArgKind};

/// Stack samples: a new thread starts at one per FIRST_GAP calls; the gap
/// then adapts to about one sample per SAMPLE_INTERVAL_NS of its time.
pub const SAMPLE_FIRST_GAP: u32 = 8;
pub const SAMPLE_INTERVAL_NS: u64 = 500_000;

/// The fine tick: 4 kHz on each CPU (perf record's default rate).
pub const TICK_NS: u64 = 250_000;

/// A ring buffer's size: so much per CPU (what fills it comes from the
/// CPUs' threads), within bounds, a power of two as rings must be.
pub struct RingSize {
    /// Bytes per online CPU.
    per_cpu: u32,
    /// The least, whatever the CPUs.
    min: u32,
    /// The most, whatever the CPUs.
    max: u32,
}

pub const MIB: u32 = 1 << 20;

impl RingSize {
    /// Stack samples: a CPU yields at most one of ~16 KiB per
    /// SAMPLE_INTERVAL_NS of a thread's time, so 2 MiB holds ~60 ms of it.
    pub const SAMPLES: RingSize = RingSize { per_cpu: 2 * MIB, min: 4 * MIB, max: 64 * MIB };
    /// Exit records (~10 KiB a process with its slots): read every 50 ms,
    /// or sooner when an eighth of the ring is unread.
    pub const EXITS: RingSize = RingSize { per_cpu: MIB, min: 2 * MIB, max: 32 * MIB };
    /// Path strings (~50 bytes each), each of which wakes a reader that
    /// has caught up.
    pub const STRINGS: RingSize = RingSize { per_cpu: MIB, min: 2 * MIB, max: 32 * MIB };

    pub fn bytes(&self, cpus: usize) -> u32 {
        self.per_cpu.saturating_mul(cpus.max(1) as u32).clamp(self.min, self.max).next_power_of_two()
    }
}

/// Which of a set's programs an opened object loads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    All,
    /// sys_exit alone (its variant's).
    SysExit,
    /// All but sys_exit.
    Others,
}

/// How the tracer counts.
#[derive(Debug, Clone, Copy, Default)]
pub struct BpfOptions {
    /// Sample user stacks for call sites.
    pub stacks: bool,
    /// Measure every call's wall time with a second hook at sys_enter,
    /// instead of sampling CPU time.
    pub latency: bool,
    /// Keep every argument key from its first call, none summarised as
    /// one-shot (per-process counts even of a single call; more table room).
    pub keep_every_key: bool,
    /// Every task on the host (but sysdiet's own) is a target from its
    /// first syscall on: sysdiet top / serve.
    pub system_wide: bool,
    /// Threads already running are made targets from user space (attach,
    /// check --sample): the current programs key a thread's state by a
    /// pidfd of it, which kernels before 6.9 give only to a process's
    /// leader; there the legacy programs (keyed by tid) count instead.
    pub arms_running_threads: bool,
    /// Ask the verifier for its statistics (`sysdiet __programs`): each
    /// program's verification time, kept in `verification_us`.
    pub verifier_stats: bool,
    /// With `verifier_stats`: the whole log, each instruction the verifier
    /// went over and its state at each branch (`sysdiet __programs --log`),
    /// to see where its walk splits.
    pub verifier_log: bool,
    /// The programs may come from a keeper (keeper.rs), and go to one
    /// after a run whose targets all ended: a command's run.
    pub keep_loaded: bool,
}

/// Everything `open` sets in the object. Each field is a value the object
/// gets as it is, nothing derived later, so that two runs with equal
/// specs load equal programs.
#[derive(Debug, Clone)]
pub struct SetSpec {
    /// Which twin of each program loads.
    pub variant: Variant,
    /// The whole read-only data, every field set here: the object's own
    /// initial values are not kept (a test holds them all zero).
    pub rodata: rodata,
    /// `sys_enter` loads (`--latency`).
    pub sys_enter: bool,
    /// `on_tick` loads (CPU time sampled).
    pub on_tick: bool,
    /// The rings' sizes, in bytes.
    pub samples_bytes: u32,
    pub exits_bytes: u32,
    pub strings_bytes: u32,
    /// `first_calls` has room for first sightings (else one entry: every
    /// key goes to `arg_stats` at once).
    pub first_sightings: bool,
}

impl SetSpec {
    /// The set that counts `filter` with `options` on `variant`'s programs
    /// on this host's CPUs.
    pub fn new(filter: &SyscallSet, options: &BpfOptions, variant: Variant) -> SetSpec {
        // SAFETY: plain integers, for which zero is valid.
        let mut rodata: rodata = unsafe { std::mem::zeroed() };
        for (nr, spec) in rodata.specs.iter_mut().enumerate() {
            *spec = spec_for(nr as u32, filter);
        }
        rodata.latency = options.latency as u8;
        rodata.keep_every_key = options.keep_every_key as u8;
        rodata.system_wide = options.system_wide as u8;
        // Only a host-wide run enrols tasks, and must not enrol itself;
        // left 0 otherwise, so that a command's runs have the same set.
        rodata.self_tgid = if options.system_wide { std::process::id() } else { 0 };
        rodata.tick_ns = TICK_NS;
        let cpus = perf::online_cpus().len();
        // The legacy and bounded programs' kernels (before 5.17) run a
        // syscall's hooks with preemption off.
        rodata.backup_hook = u64::from(variant == Variant::Current && super::features::syscall_hooks_preemptible());
        // Tests only: hook runs dropped at random, for the backups to count.
        rodata.test_skip_one_in = std::env::var("SYSDIET_TEST_SKIP").ok().and_then(|n| n.parse().ok()).unwrap_or(0);
        rodata.sample_stacks = options.stacks as u8;
        rodata.sample_first_gap = SAMPLE_FIRST_GAP;
        rodata.sample_interval_ns = SAMPLE_INTERVAL_NS;
        // Ring buffers are allocated whole at load, and a run maps every
        // page of them: no bigger than the CPUs can fill.
        let samples_bytes = if options.stacks { RingSize::SAMPLES.bytes(cpus) } else { perf::page_size() as u32 };
        let exits_bytes = RingSize::EXITS.bytes(cpus);
        let strings_bytes = RingSize::STRINGS.bytes(cpus);
        rodata.sample_wakeup_bytes = u64::from(samples_bytes / 16);
        rodata.exits_wakeup_bytes = u64::from(exits_bytes / 8);
        rodata.strings_wakeup_bytes = u64::from(strings_bytes / 8);
        SetSpec {
            variant,
            rodata,
            sys_enter: options.latency,
            on_tick: !options.latency,
            samples_bytes,
            exits_bytes,
            strings_bytes,
            first_sightings: !options.keep_every_key && variant.task_storage(),
        }
    }

    /// The set's name: the object and every field, so that a keeper's set
    /// is lent only to runs that would load the same. The patterns name
    /// every field: one added to either struct is a compile error here
    /// until it is hashed.
    pub fn name(&self) -> String {
        let SetSpec { variant, rodata, sys_enter, on_tick, samples_bytes, exits_bytes, strings_bytes, first_sightings } = self;
        let rodata {
            specs,
            latency,
            keep_every_key,
            system_wide,
            self_tgid,
            tick_ns,
            sample_stacks,
            sample_first_gap,
            sample_interval_ns,
            sample_wakeup_bytes,
            exits_wakeup_bytes,
            strings_wakeup_bytes,
            test_skip_one_in,
            backup_hook,
        } = rodata;
        // The specs as bytes: formatting 512 of them is a kept run's cost.
        let mut bytes: Vec<u8> = specs.iter().flat_map(|s| [s.traced, s.kind, s.arg, s.size_arg]).collect();
        let rest = (
            (variant, sys_enter, on_tick, samples_bytes, exits_bytes, strings_bytes, first_sightings),
            (latency, keep_every_key, system_wide, self_tgid, tick_ns, sample_stacks, backup_hook),
            (sample_first_gap, sample_interval_ns, sample_wakeup_bytes, exits_wakeup_bytes, strings_wakeup_bytes, test_skip_one_in),
        );
        bytes.extend_from_slice(format!("{:016x} {rest:?}", OBJECT_HASH).as_bytes());
        format!("{:016x}", fnv1a(&bytes))
    }

    /// Opens the object and sets it to this spec, relocated against
    /// `types` (kernel_types.rs) when given, else the whole kernel BTF,
    /// with `part` of the set's programs to load.
    pub fn open(
        &self,
        storage: &'static mut std::mem::MaybeUninit<libbpf_rs::OpenObject>,
        types: Option<&std::path::Path>,
        part: Part,
    ) -> Result<OpenSyscountSkel<'static>> {
        let opening = crate::timings::span("open object");
        let mut open = super::kernel_types::open(SyscountSkelBuilder::default(), storage, types).map_err(bpf_error)?;
        *open.maps.rodata_data.as_deref_mut().expect("rodata is mmapped") = self.rodata;
        open.maps.samples.set_max_entries(self.samples_bytes).map_err(bpf_error)?;
        open.maps.exits.set_max_entries(self.exits_bytes).map_err(bpf_error)?;
        open.maps.strings.set_max_entries(self.strings_bytes).map_err(bpf_error)?;
        if !self.first_sightings {
            open.maps.first_calls.set_max_entries(1).map_err(bpf_error)?;
            open.maps.first_tags.set_max_entries(1).map_err(bpf_error)?;
        }
        // One variant's programs, and the maps of its targets' states.
        let v = self.variant;
        let p = &mut open.progs;
        let (exit, others) = (part != Part::Others, part != Part::SysExit);
        for (current, bounded_twin, legacy_twin, wanted) in [
            (&mut p.sys_exit, Some(&mut p.sys_exit_bounded), &mut p.sys_exit_legacy, exit),
            (&mut p.sys_enter, None, &mut p.sys_enter_legacy, self.sys_enter && others),
            (&mut p.on_tick, None, &mut p.on_tick_legacy, self.on_tick && others),
            (&mut p.sched_process_fork, None, &mut p.sched_process_fork_legacy, others),
            (&mut p.sched_process_exec, None, &mut p.sched_process_exec_legacy, others),
            (&mut p.signal_deliver, None, &mut p.signal_deliver_legacy, others),
            (&mut p.sched_process_exit, Some(&mut p.sched_process_exit_bounded), &mut p.sched_process_exit_legacy, others),
        ] {
            // The bounded variant runs the current program where it has no twin.
            let bounded_runs_current = v == Variant::Bounded && bounded_twin.is_none();
            if let Some(twin) = bounded_twin {
                twin.set_autoload(wanted && v == Variant::Bounded);
            }
            current.set_autoload(wanted && (v == Variant::Current || bounded_runs_current));
            legacy_twin.set_autoload(wanted && v == Variant::Legacy);
        }
        // bpf_loop (5.17) is in the backup hook's code and copy_logged's;
        // the kernel's own tick, which takes over from the CPU clock
        // (ticks.rs), is found by bpf_kallsyms_lookup_name (5.16). The
        // other variants keep the clock, and look each logged key up.
        let current = v == Variant::Current;
        let backups = self.rodata.backup_hook != 0 && others && current;
        for backup in [
            &mut p.sys_exit_backup,
            &mut p.sched_process_fork_backup,
            &mut p.sched_process_exec_backup,
            &mut p.sched_process_exit_backup,
            &mut p.signal_deliver_backup,
        ] {
            backup.set_autoload(backups);
        }
        let kernel_ticks = self.on_tick && others && current;
        p.kernel_tick.set_autoload(kernel_ticks);
        p.find_tick_fn.set_autoload(kernel_ticks);
        p.copy_logged.set_autoload(others && current);
        open.maps.states.set_autocreate(v.task_storage()).map_err(bpf_error)?;
        open.maps.state_slots.set_autocreate(v.task_storage()).map_err(bpf_error)?;
        // Stack samples' scratch (33 KiB a CPU): only with samples; the
        // code that would use it otherwise is dead, and libbpf poisons it.
        open.maps.sample_scratch.set_autocreate(self.rodata.sample_stacks != 0).map_err(bpf_error)?;
        for m in [&mut open.maps.thread_states, &mut open.maps.thread_ticks, &mut open.maps.promoting] {
            m.set_autocreate(!v.task_storage()).map_err(bpf_error)?;
        }
        drop(opening);
        Ok(open)
    }
}

fn spec_for(nr: u32, filter: &SyscallSet) -> syscall_spec {
    let traced = filter.contains(nr) as u8;
    let (kind, arg, size_arg) = match syscalls::by_nr(nr).map(|s| s.arg) {
        Some(ArgKind::Path(i)) => (arg_kind::ARG_PATH, i, 0),
        Some(ArgKind::Fd(i)) => (arg_kind::ARG_FD, i, 0),
        Some(ArgKind::FdIo { fd, size }) => (arg_kind::ARG_FD_IO, fd, size),
        Some(ArgKind::Clock(i)) => (arg_kind::ARG_CLOCK, i, 0),
        Some(ArgKind::TimeoutMs(i)) => (arg_kind::ARG_TIMEOUT_MS, i, 0),
        Some(ArgKind::TimeoutPtr(i)) => (arg_kind::ARG_TIMEOUT_PTR, i, 0),
        Some(ArgKind::SigMask) => (arg_kind::ARG_SIGMASK, 0, 0),
        Some(ArgKind::Brk) => (arg_kind::ARG_BRK, 0, 0),
        Some(ArgKind::None) | None => (arg_kind::ARG_NONE, 0, 0),
    };
    syscall_spec { traced, kind: kind.0 as u8, arg, size_arg }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rings_grow_with_the_cpus_within_bounds() {
        assert_eq!(RingSize::SAMPLES.bytes(0), 4 * MIB);
        assert_eq!(RingSize::SAMPLES.bytes(2), 4 * MIB);
        assert_eq!(RingSize::SAMPLES.bytes(3), 8 * MIB);
        assert_eq!(RingSize::SAMPLES.bytes(8), 16 * MIB);
        assert_eq!(RingSize::SAMPLES.bytes(4096), 64 * MIB);
        assert_eq!(RingSize::EXITS.bytes(1), 2 * MIB);
        assert_eq!(RingSize::EXITS.bytes(5), 8 * MIB);
        assert_eq!(RingSize::STRINGS.bytes(1 << 20), 32 * MIB);
    }

    #[test]
    fn a_set_is_named_by_each_thing_it_sets() {
        let all = SyscallSet::default();
        let plain = BpfOptions::default();
        let name = |filter: &SyscallSet, options: BpfOptions, variant| SetSpec::new(filter, &options, variant).name();
        let a = name(&all, plain, Variant::Current);
        assert_eq!(a, name(&all, plain, Variant::Current));
        assert_eq!(a.len(), 16);
        // What only the load or the run reads is not part of the set.
        assert_eq!(a, name(&all, BpfOptions { keep_loaded: true, verifier_stats: true, ..plain }, Variant::Current));
        let others = [
            name(&all, plain, Variant::Legacy),
            name(&all, plain, Variant::Bounded),
            name(&all, BpfOptions { stacks: true, ..plain }, Variant::Current),
            name(&all, BpfOptions { latency: true, ..plain }, Variant::Current),
            name(&all, BpfOptions { keep_every_key: true, ..plain }, Variant::Current),
            name(&SyscallSet::parse("none").unwrap(), plain, Variant::Current),
        ];
        for other in &others {
            assert_ne!(&a, other);
        }
        let mut spec = SetSpec::new(&all, &plain, Variant::Current);
        spec.exits_bytes *= 2;
        assert_ne!(a, spec.name());
    }

    #[test]
    fn the_object_gives_its_read_only_data_no_values_of_its_own() {
        // `open` replaces every variable: a value the C side gave a
        // `const volatile` would be lost without a word.
        let storage = Box::leak(Box::new(std::mem::MaybeUninit::uninit()));
        let open = libbpf_rs::skel::SkelBuilder::open(SyscountSkelBuilder::default(), storage).unwrap();
        // Past the variables, the section holds the code's own constants:
        // the object's, hashed with it.
        let initial = &open.maps.rodata.initial_value().unwrap()[..std::mem::size_of::<rodata>()];
        let given: Vec<usize> = initial.iter().enumerate().filter(|(_, &b)| b != 0).map(|(i, _)| i).collect();
        assert!(given.is_empty(), "syscount.bpf.c gives read-only data a value (bytes {given:?} of {}): set it in SetSpec::new", initial.len());
    }
}
