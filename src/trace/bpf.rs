//! The BPF tracer: syscount.bpf.c on the syscall BTF tracepoints, counting
//! in the kernel; this side arms it and reads the maps out at the end.

use std::mem::MaybeUninit;
use std::os::fd::AsRawFd;
use std::path::Path;

use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags};

use super::filter::{SyscallSet, MAX_SYSCALLS};
use super::syscalls::{self, ArgKind};
use crate::error::{Error, Result};
use crate::model::builder::{TaskRecord, TraceBuilder};
use crate::model::{Argument, ArgumentStats, Exit, Histogram, Lost, MaskChange, SyscallStats, Timeout};

pub(crate) mod skel {
    include!(concat!(env!("OUT_DIR"), "/syscount.skel.rs"));
}
use skel::types::{arg_key, arg_val, errno_key, sys_key, sys_val, syscall_spec, task_info, task_state};
use skel::{SyscountSkel, SyscountSkelBuilder};

/// Where the kernel publishes its BTF; `SYSDIET_KERNEL_BTF` overrides it so
/// that the no-BTF error can be tested on a kernel that has BTF.
/// What loading a skeleton needs first: the kernel's BTF (else a clear
/// error), libbpf quiet unless SYSDIET_DEBUG, and the storage of the object.
/// The skeleton borrows that object for as long as it lives, the whole run:
/// one small leak per load.
pub(super) fn object_storage() -> Result<&'static mut MaybeUninit<libbpf_rs::OpenObject>> {
    let btf = kernel_btf_path();
    if !Path::new(&btf).exists() {
        return Err(Error::NoBtf(btf));
    }
    if std::env::var_os("SYSDIET_DEBUG").is_none() {
        libbpf_rs::set_print(None);
    }
    Ok(Box::leak(Box::new(MaybeUninit::uninit())))
}

fn kernel_btf_path() -> std::path::PathBuf {
    std::env::var_os("SYSDIET_KERNEL_BTF")
        .map(Into::into)
        .unwrap_or_else(|| "/sys/kernel/btf/vmlinux".into())
}

const ARG_NONE: u8 = 0;
const ARG_PATH: u8 = 1;
const ARG_FD: u8 = 2;
const ARG_FD_IO: u8 = 3;
const ARG_CLOCK: u8 = 4;
const ARG_TIMEOUT_MS: u8 = 5;
const ARG_TIMEOUT_PTR: u8 = 6;
const ARG_SIGMASK: u8 = 7;
const TARGET_PENDING_EXEC: u32 = 1;
const TARGET_ACTIVE: u32 = 2;
const AT_FDCWD: i64 = -100;
const NR_RT_SIGPROCMASK: u32 = 14;
/// The path hash the kernel side gives a path it could not read.
const UNREADABLE_PATH: u64 = 1;

pub struct BpfTracer {
    skel: SyscountSkel<'static>,
    /// Path hash -> path, filled at readout; samples' keys resolve here.
    path_of: std::collections::HashMap<u64, String>,
}

/// Stack samples: each thread's calls of one syscall are all sampled up to
/// 2^(SAMPLE_SHIFT+1), then 2^SAMPLE_SHIFT per doubling of the count.
pub const SAMPLE_SHIFT: u32 = 6;

impl BpfTracer {
    /// Loads and attaches the programs. Nothing is counted until a target
    /// is added.
    pub fn load(filter: &SyscallSet, sample_stacks: bool) -> Result<BpfTracer> {
        let mut open = SyscountSkelBuilder::default().open(object_storage()?).map_err(bpf_error)?;
        let rodata = open.maps.rodata_data.as_deref_mut().expect("rodata is mmapped");
        for (nr, spec) in rodata.specs.iter_mut().enumerate().take(MAX_SYSCALLS) {
            *spec = spec_for(nr as u32, filter);
        }
        rodata.sample_stacks = sample_stacks as u8;
        rodata.sample_shift = SAMPLE_SHIFT;
        let mut skel = open.load().map_err(bpf_error)?;
        skel.attach().map_err(bpf_error)?;
        Ok(BpfTracer { skel, path_of: Default::default() })
    }

