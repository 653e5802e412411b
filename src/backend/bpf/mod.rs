//! The BPF tracer: syscount.bpf.c on the syscall BTF tracepoints, counting
//! in the kernel; this side loads and arms it, takes exited threads' counts
//! as they come (exits.rs) and reads the rest out (readout.rs).
//!
//! Its files import one way, bottom first: skel.rs (the generated
//! skeleton) and maps.rs (map helpers); ring.rs (ring buffers read);
//! records.rs (the kernel side's structs become sysdiet's types);
//! kernel_types.rs, tracepoint_ids.rs, features.rs, set_spec.rs,
//! premade.rs (what a load needs); keeper.rs; tables.rs (the maps as this
//! side's handles); ticks.rs (the CPU clock); fold.rs; exits.rs (the live
//! reader); readout.rs; then this file. tests/layers.rs holds them to it.

mod exits;
pub mod features;
mod fold;
pub mod keeper;
pub(crate) mod kernel_types;
mod live;
pub mod maps;
mod premade;
mod readout;
pub mod records;
pub mod ring;
pub mod set_spec;
mod skel;
mod split;
mod tables;
mod ticks;
pub mod tracepoint_ids;
mod word_counts;

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::time::Duration;

use libbpf_rs::skel::{OpenSkel, Skel};
use libbpf_rs::{MapCore, MapFlags};

use crate::backend::filter::SyscallSet;
use crate::backend::Tracer;
use crate::error::{Error, Result};
use crate::linux::syscalls::{self, ArgKind};
use crate::model::builder::TraceBuilder;
use crate::model::{Argument, Lost, TimeKind};
use exits::{ExitReader, SweepMaps};
use features::Variant;
use maps::{bpf_error, object_storage};
use readout::{Names, Paths};
pub use set_spec::{BpfOptions, RingSize, SAMPLE_FIRST_GAP, SAMPLE_INTERVAL_NS, TICK_NS};
use set_spec::{Part, SetSpec};
use skel::OBJECT;
use tables::Tables;
use ticks::{KernelTick, Ticks};

use skel::types::{target_state, task_state, tick_count};
use skel::SyscountSkel;

/// What becomes of the programs when the run ends clean.
enum Keeping {
    /// They are unloaded.
    No,
    /// They go back to the keeper they were borrowed from.
    Borrowed(keeper::Lease),
    /// They are left with a new keeper of set `set`.
    Leave { set: String, idle: Duration },
}

pub struct BpfTracer {
    tables: Tables,
    options: BpfOptions,
    /// Where the targets' states are: task storage, or a map keyed by tid.
    variant: Variant,
    /// Path strings and executables' names, kept across snapshots;
    /// samples' keys resolve here.
    names: Names,
    exits: Option<ExitReader>,
    /// pid -> fold row, as the exit reader decides it (shared with the
    /// stack collector).
    folded: Folded,
    /// The CPU-clock events that drive the tick program (none with
    /// --latency).
    ticks: Option<Ticks>,
    /// Tasks made targets by `add_target` (see `may_have_live_targets`).
    added: std::sync::atomic::AtomicU64,
    /// (program, verification time in µs), when the options asked.
    verification_us: Vec<(String, u64)>,
    /// Each loaded program, by name (the object's, or a keeper's).
    programs: Vec<(String, OwnedFd)>,
    /// The attached syscall and lifecycle hooks, by program: closed,
    /// detached.
    links: Vec<(String, OwnedFd)>,
    keeping: Keeping,
    syscall_ns: u64,
    /// Set by `stop`: whether a target was alive when counting stopped.
    live_at_stop: Option<bool>,
    /// The counting hooks' runs the kernel had skipped, less those their
    /// backups took, when the hooks were attached (`hook_runs_missed`).
    misses_at_attach: u64,
    /// The live threads' task iterator, loaded the first time live threads
    /// are read (None inside: the legacy programs', which have no task
    /// storage, or one that could not load).
    live: Option<Option<live::LiveIterator>>,
    /// The clocks and the hooks no keeper takes, being closed since
    /// `stop`, beside the read-out.
    detaching: Option<std::thread::JoinHandle<()>>,
}

/// The programs loaded and verified, not yet attached: no task's syscalls
/// are slowed until `attach`.
pub struct LoadedTracer {
    tables: Tables,
    options: BpfOptions,
    variant: Variant,
    verification_us: Vec<(String, u64)>,
    folded: Folded,
    programs: Vec<(String, OwnedFd)>,
    /// Hooks already attached, by program: those a keeper lent, or the
    /// lifecycle hooks attached while sys_exit loaded (split.rs).
    links: Vec<(String, OwnedFd)>,
    keeping: Keeping,
    /// An untraced syscall's cost on this host, as measured before any
    /// hook of this set was attached (kept with the set).
    syscall_ns: u64,
}

