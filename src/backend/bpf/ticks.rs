//! CPU time in syscalls is sampled: one CPU-clock event per CPU runs
//! `on_tick`, which charges each tick to the traced thread it interrupts.
//! The clock is fine at first, so that a command of a few ms still gets
//! ticks. Once the run is past its start, the kernel's own tick takes over
//! where it can (`kernel_tick`, at the kernel's HZ): a busy CPU takes that
//! interrupt anyway, while each of ours interrupts its CPU, idle or not,
//! which in a VM is far dearer than the program it runs (docs/overhead.md).
//! Where it cannot (legacy kernels, low-resolution timers, a tick that is
//! no whole number of fine ones, kallsyms hidden, no tick seen), the clock
//! turns four times coarser (sixteen when the whole host is watched, for
//! hours), as the kernel's tick would be.
//! The programs weigh each tick by `tick_weight`, raised with the period.

use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use libbpf_rs::{MapCore, MapFlags, MapHandle};

use super::maps::{bpf_error, bytes_of};
use super::set_spec::TICK_NS;
use super::skel::types::data_ticks;
use crate::backend::perf::{self, PerfEventAttr, PERF_COUNT_SW_CPU_CLOCK, PERF_TYPE_SOFTWARE};
use crate::error::{Error, Result};
use crate::model::TimeKind;

/// How long the ticks stay fine.
pub const FINE_FOR: Duration = Duration::from_millis(25);
/// Fine ticks each tick stands for after FINE_FOR.
const COARSE_WEIGHT: u64 = 4;
/// ... when the whole host is watched (top, serve): every CPU ticks for
/// hours, so at the rate of the kernel's own tick on Debian (HZ 250).
const HOST_COARSE_WEIGHT: u64 = 16;

/// _IOW('$', 4, __u64): a sampling event's new period.
const PERF_EVENT_IOC_PERIOD: libc::c_ulong = 0x4008_2404;
/// _IOW('$', 8, __u32): the BPF program an event runs.
const PERF_EVENT_IOC_SET_BPF: libc::c_ulong = 0x4004_2408;
/// _IO('$', 0) and _IO('$', 1): an event counts, or does not.
const PERF_EVENT_IOC_ENABLE: libc::c_ulong = 0x2400;
const PERF_EVENT_IOC_DISABLE: libc::c_ulong = 0x2401;

/// The programs of the kernel's own tick (syscount.bpf.c): the one that
/// charges it, and the one that finds its handler.
#[derive(Clone, Copy)]
pub struct KernelTick<'a> {
    pub tick: BorrowedFd<'a>,
    pub find: BorrowedFd<'a>,
}

/// Whether program `name` is attached here, not to a tracepoint of its own
/// when the set attaches.
pub fn attaches(name: &str) -> bool {
    name.starts_with("on_tick") || name == KERNEL_TICK || name == FIND_TICK_FN
}

/// The kernel tick's programs, by name (syscount.bpf.c).
pub const KERNEL_TICK: &str = "kernel_tick";
pub const FIND_TICK_FN: &str = "find_tick_fn";

/// The attached clock events (closed, the program is detached), and the
/// thread that hands them over to the kernel's tick, or slows them down.
pub struct Ticks {
    _events: Vec<OwnedFd>,
    weight: Arc<AtomicU64>,
    /// Its thread returns the kernel tick's link, when it took over.
    pacer: Option<(mpsc::Sender<()>, JoinHandle<Option<OwnedFd>>)>,
}

impl Ticks {
    /// Attaches `on_tick` (the variant's program) to a fine clock on every
    /// CPU; after FINE_FOR, `kernel`'s tick takes over, or the clock turns
    /// coarser (coarser still for `whole_host`).
    pub fn attach(on_tick: BorrowedFd<'_>, kernel: Option<KernelTick<'_>>, data_ticks: &MapHandle, whole_host: bool) -> Result<Ticks> {
        let attr = PerfEventAttr {
            kind: PERF_TYPE_SOFTWARE,
            size: std::mem::size_of::<PerfEventAttr>() as u32,
            config: PERF_COUNT_SW_CPU_CLOCK,
            sample_period: TICK_NS,
            ..Default::default()
        };
        let mut events = Vec::new();
        for cpu in perf::online_cpus() {
            let fd = perf::open(&attr, -1, cpu).map_err(|e| match e.raw_os_error() {
                Some(libc::EACCES) | Some(libc::EPERM) => perf::refused("CPU-time ticks"),
                _ => Error::Bpf(format!("perf_event_open (CPU-time ticks, CPU {cpu}): {e}")),
            })?;
            // The event counts from its open; the ioctl works on every
            // kernel (a BPF link for this needs 5.15).
            // SAFETY: takes an int argument, the program's descriptor.
            if unsafe { libc::ioctl(fd.as_raw_fd(), PERF_EVENT_IOC_SET_BPF as _, on_tick.as_raw_fd()) } != 0 {
                return Err(bpf_error(libbpf_rs::Error::from(std::io::Error::last_os_error())));
            }
            events.push(fd);
        }
        let weight = Arc::new(AtomicU64::new(1));
        let coarse = if whole_host { HOST_COARSE_WEIGHT } else { COARSE_WEIGHT };
        let pacer = start_pacer(&events, kernel, data_ticks, &weight, coarse);
        Ok(Ticks { _events: events, weight, pacer })
    }

