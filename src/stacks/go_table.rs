//! Names for a Go program's code from its own line table, `.gopclntab`,
//! which Go's runtime needs for its tracebacks and so keeps in a binary
//! built with `-ldflags=-s -w` (no symbols, no DWARF: how Go programs are
//! usually shipped). The format of Go 1.18 and later (magic 0xfffffff0;
//! 0xfffffff1 since 1.20): a header of offsets, a table of each function's
//! entry (an offset from the start of `.text`) and data, and per function
//! its name and the pc-value tables of its file and line
//! (src/runtime/symtab.go, src/debug/gosym/pclntab.go). Code inlined into
//! a function is named from the function's inline tree, a funcdata table
//! at an offset from the module's `gofunc` address, which only the
//! runtime's module data (found by its pointer to the line table) gives
//! (src/runtime/symtabinl.go). The tables are the traced program's: every
//! read is bounds-checked, and a malformed one names nothing.

use std::path::Path;

use object::{Object, ObjectSection};

const GO_1_18: u32 = 0xffff_fff0;
const GO_1_20: u32 = 0xffff_fff1;
/// The pc-data table that says whether a pc is in inlined code, and at
/// which entry of the inline tree.
const PCDATA_INL_TREE_INDEX: usize = 2;
/// The funcdata entry that locates a function's inline tree.
const FUNCDATA_INL_TREE: usize = 3;
/// Inlined calls within one another followed at most.
const MAX_INLINE_DEPTH: usize = 64;
/// Where `gofunc` is in the runtime's module data, in pointers from its
/// start, by the table's format (Go 1.20 added two fields before it).
const GOFUNC_WORD_1_18: usize = 38;
const GOFUNC_WORD_1_20: usize = 40;
/// Where `text` is there (either format).
const TEXT_WORD: usize = 22;
/// Steps of a pc-value table walked at most: a function of 1 MiB.
const MAX_STEPS: usize = 1 << 20;

/// A function's name and, where the table says, its source line.
#[derive(Debug, PartialEq, Eq)]
pub struct GoName {
    pub function: String,
    pub file: Option<String>,
    pub line: Option<u32>,
    /// Inlined into the frame after it.
    pub inlined: bool,
}

/// The inline trees' memory: the binary's from the module's `gofunc`
/// address (what funcdata offsets count from) to its section's end.
struct InlineData {
    data: Vec<u8>,
}

/// A Go binary's line table, read whole.
pub struct GoTable {
    data: Vec<u8>,
    /// The address function entries are offsets from (`.text`'s).
    text: u64,
    /// The instruction size unit of pc deltas (1 on x86-64, 4 on arm64).
    quantum: u64,
    /// A pointer's size in the binary.
    ptr_size: usize,
    nfunc: usize,
    funcnames: usize,
    cutab: usize,
    filetab: usize,
    pctab: usize,
    functab: usize,
    /// The size of a function's fixed fields, before its pc-data offsets.
    func_size: usize,
    /// Go 1.20's format or later (else 1.18's).
    go_1_20: bool,
    /// Where the inline trees are; None: inlined code is named by the
    /// function it is inlined into.
    inline: Option<InlineData>,
}

impl GoTable {
    /// The table of ELF file `path`, if it is a Go binary of 1.18 or later.
    /// A position-independent one of an older Go (1.19, seen) keeps it in
    /// a section of another name.
    pub fn of(path: &Path) -> Option<GoTable> {
        super::debug_cache::elf(path, |elf| {
            let section = elf.section_by_name(".gopclntab").or_else(|| elf.section_by_name(".data.rel.ro.gopclntab"))?;
            let text = elf.section_by_name(".text")?.address();
            let mut table = GoTable::parse(section.data().ok()?.to_vec(), text)?;
            table.inline = table.inline_data(elf, section.address());
            Some(table)
        })
        .flatten()
    }