/// pid -> the row a folded process's counts went to, shared with the
/// readers.
type Folded = std::sync::Arc<std::sync::Mutex<std::collections::HashMap<u32, u32>>>;

impl BpfTracer {
    /// Which variant of the programs this kernel runs.
    pub fn variant(&self) -> Variant {
        self.variant
    }
}

impl LoadedTracer {
    /// Attaches the programs. Nothing is counted until a target is added.
    pub fn attach(self) -> Result<BpfTracer> {
        BpfTracer::attach(self)
    }

    /// The ring stack samples will arrive in, for a reader to map before
    /// the programs attach.
    pub fn samples_ring(&self) -> Result<libbpf_rs::MapHandle> {
        libbpf_rs::MapHandle::try_from(&self.tables.samples).map_err(bpf_error)
    }

    /// What an untraced syscall cost when a keeper's programs were
    /// loaded; None for programs loaded by this run.
    pub fn kept_syscall_ns(&self) -> Option<u64> {
        matches!(self.keeping, Keeping::Borrowed(_)).then_some(self.syscall_ns)
    }

    /// What an untraced syscall costs, measured before any hook: kept with
    /// the programs.
    pub fn set_syscall_ns(&mut self, ns: u64) {
        self.syscall_ns = ns;
    }

    /// The processes folded into their program's row, as the attached
    /// tracer will keep them (BpfTracer::folded).
    pub fn folded(&self) -> Folded {
        std::sync::Arc::clone(&self.folded)
    }
}

impl BpfTracer {
    /// Loads and attaches the programs. Nothing is counted until a target
    /// is added.
    pub fn load(filter: &SyscallSet, options: BpfOptions) -> Result<BpfTracer> {
        Self::load_unattached(filter, options)?.attach()
    }

    /// Loads the programs without attaching them.
    pub fn load_unattached(filter: &SyscallSet, options: BpfOptions) -> Result<LoadedTracer> {
        Self::load_unattached_then(filter, options, || {})
    }

    /// Loads the programs without attaching them, calling `fresh` once
    /// before it loads programs of its own (no keeper lent a set): what
    /// only programs loaded now need can start then, beside the verifier.
    /// The variant the kernel's features call for; if the kernel refuses
    /// the current or bounded one all the same (a distribution kernel with
    /// some of the features backported, say), the legacy one.
    pub fn load_unattached_then(filter: &SyscallSet, options: BpfOptions, fresh: impl FnOnce()) -> Result<LoadedTracer> {
        // It names the files kept for this kernel: the probe's answer, the cut types.
        let kernel = kernel_types::kernel_build_id();
        let probing = crate::timings::span("probe the kernel's features");
        let variant = match Variant::for_this_kernel(kernel.as_deref())? {
            v if v.task_storage() && options.arms_running_threads && !crate::target::thread_pidfds() => Variant::Legacy,
            v => v,
        };
        drop(probing);
        let mut fresh = Some(fresh);
        let mut fresh_once = || {
            if let Some(f) = fresh.take() {
                f()
            }
        };
        let kernel = kernel.as_deref();
        match Self::load_variant(filter, options, variant, kernel, &mut fresh_once) {
            Err(Error::Bpf(first)) if variant != Variant::Legacy => {
                Self::load_variant(filter, options, Variant::Legacy, kernel, &mut fresh_once).map_err(|_| Error::Bpf(first))
            }
            loaded => loaded,
        }
    }

    fn load_variant(
        filter: &SyscallSet,
        options: BpfOptions,
        variant: Variant,
        kernel: Option<&str>,
        fresh: &mut dyn FnMut(),
    ) -> Result<LoadedTracer> {
        maps::require_btf()?;
        let keep = match options.keep_loaded.then(keeper::idle).flatten() {
            Some(idle) if !options.verifier_stats => Some(idle),
            _ => None,
        };
        let spec = SetSpec::new(filter, &options, variant);
        // A kept set is found by its spec, and borrowed without a load:
        // its kernel types are cut only if it is not.
        let mut keeping = Keeping::No;
        if let Some(idle) = keep {
            let set = spec.name();
            if let Some(borrowed) = keeper::borrow(&set) {
                if let Ok(loaded) = Self::load_borrowed(&spec, borrowed, options) {
                    return Ok(loaded);
                }
                // Not this run's set after all: it loads its own, kept by none.
            } else {
                keeping = Keeping::Leave { set, idle };
            }
        }
        let (skel, others) = kernel_types::loaded_on(kernel, OBJECT, maps::OBJECT_HASH, |types| {
            // With the CO-RE types cut, the tracepoints' ids are all libbpf
            // would parse the kernel's whole BTF for.
            if types.is_some() {
                tracepoint_ids::install();
            }
            fresh();
            match Self::load_fresh(&spec, types, &options, variant) {
                // Kept tracepoint ids the kernel refused, and its BTF says
                // otherwise: once more with its own.
                Err(_) if tracepoint_ids::look_again() => Self::load_fresh(&spec, types, &options, variant),
                loaded => loaded,
            }
        })?;
        let verification_us = if options.verifier_stats { verifier_log::times() } else { Vec::new() };
        let (others, links) = match others {
            Some(split::Loaded { skel, links }) => (Some(skel), links),
            None => (None, Vec::new()),
        };
        let programs = std::iter::once(&skel)
            .chain(&others)
            .flat_map(|s| s.object().progs())
            .filter(|p| p.autoload())
            .map(|p| Ok((p.name().to_string_lossy().into_owned(), p.as_fd().try_clone_to_owned().map_err(|e| Error::Bpf(e.to_string()))?)))
            .collect::<Result<_>>()?;
        let tables = Tables::take(skel.object().maps().map(raw_map))?;
        Ok(LoadedTracer { tables, options, variant, verification_us, folded: Folded::default(), programs, links, keeping, syscall_ns: 0 })
    }

