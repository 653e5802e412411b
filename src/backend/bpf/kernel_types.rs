//! The kernel types the tracer's CO-RE relocations need, cut out of the
//! kernel's BTF once and kept. At every load libbpf matches each relocated
//! type (task_struct, mm_struct, file, ...) by name against every type of
//! the kernel's BTF, a large part of each start-up (docs/overhead.md).
//! `bpftool gen min_core_btf` (BTFgen) cuts the few dozen types the object
//! uses into a file of a few KB, and later loads relocate
//! against that. The file is named by the kernel's build id and a hash of
//! the object, so a new kernel or a new sysdiet makes a new one. Without
//! bpftool, a build id or a writable cache, loads use the whole BTF as
//! before; a file that fails to load is set aside for good (the tracer then
//! loads against the whole BTF). The cache may be a user's (sudo keeping
//! HOME): a kept file is used only if it is sysdiet's user's own and no one
//! else may write it, and libbpf reads it through the descriptor that was
//! checked, so that it cannot be swapped in between.

use std::ffi::CString;
use std::fs::File;
use std::mem::MaybeUninit;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Command;

use libbpf_rs::skel::SkelBuilder;
use libbpf_rs::OpenObject;

use super::maps::{kernel_btf_overridden, kernel_btf_path};
use crate::linux::host::{open_own, run_quietly};

/// Where the running kernel's build id is: its ELF notes.
const KERNEL_NOTES: &str = "/sys/kernel/notes";
const NT_GNU_BUILD_ID: u32 = 3;

/// Cut kernel types, open and checked.
pub struct CutTypes {
    file: File,
    kept: PathBuf,
}

impl CutTypes {
    /// Where libbpf reads them: the checked file, by its open descriptor.
    pub fn path(&self) -> PathBuf {
        PathBuf::from(format!("/proc/self/fd/{}", self.file.as_raw_fd()))
    }

    /// Sets them aside for good: later runs use the whole BTF.
    pub fn set_aside(&self) {
        unusable(&self.kept);
    }
}

/// The cut types for `object` (whose maps::fnv1a is `object_hash`) on the
/// running kernel, whose build id is `kernel`: made now if there are none
/// yet, None if they cannot be had.
pub fn cut(object: &[u8], object_hash: u64, kernel_btf: &Path, kernel: &str) -> Option<CutTypes> {
    let kept = cut_in(object, object_hash, kernel_btf, kernel, &crate::linux::host::cache_dir()?)?;
    Some(CutTypes { file: open_own(&kept)?, kept })
}

/// `load(types)` with the cut types of `object` (whose maps::fnv1a is
/// `object_hash`) for the running kernel, or with None where there are
/// none (no build id, no bpftool, SYSDIET_KERNEL_BTF set); once more with
/// None if that failed, the file then set aside for good if the whole BTF
/// loads (only then was it the file's fault).
pub fn loaded_with<T, E>(object: &[u8], object_hash: u64, load: impl FnMut(Option<&Path>) -> Result<T, E>) -> Result<T, E> {
    loaded_on(kernel_build_id().as_deref(), object, object_hash, load)
}

/// As `loaded_with`, on the kernel whose build id is `kernel`.
pub fn loaded_on<T, E>(kernel: Option<&str>, object: &[u8], object_hash: u64, mut load: impl FnMut(Option<&Path>) -> Result<T, E>) -> Result<T, E> {
    let cutting = crate::timings::span("cut kernel types");
    let types = kernel.filter(|_| !kernel_btf_overridden()).and_then(|kernel| cut(object, object_hash, &kernel_btf_path(), kernel));
    drop(cutting);
    let Some(types) = types else { return load(None) };
    load(Some(&types.path())).or_else(|first| match load(None) {
        Ok(loaded) => {
            types.set_aside();
            Ok(loaded)
        }
        Err(_) => Err(first),
    })
}

/// `builder`'s object opened to relocate against `types` (a file of cut
/// types) when given, else against the kernel's whole BTF.
pub fn open<'o, B: SkelBuilder<'o>>(builder: B, storage: &'o mut MaybeUninit<OpenObject>, types: Option<&Path>) -> libbpf_rs::Result<B::Output> {
    match types.and_then(|p| CString::new(p.as_os_str().as_encoded_bytes()).ok()) {
        // libbpf copies the path at open.
        Some(path) => builder.open_opts(
            libbpf_sys::bpf_object_open_opts {
                sz: std::mem::size_of::<libbpf_sys::bpf_object_open_opts>() as _,
                btf_custom_path: path.as_ptr(),
                ..Default::default()
            },
            storage,
        ),
        None => builder.open(storage),
    }
}

/// The running kernel's build id, in hex: what names the files kept for it.
pub fn kernel_build_id() -> Option<String> {
    build_id(&std::fs::read(KERNEL_NOTES).ok()?)
}

