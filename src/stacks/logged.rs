//! Call sites from the stacks a strace log holds (`-k`). strace names
//! frames from `.dynsym` alone, so a frame inside libc often reads as the
//! nearest exported function (`adjtime+0xe54`). Where the file is on this
//! host and is the one the log saw (a symbol strace named sits where strace
//! saw it), the frames are named again from it, debug info included:
//! inlined functions, file:line.

use std::collections::HashMap;
use std::path::Path;

use blazesym::inspect::source::{Elf as InspectElf, Source as InspectSource};
use blazesym::inspect::Inspector;
use blazesym::symbolize::source::{Elf, Source};
use blazesym::symbolize::{Input, Symbolized, Symbolizer};

use super::responsible::responsible;
use crate::backend::strace_log::LogFrame;
use crate::model::{CallSite, Frame};

/// One call site per logged stack, in the same order.
pub fn call_sites(stacks: &[Vec<LogFrame>]) -> Vec<CallSite> {
    let named = rename(stacks);
    stacks
        .iter()
        .map(|stack| {
            let frames: Vec<Frame> = stack.iter().flat_map(|f| named.get(f).cloned().unwrap_or_else(|| vec![as_logged(f)])).collect();
            let complete = frames.last().is_some_and(super::symbolize::is_root);
            let (responsible, own_frames) = responsible(&frames).map_or((None, 0), |(i, n)| (Some(i), n));
            CallSite { frames, responsible, own_frames, complete }
        })
        .collect()
}

fn as_logged(f: &LogFrame) -> Frame {
    // strace's error lines (`backtracing_error`) are no file.
    let module = if f.module.starts_with('/') || f.module.starts_with('.') { f.module.clone() } else { "?".into() };
    let (file, line) = f.source.clone().map_or((None, None), |(file, line)| (Some(file), Some(line)));
    Frame { function: f.symbol.clone(), file, line, module, address: f.offset, inlined: false, public: None }
}

/// The frames that this host's files name better, by frame.
fn rename(stacks: &[Vec<LogFrame>]) -> HashMap<LogFrame, Vec<Frame>> {
    let mut by_module: HashMap<&str, Vec<&LogFrame>> = HashMap::new();
    for f in stacks.iter().flatten() {
        by_module.entry(f.module.as_str()).or_default().push(f);
    }
    let symbolizer = Symbolizer::builder().enable_inlined_fns(true).enable_code_info(true).build();
    let inspector = Inspector::new();
    let mut out = HashMap::new();
    for (module, mut frames) in by_module {
        if !Path::new(module).is_file() || !same_file(&inspector, module, &frames) {
            continue;
        }
        frames.sort_by_key(|f| f.offset);
        frames.dedup();
        let offsets: Vec<u64> = frames.iter().map(|f| f.offset).collect();
        let src = Source::Elf(Elf::new(module));
        let Ok(results) = symbolizer.symbolize(&src, Input::FileOffset(&offsets)) else { continue };
        for (f, r) in frames.iter().zip(&results) {
            let Symbolized::Sym(sym) = r else { continue };
            let info = |c: Option<&blazesym::symbolize::CodeInfo>, name: &str, inlined: bool| Frame {
                function: Some(name.to_string()),
                file: c.map(|c| c.to_path().to_string_lossy().into_owned()),
                line: c.and_then(|c| c.line),
                module: module.to_string(),
                address: f.offset,
                inlined,
                public: None,
            };
            let mut named: Vec<Frame> = sym.inlined.iter().rev().map(|i| info(i.code_info.as_ref(), &i.name, true)).collect();
            // strace named the function from .dynsym: its exported name.
            let public = f.symbol.clone().filter(|s| *s != *sym.name && f.symbol_offset == sym.offset as u64);
            named.push(Frame { public, ..info(sym.code_info.as_deref(), &sym.name, false) });
            out.insert((*f).clone(), named);
        }
    }
    out
}

/// Whether the file at `module` is the one the log saw: a symbol strace
/// named (`sym+0xOFF`) sits, in this file, exactly OFF bytes before the
/// frame's offset. Without a named frame to check, it is not trusted.
fn same_file(inspector: &Inspector, module: &str, frames: &[&LogFrame]) -> bool {
    let named: Vec<&LogFrame> = frames.iter().copied().filter(|f| f.symbol.is_some()).take(4).collect();
    let names: Vec<&str> = named.iter().filter_map(|f| f.symbol.as_deref()).collect();
    if names.is_empty() {
        return false;
    }
    let mut src = InspectElf::new(module);
    src.debug_syms = false;
    let Ok(found) = inspector.lookup(&InspectSource::Elf(src), &names) else { return false };
    named.iter().zip(&found).any(|(f, syms)| syms.iter().any(|s| s.file_offset.is_some_and(|o| o + f.symbol_offset == f.offset)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ops::Not;

    #[test]
    fn logged_names_stay_when_the_file_is_not_here() {
        let stack = vec![
            LogFrame {
                module: "/nonexistent/lib/x86_64-linux-gnu/libc.so.6".into(),
                symbol: Some("fstatat".into()),
                symbol_offset: 0xa,
                offset: 0xf786a,
                source: None,
            },
            LogFrame {
                module: "/nonexistent/app".into(),
                symbol: Some("use_localtime".into()),
                symbol_offset: 0,
                offset: 0x1204,
                source: Some(("app.c".into(), 9)),
            },
            LogFrame { module: "/nonexistent/app".into(), symbol: Some("main".into()), symbol_offset: 0, offset: 0x1300, source: None },
        ];
        let sites = call_sites(&[stack]);
        assert_eq!(sites[0].frames[1].label(), "use_localtime (app.c:9)", "-kk's source line is kept");
        assert_eq!((sites[0].responsible, sites[0].own_frames), (Some(1), 2));
        assert!(sites[0].complete.not());
    }
}
