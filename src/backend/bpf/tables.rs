//! The maps a run reads and writes, as handles of its own: taken from the
//! object once its maps are set (made by this run's load, or a keeper's
//! given to the object unloaded), or made from a keeper's descriptors.
//! Past that point nothing needs libbpf's object, so a borrowed set is
//! never loaded (libbpf's load probes the kernel's features and loads the
//! object's BTF each time).

use std::os::fd::{AsFd, AsRawFd, OwnedFd};

use libbpf_rs::{Map, MapCore, MapHandle};

use super::maps::{bpf_error, map_info};
use super::skel::types::bss;
use crate::backend::perf;
use crate::error::{Error, Result};

/// Each map of a set, by the name the programs give it.
pub struct Tables {
    /// Repeated arguments: (tgid, nr, fd, path) -> their counts.
    pub arg_stats: MapHandle,
    /// First sightings' words (counts of promoted keys among them).
    pub first_calls: MapHandle,
    /// Byte histograms of read/write keys, by arg_stats' key.
    pub io_hists: MapHandle,
    /// Errors past a thread's own few, per CPU.
    pub errno_stats: MapHandle,
    /// Syscalls past a thread's own THREAD_SYSCALLS kinds, by process, per CPU.
    pub syscall_spill: MapHandle,
    /// Keys seen once, summed per syscall, per CPU.
    pub once_summary: MapHandle,
    /// What could not be counted, per counter, per CPU.
    pub lost: MapHandle,
    /// Exited threads' records.
    pub exits: MapHandle,
    /// New path strings.
    pub strings: MapHandle,
    /// Stack samples.
    pub samples: MapHandle,
    /// The CPU-time tick's weight.
    pub data_ticks: MapHandle,
    /// Targets' states in task storage (the current variant): those whose
    /// slot another thread holds, or not yet moved into it.
    pub states: Option<MapHandle>,
    /// Targets' states in slots by tid (the current variant).
    pub state_slots: Option<MapHandle>,
    /// Targets' states by tid (the legacy variant).
    pub thread_states: Option<MapHandle>,
    /// Targets' CPU ticks by tid (the legacy variant).
    pub thread_ticks: Option<MapHandle>,
    /// Every map of the set, by name: what a keeper is left.
    pub all: Vec<(String, OwnedFd)>,
    bss: Shared,
}

