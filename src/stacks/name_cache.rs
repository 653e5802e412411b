//! The names of code addresses, kept across runs, as perf's build-id cache
//! keeps symbols: parsing a file's DWARF and its exported names costs
//! milliseconds of every run that names frames in it (glibc's, most), for
//! the same answers each time. Each ELF file's names are kept in
//! `$XDG_CACHE_HOME/sysdiet/names/` (else `~/.cache/...`), in a file named
//! by its build id and a stamp of every file its names come from (a
//! stripped copy, or libc6-dbg installed later, is named anew). A file
//! without a build id is never cached; a cache file another user may
//! write is not read.
//!
//! A file is a line per address, `ADDRESS<tab>FRAMES` (the frames in JSON),
//! and grows by appending: libc's holds the names of every program traced,
//! and a run reads only the lines of the addresses it asks for (an index of
//! where each line starts, then those lines parsed), and writes only the
//! lines it adds. A torn or corrupt line names nothing; its address is
//! named again, and its line appended anew.

use std::collections::{BTreeMap, BTreeSet, HashMap};
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
    /// The file as read (empty when it was not there, or not ours).
    text: Vec<u8>,
    /// Address -> where its line's frames are in `text` (the last line of
    /// an address, if it has two).
    lines: HashMap<u64, std::ops::Range<usize>>,
    /// Whether the file on disk is this user's to append to: read, or
    /// written by this run.
    ours: bool,
    /// Whether the file on disk ends in a line cut short (a run killed in
    /// its write), to be ended before the next line.
    torn: bool,
    /// Frames found in this run, their module left empty (the image's name
    /// is the mapping's, which may differ between runs).
    found: BTreeMap<u64, Vec<Frame>>,
    /// Those of `found` not written yet.
    unsaved: BTreeSet<u64>,
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
        let frames = match kept.found.get(&addr) {
            Some(frames) => frames.clone(),
            None => serde_json::from_slice(&kept.text[kept.lines.get(&addr)?.clone()]).ok()?,
        };
        Some(frames.into_iter().map(|f| Frame { module: module.to_string(), ..f }).collect())
    }

    /// Keeps the frames just found for `addr` of image `id`.
    pub fn put(&mut self, id: usize, file: &Path, addr: u64, frames: &[Frame]) {
        let kept = self.kept(id, file);
        if kept.file.is_some() {
            kept.found.insert(addr, frames.iter().map(|f| Frame { module: String::new(), ..f.clone() }).collect());
            kept.unsaved.insert(addr);
        }
    }

    /// Writes the lines added: appended to the file that was read, else
    /// (none, or not one to append to) a new file of them alone, which a
    /// later save appends to.
    pub fn save(&mut self) {
        for kept in self.images.values_mut().filter(|k| !k.unsaved.is_empty()) {
            let Some(path) = &kept.file else { continue };
            // A torn last line is ended first, so that ours stay whole.
            let mut lines = if kept.torn { b"\n".to_vec() } else { Vec::new() };
            for addr in &kept.unsaved {
                let Ok(json) = serde_json::to_vec(&kept.found[addr]) else { continue };
                lines.extend_from_slice(format!("{addr}\t").as_bytes());
                lines.extend_from_slice(&json);
                lines.push(b'\n');
            }
            let written = (kept.ours && crate::linux::host::append_own(path, &lines))
                || crate::linux::host::replace_file(path, |tmp| std::fs::write(tmp, &lines[kept.torn as usize..]).is_ok()).is_some();
            if written {
                kept.ours = true;
                kept.torn = false;
                kept.unsaved.clear();
            }
        }
    }

    fn kept(&mut self, id: usize, file: &Path) -> &mut Kept {
        let dir = &self.dir;
        self.images.entry(id).or_insert_with(|| {
            let Some(path) = dir.as_ref().and_then(|d| Some(d.join(cache_name(file)?))) else { return Kept::default() };
            let text = crate::linux::host::open_own(&path).and_then(|mut f| {
                let mut text = Vec::new();
                std::io::Read::read_to_end(&mut f, &mut text).ok().map(|_| text)
            });
            let ours = text.is_some();
            let text = text.unwrap_or_default();
            let torn = text.last().is_some_and(|&b| b != b'\n');
            Kept { lines: index_lines(&text), file: Some(path), text, ours, torn, found: BTreeMap::new(), unsaved: BTreeSet::new() }
        })
    }
}

/// Where each whole line's frames are in `text`, by its address; a last
/// line with no newline (a write cut short) is not whole.
fn index_lines(text: &[u8]) -> HashMap<u64, std::ops::Range<usize>> {
    let mut lines = HashMap::new();
    let mut at = 0;
    while let Some(len) = text[at..].iter().position(|&b| b == b'\n') {
        let line = &text[at..at + len];
        if let Some(tab) = line.iter().position(|&b| b == b'\t') {
            if let Some(addr) = std::str::from_utf8(&line[..tab]).ok().and_then(|a| a.parse().ok()) {
                lines.insert(addr, at + tab + 1..at + len);
            }
        }
        at += len + 1;
    }
    lines
}

/// What the names kept were found with: raised when sysdiet names more
/// than before (2: a Go binary's own line table; 3: its inline trees, and
/// the tables of Go before 1.18), so
/// that what an older sysdiet left unnamed is looked up anew.
const NAMING: u64 = 3;

