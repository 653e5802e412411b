//! The names of code addresses, kept across runs, as perf's build-id cache
//! keeps symbols: parsing a file's DWARF and its exported names costs
//! milliseconds of every run that names frames in it (glibc's, most), for
//! the same answers each time. Each ELF file's names are kept in
//! `$XDG_CACHE_HOME/sysdiet/names/` (else `~/.cache/...`), in a file named
//! by its build id and a stamp of every file its names come from (a
//! stripped copy, or libc6-dbg installed later, is named anew). A file
//! without a build id is never cached; a cache file another user may
//! write is not read.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use super::debug_cache::DEBUG_ROOT;
use crate::model::Frame;

/// The names known of each image: read from the cache when first asked,
/// written back with what was added when `save` is called.
#[derive(Debug, Default)]
pub struct NameCache {
    /// None: no cache (no HOME, or turned off).
    dir: Option<PathBuf>,
    images: HashMap<usize, Kept>,
}

#[derive(Debug, Default)]
struct Kept {
    /// None: this image is not cached (no build id).
    file: Option<PathBuf>,
    /// Address -> frames, their module left empty (the image's name is
    /// the mapping's, which may differ between runs).
    frames: BTreeMap<u64, Vec<Frame>>,
    added: bool,
}

impl NameCache {
    /// The cache of this user (`$XDG_CACHE_HOME/sysdiet/names`).
    pub fn of_user() -> NameCache {
        NameCache::in_dir(crate::linux::host::cache_dir().map(|d| d.join("names")))
    }

    /// A cache in `dir` (None: nothing is kept).
    pub fn in_dir(dir: Option<PathBuf>) -> NameCache {
        NameCache { dir, images: HashMap::new() }
    }

    /// The frames kept for `addr` of image `id` (the file `file`, mapped
    /// as `module`), read from disk the first time the image is asked for.
    pub fn get(&mut self, id: usize, file: &Path, module: &str, addr: u64) -> Option<Vec<Frame>> {
        let kept = self.kept(id, file);
        let frames = kept.frames.get(&addr)?;
        Some(frames.iter().map(|f| Frame { module: module.to_string(), ..f.clone() }).collect())
    }

    /// Keeps the frames just found for `addr` of image `id`.
    pub fn put(&mut self, id: usize, file: &Path, addr: u64, frames: &[Frame]) {
        let kept = self.kept(id, file);
        if kept.file.is_some() {
            kept.frames.insert(addr, frames.iter().map(|f| Frame { module: String::new(), ..f.clone() }).collect());
            kept.added = true;
        }
    }

    /// Writes the images whose names grew, each file replaced whole.
    pub fn save(&mut self) {
        for kept in self.images.values_mut().filter(|k| k.added) {
            let Some(path) = &kept.file else { continue };
            let Ok(bytes) = serde_json::to_vec(&kept.frames) else { continue };
            if crate::linux::host::replace_file(path, |tmp| std::fs::write(tmp, &bytes).is_ok()).is_some() {
                kept.added = false;
            }
        }
    }

    fn kept(&mut self, id: usize, file: &Path) -> &mut Kept {
        let dir = &self.dir;
        self.images.entry(id).or_insert_with(|| {
            let Some(path) = dir.as_ref().and_then(|d| Some(d.join(cache_name(file)?))) else { return Kept::default() };
            let frames =
                crate::linux::host::open_own(&path).and_then(|f| serde_json::from_reader(std::io::BufReader::new(f)).ok()).unwrap_or_default();
            Kept { file: Some(path), frames, added: false }
        })
    }
}

/// What the names kept were found with: raised when sysdiet names more
/// than before (2: a Go binary's own line table; 3: its inline trees, and
/// the tables of Go before 1.18), so
/// that what an older sysdiet left unnamed is looked up anew.
const NAMING: u64 = 3;

