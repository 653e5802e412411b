//! The argument key of a call (path, fd, clock, timeout, mask change)
//! from the arguments strace printed: the same keys the BPF side counts by
//! (backend/bpf/readout.rs, src/bpf/arguments.bpf.h).

use super::args;
use super::line::Return;
use super::Task;
use crate::backend::calls::{Call, How};
use crate::linux::syscalls::ArgKind;
use crate::model::{Argument, MaskChange, Timeout};

/// The argument key of a call, from its printed arguments. Mirrors what
/// the BPF side keys by (backend/bpf/readout.rs, src/bpf/arguments.bpf.h).
pub(super) fn argument(kind: ArgKind, args: &[&str], ret: Return, task: &mut Task, call: &mut Call) -> Option<Argument> {
    match kind {
        ArgKind::None => None,
        ArgKind::Path(i) => {
            let i = usize::from(i);
            let (bytes, cut) = args.get(i).and_then(|a| args::string(a)).map_or((None, false), |(b, cut)| (Some(b), cut));
            let dirfd = if i > 0 { args.get(i - 1).and_then(|a| args::fd(a)).filter(|fd| *fd != -100) } else { None };
            let (path, raw) = match bytes {
                Some(b) => match String::from_utf8(b) {
                    Ok(s) => (Some(s), None),
                    Err(e) => (Some(String::from_utf8_lossy(e.as_bytes()).into_owned()), Some(e.into_bytes())),
                },
                None => (None, None),
            };
            let null = args.get(i) == Some(&"NULL");
            Some(Argument::Path { path, dirfd, null, cut, raw })
        }
        ArgKind::Fd(i) => Some(Argument::Fd { fd: args.get(usize::from(i)).and_then(|a| args::fd(a))? }),
        ArgKind::FdIo { fd, size } => {
            call.requested = args.get(usize::from(size)).and_then(|a| args::number(a)).map(|v| v.max(0) as u64);
            call.returned = Some(ret.value.unwrap_or(0).max(0) as u64);
            Some(Argument::Fd { fd: args.get(usize::from(fd)).and_then(|a| args::fd(a))? })
        }
        ArgKind::Clock(i) => Some(Argument::Clock { clock: args.get(usize::from(i)).and_then(|a| args::clock(a))? }),
        ArgKind::TimeoutMs(i) => {
            let ms = args.get(usize::from(i)).and_then(|a| args::number(a))?;
            let timeout = match ms as i32 {
                ms if ms < 0 => Timeout::None,
                0 => Timeout::Zero,
                _ => Timeout::Finite,
            };
            Some(Argument::Timeout { timeout })
        }
        ArgKind::TimeoutPtr(i) => {
            let timeout = match args.get(usize::from(i)).map(|a| args::timespec_is_zero(a)) {
                Some(Some(true)) => Timeout::Zero,
                Some(Some(false)) => Timeout::Finite,
                Some(None) => Timeout::None,
                None => Timeout::Unreadable,
            };
            Some(Argument::Timeout { timeout })
        }
        ArgKind::SigMask => Some(Argument::SigMask { change: mask_change(args, ret, task) }),
        ArgKind::Brk => {
            let asked = args.first().and_then(|a| args::number(a)).unwrap_or(0) as u64;
            Some(Argument::Brk { change: task.brk.classify(asked, ret.value.unwrap_or(0) as u64) })
        }
    }
}

/// What rt_sigprocmask(how, set, oldset) did to the mask.
pub(super) fn mask_change(args: &[&str], ret: Return, task: &mut Task) -> MaskChange {
    let how = match args.first().copied().unwrap_or("") {
        "SIG_BLOCK" => How::Block,
        "SIG_UNBLOCK" => How::Unblock,
        _ => How::Set,
    };
    let set = args.get(1).and_then(|a| args::sigset(a));
    let old = args.get(2).and_then(|a| args::sigset(a));
    task.mask.classify(how, set, old, ret.errno.is_some())
}

/// `["true", "-a"]` (argv, envp) as strings; a string strace cut at `-s`
/// keeps its `...`, and `...` ends a cut list.
pub(super) fn string_array(arg: &str) -> Vec<String> {
    let Some(inner) = arg.strip_prefix('[').and_then(|a| a.strip_suffix(']')) else { return Vec::new() };
    args::split(inner)
        .into_iter()
        .filter_map(args::string)
        .map(|(b, cut)| format!("{}{}", String::from_utf8_lossy(&b), if cut { "..." } else { "" }))
        .collect()
}
