//! Helpers every reader of the BPF side's maps uses: where the object's
//! storage and the kernel's BTF come from, batched map reads, the kernel's
//! errors said for humans, and the generated plain-data types read from
//! bytes.

use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};
use std::path::Path;

use libbpf_rs::MapCore;

use super::skel::types::{arg_key, bss};
use crate::error::{Error, Result};

/// What loading a skeleton needs first: the kernel's BTF (else a clear
/// error), libbpf quiet unless SYSDIET_DEBUG, and the storage of the object.
/// The skeleton borrows that object for as long as it lives, the whole run:
/// one small leak per load.
pub fn object_storage() -> Result<&'static mut MaybeUninit<libbpf_rs::OpenObject>> {
    require_btf()?;
    quiet_libbpf();
    Ok(Box::leak(Box::new(MaybeUninit::uninit())))
}

/// Keeps libbpf's own messages (a missing BTF, a refused probe) off the
/// user's terminal, unless SYSDIET_DEBUG asks for them: sysdiet says what
/// went wrong in its own line. Called before any call into libbpf; once
/// per process, so that a later call never undoes a printer set since
/// (the verifier log's).
pub fn quiet_libbpf() {
    static QUIET: std::sync::Once = std::sync::Once::new();
    QUIET.call_once(|| {
        if std::env::var_os("SYSDIET_DEBUG").is_none() {
            libbpf_rs::set_print(None);
        }
    });
}

/// Runs a loaded program once (BPF_PROG_TEST_RUN), never attached, with
/// `ctx` as its context (a syscall program's is copied back into it): its
/// return value, None if the run failed.
pub fn run_once(program: BorrowedFd<'_>, ctx: &mut [u8]) -> Option<u32> {
    let mut opts = libbpf_sys::bpf_test_run_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_test_run_opts>() as _,
        ctx_in: if ctx.is_empty() { std::ptr::null_mut() } else { ctx.as_mut_ptr().cast() },
        ctx_size_in: ctx.len() as u32,
        ..Default::default()
    };
    // SAFETY: a loaded program's descriptor; the context is `ctx`, as long
    // as it says, and written back no longer.
    let err = unsafe { libbpf_sys::bpf_prog_test_run_opts(program.as_raw_fd(), &mut opts) };
    (err == 0).then_some(opts.retval)
}

/// What the kernel says of map `fd`: its kind, sizes, flags and id.
pub fn map_info(fd: RawFd) -> std::io::Result<libbpf_sys::bpf_map_info> {
    let mut info = libbpf_sys::bpf_map_info::default();
    let mut len = std::mem::size_of::<libbpf_sys::bpf_map_info>() as u32;
    // SAFETY: info is a bpf_map_info of `len` bytes.
    if unsafe { libbpf_sys::bpf_map_get_info_by_fd(fd, &mut info, &mut len) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(info)
}

/// An error naming the file if the kernel publishes no BTF: the programs
/// are relocated against it (CO-RE).
pub fn require_btf() -> Result<()> {
    let btf = kernel_btf_path();
    match Path::new(&btf).exists() {
        true => Ok(()),
        false => Err(Error::NoBtf { release: crate::linux::host::kernel_release(), path: btf }),
    }
}

/// Where the kernel publishes its BTF; `SYSDIET_KERNEL_BTF` overrides it so
/// that the no-BTF error can be tested on a kernel that has BTF.
pub fn kernel_btf_path() -> std::path::PathBuf {
    std::env::var_os("SYSDIET_KERNEL_BTF").map(Into::into).unwrap_or_else(|| "/sys/kernel/btf/vmlinux".into())
}

/// Whether `SYSDIET_KERNEL_BTF` stands in for the kernel's BTF: what is
/// kept for the running kernel (its features, its tracepoints' ids) is then
/// not its answer.
pub fn kernel_btf_overridden() -> bool {
    std::env::var_os("SYSDIET_KERNEL_BTF").is_some()
}

/// The most entries a walk reads a call.
const BATCH: u32 = 4096;
/// A walk's first batch.
const FIRST_BATCH: u32 = 64;

/// A hash map's entries as read: keys and values packed, one allocation
/// each, not two per entry (a host's table holds ~100,000).
pub struct MapEntries {
    keys: Vec<u8>,
    values: Vec<u8>,
    ks: usize,
    vs: usize,
}

impl MapEntries {
    /// None yet, of keys `ks` and values `vs` bytes long.
    pub fn new(ks: usize, vs: usize) -> MapEntries {
        MapEntries { keys: Vec::new(), values: Vec::new(), ks, vs }
    }

    /// One more (key, value), as bytes.
    pub fn push(&mut self, key: &[u8], value: &[u8]) {
        self.keys.extend_from_slice(key);
        self.values.extend_from_slice(value);
    }

    /// Each (key, value), as bytes.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.keys.chunks_exact(self.ks).zip(self.values.chunks_exact(self.vs))
    }
}