    /// Takes a keeper's maps as this run's: no load (nothing to verify,
    /// the maps are the keeper's), and no object opened unless the
    /// descriptors cannot be had by the maps' ids (CAP_SYS_ADMIN).
    fn load_borrowed(spec: &SetSpec, borrowed: keeper::Borrowed, options: BpfOptions) -> Result<LoadedTracer> {
        let _t = crate::timings::span("take the borrowed maps");
        let tables = match Tables::lent(&borrowed.maps) {
            Ok(tables) => tables,
            Err(_) => {
                let mut open = spec.open(object_storage()?, None, Part::All)?;
                for mut map in open.open_object_mut().maps_mut() {
                    if !map.autocreate() {
                        continue;
                    }
                    let name = map.name().to_string_lossy().into_owned();
                    let (_, fd) =
                        borrowed.maps.iter().find(|(n, _)| *n == name).ok_or_else(|| Error::Bpf(format!("the keeper lent no map {name}")))?;
                    map.reuse_fd(fd.as_fd()).map_err(bpf_error)?;
                }
                Tables::take(open.open_object().maps().map(raw_map))?
            }
        };
        let variant = spec.variant;
        let keeper::Borrowed { programs, links, lease, syscall_ns, .. } = borrowed;
        Ok(LoadedTracer {
            tables,
            options,
            variant,
            verification_us: Vec::new(),
            folded: Folded::default(),
            programs,
            links,
            keeping: Keeping::Borrowed(lease),
            syscall_ns,
        })
    }

    /// Opens the object and loads its programs: the kernel verifies them.
    /// sys_exit is verified on this thread and the other programs beside
    /// it, from a second copy of the object given the first's maps
    /// (split.rs); that copy is returned with the first, and the hooks
    /// its thread attached. With the
    /// verifier's statistics asked for, one copy, so that its log is one
    /// program's at a time.
    fn load_fresh(
        spec: &SetSpec,
        types: Option<&std::path::Path>,
        options: &BpfOptions,
        variant: Variant,
    ) -> Result<(SyscountSkel<'static>, Option<split::Loaded>)> {
        let beside = !options.verifier_stats;
        let early = premade::Early::start(spec.first_sightings);
        // Opened on its own thread while this one opens the first copy.
        let others = beside.then(|| split::Others::open(spec, types)).transpose()?;
        let mut open = spec.open(object_storage()?, types, if beside { Part::SysExit } else { Part::All })?;
        let m = &open.maps;
        let premade = premade::Premade::start(
            early,
            &[&m.arg_stats, &m.first_calls, &m.first_tags, &m.exits, &m.strings, &m.samples],
            // The global data's zeros (.bss, 300 KB) too: libbpf would make
            // it here and then write every byte of its first contents.
            &[&m.io_hists, &m.once_summary, &m.errno_stats, &m.syscall_spill, &m.exit_scratch, &m.path_scratch, &m.exec_scratch, &m.lost, &m.bss],
        );
        let print_before = options.verifier_stats.then(verifier_log::capture);
        if options.verifier_stats {
            for mut prog in open.open_object_mut().progs_mut() {
                prog.set_log_level(if options.verifier_log { 4 | 2 } else { 4 });
            }
        }
        // Without kept tracepoint ids, libbpf parses the kernel's BTF now,
        // not at load, so that the maps are made meanwhile.
        if !tracepoint_ids::installed() {
            let sys_exit = match variant {
                Variant::Current => &mut open.progs.sys_exit,
                Variant::Bounded => &mut open.progs.sys_exit_bounded,
                Variant::Legacy => &mut open.progs.sys_exit_legacy,
            };
            let _btf = crate::timings::span("parse kernel BTF");
            sys_exit.set_attach_target(0, Some("sys_exit".into())).map_err(bpf_error)?;
        }
        let waiting = crate::timings::span("wait for the maps");
        premade.hand_over(open.open_object_mut().maps_mut());
        drop(waiting);
        let loading = others.map(|o| o.load_beside(&mut open)).transpose()?;
        let verifying = crate::timings::span("load and verify");
        let loaded = open.load().map_err(bpf_error);
        drop(verifying);
        let others = loading.map(|l| crate::timings::timed("wait for the other programs", || l.wait())).transpose();
        if let Some(before) = print_before {
            libbpf_rs::set_print(before);
        }
        Ok((loaded?, others?))
    }

