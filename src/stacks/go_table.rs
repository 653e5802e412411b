//! Names for a Go program's code from its own line table, `.gopclntab`,
//! which Go's runtime needs for its tracebacks and so keeps in a binary
//! built with `-ldflags=-s -w` (no symbols, no DWARF: how Go programs are
//! usually shipped). Four formats (src/debug/gosym/pclntab.go): Go 1.2's
//! (magic 0xfffffffb, to Go 1.15), 1.16's (0xfffffffa), 1.18's
//! (0xfffffff0) and 1.20's (0xfffffff1): a header, a table of each
//! function's entry and data, and per function its name and the pc-value
//! tables of its file and line (src/runtime/symtab.go). Code inlined into
//! a function is named from the function's inline tree, a funcdata table:
//! before Go 1.18 at an address the function's data holds, since then at
//! an offset from the module's `gofunc` address, which only the runtime's
//! module data (found by its pointer to the line table) gives
//! (src/runtime/symtabinl.go). The tables are the traced program's: every
//! read is bounds-checked, and a malformed one names nothing.

use std::path::Path;

use object::{Object, ObjectSection};

const GO_1_2: u32 = 0xffff_fffb;
const GO_1_16: u32 = 0xffff_fffa;
const GO_1_18: u32 = 0xffff_fff0;
const GO_1_20: u32 = 0xffff_fff1;
/// The pc-data table that says whether a pc is in inlined code, and at
/// which entry of the inline tree.
const PCDATA_INL_TREE_INDEX: usize = 2;
/// The funcdata entry that locates a function's inline tree (4 in Go 1.2's
/// format, from Go 1.12, whose entries before it held register maps).
const FUNCDATA_INL_TREE: usize = 3;
const FUNCDATA_INL_TREE_1_12: usize = 4;
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

/// Which Go wrote the table, by its magic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Go1_2,
    Go1_16,
    Go1_18,
    Go1_20,
}

impl Format {
    /// Function entries are offsets from `.text` (else addresses), and
    /// funcdata offsets from `gofunc` (else addresses).
    fn offsets(self) -> bool {
        matches!(self, Format::Go1_18 | Format::Go1_20)
    }
}

/// The inline trees' memory: the binary's from address `base` to the end
/// of its section (`gofunc`'s since Go 1.18, else `.rodata`'s).
struct InlineData {
    base: u64,
    data: Vec<u8>,
}

/// A Go binary's line table, read whole.
pub struct GoTable {
    data: Vec<u8>,
    format: Format,
    /// The address function entries are offsets from (`.text`'s).
    text: u64,
    /// The instruction size unit of pc deltas (1 on x86-64, 4 on arm64).
    quantum: u64,
    /// A pointer's size in the binary.
    ptr_size: usize,
    nfunc: usize,
    /// Where names, files, pc-value tables and the function table start
    /// in `data` (Go 1.2's: names and pc-value tables at its start).
    funcnames: usize,
    cutab: usize,
    filetab: usize,
    pctab: usize,
    functab: usize,
    /// The size of a function's fixed fields, before its pc-data offsets.
    func_size: usize,
    /// Where the inline trees are; None: inlined code is named by the
    /// function it is inlined into.
    inline: Option<InlineData>,
}

impl GoTable {
    /// The table of ELF file `path`, if it is a Go binary of 1.2 or later.
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

