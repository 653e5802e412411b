//! Each traced process's executable mappings over time. An exec starts a
//! new epoch; a fork copies its parent's. A sample resolves against the
//! epoch it was taken in, so `sh -c 'exec ./app'` resolves both programs.

use std::collections::HashMap;
use std::sync::Arc;

use crate::backend::mappings::MapEvent;

#[derive(Debug, Clone, PartialEq)]
pub struct Mapping {
    pub start: u64,
    pub end: u64,
    pub pgoff: u64,
    pub name: Arc<str>,
}

#[derive(Debug, Default)]
struct Epoch {
    start: u64,
    maps: Vec<Mapping>,
}

#[derive(Debug, Default)]
pub struct AddressSpaces {
    by_pid: HashMap<u32, Vec<Epoch>>,
}

impl AddressSpaces {
    pub fn apply(&mut self, event: MapEvent) {
        match event {
            MapEvent::Mmap { pid, start, len, pgoff, path, .. } => {
                let epochs = self.by_pid.entry(pid).or_default();
                if epochs.is_empty() {
                    epochs.push(Epoch::default());
                }
                let maps = &mut epochs.last_mut().expect("one epoch").maps;
                maps.push(Mapping { start, end: start + len, pgoff, name: path.into() });
            }
            MapEvent::Exec { pid, time } => {
                self.by_pid.entry(pid).or_default().push(Epoch { start: time, maps: Vec::new() });
            }
            MapEvent::Fork { pid, ppid, time } => {
                let maps = self.latest(ppid).map(<[Mapping]>::to_vec).unwrap_or_default();
                self.by_pid.entry(pid).or_default().push(Epoch { start: time, maps });
            }
            // Forgotten later, by `forget`, once its samples are unwound.
            MapEvent::Exit { .. } => {}
        }
    }

    /// Drops a process that ended.
    pub fn forget(&mut self, pid: u32) {
        self.by_pid.remove(&pid);
    }

    fn latest(&self, pid: u32) -> Option<&[Mapping]> {
        self.by_pid.get(&pid)?.last().map(|e| e.maps.as_slice())
    }

    /// The mappings of the epoch `pid` was in at `time`, later ones last
    /// (a later mapping of the same range replaces an earlier).
    pub fn at(&self, pid: u32, time: u64) -> Option<&[Mapping]> {
        let epochs = self.by_pid.get(&pid)?;
        epochs.iter().rfind(|e| e.start <= time).map(|e| e.maps.as_slice())
    }
}

/// The mapping that holds `addr`, the latest if several did.
pub fn find(maps: &[Mapping], addr: u64) -> Option<&Mapping> {
    maps.iter().rev().find(|m| m.start <= addr && addr < m.end)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mmap(pid: u32, time: u64, start: u64, path: &str) -> MapEvent {
        MapEvent::Mmap { pid, time, start, len: 0x1000, pgoff: 0, path: path.into() }
    }

    #[test]
    fn exec_starts_over_and_fork_copies() {
        let mut s = AddressSpaces::default();
        s.apply(mmap(1, 0, 0x1000, "/bin/sh"));
        s.apply(MapEvent::Fork { pid: 2, ppid: 1, time: 10 });
        s.apply(MapEvent::Exec { pid: 2, time: 20 });
        s.apply(mmap(2, 21, 0x1000, "/app"));
        let name = |pid, t, a| find(s.at(pid, t).unwrap(), a).map(|m| m.name.to_string());
        assert_eq!(name(2, 15, 0x1800).as_deref(), Some("/bin/sh"));
        assert_eq!(name(2, 30, 0x1800).as_deref(), Some("/app"));
        assert_eq!(name(1, 30, 0x1800).as_deref(), Some("/bin/sh"));
        assert_eq!(name(1, 30, 0x3000), None);
        assert!(s.at(3, 30).is_none());
        assert!(!std::ptr::eq(s.at(2, 15).unwrap(), s.at(2, 30).unwrap()), "one epoch before the exec, another after");
    }

    #[test]
    fn a_later_mapping_of_a_range_wins() {
        let mut s = AddressSpaces::default();
        s.apply(mmap(1, 0, 0x1000, "/old.so"));
        s.apply(mmap(1, 5, 0x1000, "/new.so"));
        assert_eq!(&*find(s.at(1, 9).unwrap(), 0x1000).unwrap().name, "/new.so");
    }
}
