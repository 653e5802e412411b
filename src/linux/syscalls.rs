//! What sysdiet knows about each syscall of the architecture it is built
//! for (x86-64 or arm64): its name, strace's trace
//! classes (for `-e trace=%file` and friends) and which argument identifies a
//! call (a path, an fd, an fd plus a byte count).

use std::sync::LazyLock;

#[path = "syscall_table.rs"]
mod table;

/// Syscall numbers the tracers have room for (MAX_SYSCALLS in the BPF
/// side's syscount.h, checked against its tables when it is built): every
/// number of both architectures is below it.
pub const MAX_SYSCALLS: usize = 512;

/// strace's syscall classes, as in `strace -e trace=%CLASS`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    Desc,
    File,
    Network,
    Process,
    Signal,
    Ipc,
    Memory,
    Stat,
    Lstat,
    Fstat,
    StatLike,
    Statfs,
    Fstatfs,
    StatfsLike,
    Creds,
    Clock,
    Pure,
}

impl Class {
    /// The class named as strace names it, without the leading `%`.
    pub fn from_name(name: &str) -> Option<Class> {
        Some(match name {
            "desc" => Class::Desc,
            "file" => Class::File,
            "network" | "net" => Class::Network,
            "process" => Class::Process,
            "signal" => Class::Signal,
            "ipc" => Class::Ipc,
            "memory" => Class::Memory,
            "stat" => Class::Stat,
            "lstat" => Class::Lstat,
            "fstat" => Class::Fstat,
            "%stat" => Class::StatLike,
            "statfs" => Class::Statfs,
            "fstatfs" => Class::Fstatfs,
            "%statfs" => Class::StatfsLike,
            "creds" => Class::Creds,
            "clock" => Class::Clock,
            "pure" => Class::Pure,
            _ => return None,
        })
    }

    pub const NAMES: &'static str = "%desc %file %network %process %signal %ipc %memory %stat \
                                     %lstat %fstat %%stat %statfs %fstatfs %%statfs %creds %clock %pure";
}

/// Which argument fingerprints a call (argument indices are 0-based).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgKind {
    None,
    /// A path string; for `*at` calls the argument before it is the dirfd.
    Path(u8),
    Fd(u8),
    /// An fd and a requested byte count (read, write, ...).
    FdIo {
        fd: u8,
        size: u8,
    },
    /// A clock id (clock_gettime).
    Clock(u8),
    /// A timeout in milliseconds (poll, epoll_wait): zero, finite or none.
    TimeoutMs(u8),
    /// A pointer to a timespec or timeval (ppoll, select): likewise.
    TimeoutPtr(u8),
    /// rt_sigprocmask: what the call does to the mask it finds.
    SigMask,
    /// brk: which way the heap's end moved.
    Brk,
}

#[derive(Debug, Clone, Copy)]
pub struct SyscallInfo {
    pub nr: u32,
    pub name: &'static str,
    pub classes: &'static [Class],
    pub arg: ArgKind,
}

impl SyscallInfo {
    pub fn in_class(&self, class: Class) -> bool {
        self.classes.contains(&class)
    }
}

/// A row of the tables: the syscall as the `syscalls` crate knows it.
pub(crate) const fn s(sysno: syscalls::Sysno, classes: &'static [Class], arg: ArgKind) -> SyscallInfo {
    SyscallInfo { nr: sysno.id() as u32, name: sysno.name(), classes, arg }
}

/// Both architectures' syscalls and this one's own, ordered by number.
static TABLE: LazyLock<Vec<SyscallInfo>> = LazyLock::new(|| {
    let mut t: Vec<SyscallInfo> = table::COMMON.iter().chain(crate::linux::arch::SYSCALLS).copied().collect();
    t.sort_by_key(|s| s.nr);
    t
});

/// Every syscall sysdiet knows, ordered by number.
pub fn all() -> &'static [SyscallInfo] {
    &TABLE
}

pub fn by_nr(nr: u32) -> Option<&'static SyscallInfo> {
    TABLE.binary_search_by_key(&nr, |s| s.nr).ok().map(|i| &TABLE[i])
}

pub fn by_name(name: &str) -> Option<&'static SyscallInfo> {
    TABLE.iter().find(|s| s.name == name)
}

/// The name of syscall `nr`, or `syscall_NNN` for one without a name (a
/// newer kernel), as strace prints it.
pub fn name(nr: u32) -> String {
    if let Some(s) = by_nr(nr) {
        return s.name.to_string();
    }
    match syscalls::Sysno::new(nr as usize) {
        Some(s) => s.name().to_string(),
        None => format!("syscall_{nr}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_sorted_and_unique() {
        assert!(all().windows(2).all(|w| w[0].nr < w[1].nr));
    }

    #[test]
    fn lookups_agree() {
        let nr = if cfg!(target_arch = "x86_64") { 262 } else { 79 };
        assert_eq!(by_name("newfstatat").unwrap().nr, nr);
        assert_eq!(by_nr(nr).unwrap().name, "newfstatat");
        assert_eq!(name(nr), "newfstatat");
        assert_eq!(name(1000), "syscall_1000");
        assert_eq!(by_nr(nr).unwrap().arg, ArgKind::Path(1));
        assert!(by_nr(nr).unwrap().in_class(Class::Fstat));
        assert!(!by_nr(nr).unwrap().in_class(Class::Stat));
    }
}
