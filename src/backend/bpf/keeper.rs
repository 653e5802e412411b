//! Loaded programs kept between runs. Loading costs a short command most
//! of its start-up (the kernel's verifier, its BTF parsed, the big maps
//! zeroed: docs/overhead.md); a run whose targets have all ended leaves
//! its programs and maps, detached, with a keeper: a process of its own
//! (`sysdiet __keep`) that lends them to the next run with the same
//! programs and options, resets what the run counted when they come back,
//! and exits when none has asked for SYSDIET_KEEP seconds (60 by default;
//! 0: no keeper, every run loads its own).
//!
//! Lent, not shared: a keeper lends its set to one run at a time (another
//! run meanwhile loads its own), and discards it unless the borrower says
//! it ended clean (detached, its rings read, no target alive). The keeper
//! and its borrowers meet at an abstract Unix socket named after the user
//! and the set (the object, its read-only data, which programs and maps);
//! each side checks that the other is the same user.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use libbpf_rs::skel::{OpenSkel, SkelBuilder};

use super::skel::types::{arg_key, bss};
use super::skel::SyscountSkelBuilder;
use crate::error::{Error, Result};

/// The bytes of a state slot's tag (its tid and start time) before its
/// state: `state_slot` in states.bpf.h.
const STATE_SLOT_TAG: usize = std::mem::offset_of!(super::skel::types::state_slot, s);

/// How long a keeper waits for the next run when SYSDIET_KEEP does not say.
const IDLE: Duration = Duration::from_secs(60);

/// The most descriptors a set has (SCM_RIGHTS takes up to 253).
const MAX_FDS: usize = 64;

/// The byte a borrower sends back when its run ended clean.
const CLEAN: u8 = b'c';

/// How long a borrower waits for a keeper's answer before loading its own.
const ANSWER_WAIT: Duration = Duration::from_secs(1);

/// How long the hooks a run gave back stay attached, waiting for the
/// next run. A tracepoint whose last probe went and came back within one
/// RCU grace period makes its new probe wait out that period (tracepoint.c:
/// TP_TRANSITION_SYNC_1_0_1), ~10 ms here; runs one after another (a
/// script's loop, hyperfine) then never detach. Meanwhile every syscall on
/// the host pays the hooks' floor (they find no target and leave).
const LINGER: Duration = Duration::from_millis(200);

/// How long keepers wait for a run, from SYSDIET_KEEP (seconds); None
/// when it says 0 or is not a number: no keeper.
pub fn idle() -> Option<Duration> {
    idle_from(std::env::var("SYSDIET_KEEP").ok().as_deref())
}

fn idle_from(setting: Option<&str>) -> Option<Duration> {
    match setting {
        None => Some(IDLE),
        Some(v) => v.trim().parse::<u64>().ok().filter(|&s| s > 0).map(Duration::from_secs),
    }
}

/// The socket a set's keeper listens on, in the abstract namespace.
fn address(set: &str) -> Vec<u8> {
    // SAFETY: geteuid cannot fail.
    format!("sysdiet/keep/{}/{set}", unsafe { libc::geteuid() }).into_bytes()
}

/// A set borrowed from its keeper: each map's and program's name and
/// descriptor, the hooks still attached (by program), what an untraced
/// syscall cost when the set was loaded (before any of its hooks: a run
/// that borrows them attached cannot measure it), and the connection that
/// gives it back.
pub struct Borrowed {
    pub syscall_ns: u64,
    pub maps: Vec<(String, OwnedFd)>,
    pub programs: Vec<(String, OwnedFd)>,
    pub links: Vec<(String, OwnedFd)>,
    pub lease: Lease,
}

/// The connection to the keeper a set was borrowed from. Dropped without
/// `give_back`, the keeper discards the set.
pub struct Lease(OwnedFd);

impl Lease {
    /// Tells the keeper the run ended clean, with the hooks still
    /// attached (by program): it resets the set and lends it again.
    pub fn give_back(self, links: &[(String, OwnedFd)]) {
        let mut text = vec![CLEAN];
        for (name, _) in links {
            text.extend_from_slice(format!("\nl:{name}").as_bytes());
        }
        let _ = send(&self.0, &text, &links.iter().map(|(_, fd)| fd.as_raw_fd()).collect::<Vec<_>>());
    }
}

