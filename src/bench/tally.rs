//! The syscall tally: tally.bpf.c counts the syscalls of chosen processes by
//! (process, syscall), nothing more. `sysdiet bench` counts its loops'
//! syscalls with it.

use std::collections::BTreeMap;

use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags};

use crate::backend::bpf::maps::{bpf_error, from_bytes, object_storage};
use crate::backend::bpf::tracepoint_ids;
use crate::error::Result;

mod skel {
    include!(concat!(env!("OUT_DIR"), "/tally.skel.rs"));
}
use skel::types::tally_key;
use skel::{TallySkel, TallySkelBuilder};

pub struct Tally {
    skel: TallySkel<'static>,
}

impl Tally {
    /// Loads and attaches the counter; nothing is counted until a process
    /// is watched.
    pub fn load() -> Result<Tally> {
        let mut skel = tracepoint_ids::loaded(|| TallySkelBuilder::default().open(object_storage()?).map_err(bpf_error)?.load().map_err(bpf_error))?;
        skel.attach().map_err(bpf_error)?;
        Ok(Tally { skel })
    }

    /// Counts every syscall of process `tgid` (all its threads) from its
    /// next execve on: `tgid` is a spawned child not yet released.
    pub fn watch(&self, tgid: u32) -> Result<()> {
        const PENDING: u8 = 0;
        self.skel.maps.watched.update(&tgid.to_ne_bytes(), &[PENDING], MapFlags::ANY).map_err(bpf_error)
    }

    /// Stops counting `tgid` and takes its counts: syscall number -> calls.
    pub fn take(&self, tgid: u32) -> Result<BTreeMap<u32, u64>> {
        let maps = &self.skel.maps;
        let _ = maps.watched.delete(&tgid.to_ne_bytes());
        let mut counts = BTreeMap::new();
        let keys: Vec<Vec<u8>> = maps.counts.keys().collect();
        for k in keys {
            let key: tally_key = from_bytes(&k);
            if key.tgid != tgid {
                continue;
            }
            if let Some(v) = maps.counts.lookup(&k, MapFlags::ANY).map_err(bpf_error)? {
                counts.insert(key.nr, from_bytes::<u64>(&v));
            }
            let _ = maps.counts.delete(&k);
        }
        Ok(counts)
    }

    /// Calls not counted because the table was full.
    pub fn lost(&self) -> u64 {
        self.skel.maps.bss_data.as_deref().map_or(0, |b| b.lost)
    }
}