    /// The ring buffer stack samples arrive in, as a handle another thread
    /// can own.
    pub fn samples_ring(&self) -> Result<libbpf_rs::MapHandle> {
        libbpf_rs::MapHandle::try_from(&self.skel.maps.samples).map_err(bpf_error)
    }

    /// The argument a sample's key stands for (after `read_into`); None for
    /// syscalls without one.
    pub fn argument_for(&self, nr: u32, fd: i64, path_hash: u64) -> Option<Argument> {
        let key = arg_key { tgid: 0, nr, fd, path_hash };
        match syscalls::by_nr(nr)?.arg {
            ArgKind::None => None,
            _ => Some(argument_of(&key, &self.path_of)),
        }
    }

    /// Counts thread `tid` and the tasks it creates from now on; `held`
    /// means it is spawned and not yet exec'd: counting starts at its execve.
    /// The count lives in the thread's task storage, set through a pidfd.
    pub fn add_target(&self, tid: u32, held: bool) -> Result<()> {
        let state = if held { TARGET_PENDING_EXEC } else { TARGET_ACTIVE };
        let mut value = vec![0u8; std::mem::size_of::<task_state>()];
        value[..4].copy_from_slice(&state.to_ne_bytes());
        let pidfd = crate::target::pidfd(tid).ok_or(Error::NoSuchProcess(tid))?;
        self.skel
            .maps
            .states
            .update(&pidfd.as_raw_fd().to_ne_bytes(), &value, MapFlags::ANY)
            .map_err(bpf_error)
    }

    /// Records a thread that existed before tracing began (attach).
    pub fn add_task(&self, tid: u32, tgid: u32, ppid: u32, comm: &str) -> Result<()> {
        let mut info = task_info { tgid, ppid, exit_code: 0, exited: 0, comm: [0; 16] };
        for (d, s) in info.comm.iter_mut().zip(comm.bytes().take(15)) {
            *d = s as i8;
        }
        self.skel
            .maps
            .tasks
            .update(&tid.to_ne_bytes(), bytes_of(&info), MapFlags::NO_EXIST)
            .or_else(|e| if e.kind() == libbpf_rs::ErrorKind::AlreadyExists { Ok(()) } else { Err(e) })
            .map_err(bpf_error)
    }