    /// Attaches the loaded programs and starts taking exited threads' counts.
    fn attach(loaded: LoadedTracer) -> Result<BpfTracer> {
        let LoadedTracer { tables, options, variant, verification_us, folded, programs, links: lent, keeping, syscall_ns } = loaded;
        // The reader maps its rings on its own thread while the programs
        // attach; what they send meanwhile waits in the rings.
        let handle = |m| libbpf_rs::MapHandle::try_from(m).map_err(bpf_error);
        let exits = ExitReader::spawn(
            vec![handle(&tables.exits)?, handle(&tables.strings)?],
            SweepMaps {
                args: handle(&tables.arg_stats)?,
                hists: handle(&tables.io_hists)?,
                first_calls: handle(&tables.first_calls)?,
                errnos: handle(&tables.errno_stats)?,
                spill: handle(&tables.syscall_spill)?,
            },
            std::sync::Arc::clone(&folded),
            // A host watched for hours: ended programs' keys are bounded.
            if options.system_wide { fold::KeyBudget::host() } else { fold::KeyBudget::UNBOUNDED },
        )?;
        let attached = (|| {
            let t = crate::timings::span("attach programs");
            let links = attach_hooks(&programs, lent)?;
            drop(t);
            let _t = crate::timings::span("attach CPU-time ticks");
            let program = |wanted: &str| programs.iter().find(|(name, _)| name == wanted).map(|(_, fd)| fd.as_fd());
            let on_tick = program(&variant.program("on_tick"));
            let kernel = program(ticks::KERNEL_TICK).zip(program(ticks::FIND_TICK_FN)).map(|(tick, find)| KernelTick { tick, find });
            match on_tick {
                Some(on_tick) if !options.latency => Ok((links, Some(Ticks::attach(on_tick, kernel, &tables.data_ticks, options.system_wide)?))),
                _ => Ok((links, None)),
            }
        })();
        let (links, ticks) = match attached {
            Ok(attached) => attached,
            Err(e) => {
                exits.abandon();
                return Err(e);
            }
        };
        let misses_at_attach = skipped_runs(&programs, &tables).saturating_sub(backup_runs(&tables));
        Ok(BpfTracer {
            tables,
            options,
            variant,
            names: Names { paths: if options.system_wide { Paths::forgetting() } else { Default::default() }, executables: Default::default() },
            exits: Some(exits),
            folded,
            ticks,
            added: Default::default(),
            verification_us,
            programs,
            links,
            keeping,
            syscall_ns,
            live_at_stop: None,
            misses_at_attach,
            live: None,
            detaching: None,
        })
    }

    /// After a run read out to its end (`read_into`): detaches the
    /// programs and, when no target can be alive, gives them to a keeper
    /// for the next run (keeper.rs); else they are unloaded.
    pub fn keep_loaded(mut self) {
        let clean = !self.may_have_live_targets();
        if let Some(detaching) = self.detaching.take() {
            let _ = detaching.join();
        }
        self.ticks = None;
        let links = std::mem::take(&mut self.links);
        match std::mem::replace(&mut self.keeping, Keeping::No) {
            Keeping::Borrowed(lease) if clean => lease.give_back(&links),
            Keeping::Leave { set, idle } if clean => {
                let maps: Vec<_> = self.tables.all.iter().map(|(n, fd)| (n.clone(), fd.as_fd())).collect();
                let programs: Vec<_> = self.programs.iter().map(|(n, fd)| (n.clone(), fd.as_fd())).collect();
                let links: Vec<_> = links.iter().map(|(n, fd)| (n.clone(), fd.as_fd())).collect();
                keeper::leave(&set, idle, self.syscall_ns, &maps, &programs, &links);
            }
            _ => {}
        }
        detach(links);
    }

    /// The processes folded into their program's row so far (pid -> row),
    /// kept up to date while the target runs.
    pub fn folded(&self) -> Folded {
        std::sync::Arc::clone(&self.folded)
    }

    /// What the syscalls' times will measure.
    pub fn time_kind(&self) -> TimeKind {
        self.ticks.as_ref().map_or(TimeKind::Wall, Ticks::time_kind)
    }

