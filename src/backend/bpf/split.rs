//! A cold start's load on two CPUs. The kernel verifies a set's programs
//! one after another, sys_exit's most of the time, while a second CPU has
//! nothing left to do once the maps are made. So the set is opened twice:
//! sys_exit alone in the first copy, the other programs in the second; once
//! the first has made its maps (libbpf's prepare), the second takes them
//! and loads on another thread while the first loads sys_exit. That thread
//! then attaches the lifecycle hooks too, which would otherwise wait for
//! sys_exit's verifier: they see no target until one is added, and slow
//! no syscall.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;
use std::thread::JoinHandle;

use libbpf_rs::skel::{OpenSkel, Skel};
use libbpf_rs::AsRawLibbpf;

use super::maps::{bpf_error, object_storage};
use super::set_spec::{Part, SetSpec};
use super::skel::{OpenSyscountSkel, SyscountSkel};
use crate::error::{Error, Result};

/// The copy of the object with the programs other than sys_exit, opened.
pub struct Others(OpenSyscountSkel<'static>);

/// The other programs loading on their thread.
pub struct Loading(JoinHandle<Result<Moved<Loaded>>>);

/// The other programs loaded, and the hooks among them already attached
/// (by program).
pub struct Loaded {
    pub skel: SyscountSkel<'static>,
    pub links: Vec<(String, OwnedFd)>,
}

/// An object on its way to or from the thread that loads it.
pub struct Moved<T>(T);

// SAFETY: a libbpf object is not tied to the thread that opened it; it is
// moved whole, used by one thread at a time, and moved back.
unsafe impl<T> Send for Moved<T> {}

impl<T> Moved<T> {
    /// Taken out whole (a closure that named the field would capture the
    /// field alone, which is not Send).
    fn into_inner(self) -> T {
        self.0
    }
}

impl Others {
    pub fn open(spec: &SetSpec, types: Option<&Path>) -> Result<Others> {
        Ok(Others(spec.open(object_storage()?, types, Part::Others)?))
    }

    /// Has `first` make its maps, load its BTF and relocate (all but load
    /// its programs), gives this copy the same maps, and starts loading it
    /// on another thread.
    pub fn load_beside(mut self, first: &mut OpenSyscountSkel<'static>) -> Result<Loading> {
        let preparing = crate::timings::span("make the maps, load the BTF");
        let object = first.open_object_mut().as_libbpf_object();
        // SAFETY: an open object, not prepared or loaded yet.
        let ret = unsafe { libbpf_sys::bpf_object__prepare(object.as_ptr()) };
        if ret != 0 {
            return Err(bpf_error(libbpf_rs::Error::from(std::io::Error::from_raw_os_error(-ret))));
        }
        drop(preparing);
        for mut map in self.0.open_object_mut().maps_mut() {
            if !map.autocreate() {
                continue;
            }
            let made = first.open_object().maps().find(|m| m.name() == map.name());
            // SAFETY: a map of a prepared object; -1 if it was not made.
            let fd = made.map_or(-1, |m| unsafe { libbpf_sys::bpf_map__fd(m.as_libbpf_object().as_ptr()) });
            if fd < 0 {
                return Err(Error::Bpf(format!("map {} was not made for the other programs", map.name().to_string_lossy())));
            }
            // SAFETY: the first copy keeps the descriptor open while this
            // one duplicates it.
            map.reuse_fd(unsafe { BorrowedFd::borrow_raw(fd) }).map_err(bpf_error)?;
        }
        let others = Moved(self.0);
        let thread = std::thread::Builder::new().name("sysdiet-load".into()).spawn(move || {
            let verifying = crate::timings::span("load and verify the others");
            let skel = others.into_inner().load().map_err(bpf_error)?;
            drop(verifying);
            let _t = crate::timings::span("attach the lifecycle hooks");
            let links = attach_lifecycle(&skel);
            Ok(Moved(Loaded { skel, links }))
        });
        Ok(Loading(thread.map_err(Error::Io)?))
    }
}

/// Whether program `name` watches tasks begin, exec, take signals and end:
/// attached before sys_exit is loaded. Not sys_enter, which every syscall
/// on the host would pay from then on, nor the clock's (ticks.rs).
fn is_lifecycle(name: &str) -> bool {
    name.starts_with("sched_process_") || name.starts_with("signal_deliver")
}

/// Attaches the loaded lifecycle hooks; one that fails is left to the set's
/// attach, which says why.
fn attach_lifecycle(skel: &SyscountSkel<'static>) -> Vec<(String, OwnedFd)> {
    skel.object()
        .progs()
        .filter(|p| p.autoload())
        .filter_map(|p| {
            let name = p.name().to_string_lossy().into_owned();
            if !is_lifecycle(&name) {
                return None;
            }
            Some((name, super::attach_tracepoint(p.as_fd()).ok()?))
        })
        .collect()
}

impl Loading {
    pub fn wait(self) -> Result<Loaded> {
        match self.0.join() {
            Ok(loaded) => loaded.map(Moved::into_inner),
            Err(_) => Err(Error::Bpf("the thread loading the other programs panicked".into())),
        }
    }
}