/// `BUILDID-STAMP.names`: the file's build id, and a stamp of how it was
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
    Some(format!("{id}-{stamp:016x}.names"))
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
        let mut first = cache_in(dir.path());
        assert_eq!(first.get(0, &me(), "/bin/x", 0x10), None);
        first.put(0, &me(), 0x10, &[frame("inner"), frame("outer")]);
        first.save();
        let mut second = cache_in(dir.path());
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
        let mut c = cache_in(dir.path());
        c.put(0, &me(), 0x10, &[frame("f")]);
        c.save();
        let file = only_file(dir.path());
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666)).unwrap();
        assert_eq!(cache_in(dir.path()).get(0, &me(), "m", 0x10), None, "writable by others");
        std::fs::write(&file, b"{not json").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(cache_in(dir.path()).get(0, &me(), "m", 0x10), None, "corrupt");
    }

    /// A run's cache, kept in `dir`.
    fn cache_in(dir: &Path) -> NameCache {
        NameCache::in_dir(Some(dir.to_path_buf()))
    }

    /// The one cache file in `dir`.
    fn only_file(dir: &Path) -> PathBuf {
        let files: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
        assert_eq!(files.len(), 1, "{files:?}");
        files[0].clone()
    }

    #[test]
    fn a_run_appends_the_names_it_adds_and_reads_only_the_lines_it_asks_for() {
        let dir = tempfile::tempdir().unwrap();
        let mut first = cache_in(dir.path());
        first.put(0, &me(), 0x10, &[frame("first")]);
        first.save();
        let file = only_file(dir.path());
        let before = std::fs::read(&file).unwrap();
        let mut second = cache_in(dir.path());
        assert!(second.get(0, &me(), "m", 0x10).is_some());
        second.put(0, &me(), 0x20, &[frame("second")]);
        second.save();
        second.save(); // nothing more to write
        let after = std::fs::read(&file).unwrap();
        assert!(after.starts_with(&before), "the first run's line is left as it was");
        assert_eq!(after.iter().filter(|&&b| b == b'\n').count(), 2, "{}", String::from_utf8_lossy(&after));
        // Another address's line is broken: only that address is unnamed.
        let text = String::from_utf8(after).unwrap().replace("second", "sec\"ond");
        std::fs::write(&file, text).unwrap();
        let mut third = cache_in(dir.path());
        assert_eq!(third.get(0, &me(), "m", 0x10).unwrap()[0].function.as_deref(), Some("first"));
        assert_eq!(third.get(0, &me(), "m", 0x20), None, "its line is not JSON");
    }

    #[test]
    fn a_second_save_keeps_what_the_first_wrote() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = cache_in(dir.path());
        c.put(0, &me(), 0x10, &[frame("first")]);
        c.save();
        c.put(0, &me(), 0x20, &[frame("second")]);
        c.save();
        assert!(c.get(0, &me(), "m", 0x10).is_some(), "still known to the run that saved it");
        let mut later = cache_in(dir.path());
        assert!(later.get(0, &me(), "m", 0x10).is_some(), "the first save's line");
        assert!(later.get(0, &me(), "m", 0x20).is_some());
    }

    #[test]
    fn a_torn_last_line_names_nothing_and_the_next_line_is_whole() {
        let dir = tempfile::tempdir().unwrap();
        let mut first = cache_in(dir.path());
        first.put(0, &me(), 0x10, &[frame("whole")]);
        first.save();
        let file = only_file(dir.path());
        // A run that died in its write: half a line, no newline.
        let mut text = std::fs::read(&file).unwrap();
        text.extend_from_slice(b"32\t[{\"function\":\"cut");
        std::fs::write(&file, &text).unwrap();
        let mut second = cache_in(dir.path());
        assert!(second.get(0, &me(), "m", 0x10).is_some());
        assert_eq!(second.get(0, &me(), "m", 0x20), None, "torn");
        second.put(0, &me(), 0x20, &[frame("again")]);
        second.save();
        let mut third = cache_in(dir.path());
        assert_eq!(third.get(0, &me(), "m", 0x20).unwrap()[0].function.as_deref(), Some("again"));
        assert_eq!(third.get(0, &me(), "m", 0x10).unwrap()[0].function.as_deref(), Some("whole"));
    }

    #[test]
    fn a_link_is_replaced_not_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let names = dir.path().join("names");
        let mut first = cache_in(&names);
        first.put(0, &me(), 0x10, &[frame("f")]);
        first.save();
        let file = only_file(&names);
        // The cache file made a link to another file of this user's.
        let elsewhere = dir.path().join("elsewhere");
        std::fs::rename(&file, &elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &file).unwrap();
        let before = std::fs::read(&elsewhere).unwrap();
        let mut second = cache_in(&names);
        second.put(0, &me(), 0x20, &[frame("g")]);
        second.save();
        assert_eq!(std::fs::read(&elsewhere).unwrap(), before, "not appended through the link");
        assert!(!std::fs::symlink_metadata(&file).unwrap().file_type().is_symlink(), "replaced");
        assert!(cache_in(&names).get(0, &me(), "m", 0x20).is_some());
    }

    #[test]
    fn a_copy_of_the_file_is_named_anew() {
        let dir = tempfile::tempdir().unwrap();
        let copy = dir.path().join("copy");
        std::fs::copy(me(), &copy).unwrap();
        let mut c = cache_in(&dir.path().join("names"));
        c.put(0, &me(), 0x10, &[frame("f")]);
        c.save();
        let mut later = cache_in(&dir.path().join("names"));
        assert!(later.get(0, &me(), "m", 0x10).is_some());
        assert_eq!(later.get(1, &copy, "m", 0x10), None, "same build id, another file");
    }

    #[test]
    fn a_file_without_a_build_id_is_not_cached() {
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("plain");
        std::fs::write(&plain, b"not an ELF file").unwrap();
        let mut c = cache_in(&dir.path().join("names"));
        c.put(0, &plain, 0x10, &[frame("f")]);
        c.save();
        assert!(!dir.path().join("names").exists());
    }
}
