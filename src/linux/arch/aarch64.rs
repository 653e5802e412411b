//! arm64 (AArch64).

use super::UserRegs;
use crate::linux::syscalls::{ArgKind, Class::*, SyscallInfo};

/// AUDIT_ARCH_AARCH64: a syscall of a 64-bit task, as
/// PTRACE_GET_SYSCALL_INFO reports it (anything else is AArch32's).
pub const AUDIT_ARCH: u32 = 0xc000_00b7;

/// The lost-counter lines (one, many) for calls of AArch32 tasks, whose
/// numbers are not the native table's, and for numbers beyond it.
pub const COMPAT_NOT_COUNTED: (&str, &str) = ("AArch32 call not counted", "AArch32 calls not counted");
pub const UNKNOWN_NR_NOT_COUNTED: (&str, &str) = ("call with an unknown number not counted", "calls with unknown numbers not counted");

/// Where ptrace's user registers keep a stack's registers: x29 is the
/// frame pointer, x30 the link register.
pub fn user_regs(r: &libc::user_regs_struct) -> UserRegs {
    UserRegs { ip: r.pc, sp: r.sp, fp: r.regs[29], lr: r.regs[30] }
}

/// A syscall-entry stop read from the registers (kernels before
/// PTRACE_GET_SYSCALL_INFO, 5.3): its number (x8), its arguments (x0-x5),
/// and whether the task is AArch32 (PSTATE's nRW bit).
pub fn syscall_entry(r: &libc::user_regs_struct) -> (u64, [u64; 6], bool) {
    let x = &r.regs;
    (x[8], [x[0], x[1], x[2], x[3], x[4], x[5]], r.pstate & 0x10 != 0)
}

/// A syscall-exit stop's return value (x0), read from the registers.
pub fn syscall_return(r: &libc::user_regs_struct) -> i64 {
    r.regs[0] as i64
}

/// The syscalls only arm64 has, or names differently from the `syscalls`
/// crate: strace and the kernel call 79 newfstatat, as on x86-64.
pub static SYSCALLS: &[SyscallInfo] = &[SyscallInfo { nr: 79, name: "newfstatat", classes: &[Desc, File, Fstat, StatLike], arg: ArgKind::Path(1) }];
