//! Unwinds a copied user stack with framehop: DWARF CFI from each module's
//! `.eh_frame` (or `.debug_frame`), frame pointers where there is none.
//! Works offline, so the process may be long gone.

use std::collections::HashMap;

use framehop::Unwinder as _;

use super::images::{ImageId, Images, SectionBytes};
use super::spaces::{self, AddressSpaces, Mapping};
use crate::backend::mappings::MapEvent;
use crate::backend::samples::StackSample;

/// Deeper stacks than this are cut (a runaway recursion, or garbage).
const MAX_FRAMES: usize = 256;

/// One frame, placed: the image and the address in it (ELF virtual
/// address) to look up, already moved back into the call instruction for
/// return addresses. `image` is None for code outside any known file;
/// then `pid` says whose memory it is (a JIT's code is its process's own),
/// and is 0 otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RawFrame {
    pub image: Option<ImageId>,
    pub addr: u64,
    pub pid: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RawStack {
    pub frames: Vec<RawFrame>,
    /// The unwinder reached the root of the stack.
    pub complete: bool,
}

/// What unwinding one sample found besides the frames.
#[derive(Debug, Clone, Copy, Default)]
pub struct UnwindFacts {
    /// Bytes above sp that unwinding read.
    pub bytes_used: u64,
    /// It wanted bytes beyond the copy.
    pub too_short: bool,
    pub unmapped_frames: u64,
}

/// framehop's unwinder for the architecture, and its registers from a
/// sample's.
#[cfg(target_arch = "x86_64")]
mod regs {
    pub use framehop::x86_64::{CacheX86_64 as Cache, UnwinderX86_64 as ArchUnwinder};
    pub fn of(s: &crate::backend::samples::StackSample) -> framehop::x86_64::UnwindRegsX86_64 {
        framehop::x86_64::UnwindRegsX86_64::new(s.ip, s.sp, s.fp)
    }
}
#[cfg(target_arch = "aarch64")]
mod regs {
    pub use framehop::aarch64::{CacheAarch64 as Cache, UnwinderAarch64 as ArchUnwinder};
    pub fn of(s: &crate::backend::samples::StackSample) -> framehop::aarch64::UnwindRegsAarch64 {
        framehop::aarch64::UnwindRegsAarch64::new(s.lr, s.sp, s.fp)
    }
}

type ImageUnwinder = regs::ArchUnwinder<SectionBytes>;

#[derive(Default)]
pub struct Unwinder {
    spaces: AddressSpaces,
    pub images: Images,
    /// (pid, epoch) -> its framehop unwinder, and how many of the epoch's
    /// mappings it holds.
    unwinders: HashMap<(u32, usize), (ImageUnwinder, usize)>,
    cache: regs::Cache,
}

impl Unwinder {
    pub fn apply(&mut self, event: MapEvent) {
        self.spaces.apply(event);
    }

    /// Drops what was kept for a process that ended: its address spaces
    /// and its unwinders (the images stay, shared by every process).
    pub fn forget(&mut self, pid: u32) {
        self.spaces.forget(pid);
        self.unwinders.retain(|(p, _), _| *p != pid);
    }

    pub fn unwind(&mut self, s: &StackSample) -> (RawStack, UnwindFacts) {
        let mut facts = UnwindFacts::default();
        // Disjoint borrows: the mappings are read while images and
        // unwinders are updated, without copying them per sample.
        let Unwinder { spaces, images, unwinders, cache } = self;
        let Some((epoch, maps)) = spaces.at(s.tgid, s.time_ns) else {
            facts.unmapped_frames = 1;
            return (RawStack { frames: vec![RawFrame { image: None, addr: s.ip, pid: s.tgid }], complete: false }, facts);
        };
        let entry = unwinders.entry((s.tgid, epoch)).or_insert_with(|| (regs::ArchUnwinder::new(), 0));
        add_modules(images, entry, maps);

        let (sp, end) = (s.sp, s.sp + s.stack.len() as u64);
        let mut read = |addr: u64| {
            if addr >= sp {
                facts.bytes_used = facts.bytes_used.max(addr + 8 - sp);
            }
            if addr >= end.saturating_sub(7) {
                facts.too_short = true;
            }
            s.read_u64(addr).ok_or(())
        };
        let mut addrs = Vec::new();
        let mut complete = false;
        let mut frames = entry.0.iter_frames(s.ip, regs::of(s), cache, &mut read);
        while addrs.len() < MAX_FRAMES {
            match frames.next() {
                Ok(Some(f)) => addrs.push(f.address_for_lookup()),
                Ok(None) => {
                    complete = true;
                    break;
                }
                Err(_) => break,
            }
        }
        if complete {
            facts.too_short = false;
        }
        let frames = addrs
            .into_iter()
            .map(|a| {
                let placed = spaces::find(maps, a).and_then(|m| place(images, m, a));
                placed.unwrap_or_else(|| {
                    facts.unmapped_frames += 1;
                    RawFrame { image: None, addr: a, pid: s.tgid }
                })
            })
            .collect();
        (RawStack { frames, complete }, facts)
    }
}

/// Gives the unwinder of an epoch the mappings it does not have yet.
fn add_modules(images: &mut Images, entry: &mut (ImageUnwinder, usize), maps: &[Mapping]) {
    let (unwinder, added) = entry;
    for (i, m) in maps.iter().enumerate().skip(*added) {
        // A new mapping over an old one's range replaces it.
        for old in &maps[..i] {
            if old.start < m.end && m.start < old.end {
                unwinder.remove_module(old.start);
            }
        }
        let Some(id) = images.get(&m.name) else { continue };
        let image = images.image(id);
        if let Some(bias) = image.bias(m.start, m.pgoff) {
            unwinder.add_module(image.module(m.start..m.end, bias));
        }
    }
    *added = maps.len();
}

fn place(images: &mut Images, m: &Mapping, addr: u64) -> Option<RawFrame> {
    let id = images.get(&m.name)?;
    let bias = images.image(id).bias(m.start, m.pgoff)?;
    Some(RawFrame { image: Some(id), addr: addr.checked_sub(bias)?, pid: 0 })
}
