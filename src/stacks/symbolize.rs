//! Names the frames of unwound stacks with blazesym: functions, inlined
//! functions, file:line where there is debug info. glibc's own debug info
//! comes from Debian's libc6-dbg, found by build-id under /usr/lib/debug.
//! A Go binary's code that has no symbols is named from its own line table
//! (go_table.rs). Each address is looked up once, each file opened once.

use std::collections::HashMap;
use std::time::Instant;

use blazesym::symbolize::source::{Elf, Source};
use blazesym::symbolize::{CodeInfo, Input, Symbolized, Symbolizer};

use super::go_table::GoTable;
use super::images::Images;
use super::name_cache::NameCache;
use super::perf_map::PerfMap;
use super::responsible::{is_machinery, responsible_of};
use super::unwind::{RawFrame, RawStack};
use crate::model::{CallSite, Frame};

/// The module of frames a perf map named: code a JIT wrote.
pub const JIT: &str = "[jit]";

/// The names of raw frames, filled as stacks come in: the stack reader
/// names new frames while the target runs (parsing a file's symbols and
/// debug info takes milliseconds), so that little is left at its end.
#[derive(Debug, Default)]
pub struct FrameNames {
    named: HashMap<RawFrame, Vec<Frame>>,
    /// The stacks before this one are named.
    upto: usize,
    /// Time spent naming, ns.
    pub ns: u64,
}

/// Names file-backed frames with blazesym. It keeps each file parsed, and
/// lives on one thread (blazesym's caches are not Send).
pub struct Namer {
    symbolizer: Symbolizer,
    /// image -> its exported names (`public_names`), read once.
    exported: HashMap<usize, HashMap<u64, String>>,
    /// image -> what it is symbolized from, held open while this lives.
    sources: HashMap<usize, super::debug_cache::DebugSource>,
    /// image -> its Go line table, read at its first frame without a symbol.
    go_tables: HashMap<usize, Option<GoTable>>,
    /// Names found in earlier runs, and those found now, to keep.
    cache: NameCache,
}

impl Default for Namer {
    fn default() -> Self {
        Namer {
            symbolizer: Symbolizer::builder().enable_inlined_fns(true).enable_code_info(true).build(),
            exported: HashMap::new(),
            sources: HashMap::new(),
            go_tables: HashMap::new(),
            cache: NameCache::of_user(),
        }
    }
}