    /// The inline trees' memory. Before Go 1.18, `.rodata`, where the
    /// trees' addresses point. Since, from the runtime's module data: the
    /// one word-aligned record in a data section that starts with the line
    /// table's address and has `.text`'s where `text` goes.
    fn inline_data<'a>(&self, elf: &object::File<'a, &'a object::ReadCache<std::fs::File>>, table_at: u64) -> Option<InlineData> {
        if !self.format.offsets() {
            let rodata = elf.section_by_name(".rodata")?;
            return Some(InlineData { base: rodata.address(), data: rodata.data().ok()?.to_vec() });
        }
        let ptr = self.ptr_size;
        let gofunc_word = if self.format == Format::Go1_20 { GOFUNC_WORD_1_20 } else { GOFUNC_WORD_1_18 };
        let gofunc = elf
            .sections()
            .filter(|s| matches!(s.name(), Ok(".go.module" | ".noptrdata" | ".data" | ".data.rel.ro")))
            .filter_map(|s| s.data().ok())
            .find_map(|d| {
                (0..d.len().saturating_sub((gofunc_word + 1) * ptr)).step_by(ptr).find_map(|at| {
                    (word(d, at, ptr)? == table_at && word(d, at + TEXT_WORD * ptr, ptr)? == self.text)
                        .then(|| word(d, at + gofunc_word * ptr, ptr))
                        .flatten()
                })
            })?;
        let holder = elf.sections().find(|s| s.address() <= gofunc && gofunc < s.address() + s.size())?;
        let data = holder.data().ok()?;
        let from = usize::try_from(gofunc - holder.address()).ok()?;
        Some(InlineData { base: gofunc, data: data.get(from..)?.to_vec() })
    }

    /// `data`: the `.gopclntab` section; `text`: `.text`'s address, where
    /// the header leaves the start unrelocated (0).
    pub fn parse(data: Vec<u8>, text: u64) -> Option<GoTable> {
        let format = match u32_at(&data, 0)? {
            GO_1_2 => Format::Go1_2,
            GO_1_16 => Format::Go1_16,
            GO_1_18 => Format::Go1_18,
            GO_1_20 => Format::Go1_20,
            _ => return None,
        };
        if data.get(4..6)? != [0, 0] {
            return None;
        }
        let (quantum, ptr) = (u64::from(*data.get(6)?), usize::from(*data.get(7)?));
        if !(ptr == 4 || ptr == 8) || quantum == 0 {
            return None;
        }
        let header = |i: usize| word(&data, 8 + i * ptr, ptr).and_then(|v| usize::try_from(v).ok());
        let mut table = GoTable {
            data: Vec::new(),
            format,
            text,
            quantum,
            ptr_size: ptr,
            nfunc: header(0)?,
            funcnames: 0,
            cutab: 0,
            filetab: 0,
            pctab: 0,
            functab: 0,
            func_size: 0,
            inline: None,
        };
        match format {
            Format::Go1_2 => {
                // The function table after the count, then its end's pc,
                // then the offset of the file table (a count, then each
                // file's name offset, from file 1).
                table.functab = 8 + ptr;
                let files_at = table.functab.checked_add(table.nfunc.checked_mul(2 * ptr)?.checked_add(ptr)?)?;
                table.filetab = u32_at(&data, files_at)? as usize;
                table.func_size = ptr + 32;
            }
            Format::Go1_16 => {
                (table.funcnames, table.cutab, table.filetab, table.pctab, table.functab) =
                    (header(2)?, header(3)?, header(4)?, header(5)?, header(6)?);
                table.func_size = ptr + 36;
            }
            Format::Go1_18 | Format::Go1_20 => {
                let header_text = header(2)? as u64;
                if header_text != 0 {
                    table.text = header_text;
                }
                (table.funcnames, table.cutab, table.filetab, table.pctab, table.functab) =
                    (header(3)?, header(4)?, header(5)?, header(6)?, header(7)?);
                table.func_size = if format == Format::Go1_20 { 44 } else { 40 };
            }
        }
        let ends = [table.funcnames, table.cutab, table.filetab, table.pctab, table.functab];
        if ends.iter().any(|&o| o >= data.len())
            || table.functab.checked_add(table.nfunc.checked_mul(table.entry_size())?.checked_add(4)?)? > data.len()
        {
            return None;
        }
        Some(GoTable { data, ..table })
    }

    /// The bytes of one entry of the function table: an entry and an
    /// offset of the function's data, each 4 bytes since Go 1.18, else a pointer.
    fn entry_size(&self) -> usize {
        if self.format.offsets() {
            8
        } else {
            2 * self.ptr_size
        }
    }

    /// The entry address of function `i` of the table (`nfunc`: the end of the last).
    fn entry(&self, i: usize) -> Option<u64> {
        let at = self.functab.checked_add(i.checked_mul(self.entry_size())?)?;
        if self.format.offsets() {
            self.text.checked_add(u64::from(u32_at(&self.data, at)?))
        } else {
            word(&self.data, at, self.ptr_size)
        }
    }

    /// Where function `i`'s data is in the table.
    fn func_data(&self, i: usize) -> Option<usize> {
        let at = self.functab.checked_add(i.checked_mul(self.entry_size())?)?;
        match self.format {
            Format::Go1_18 | Format::Go1_20 => self.functab.checked_add(u32_at(&self.data, at + 4)? as usize),
            Format::Go1_16 => self.functab.checked_add(usize::try_from(word(&self.data, at + self.ptr_size, self.ptr_size)?).ok()?),
            Format::Go1_2 => usize::try_from(word(&self.data, at + self.ptr_size, self.ptr_size)?).ok(),
        }
    }

    /// Field `n` (1: the name, 5: the file table, 6: the line table, 7:
    /// how many pc-data tables, 8: the compilation unit) of the function
    /// data at `func`, after its entry (4 bytes since Go 1.18, else a pointer).
    fn field(&self, func: usize, n: usize) -> Option<u32> {
        let entry = if self.format.offsets() { 4 } else { self.ptr_size };
        u32_at(&self.data, func.checked_add(entry + 4 * (n - 1))?)
    }

    /// The address of the inline tree of the function whose data is at
    /// `func`, with `npcdata` pc-data tables, if it has one.
    fn inline_tree(&self, func: usize, npcdata: usize) -> Option<u64> {
        let tree = if self.format == Format::Go1_2 { FUNCDATA_INL_TREE_1_12 } else { FUNCDATA_INL_TREE };
        // The byte before the pc-data offsets says how many funcdata there are.
        let nfuncdata = usize::from(*self.data.get(func + self.func_size - 1)?);
        if nfuncdata <= tree {
            return None;
        }
        let after = func.checked_add(self.func_size + 4 * npcdata)?;
        if self.format.offsets() {
            let off = u32_at(&self.data, after + 4 * tree).filter(|&o| o != u32::MAX)?;
            self.inline.as_ref()?.base.checked_add(u64::from(off))
        } else {
            // Pointers, each aligned to its size.
            let at = after.next_multiple_of(self.ptr_size) + self.ptr_size * tree;
            word(&self.data, at, self.ptr_size).filter(|&a| a != 0)
        }
    }

    /// The name of file number `index` of the function whose data is at `func`.
    fn file(&self, func: usize, index: u32) -> Option<String> {
        let name = match self.format {
            Format::Go1_2 => u32_at(&self.data, self.filetab.checked_add(4 * index as usize)?)?,
            _ => u32_at(&self.data, self.cutab.checked_add(4 * (self.field(func, 8)? as usize + index as usize))?)?,
        };
        let base = if self.format == Format::Go1_2 { 0 } else { self.filetab };
        (name != u32::MAX).then(|| self.string(base, name)).flatten()
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
        if pc < self.entry(0)? || pc >= self.entry(self.nfunc)? {
            return None;
        }
        // The last function whose entry is at or before the pc.
        let (mut lo, mut hi) = (0, self.nfunc);
        while lo + 1 < hi {
            let mid = (lo + hi) / 2;
            if self.entry(mid)? <= pc {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        let func = self.func_data(lo)?;
        let field = |n: usize| self.field(func, n);
        let function = self.string(self.funcnames, field(1)?)?;
        let entry_pc = self.entry(lo)?;
        let npcdata = field(7)? as usize;
        let inline_index = |at: u64| -> Option<i32> {
            if npcdata <= PCDATA_INL_TREE_INDEX {
                return None;
            }
            self.pc_value(u32_at(&self.data, func + self.func_size + 4 * PCDATA_INL_TREE_INDEX)?, entry_pc, at).filter(|&i| i >= 0)
        };
        let file_at = |at: u64| self.file(func, u32::try_from(self.pc_value(field(5)?, entry_pc, at)?).ok()?);
        let line_at = |at: u64| self.pc_value(field(6)?, entry_pc, at).filter(|&l| l > 0).map(|l| l as u32);
        let Some(index) = inline_index(pc) else {
            let file = file_at(pc);
            let line = line_at(pc).filter(|_| file.is_some());
            return Some(vec![GoName { function, file, line, inlined: false }]);
        };
        // The inlined calls at the pc, innermost first, and where the
        // outermost was called from.
        let inlined = || -> Option<(Vec<GoName>, u64)> {
            let (inline, tree) = (self.inline.as_ref()?, self.inline_tree(func, npcdata)?);
            let (mut frames, mut at, mut index) = (Vec::new(), pc, Some(index));
            for _ in 0..MAX_INLINE_DEPTH {
                let Some(i) = index else { return Some((frames, at)) };
                let (name, parent_pc) = inline.call(tree, i, self.format)?;
                let file = file_at(at);
                let line = line_at(at).filter(|_| file.is_some());
                frames.push(GoName { function: self.string(self.funcnames, name)?, file, line, inlined: true });
                at = entry_pc.checked_add(u64::from(parent_pc))?;
                index = inline_index(at);
            }
            None
        };
        Some(match inlined() {
            Some((mut frames, at)) => {
                let file = file_at(at);
                let line = line_at(at).filter(|_| file.is_some());
                frames.push(GoName { function, file, line, inlined: false });
                frames
            }
            // No tree, or none that can be read to its end: the function alone.
            None => vec![GoName { function, file: file_at(entry_pc), line: None, inlined: false }],
        })
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
    /// Entry `index` of the inline tree at address `tree`: the inlined
    /// function's name (an offset into the function names) and where its
    /// call is, in bytes from the entry of the function it is in.
    fn call(&self, tree: u64, index: i32, format: Format) -> Option<(u32, u32)> {
        // Go 1.20's entry: funcID, 3 bytes, nameOff, parentPc, startLine;
        // before: parent, funcID, a byte, file, line, func_, parentPc.
        let (size, name_at, parent_pc_at) = if format == Format::Go1_20 { (16, 4, 8) } else { (20, 12, 16) };
        let at = usize::try_from(tree.checked_sub(self.base)?).ok()?.checked_add(usize::try_from(index).ok()?.checked_mul(size)?)?;
        Some((u32_at(&self.data, at + name_at)?, u32_at(&self.data, at + parent_pc_at)?))
    }
}

/// The little-endian word of `size` bytes (4 or 8) at `at`.
fn word(data: &[u8], at: usize, size: usize) -> Option<u64> {
    Some(data.get(at..at.checked_add(size)?)?.iter().rev().fold(0u64, |v, &x| v << 8 | u64::from(x)))
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
        InlineData { base: 0x50_0000, data }
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
        // A tree whose call points into itself, or one cut short, names the
        // function as without one, and ends.
        let mut looping = inline_data();
        looping.data[0x18..0x1c].copy_from_slice(&0x30u32.to_le_bytes());
        let mut cut = inline_data();
        cut.data.truncate(0x18);
        for broken in [looping, cut] {
            t.inline = Some(broken);
            assert_eq!(t.frames(TEXT + 0x34), vec![named("main.main", None, false)]);
        }
    }

    /// The same two functions in Go 1.2's format (to Go 1.15: addresses in
    /// the function table, names and pc-value tables from the table's
    /// start, a file table of name offsets, funcdata pointers with the
    /// inline tree fifth) or 1.16's (1.16 and 1.17: offsets of each part
    /// in the header, files by compilation unit, the inline tree fourth);
    /// the inline tree at `RODATA` + 0x10, which the InlineData returned
    /// holds from `RODATA`.
    fn old_table(magic: u32) -> (Vec<u8>, InlineData) {
        const RODATA: u64 = 0x60_0000;
        let go_1_2 = magic == GO_1_2;
        let put = |t: &mut Vec<u8>, bytes: &[u8]| -> usize {
            let at = t.len();
            t.extend_from_slice(bytes);
            at
        };
        let words = |t: &mut Vec<u8>, ws: &[u64]| ws.iter().for_each(|w| t.extend_from_slice(&w.to_le_bytes()));
        let mut t = vec![0u8; 8];
        t[0..4].copy_from_slice(&magic.to_le_bytes());
        (t[6], t[7]) = (1, 8);
        // Go 1.2: the count, then the function table; 1.16: seven header words.
        let header = t.len();
        t.resize(header + if go_1_2 { 8 } else { 7 * 8 }, 0);
        let functab = t.len();
        t.resize(functab + 2 * 16 + 8 + if go_1_2 { 4 } else { 0 }, 0);
        let names = put(&mut t, b"main.main\0os.Stat\0");
        let file_name = put(&mut t, b"/src/app/main.go\0");
        let pctab = put(&mut t, &[0]);
        let rel = |at: usize, base: usize| (at - base) as u32;
        // Go 1.2's files count from 1 (entry 0 of its table is the count),
        // each an offset from the table's start; 1.16's from 0, each an
        // offset from the file names (which start with this one).
        let file_table = put(&mut t, &if go_1_2 { [2u32, file_name as u32] } else { [0, 0] }.map(u32::to_le_bytes).concat());
        let cutab = file_table;
        let base = if go_1_2 { 0 } else { pctab };
        let lines = put(&mut t, &[22, 0x20, 4, 0x10, 9, 0x10, 0]);
        let file = put(&mut t, &if go_1_2 { [4, 0x40, 0] } else { [2, 0x40, 0] });
        let inl = put(&mut t, &[0, 0x30, 2, 0x10, 0]);
        let stat_lines = put(&mut t, &[16, 0x40, 0]);
        let never = put(&mut t, &[0, 0x40, 0]);
        let tree_at = if go_1_2 { 4 } else { 3 };
        let mut funcs = Vec::new();
        for (entry, name, lines, inl, tree) in [(TEXT, 0usize, lines, inl, true), (TEXT + 0x40, 10, stat_lines, never, false)] {
            t.resize(t.len().next_multiple_of(8), 0);
            let func = t.len();
            funcs.push(func);
            words(&mut t, &[entry]);
            let nfuncdata = if tree { tree_at as u32 + 1 } else { 0 };
            let mut fields = vec![(names + name - if go_1_2 { 0 } else { names }) as u32, 0, 0, 0, rel(file, base), rel(lines, base), 3];
            if !go_1_2 {
                fields.push(0); // the compilation unit's first entry of cutab
            }
            fields.push(nfuncdata << 24);
            fields.iter().for_each(|f| t.extend_from_slice(&f.to_le_bytes()));
            [0, 0, rel(inl, base)].iter().for_each(|f: &u32| t.extend_from_slice(&f.to_le_bytes()));
            if tree {
                t.resize(t.len().next_multiple_of(8), 0);
                let mut pointers = vec![0u64; tree_at + 1];
                pointers[tree_at] = RODATA + 0x10;
                words(&mut t, &pointers);
            }
        }
        // The function table: entries and where each function's data is.
        let funcs_base = if go_1_2 { 0 } else { functab };
        let mut table = Vec::new();
        for (entry, func) in [(TEXT, funcs[0]), (TEXT + 0x40, funcs[1])] {
            words(&mut table, &[entry, (func - funcs_base) as u64]);
        }
        words(&mut table, &[TEXT + 0x80]);
        if go_1_2 {
            table.extend_from_slice(&(file_table as u32).to_le_bytes());
            t[header..header + 8].copy_from_slice(&2u64.to_le_bytes());
        } else {
            let header_words = [2u64, 1, names as u64, cutab as u64, file_name as u64, pctab as u64, functab as u64];
            for (i, w) in header_words.iter().enumerate() {
                t[header + 8 * i..header + 8 * i + 8].copy_from_slice(&w.to_le_bytes());
            }
        }
        t[functab..functab + table.len()].copy_from_slice(&table);
        // The tree: its one call, os.Stat's name, called at +0x28.
        let mut rodata = vec![0u8; 0x10];
        let name = if go_1_2 { names + 10 } else { 10 };
        [0u32, 0, 0, name as u32, 0x28].iter().for_each(|f| rodata.extend_from_slice(&f.to_le_bytes()));
        (t, InlineData { base: RODATA, data: rodata })
    }

    #[test]
    fn the_tables_of_go_1_2_and_1_16_name_inlined_code_too() {
        for magic in [GO_1_2, GO_1_16] {
            let (table, inline) = old_table(magic);
            let mut t = GoTable::parse(table, TEXT).unwrap_or_else(|| panic!("{magic:#x}"));
            assert_eq!(t.frames(TEXT + 0x10), vec![named("main.main", Some(10), false)], "{magic:#x}");
            assert_eq!(t.frames(TEXT + 0x28), vec![named("main.main", Some(12), false)], "{magic:#x}");
            assert_eq!(t.frames(TEXT + 0x34), vec![named("main.main", None, false)], "{magic:#x}");
            assert_eq!(t.frames(TEXT + 0x44), vec![named("os.Stat", Some(7), false)], "{magic:#x}");
            assert!(t.frames(TEXT + 0x80).is_empty());
            t.inline = Some(inline);
            assert_eq!(t.frames(TEXT + 0x34), vec![named("os.Stat", Some(7), true), named("main.main", Some(12), false)], "{magic:#x}");
        }
    }

    #[test]
    fn a_malformed_table_names_nothing_and_never_panics() {
        assert!(GoTable::parse(b"\xfa\xff\xff\xff\0\0\x01\x08".to_vec(), TEXT).is_none(), "a header alone is no table");
        let mut unknown = table();
        unknown[0] = 0xf9;
        assert!(GoTable::parse(unknown, TEXT).is_none(), "an unknown format is not read");
        let (old, old_inline) = old_table(GO_1_2);
        let (mid, mid_inline) = old_table(GO_1_16);
        for (good, inline) in [(table(), inline_data()), (old, old_inline), (mid, mid_inline)] {
            let inline = || InlineData { base: inline.base, data: inline.data.clone() };
            for cut in 0..good.len() {
                if let Some(mut t) = GoTable::parse(good[..cut].to_vec(), TEXT) {
                    t.inline = Some(inline());
                    for pc in (TEXT..TEXT + 0x90).step_by(4) {
                        let _ = t.frames(pc);
                    }
                }
            }
            let mut wild = good.clone();
            for b in wild.iter_mut().skip(72) {
                *b = 0xff;
            }
            if let Some(mut t) = GoTable::parse(wild, TEXT) {
                t.inline = Some(inline());
                for pc in (TEXT..TEXT + 0x90).step_by(4) {
                    let _ = t.frames(pc);
                }
            }
        }
    }
}