    /// The inline trees' memory, from the runtime's module data: the one
    /// word-aligned record in a data section that starts with the line
    /// table's address and has `.text`'s where `text` goes.
    fn inline_data<'a>(&self, elf: &object::File<'a, &'a object::ReadCache<std::fs::File>>, table_at: u64) -> Option<InlineData> {
        let ptr = self.ptr_size;
        let gofunc_word = if self.go_1_20 { GOFUNC_WORD_1_20 } else { GOFUNC_WORD_1_18 };
        let word = |d: &[u8], at: usize| d.get(at..at + ptr).map(|b| b.iter().rev().fold(0u64, |v, &x| v << 8 | u64::from(x)));
        let gofunc = elf
            .sections()
            .filter(|s| matches!(s.name(), Ok(".go.module" | ".noptrdata" | ".data" | ".data.rel.ro")))
            .filter_map(|s| s.data().ok())
            .find_map(|d| {
                (0..d.len().saturating_sub((gofunc_word + 1) * ptr)).step_by(ptr).find_map(|at| {
                    (word(d, at)? == table_at && word(d, at + TEXT_WORD * ptr)? == self.text).then(|| word(d, at + gofunc_word * ptr)).flatten()
                })
            })?;
        let holder = elf.sections().find(|s| s.address() <= gofunc && gofunc < s.address() + s.size())?;
        let data = holder.data().ok()?;
        let from = usize::try_from(gofunc - holder.address()).ok()?;
        Some(InlineData { data: data.get(from..)?.to_vec() })
    }

    /// `data`: the `.gopclntab` section; `text`: `.text`'s address, where
    /// the header leaves the start unrelocated (0).
    pub fn parse(data: Vec<u8>, text: u64) -> Option<GoTable> {
        let magic = u32_at(&data, 0)?;
        if !(magic == GO_1_18 || magic == GO_1_20) || data.get(4..6)? != [0, 0] {
            return None;
        }
        let (quantum, ptr) = (u64::from(*data.get(6)?), usize::from(*data.get(7)?));
        if !(ptr == 4 || ptr == 8) || quantum == 0 {
            return None;
        }
        let word = |i: usize| -> Option<usize> {
            let at = 8 + i * ptr;
            let bytes = data.get(at..at + ptr)?;
            let mut v = [0u8; 8];
            v[..ptr].copy_from_slice(bytes);
            usize::try_from(u64::from_le_bytes(v)).ok()
        };
        let header_text = word(2)? as u64;
        let table = GoTable {
            text: if header_text != 0 { header_text } else { text },
            quantum,
            nfunc: word(0)?,
            funcnames: word(3)?,
            cutab: word(4)?,
            filetab: word(5)?,
            pctab: word(6)?,
            functab: word(7)?,
            func_size: if magic == GO_1_20 { 44 } else { 40 },
            go_1_20: magic == GO_1_20,
            ptr_size: ptr,
            inline: None,
            data: Vec::new(),
        };
        let ends = [table.funcnames, table.cutab, table.filetab, table.pctab, table.functab];
        if ends.iter().any(|&o| o >= data.len()) || table.functab.checked_add(table.nfunc.checked_mul(8)?.checked_add(4)?)? > data.len() {
            return None;
        }
        Some(GoTable { data, ..table })
    }

    /// The frames at `pc` (an address in the file): the functions inlined
    /// there, innermost first, each with its file and line, then the one
    /// they are inlined into, with the line of the outermost call. Without
    /// the inline tree, inlined code is named by that function alone, its
    /// file (where its entry is) and no line (the line table's would be
    /// another function's). Empty outside the table's functions.
    pub fn frames(&self, pc: u64) -> Vec<GoName> {
        self.frames_at(pc).unwrap_or_default()
    }

    fn frames_at(&self, pc: u64) -> Option<Vec<GoName>> {
        let off = u32::try_from(pc.checked_sub(self.text)?).ok()?;
        let entry = |i: usize| u32_at(&self.data, self.functab + i * 8);
        if off < entry(0)? || off >= entry(self.nfunc)? {
            return None;
        }
        // The last function whose entry is at or before the pc.
        let (mut lo, mut hi) = (0, self.nfunc);
        while lo + 1 < hi {
            let mid = (lo + hi) / 2;
            if entry(mid)? <= off {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        let func = self.functab.checked_add(u32_at(&self.data, self.functab + lo * 8 + 4)? as usize)?;
        // The fields after the 4-byte entry offset, each 4 bytes.
        let field = |n: usize| u32_at(&self.data, func + 4 * n);
        let function = self.string(self.funcnames, field(1)?)?;
        let entry_pc = self.text + u64::from(entry(lo)?);
        let npcdata = field(7)? as usize;
        let inline_index = |at: u64| -> Option<i32> {
            if npcdata <= PCDATA_INL_TREE_INDEX {
                return None;
            }
            self.pc_value(u32_at(&self.data, func + self.func_size + 4 * PCDATA_INL_TREE_INDEX)?, entry_pc, at).filter(|&i| i >= 0)
        };
        let file_at = |at: u64| {
            let index = u32::try_from(self.pc_value(field(5)?, entry_pc, at)?).ok()?;
            let name = u32_at(&self.data, self.cutab + 4 * (field(8)? as usize + index as usize))?;
            (name != u32::MAX).then(|| self.string(self.filetab, name)).flatten()
        };
        let line_at = |at: u64| self.pc_value(field(6)?, entry_pc, at).filter(|&l| l > 0).map(|l| l as u32);
        let mut frames = Vec::new();
        let mut at = pc;
        if let Some(index) = inline_index(pc) {
            // The byte before the funcdata offsets says how many there are.
            let nfuncdata = usize::from(*self.data.get(func + self.func_size - 1)?);
            let tree = (nfuncdata > FUNCDATA_INL_TREE)
                .then(|| u32_at(&self.data, func + self.func_size + 4 * npcdata + 4 * FUNCDATA_INL_TREE))
                .flatten()
                .filter(|&o| o != u32::MAX)
                .and_then(|o| Some((self.inline.as_ref()?, o)));
            let Some((inline, tree)) = tree else {
                let file = file_at(entry_pc);
                return Some(vec![GoName { function, file, line: None, inlined: false }]);
            };
            let mut index = Some(index);
            for _ in 0..MAX_INLINE_DEPTH {
                let Some(i) = index else { break };
                let (name, parent_pc) = inline.call(tree, i, self.go_1_20)?;
                let file = file_at(at);
                let line = line_at(at).filter(|_| file.is_some());
                frames.push(GoName { function: self.string(self.funcnames, name)?, file, line, inlined: true });
                at = entry_pc.checked_add(u64::from(parent_pc))?;
                index = inline_index(at);
            }
            if index.is_some() {
                return None;
            }
        }
        let file = file_at(at);
        let line = line_at(at).filter(|_| file.is_some());
        frames.push(GoName { function, file, line, inlined: false });
        Some(frames)
    }

    /// The value of pc-value table `off` at `target` in the function that
    /// starts at `entry`: deltas of value (zig-zag) and pc, from -1.
    fn pc_value(&self, off: u32, entry: u64, target: u64) -> Option<i32> {
        let mut at = self.pctab.checked_add(off as usize)?;
        let (mut value, mut pc) = (-1i32, entry);
        for step in 0..MAX_STEPS {
            let uv = varint(&self.data, &mut at)?;
            if uv == 0 && step > 0 {
                return None;
            }
            let delta = if uv & 1 != 0 { !(uv >> 1) as i32 } else { (uv >> 1) as i32 };
            pc = pc.checked_add(u64::from(varint(&self.data, &mut at)?) * self.quantum)?;
            value = value.wrapping_add(delta);
            if target < pc {
                return Some(value);
            }
        }
        None
    }

    /// The NUL-terminated string at `off` in the table at `base`.
    fn string(&self, base: usize, off: u32) -> Option<String> {
        let start = base.checked_add(off as usize)?;
        let rest = self.data.get(start..)?;
        let end = rest.iter().take(4096).position(|&b| b == 0)?;
        Some(String::from_utf8_lossy(&rest[..end]).into_owned())
    }
}

impl InlineData {
    /// Entry `index` of the inline tree at funcdata offset `tree`: the
    /// inlined function's name (an offset into the function names) and
    /// where its call is, in bytes from the entry of the function it is in.
    fn call(&self, tree: u32, index: i32, go_1_20: bool) -> Option<(u32, u32)> {
        // Go 1.20's entry: funcID, 3 bytes, nameOff, parentPc, startLine;
        // 1.18's: parent, funcID, a byte, file, line, func_, parentPc.
        let (size, name_at, parent_pc_at) = if go_1_20 { (16, 4, 8) } else { (20, 12, 16) };
        let at = usize::try_from(tree).ok()?.checked_add(usize::try_from(index).ok()?.checked_mul(size)?)?;
        Some((u32_at(&self.data, at + name_at)?, u32_at(&self.data, at + parent_pc_at)?))
    }
}

fn u32_at(data: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(data.get(at..at.checked_add(4)?)?.try_into().ok()?))
}