    /// What the ticks measured: the tick at the end, and the fine one
    /// before it when the clock was slowed.
    pub fn time_kind(&self) -> TimeKind {
        match self.weight.load(Ordering::Acquire) {
            1 => TimeKind::CpuSampled { tick_ns: TICK_NS, fine_tick_ns: 0, fine_for_ns: 0 },
            w => TimeKind::CpuSampled { tick_ns: TICK_NS * w, fine_tick_ns: TICK_NS, fine_for_ns: FINE_FOR.as_nanos() as u64 },
        }
    }
}

/// The thread that, after FINE_FOR, hands every clock over to the
/// kernel's tick or slows it; None (the clock stays fine) if it cannot
/// reach all of them and the weight.
fn start_pacer(
    events: &[OwnedFd],
    kernel: Option<KernelTick<'_>>,
    data_ticks: &MapHandle,
    weight: &Arc<AtomicU64>,
    coarse: u64,
) -> Option<(mpsc::Sender<()>, JoinHandle<Option<OwnedFd>>)> {
    let fds: Vec<OwnedFd> = events.iter().map(OwnedFd::try_clone).collect::<std::io::Result<_>>().ok()?;
    let kernel = kernel.and_then(|k| Some((k.tick.try_clone_to_owned().ok()?, k.find.try_clone_to_owned().ok()?)));
    let data = MapHandle::try_from(data_ticks).ok()?;
    let (stop, stopped) = mpsc::channel();
    let shared = Arc::clone(weight);
    let pacer = std::thread::Builder::new().name("sysdiet-ticks".into()).spawn(move || {
        if stopped.recv_timeout(FINE_FOR) != Err(mpsc::RecvTimeoutError::Timeout) {
            return None;
        }
        let link = kernel.and_then(|(tick, find)| hand_over(&fds, &tick, &find, &data, &shared, &stopped));
        if link.is_none() {
            slow_down(&fds, &data, &shared, coarse);
        }
        link
    });
    Some((stop, pacer.ok()?))
}

/// Lets the kernel's tick charge the threads instead of every CPU's
/// clock, weighed as its length in fine ticks: attaches `kernel_tick`,
/// waits until it sees one of the kernel's ticks (the handler found is the
/// tick's) while the clocks tick on, then stops them and has the kernel's
/// ticks charged. Returns the link that holds `kernel_tick` attached.
/// None, with the clocks as they were, if the kernel's tick is no hrtimer
/// (low resolution), is no whole number of fine ticks, its handler cannot
/// be found (kallsyms hidden: kptr_restrict), none is seen within five of
/// its periods (25 ms at least), the run ends first, or a step fails.
fn hand_over(fds: &[OwnedFd], tick: &OwnedFd, find: &OwnedFd, data: &MapHandle, weight: &AtomicU64, stopped: &mpsc::Receiver<()>) -> Option<OwnedFd> {
    let tick_ns = resolution_ns(libc::CLOCK_MONOTONIC_COARSE)?;
    if resolution_ns(libc::CLOCK_MONOTONIC)? >= tick_ns {
        return None;
    }
    let kernel_weight = weight_of(tick_ns)?;
    let handler = tick_handler(find)?;
    let set = |value: data_ticks| write_ticks(data, &value);
    let looking = data_ticks { tick_weight: 1, kernel_tick_fn: handler, kernel_ticks_seen: 0, kernel_tick_weight: 0 };
    let not_looking = data_ticks { kernel_tick_fn: 0, ..looking };
    if !set(looking) {
        return None;
    }
    // SAFETY: no name; a loaded tp_btf program's descriptor.
    let link = unsafe { libbpf_sys::bpf_raw_tracepoint_open(std::ptr::null(), tick.as_raw_fd()) };
    if link < 0 {
        set(not_looking);
        return None;
    }
    // SAFETY: a new descriptor of ours.
    let link = unsafe { OwnedFd::from_raw_fd(link) };
    // Seen within a few of its periods on any busy CPU (the target's,
    // sysdiet's own).
    let until = Instant::now() + Duration::from_nanos(tick_ns.saturating_mul(5)).max(FINE_FOR);
    while !kernel_ticks_seen(data) {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() || stopped.recv_timeout(left.min(Duration::from_millis(1))) != Err(mpsc::RecvTimeoutError::Timeout) {
            set(not_looking);
            return None;
        }
    }
    // Ours stop before the kernel's count: a tick in between is not
    // counted, none is counted twice.
    // SAFETY: these ioctls take no argument.
    let ioctl = |fd: &OwnedFd, request: libc::c_ulong| unsafe { libc::ioctl(fd.as_raw_fd(), request as _, 0) } == 0;
    let charging = data_ticks { tick_weight: kernel_weight, kernel_tick_weight: kernel_weight, kernel_ticks_seen: 1, ..looking };
    if fds.iter().all(|fd| ioctl(fd, PERF_EVENT_IOC_DISABLE)) && set(charging) {
        weight.store(kernel_weight, Ordering::Release);
        return Some(link);
    }
    for fd in fds {
        ioctl(fd, PERF_EVENT_IOC_ENABLE);
    }
    set(not_looking);
    None
}

