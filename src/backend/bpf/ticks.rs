//! CPU time in syscalls is sampled: one CPU-clock event per CPU runs
//! `on_tick`, which charges each tick to the traced thread it interrupts.
//! The clock is fine at first, so that a command of a few ms still gets
//! ticks, then four times coarser. Once the run is past its first second,
//! the kernel's own tick takes over where it can (`kernel_tick`, at the
//! kernel's HZ): a busy CPU takes that interrupt anyway, while each of ours
//! interrupts its CPU, idle or not, which in a VM is far dearer than the
//! program it runs (docs/overhead.md). Not sooner: at Debian's 4 ms a
//! finding of 1% of a sub-second run would rest on one or two ticks; but
//! right after the fine start where the kernel ticks as often as the
//! slowed clock would (HZ 1000: Ubuntu's, Fedora's, RHEL's).
//! Where it cannot (legacy kernels, low-resolution timers, a tick that is
//! no whole number of fine ones, kallsyms hidden, no tick seen), the clock
//! stays four times coarser than at first. When the whole host is watched
//! (for hours), the kernel's tick takes over right after the fine start, or
//! else the clock turns sixteen times coarser, as the kernel's tick would be.
//! The programs weigh each tick by `tick_weight`, raised with the period.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
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
/// When the kernel's tick takes over from the coarser clock (a run's,
/// not the whole host's).
const KERNEL_TICK_FROM: Duration = Duration::from_secs(1);
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
    /// What the programs weigh a tick now, and the clock's weight before
    /// the kernel's tick took over (0: it has not), in one: `Weights`.
    weights: Arc<AtomicU64>,
    schedule: Schedule,
    /// Its thread returns the kernel tick's link, when it took over.
    pacer: Option<(mpsc::Sender<()>, JoinHandle<Option<OwnedFd>>)>,
}

impl Ticks {
    /// Attaches `on_tick` (the variant's program) to a fine clock on every
    /// CPU; after FINE_FOR it turns coarser, and after KERNEL_TICK_FROM
    /// `kernel`'s tick takes over; for `whole_host`, the kernel's tick takes
    /// over after FINE_FOR, or the clock turns coarser still.
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
        let weights = Arc::new(AtomicU64::new(Weights { tick: 1, clock: 0 }.packed()));
        let schedule = schedule(whole_host, resolution_ns(libc::CLOCK_MONOTONIC_COARSE));
        let pacer = start_pacer(&events, kernel, data_ticks, &weights, schedule);
        Ok(Ticks { _events: events, weights, schedule, pacer })
    }

    /// What the ticks measured: the tick at the end, and the finer ones
    /// before it.
    pub fn time_kind(&self) -> TimeKind {
        time_kind(Weights::unpacked(self.weights.load(Ordering::Acquire)), self.schedule.kernel_from)
    }
}

/// What a tick weighs now, and what the clock's weighed before the
/// kernel's tick took over (0: it has not); packed into one word, so that
/// a reader never sees one changed without the other.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Weights {
    tick: u64,
    clock: u64,
}

impl Weights {
    fn packed(self) -> u64 {
        (self.clock << 32) | (self.tick & 0xffff_ffff)
    }
    fn unpacked(word: u64) -> Weights {
        Weights { tick: word & 0xffff_ffff, clock: word >> 32 }
    }
}

/// When the clock turns coarser, and when the kernel's tick takes over.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Schedule {
    /// Fine ticks each of the slowed clock's stands for.
    coarse: u64,
    /// The kernel's tick takes over at this point of the run, after the
    /// slowed clock; None: at FINE_FOR, instead of it.
    kernel_from: Option<Duration>,
}

/// When a run's clock turns coarser and the kernel's tick (`kernel_tick_ns`
/// long, where known) takes over: at once after the fine start when the
/// kernel's tick is no coarser than the slowed clock (HZ 1000), which then
/// interrupts the target's CPU for nothing; else after KERNEL_TICK_FROM.
fn schedule(whole_host: bool, kernel_tick_ns: Option<u64>) -> Schedule {
    if whole_host {
        Schedule { coarse: HOST_COARSE_WEIGHT, kernel_from: None }
    } else if kernel_tick_ns.is_some_and(|ns| ns <= TICK_NS * COARSE_WEIGHT) {
        Schedule { coarse: COARSE_WEIGHT, kernel_from: None }
    } else {
        Schedule { coarse: COARSE_WEIGHT, kernel_from: Some(KERNEL_TICK_FROM) }
    }
}

