//! Names the frames of unwound stacks with blazesym: functions, inlined
//! functions, file:line where there is debug info. glibc's own debug info
//! comes from Debian's libc6-dbg, found by build-id under /usr/lib/debug.
//! Each address is looked up once, each file opened once.

use std::collections::HashMap;

use blazesym::symbolize::source::{Elf, Source};
use blazesym::symbolize::{CodeInfo, Input, Symbolized, Symbolizer};

use super::images::Images;
use super::perf_map::PerfMap;
use super::responsible::responsible;
use super::unwind::{RawFrame, RawStack};
use crate::model::{CallSite, Frame};

/// The module of frames a perf map named: code a JIT wrote.
pub const JIT: &str = "[jit]";

/// Turns each distinct raw stack into a call site; returns the sites and,
/// per input stack, the index of its site (equal stacks share one).
pub fn call_sites(images: &Images, stacks: &[RawStack]) -> (Vec<CallSite>, Vec<usize>) {
    let names = name_frames(images, stacks);
    let mut sites: Vec<CallSite> = Vec::new();
    let mut index: HashMap<CallSite, usize> = HashMap::new();
    let mut site_of = Vec::with_capacity(stacks.len());
    for stack in stacks {
        let frames: Vec<Frame> = stack.frames.iter().flat_map(|f| names[f].iter().cloned()).collect();
        // framehop cannot always tell it reached the end; a thread's first
        // function is the end.
        let complete = stack.complete || frames.last().is_some_and(is_root);
        let (responsible, own_frames) = responsible(&frames).map_or((None, 0), |(i, n)| (Some(i), n));
        let site = CallSite { responsible, own_frames, frames, complete };
        let id = *index.entry(site.clone()).or_insert_with(|| {
            sites.push(site);
            sites.len() - 1
        });
        site_of.push(id);
    }
    (sites, site_of)
}

/// Every distinct frame of `stacks`, named: one or more frames each (the
/// inlined functions at that address, innermost first, then the function
/// they are inlined into).
fn name_frames(images: &Images, stacks: &[RawStack]) -> HashMap<RawFrame, Vec<Frame>> {
    let mut by_image: HashMap<Option<usize>, Vec<u64>> = HashMap::new();
    let mut names = HashMap::new();
    let mut jit_maps: HashMap<u32, PerfMap> = HashMap::new();
    for f in stacks.iter().flat_map(|s| &s.frames) {
        if f.image.is_some() {
            by_image.entry(f.image).or_default().push(f.addr);
        } else if !names.contains_key(f) {
            // Memory no file backs: a JIT's code, named by its perf map.
            let map = jit_maps.entry(f.pid).or_insert_with(|| PerfMap::of(f.pid));
            let function = map.name(f.addr).map(str::to_string);
            let module = if function.is_some() { JIT } else { "?" };
            names.insert(*f, vec![Frame { function, module: module.into(), address: f.addr, ..Default::default() }]);
        }
    }
    let symbolizer = Symbolizer::builder().enable_inlined_fns(true).enable_code_info(true).build();
    for (image, mut addrs) in by_image {
        addrs.sort_unstable();
        addrs.dedup();
        let Some(id) = image else { continue };
        let img = images.image(id);
        let src = Source::Elf(Elf::new(super::debug_cache::debug_source(&img.file)));
        let exported = if crate::model::in_c_runtime(&img.name) { public_names(&img.file) } else { HashMap::new() };
        let results = symbolizer.symbolize(&src, Input::VirtOffset(&addrs)).unwrap_or_default();
        for (i, &a) in addrs.iter().enumerate() {
            let unnamed = || vec![Frame { module: img.name.clone(), address: a, ..Default::default() }];
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
                _ => unnamed(),
            };
            names.insert(RawFrame { image, addr: a, pid: 0 }, frames);
        }
    }
    names
}

/// The names an ELF file exports for its functions, by address: the public
/// name of each internal alias (`mktime` at `__GI_mktime`'s address). Of
/// several exported names (mktime, timelocal; fstatat, __fstatat64), the
/// one with fewest leading underscores, then the shortest.
fn public_names(file: &std::path::Path) -> HashMap<u64, String> {
    use object::{Object, ObjectSymbol, SymbolKind};
    let mut out: HashMap<u64, String> = HashMap::new();
    let Ok(data) = std::fs::read(file) else { return out };
    let Ok(elf) = object::File::parse(&*data) else { return out };
    let rank = |n: &str| (n.len() - n.trim_start_matches('_').len(), n.len(), n.to_string());
    for sym in elf.dynamic_symbols() {
        let Ok(name) = sym.name() else { continue };
        if sym.kind() != SymbolKind::Text || !sym.is_definition() || !sym.is_global() || name.is_empty() {
            continue;
        }
        let better = out.get(&sym.address()).is_none_or(|old| rank(name) < rank(old));
        if better {
            out.insert(sym.address(), name.to_string());
        }
    }
    out
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