    /// The ring buffer stack samples arrive in, as a handle another thread
    /// can own.
    pub fn samples_ring(&self) -> Result<libbpf_rs::MapHandle> {
        libbpf_rs::MapHandle::try_from(&self.tables.samples).map_err(bpf_error)
    }

    /// The argument a sample's key stands for (after `read_into`); None for
    /// syscalls without one.
    pub fn argument_for(&self, nr: u32, fd: i64, path_hash: u64) -> Option<Argument> {
        match syscalls::by_nr(nr)?.arg {
            ArgKind::None | ArgKind::SigMask => None,
            _ => Some(readout::argument_of(nr, fd, path_hash, &self.names.paths)),
        }
    }

    /// Counts thread `tid` and the tasks it creates from now on; `held`
    /// means it is spawned and not yet exec'd: counting starts at its execve.
    /// The count lives in the thread's task storage, set through a pidfd
    /// (the programs move it into the thread's slot at its next syscall).
    pub fn add_target(&self, tid: u32, held: bool, tgid: u32, ppid: u32, comm: &str) -> Result<()> {
        let mut state = vec![0u8; std::mem::size_of::<task_state>()];
        let put = |b: &mut [u8], at: usize, v: &[u8]| b[at..at + v.len()].copy_from_slice(v);
        put(
            &mut state,
            std::mem::offset_of!(task_state, state),
            &(if held { target_state::TARGET_PENDING_EXEC } else { target_state::TARGET_ACTIVE }).0.to_ne_bytes(),
        );
        put(&mut state, std::mem::offset_of!(task_state, tgid), &tgid.to_ne_bytes());
        put(&mut state, std::mem::offset_of!(task_state, ppid), &ppid.to_ne_bytes());
        let name: Vec<u8> = comm.bytes().take(15).collect();
        put(&mut state, std::mem::offset_of!(task_state, comm), &name);
        // A call ending as the state arrives is sys_exit's to count or not:
        // the backup takes this mark off instead of counting it.
        state[std::mem::offset_of!(task_state, exit_hooked)] = 1;
        match self.variant {
            Variant::Current | Variant::Bounded => {
                let pidfd = crate::target::pidfd(tid).ok_or(Error::NoSuchProcess(tid))?;
                let states = self.tables.states.as_ref().ok_or_else(|| Error::Bpf("the set has no map states".into()))?;
                // Counted before it is there: the programs look in task
                // storage only while the count is not zero.
                let stored = self.tables.stored_states();
                stored.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                if let Err(e) = states.update(&pidfd.as_raw_fd().to_ne_bytes(), &state, MapFlags::ANY) {
                    stored.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                    return Err(bpf_error(e));
                }
            }
            Variant::Legacy => {
                let no_map = |name: &str| Error::Bpf(format!("the set has no map {name}"));
                let (states, ticks) = (&self.tables.thread_states, &self.tables.thread_ticks);
                states.as_ref().ok_or_else(|| no_map("thread_states"))?.update(&tid.to_ne_bytes(), &state, MapFlags::ANY).map_err(bpf_error)?;
                ticks
                    .as_ref()
                    .ok_or_else(|| no_map("thread_ticks"))?
                    .update(&tid.to_ne_bytes(), &[0; std::mem::size_of::<tick_count>()], MapFlags::ANY)
                    .map_err(bpf_error)?;
            }
        }
        self.added.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    /// Whether a target's task may still be alive: false only when every
    /// one added or forked has ended. The ended count is read first: a
    /// task that ended had counted its children at their fork, so none
    /// alive is missed (a count off the other way only costs a look).
    fn may_have_live_targets(&self) -> bool {
        use std::sync::atomic::{fence, Ordering};
        let bss = self.tables.bss();
        // SAFETY: fields of the mmapped .bss, which the programs update
        // atomically; read whole, once each.
        let ended = unsafe { std::ptr::read_volatile(&bss.targets_ended) };
        fence(Ordering::Acquire);
        let forked = unsafe { std::ptr::read_volatile(&bss.targets_forked) };
        self.added.load(Ordering::Relaxed) + forked > ended
    }

    /// Stops counting and reads everything counted into `out`; returns
    /// what was lost.
    pub fn read_into(&mut self, out: &mut TraceBuilder) -> Result<Lost> {
        let live_at_stop = self.stop();
        let _t = crate::timings::span("read out the counts");
        // Records read before the live threads are looked at always count;
        // later ones are of threads that ended while we read, skipped if
        // their storage was read (the same, frozen counts). With none alive
        // (a command that has ended), nothing is read, so nothing is skipped.
        let exits = self.exits.take();
        if let Some(e) = &exits {
            let _t = crate::timings::span("wait for the exit reader");
            e.started()?;
        }
        let mut live = Vec::new();
        if live_at_stop {
            if let Some(e) = &exits {
                e.checkpoint();
            }
            self.load_live_iterator();
            live = readout::live_threads(&self.tables, self.variant, self.live_iterator());
        }
        // The reader's last pass runs on its thread while the logged
        // entries are copied here.
        let finishing = exits.map(ExitReader::finish_beside);
        let copy = self.programs.iter().find(|(name, _)| name == readout::COPY_LOGGED).map(|(_, fd)| fd.as_fd());
        let logged = readout::logged_entries(&self.tables, copy)?;
        let collected = finishing.map(exits::Finishing::collected).unwrap_or_default();
        collected.whole()?;
        let tick_ns = self.tick_ns();
        let mut lost = readout::file_into(&self.tables, &mut self.names, tick_ns, out, collected, live, logged)?;
        lost.hook_runs_missed = self.hook_runs_missed();
        Ok(lost)
    }

    /// Syscall ends (and forks, execs, exits) since the hooks were
    /// attached that the kernel ran no hook for, and no backup took
    /// either: on any task of the host.
    fn hook_runs_missed(&self) -> u64 {
        skipped_runs(&self.programs, &self.tables).saturating_sub(backup_runs(&self.tables)).saturating_sub(self.misses_at_attach)
    }

    /// Freezes the counts and the sampling, and lets programs already
    /// running finish: what a live thread's storage holds, and what the
    /// rings hold, is then all there will be. Returns whether a target was
    /// alive then. With none (a command that has ended) there is no running
    /// program to wait for; when the counts say none can be, /proc is not
    /// even looked through. Once: later calls say what the first found.
    pub fn stop(&mut self) -> bool {
        if let Some(live) = self.live_at_stop {
            return live;
        }
        let _t = crate::timings::span("stop counting");
        self.tables.bss_mut().stopped = 1;
        let live = self.may_have_live_targets() && {
            self.load_live_iterator();
            readout::live_states(&self.tables, self.variant, self.live_iterator()).next().is_some()
        };
        if live {
            std::thread::sleep(Duration::from_millis(2));
        }
        self.live_at_stop = Some(live);
        self.detach_unkept();
        live
    }

    /// Closes the clocks, and the hooks when no keeper will take them, on
    /// a thread of their own: each detach patches kernel text on every CPU
    /// (a millisecond or more), which the read-out need not wait for.
    fn detach_unkept(&mut self) {
        let links = match self.keeping {
            Keeping::No => std::mem::take(&mut self.links),
            _ => Vec::new(),
        };
        let ticks = self.ticks.take();
        if links.is_empty() && ticks.is_none() {
            return;
        }
        // Not spawned: dropped here, on this thread, as before.
        let closing = move || {
            crate::timings::timed("detach the hooks", || {
                drop(ticks);
                detach(links);
            })
        };
        self.detaching = std::thread::Builder::new().name("sysdiet-detach".into()).spawn(closing).ok();
    }

    /// Loads the live threads' task iterator the first time live threads
    /// are read, where task storage holds their states; where it cannot
    /// load, /proc is walked instead.
    fn load_live_iterator(&mut self) {
        if self.live.is_none() {
            self.live = Some(match (self.variant, &self.tables.states, &self.tables.state_slots) {
                (v, Some(states), Some(slots)) if v.task_storage() => live::LiveIterator::load(states, slots).ok(),
                _ => None,
            });
        }
    }

    /// The live threads' task iterator, once loaded.
    fn live_iterator(&self) -> Option<&live::LiveIterator> {
        self.live.as_ref().and_then(Option::as_ref)
    }

    /// What a CPU-time tick stands for; 0 when calls are timed instead.
    fn tick_ns(&self) -> u64 {
        if self.options.latency {
            0
        } else {
            TICK_NS
        }
    }

    /// Each loaded program's name, run time and runs, as the kernel counts
    /// them while `kernel.bpf_stats_enabled` is on (zero otherwise).
    pub fn run_stats(&self) -> Vec<(String, u64, u64)> {
        self.program_infos().into_iter().map(|(name, info)| (name, info.run_time_ns, info.run_cnt)).collect()
    }

    /// Each loaded program's name and the instructions the kernel's
    /// verifier went through to accept it: what loading costs every run.
    pub fn verified(&self) -> Vec<(String, u32)> {
        self.program_infos().into_iter().map(|(name, info)| (name, info.verified_insns)).collect()
    }

    /// libbpf's messages while the programs loaded, when `verifier_stats`
    /// asked: each program's load log (every instruction with
    /// `verifier_log`).
    pub fn verifier_log() -> String {
        verifier_log::text()
    }

    /// Each program's verification time in µs, as the verifier said it,
    /// when `verifier_stats` asked (else empty).
    pub fn verification_us(&self) -> &[(String, u64)] {
        &self.verification_us
    }

    fn program_infos(&self) -> Vec<(String, libbpf_sys::bpf_prog_info)> {
        program_infos(&self.programs)
    }

    /// Reads everything counted so far into `out`, as running totals, and
    /// counts on.
    /// What was filed is copied before the live threads are read, so a
    /// thread is in one or the other, or (ending in between) in neither
    /// until the next look.
    pub fn snapshot_into(&mut self, out: &mut TraceBuilder) -> Result<Lost> {
        self.load_live_iterator();
        if let Some(e) = &self.exits {
            e.started()?;
        }
        let _no_sweep = self.exits.as_ref().map(|e| e.hold_sweeps());
        let collected = self.exits.as_ref().map(|e| e.snapshot()).unwrap_or_default();
        collected.whole()?;
        let live = readout::live_threads(&self.tables, self.variant, self.live_iterator());
        let tick_ns = self.tick_ns();
        // Counting on: keys are being logged, so the table is walked.
        let mut lost = readout::file_into(&self.tables, &mut self.names, tick_ns, out, collected, live, None)?;
        lost.hook_runs_missed = self.hook_runs_missed();
        self.names.paths.forget_unused(3);
        Ok(lost)
    }
}

/// The backend's name, as `--backend` and a run document say it.
pub const NAME: &str = "bpf";

impl Drop for BpfTracer {
    /// An error's way out, too: the backups detach first.
    fn drop(&mut self) {
        detach(std::mem::take(&mut self.links));
    }
}

impl Tracer for BpfTracer {
    fn backend(&self) -> &str {
        NAME
    }

