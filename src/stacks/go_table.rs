//! Names for a Go program's code from its own line table, `.gopclntab`,
//! which Go's runtime needs for its tracebacks and so keeps in a binary
//! built with `-ldflags=-s -w` (no symbols, no DWARF: how Go programs are
//! usually shipped). The format of Go 1.18 and later (magic 0xfffffff0;
//! 0xfffffff1 since 1.20): a header of offsets, a table of each function's
//! entry (an offset from the start of `.text`) and data, and per function
//! its name and the pc-value tables of its file and line
//! (src/runtime/symtab.go, src/debug/gosym/pclntab.go). The table is the
//! traced program's: every read is bounds-checked, and a malformed one
//! names nothing.

use std::path::Path;

use object::{Object, ObjectSection};

const GO_1_18: u32 = 0xffff_fff0;
const GO_1_20: u32 = 0xffff_fff1;
/// The pc-data table that says whether a pc is in inlined code.
const PCDATA_INL_TREE_INDEX: usize = 2;
/// Steps of a pc-value table walked at most: a function of 1 MiB.
const MAX_STEPS: usize = 1 << 20;

/// A function's name and, where the table says, its source line.
#[derive(Debug, PartialEq, Eq)]
pub struct GoName {
    pub function: String,
    pub file: Option<String>,
    pub line: Option<u32>,
}

/// A Go binary's line table, read whole.
pub struct GoTable {
    data: Vec<u8>,
    /// The address function entries are offsets from (`.text`'s).
    text: u64,
    /// The instruction size unit of pc deltas (1 on x86-64, 4 on arm64).
    quantum: u64,
    nfunc: usize,
    funcnames: usize,
    cutab: usize,
    filetab: usize,
    pctab: usize,
    functab: usize,
    /// The size of a function's fixed fields, before its pc-data offsets.
    func_size: usize,
}

impl GoTable {
    /// The table of ELF file `path`, if it is a Go binary of 1.18 or later.
    pub fn of(path: &Path) -> Option<GoTable> {
        super::debug_cache::elf(path, |elf| {
            let table = elf.section_by_name(".gopclntab")?.data().ok()?.to_vec();
            let text = elf.section_by_name(".text")?.address();
            GoTable::parse(table, text)
        })
        .flatten()
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
            data: Vec::new(),
        };
        let ends = [table.funcnames, table.cutab, table.filetab, table.pctab, table.functab];
        if ends.iter().any(|&o| o >= data.len()) || table.functab.checked_add(table.nfunc.checked_mul(8)?.checked_add(4)?)? > data.len() {
            return None;
        }
        Some(GoTable { data, ..table })
    }

    /// The function at `pc` (an address in the file), its file and line;
    /// for a pc in code inlined into it, its own file (where its entry is)
    /// and no line: the table gives the inlined function's there.
    pub fn name(&self, pc: u64) -> Option<GoName> {
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
        let inlined = npcdata > PCDATA_INL_TREE_INDEX
            && self.pc_value(u32_at(&self.data, func + self.func_size + 4 * PCDATA_INL_TREE_INDEX)?, entry_pc, pc).is_some_and(|i| i >= 0);
        let file = (|| {
            let index = u32::try_from(self.pc_value(field(5)?, entry_pc, if inlined { entry_pc } else { pc })?).ok()?;
            let name = u32_at(&self.data, self.cutab + 4 * (field(8)? as usize + index as usize))?;
            (name != u32::MAX).then(|| self.string(self.filetab, name)).flatten()
        })();
        let line = self.pc_value(field(6)?, entry_pc, pc).filter(|&l| l > 0 && !inlined && file.is_some());
        Some(GoName { function, file, line: line.map(|l| l as u32) })
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
    /// bytes (line 10, then 12 from +0x20, a call inlined at +0x30), and
    /// os.Stat after it, 0x40 bytes (line 7), both in file 0.
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
        // Lines: -1 +11 = 10 up to +0x20, +2 = 12 up to +0x40.
        let main_lines = put(&mut t, &[22, 0x20, 4, 0x20, 0]) - pctab;
        let file0 = put(&mut t, &[2, 0x40, 0]) - pctab;
        // Not inlined (-1) up to +0x30, inlined call 0 from there.
        let main_inl = put(&mut t, &[0, 0x30, 2, 0x10, 0]) - pctab;
        let stat_lines = put(&mut t, &[16, 0x40, 0]) - pctab;
        let never_inl = put(&mut t, &[0, 0x40, 0]) - pctab;
        let functab = t.len() as u64;
        let func_at = |i: u64| 2 * 8 + 4 + i * (44 + 12);
        for (i, entry) in [0u32, 0x40].iter().enumerate() {
            t.extend_from_slice(&entry.to_le_bytes());
            t.extend_from_slice(&(func_at(i as u64) as u32).to_le_bytes());
        }
        t.extend_from_slice(&0x80u32.to_le_bytes());
        for (entry, name, lines, inl) in [(0u32, 0u32, main_lines, main_inl), (0x40, 10, stat_lines, never_inl)] {
            let fields = [entry, name, 0, 0, 0, file0 as u32, lines as u32, 3, 0, 0, 0];
            fields.iter().for_each(|f| t.extend_from_slice(&f.to_le_bytes()));
            [0u32, 0, inl as u32].iter().for_each(|f| t.extend_from_slice(&f.to_le_bytes()));
        }
        for (i, v) in [2, 1, 0, names, cutab, filetab, pctab, functab].into_iter().enumerate() {
            t[8 + 8 * i..16 + 8 * i].copy_from_slice(&v.to_le_bytes());
        }
        t
    }

    fn named(function: &str, line: Option<u32>) -> Option<GoName> {
        Some(GoName { function: function.into(), file: Some("/src/app/main.go".into()), line })
    }

    #[test]
    fn a_pc_is_named_by_its_function_file_and_line() {
        let t = GoTable::parse(table(), TEXT).expect("a Go 1.20 table");
        assert_eq!(t.name(TEXT + 0x10), named("main.main", Some(10)));
        assert_eq!(t.name(TEXT + 0x28), named("main.main", Some(12)));
        // Inlined code: the outer function and its file, no line of another's.
        assert_eq!(t.name(TEXT + 0x34), named("main.main", None));
        assert_eq!(t.name(TEXT + 0x40), named("os.Stat", Some(7)));
        assert_eq!(t.name(TEXT + 0x7f), named("os.Stat", Some(7)));
        // Outside the table's functions.
        assert_eq!(t.name(TEXT + 0x80), None);
        assert_eq!(t.name(TEXT - 1), None);
    }

    #[test]
    fn a_malformed_table_names_nothing_and_never_panics() {
        let good = table();
        assert!(GoTable::parse(b"\xfa\xff\xff\xff\0\0\x01\x08".to_vec(), TEXT).is_none(), "Go 1.16's format is not read");
        for cut in 0..good.len() {
            if let Some(t) = GoTable::parse(good[..cut].to_vec(), TEXT) {
                for pc in (TEXT..TEXT + 0x90).step_by(4) {
                    let _ = t.name(pc);
                }
            }
        }
        let mut wild = good.clone();
        for b in wild.iter_mut().skip(72) {
            *b = 0xff;
        }
        let t = GoTable::parse(wild, TEXT).unwrap();
        for pc in (TEXT..TEXT + 0x90).step_by(4) {
            let _ = t.name(pc);
        }
    }
}