/// An unsigned LEB128 of up to 32 bits at `at`, which it moves past.
fn varint(data: &[u8], at: &mut usize) -> Option<u32> {
    let mut v: u32 = 0;
    for shift in (0..35).step_by(7) {
        let b = *data.get(*at)?;
        *at += 1;
        v |= u32::from(b & 0x7f).checked_shl(shift)?;
        if b < 0x80 {
            return Some(v);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: u64 = 0x40_1000;

    /// A Go 1.20 table of two functions: main.main at .text's start, 0x40
    /// bytes (line 10, then 12 from +0x20; from +0x30 os.Stat's code,
    /// inlined by the call at +0x28, line 7), and os.Stat after it, 0x40
    /// bytes (line 7), both in file 0. main.main's inline tree is at
    /// funcdata offset 0x10 from `gofunc`.
    fn table() -> Vec<u8> {
        let mut t = vec![0u8; 8 + 8 * 8];
        t[0..4].copy_from_slice(&GO_1_20.to_le_bytes());
        (t[6], t[7]) = (1, 8);
        let put = |t: &mut Vec<u8>, bytes: &[u8]| -> u64 {
            let at = t.len() as u64;
            t.extend_from_slice(bytes);
            at
        };
        let names = put(&mut t, b"main.main\0os.Stat\0");
        let cutab = put(&mut t, &0u32.to_le_bytes());
        let filetab = put(&mut t, b"/src/app/main.go\0");
        let pctab = put(&mut t, &[0]);
        // Lines: -1 +11 = 10 up to +0x20, +2 = 12 up to +0x30, -5 = 7 up to +0x40.
        let main_lines = put(&mut t, &[22, 0x20, 4, 0x10, 9, 0x10, 0]) - pctab;
        let file0 = put(&mut t, &[2, 0x40, 0]) - pctab;
        // Not inlined (-1) up to +0x30, inlined call 0 from there.
        let main_inl = put(&mut t, &[0, 0x30, 2, 0x10, 0]) - pctab;
        let stat_lines = put(&mut t, &[16, 0x40, 0]) - pctab;
        let never_inl = put(&mut t, &[0, 0x40, 0]) - pctab;
        let functab = t.len() as u64;
        // main.main: fixed fields, 3 pc-data offsets, 4 funcdata ones.
        let (main_size, stat_at) = (44 + 12 + 16, 2 * 8 + 4 + 44 + 12 + 16);
        for (entry, at) in [(0u32, 2 * 8 + 4), (0x40, stat_at)] {
            t.extend_from_slice(&entry.to_le_bytes());
            t.extend_from_slice(&(at as u32).to_le_bytes());
        }
        t.extend_from_slice(&0x80u32.to_le_bytes());
        let before = t.len();
        for (entry, name, lines, inl, nfuncdata) in [(0u32, 0u32, main_lines, main_inl, 4u32), (0x40, 10, stat_lines, never_inl, 0)] {
            // The last word: funcID, flag, a byte, nfuncdata.
            let fields = [entry, name, 0, 0, 0, file0 as u32, lines as u32, 3, 0, 0, nfuncdata << 24];
            fields.iter().for_each(|f| t.extend_from_slice(&f.to_le_bytes()));
            [0u32, 0, inl as u32].iter().for_each(|f| t.extend_from_slice(&f.to_le_bytes()));
            if nfuncdata > 0 {
                [u32::MAX, u32::MAX, u32::MAX, 0x10].iter().for_each(|f| t.extend_from_slice(&f.to_le_bytes()));
                assert_eq!(t.len() - before, main_size);
            }
        }
        for (i, v) in [2, 1, 0, names, cutab, filetab, pctab, functab].into_iter().enumerate() {
            t[8 + 8 * i..16 + 8 * i].copy_from_slice(&v.to_le_bytes());
        }
        t
    }

    /// The memory from `gofunc`: main.main's inline tree at 0x10, its one
    /// call: os.Stat (name offset 10), called at +0x28.
    fn inline_data() -> InlineData {
        let mut data = vec![0u8; 0x10];
        [0u32, 10, 0x28, 5].iter().for_each(|f| data.extend_from_slice(&f.to_le_bytes()));
        InlineData { data }
    }

    fn named(function: &str, line: Option<u32>, inlined: bool) -> GoName {
        GoName { function: function.into(), file: Some("/src/app/main.go".into()), line, inlined }
    }

    #[test]
    fn a_pc_is_named_by_its_function_file_and_line() {
        let mut t = GoTable::parse(table(), TEXT).expect("a Go 1.20 table");
        assert_eq!(t.frames(TEXT + 0x10), vec![named("main.main", Some(10), false)]);
        assert_eq!(t.frames(TEXT + 0x28), vec![named("main.main", Some(12), false)]);
        // Inlined code without the inline tree: the outer function and its
        // file, no line of another's.
        assert_eq!(t.frames(TEXT + 0x34), vec![named("main.main", None, false)]);
        assert_eq!(t.frames(TEXT + 0x40), vec![named("os.Stat", Some(7), false)]);
        assert_eq!(t.frames(TEXT + 0x7f), vec![named("os.Stat", Some(7), false)]);
        // Outside the table's functions.
        assert!(t.frames(TEXT + 0x80).is_empty());
        assert!(t.frames(TEXT - 1).is_empty());
        // With it: the inlined function at its line, then the call's.
        t.inline = Some(inline_data());
        assert_eq!(t.frames(TEXT + 0x34), vec![named("os.Stat", Some(7), true), named("main.main", Some(12), false)]);
        assert_eq!(t.frames(TEXT + 0x10), vec![named("main.main", Some(10), false)]);
        // A tree whose call points into itself names nothing, and ends.
        let mut looping = inline_data();
        looping.data[0x18..0x1c].copy_from_slice(&0x30u32.to_le_bytes());
        t.inline = Some(looping);
        assert!(t.frames(TEXT + 0x34).is_empty());
        // One cut short names nothing either.
        let mut cut = inline_data();
        cut.data.truncate(0x18);
        t.inline = Some(cut);
        assert!(t.frames(TEXT + 0x34).is_empty());
    }

    #[test]
    fn a_malformed_table_names_nothing_and_never_panics() {
        let good = table();
        assert!(GoTable::parse(b"\xfa\xff\xff\xff\0\0\x01\x08".to_vec(), TEXT).is_none(), "Go 1.16's format is not read");
        for cut in 0..good.len() {
            if let Some(mut t) = GoTable::parse(good[..cut].to_vec(), TEXT) {
                t.inline = Some(inline_data());
                for pc in (TEXT..TEXT + 0x90).step_by(4) {
                    let _ = t.frames(pc);
                }
            }
        }
        let mut wild = good.clone();
        for b in wild.iter_mut().skip(72) {
            *b = 0xff;
        }
        let mut t = GoTable::parse(wild, TEXT).unwrap();
        t.inline = Some(inline_data());
        for pc in (TEXT..TEXT + 0x90).step_by(4) {
            let _ = t.frames(pc);
        }
    }
}
