//! A call's argument key from its registers and the tracee's memory: the
//! same keys the BPF side counts by (src/bpf/syscount.bpf.c's sys_exit).

use super::sys;
use crate::backend::calls::{BrkState, Call, How, MaskState};
use crate::linux::syscalls::{self, ArgKind};
use crate::model::{Argument, Lost, Timeout};

/// PATH_LEN - 1 in src/bpf/syscount.h: the longest path kept whole.
const PATH_MAX_KEPT: usize = 255;
const AT_FDCWD: i64 = -100;

/// A timeout's class, read at entry (select, pselect6 and ppoll write the
/// time left back at exit).
pub fn timeout_at_entry(tid: u32, nr: u32, args: &[u64; 6]) -> Option<Timeout> {
    match syscalls::by_nr(nr)?.arg {
        ArgKind::TimeoutMs(i) => Some(match args[usize::from(i)] as i32 {
            ms if ms < 0 => Timeout::None,
            0 => Timeout::Zero,
            _ => Timeout::Finite,
        }),
        ArgKind::TimeoutPtr(i) => {
            let ptr = args[usize::from(i)];
            if ptr == 0 {
                return Some(Timeout::None);
            }
            // struct timespec and struct timeval: two longs either way.
            let mut t = [0u8; 16];
            Some(match sys::read(tid, ptr, &mut t) {
                16 if t == [0; 16] => Timeout::Zero,
                16 => Timeout::Finite,
                _ => Timeout::Unreadable,
            })
        }
        _ => None,
    }
}

/// The key of a finished call; byte counts go into `call`, what could not
/// be read into `lost`.
#[allow(clippy::too_many_arguments)]
pub fn argument(
    kind: ArgKind,
    tid: u32,
    args: &[u64; 6],
    timeout: Option<Timeout>,
    rval: i64,
    failed: bool,
    mask: &mut MaskState,
    brk: &mut BrkState,
    call: &mut Call,
    lost: &mut Lost,
) -> Option<Argument> {
    let fd = |i: u8| i64::from(args[usize::from(i)] as i32);
    match kind {
        ArgKind::None => None,
        ArgKind::Path(i) => {
            let null = args[usize::from(i)] == 0;
            let read = if null { None } else { sys::read_string(tid, args[usize::from(i)], PATH_MAX_KEPT) };
            let dirfd = if i > 0 { Some(fd(i - 1)).filter(|d| *d != AT_FDCWD) } else { None };
            let (path, cut, raw) = match read {
                None if null => (None, false, None),
                None => {
                    lost.path_unreadable += 1;
                    (None, false, None)
                }
                Some((bytes, cut)) => {
                    lost.path_truncated += u64::from(cut);
                    match String::from_utf8(bytes) {
                        Ok(s) => (Some(s), cut, None),
                        Err(e) => (Some(String::from_utf8_lossy(e.as_bytes()).into_owned()), cut, Some(e.into_bytes())),
                    }
                }
            };
            Some(Argument::Path { path, dirfd, null, cut, raw })
        }
        ArgKind::Fd(i) => Some(Argument::Fd { fd: fd(i) }),
        ArgKind::FdIo { fd: f, size } => {
            call.requested = Some(args[usize::from(size)]);
            call.returned = Some(if failed { 0 } else { rval.max(0) as u64 });
            Some(Argument::Fd { fd: fd(f) })
        }
        ArgKind::Clock(i) => Some(Argument::Clock { clock: fd(i) }),
        ArgKind::TimeoutMs(_) | ArgKind::TimeoutPtr(_) => Some(Argument::Timeout { timeout: timeout.unwrap_or(Timeout::Unreadable) }),
        ArgKind::SigMask => {
            let how = match args[0] as i32 {
                0 => How::Block,
                1 => How::Unblock,
                _ => How::Set,
            };
            let set = (args[1] != 0).then(|| sys::read_u64(tid, args[1])).flatten();
            let old = if failed { None } else { sys::read_u64(tid, args[2]) };
            // A NULL set only queries, even when unreadable memory hides it.
            let change = if args[1] == 0 { mask.classify(how, None, old, failed) } else { mask.classify(how, set.or(Some(0)), old, failed) };
            Some(Argument::SigMask { change })
        }
        ArgKind::Brk => Some(Argument::Brk { change: brk.classify(args[0], rval as u64) }),
    }
}