    /// Stops counting and reads everything counted into `out`; returns
    /// what was lost.
    pub fn read_into(&mut self, out: &mut TraceBuilder) -> Result<Lost> {
        // Freeze the counts: a thread that exits while we read flushes the
        // same numbers we read from its storage.
        if let Some(bss) = self.skel.maps.bss_data.as_deref_mut() {
            bss.stopped = 1;
        }
        let maps = &self.skel.maps;
        let mut tasks = Vec::new();
        for k in maps.tasks.keys() {
            let Some(v) = maps.tasks.lookup(&k, MapFlags::ANY).map_err(bpf_error)? else { continue };
            tasks.push((u32::from_ne_bytes(k[..4].try_into().expect("u32 key")), from_bytes::<task_info>(&v)));
        }
        // Live threads first, from their storage; then the exited ones.
        let mut read_live = std::collections::HashSet::new();
        for (tid, t) in tasks.iter().filter(|(_, t)| t.exited == 0) {
            let Some(pidfd) = crate::target::pidfd(*tid) else { continue };
            let Ok(Some(v)) = maps.states.lookup(&pidfd.as_raw_fd().to_ne_bytes(), MapFlags::ANY) else { continue };
            let state: task_state = from_bytes(&v);
            for (nr, s) in state.stats.iter().enumerate().filter(|(_, s)| s.calls > 0) {
                out.add_syscall(t.tgid, *tid, syscall_stats(nr as u32, s));
            }
            for (class, &n) in state.mask_calls.iter().enumerate().filter(|(_, n)| **n > 0) {
                out.add_argument(mask_stats(t.tgid, class as i64, n));
            }
            read_live.insert(*tid);
        }
        for k in maps.sys_stats.keys() {
            let Some(v) = maps.sys_stats.lookup(&k, MapFlags::ANY).map_err(bpf_error)? else { continue };
            let (k, v): (sys_key, sys_val) = (from_bytes(&k), from_bytes(&v));
            if !read_live.contains(&k.tid) {
                out.add_syscall(k.tgid, k.tid, syscall_stats(k.nr, &v));
            }
        }
        for k in maps.mask_stats.keys() {
            let Some(v) = maps.mask_stats.lookup(&k, MapFlags::ANY).map_err(bpf_error)? else { continue };
            let k: sys_key = from_bytes(&k);
            if !read_live.contains(&k.tid) {
                out.add_argument(mask_stats(k.tgid, k.nr as i64, from_bytes(&v)));
            }
        }
        for k in maps.errno_stats.keys() {
            let Some(per_cpu) = maps.errno_stats.lookup_percpu(&k, MapFlags::ANY).map_err(bpf_error)? else { continue };
            let k: errno_key = from_bytes(&k);
            let n: u64 = per_cpu.iter().map(|v| from_bytes::<u64>(v)).sum();
            out.add_errno(k.tgid, k.nr, &super::errno::name(k.err), n);
        }
        let path_of = &mut self.path_of;
        for k in maps.paths.keys() {
            if let Some(v) = maps.paths.lookup(&k, MapFlags::ANY).map_err(bpf_error)? {
                path_of.insert(from_bytes::<u64>(&k), c_string(&v));
            }
        }
        for k in maps.arg_stats.keys() {
            let Some(per_cpu) = maps.arg_stats.lookup_percpu(&k, MapFlags::ANY).map_err(bpf_error)? else { continue };
            let key: arg_key = from_bytes(&k);
            for v in per_cpu {
                let v: arg_val = from_bytes(&v);
                if v.calls > 0 {
                    out.add_argument(argument_stats(&key, &v, path_of));
                }
            }
        }
        for (tid, t) in tasks {
            out.add_task(
                tid,
                TaskRecord {
                    tgid: t.tgid,
                    ppid: t.ppid,
                    comm: c_string(&t.comm.map(|c| c as u8)),
                    exit: (t.exited != 0).then(|| Exit::from_wait_status(t.exit_code)),
                },
            );
        }
        self.read_lost()
    }

    fn read_lost(&self) -> Result<Lost> {
        let lost = &self.skel.maps.lost;
        let get = |i: u32| -> Result<u64> {
            Ok(lost
                .lookup_percpu(&i.to_ne_bytes(), MapFlags::ANY)
                .map_err(bpf_error)?
                .map_or(0, |cpus| cpus.iter().map(|v| from_bytes::<u64>(v)).sum()))
        };
        // Order of enum lost_counter in syscount.h.
        Ok(Lost {
            syscall_map_full: get(0)?,
            argument_map_full: get(1)?,
            errno_map_full: get(2)?,
            task_map_full: get(3)?,
            no_task_storage: get(4)?,
            path_unreadable: get(5)?,
            path_truncated: get(6)?,
            syscall_nr_out_of_range: get(7)?,
            path_map_full: get(8)?,
            samples_dropped: get(9)?,
        })
    }
}

fn spec_for(nr: u32, filter: &SyscallSet) -> syscall_spec {
    let traced = filter.contains(nr) as u8;
    let (kind, arg, size_arg) = match syscalls::by_nr(nr).map(|s| s.arg) {
        Some(ArgKind::Path(i)) => (ARG_PATH, i, 0),
        Some(ArgKind::Fd(i)) => (ARG_FD, i, 0),
        Some(ArgKind::FdIo { fd, size }) => (ARG_FD_IO, fd, size),
        Some(ArgKind::Clock(i)) => (ARG_CLOCK, i, 0),
        Some(ArgKind::TimeoutMs(i)) => (ARG_TIMEOUT_MS, i, 0),
        Some(ArgKind::TimeoutPtr(i)) => (ARG_TIMEOUT_PTR, i, 0),
        Some(ArgKind::SigMask) => (ARG_SIGMASK, 0, 0),
        Some(ArgKind::None) | None => (ARG_NONE, 0, 0),
    };
    syscall_spec { traced, kind, arg, size_arg }
}