/// The ticks a run had, from its weights, the kernel's tick taking over
/// at `kernel_from` as scheduled.
fn time_kind(Weights { tick: weight, clock: clock_weight }: Weights, kernel_from: Option<Duration>) -> TimeKind {
    let ns = |d: Duration| d.as_nanos() as u64;
    let sampled = |fine_for: Duration, middle: Option<(u64, Duration)>| TimeKind::CpuSampled {
        tick_ns: TICK_NS * weight,
        fine_tick_ns: TICK_NS,
        fine_for_ns: ns(fine_for),
        middle_tick_ns: middle.map_or(0, |(w, _)| TICK_NS * w),
        middle_until_ns: middle.map_or(0, |(_, until)| ns(until)),
    };
    match (clock_weight, kernel_from) {
        (0, _) if weight == 1 => TimeKind::sampled_every(TICK_NS),
        (0, _) | (_, None) => sampled(FINE_FOR, None),
        // The clock could not be slowed: fine until the kernel's tick.
        (1, Some(from)) => sampled(from, None),
        (clock, Some(from)) => sampled(FINE_FOR, Some((clock, from))),
    }
}

/// The thread that, after FINE_FOR, slows every clock and later hands it
/// over to the kernel's tick, or hands it over then (`schedule`); None
/// (the clock stays fine) if it cannot reach all of them and the weights.
fn start_pacer(
    events: &[OwnedFd],
    kernel: Option<KernelTick<'_>>,
    data_ticks: &MapHandle,
    weights: &Arc<AtomicU64>,
    schedule: Schedule,
) -> Option<(mpsc::Sender<()>, JoinHandle<Option<OwnedFd>>)> {
    let fds: Vec<OwnedFd> = events.iter().map(OwnedFd::try_clone).collect::<std::io::Result<_>>().ok()?;
    let kernel = kernel.and_then(|k| Some((k.tick.try_clone_to_owned().ok()?, k.find.try_clone_to_owned().ok()?)));
    let data = MapHandle::try_from(data_ticks).ok()?;
    let (stop, stopped) = mpsc::channel();
    let weights = Arc::clone(weights);
    let store = move |tick, clock| weights.store(Weights { tick, clock }.packed(), Ordering::Release);
    let start = Instant::now();
    let pacer = std::thread::Builder::new().name("sysdiet-ticks".into()).spawn(move || {
        let wait_until = |at: Duration| stopped.recv_timeout(at.saturating_sub(start.elapsed())) == Err(mpsc::RecvTimeoutError::Timeout);
        if !wait_until(FINE_FOR) {
            return None;
        }
        let mut clock = 1;
        if let Some(from) = schedule.kernel_from {
            if slow_down(&fds, &data, schedule.coarse) {
                clock = schedule.coarse;
                store(clock, 0);
            }
            if !wait_until(from) {
                return None;
            }
        }
        match kernel.and_then(|(tick, find)| hand_over(&fds, &tick, &find, &data, clock, &stopped)) {
            Some((link, kernel_weight)) => {
                store(kernel_weight, clock);
                Some(link)
            }
            None => {
                if schedule.kernel_from.is_none() && slow_down(&fds, &data, schedule.coarse) {
                    store(schedule.coarse, 0);
                }
                None
            }
        }
    });
    Some((stop, pacer.ok()?))
}

/// Lets the kernel's tick charge the threads instead of every CPU's
/// clock, weighed as its length in fine ticks: attaches `kernel_tick`,
/// waits until it sees one of the kernel's ticks (the handler found is the
/// tick's) while the clocks tick on, then stops them and has the kernel's
/// ticks charged. Returns the link that holds `kernel_tick` attached, and
/// the weight of the kernel's tick; the clocks' is `clock`.
/// None, with the clocks as they were, if the kernel's tick is no hrtimer
/// (low resolution), is no whole number of fine ticks, its handler cannot
/// be found (kallsyms hidden: kptr_restrict), none is seen within five of
/// its periods (25 ms at least), the run ends first, or a step fails.
fn hand_over(fds: &[OwnedFd], tick: &OwnedFd, find: &OwnedFd, data: &MapHandle, clock: u64, stopped: &mpsc::Receiver<()>) -> Option<(OwnedFd, u64)> {
    let tick_ns = resolution_ns(libc::CLOCK_MONOTONIC_COARSE)?;
    if resolution_ns(libc::CLOCK_MONOTONIC)? >= tick_ns {
        return None;
    }
    let kernel_weight = weight_of(tick_ns)?;
    let handler = tick_handler(find)?;
    let set = |value: data_ticks| write_ticks(data, &value);
    let looking = data_ticks { tick_weight: clock, kernel_tick_fn: handler, kernel_ticks_seen: 0, kernel_tick_weight: 0 };
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
        return Some((link, kernel_weight));
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
    let mut answer = [0u8; 8];
    let answer = (super::maps::run_once(find.as_fd(), &mut answer) == Some(0)).then(|| u64::from_ne_bytes(answer))?;
    (answer != 0).then_some(answer)
}