/// `BUILDID-STAMP.json`: the file's build id, and a stamp of how it was
/// named (NAMING) and of everything
/// its names are read from: the file itself (stripped copies of one build
/// share its id but not its names), its debug file by build id, and the
/// files its debug link may name. Any of them changed, installed or
/// removed, and the names are found anew.
fn cache_name(file: &Path) -> Option<String> {
    let (id, link) = super::debug_cache::elf(file, |elf| {
        use object::Object;
        let id = elf.build_id().ok().flatten().map(crate::linux::hex);
        let link = elf.gnu_debuglink().ok().flatten().map(|(name, _)| String::from_utf8_lossy(name).into_owned());
        (id, link)
    })?;
    let id = id?;
    let mut read_from = vec![file.to_path_buf(), super::debug_cache::by_build_id(Path::new(DEBUG_ROOT), &id)?];
    if let (Some(link), Some(dir)) = (link, file.parent()) {
        // Where gdb (and blazesym) look for a debug link's file.
        let under_root = Path::new(DEBUG_ROOT).join(dir.strip_prefix("/").unwrap_or(dir));
        read_from.extend([dir.join(&link), dir.join(".debug").join(&link), under_root.join(&link)]);
    }
    let mut stamp = (0xcbf2_9ce4_8422_2325u64 ^ NAMING).wrapping_mul(0x100_0000_01b3);
    for path in &read_from {
        use std::os::unix::fs::MetadataExt;
        let facts = std::fs::metadata(path).map_or([0; 5], |m| [m.dev(), m.ino(), m.size(), m.mtime() as u64, m.mtime_nsec() as u64]);
        for v in facts {
            stamp = (stamp ^ v).wrapping_mul(0x100_0000_01b3);
        }
    }
    Some(format!("{id}-{stamp:016x}.json"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(function: &str) -> Frame {
        Frame { function: Some(function.into()), module: "/bin/x".into(), address: 0x10, ..Default::default() }
    }

    /// This test binary: it has a build id.
    fn me() -> PathBuf {
        std::env::current_exe().unwrap()
    }

    #[test]
    fn names_are_kept_across_runs_by_build_id() {
        let dir = tempfile::tempdir().unwrap();
        let mut first = NameCache::in_dir(Some(dir.path().to_path_buf()));
        assert_eq!(first.get(0, &me(), "/bin/x", 0x10), None);
        first.put(0, &me(), 0x10, &[frame("inner"), frame("outer")]);
        first.save();
        let mut second = NameCache::in_dir(Some(dir.path().to_path_buf()));
        let names = second.get(3, &me(), "/usr/bin/x", 0x10).expect("kept");
        assert_eq!(
            names.iter().map(|f| (f.function.as_deref(), f.module.as_str())).collect::<Vec<_>>(),
            [(Some("inner"), "/usr/bin/x"), (Some("outer"), "/usr/bin/x")]
        );
        assert_eq!(second.get(3, &me(), "/usr/bin/x", 0x20), None, "another address");
    }

    #[test]
    fn a_cache_others_may_write_or_a_corrupt_one_is_not_read() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let mut c = NameCache::in_dir(Some(dir.path().to_path_buf()));
        c.put(0, &me(), 0x10, &[frame("f")]);
        c.save();
        let file = std::fs::read_dir(dir.path()).unwrap().next().unwrap().unwrap().path();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666)).unwrap();
        assert_eq!(NameCache::in_dir(Some(dir.path().to_path_buf())).get(0, &me(), "m", 0x10), None, "writable by others");
        std::fs::write(&file, b"{not json").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(NameCache::in_dir(Some(dir.path().to_path_buf())).get(0, &me(), "m", 0x10), None, "corrupt");
    }

    #[test]
    fn a_copy_of_the_file_is_named_anew() {
        let dir = tempfile::tempdir().unwrap();
        let copy = dir.path().join("copy");
        std::fs::copy(me(), &copy).unwrap();
        let mut c = NameCache::in_dir(Some(dir.path().join("names")));
        c.put(0, &me(), 0x10, &[frame("f")]);
        c.save();
        let mut later = NameCache::in_dir(Some(dir.path().join("names")));
        assert!(later.get(0, &me(), "m", 0x10).is_some());
        assert_eq!(later.get(1, &copy, "m", 0x10), None, "same build id, another file");
    }

    #[test]
    fn a_file_without_a_build_id_is_not_cached() {
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("plain");
        std::fs::write(&plain, b"not an ELF file").unwrap();
        let mut c = NameCache::in_dir(Some(dir.path().join("names")));
        c.put(0, &plain, 0x10, &[frame("f")]);
        c.save();
        assert!(!dir.path().join("names").exists());
    }
}
