//! The floor: empty programs on the syscall hooks. They cost every task on
//! the host what hooking syscalls costs at all; bench/overhead measures
//! sysdiet's own work above them.

use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};

use super::bpf::{bpf_error, object_storage};
use crate::error::Result;

mod skel {
    include!(concat!(env!("OUT_DIR"), "/floor.skel.rs"));
}

/// Which hooks to attach.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hooks {
    Enter,
    Exit,
    Both,
}

/// The empty programs, attached until this is dropped.
pub struct Floor {
    _skel: skel::FloorSkel<'static>,
}

impl Floor {
    /// With `clock`, each hook reads the clock (and discards it): the
    /// floor of a tracer that times every call.
    pub fn attach(hooks: Hooks, clock: bool) -> Result<Floor> {
        let mut open = skel::FloorSkelBuilder::default().open(object_storage()?).map_err(bpf_error)?;
        open.maps.rodata_data.as_deref_mut().expect("floor has read-only data").read_clock = u8::from(clock);
        open.progs.floor_enter.set_autoload(hooks != Hooks::Exit);
        open.progs.floor_exit.set_autoload(hooks != Hooks::Enter);
        let mut skel = open.load().map_err(bpf_error)?;
        skel.attach().map_err(bpf_error)?;
        Ok(Floor { _skel: skel })
    }
}
