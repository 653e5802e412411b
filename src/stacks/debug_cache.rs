//! Debug info whose DWARF is compressed (Debian's libc6-dbg: ~2.5 MB of
//! zlib that is ~8 MB of DWARF) is inflated whole each time it is read: ~40
//! ms of every run with call sites, for glibc alone. So the first run that
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
const DEBUG_ROOT: &str = "/usr/lib/debug";

/// What to symbolize `file`'s code from: the decompressed copy of its
/// packaged debug file when that one's DWARF is compressed; else `file`
/// itself (blazesym finds its debug file, by debug link or build id).
pub fn debug_source(file: &Path) -> PathBuf {
    debug_source_in(file, Path::new(DEBUG_ROOT), crate::linux::host::cache_dir().as_deref())
}

fn debug_source_in(file: &Path, debug_root: &Path, cache: Option<&Path>) -> PathBuf {
    let found = || {
        let id = elf(file, |elf| elf.build_id().ok().flatten().map(hex)).flatten()?;
        let separate = debug_root.join(".build-id").join(&id[..2]).join(format!("{}.debug", &id[2..]));
        if !elf(&separate, compressed_dwarf)? {
            return None;
        }
        decompressed(&separate, &id, cache?)
    };
    found().unwrap_or_else(|| file.to_path_buf())
}

/// `f` of the ELF file at `path`, read as far as `f` needs (a browser's
/// 200 MB executable is not read whole for its build id).
fn elf<T>(path: &Path, f: impl for<'a> FnOnce(&object::File<'a, &'a object::ReadCache<std::fs::File>>) -> T) -> Option<T> {
    let cache = object::ReadCache::new(std::fs::File::open(path).ok()?);
    let parsed = object::File::parse(&cache).ok()?;
    Some(f(&parsed))
}

fn hex(id: &[u8]) -> String {
    id.iter().map(|b| format!("{b:02x}")).collect()
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
        assert_eq!(debug_source_in(&exe, &root, Some(&cache)), exe);
        // Packaged, by build id: copied once, decompressed, then found.
        let id = elf(&exe, |e| e.build_id().unwrap().map(hex)).flatten().unwrap();
        let packaged = root.join(".build-id").join(&id[..2]).join(format!("{}.debug", &id[2..]));
        std::fs::create_dir_all(packaged.parent().unwrap()).unwrap();
        std::fs::copy(&exe, &packaged).unwrap();
        let copy = debug_source_in(&exe, &root, Some(&cache));
        assert_eq!(copy, cache.join("debug").join(format!("{id}.debug")));
        assert_eq!(elf(&copy, compressed_dwarf), Some(false));
        assert_eq!(debug_source_in(&exe, &root, Some(&cache)), copy, "made once, then found");
        // No cache to write to: the file as it is.
        assert_eq!(debug_source_in(&exe, &root, None), exe);
        // Uncompressed debug info is read where it is.
        let plain = dir.path().join("plain");
        assert!(Command::new("cc").args(["-g", "-o"]).arg(&plain).arg(&src).status().unwrap().success());
        assert_eq!(debug_source_in(&plain, &root, Some(&cache)), plain);
    }
}