/// Every (key, value) of a map, read in batches. A batch ends at a
/// bucket's end, so a short one is not the last: read until ENOENT. A
/// per-CPU map's value is every possible CPU's, each `percpu_stride` long.
pub fn read_all<M: MapCore>(map: &M) -> Result<MapEntries> {
    let ks = map.key_size() as usize;
    let vs = if map.map_type().is_percpu() {
        percpu_stride(map.value_size() as usize) * libbpf_rs::num_possible_cpus().map_err(bpf_error)?
    } else {
        map.value_size() as usize
    };
    let mut out = MapEntries { keys: Vec::new(), values: Vec::new(), ks, vs };
    let walked = walk_batches(map.as_fd().as_raw_fd(), (ks, vs, map.max_entries()), Batch::Read, |keys, values| {
        out.keys.extend_from_slice(keys);
        out.values.extend_from_slice(values);
    });
    match walked {
        Ok(true) => Ok(out),
        Ok(false) => read_each(map, out),
        Err(err) => Err(Error::Bpf(format!("reading map {}: {}", map.name().to_string_lossy(), std::io::Error::from_raw_os_error(err)))),
    }
}

/// What a batch walk does to the entries it reads.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Batch {
    Read,
    ReadAndDelete,
}

/// Walks map `fd` (keys of `ks` bytes, values of `vs`, at most `entries`)
/// in batches, handing each batch's packed keys and values to `each`. A
/// batch ends at a bucket's end, so a short one is not the last: it walks
/// until ENOENT. Ok(false): no batches for this map type on this kernel
/// (arrays before 5.11, say); Err: the errno.
pub fn walk_batches(
    fd: RawFd,
    (ks, vs, entries): (usize, usize, u32),
    how: Batch,
    mut each: impl FnMut(&[u8], &[u8]),
) -> std::result::Result<bool, i32> {
    // Small at first, and no bigger than the map: a short run's few
    // entries need small buffers, zeroed and faulted in at each walk (a
    // big one is a fresh mapping, unmapped with a TLB shootdown to every
    // CPU the process's threads ran on). Full batches grow it to BATCH.
    let mut batch = FIRST_BATCH.min(entries.max(1)) as usize;
    let (mut keys, mut values) = (vec![0u8; ks * batch], vec![0u8; vs * batch]);
    let mut token = vec![0u8; ks];
    let mut first = true;
    loop {
        let mut count = batch as u32;
        let opts = libbpf_sys::bpf_map_batch_opts { sz: std::mem::size_of::<libbpf_sys::bpf_map_batch_opts>() as _, ..Default::default() };
        let in_token = token.clone();
        let in_batch = if first { std::ptr::null_mut() } else { in_token.as_ptr() as *mut _ };
        let (k, v, c) = (keys.as_mut_ptr().cast(), values.as_mut_ptr().cast(), &mut count);
        // SAFETY: buffers sized for `count` keys and values and one token.
        let ret = unsafe {
            match how {
                Batch::Read => libbpf_sys::bpf_map_lookup_batch(fd, in_batch, token.as_mut_ptr().cast(), k, v, c, &opts),
                Batch::ReadAndDelete => libbpf_sys::bpf_map_lookup_and_delete_batch(fd, in_batch, token.as_mut_ptr().cast(), k, v, c, &opts),
            }
        };
        let err = -ret.min(0);
        if first && (err == ENOTSUPP || err == libc::EINVAL) {
            return Ok(false);
        }
        if err == libc::ENOSPC && count == 0 {
            // One bucket holds more than a batch: a bigger batch.
            batch *= 2;
            keys.resize(ks * batch, 0);
            values.resize(vs * batch, 0);
            token = in_token;
            continue;
        }
        if err != 0 && err != libc::ENOENT {
            return Err(err);
        }
        let n = count as usize;
        each(&keys[..n * ks], &values[..n * vs]);
        if err == libc::ENOENT {
            return Ok(true);
        }
        first = false;
        if n == batch && batch < BATCH as usize {
            batch = (batch * 4).min(BATCH as usize);
            keys.resize(ks * batch, 0);
            values.resize(vs * batch, 0);
        }
    }
}

/// The entries of a hash map under `keys`, each looked up: for a few
/// known keys, cheaper than a batch read, which walks every bucket. Keys
/// not in the map are left out.
pub fn read_keys<'k, M: MapCore>(map: &M, keys: impl Iterator<Item = &'k [u8]>) -> Result<MapEntries> {
    let mut out = MapEntries::new(map.key_size() as usize, map.value_size() as usize);
    for key in keys {
        if let Some(value) = map.lookup(key, libbpf_rs::MapFlags::ANY).map_err(bpf_error)? {
            out.push(key, &value);
        }
    }
    Ok(out)
}

/// The keys the programs made in arg_stats, when they logged every one
/// (ARG_KEYS_LOGGED in state.bpf.h); None: the table must be walked.
pub fn logged_arg_keys(bss: &bss) -> Option<&[arg_key]> {
    whole_log(&bss.arg_keys_logged, &bss.arg_keys_made)
}

/// The slots the programs took in first_calls, when they logged every one
/// (FIRST_SLOTS_LOGGED in state.bpf.h); None: any word may be set.
pub fn logged_first_slots(bss: &bss) -> Option<&[u32]> {
    whole_log(&bss.first_slots_logged, &bss.first_slots_taken)
}