impl Namer {
    /// Names the file-backed frames of the stacks not named yet: one or
    /// more frames each (the inlined functions at that address, innermost
    /// first, then the function they are inlined into).
    pub fn name_new(&mut self, images: &Images, stacks: &[RawStack], names: &mut FrameNames) {
        let t = Instant::now();
        let mut by_image: HashMap<usize, Vec<u64>> = HashMap::new();
        for f in stacks[names.upto.min(stacks.len())..].iter().flat_map(|s| &s.frames) {
            if let Some(id) = f.image {
                if !names.named.contains_key(f) {
                    by_image.entry(id).or_default().push(f.addr);
                }
            }
        }
        for (id, mut addrs) in by_image {
            addrs.sort_unstable();
            addrs.dedup();
            let img = images.image(id);
            let Some(file) = img.file() else { continue };
            // Named in an earlier run: no file is parsed for these. (Not
            // the vDSO: a small file, copied out anew each run.)
            let cached = img.name != super::images::VDSO;
            addrs.retain(|&a| match cached.then(|| self.cache.get(id, file, &img.name, a)).flatten() {
                Some(frames) => {
                    names.named.insert(RawFrame { image: Some(id), addr: a, pid: 0 }, frames);
                    false
                }
                None => true,
            });
            if addrs.is_empty() {
                continue;
            }
            let source = self.sources.entry(id).or_insert_with(|| super::debug_cache::debug_source(file));
            let src = Source::Elf(Elf::new(source.path()));
            let exported =
                self.exported.entry(id).or_insert_with(|| if crate::model::in_c_runtime(&img.name) { public_names(file) } else { HashMap::new() });
            let results = self.symbolizer.symbolize(&src, Input::VirtOffset(&addrs)).unwrap_or_default();
            for (i, &a) in addrs.iter().enumerate() {
                let frames = match results.get(i) {
                    Some(Symbolized::Sym(sym)) => {
                        let mut frames: Vec<Frame> = Vec::with_capacity(1 + sym.inlined.len());
                        // blazesym lists inlined functions outermost first; each
                        // one's location is inside it, the symbol's is where the
                        // first inlined call sits.
                        for inl in sym.inlined.iter().rev() {
                            frames.push(frame(&img.name, a, Some(inl.name.to_string()), inl.code_info.as_ref(), true));
                        }
                        let outer_info = sym.code_info.as_deref();
                        let mut outer = frame(&img.name, a, Some(sym.name.to_string()), outer_info, false);
                        outer.public = exported.get(&sym.addr).filter(|p| **p != sym.name).cloned();
                        // A function "inlined" into its own namesake (glibc's
                        // syscall wrappers) is one frame: keep the inner line.
                        match frames.pop() {
                            Some(inner) if inner.function == outer.function => frames.push(Frame { inlined: false, public: outer.public, ..inner }),
                            Some(inner) => frames.extend([inner, outer]),
                            None => frames.push(outer),
                        }
                        frames
                    }
                    _ => {
                        let go = self.go_tables.entry(id).or_insert_with(|| GoTable::of(file)).as_ref().map(|t| t.frames(a)).unwrap_or_default();
                        let named = go.into_iter().map(|g| Frame {
                            function: Some(g.function),
                            file: g.file,
                            line: g.line,
                            module: img.name.clone(),
                            address: a,
                            inlined: g.inlined,
                            public: None,
                        });
                        let frames: Vec<Frame> = named.collect();
                        if frames.is_empty() {
                            vec![Frame { module: img.name.clone(), address: a, ..Default::default() }]
                        } else {
                            frames
                        }
                    }
                };
                if cached {
                    self.cache.put(id, file, a, &frames);
                }
                names.named.insert(RawFrame { image: Some(id), addr: a, pid: 0 }, frames);
            }
        }
        names.upto = stacks.len();
        names.ns += t.elapsed().as_nanos() as u64;
    }

    /// Keeps the names found for later runs.
    pub fn save(&mut self) {
        self.cache.save();
    }
}

/// Turns each distinct raw stack into a call site; returns the sites and,
/// per input stack, the index of its site (equal stacks share one).
/// `names`: what the stack reader named already.
pub fn call_sites(images: &Images, stacks: &[RawStack], mut names: FrameNames) -> (Vec<CallSite>, Vec<usize>) {
    if names.upto < stacks.len() {
        let _t = crate::timings::span("name the frames left");
        let mut namer = Namer::default();
        namer.name_new(images, stacks, &mut names);
        namer.save();
    }
    name_jit_frames(stacks, &mut names.named);
    let names = names.named;
    let _t = crate::timings::span("make the call sites");
    // A site is its named frames and whether it is complete: stacks of two
    // processes running the same code are one site. Each distinct frame
    // gets a number, and each raw frame its frames' numbers, once; a
    // stack's site is then found by numbers, and built only when new
    // (hashing and cloning every stack's frames took milliseconds).
    let mut frame_ids: HashMap<&Frame, u32> = HashMap::new();
    // By a frame's number: whether it is machinery (responsible.rs).
    let mut machinery: Vec<bool> = Vec::new();
    let mut ids_of: HashMap<RawFrame, Vec<u32>> = HashMap::new();
    let mut index: HashMap<(Vec<u32>, bool), usize> = HashMap::new();
    let mut sites: Vec<CallSite> = Vec::new();
    let mut site_of = Vec::with_capacity(stacks.len());
    for stack in stacks {
        let mut key = Vec::new();
        for f in &stack.frames {
            let ids = ids_of.entry(*f).or_insert_with(|| {
                names[f]
                    .iter()
                    .map(|named| {
                        let next = frame_ids.len() as u32;
                        *frame_ids.entry(named).or_insert_with(|| {
                            machinery.push(is_machinery(named));
                            next
                        })
                    })
                    .collect()
            });
            key.extend_from_slice(ids);
        }
        // framehop cannot always tell it reached the end; a thread's first
        // function is the end.
        let complete = stack.complete || stack.frames.iter().rev().find_map(|f| names[f].last()).is_some_and(is_root);
        let id = *index.entry((key, complete)).or_insert_with_key(|(key, _)| {
            let frames: Vec<Frame> = stack.frames.iter().flat_map(|f| names[f].iter().cloned()).collect();
            let judged: Vec<bool> = key.iter().map(|&id| machinery[id as usize]).collect();
            let (responsible, own_frames) = responsible_of(&judged).map_or((None, 0), |(i, n)| (Some(i), n));
            sites.push(CallSite { responsible, own_frames, frames, complete });
            sites.len() - 1
        });
        site_of.push(id);
    }
    (sites, site_of)
}

