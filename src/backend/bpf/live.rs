//! The live threads' states read by a task iterator (live.bpf.c): one
//! read of the kernel's task list for a whole snapshot, where walking
//! /proc costs three syscalls a thread on the host (its directory entry, a
//! pidfd, the storage lookup), traced or not, and a fourth for its name.

use std::io::Read;
use std::os::fd::AsFd;

use libbpf_rs::skel::OpenSkel;
use libbpf_rs::{Link, MapHandle};

use super::maps::{bpf_error, fnv1a, from_bytes, object_storage};
use super::skel::types::{live_head, task_state};
use super::{kernel_types, tracepoint_ids};
use crate::error::Result;

mod skel {
    include!(concat!(env!("OUT_DIR"), "/live.skel.rs"));
}

/// The iterator's object, for its cut kernel types (kernel_types.rs).
const OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/live.bpf.o"));
const OBJECT_HASH: u64 = fnv1a(OBJECT);

// Both objects' states are one type (syscount.h's), read as the set's.
const _: () = assert!(std::mem::size_of::<skel::types::task_state>() == std::mem::size_of::<task_state>());

/// What one read asks for: the kernel's seq_file buffer for an iterator
/// (8 pages).
const READ_CHUNK: usize = 8 * 4096;

/// One live thread and its state.
pub struct LiveThread {
    pub tid: u32,
    /// Its name now, when read with the state (the state's is the one at
    /// its fork or exec).
    pub comm: Option<String>,
    pub state: Box<task_state>,
}

/// The iterator, loaded beside a set and attached; each `read` walks the
/// kernel's tasks once.
pub struct LiveIterator {
    link: Link,
}

impl LiveIterator {
    /// Loads the iterator on the set's `states` (task storage) and
    /// `state_slots`.
    pub fn load(states: &MapHandle, slots: &MapHandle) -> Result<LiveIterator> {
        let _t = crate::timings::span("load the live threads' iterator");
        // Relocated against the kernel types it reads, cut out and kept,
        // and given its target's kept id: not a parse of the kernel's
        // whole BTF at each read-out.
        let loaded = kernel_types::loaded_with(OBJECT, OBJECT_HASH, |types| {
            tracepoint_ids::loaded(|| {
                let mut open = kernel_types::open(skel::LiveSkelBuilder::default(), object_storage()?, types).map_err(bpf_error)?;
                open.maps.states.reuse_fd(states.as_fd()).map_err(bpf_error)?;
                open.maps.state_slots.reuse_fd(slots.as_fd()).map_err(bpf_error)?;
                open.load().map_err(bpf_error)
            })
        })?;
        let link = loaded.progs.live_states.attach_iter_with_opts(libbpf_rs::IterOpts::None).map_err(bpf_error)?;
        Ok(LiveIterator { link })
    }

    /// Every live thread with a state (none that has exited or waits for
    /// its exec).
    pub fn read(&self) -> Result<Vec<LiveThread>> {
        let _t = crate::timings::span("read the live threads from the kernel's task list");
        let unread = |e: std::io::Error| crate::error::Error::Bpf(format!("reading the live threads: {e}"));
        let mut iter = libbpf_rs::Iter::new(&self.link).map_err(bpf_error)?;
        // Read in the kernel's own chunks (its buffer is 8 pages), not in
        // read_to_end's small first reads.
        let mut bytes = vec![0u8; READ_CHUNK];
        let mut len = 0;
        loop {
            if bytes.len() - len < READ_CHUNK {
                bytes.resize(len + READ_CHUNK, 0);
            }
            match iter.read(&mut bytes[len..]) {
                Ok(0) => break,
                Ok(n) => len += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(unread(e)),
            }
        }
        bytes.truncate(len);
        Ok(parse(&bytes))
    }
}

/// The records of `bytes`: a head, then the thread's state, each; a cut
/// record at the end (none is ever written) is left out.
fn parse(bytes: &[u8]) -> Vec<LiveThread> {
    let (head, state) = (std::mem::size_of::<live_head>(), std::mem::size_of::<task_state>());
    bytes
        .chunks_exact(head + state)
        .map(|r| {
            let h: live_head = from_bytes(&r[..head]);
            let comm = h.comm.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect::<Vec<u8>>();
            LiveThread { tid: h.tid, comm: Some(String::from_utf8_lossy(&comm).into_owned()), state: Box::new(from_bytes(&r[head..])) }
        })
        .collect()
}