/// Borrows set `set` from its keeper, if one has it free.
pub fn borrow(set: &str) -> Option<Borrowed> {
    let _t = crate::timings::span("borrow loaded programs");
    let sock = seqpacket().ok()?;
    connect(&sock, &address(set)).ok()?;
    if !same_user(&sock) {
        return None;
    }
    let tv = libc::timeval { tv_sec: ANSWER_WAIT.as_secs() as _, tv_usec: 0 };
    // SAFETY: sets a timeval option from a live value.
    unsafe {
        libc::setsockopt(sock.as_raw_fd(), libc::SOL_SOCKET, libc::SO_RCVTIMEO, (&tv as *const libc::timeval).cast(), std::mem::size_of_val(&tv) as _)
    };
    let (text, fds) = receive(&sock).ok()?;
    let mut lines = std::str::from_utf8(&text).ok()?.lines();
    let syscall_ns = lines.next()?.parse().ok()?;
    let names: Vec<&str> = lines.collect();
    if fds.is_empty() || names.len() != fds.len() {
        return None; // busy, or not a set
    }
    let (mut maps, mut programs, mut links) = (Vec::new(), Vec::new(), Vec::new());
    for (name, fd) in names.into_iter().zip(fds) {
        match name.split_once(':') {
            Some(("m", n)) => maps.push((n.to_string(), fd)),
            Some(("p", n)) => programs.push((n.to_string(), fd)),
            Some(("l", n)) => links.push((n.to_string(), fd)),
            _ => return None,
        }
    }
    Some(Borrowed { syscall_ns, maps, programs, links, lease: Lease(sock) })
}

