//! The few raw calls the ptrace tracer makes that nix does not wrap:
//! PTRACE_GET_SYSCALL_INFO (one call for a stop's syscall, its arguments
//! or its result; the registers before Linux 5.3), the user registers,
//! and reads of the tracee's memory with process_vm_readv (no stop
//! needed, a page at a time).

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::linux::arch;
pub use crate::linux::arch::UserRegs;

const PTRACE_GET_SYSCALL_INFO: libc::c_uint = 0x420e;
const OP_ENTRY: u8 = 1;
const OP_EXIT: u8 = 2;

/// struct ptrace_syscall_info (linux/ptrace.h), entry and exit halves.
#[repr(C)]
#[derive(Default)]
struct RawInfo {
    op: u8,
    pad: [u8; 3],
    arch: u32,
    instruction_pointer: u64,
    stack_pointer: u64,
    data: [u64; 8],
}

/// What a syscall stop is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyscallStop {
    Entry { nr: u64, args: [u64; 6], compat: bool },
    Exit { rval: i64, is_error: bool },
    Unknown,
}

/// Whether syscall stops are read with PTRACE_GET_SYSCALL_INFO: until a
/// kernel before 5.3 refuses it (EIO).
static SYSCALL_INFO: AtomicBool = AtomicBool::new(true);

/// What stop `tid` is at. `in_syscall`: whether its last syscall stop was
/// an entry, which tells an exit from an entry where the kernel cannot.
pub fn syscall_stop(tid: u32, in_syscall: bool) -> io::Result<SyscallStop> {
    if SYSCALL_INFO.load(Ordering::Relaxed) {
        match syscall_info(tid) {
            Err(e) if e.raw_os_error() == Some(libc::EIO) => SYSCALL_INFO.store(false, Ordering::Relaxed),
            said => return said,
        }
    }
    let regs = nix::sys::ptrace::getregs(nix::unistd::Pid::from_raw(tid as i32)).map_err(io::Error::from)?;
    Ok(if in_syscall {
        let rval = arch::syscall_return(&regs);
        SyscallStop::Exit { rval, is_error: (-4095..0).contains(&rval) }
    } else {
        let (nr, args, compat) = arch::syscall_entry(&regs);
        SyscallStop::Entry { nr, args, compat }
    })
}

fn syscall_info(tid: u32) -> io::Result<SyscallStop> {
    let mut info = RawInfo::default();
    // SAFETY: the kernel writes at most `size` bytes into `info`.
    let n = unsafe { libc::ptrace(PTRACE_GET_SYSCALL_INFO, tid as libc::pid_t, std::mem::size_of::<RawInfo>(), &mut info as *mut RawInfo) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let d = info.data;
    Ok(match info.op {
        OP_ENTRY => SyscallStop::Entry { nr: d[0], args: [d[1], d[2], d[3], d[4], d[5], d[6]], compat: info.arch != arch::AUDIT_ARCH },
        OP_EXIT => SyscallStop::Exit { rval: d[0] as i64, is_error: d[1] & 0xff != 0 },
        _ => SyscallStop::Unknown,
    })
}

/// The user registers a stack is unwound from.
pub fn user_regs(tid: u32) -> io::Result<UserRegs> {
    let regs = nix::sys::ptrace::getregs(nix::unistd::Pid::from_raw(tid as i32)).map_err(io::Error::from)?;
    Ok(arch::user_regs(&regs))
}

/// Copies up to `buf.len()` bytes from `addr` in `pid`; how many it could
/// (a read stops at the first unmapped page).
pub fn read(pid: u32, addr: u64, buf: &mut [u8]) -> usize {
    let mut done = 0;
    while done < buf.len() {
        let at = addr.wrapping_add(done as u64);
        // A page at a time: process_vm_readv fails as a whole when its
        // range crosses into an unmapped page.
        let to_page_end = (4096 - (at % 4096)) as usize;
        let len = to_page_end.min(buf.len() - done);
        let local = libc::iovec { iov_base: buf[done..].as_mut_ptr().cast(), iov_len: len };
        let remote = libc::iovec { iov_base: at as *mut libc::c_void, iov_len: len };
        // SAFETY: `local` covers `len` bytes of `buf`.
        let n = unsafe { libc::process_vm_readv(pid as libc::pid_t, &local, 1, &remote, 1, 0) };
        if n <= 0 {
            break;
        }
        done += n as usize;
    }
    done
}

/// A NUL-terminated string at `addr`, at most `max` bytes: its bytes and
/// whether it went on past `max`. None when unreadable.
pub fn read_string(pid: u32, addr: u64, max: usize) -> Option<(Vec<u8>, bool)> {
    if addr == 0 {
        return None;
    }
    let mut out = Vec::new();
    let mut page = [0u8; 256];
    while out.len() <= max {
        let at = addr + out.len() as u64;
        let want = ((4096 - (at % 4096)) as usize).min(page.len());
        let n = read(pid, at, &mut page[..want]);
        if n == 0 {
            return (!out.is_empty()).then_some((out, false));
        }
        if let Some(end) = page[..n].iter().position(|&b| b == 0) {
            out.extend_from_slice(&page[..end]);
            let cut = out.len() > max;
            out.truncate(max);
            return Some((out, cut));
        }
        out.extend_from_slice(&page[..n]);
    }
    out.truncate(max);
    Some((out, true))
}

/// A little-endian u64 at `addr`.
pub fn read_u64(pid: u32, addr: u64) -> Option<u64> {
    let mut b = [0u8; 8];
    (addr != 0 && read(pid, addr, &mut b) == 8).then(|| u64::from_ne_bytes(b))
}