/// Names frames in memory no file backs: a JIT's code, named by its perf
/// map (read at the end: the JIT writes it as it goes).
fn name_jit_frames(stacks: &[RawStack], names: &mut HashMap<RawFrame, Vec<Frame>>) {
    let mut jit_maps: HashMap<u32, PerfMap> = HashMap::new();
    for f in stacks.iter().flat_map(|s| &s.frames) {
        if f.image.is_none() && !names.contains_key(f) {
            let map = jit_maps.entry(f.pid).or_insert_with(|| PerfMap::of(f.pid));
            let function = map.name(f.addr).map(str::to_string);
            let module = if function.is_some() { JIT } else { "?" };
            names.insert(*f, vec![Frame { function, module: module.into(), address: f.addr, ..Default::default() }]);
        }
    }
}

/// The names an ELF file exports for its functions, by address: the public
/// name of each internal alias (`mktime` at `__GI_mktime`'s address). Of
/// several exported names (mktime, timelocal; fstatat, __fstatat64), the
/// one with fewest leading underscores, then the shortest.
fn public_names(file: &std::path::Path) -> HashMap<u64, String> {
    use object::{Object, ObjectSymbol, SymbolKind};
    let rank = |n: &str| (n.len() - n.trim_start_matches('_').len(), n.len());
    // Read as far as the dynamic symbols: not the whole 2 MB of libc.
    super::debug_cache::elf(file, |elf| {
        let mut out: HashMap<u64, String> = HashMap::new();
        for sym in elf.dynamic_symbols() {
            let Ok(name) = sym.name() else { continue };
            if sym.kind() != SymbolKind::Text || !sym.is_definition() || !sym.is_global() || name.is_empty() {
                continue;
            }
            let better = out.get(&sym.address()).is_none_or(|old| (rank(name), name) < (rank(old), old.as_str()));
            if better {
                out.insert(sym.address(), name.to_string());
            }
        }
        out
    })
    .unwrap_or_default()
}

/// The first function of a process or thread.
pub(super) fn is_root(f: &Frame) -> bool {
    matches!(f.function.as_deref(), Some("_start" | "__clone3" | "__clone" | "clone3" | "clone" | "start_thread"))
}

fn frame(module: &str, address: u64, function: Option<String>, info: Option<&CodeInfo>, inlined: bool) -> Frame {
    Frame {
        function,
        file: info.map(|c| c.to_path().to_string_lossy().into_owned()),
        line: info.and_then(|c| c.line),
        module: module.to_string(),
        address,
        inlined,
        public: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glibcs_internal_aliases_have_their_exported_names() {
        let libc = ["/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libc.so.6"].into_iter().find(|p| std::path::Path::new(p).exists());
        let names = public_names(std::path::Path::new(libc.expect("glibc")));
        let values: Vec<&str> = names.values().map(String::as_str).collect();
        // One name per address, the plainest: malloc (not __libc_malloc),
        // mmap (not mmap64), mktime (not timelocal).
        for public in ["malloc", "mmap", "mktime", "fstatat"] {
            assert!(values.contains(&public), "{public}");
        }
        for alias in ["__libc_malloc", "mmap64", "timelocal", "__fstatat64"] {
            assert!(!values.contains(&alias), "{alias}");
        }
    }
}
