//! Unwinds a copied user stack with framehop: DWARF CFI from each module's
//! `.eh_frame` (or `.debug_frame`), frame pointers where there is none.
//! Works offline, so the process may be long gone.

use std::collections::HashMap;

use framehop::{FrameAddress, Unwinder as _};

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

/// The most a stack holds above sp: Linux's default stack limit (`ulimit
/// -s`, and a thread's stack). A read farther up is no frame's but an
/// unwind gone wrong: it says nothing of the bytes a sample needs.
const STACK_LIMIT: u64 = 8 << 20;

impl UnwindFacts {
    /// Notes the unwinder's read of the 8 bytes at `addr`, from a copy of
    /// the stack from `sp` to `end`.
    fn note_read(&mut self, sp: u64, end: u64, addr: u64) {
        let Some(above) = addr.checked_sub(sp).filter(|&a| a < STACK_LIMIT) else { return };
        self.bytes_used = self.bytes_used.max(above + 8);
        if addr >= end.saturating_sub(7) {
            self.too_short = true;
        }
    }
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
    /// Each image's own unwinder, its one module at the image's own
    /// addresses: a frame is unwound by its image's, its addresses moved by
    /// the mapping's bias, so that the rules framehop finds (and caches, by
    /// address and unwinder) for one process serve every process of the
    /// same files: 5,000 runs of one program parse its unwind tables once,
    /// not once each.
    by_image: HashMap<ImageId, ImageUnwinder>,
    /// No module: framehop's frame-pointer rule, for code in no file (a
    /// JIT's).
    bare: ImageUnwinder,
    cache: regs::Cache,
}

impl Unwinder {
    pub fn apply(&mut self, event: MapEvent) {
        self.spaces.apply(event);
    }

    /// Drops what was kept for a process that ended: its address spaces
    /// (the images and their unwinders stay, shared by every process).
    pub fn forget(&mut self, pid: u32) {
        self.spaces.forget(pid);
    }

    pub fn unwind(&mut self, s: &StackSample) -> (RawStack, UnwindFacts) {
        let mut facts = UnwindFacts::default();
        // Disjoint borrows: the mappings are read while images and
        // unwinders are updated, without copying them per sample.
        let Unwinder { spaces, images, by_image, bare, cache } = self;
        let Some(maps) = spaces.at(s.tgid, s.time_ns) else {
            facts.unmapped_frames = 1;
            return (RawStack { frames: vec![RawFrame { image: None, addr: s.ip, pid: s.tgid }], complete: false }, facts);
        };

        let (sp, end) = (s.sp, s.sp + s.stack.len() as u64);
        let mut read = |addr: u64| {
            facts.note_read(sp, end, addr);
            s.read_u64(addr).ok_or(())
        };
        let mut regs = regs::of(s);
        let mut address = FrameAddress::InstructionPointer(s.ip);
        let mut frames = Vec::new();
        let mut complete = false;
        while frames.len() < MAX_FRAMES {
            let lookup = address.address_for_lookup();
            let placed = spaces::find(maps, lookup).and_then(|m| image_bias(images, m)).filter(|&(_, bias)| lookup >= bias);
            frames.push(match placed {
                Some((id, bias)) => RawFrame { image: Some(id), addr: lookup - bias, pid: 0 },
                None => RawFrame { image: None, addr: lookup, pid: s.tgid },
            });
            let (unwinder, bias) = match placed {
                Some((id, bias)) => (&*by_image.entry(id).or_insert_with(|| own_unwinder(images, id)), bias),
                None => (&*bare, 0),
            };
            let Some(here) = moved(address, bias) else { break };
            match unwinder.unwind_frame(here, &mut regs, cache, &mut read) {
                Ok(Some(return_address)) => match FrameAddress::from_return_address(return_address) {
                    Some(next) => address = next,
                    None => break, // a null return address: as framehop's iterator, an error
                },
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
        facts.unmapped_frames = frames.iter().filter(|f| f.image.is_none()).count() as u64;
        (RawStack { frames, complete }, facts)
    }
}

/// An image's own unwinder (Unwinder::by_image).
fn own_unwinder(images: &Images, id: ImageId) -> ImageUnwinder {
    let mut unwinder = ImageUnwinder::new();
    unwinder.add_module(images.image(id).own_module());
    unwinder
}

/// `address` moved to its image's own addresses; None if it would be null.
fn moved(address: FrameAddress, bias: u64) -> Option<FrameAddress> {
    match address {
        FrameAddress::InstructionPointer(a) => Some(FrameAddress::InstructionPointer(a.wrapping_sub(bias))),
        FrameAddress::ReturnAddress(a) => FrameAddress::from_return_address(a.get().wrapping_sub(bias)),
    }
}

/// The image of mapping `m` and where its address 0 lies in the process.
fn image_bias(images: &mut Images, m: &Mapping) -> Option<(ImageId, u64)> {
    let id = images.get(&m.name)?;
    Some((id, images.image(id).bias(m.start, m.pgoff)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_say_what_a_sample_needed_but_a_wild_one_says_nothing() {
        let (sp, end) = (0x7ffd_0000_0000, 0x7ffd_0000_4000);
        let mut facts = UnwindFacts::default();
        facts.note_read(sp, end, sp + 0x100);
        assert_eq!((facts.bytes_used, facts.too_short), (0x108, false));
        facts.note_read(sp, end, sp - 8); // below sp: no frame's bytes
        assert_eq!((facts.bytes_used, facts.too_short), (0x108, false));
        // rsync: 37 KiB of frames, the copy 16 KiB.
        facts.note_read(sp, end, sp + 37_728);
        assert_eq!((facts.bytes_used, facts.too_short), (37_736, true));
        // An unwind gone wrong reads a code or heap address: it was once
        // taken as 6.8e18 bytes wanted above sp.
        let mut wild = UnwindFacts::default();
        wild.note_read(sp, end, 0x5eaf_0000_0000_0000);
        assert_eq!((wild.bytes_used, wild.too_short), (0, false));
    }
}