/// The first `count` entries of a log the programs fill, when it holds
/// them all (a count past its end says it does not).
fn whole_log<'a, T>(log: &'a [T], count: &u64) -> Option<&'a [T]> {
    // SAFETY: a field the programs update atomically (in the mapped .bss,
    // or a copy of it); read whole, once.
    let n = unsafe { std::ptr::read_volatile(count) };
    log.get(..usize::try_from(n).ok()?)
}

/// The kernel's "operation not supported" (not in libc: ENOTSUPP).
const ENOTSUPP: i32 = 524;

/// Every (key, value) of a map, a key at a time, into `out`.
fn read_each<M: MapCore>(map: &M, mut out: MapEntries) -> Result<MapEntries> {
    let fd = map.as_fd().as_raw_fd();
    let mut key = vec![0u8; out.ks];
    let mut next = vec![0u8; out.ks];
    let mut value = vec![0u8; out.vs];
    let mut first = true;
    loop {
        // SAFETY: key and next are key-sized; the first call has no key.
        let ret =
            unsafe { libbpf_sys::bpf_map_get_next_key(fd, if first { std::ptr::null() } else { key.as_ptr().cast() }, next.as_mut_ptr().cast()) };
        if ret < 0 {
            return Ok(out);
        }
        first = false;
        std::mem::swap(&mut key, &mut next);
        // SAFETY: value is the size of a value (every CPU's, for a per-CPU map).
        if unsafe { libbpf_sys::bpf_map_lookup_elem(fd, key.as_ptr().cast(), value.as_mut_ptr().cast()) } == 0 {
            out.keys.extend_from_slice(&key);
            out.values.extend_from_slice(&value);
        }
    }
}

/// Where each CPU's part of a per-CPU value starts: the kernel rounds the
/// size up to 8.
pub fn percpu_stride(value_size: usize) -> usize {
    value_size.div_ceil(8) * 8
}

/// The kernel's map error, said for humans: EPERM means missing rights.
pub fn bpf_error(e: libbpf_rs::Error) -> Error {
    let text = e.to_string();
    match os_error(&text) {
        // EPERM: bpf(2) and perf_event_open(2) without the capabilities.
        Some(libc::EPERM) => Error::NoBpfRights,
        // EACCES from a load is the verifier refusing a program: a bug of
        // ours on this kernel, not the user's rights.
        Some(libc::EACCES) => Error::Bpf(format!("the kernel's verifier refused a program ({text})")),
        _ if e.kind() == libbpf_rs::ErrorKind::PermissionDenied => Error::NoBpfRights,
        _ => Error::Bpf(text),
    }
}

/// The errno in an error's text ("... (os error 13)").
fn os_error(text: &str) -> Option<i32> {
    let (_, rest) = text.rsplit_once("(os error ")?;
    rest.split(')').next()?.parse().ok()
}

/// FNV-1a of `bytes`: stable across builds and processes, unlike std's
/// hasher (it names files on disk and a keeper's socket).
pub const fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    let mut i = 0;
    while i < bytes.len() {
        h = (h ^ bytes[i] as u64).wrapping_mul(0x100000001b3);
        i += 1;
    }
    h
}

/// The object's hash, which names its cut types' file and its kept sets:
/// hashed at compile time, not at each start (it is 200 KiB or more).
pub const OBJECT_HASH: u64 = fnv1a(super::skel::OBJECT);

pub fn c_string(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

/// A plain-data value's bytes, as a map key.
pub fn bytes_of<T: Copy>(value: &T) -> &[u8] {
    // SAFETY: T is a repr(C) plain-data type generated from the BPF
    // object's BTF; its bytes are read, for its size, while it is borrowed.
    unsafe { std::slice::from_raw_parts((value as *const T).cast::<u8>(), std::mem::size_of::<T>()) }
}

/// The options of a map made by hand (not by libbpf): its flags.
pub fn create_opts(map_flags: u32) -> libbpf_sys::bpf_map_create_opts {
    libbpf_sys::bpf_map_create_opts { sz: std::mem::size_of::<libbpf_sys::bpf_map_create_opts>() as _, map_flags, ..Default::default() }
}

/// Reads a map key or value. The generated types are plain C structs.
pub fn from_bytes<T: Copy>(bytes: &[u8]) -> T {
    assert!(bytes.len() >= std::mem::size_of::<T>(), "map entry smaller than its type");
    // SAFETY: T is a repr(C) plain-data type generated from the BPF
    // object's BTF (or u64); any bit pattern is valid; length checked.
    unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast::<T>()) }
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_eperm_means_no_rights() {
        use crate::error::Error;
        let err = |code| super::bpf_error(libbpf_rs::Error::from_raw_os_error(code));
        assert!(matches!(err(libc::EPERM), Error::NoBpfRights));
        match err(libc::EACCES) {
            Error::Bpf(msg) => assert!(msg.contains("verifier refused"), "{msg}"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(err(libc::EINVAL), Error::Bpf(_)));
    }
}
