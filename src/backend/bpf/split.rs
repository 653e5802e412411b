//! A cold start's load on two CPUs. The kernel verifies a set's programs
//! one after another, sys_exit's most of the time, while a second CPU has
//! nothing left to do once the maps are made. So the set is opened twice:
//! sys_exit alone in the first copy, the other programs in the second. The
//! second copy is opened on a thread of its own while the first opens and
//! its maps are made; once the first has made its maps (libbpf's prepare),
//! that thread takes them and loads its programs while the first loads
//! sys_exit. It then attaches the lifecycle hooks too, which would
//! otherwise wait for sys_exit's verifier: they see no target until one is
//! added, and slow no syscall.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;
use std::sync::mpsc;
use std::thread::JoinHandle;

use libbpf_rs::skel::{OpenSkel, Skel};
use libbpf_rs::AsRawLibbpf;

use super::maps::{bpf_error, object_storage};
use super::set_spec::{Part, SetSpec};
use super::skel::{OpenSyscountSkel, SyscountSkel};
use crate::error::{Error, Result};

/// The copy of the object with the programs other than sys_exit, being
/// opened on its own thread, which waits there for the first copy's maps.
pub struct Others {
    maps: mpsc::Sender<Vec<(String, OwnedFd)>>,
    thread: JoinHandle<Result<Moved<Loaded>>>,
}

/// The other programs loading on their thread.
pub struct Loading(JoinHandle<Result<Moved<Loaded>>>);

/// The other programs loaded, and the hooks among them already attached
/// (by program).
pub struct Loaded {
    pub skel: SyscountSkel<'static>,
    pub links: Vec<(String, OwnedFd)>,
}

/// An object on its way back from the thread that loaded it.
pub struct Moved<T>(T);

// SAFETY: a libbpf object is not tied to the thread that opened it; it is
// moved whole, and used by one thread at a time.
unsafe impl<T> Send for Moved<T> {}

impl<T> Moved<T> {
    /// Taken out whole, on the thread that waited for it.
    fn into_inner(self) -> T {
        self.0
    }
}

impl Others {
    /// Starts opening the second copy on a thread of its own, off the
    /// main thread's way to sys_exit's verifier.
    pub fn open(spec: &SetSpec, types: Option<&Path>) -> Result<Others> {
        let (spec, types) = (spec.clone(), types.map(Path::to_path_buf));
        let (maps, made) = mpsc::channel::<Vec<(String, OwnedFd)>>();
        let thread = std::thread::Builder::new().name("sysdiet-load".into()).spawn(move || {
            let mut open = spec.open(object_storage()?, types.as_deref(), Part::Others)?;
            // No maps: the first copy failed before it made them.
            let made = made.recv().map_err(|_| Error::Bpf("the other programs got no maps".into()))?;
            for mut map in open.open_object_mut().maps_mut() {
                if !map.autocreate() {
                    continue;
                }
                let fd = made.iter().find(|(name, _)| map.name().to_str() == Some(name.as_str())).map(|(_, fd)| fd);
                let fd = fd.ok_or_else(|| Error::Bpf(format!("map {} was not made for the other programs", map.name().to_string_lossy())))?;
                map.reuse_fd(fd.as_fd()).map_err(bpf_error)?;
            }
            let verifying = crate::timings::span("load and verify the others");
            let skel = open.load().map_err(bpf_error)?;
            drop(verifying);
            let _t = crate::timings::span("attach the lifecycle hooks");
            let links = attach_lifecycle(&skel);
            Ok(Moved(Loaded { skel, links }))
        });
        Ok(Others { maps, thread: thread.map_err(Error::Io)? })
    }

    /// Has `first` make its maps, load its BTF and relocate (all but load
    /// its programs), and hands this copy's thread the same maps, which it
    /// loads its programs with.
    pub fn load_beside(self, first: &mut OpenSyscountSkel<'static>) -> Result<Loading> {
        let preparing = crate::timings::span("make the maps, load the BTF");
        let object = first.open_object_mut().as_libbpf_object();
        // SAFETY: an open object, not prepared or loaded yet.
        let ret = unsafe { libbpf_sys::bpf_object__prepare(object.as_ptr()) };
        if ret != 0 {
            return Err(bpf_error(libbpf_rs::Error::from(std::io::Error::from_raw_os_error(-ret))));
        }
        drop(preparing);
        let mut made = Vec::new();
        for map in first.open_object().maps() {
            // SAFETY: a map of a prepared object; -1 if it was not made.
            let fd = unsafe { libbpf_sys::bpf_map__fd(map.as_libbpf_object().as_ptr()) };
            if fd >= 0 {
                // SAFETY: the first copy keeps the descriptor open while it
                // is duplicated for the other thread.
                let fd = unsafe { BorrowedFd::borrow_raw(fd) }.try_clone_to_owned().map_err(Error::Io)?;
                made.push((map.name().to_string_lossy().into_owned(), fd));
            }
        }
        // A thread that already failed says why when waited for.
        let _ = self.maps.send(made);
        Ok(Loading(self.thread))
    }
}

/// Whether program `name` watches tasks begin, exec, take signals and end:
/// attached before sys_exit is loaded. Not sys_enter, which every syscall
/// on the host would pay from then on, nor the clock's (ticks.rs).
fn is_lifecycle(name: &str) -> bool {
    name.starts_with("sched_process_") || name.starts_with("signal_deliver")
}

/// Attaches the loaded lifecycle hooks, each backup after the hook it
/// backs up; one that fails is left to the set's attach, which says why.
fn attach_lifecycle(skel: &SyscountSkel<'static>) -> Vec<(String, OwnedFd)> {
    let mut progs: Vec<_> = skel.object().progs().collect();
    progs.sort_by_key(|p| super::is_backup(&p.name().to_string_lossy()));
    progs
        .into_iter()
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