/// Whether `kernel_tick` has seen one of the kernel's ticks.
fn kernel_ticks_seen(data: &MapHandle) -> bool {
    let value = data.lookup(&0u32.to_ne_bytes(), MapFlags::ANY).ok().flatten();
    value.is_some_and(|v| v.len() == std::mem::size_of::<data_ticks>() && super::maps::from_bytes::<data_ticks>(&v).kernel_ticks_seen > 0)
}

/// Writes the programs' tick globals (`.data.ticks`) whole, in one update.
fn write_ticks(data: &MapHandle, value: &data_ticks) -> bool {
    data.update(&0u32.to_ne_bytes(), bytes_of(value), MapFlags::ANY).is_ok()
}

/// How many fine ticks one of the kernel's `tick_ns` weighs; None when it
/// is not a whole number of them (HZ 300), or under one.
fn weight_of(tick_ns: u64) -> Option<u64> {
    (tick_ns >= TICK_NS && tick_ns.is_multiple_of(TICK_NS)).then_some(tick_ns / TICK_NS)
}

/// A clock's resolution in ns: the kernel's tick for a coarse clock;
/// for the others 1 ns when its hrtimers are high-resolution (and the
/// tick is one of them), else the tick.
fn resolution_ns(clock: libc::clockid_t) -> Option<u64> {
    let mut res = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: writes one timespec.
    if unsafe { libc::clock_getres(clock, &mut res) } != 0 {
        return None;
    }
    u64::try_from(res.tv_sec).ok()?.checked_mul(1_000_000_000)?.checked_add(u64::try_from(res.tv_nsec).ok()?)
}

/// The kernel's tick handler's address, from `find_tick_fn` run once.
fn tick_handler(find: &OwnedFd) -> Option<u64> {
    let mut answer = 0u64;
    // A syscall program's context is copied back into ctx_in.
    let mut opts = libbpf_sys::bpf_test_run_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_test_run_opts>() as _,
        ctx_in: (&raw mut answer).cast(),
        ctx_size_in: 8,
        ..Default::default()
    };
    // SAFETY: the context is `answer`, 8 bytes, written back.
    let err = unsafe { libbpf_sys::bpf_prog_test_run_opts(find.as_raw_fd(), &mut opts) };
    (err == 0 && opts.retval == 0 && answer != 0).then_some(answer)
}

/// Makes every CPU's clock `coarse` times slower and the program
/// weigh its ticks as much; the clocks that could not be slowed leave the
/// weight as it was (all or nothing). A tick that lands between the two
/// steps is weighed as the other period's: one tick per CPU at most, within
/// what sampling leaves uncertain anyway.
fn slow_down(fds: &[OwnedFd], data: &MapHandle, weight: &AtomicU64, coarse: u64) {
    let period = TICK_NS * coarse;
    // SAFETY: PERF_EVENT_IOC_PERIOD reads one u64 through the pointer.
    let set = |fd: &OwnedFd, period: &u64| unsafe { libc::ioctl(fd.as_raw_fd(), PERF_EVENT_IOC_PERIOD as _, period as *const u64) } == 0;
    let value = data_ticks { tick_weight: coarse, kernel_tick_fn: 0, kernel_ticks_seen: 0, kernel_tick_weight: 0 };
    let slowed = fds.iter().all(|fd| set(fd, &period)) && write_ticks(data, &value);
    if slowed {
        weight.store(coarse, Ordering::Release);
    } else {
        for fd in fds {
            set(fd, &TICK_NS);
        }
    }
}

impl Drop for Ticks {
    /// Detaches the kernel tick's program (its link closes with the
    /// thread's answer), then the clocks close.
    fn drop(&mut self) {
        if let Some((stop, pacer)) = self.pacer.take() {
            let _ = stop.send(());
            let _ = pacer.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernels_tick_weighs_whole_fine_ticks_or_is_not_taken() {
        // HZ 250 (Debian), 1000, 100; 300 ticks every 3,333,333 ns.
        assert_eq!(weight_of(4_000_000), Some(16));
        assert_eq!(weight_of(1_000_000), Some(4));
        assert_eq!(weight_of(10_000_000), Some(40));
        assert_eq!(weight_of(3_333_333), None);
        assert_eq!(weight_of(TICK_NS), Some(1));
        assert_eq!(weight_of(0), None);
    }

    #[test]
    fn the_kernel_tick_and_the_clock_are_attached_here_not_as_hooks() {
        for name in ["on_tick", "on_tick_legacy", KERNEL_TICK, FIND_TICK_FN] {
            assert!(attaches(name), "{name}");
        }
        assert!(!attaches("sys_exit"));
    }
}