    fn programs(&self) -> Option<&'static str> {
        Some(self.variant.name())
    }

    fn programs_kept(&self) -> bool {
        matches!(self.keeping, Keeping::Borrowed(_))
    }

    fn time_kind(&self) -> TimeKind {
        BpfTracer::time_kind(self)
    }

    fn sample_rate(&self) -> (u32, u64) {
        (SAMPLE_FIRST_GAP, SAMPLE_INTERVAL_NS)
    }

    fn stop(&mut self) {
        BpfTracer::stop(self);
    }

    fn read_into(&mut self, out: &mut TraceBuilder) -> Result<Lost> {
        BpfTracer::read_into(self, out)
    }

    fn argument_of_sample(&self, nr: u32, fd: i64, key: u64) -> Option<Argument> {
        self.argument_for(nr, fd, key)
    }
}

/// Each program's name and what the kernel says of it.
fn program_infos(programs: &[(String, OwnedFd)]) -> Vec<(String, libbpf_sys::bpf_prog_info)> {
    programs
        .iter()
        .filter_map(|(name, fd)| {
            let mut info = libbpf_sys::bpf_prog_info::default();
            let mut len = std::mem::size_of::<libbpf_sys::bpf_prog_info>() as u32;
            // SAFETY: info is a bpf_prog_info of `len` bytes.
            let ret = unsafe { libbpf_sys::bpf_prog_get_info_by_fd(fd.as_raw_fd(), &mut info, &mut len) };
            (ret == 0).then(|| (name.clone(), info))
        })
        .collect()
}

