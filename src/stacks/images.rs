//! The ELF files code runs from: their loadable segments (to place them in
//! a process) and their unwind sections (for framehop). Each file is read
//! once per run, whichever processes map it.

use std::collections::HashMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use framehop::{ExplicitModuleSectionInfo, Module};
use object::{Object, ObjectSection, ObjectSegment};

pub type ImageId = usize;
pub const VDSO: &str = "[vdso]";

pub struct Image {
    /// As the mapping names it: a path, or `[vdso]`.
    pub name: String,
    /// The file to read symbols from.
    file: ImageFile,
    /// PT_LOAD segments: (vaddr, file offset, file size).
    segments: Vec<(u64, u64, u64)>,
    sections: Sections,
}

enum ImageFile {
    Path(PathBuf),
    /// The vDSO, copied out to a file the first time a symbolizer asks:
    /// most runs name no frame in it. Removed when dropped.
    Vdso {
        data: Vec<u8>,
        copy: OnceLock<Option<tempfile::NamedTempFile>>,
    },
}

#[derive(Clone, Default)]
struct Sections {
    /// Only where it lies: framehop reads ELF code from no bytes of it
    /// (its instruction analysis is Mach-O's), and copying libc's alone
    /// was most of a short run's unwinding.
    text: Option<Range<u64>>,
    eh_frame: Option<(Range<u64>, SectionBytes)>,
    eh_frame_hdr: Option<(Range<u64>, SectionBytes)>,
    got: Option<Range<u64>>,
    debug_frame: Option<SectionBytes>,
}

/// A file's bytes: mapped (read as they are touched, no copy, no read
/// call per header or name), or the vDSO's own copy.
#[derive(Clone)]
enum Bytes {
    Mapped(Arc<memmap2::Mmap>),
    Copied(Arc<[u8]>),
}

impl Bytes {
    fn all(&self) -> &[u8] {
        match self {
            Bytes::Mapped(m) => m,
            Bytes::Copied(c) => c,
        }
    }
}

/// One section of a file's bytes, as framehop reads it.
#[derive(Clone)]
pub struct SectionBytes {
    bytes: Bytes,
    range: Range<usize>,
}

/// None: framehop's section info asks for a default.
impl Default for SectionBytes {
    fn default() -> Self {
        SectionBytes { bytes: Bytes::Copied(Arc::from(&[][..])), range: 0..0 }
    }
}

impl std::ops::Deref for SectionBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.bytes.all()[self.range.clone()]
    }
}

impl Image {
    fn parse(name: &str, file: ImageFile, bytes: Bytes) -> Option<Image> {
        let elf = object::File::parse(bytes.all()).ok()?;
        let section = |n: &str| {
            let s = elf.section_by_name(n)?;
            let (offset, size) = s.file_range()?;
            let range = usize::try_from(offset).ok()?..usize::try_from(offset.checked_add(size)?).ok()?;
            bytes.all().get(range.clone())?;
            Some((s.address()..s.address() + s.size(), SectionBytes { bytes: bytes.clone(), range }))
        };
        Some(Image {
            name: name.to_string(),
            file,
            segments: elf
                .segments()
                .filter_map(|s| {
                    let (offset, size) = s.file_range();
                    Some((s.address(), offset, size)).filter(|_| size > 0)
                })
                .collect(),
            sections: Sections {
                text: elf.section_by_name(".text").map(|s| s.address()..s.address() + s.size()),
                eh_frame: section(".eh_frame"),
                eh_frame_hdr: section(".eh_frame_hdr"),
                got: elf.section_by_name(".got").map(|s| s.address()..s.address() + s.size()),
                debug_frame: section(".debug_frame").map(|(_, d)| d),
            },
        })
    }

    /// The file to read its symbols from; None for a vDSO that could not
    /// be copied out. A private file (O_EXCL, mode 0600, a random name): a
    /// predictable name in /tmp would let another user plant a link for
    /// root to follow.
    pub fn file(&self) -> Option<&Path> {
        match &self.file {
            ImageFile::Path(p) => Some(p),
            ImageFile::Vdso { data, copy } => copy
                .get_or_init(|| {
                    let mut copy = tempfile::Builder::new().prefix("sysdiet-vdso-").suffix(".so").tempfile().ok()?;
                    std::io::Write::write_all(&mut copy, data).ok()?;
                    Some(copy)
                })
                .as_ref()
                .map(|c| c.path()),
        }
    }

    /// Where the file's address 0 lies in a process that maps file offset
    /// `pgoff` at `start`.
    pub fn bias(&self, start: u64, pgoff: u64) -> Option<u64> {
        let &(vaddr, offset, _) = self.segments.iter().find(|&&(_, off, size)| off & !0xfff <= pgoff && pgoff < off + size)?;
        start.checked_sub(vaddr.wrapping_sub(offset).wrapping_add(pgoff))
    }

