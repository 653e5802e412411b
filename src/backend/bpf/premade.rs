//! The large maps made on other threads, one each (the small ones together
//! on one more), while the object is opened, then handed to it before it
//! loads. Making them is mostly the kernel zeroing and charging pages (the
//! three ring buffers, first_calls, arg_stats' buckets), which the held
//! command would otherwise wait for in series with the load, on a host
//! with a second CPU (`SYSDIET_TIMINGS=1` shows both).

use std::ffi::OsString;
use std::os::fd::AsFd;
use std::thread::JoinHandle;

use libbpf_rs::{MapHandle, MapType, OpenMapMut};

/// What a map is made with: its object definition, after the setters.
struct Definition {
    name: OsString,
    map_type: MapType,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    flags: u32,
}

/// Maps being made; `hand_over` gives them to the object.
pub struct Premade(Vec<JoinHandle<Vec<(OsString, MapHandle)>>>);

impl Premade {
    /// Starts making maps like `big` and `small` (as they are defined
    /// now): each big one on a thread of its own, as the kernel zeroes each
    /// one's pages in series, and the small ones on one more (a few tenths
    /// of a millisecond each, that libbpf would otherwise spend in series
    /// before the verifier starts). Maps with BTF-typed values (task
    /// storage) are libbpf's to make.
    pub fn start(big: &[&OpenMapMut<'_>], small: &[&OpenMapMut<'_>]) -> Premade {
        let mut threads: Vec<_> = big.iter().map(|m| Definition::of(m)).map(|d| std::thread::spawn(move || d.make().into_iter().collect())).collect();
        let small: Vec<Definition> = small.iter().map(|m| Definition::of(m)).collect();
        threads.push(std::thread::spawn(move || small.into_iter().filter_map(Definition::make).collect()));
        Premade(threads)
    }

    /// Waits for the maps and has the object's maps of their names use them
    /// instead of making their own (it keeps duplicates of the descriptors).
    pub fn hand_over<'a>(self, maps: impl Iterator<Item = OpenMapMut<'a>>) {
        let made: Vec<(OsString, MapHandle)> = self.0.into_iter().filter_map(|t| t.join().ok()).flatten().collect();
        for mut map in maps {
            if let Some((_, made)) = made.iter().find(|(name, _)| name.as_os_str() == map.name()) {
                // On failure libbpf makes the map itself, as without this.
                let _ = map.reuse_fd(made.as_fd());
            }
        }
    }
}

impl Definition {
    fn of(m: &OpenMapMut<'_>) -> Definition {
        Definition {
            name: m.name().to_owned(),
            map_type: m.map_type(),
            key_size: m.key_size(),
            value_size: m.value_size(),
            max_entries: m.max_entries(),
            flags: m.map_flags(),
        }
    }

    /// None if it cannot be made here (no rights, say): libbpf then makes
    /// it, and says why it cannot.
    fn make(self) -> Option<(OsString, MapHandle)> {
        let _t = crate::timings::span("make a map");
        let opts = libbpf_sys::bpf_map_create_opts {
            sz: std::mem::size_of::<libbpf_sys::bpf_map_create_opts>() as _,
            map_flags: self.flags,
            ..Default::default()
        };
        let map = MapHandle::create(self.map_type, Some(&self.name), self.key_size, self.value_size, self.max_entries, &opts).ok()?;
        Some((self.name, map))
    }
}