/// The syscall ends sys_exit_backup counted so far.
fn backup_runs(tables: &Tables) -> u64 {
    // SAFETY: a field of the mapped .bss, which the programs add to.
    unsafe { std::ptr::read_volatile(&tables.bss().backup_runs) }
}

/// The counting hooks' runs skipped so far: by the kernel
/// (`hooks_skipped`), or by SYSDIET_TEST_SKIP as the kernel would.
fn skipped_runs(programs: &[(String, OwnedFd)], tables: &Tables) -> u64 {
    // SAFETY: as backup_runs.
    hooks_skipped(programs) + unsafe { std::ptr::read_volatile(&tables.bss().test_skips) }
}

/// Whether program `name` takes over the runs the kernel skipped of the
/// hook it is attached after (syscount.bpf.c's `*_backup` programs, of
/// sys_exit and the fork, exec and exit hooks), where hooks can be
/// preempted.
pub(crate) fn is_backup(name: &str) -> bool {
    name.ends_with("_backup")
}

/// Detaches hooks `links` (by program), the backups first: a backup left
/// attached alone would take every call for one its hook skipped.
pub(crate) fn detach(mut links: Vec<(String, OwnedFd)>) {
    links.sort_by_key(|(name, _)| !is_backup(name));
    drop(links);
}

