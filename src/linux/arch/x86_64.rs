//! x86-64.

use syscalls::Sysno;

use super::UserRegs;
use crate::linux::syscalls::{s, ArgKind, Class::*, SyscallInfo};

/// AUDIT_ARCH_X86_64: a syscall through the native entry, as
/// PTRACE_GET_SYSCALL_INFO reports it (anything else is i386's `int 0x80`).
pub const AUDIT_ARCH: u32 = 0xc000_003e;

/// The lost-counter lines (one, many) for calls through the 32-bit entry,
/// whose numbers are not the native table's, and for numbers beyond it.
pub const COMPAT_NOT_COUNTED: (&str, &str) = ("i386 (int 0x80) call not counted", "i386 (int 0x80) calls not counted");
pub const UNKNOWN_NR_NOT_COUNTED: (&str, &str) = ("call with an unknown number (x32?) not counted", "calls with unknown numbers (x32?) not counted");

/// Where ptrace's user registers keep a stack's registers.
pub fn user_regs(r: &libc::user_regs_struct) -> UserRegs {
    UserRegs { ip: r.rip, sp: r.rsp, fp: r.rbp, lr: 0 }
}

/// A syscall-entry stop read from the registers (kernels before
/// PTRACE_GET_SYSCALL_INFO, 5.3): its number, its arguments, and whether
/// it came through the 32-bit entry (a 32-bit code segment; an `int 0x80`
/// from 64-bit code is not told apart, as strace could not before 5.3).
pub fn syscall_entry(r: &libc::user_regs_struct) -> (u64, [u64; 6], bool) {
    (r.orig_rax, [r.rdi, r.rsi, r.rdx, r.r10, r.r8, r.r9], r.cs == 0x23)
}

/// A syscall-exit stop's return value, read from the registers.
pub fn syscall_return(r: &libc::user_regs_struct) -> i64 {
    r.rax as i64
}

/// The syscalls only x86-64 has (the legacy calls asm-generic left out,
/// and its own), with strace's classes and what sysdiet fingerprints.
pub static SYSCALLS: &[SyscallInfo] = &[
    s(Sysno::open, &[Desc, File], ArgKind::Path(0)),
    s(Sysno::stat, &[File, Stat, StatLike], ArgKind::Path(0)),
    s(Sysno::lstat, &[File, Lstat, StatLike], ArgKind::Path(0)),
    s(Sysno::poll, &[Desc], ArgKind::TimeoutMs(2)),
    s(Sysno::access, &[File], ArgKind::Path(0)),
    s(Sysno::pipe, &[Desc], ArgKind::None),
    s(Sysno::select, &[Desc], ArgKind::TimeoutPtr(4)),
    s(Sysno::dup2, &[Desc], ArgKind::Fd(0)),
    s(Sysno::pause, &[Signal], ArgKind::None),
    s(Sysno::alarm, &[], ArgKind::None),
    s(Sysno::fork, &[Process], ArgKind::None),
    s(Sysno::vfork, &[Process], ArgKind::None),
    s(Sysno::getdents, &[Desc], ArgKind::Fd(0)),
    s(Sysno::rename, &[File], ArgKind::Path(0)),
    s(Sysno::mkdir, &[File], ArgKind::Path(0)),
    s(Sysno::rmdir, &[File], ArgKind::Path(0)),
    s(Sysno::creat, &[Desc, File], ArgKind::Path(0)),
    s(Sysno::link, &[File], ArgKind::Path(0)),
    s(Sysno::unlink, &[File], ArgKind::Path(0)),
    s(Sysno::symlink, &[File], ArgKind::Path(1)),
    s(Sysno::readlink, &[File], ArgKind::Path(0)),
    s(Sysno::chmod, &[File], ArgKind::Path(0)),
    s(Sysno::chown, &[File], ArgKind::Path(0)),
    s(Sysno::lchown, &[File], ArgKind::Path(0)),
    s(Sysno::getpgrp, &[Pure], ArgKind::None),
    s(Sysno::utime, &[File], ArgKind::Path(0)),
    s(Sysno::mknod, &[File], ArgKind::Path(0)),
    s(Sysno::uselib, &[File], ArgKind::None),
    s(Sysno::ustat, &[StatfsLike], ArgKind::None),
    s(Sysno::sysfs, &[], ArgKind::None),
    s(Sysno::modify_ldt, &[], ArgKind::None),
    s(Sysno::_sysctl, &[], ArgKind::None),
    s(Sysno::arch_prctl, &[], ArgKind::None),
    s(Sysno::iopl, &[], ArgKind::None),
    s(Sysno::ioperm, &[], ArgKind::None),
    s(Sysno::create_module, &[], ArgKind::None),
    s(Sysno::get_kernel_syms, &[], ArgKind::None),
    s(Sysno::query_module, &[], ArgKind::None),
    s(Sysno::getpmsg, &[Network], ArgKind::None),
    s(Sysno::putpmsg, &[Network], ArgKind::None),
    s(Sysno::afs_syscall, &[], ArgKind::None),
    s(Sysno::tuxcall, &[], ArgKind::None),
    s(Sysno::security, &[], ArgKind::None),
    s(Sysno::time, &[Clock], ArgKind::None),
    s(Sysno::set_thread_area, &[], ArgKind::None),
    s(Sysno::get_thread_area, &[], ArgKind::None),
    s(Sysno::epoll_create, &[Desc], ArgKind::None),
    s(Sysno::epoll_ctl_old, &[], ArgKind::None),
    s(Sysno::epoll_wait_old, &[], ArgKind::None),
    s(Sysno::epoll_wait, &[Desc], ArgKind::TimeoutMs(3)),
    s(Sysno::utimes, &[File], ArgKind::Path(0)),
    s(Sysno::vserver, &[], ArgKind::None),
    s(Sysno::inotify_init, &[Desc], ArgKind::None),
    s(Sysno::futimesat, &[Desc, File], ArgKind::Path(1)),
    s(Sysno::newfstatat, &[Desc, File, Fstat, StatLike], ArgKind::Path(1)),
    s(Sysno::signalfd, &[Desc, Signal], ArgKind::None),
    s(Sysno::eventfd, &[Desc], ArgKind::None),
    s(Sysno::uretprobe, &[], ArgKind::None),
    s(Sysno::uprobe, &[], ArgKind::None),
];