fn cut_in(object: &[u8], object_hash: u64, kernel_btf: &Path, build_id: &str, cache: &Path) -> Option<PathBuf> {
    let out = cache.join("btf").join(format!("{build_id}-{object_hash:016x}.btf"));
    if out.with_extension("unusable").exists() {
        return None;
    }
    crate::linux::host::cached_file(&out, |btf| {
        // bpftool reads the object from a file: a private one beside it,
        // removed when dropped.
        let Ok(mut obj) = tempfile::Builder::new().prefix(".").suffix(".o").tempfile_in(btf.parent().unwrap_or(Path::new("."))) else {
            return false;
        };
        std::io::Write::write_all(&mut obj, object).is_ok()
            && run_quietly(Command::new("bpftool").args(["gen", "min_core_btf"]).arg(kernel_btf).arg(btf).arg(obj.path()))
    })
}

/// Sets aside cut types that libbpf could not load with: later runs use the
/// whole BTF and do not cut them again.
fn unusable(path: &Path) {
    let _ = std::fs::write(path.with_extension("unusable"), b"");
    let _ = std::fs::remove_file(path);
}

/// The GNU build id among ELF notes, in hex.
fn build_id(notes: &[u8]) -> Option<String> {
    let word = |at: usize| Some(u32::from_ne_bytes(notes.get(at..at + 4)?.try_into().ok()?));
    let pad = |n: u32| (n as usize).div_ceil(4) * 4;
    let mut at = 0;
    while at + 12 <= notes.len() {
        let (namesz, descsz, kind) = (word(at)?, word(at + 4)?, word(at + 8)?);
        let name = notes.get(at + 12..at + 12 + namesz as usize)?;
        let desc_at = at + 12 + pad(namesz);
        let desc = notes.get(desc_at..desc_at + descsz as usize)?;
        if kind == NT_GNU_BUILD_ID && name == b"GNU\0" && !desc.is_empty() {
            return Some(crate::linux::hex(desc));
        }
        at = desc_at + pad(descsz);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn note(kind: u32, name: &[u8], desc: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        for w in [name.len() as u32, desc.len() as u32, kind] {
            v.extend(w.to_ne_bytes());
        }
        for part in [name, desc] {
            v.extend(part);
            v.resize(v.len().div_ceil(4) * 4, 0);
        }
        v
    }

    #[test]
    fn the_build_id_is_the_gnu_note_among_others() {
        let mut notes = note(6, b"Linux\0", &[1, 2, 3]);
        notes.extend(note(NT_GNU_BUILD_ID, b"GNU\0", &[0xab, 0x01, 0xff]));
        assert_eq!(build_id(&notes).as_deref(), Some("ab01ff"));
        assert_eq!(build_id(&note(6, b"Linux\0", &[1])), None);
        // Cut short: no panic, no id.
        assert_eq!(build_id(&notes[..notes.len() - 2]), None);
        assert_eq!(build_id(&[]), None);
    }

    #[test]
    fn types_are_cut_once_per_kernel_and_object_and_set_aside_when_unusable() {
        let btf = Path::new("/sys/kernel/btf/vmlinux");
        let object = super::super::skel::OBJECT;
        if !btf.exists() || Command::new("bpftool").arg("version").output().is_err() {
            eprintln!("no kernel BTF or no bpftool: skipped");
            return;
        }
        let cache = tempfile::tempdir().unwrap();
        let hash = super::super::maps::fnv1a(object);
        let made = cut_in(object, hash, btf, "k1", cache.path()).expect("cut");
        let size = std::fs::metadata(&made).unwrap().len();
        assert!(size > 0 && size < std::fs::metadata(btf).unwrap().len() / 100, "{size} bytes");
        // Found again, not made again.
        std::fs::write(&made, b"kept").unwrap();
        assert_eq!(cut_in(object, hash, btf, "k1", cache.path()), Some(made.clone()));
        assert_eq!(std::fs::read(&made).unwrap(), b"kept");
        // Another kernel: a file of its own. An object bpftool cannot
        // read: none.
        let other = cut_in(object, hash, btf, "k2", cache.path()).expect("cut");
        assert_ne!(other, made);
        let half = &object[..object.len() / 2];
        assert_eq!(cut_in(half, super::super::maps::fnv1a(half), btf, "k1", cache.path()), None);
        // Set aside: not used, not made again.
        unusable(&made);
        assert_eq!(cut_in(object, hash, btf, "k1", cache.path()), None);
        assert!(!made.exists());
        // Nothing left behind but the files themselves.
        let stray: Vec<_> = std::fs::read_dir(cache.path().join("btf"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with('.'))
            .collect();
        assert!(stray.is_empty(), "{stray:?}");
    }
}
