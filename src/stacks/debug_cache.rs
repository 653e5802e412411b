//! Debug info whose DWARF is compressed (Debian's libc6-dbg: ~2.5 MB of
//! zlib that is ~8 MB of DWARF) is inflated whole each time it is read: ~40
//! ms of every run with call sites, for glibc alone. So the first run that
//! needs it keeps a decompressed copy, made by `objcopy
//! --decompress-debug-sections`, under `$XDG_CACHE_HOME/sysdiet/debug/`
//! (else `~/.cache/...`), named by the file's build id; later runs read it
//! directly. Without objcopy or a writable cache, the file is read as it is.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use object::{Object, ObjectSection};

/// What to symbolize `file`'s code from: its separate debug file (by build
/// id, under /usr/lib/debug), or `file` itself; either one decompressed in
/// the cache if its DWARF is compressed.
pub fn debug_source(file: &Path) -> PathBuf {
    debug_source_cached_in(file, cache_dir().as_deref())
}

fn debug_source_cached_in(file: &Path, cache: Option<&Path>) -> PathBuf {
    let Some(id) = elf(file, |elf| elf.build_id().ok().flatten().map(hex)).flatten() else {
        return file.to_path_buf();
    };
    let separate = Path::new("/usr/lib/debug/.build-id").join(&id[..2]).join(format!("{}.debug", &id[2..]));
    let source = if separate.is_file() { separate } else { file.to_path_buf() };
    if !elf(&source, compressed_dwarf).unwrap_or(false) {
        // Found by blazesym itself (debug link, build id), as before.
        return file.to_path_buf();
    }
    cache.and_then(|c| decompressed(&source, &id, c)).unwrap_or_else(|| file.to_path_buf())
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
    let dir = cache.join("debug");
    let out = dir.join(format!("{id}.debug"));
    if out.is_file() {
        return Some(out);
    }
    std::fs::create_dir_all(&dir).ok()?;
    // Made under a name of its own, then renamed: runs may race to make it.
    let tmp = dir.join(format!(".{id}.{}.tmp", std::process::id()));
    let made = Command::new("objcopy")
        .arg("--decompress-debug-sections")
        .arg(source)
        .arg(&tmp)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !made || std::fs::rename(&tmp, &out).is_err() {
        let _ = std::fs::remove_file(&tmp);
        return None;
    }
    Some(out)
}

fn cache_dir() -> Option<PathBuf> {
    let base = match std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(std::env::var_os("HOME").filter(|v| !v.is_empty())?).join(".cache"),
    };
    Some(base.join("sysdiet"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compressed_debug_info_is_read_from_a_decompressed_copy() {
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
        let cache = dir.path().join("cache");
        let copy = debug_source_cached_in(&exe, Some(&cache));
        assert!(copy.starts_with(cache.join("debug")), "{}", copy.display());
        assert_eq!(debug_source_cached_in(&exe, Some(&cache)), copy, "made once, then found");
        assert_eq!(elf(&copy, compressed_dwarf), Some(false));
        // Uncompressed debug info is read where it is.
        let plain = dir.path().join("plain");
        assert!(Command::new("cc").args(["-g", "-o"]).arg(&plain).arg(&src).status().unwrap().success());
        assert_eq!(debug_source_cached_in(&plain, Some(&cache)), plain);
        // No cache to write to: the file as it is.
        assert_eq!(debug_source_cached_in(&exe, None), exe);
    }
}