/// Makes every CPU's clock `coarse` times slower and the program
/// weigh its ticks as much; false, the clocks and the weight as they were,
/// if one could not be slowed (all or nothing). A tick that lands between the two
/// steps is weighed as the other period's: one tick per CPU at most, within
/// what sampling leaves uncertain anyway.
fn slow_down(fds: &[OwnedFd], data: &MapHandle, coarse: u64) -> bool {
    let period = TICK_NS * coarse;
    // SAFETY: PERF_EVENT_IOC_PERIOD reads one u64 through the pointer.
    let set = |fd: &OwnedFd, period: &u64| unsafe { libc::ioctl(fd.as_raw_fd(), PERF_EVENT_IOC_PERIOD as _, period as *const u64) } == 0;
    let value = data_ticks { tick_weight: coarse, kernel_tick_fn: 0, kernel_ticks_seen: 0, kernel_tick_weight: 0 };
    let slowed = fds.iter().all(|fd| set(fd, &period)) && write_ticks(data, &value);
    if !slowed {
        for fd in fds {
            set(fd, &TICK_NS);
        }
    }
    slowed
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
    fn the_time_kind_says_each_tick_the_run_had() {
        let sampled = |tick_ns, fine_for_ns, middle_tick_ns, middle_until_ns| TimeKind::CpuSampled {
            tick_ns,
            fine_tick_ns: TICK_NS,
            fine_for_ns,
            middle_tick_ns,
            middle_until_ns,
        };
        let run = Some(KERNEL_TICK_FROM);
        let (fine_for, from) = (FINE_FOR.as_nanos() as u64, KERNEL_TICK_FROM.as_nanos() as u64);
        // Still fine; slowed; then the kernel's 4 ms.
        let fine = TimeKind::sampled_every(TICK_NS);
        assert_eq!(time_kind(Weights { tick: 1, clock: 0 }, run), fine);
        assert_eq!(time_kind(Weights { tick: 4, clock: 0 }, run), sampled(4 * TICK_NS, fine_for, 0, 0));
        assert_eq!(time_kind(Weights { tick: 16, clock: 4 }, run), sampled(16 * TICK_NS, fine_for, 4 * TICK_NS, from));
        // A clock that could not be slowed was fine until the kernel's tick.
        assert_eq!(time_kind(Weights { tick: 16, clock: 1 }, run), sampled(16 * TICK_NS, from, 0, 0));
        // The whole host: the kernel's tick, or the slowed clock, after the
        // fine start.
        assert_eq!(time_kind(Weights { tick: 16, clock: 1 }, None), sampled(16 * TICK_NS, fine_for, 0, 0));
        assert_eq!(time_kind(Weights { tick: 16, clock: 0 }, None), sampled(16 * TICK_NS, fine_for, 0, 0));
        for w in [Weights { tick: 16, clock: 4 }, Weights { tick: 1, clock: 0 }, Weights { tick: 40, clock: 16 }] {
            assert_eq!(Weights::unpacked(w.packed()), w);
        }
    }

    #[test]
    fn the_kernels_tick_takes_over_at_once_where_it_is_as_fine_as_the_slowed_clock() {
        let (later, at_once) = (Some(KERNEL_TICK_FROM), None);
        let run = |kernel_tick_ns| schedule(false, kernel_tick_ns).kernel_from;
        // HZ 1000 (and finer): after the fine start; HZ 250, 300, 100, or
        // no coarse clock: after the first second.
        assert_eq!(run(Some(1_000_000)), at_once);
        assert_eq!(run(Some(500_000)), at_once);
        for coarser in [Some(4_000_000), Some(3_333_333), Some(10_000_000), None] {
            assert_eq!(run(coarser), later, "{coarser:?}");
        }
        for tick in [Some(1_000_000), Some(4_000_000), None] {
            assert_eq!(schedule(true, tick), Schedule { coarse: HOST_COARSE_WEIGHT, kernel_from: at_once });
            assert_eq!(schedule(false, tick).coarse, COARSE_WEIGHT);
        }
    }

    #[test]
    fn the_kernel_tick_and_the_clock_are_attached_here_not_as_hooks() {
        for name in ["on_tick", "on_tick_legacy", KERNEL_TICK, FIND_TICK_FN] {
            assert!(attaches(name), "{name}");
        }
        assert!(!attaches("sys_exit") && !attaches("sys_exit_bounded"));
    }
}
