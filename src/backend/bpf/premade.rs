//! The large maps made on other threads, one each (the small ones together
//! on one more), while the object is opened, then handed to it before it
//! loads. Making them is mostly the kernel zeroing and charging pages (the
//! three ring buffers, first_calls, arg_stats' buckets), which the held
//! command would otherwise wait for in series with the load, on a host
//! with a second CPU (`SYSDIET_TIMINGS=1` shows both). The two largest
//! start before the object is even opened, from definitions known here
//! (`Early`): one the object defines otherwise is not used.

use std::ffi::OsString;
use std::os::fd::AsFd;
use std::thread::JoinHandle;

use libbpf_rs::{MapHandle, MapType, OpenMapMut};

use super::skel::types::{arg_key, arg_val};

/// first_calls' slots (FIRST_SLOTS in state.bpf.h).
const FIRST_SLOTS: u32 = 1 << 20;
/// arg_stats' entries (its max_entries in state.bpf.h).
const ARG_STATS_ENTRIES: u32 = 262_144;

/// What a map is made with: its object definition, after the setters.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Definition {
    name: OsString,
    map_type: MapType,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    flags: u32,
}

/// A thread making maps: what it made, by name.
type Making = JoinHandle<Vec<(OsString, MapHandle)>>;

/// Maps being made; `hand_over` gives them to the object.
pub struct Premade(Vec<Making>);

/// The largest maps, being made before the object is opened.
pub struct Early(Vec<(Definition, Making)>);

impl Early {
    /// Starts making first_calls (when it has room for first sightings)
    /// and arg_stats, each on a thread of its own.
    pub fn start(first_sightings: bool) -> Early {
        let definitions = Early::definitions().into_iter().filter(|d| first_sightings || d.name != "first_calls");
        Early(definitions.map(|d| (d.clone(), std::thread::spawn(move || d.make().into_iter().collect()))).collect())
    }

    /// As state.bpf.h defines them (a unit test holds the two together).
    fn definitions() -> Vec<Definition> {
        vec![
            Definition {
                name: "first_calls".into(),
                map_type: MapType::Array,
                key_size: 4,
                value_size: 8,
                max_entries: FIRST_SLOTS,
                flags: libbpf_sys::BPF_F_MMAPABLE,
            },
            Definition {
                name: "arg_stats".into(),
                map_type: MapType::Hash,
                key_size: std::mem::size_of::<arg_key>() as u32,
                value_size: std::mem::size_of::<arg_val>() as u32,
                max_entries: ARG_STATS_ENTRIES,
                flags: libbpf_sys::BPF_F_NO_PREALLOC,
            },
        ]
    }
}

impl Premade {
    /// Starts making maps like `big` and `small` (as they are defined
    /// now): each big one on a thread of its own, as the kernel zeroes each
    /// one's pages in series, and the small ones on one more (a few tenths
    /// of a millisecond each, that libbpf would otherwise spend in series
    /// before the verifier starts). Maps with BTF-typed values (task
    /// storage) are libbpf's to make.
    ///
    /// `early`'s maps are taken where the object defines them alike, and
    /// made here where it does not (those of `early` are then dropped).
    pub fn start(early: Early, big: &[&OpenMapMut<'_>], small: &[&OpenMapMut<'_>]) -> Premade {
        let wanted: Vec<Definition> = big.iter().map(|m| Definition::of(m)).collect();
        let (taken, unused): (Vec<_>, Vec<_>) = early.0.into_iter().partition(|(d, _)| wanted.contains(d));
        // One defined otherwise is left to end on its own, unused.
        drop(unused);
        let to_make = wanted.into_iter().filter(|w| !taken.iter().any(|(d, _)| d == w));
        let mut threads: Vec<_> = to_make.map(|d| std::thread::spawn(move || d.make().into_iter().collect())).collect();
        let small: Vec<Definition> = small.iter().map(|m| Definition::of(m)).collect();
        threads.push(std::thread::spawn(move || small.into_iter().filter_map(Definition::make).collect()));
        threads.extend(taken.into_iter().map(|(_, t)| t));
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
        let opts = super::maps::create_opts(self.flags);
        let map = MapHandle::create(self.map_type, Some(&self.name), self.key_size, self.value_size, self.max_entries, &opts).ok()?;
        Some((self.name, map))
    }
}

#[cfg(test)]
mod tests {
    use super::super::features::Variant;
    use super::super::set_spec::{BpfOptions, Part, SetSpec};
    use super::*;
    use crate::backend::filter::SyscallSet;

    #[test]
    fn the_early_maps_are_defined_as_the_object_defines_them() {
        // Else a run would make them twice: early, unused, and again.
        for variant in [Variant::Current, Variant::Bounded, Variant::Legacy] {
            for keep_every_key in [false, true] {
                let spec = SetSpec::new(&SyscallSet::default(), &BpfOptions { keep_every_key, ..BpfOptions::default() }, variant);
                let open = spec.open(Box::leak(Box::new(std::mem::MaybeUninit::uninit())), None, Part::All).unwrap();
                let early = Early::definitions();
                let made = |name: &str| early.iter().find(|d| d.name == name).unwrap().clone();
                assert_eq!(made("arg_stats"), Definition::of(&open.maps.arg_stats), "{variant:?}");
                // One slot when every key goes to arg_stats at once.
                assert_eq!(made("first_calls") == Definition::of(&open.maps.first_calls), spec.first_sightings, "{variant:?} {keep_every_key}");
            }
        }
    }
}
