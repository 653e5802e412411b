//! The facts of the architecture sysdiet is built for, one file per
//! architecture (as src/bpf/arch/ holds the BPF programs' own): the
//! syscall ABI's name for ptrace, what its compatibility entry is called,
//! and which saved user register is which.

#[cfg(target_arch = "aarch64")]
#[path = "arch/aarch64.rs"]
mod this;
#[cfg(target_arch = "x86_64")]
#[path = "arch/x86_64.rs"]
mod this;

pub use this::*;

/// The registers a user stack is unwound from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UserRegs {
    pub ip: u64,
    pub sp: u64,
    /// The frame pointer (rbp, x29).
    pub fp: u64,
    /// The link register (x30 on arm64; 0 where calls push their return
    /// address).
    pub lr: u64,
}