/// Leaves a set, and its hooks still attached, with a new keeper, which
/// lends it from now on; if set `set` has a keeper already, the new one
/// exits and the set is freed.
pub fn leave(
    set: &str,
    idle: Duration,
    syscall_ns: u64,
    maps: &[(String, BorrowedFd<'_>)],
    programs: &[(String, BorrowedFd<'_>)],
    links: &[(String, BorrowedFd<'_>)],
) {
    let _t = crate::timings::span("leave the programs with a keeper");
    let mut args = vec!["__keep".to_string(), set.to_string(), idle.as_secs().to_string(), syscall_ns.to_string()];
    let mut inherited = Vec::new();
    for (kind, list) in [("m", maps), ("p", programs), ("l", links)] {
        for (name, fd) in list {
            // A copy without close-on-exec: the keeper inherits it.
            // SAFETY: duplicates a live descriptor.
            let dup = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD, 3) };
            if dup < 0 {
                return;
            }
            // SAFETY: dup is a new descriptor of ours.
            inherited.push(unsafe { OwnedFd::from_raw_fd(dup) });
            args.push(format!("{kind}:{name}={dup}"));
        }
    }
    use std::os::unix::process::CommandExt;
    // /proc/self/exe: this very binary, even if replaced on disk since.
    let _ = std::process::Command::new("/proc/self/exe")
        .arg0("sysdiet")
        .args(&args)
        .current_dir("/")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        // Its errors are seen with SYSDIET_DEBUG only: else it would hold
        // the run's stderr (a pipe, often) open for as long as it waits.
        .stderr(if std::env::var_os("SYSDIET_DEBUG").is_some() { std::process::Stdio::inherit() } else { std::process::Stdio::null() })
        .spawn();
    drop(inherited);
}

/// The keeper (`sysdiet __keep SET SECONDS SYSCALL_NS KIND:NAME=FD...`):
/// lends the inherited set until no run has asked for `idle`, or a
/// borrower did not give it back clean.
pub fn keep(set: &str, idle: Duration, syscall_ns: u64, given: &[String]) -> Result<()> {
    // Its own session: the terminal's signals and hang-up are not for it.
    // SAFETY: setsid has no memory effects.
    unsafe { libc::setsid() };
    let mut names = Vec::new();
    let mut fds = Vec::new();
    // Hooks still attached, by program: given back with the set.
    let mut attached: Vec<(String, OwnedFd)> = Vec::new();
    for arg in given {
        let (name, fd) = arg.rsplit_once('=').ok_or_else(|| Error::Usage(format!("__keep: not KIND:NAME=FD: {arg}")))?;
        let fd: RawFd = fd.parse().map_err(|_| Error::Usage(format!("__keep: not a descriptor: {arg}")))?;
        // SAFETY: the parent passed this descriptor open for us alone.
        let owned = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: sets a flag of a descriptor we own.
        unsafe { libc::fcntl(owned.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC) };
        match name.strip_prefix("l:") {
            Some(program) => attached.push((program.to_string(), owned)),
            None => {
                names.push(name.to_string());
                fds.push(owned);
            }
        }
    }
    close_inherited(fds.iter().chain(attached.iter().map(|(_, fd)| fd)).map(|fd| fd.as_raw_fd()).collect());
    let listener = seqpacket().map_err(|e| Error::Bpf(format!("keeper socket: {e}")))?;
    if bind_listen(&listener, &address(set)).is_err() {
        return Ok(()); // the set has a keeper already
    }
    let mut resetter = Resetter::new()?;
    // As the run that loaded it left it: counted in.
    resetter.reset(&names, &fds)?;
    let mut free_since = Instant::now();
    loop {
        // Free: wait for a run; detach the hooks after LINGER, leave after `idle`.
        let until = if attached.is_empty() { idle } else { LINGER };
        if !readable(&[&listener], Some(until.saturating_sub(free_since.elapsed())))[0] {
            if attached.is_empty() {
                return Ok(());
            }
            super::detach(std::mem::take(&mut attached));
            continue;
        }
        let Ok(run) = accept(&listener) else { continue };
        if !same_user(&run) {
            continue;
        }
        let mut text = format!("{syscall_ns}\n{}", names.join("\n"));
        for (program, _) in &attached {
            text += &format!("\nl:{program}");
        }
        let lent: Vec<RawFd> = fds.iter().chain(attached.iter().map(|(_, fd)| fd)).map(|fd| fd.as_raw_fd()).collect();
        if send(&run, text.as_bytes(), &lent).is_err() {
            continue; // gone before it was lent anything
        }
        // The run holds the hooks now: if it dies, they go with it.
        attached.clear();
        // Lent: turn others away until it comes back.
        loop {
            let ready = readable(&[&listener, &run], None);
            if ready[1] {
                // Not given back clean (closed, say): what it holds is unknown.
                let Ok((text, links)) = receive(&run) else { return Ok(()) };
                let mut lines = text.split(|&b| b == b'\n');
                if lines.next() != Some(&[CLEAN][..]) {
                    return Ok(());
                }
                let programs: Vec<String> = lines.map(|l| String::from_utf8_lossy(l.strip_prefix(b"l:").unwrap_or(l)).into_owned()).collect();
                if programs.len() != links.len() {
                    return Ok(());
                }
                attached = programs.into_iter().zip(links).collect();
                resetter.reset(&names, &fds)?;
                free_since = Instant::now();
                break;
            }
            if ready[0] {
                if let Ok(other) = accept(&listener) {
                    let _ = send(&other, b"busy", &[]);
                }
            }
        }
    }
}

/// Closes every descriptor but stdio and `keep`: a keeper outlives the
/// run that started it, and must not hold what that run was given
/// without close-on-exec (a pipe a CI step waits on, a jobserver).
fn close_inherited(keep: Vec<RawFd>) {
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else { return };
    let open: Vec<RawFd> = dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect();
    for fd in open {
        if fd > 2 && !keep.contains(&fd) {
            // SAFETY: closes a descriptor nothing in this process uses (the
            // directory's own is gone, read to its end above).
            unsafe { libc::close(fd) };
        }
    }
}

/// The writable global data's first contents (.bss, .data.*), by map
/// name, as the object holds them (zeros for .bss).
fn initial_images() -> Vec<(String, Vec<u8>)> {
    let storage = Box::leak(Box::new(std::mem::MaybeUninit::uninit()));
    let Ok(open) = SyscountSkelBuilder::default().open(storage) else { return Vec::new() };
    open.open_object()
        .maps()
        .filter_map(|m| {
            let name = m.name().to_string_lossy().into_owned();
            // libbpf names them after the object: "syscount.bss".
            let writable = name.ends_with(".bss") || name.contains(".data");
            writable.then(|| Some((name, m.initial_value()?.to_vec()))).flatten()
        })
        .collect()
}

/// Puts a set back as a load leaves it: hash maps emptied, arrays zeroed
/// (global data to its first contents), the rings' unread records
/// skipped. The read-only data is the set's own; task storage goes with
/// its tasks, and a run gives a set back only when its targets have ended.
/// A reset runs while the next run starts, on the same CPUs: each map is
/// gone over once, in as few syscalls as it takes, and what it maps stays
/// mapped for the next reset.
struct Resetter {
    cpus: usize,
    initial: Vec<(String, Vec<u8>)>,
    /// (descriptor, offset) -> where it is mapped, for the keeper's life.
    mapped: std::collections::HashMap<(RawFd, usize), *mut u8>,
    /// Each map's kind and sizes, which do not change.
    infos: std::collections::HashMap<RawFd, libbpf_sys::bpf_map_info>,
}

impl Resetter {
    fn new() -> Result<Resetter> {
        let cpus = libbpf_rs::num_possible_cpus().map_err(|e| Error::Bpf(e.to_string()))?;
        Ok(Resetter { cpus, initial: initial_images(), mapped: Default::default(), infos: Default::default() })
    }

    fn reset(&mut self, names: &[String], fds: &[OwnedFd]) -> Result<()> {
        // Read before the global data is put back.
        let logged = names.iter().zip(fds).find(|(n, _)| n.ends_with(".bss")).map(|(_, fd)| Logged::read(fd.as_raw_fd())).unwrap_or_default();
        for (kind_name, fd) in names.iter().zip(fds) {
            let Some(name) = kind_name.strip_prefix("m:") else { continue };
            let info = match self.infos.get(&fd.as_raw_fd()) {
                Some(info) => *info,
                None => {
                    let info = super::maps::map_info(fd.as_raw_fd()).map_err(|e| Error::Bpf(format!("keeper reading a map's kind: {e}")))?;
                    self.infos.insert(fd.as_raw_fd(), info);
                    info
                }
            };
            let fd = fd.as_raw_fd();
            let zeros = |len: usize| vec![0u8; len];
            let failed = |what: &str| Error::Bpf(format!("keeper resetting map {name}: {what}: {}", io::Error::last_os_error()));
            match info.type_ {
                libbpf_sys::BPF_MAP_TYPE_HASH if name == "arg_stats" && logged.arg_keys.is_some() => {
                    delete_keys(fd, logged.arg_keys.as_deref().unwrap_or_default()).map_err(|_| failed("delete"))?
                }
                libbpf_sys::BPF_MAP_TYPE_HASH | libbpf_sys::BPF_MAP_TYPE_PERCPU_HASH | libbpf_sys::BPF_MAP_TYPE_LRU_HASH => {
                    empty(fd, &info, self.cpus).map_err(|_| failed("delete"))?
                }
                // Read-only data: the set's own, frozen.
                libbpf_sys::BPF_MAP_TYPE_ARRAY if info.map_flags & libbpf_sys::BPF_F_RDONLY_PROG != 0 => {}
                libbpf_sys::BPF_MAP_TYPE_ARRAY => {
                    let value_size = info.value_size as usize;
                    if let Some((_, image)) = self.initial.iter().find(|(n, _)| n == name) {
                        let mut value = zeros(value_size);
                        let n = image.len().min(value_size);
                        value[..n].copy_from_slice(&image[..n]);
                        update(fd, 0, &value).map_err(|_| failed("update"))?;
                    } else if info.map_flags & libbpf_sys::BPF_F_MMAPABLE != 0 {
                        let len = value_size * info.max_entries as usize;
                        let p = self.map(fd, 0, len, libc::PROT_READ | libc::PROT_WRITE).ok_or_else(|| failed("mmap"))?;
                        match logged.first_slots.as_deref().filter(|_| name == "first_calls") {
                            // Threads' states: their tags freed, not their
                            // 8 KiB each, which a thread taking a slot
                            // copies its own over.
                            _ if name == "state_slots" => {
                                let stride = value_size.next_multiple_of(8);
                                for slot in 0..info.max_entries as usize {
                                    // SAFETY: a slot's tag, within the mapping.
                                    unsafe { std::ptr::write_bytes(p.add(slot * stride), 0, STATE_SLOT_TAG) };
                                }
                            }
                            Some(slots) => {
                                for &slot in slots.iter().filter(|&&s| (s as usize) < info.max_entries as usize) {
                                    // SAFETY: a value within the mapping.
                                    unsafe { std::ptr::write_bytes(p.add(slot as usize * value_size), 0, value_size) };
                                }
                            }
                            // SAFETY: the array's values, mapped shared and
                            // writable, exactly `len` long.
                            None => unsafe { std::ptr::write_bytes(p, 0, len) },
                        }
                    } else {
                        update_all(fd, info.max_entries, &zeros(value_size)).map_err(|_| failed("update"))?;
                    }
                }
                libbpf_sys::BPF_MAP_TYPE_PERCPU_ARRAY => {
                    let value = zeros(super::maps::percpu_stride(info.value_size as usize) * self.cpus);
                    update_all(fd, info.max_entries, &value).map_err(|_| failed("update"))?;
                }
                libbpf_sys::BPF_MAP_TYPE_RINGBUF => self.skip_unread(fd).ok_or_else(|| failed("mmap"))?,
                _ => {}
            }
        }
        Ok(())
    }

    /// `len` bytes of map `fd` from `offset`, mapped shared: once.
    fn map(&mut self, fd: RawFd, offset: usize, len: usize, prot: libc::c_int) -> Option<*mut u8> {
        if let Some(&p) = self.mapped.get(&(fd, offset)) {
            return Some(p);
        }
        // SAFETY: a new shared mapping of a map the keeper holds for its
        // whole life; never unmapped but by its exit.
        let p = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, libc::MAP_SHARED, fd, offset as libc::off_t) };
        if p == libc::MAP_FAILED {
            return None;
        }
        self.mapped.insert((fd, offset), p.cast());
        Some(p.cast())
    }

    /// Moves a ring's reader past whatever was written and not read.
    fn skip_unread(&mut self, fd: RawFd) -> Option<()> {
        let page = crate::backend::perf::page_size();
        // The ring's first page is the reader's position (writable), its
        // second the writer's (read-only); each u64 at its page's start,
        // as the kernel lays them out.
        let consumer = self.map(fd, 0, page, libc::PROT_READ | libc::PROT_WRITE)?;
        let producer = self.map(fd, page, page, libc::PROT_READ)?;
        // SAFETY: both pages are mapped for the keeper's life, 8-aligned.
        unsafe {
            let written = std::sync::atomic::AtomicU64::from_ptr(producer.cast()).load(std::sync::atomic::Ordering::Acquire);
            std::sync::atomic::AtomicU64::from_ptr(consumer.cast()).store(written, std::sync::atomic::Ordering::Release);
        }
        Some(())
    }
}

/// What the programs logged of a run (a short one's few): the keys they
/// made in arg_stats, deleted by key, not by walking every bucket
/// (readout::logged_arg_keys), and the first_calls slots they took,
/// zeroed one by one, not the whole array. Read from the set's .bss, whose
/// layout is the object's.
#[derive(Default)]
struct Logged {
    arg_keys: Option<Vec<arg_key>>,
    first_slots: Option<Vec<u32>>,
}

impl Logged {
    fn read(bss_fd: RawFd) -> Logged {
        let mut bytes = vec![0u8; std::mem::size_of::<bss>()];
        let key = 0u32;
        // SAFETY: the .bss map's one value, which is a `bss`, into as many bytes.
        if unsafe { libbpf_sys::bpf_map_lookup_elem(bss_fd, (&key as *const u32).cast(), bytes.as_mut_ptr().cast()) } != 0 {
            return Logged::default();
        }
        let bss: bss = super::maps::from_bytes(&bytes);
        Logged {
            arg_keys: super::maps::logged_arg_keys(&bss).map(<[_]>::to_vec),
            first_slots: super::maps::logged_first_slots(&bss).map(<[_]>::to_vec),
        }
    }
}

/// Deletes `keys` from a hash map in batches; one not there (swept out
/// during the run, or logged twice) is passed over.
fn delete_keys(fd: RawFd, keys: &[arg_key]) -> std::result::Result<(), ()> {
    let opts = libbpf_sys::bpf_map_batch_opts { sz: std::mem::size_of::<libbpf_sys::bpf_map_batch_opts>() as _, ..Default::default() };
    let mut at = 0;
    while at < keys.len() {
        let mut count = (keys.len() - at) as u32;
        // SAFETY: `count` keys of the map's key size from `at`.
        let ret = unsafe { libbpf_sys::bpf_map_delete_batch(fd, keys[at..].as_ptr().cast(), &mut count, &opts) };
        match -ret.min(0) {
            0 => return Ok(()),
            // Key `at + count` is not there.
            libc::ENOENT => at += count as usize + 1,
            _ => {
                return keys[at..].iter().try_for_each(|k| {
                    // SAFETY: deletes by a key of the map's key size.
                    let ret = unsafe { libbpf_sys::bpf_map_delete_elem(fd, (k as *const arg_key).cast()) };
                    if ret == 0 || -ret == libc::ENOENT {
                        Ok(())
                    } else {
                        Err(())
                    }
                });
            }
        }
    }
    Ok(())
}

/// Empties a hash map in one pass over its buckets (a batch read and
/// delete); where the kernel has no batches, key by key.
fn empty(fd: RawFd, info: &libbpf_sys::bpf_map_info, cpus: usize) -> std::result::Result<(), ()> {
    let vs = match info.type_ {
        libbpf_sys::BPF_MAP_TYPE_PERCPU_HASH => super::maps::percpu_stride(info.value_size as usize) * cpus,
        _ => info.value_size as usize,
    };
    match super::maps::walk_batches(fd, (info.key_size as usize, vs, info.max_entries), super::maps::Batch::ReadAndDelete, |_, _| {}) {
        Ok(true) => Ok(()),
        Ok(false) => empty_key_by_key(fd, info.key_size as usize),
        Err(_) => Err(()),
    }
}

fn empty_key_by_key(fd: RawFd, key_size: usize) -> std::result::Result<(), ()> {
    let mut key = vec![0u8; key_size];
    // SAFETY: key is key-sized; the first key, while any is left.
    while unsafe { libbpf_sys::bpf_map_get_next_key(fd, std::ptr::null(), key.as_mut_ptr().cast()) } == 0 {
        // SAFETY: deletes by a key-sized key.
        if unsafe { libbpf_sys::bpf_map_delete_elem(fd, key.as_ptr().cast()) } != 0 {
            return Err(());
        }
    }
    Ok(())
}

/// Writes `value` at every index of an array: one batch, or index by index
/// where the kernel has no batches.
fn update_all(fd: RawFd, entries: u32, value: &[u8]) -> std::result::Result<(), ()> {
    let keys: Vec<u32> = (0..entries).collect();
    let values = value.repeat(entries as usize);
    let mut count = entries;
    let opts = libbpf_sys::bpf_map_batch_opts { sz: std::mem::size_of::<libbpf_sys::bpf_map_batch_opts>() as _, ..Default::default() };
    // SAFETY: `count` u32 keys and as many values of the map's value size.
    let ret = unsafe { libbpf_sys::bpf_map_update_batch(fd, keys.as_ptr().cast(), values.as_ptr().cast(), &mut count, &opts) };
    if ret == 0 && count == entries {
        return Ok(());
    }
    // Zeros again where the batch did write them: a kernel without batches
    // may not say how far it got.
    (0..entries).try_for_each(|k| update(fd, k, value))
}

fn update(fd: RawFd, key: u32, value: &[u8]) -> std::result::Result<(), ()> {
    // SAFETY: a u32 key and a value of the map's value size.
    let ret = unsafe { libbpf_sys::bpf_map_update_elem(fd, (&key as *const u32).cast(), value.as_ptr().cast(), 0) };
    if ret == 0 {
        Ok(())
    } else {
        Err(())
    }
}

fn seqpacket() -> io::Result<OwnedFd> {
    // SAFETY: socket(2); the descriptor is owned at once.
    let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor of ours.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// An abstract address: a NUL, then the name.
fn sockaddr(name: &[u8]) -> (libc::sockaddr_un, libc::socklen_t) {
    // SAFETY: sockaddr_un is plain data; zero is valid.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as _;
    let n = name.len().min(addr.sun_path.len() - 1);
    for (d, s) in addr.sun_path[1..=n].iter_mut().zip(name) {
        *d = *s as libc::c_char;
    }
    (addr, (std::mem::size_of::<libc::sa_family_t>() + 1 + n) as libc::socklen_t)
}

fn connect(sock: &OwnedFd, name: &[u8]) -> io::Result<()> {
    let (addr, len) = sockaddr(name);
    // SAFETY: a sockaddr_un of `len` meaningful bytes.
    if unsafe { libc::connect(sock.as_raw_fd(), (&addr as *const libc::sockaddr_un).cast(), len) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn bind_listen(sock: &OwnedFd, name: &[u8]) -> io::Result<()> {
    let (addr, len) = sockaddr(name);
    // SAFETY: a sockaddr_un of `len` meaningful bytes; then listen.
    if unsafe { libc::bind(sock.as_raw_fd(), (&addr as *const libc::sockaddr_un).cast(), len) } != 0
        || unsafe { libc::listen(sock.as_raw_fd(), 8) } != 0
    {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn accept(listener: &OwnedFd) -> io::Result<OwnedFd> {
    // SAFETY: accept4 without an address; the descriptor is owned at once.
    let fd = unsafe { libc::accept4(listener.as_raw_fd(), std::ptr::null_mut(), std::ptr::null_mut(), libc::SOCK_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor of ours.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Whether the process at the other end runs as our effective user.
fn same_user(sock: &OwnedFd) -> bool {
    // SAFETY: ucred is plain data; SO_PEERCRED fills `len` bytes of it.
    let mut cred: libc::ucred = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    let ok =
        unsafe { libc::getsockopt(sock.as_raw_fd(), libc::SOL_SOCKET, libc::SO_PEERCRED, (&mut cred as *mut libc::ucred).cast(), &mut len) } == 0;
    // SAFETY: geteuid cannot fail.
    ok && cred.uid == unsafe { libc::geteuid() }
}

/// Which of `fds` can be read, waiting at most `timeout` (None: for ever).
fn readable(fds: &[&OwnedFd], timeout: Option<Duration>) -> Vec<bool> {
    let mut polls: Vec<libc::pollfd> = fds.iter().map(|fd| libc::pollfd { fd: fd.as_raw_fd(), events: libc::POLLIN, revents: 0 }).collect();
    let ms = timeout.map_or(-1, |t| t.as_millis().min(i32::MAX as u128) as i32);
    loop {
        // SAFETY: polls is a live array of its length.
        let n = unsafe { libc::poll(polls.as_mut_ptr(), polls.len() as _, ms) };
        if n >= 0 {
            return polls.iter().map(|p| p.revents != 0).collect();
        }
        if io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            return vec![false; fds.len()];
        }
    }
}

/// Sends `text` with descriptors `raw` attached, as one message.
fn send(sock: &OwnedFd, text: &[u8], raw: &[RawFd]) -> io::Result<()> {
    let fd_bytes = std::mem::size_of_val(raw);
    // SAFETY: CMSG_SPACE of a byte count.
    let mut control = vec![0u8; unsafe { libc::CMSG_SPACE(fd_bytes as u32) } as usize];
    let mut iov = libc::iovec { iov_base: text.as_ptr() as *mut _, iov_len: text.len() };
    // SAFETY: msghdr is plain data; zero is valid.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    if !raw.is_empty() {
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = control.len() as _;
        // SAFETY: the control buffer holds one SCM_RIGHTS header and
        // `fd_bytes` of descriptors, as CMSG_SPACE sized it.
        unsafe {
            let c = libc::CMSG_FIRSTHDR(&msg);
            (*c).cmsg_level = libc::SOL_SOCKET;
            (*c).cmsg_type = libc::SCM_RIGHTS;
            (*c).cmsg_len = libc::CMSG_LEN(fd_bytes as u32) as _;
            std::ptr::copy_nonoverlapping(raw.as_ptr().cast::<u8>(), libc::CMSG_DATA(c), fd_bytes);
        }
    }
    // SAFETY: msg points at live buffers.
    if unsafe { libc::sendmsg(sock.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// One message and the descriptors attached to it.
fn receive(sock: &OwnedFd) -> io::Result<(Vec<u8>, Vec<OwnedFd>)> {
    let mut text = vec![0u8; 8192];
    // SAFETY: CMSG_SPACE of a byte count.
    let mut control = vec![0u8; unsafe { libc::CMSG_SPACE((MAX_FDS * std::mem::size_of::<RawFd>()) as u32) } as usize];
    let mut iov = libc::iovec { iov_base: text.as_mut_ptr().cast(), iov_len: text.len() };
    // SAFETY: msghdr is plain data; zero is valid.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = control.len() as _;
    // SAFETY: msg points at live buffers of the lengths it says.
    let n = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut fds = Vec::new();
    // SAFETY: walks the control messages the kernel wrote, within
    // msg_controllen; each SCM_RIGHTS one holds descriptors now ours.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                let bytes = (*c).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                let data = libc::CMSG_DATA(c);
                for i in 0..bytes / std::mem::size_of::<RawFd>() {
                    let fd = std::ptr::read_unaligned(data.cast::<RawFd>().add(i));
                    fds.push(OwnedFd::from_raw_fd(fd));
                }
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    if msg.msg_flags & libc::MSG_CTRUNC != 0 {
        return Err(io::Error::other("descriptors cut off"));
    }
    text.truncate(n as usize);
    Ok((text, fds))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_descriptor_and_its_name_cross_a_socket_pair() {
        let mut pair = [0; 2];
        // SAFETY: socketpair fills two descriptors, owned at once.
        assert_eq!(unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0, pair.as_mut_ptr()) }, 0);
        let (a, b) = unsafe { (OwnedFd::from_raw_fd(pair[0]), OwnedFd::from_raw_fd(pair[1])) };
        let file = OwnedFd::from(std::fs::File::open("/proc/self/stat").unwrap());
        send(&a, b"m:.bss", &[file.as_raw_fd()]).unwrap();
        let (text, fds) = receive(&b).unwrap();
        assert_eq!(text, b"m:.bss");
        assert_eq!(fds.len(), 1);
        assert!(std::fs::read_link(format!("/proc/self/fd/{}", fds[0].as_raw_fd())).unwrap().ends_with("stat"));
        assert!(same_user(&b));
    }

    #[test]
    fn a_reset_zeroes_the_logged_first_slots_or_every_one() {
        use libbpf_rs::{MapCore, MapFlags, MapHandle, MapType};
        use std::os::fd::AsFd;
        let opts = super::super::maps::create_opts;
        let size = std::mem::size_of::<bss>() as u32;
        let Ok(globals) = MapHandle::create(MapType::Array, Some("t.bss"), 4, size, 1, &opts(0)) else {
            return; // no BPF rights here
        };
        let slots = MapHandle::create(MapType::Array, Some("first_calls"), 4, 8, 64, &opts(libbpf_sys::BPF_F_MMAPABLE)).unwrap();
        // Any other mappable array (first_tags) is zeroed whole.
        let tags = MapHandle::create(MapType::Array, Some("first_tags"), 4, 8, 8, &opts(libbpf_sys::BPF_F_MMAPABLE)).unwrap();
        let names = ["m:t.bss".to_string(), "m:first_calls".to_string(), "m:first_tags".to_string()];
        let fds = [&globals, &slots, &tags].map(|m| m.as_fd().try_clone_to_owned().unwrap());
        let value = |m: &MapHandle, i: u32| u64::from_ne_bytes(m.lookup(&i.to_ne_bytes(), MapFlags::ANY).unwrap().unwrap().try_into().unwrap());
        let word = |i: u32| value(&slots, i);
        let mut resetter = Resetter::new().unwrap();
        let blank: bss = super::super::maps::from_bytes(&vec![0u8; size as usize]);
        let logged = blank.first_slots_logged.len() as u64;
        for (taken, zeroed) in [(2u64, vec![5, 9]), (logged + 1, vec![5, 9, 12])] {
            for i in [5u32, 9, 12] {
                slots.update(&i.to_ne_bytes(), &7u64.to_ne_bytes(), MapFlags::ANY).unwrap();
            }
            tags.update(&7u32.to_ne_bytes(), &0x5au64.to_ne_bytes(), MapFlags::ANY).unwrap();
            let mut g = blank;
            g.first_slots_taken = taken;
            g.first_slots_logged[..2].copy_from_slice(&[5, 9]);
            globals.update(&0u32.to_ne_bytes(), super::super::maps::bytes_of(&g), MapFlags::ANY).unwrap();
            resetter.reset(&names, &fds).unwrap();
            for i in [5, 9, 12] {
                assert_eq!(word(i) == 0, zeroed.contains(&i), "slot {i} after a run that took {taken}");
            }
            assert_eq!(value(&tags, 7), 0, "the tags after a run that took {taken}");
        }
    }

    #[test]
    fn a_reset_frees_each_state_slots_tag_and_leaves_its_state() {
        use libbpf_rs::{MapCore, MapFlags, MapHandle, MapType};
        use std::os::fd::AsFd;
        let opts = super::super::maps::create_opts(libbpf_sys::BPF_F_MMAPABLE);
        let size = std::mem::size_of::<super::super::skel::types::state_slot>();
        let Ok(slots) = MapHandle::create(MapType::Array, Some("state_slots"), 4, size as u32, 4, &opts) else {
            return; // no BPF rights here
        };
        for i in 0..4u32 {
            slots.update(&i.to_ne_bytes(), &vec![0xa5u8; size], MapFlags::ANY).unwrap();
        }
        let fds = [slots.as_fd().try_clone_to_owned().unwrap()];
        Resetter::new().unwrap().reset(&["m:state_slots".to_string()], &fds).unwrap();
        for i in 0..4u32 {
            let v = slots.lookup(&i.to_ne_bytes(), MapFlags::ANY).unwrap().unwrap();
            assert!(v[..STATE_SLOT_TAG].iter().all(|&b| b == 0), "slot {i}'s tag");
            assert!(v[STATE_SLOT_TAG..].iter().all(|&b| b == 0xa5), "slot {i}'s state");
        }
    }

    #[test]
    fn sysdiet_keep_says_how_long_and_zero_says_never() {
        assert_eq!(idle_from(None), Some(IDLE));
        assert_eq!(idle_from(Some("5")), Some(Duration::from_secs(5)));
        assert_eq!(idle_from(Some("0")), None);
        assert_eq!(idle_from(Some("soon")), None);
    }
}