impl Tables {
    /// The maps of `maps` the set made (each with its descriptor: made by
    /// a load, or given with `reuse_fd`), as handles.
    pub fn take<'a>(maps: impl Iterator<Item = &'a libbpf_sys::bpf_map>) -> Result<Tables> {
        let mut handles = Vec::new();
        for raw in maps {
            // SAFETY: a map of a live object.
            if !unsafe { libbpf_sys::bpf_map__autocreate(raw) } {
                continue;
            }
            // SAFETY: as above; Map::new checks the map has a descriptor.
            if unsafe { libbpf_sys::bpf_map__fd(raw) } < 0 {
                return Err(Error::Bpf("a map of the set has no descriptor".into()));
            }
            let map = Map::new(raw);
            handles.push((map.name().to_string_lossy().into_owned(), MapHandle::try_from(&map).map_err(bpf_error)?));
        }
        Tables::from_handles(handles)
    }

    /// A keeper's maps, lent by name, as handles: each map's facts are
    /// asked of the kernel by its id, which needs CAP_SYS_ADMIN (without
    /// it, `take` from an object given them).
    pub fn lent(maps: &[(String, OwnedFd)]) -> Result<Tables> {
        let handles = maps
            .iter()
            .map(|(name, fd)| {
                let info = map_info(fd.as_raw_fd()).map_err(|e| Error::Bpf(format!("map {name}: {e}")))?;
                Ok((name.clone(), MapHandle::from_map_id(info.id).map_err(bpf_error)?))
            })
            .collect::<Result<_>>()?;
        Tables::from_handles(handles)
    }

    fn from_handles(handles: Vec<(String, MapHandle)>) -> Result<Tables> {
        let all = handles
            .iter()
            .map(|(name, h)| Ok((name.clone(), h.as_fd().try_clone_to_owned().map_err(|e| Error::Bpf(e.to_string()))?)))
            .collect::<Result<_>>()?;
        let mut handles: Vec<Option<(String, MapHandle)>> = handles.into_iter().map(Some).collect();
        let mut find = |wanted: &dyn Fn(&str) -> bool| {
            handles.iter_mut().find(|h| h.as_ref().is_some_and(|(name, _)| wanted(name))).and_then(Option::take).map(|(_, h)| h)
        };
        let mut named = |name: &'static str| find(&|n| n == name);
        let (states, state_slots) = (named("states"), named("state_slots"));
        let (thread_states, thread_ticks) = (named("thread_states"), named("thread_ticks"));
        let mut need = |name: &'static str| named(name).ok_or_else(|| Error::Bpf(format!("the set has no map {name}")));
        let (arg_stats, first_calls, io_hists, errno_stats) = (need("arg_stats")?, need("first_calls")?, need("io_hists")?, need("errno_stats")?);
        let syscall_spill = need("syscall_spill")?;
        let (once_summary, lost, exits, strings, samples) =
            (need("once_summary")?, need("lost")?, need("exits")?, need("strings")?, need("samples")?);
        // libbpf names the global data's maps after the object: "syscount.bss".
        let data_ticks = find(&|n| n.ends_with(".data.ticks")).ok_or_else(|| Error::Bpf("the set has no map .data.ticks".into()))?;
        let bss_map = find(&|n| n.ends_with(".bss")).ok_or_else(|| Error::Bpf("the set has no map .bss".into()))?;
        let bss = Shared::map(&bss_map, std::mem::size_of::<bss>())?;
        Ok(Tables {
            arg_stats,
            first_calls,
            io_hists,
            errno_stats,
            syscall_spill,
            once_summary,
            lost,
            exits,
            strings,
            samples,
            data_ticks,
            states,
            state_slots,
            thread_states,
            thread_ticks,
            all,
            bss,
        })
    }

    /// The programs' global variables (.bss), as they change.
    pub fn bss(&self) -> &bss {
        // SAFETY: a shared mapping at least a `bss` long, page-aligned,
        // alive as long as self; plain integers, any bits valid. The
        // programs change fields under it: those are read with
        // read_volatile, as from the skeleton's own mapping.
        unsafe { &*self.bss.at.cast::<bss>() }
    }

    /// The count of states that may be in task storage (`stored_states`
    /// in state.bpf.h), which a state user space puts there raises first.
    pub fn stored_states(&self) -> &std::sync::atomic::AtomicU64 {
        // SAFETY: as in `bss`; an AtomicU64 has a u64's size and the
        // field's 8-byte alignment, and the programs change it only with
        // atomic adds.
        unsafe { &*std::ptr::addr_of!((*self.bss.at.cast::<bss>()).stored_states).cast::<std::sync::atomic::AtomicU64>() }
    }

    /// The programs' global variables, to set one (`stopped`).
    pub fn bss_mut(&mut self) -> &mut bss {
        // SAFETY: as in `bss`; the mapping is writable.
        unsafe { &mut *self.bss.at.cast::<bss>() }
    }
}

/// A map's values mapped shared and writable, unmapped when dropped.
struct Shared {
    at: *mut u8,
    len: usize,
}

// SAFETY: the mapping is process-wide memory; Tables hands out references
// to it only through &self / &mut self.
unsafe impl Send for Shared {}
unsafe impl Sync for Shared {}

impl Shared {
    fn map(map: &MapHandle, size: usize) -> Result<Shared> {
        if (map.value_size() as usize) < size {
            return Err(Error::Bpf(format!("map {} is smaller than its type", map.name().to_string_lossy())));
        }
        let len = size.div_ceil(perf::page_size()) * perf::page_size();
        // SAFETY: a new shared mapping of an mmapable array map's values.
        let at = unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, map.as_fd().as_raw_fd(), 0) };
        if at == libc::MAP_FAILED {
            return Err(Error::Bpf(format!("mapping {}: {}", map.name().to_string_lossy(), std::io::Error::last_os_error())));
        }
        Ok(Shared { at: at.cast(), len })
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        // SAFETY: our own mapping, of this length; nothing refers to it
        // past its owner's life.
        unsafe { libc::munmap(self.at.cast(), self.len) };
    }
}
