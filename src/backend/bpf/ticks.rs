//! CPU time in syscalls is sampled: one CPU-clock event per CPU runs
//! `on_tick`, which charges each tick to the traced thread it interrupts.
//! The clock is fine at first, so that a command of a few ms still gets
//! ticks, and four times coarser once the run is past its start (sixteen
//! when the whole host is watched, for hours): every tick interrupts its
//! CPU, idle or not, which in a VM is far dearer than the program it runs
//! (docs/overhead.md), and a longer run has ticks enough.
//! The program weighs each tick by `tick_weight`, raised with the period.

use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::Duration;

use libbpf_rs::{MapCore, MapFlags, MapHandle};

use super::maps::bpf_error;
use super::set_spec::TICK_NS;
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

/// The attached clock events (closed, the program is detached), and the
/// thread that slows them down.
pub struct Ticks {
    _events: Vec<OwnedFd>,
    weight: Arc<AtomicU64>,
    pacer: Option<(mpsc::Sender<()>, JoinHandle<()>)>,
}

impl Ticks {
    /// Attaches `on_tick` (the variant's program) to a fine clock on every
    /// CPU, made coarser after FINE_FOR (coarser still for `whole_host`).
    pub fn attach(on_tick: BorrowedFd<'_>, data_ticks: &MapHandle, whole_host: bool) -> Result<Ticks> {
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
        let pacer = start_pacer(&events, data_ticks, &weight, coarse);
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

/// The thread that slows every clock after FINE_FOR; None (the clock
/// stays fine) if it cannot reach all of them and the weight.
fn start_pacer(events: &[OwnedFd], data_ticks: &MapHandle, weight: &Arc<AtomicU64>, coarse: u64) -> Option<(mpsc::Sender<()>, JoinHandle<()>)> {
    let fds: Vec<OwnedFd> = events.iter().map(OwnedFd::try_clone).collect::<std::io::Result<_>>().ok()?;
    let data = MapHandle::try_from(data_ticks).ok()?;
    let (stop, stopped) = mpsc::channel();
    let shared = Arc::clone(weight);
    let pacer = std::thread::Builder::new().name("sysdiet-ticks".into()).spawn(move || {
        if stopped.recv_timeout(FINE_FOR) == Err(mpsc::RecvTimeoutError::Timeout) {
            slow_down(&fds, &data, &shared, coarse);
        }
    });
    Some((stop, pacer.ok()?))
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
    let slowed = fds.iter().all(|fd| set(fd, &period)) && data.update(&0u32.to_ne_bytes(), &coarse.to_ne_bytes(), MapFlags::ANY).is_ok();
    if slowed {
        weight.store(coarse, Ordering::Release);
    } else {
        for fd in fds {
            set(fd, &TICK_NS);
        }
    }
}

impl Drop for Ticks {
    fn drop(&mut self) {
        if let Some((stop, pacer)) = self.pacer.take() {
            let _ = stop.send(());
            let _ = pacer.join();
        }
    }
}
