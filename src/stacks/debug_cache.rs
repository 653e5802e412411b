//! Debug info whose DWARF is compressed (Debian's libc6-dbg) is inflated
//! whole each time it is read, in every run with call sites, for glibc
//! alone (docs/GUIDE.md has the cost). So the first run that
//! needs it keeps a decompressed copy, made by `objcopy
//! --decompress-debug-sections`, under `$XDG_CACHE_HOME/sysdiet/debug/`
//! (else `~/.cache/...`), named by the build id; later runs read it
//! directly. Only packaged debug files (under /usr/lib/debug) are copied:
//! the traced program's own file is untrusted input, and objcopy is not
//! run on it. Without objcopy or a writable cache, files are read as they
//! are.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::linux::host::run_quietly;

use object::{Object, ObjectSection};

/// Where Debian's -dbg and -dbgsym packages put debug files, by build id.
pub(super) const DEBUG_ROOT: &str = "/usr/lib/debug";

/// What to symbolize a file's code from. Keep it while symbolizing: a
/// kept copy is read through the descriptor that was checked.
#[derive(Debug)]
pub struct DebugSource {
    /// The decompressed copy: its name, and the file opened once it was
    /// found to be this user's own (the cache may be in a user's HOME,
    /// under sudo: a copy swapped in after the check is never read).
    copy: Option<(PathBuf, std::fs::File)>,
    file: PathBuf,
}

impl DebugSource {
    /// The path to give the symbolizer.
    pub fn path(&self) -> PathBuf {
        use std::os::fd::AsRawFd;
        match &self.copy {
            Some((_, f)) => PathBuf::from(format!("/proc/self/fd/{}", f.as_raw_fd())),
            None => self.file.clone(),
        }
    }

    /// The file read, by its name.
    #[cfg(test)]
    pub fn name(&self) -> &Path {
        self.copy.as_ref().map_or(&self.file, |(p, _)| p)
    }
}

/// What to symbolize `file`'s code from: the decompressed copy of its
/// packaged debug file when that one's DWARF is compressed; else `file`
/// itself (blazesym finds its debug file, by debug link or build id).
pub fn debug_source(file: &Path) -> DebugSource {
    debug_source_in(file, Path::new(DEBUG_ROOT), crate::linux::host::cache_dir().as_deref())
}

fn debug_source_in(file: &Path, debug_root: &Path, cache: Option<&Path>) -> DebugSource {
    let found = || {
        let id = elf(file, |elf| elf.build_id().ok().flatten().map(crate::linux::hex)).flatten()?;
        let separate = by_build_id(debug_root, &id)?;
        if !elf(&separate, compressed_dwarf)? {
            return None;
        }
        let copy = decompressed(&separate, &id, cache?)?;
        let opened = crate::linux::host::open_own(&copy)?;
        Some((copy, opened))
    };
    DebugSource { copy: found(), file: file.to_path_buf() }
}

/// Where a debug root keeps the debug file of build id `id` (hex):
/// `.build-id/xx/rest.debug`; None for an id too short to split.
pub(super) fn by_build_id(debug_root: &Path, id: &str) -> Option<PathBuf> {
    let (dir, rest) = (id.get(..2)?, id.get(2..).filter(|r| !r.is_empty())?);
    Some(debug_root.join(".build-id").join(dir).join(format!("{rest}.debug")))
}

/// `f` of the ELF file at `path`, read as far as `f` needs (a browser's
/// 200 MB executable is not read whole for its build id).
pub(super) fn elf<T>(path: &Path, f: impl for<'a> FnOnce(&object::File<'a, &'a object::ReadCache<std::fs::File>>) -> T) -> Option<T> {
    let cache = object::ReadCache::new(std::fs::File::open(path).ok()?);
    let parsed = object::File::parse(&cache).ok()?;
    Some(f(&parsed))
}

/// Whether an ELF file has a compressed `.debug_info`.
fn compressed_dwarf<'a>(elf: &object::File<'a, &'a object::ReadCache<std::fs::File>>) -> bool {
    elf.section_by_name(".debug_info").and_then(|s| s.compressed_file_range().ok()).is_some_and(|r| r.format != object::CompressionFormat::None)
}

/// The cached decompressed copy of `source`, made now if there is none.
fn decompressed(source: &Path, id: &str, cache: &Path) -> Option<PathBuf> {
    crate::linux::host::cached_file(&cache.join("debug").join(format!("{id}.debug")), |tmp| {
        run_quietly(Command::new("objcopy").arg("--decompress-debug-sections").arg(source).arg(tmp))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compressed_debug_files_are_read_from_a_decompressed_copy() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("f.c");
        std::fs::write(&src, "int f(int x) { return x * 3; }\nint main(void) { return f(2); }\n").unwrap();
        let exe = dir.path().join("f");
        let built = Command::new("cc").args(["-g", "-gz=zlib", "-Wl,--build-id", "-o"]).arg(&exe).arg(&src).status();
        if !built.is_ok_and(|s| s.success()) || Command::new("objcopy").arg("--version").output().is_err() {
            eprintln!("no cc with -gz or no objcopy: skipped");
            return;
        }
        assert_eq!(elf(&exe, compressed_dwarf), Some(true));
        let (root, cache) = (dir.path().join("debug"), dir.path().join("cache"));
        // Not packaged: the program's own file is never given to objcopy.
        assert_eq!(debug_source_in(&exe, &root, Some(&cache)).path(), exe);
        // Packaged, by build id: copied once, decompressed, then found.
        let id = elf(&exe, |e| e.build_id().unwrap().map(crate::linux::hex)).flatten().unwrap();
        let packaged = by_build_id(&root, &id).unwrap();
        std::fs::create_dir_all(packaged.parent().unwrap()).unwrap();
        std::fs::copy(&exe, &packaged).unwrap();
        let source = debug_source_in(&exe, &root, Some(&cache));
        let copy = cache.join("debug").join(format!("{id}.debug"));
        assert_eq!(source.name(), copy);
        assert!(source.path().starts_with("/proc/self/fd/"), "read through the checked descriptor");
        assert_eq!(elf(&source.path(), compressed_dwarf), Some(false));
        assert_eq!(debug_source_in(&exe, &root, Some(&cache)).name(), copy, "made once, then found");
        // A copy another user may write is not read: the file as it is.
        std::fs::set_permissions(&copy, std::os::unix::fs::PermissionsExt::from_mode(0o666)).unwrap();
        assert_eq!(debug_source_in(&exe, &root, Some(&cache)).path(), exe);
        std::fs::set_permissions(&copy, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
        // No cache to write to: the file as it is.
        assert_eq!(debug_source_in(&exe, &root, None).path(), exe);
        // Uncompressed debug info is read where it is.
        let plain = dir.path().join("plain");
        assert!(Command::new("cc").args(["-g", "-o"]).arg(&plain).arg(&src).status().unwrap().success());
        assert_eq!(debug_source_in(&plain, &root, Some(&cache)).path(), plain);
    }
}