    /// The framehop module of this image at its own addresses (bias 0):
    /// one for every process that maps it, whose addresses are moved by
    /// their bias to unwind with it (unwind.rs).
    pub fn own_module(&self) -> Module<SectionBytes> {
        let end = self.segments.iter().map(|&(vaddr, _, size)| vaddr.saturating_add(size)).max().unwrap_or(u64::MAX);
        let s = self.sections.clone();
        let (eh_frame_svma, eh_frame) = s.eh_frame.map_or((None, None), |(r, d)| (Some(r), Some(d)));
        let (eh_frame_hdr_svma, eh_frame_hdr) = s.eh_frame_hdr.map_or((None, None), |(r, d)| (Some(r), Some(d)));
        let info = ExplicitModuleSectionInfo {
            base_svma: 0,
            text_svma: s.text,
            got_svma: s.got,
            eh_frame_svma,
            eh_frame,
            eh_frame_hdr_svma,
            eh_frame_hdr,
            debug_frame: s.debug_frame,
            ..Default::default()
        };
        Module::new(self.name.clone(), 0..end, 0, info)
    }
}

/// Every image met so far, by name; files that cannot be read are
/// remembered as such and not tried again.
#[derive(Default)]
pub struct Images {
    by_name: HashMap<String, Option<ImageId>>,
    list: Vec<Image>,
}

impl Images {
    pub fn get(&mut self, name: &str) -> Option<ImageId> {
        if let Some(&id) = self.by_name.get(name) {
            return id;
        }
        let image = if name == VDSO { self.load_vdso() } else { load_file(name) };
        let id = image.map(|i| {
            self.list.push(i);
            self.list.len() - 1
        });
        self.by_name.insert(name.to_string(), id);
        id
    }

    pub fn image(&self, id: ImageId) -> &Image {
        &self.list[id]
    }

    /// The vDSO is the same image in every process on this kernel: sysdiet's
    /// own, which symbolizers read from a copy (Image::file).
    fn load_vdso(&mut self) -> Option<Image> {
        let data = own_vdso()?;
        let bytes = Bytes::Copied(Arc::from(&data[..]));
        Image::parse(VDSO, ImageFile::Vdso { data, copy: OnceLock::new() }, bytes)
    }
}

fn load_file(path: &str) -> Option<Image> {
    // "//anon", "[heap]", "memfd:..." and the like are not files.
    if !path.starts_with('/') {
        return None;
    }
    // Mapped: only the headers and the sections unwinding needs are ever
    // read (a library built with debug info is mostly DWARF: libpython,
    // 23 MB), and with no read call per header or section name.
    // SAFETY: a private read-only mapping. A file cut short while mapped
    // would fault on access, as blazesym's own mappings of the same files
    // would; executables and libraries in use are replaced, not truncated.
    let map = unsafe { memmap2::Mmap::map(&std::fs::File::open(path).ok()?) }.ok()?;
    Image::parse(path, ImageFile::Path(PathBuf::from(path)), Bytes::Mapped(Arc::new(map)))
}

fn own_vdso() -> Option<Vec<u8>> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    let line = maps.lines().find(|l| l.ends_with(VDSO))?;
    let (s, e) = line.split_whitespace().next()?.split_once('-')?;
    let (start, end) = (usize::from_str_radix(s, 16).ok()?, usize::from_str_radix(e, 16).ok()?);
    // SAFETY: the kernel maps the vDSO readable into every process, this
    // one included, for its whole life.
    Some(unsafe { std::slice::from_raw_parts(start as *const u8, end - start) }.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libc_places_and_unwinds() {
        let mut images = Images::default();
        let libc = images.get("/lib/x86_64-linux-gnu/libc.so.6").expect("libc.so.6 parses");
        let img = images.image(libc);
        assert!(img.sections.eh_frame.is_some() && img.sections.eh_frame_hdr.is_some());
        // Mapping a segment's first page at B + its offset puts the file's
        // address 0 at B, less how far the segment's vaddr runs ahead.
        let base = 0x7f00_0000_0000u64;
        let &(vaddr, offset, _) = img.segments.iter().find(|s| s.0 > 0).unwrap();
        assert_eq!(img.bias(base + (offset & !0xfff), offset & !0xfff), Some(base - (vaddr - offset)));
        assert!(images.get("//anon").is_none());
        assert!(images.get("/no/such/file").is_none());
    }

    #[test]
    fn the_vdso_is_copied_out_when_asked_for() {
        let mut images = Images::default();
        let id = images.get(VDSO).expect("vdso");
        let file = images.image(id).file().expect("copied").to_path_buf();
        assert!(file.exists());
        assert_eq!(std::fs::read(&file).unwrap()[..4], *b"\x7fELF");
        assert_eq!(images.image(id).file(), Some(file.as_path()), "one copy");
        drop(images);
        assert!(!file.exists());
    }
}