fn syscall_stats(nr: u32, v: &sys_val) -> SyscallStats {
    SyscallStats {
        calls: v.calls,
        errors: v.errors,
        total_ns: v.total_ns,
        min_ns: v.min_ns,
        max_ns: v.max_ns,
        ..SyscallStats::new(nr)
    }
}

/// rt_sigprocmask calls of one class, counted in task storage (no time or
/// errors per class: the syscall's own stats have those).
fn mask_stats(tgid: u32, class: i64, calls: u64) -> ArgumentStats {
    let key = arg_key { tgid, nr: NR_RT_SIGPROCMASK, fd: class, path_hash: 0 };
    ArgumentStats {
        pid: tgid,
        syscall: syscalls::name(NR_RT_SIGPROCMASK),
        nr: NR_RT_SIGPROCMASK,
        argument: argument_of(&key, &Default::default()),
        calls,
        errors: 0,
        total_ns: 0,
        requested: None,
        returned: None,
        sites: Vec::new(),
    }
}

fn argument_of(key: &arg_key, path_of: &std::collections::HashMap<u64, String>) -> Argument {
    match syscalls::by_nr(key.nr).map(|s| s.arg) {
        Some(ArgKind::Path(i)) => Argument::Path {
            // None: unreadable, or its string was lost to a full table.
            path: (key.path_hash != UNREADABLE_PATH).then(|| path_of.get(&key.path_hash).cloned()).flatten(),
            dirfd: (i > 0 && key.fd != AT_FDCWD).then_some(key.fd),
        },
        Some(ArgKind::Clock(_)) => Argument::Clock { clock: key.fd },
        Some(ArgKind::TimeoutMs(_) | ArgKind::TimeoutPtr(_)) => Argument::Timeout {
            // enum timeout_class in syscount.h
            timeout: match key.fd {
                0 => Timeout::Zero,
                1 => Timeout::Finite,
                2 => Timeout::None,
                _ => Timeout::Unreadable,
            },
        },
        Some(ArgKind::SigMask) => Argument::SigMask {
            // enum mask_change in syscount.h
            change: match key.fd {
                0 => MaskChange::Query,
                1 => MaskChange::Same,
                2 => MaskChange::Block,
                3 => MaskChange::Unblock,
                4 => MaskChange::Set,
                _ => MaskChange::Undo,
            },
        },
        _ => Argument::Fd { fd: key.fd },
    }
}

fn argument_stats(key: &arg_key, v: &arg_val, path_of: &std::collections::HashMap<u64, String>) -> ArgumentStats {
    let info = syscalls::by_nr(key.nr);
    let argument = argument_of(key, path_of);
    let is_io = matches!(info.map(|s| s.arg), Some(ArgKind::FdIo { .. }));
    ArgumentStats {
        pid: key.tgid,
        syscall: syscalls::name(key.nr),
        nr: key.nr,
        argument,
        calls: v.calls,
        errors: v.errors,
        total_ns: v.total_ns,
        requested: is_io.then(|| Histogram::from_buckets(v.requested.to_vec())),
        returned: is_io.then(|| Histogram::from_buckets(v.returned.to_vec())),
        sites: Vec::new(),
    }
}

/// The kernel's map error, said for humans: EPERM means missing rights.
pub(super) fn bpf_error(e: libbpf_rs::Error) -> Error {
    if e.kind() == libbpf_rs::ErrorKind::PermissionDenied {
        return Error::NoBpfRights;
    }
    Error::Bpf(e.to_string())
}

fn c_string(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

/// Reads a map key or value. The generated types are plain C structs.
pub(super) fn from_bytes<T: Copy>(bytes: &[u8]) -> T {
    assert!(bytes.len() >= std::mem::size_of::<T>(), "map entry smaller than its type");
    // SAFETY: T is a repr(C) plain-data type generated from the BPF
    // object's BTF (or u64); any bit pattern is valid; length checked.
    unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast::<T>()) }
}

fn bytes_of<T: Copy>(v: &T) -> &[u8] {
    // SAFETY: plain-data repr(C) value, read as bytes for the map update.
    unsafe { std::slice::from_raw_parts((v as *const T).cast::<u8>(), std::mem::size_of::<T>()) }
}