/// The runs of the hooks that count the kernel skipped so far, because a
/// run of the same hook was under way on that CPU (a hook can be preempted
/// under full or lazy preemption, 7.x's default; 5.12 and newer count
/// them, 0 before): sys_exit's, each a call; and the lifecycle hooks', each
/// a thread's counts (its exit), or a new task's or program's (its fork,
/// its exec).
fn hooks_skipped(programs: &[(String, OwnedFd)]) -> u64 {
    let counts = |name: &str| name.starts_with("sys_exit") || name.starts_with("sched_process_");
    program_infos(programs).iter().filter(|(name, _)| counts(name) && !is_backup(name)).map(|(_, info)| info.recursion_misses).sum()
}

/// Attaches each program but the CPU time's (ticks.rs) to the tracepoint it was
/// loaded for, but those `lent` attached already; each returned
/// descriptor holds one attached.
fn attach_hooks(programs: &[(String, OwnedFd)], mut lent: Vec<(String, OwnedFd)>) -> Result<Vec<(String, OwnedFd)>> {
    // A tracepoint runs its hooks in the order attached: a backup after
    // the hook whose skipped runs it takes over.
    let mut ordered: Vec<_> = programs.iter().collect();
    ordered.sort_by_key(|(name, _)| is_backup(name));
    ordered
        .into_iter()
        .filter(|(name, _)| !ticks::attaches(name) && name != readout::COPY_LOGGED)
        .map(|(name, fd)| {
            if let Some(at) = lent.iter().position(|(n, _)| n == name) {
                return Ok(lent.swap_remove(at));
            }
            Ok((name.clone(), attach_tracepoint(fd.as_fd())?))
        })
        .collect()
}

/// Attaches a tp_btf program to the tracepoint it names itself (its BTF
/// id); the link's descriptor.
pub(super) fn attach_tracepoint(program: std::os::fd::BorrowedFd<'_>) -> Result<OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: no name; the program's descriptor is live.
    let link = unsafe { libbpf_sys::bpf_raw_tracepoint_open(std::ptr::null(), program.as_raw_fd()) };
    if link < 0 {
        return Err(bpf_error(libbpf_rs::Error::from_raw_os_error(-link)));
    }
    // SAFETY: a new descriptor of ours.
    Ok(unsafe { OwnedFd::from_raw_fd(link) })
}

/// A map of an object, as libbpf's own struct.
fn raw_map<'a, M: libbpf_rs::AsRawLibbpf<LibbpfType = libbpf_sys::bpf_map>>(m: M) -> &'a libbpf_sys::bpf_map {
    // SAFETY: the object outlives the handles made from its maps (Tables
    // duplicates their descriptors at once).
    unsafe { m.as_libbpf_object().as_ref() }
}

/// The verifier's statistics of each program (log level 4), read from
/// libbpf's debug output while the object loads.
mod verifier_log {
    use std::sync::Mutex;

    static LOG: Mutex<String> = Mutex::new(String::new());

    fn keep(_: libbpf_rs::PrintLevel, text: String) {
        if let Ok(mut log) = LOG.lock() {
            log.push_str(&text);
        }
    }

    /// libbpf's messages go to the log from now on; returns where they
    /// went before, to be given back to `libbpf_rs::set_print`.
    pub fn capture() -> Option<(libbpf_rs::PrintLevel, libbpf_rs::PrintCallback)> {
        if let Ok(mut log) = LOG.lock() {
            log.clear();
        }
        libbpf_rs::set_print(Some((libbpf_rs::PrintLevel::Debug, keep)))
    }

    /// libbpf's messages since `capture`, the programs' load logs among them.
    pub fn text() -> String {
        LOG.lock().map(|log| log.clone()).unwrap_or_default()
    }

    /// (program, verification time in µs) for each program's load log.
    pub fn times() -> Vec<(String, u64)> {
        LOG.lock().map(|log| parse(&log)).unwrap_or_default()
    }

    fn parse(log: &str) -> Vec<(String, u64)> {
        let mut out = Vec::new();
        let mut prog = None;
        for line in log.lines() {
            if let Some(rest) = line.strip_prefix("libbpf: prog '") {
                if line.ends_with("-- BEGIN PROG LOAD LOG --") {
                    prog = rest.split('\'').next().map(str::to_string);
                }
            } else if let (Some(us), Some(name)) = (line.strip_prefix("verification time ").and_then(|r| r.strip_suffix(" usec")), &prog) {
                if let Ok(us) = us.parse() {
                    out.push((name.clone(), us));
                }
            }
        }
        out
    }

    #[cfg(test)]
    mod tests {
        #[test]
        fn reads_each_programs_time() {
            let log = "libbpf: prog 'sys_exit': -- BEGIN PROG LOAD LOG --\nverification time 6539 usec\nprocessed 6305 insns\n-- END PROG LOAD LOG --\nlibbpf: prog 'on_tick': -- BEGIN PROG LOAD LOG --\nverification time 75 usec\n";
            assert_eq!(super::parse(log), [("sys_exit".to_string(), 6539), ("on_tick".to_string(), 75)]);
        }
    }
}
