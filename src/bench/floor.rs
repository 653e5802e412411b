//! The floor: empty programs on the syscall hooks. They cost every task on
//! the host what hooking syscalls costs at all; bench/overhead measures
//! sysdiet's own work above them.

use libbpf_rs::skel::{OpenSkel, Skel};

use crate::backend::bpf::kernel_types;
use crate::backend::bpf::maps::{bpf_error, fnv1a, object_storage};
use crate::backend::bpf::tracepoint_ids;
use crate::error::Result;
use crate::linux::syscalls::{self, ArgKind};

mod skel {
    include!(concat!(env!("OUT_DIR"), "/floor.skel.rs"));
}

/// The floor's object, for its cut kernel types (kernel_types.rs).
const OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/floor.bpf.o"));
const OBJECT_HASH: u64 = fnv1a(OBJECT);

/// Where sys_exit finds the thread's state, if it does: the values of
/// floor.bpf.c's `thread_state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum State {
    None = 0,
    /// In task storage (made at the thread's first call), as sysdiet's
    /// sys_exit finds it: a helper call.
    InTask = 1,
    /// In an array indexed by the thread's id, told from a reused id's by
    /// its task's start time: an inlined lookup, no helper call.
    ByPid = 2,
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
    /// floor of a tracer that times every call. With `paths`, sys_exit
    /// reads the path of each call that takes one: the floor of a tracer
    /// that counts calls per path exactly. With a `state`, sys_exit finds
    /// the thread's state first, where `state` says: the floor of a
    /// tracer that keeps per-thread state there. With `keys`
    /// (and `paths`), sys_exit adds 1 to a word of a table of that many
    /// words (a power of two, as `--keys` checks) picked by a hash of each
    /// path call's key: the floor of a tracer that counts each path in the
    /// kernel, its keys as close together as the table.
    pub fn attach(hooks: Hooks, clock: bool, paths: bool, state: State, keys: Option<u32>) -> Result<Floor> {
        // Loaded as sysdiet's own programs are, so that its start is the
        // floor of theirs: with the tracepoints' ids kept (looked up again
        // if the kernel refuses them), and relocated against the kernel
        // types it uses, cut out and kept, not the kernel's whole BTF,
        // which libbpf would parse at every start.
        let mut skel =
            kernel_types::loaded_with(OBJECT, OBJECT_HASH, |types| tracepoint_ids::loaded(|| Self::load(types, hooks, clock, paths, state, keys)))?;
        skel.attach().map_err(bpf_error)?;
        Ok(Floor { _skel: skel })
    }

    /// Opens the object (against `types` if given), sets it up as asked
    /// and loads it.
    fn load(
        types: Option<&std::path::Path>,
        hooks: Hooks,
        clock: bool,
        paths: bool,
        state: State,
        keys: Option<u32>,
    ) -> Result<skel::FloorSkel<'static>> {
        let mut open = kernel_types::open(skel::FloorSkelBuilder::default(), object_storage()?, types).map_err(bpf_error)?;
        let rodata = open.maps.rodata_data.as_deref_mut().expect("floor has read-only data");
        rodata.read_clock = u8::from(clock);
        rodata.thread_state = state as u8;
        rodata.count_keys = u8::from(keys.is_some());
        if let Some(words) = keys {
            rodata.keys_mask = words - 1;
            open.maps.floor_keys.set_max_entries(words).map_err(bpf_error)?;
        }
        if paths {
            for info in syscalls::all() {
                if let (ArgKind::Path(i), Some(slot)) = (info.arg, rodata.path_arg.get_mut(info.nr as usize)) {
                    *slot = i + 1;
                }
            }
        }
        open.maps.floor_states.set_autocreate(state == State::InTask).map_err(bpf_error)?;
        open.maps.floor_by_pid.set_autocreate(state == State::ByPid).map_err(bpf_error)?;
        if state == State::ByPid {
            open.maps.floor_by_pid.set_max_entries(pid_max()?).map_err(bpf_error)?;
        }
        open.maps.floor_keys.set_autocreate(keys.is_some()).map_err(bpf_error)?;
        open.progs.floor_enter.set_autoload(hooks != Hooks::Exit);
        open.progs.floor_exit.set_autoload(hooks != Hooks::Enter);
        open.load().map_err(bpf_error)
    }
}

/// The kernel's highest thread id plus one: STATE_BY_PID's array size.
fn pid_max() -> Result<u32> {
    const PATH: &str = "/proc/sys/kernel/pid_max";
    let text = std::fs::read_to_string(PATH).map_err(|source| crate::error::Error::File { path: PATH.into(), source })?;
    text.trim().parse().map_err(|_| crate::error::Error::Usage(format!("{PATH}: not a number: {}", text.trim())))
}
