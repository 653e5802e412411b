//! The kernel side's records and task storage (syscount.h's structs, as
//! the skeleton types them) turned into sysdiet's own types, once, here:
//! what the readers above handle is plain Rust.

use std::collections::HashMap;
use std::mem::offset_of;

use super::maps::{c_string, from_bytes, percpu_stride, MapEntries};
use super::skel::array_len;
use super::skel::types::{
    arg_slot, errno_slot, exec_record, exit_entry, exit_record, failure_record, path_record, record_kind, slot_record, stack_sample, sys_val,
    task_state,
};
use super::skel::types::{brk_change, env_sent, mask_change, path_mark, timeout_class};
use crate::backend::samples::{field, StackSample};
use crate::model::{BrkChange, Environment, Exit, MaskChange, SyscallStats, Timeout};

const RECORD_SLOT: u32 = record_kind::RECORD_SLOT.0;
const RECORD_EXIT: u32 = record_kind::RECORD_EXIT.0;
const RECORD_PATH: u32 = record_kind::RECORD_PATH.0;
const RECORD_EXEC: u32 = record_kind::RECORD_EXEC.0;
const RECORD_FAILURE: u32 = record_kind::RECORD_FAILURE.0;
const ENV_UNREAD: u32 = env_sent::ENV_UNREAD.0;
/// The path hash of a path the kernel side could not read.
pub const UNREADABLE_PATH: u64 = path_mark::PATH_HASH_UNREADABLE.0 as u64;
/// The path hash of a NULL path argument.
pub const NULL_PATH: u64 = path_mark::PATH_HASH_NULL.0 as u64;
/// One thread's counts: from its exit record, or read from its task
/// storage while it still runs.
#[derive(Debug, Clone)]
pub struct ThreadCounts {
    pub tgid: u32,
    pub tid: u32,
    pub ppid: u32,
    pub comm: String,
    /// Its cgroup v2 id, as the kernel side saw it at fork or exec.
    pub cgroup: u64,
    /// The file it runs, at fork or exec.
    pub exe: ExeId,
    /// How it ended (wait status), for exited threads.
    pub exit: Option<Exit>,
    /// Every syscall it made.
    pub stats: Vec<SyscallStats>,
    pub mask_calls: [u64; 6],
    /// (syscall, errno, count)
    pub errnos: Vec<(u32, u32, u64)>,
    pub errnos_lost: u64,
    pub user_ticks: u64,
}

impl ThreadCounts {
    pub fn calls(&self) -> u64 {
        self.stats.iter().map(|s| s.calls).sum()
    }
}

pub fn errnos_of(slots: &[errno_slot]) -> Vec<(u32, u32, u64)> {
    slots.iter().filter(|s| s.count > 0).map(|s| (s.nr as u32, s.err as u32, s.count)).collect()
}

/// Which file a process runs: (inode, device); (0, 0) for a kernel thread.
pub type ExeId = (u64, u32);

/// The kernel side's (inode, device) of a file, as user space keys it.
pub fn exe_id_of(e: &super::skel::types::exe_id) -> ExeId {
    (e.ino, e.dev)
}

/// Executables' paths by their identity.
pub type ExeNames = HashMap<ExeId, String>;

/// A repeated path's text, as the kernel side read it.
#[derive(Debug, Clone)]
pub struct PathText {
    pub text: String,
    /// Longer than the kernel side reads: `text` is its beginning.
    pub cut: bool,
    /// The exact bytes, when they are not UTF-8.
    pub raw: Option<Vec<u8>>,
}

impl PathText {
    /// The text of `bytes` up to their first NUL; `cut`: the path was longer.
    pub fn of(bytes: &[u8], cut: bool) -> PathText {
        let bytes = &bytes[..bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len())];
        match std::str::from_utf8(bytes) {
            Ok(text) => PathText { text: text.to_string(), cut, raw: None },
            Err(_) => PathText { text: String::from_utf8_lossy(bytes).into_owned(), cut, raw: Some(bytes.to_vec()) },
        }
    }
}

/// Repeated paths by the hash of what was read of them.
pub type PathOf = HashMap<u64, PathText>;

/// Bytes of a path the kernel side reads, its NUL included.
// SAFETY: a path record is plain integers and bytes; zero is valid.
const PATH_BYTES: usize = array_len(&unsafe { std::mem::zeroed::<path_record>() }.path);

/// A failed path call whose key was new in its process: summarised as
/// one-shot, and sent by name as well (its path in the next record).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Failure {
    pub tgid: u32,
    pub nr: u32,
    /// The dirfd, as an argument key's.
    pub fd: i64,
    pub path_hash: u64,
    pub ns: u64,
}

/// A record off the ring.
#[derive(Debug, Clone)]
pub enum Record {
    Thread(ThreadCounts),
    /// A cached argument key's calls not yet in arg_stats: (tgid, tid, slot).
    Slot(u32, u32, Box<arg_slot>),
    /// The string of a path key: (path hash, path).
    Path(u64, PathText),
    /// A process's exec: the file it runs, as exec named it, and what
    /// rules read of its environment (None: it could not be read).
    Exec {
        tgid: u32,
        exe: ExeId,
        name: String,
        env: Option<Environment>,
    },
    Failure(Failure),
}

impl Record {
    pub fn tid(&self) -> u32 {
        match self {
            Record::Thread(t) => t.tid,
            Record::Slot(_, tid, _) => *tid,
            Record::Path(..) | Record::Exec { .. } | Record::Failure(_) => 0,
        }
    }

    /// Parses one record; None for one shorter than its header says.
    pub fn parse(data: &[u8]) -> Option<Record> {
        let kind = u32::from_ne_bytes(data.get(..4)?.try_into().ok()?);
        match kind {
            RECORD_SLOT if data.len() >= std::mem::size_of::<slot_record>() => {
                let r: slot_record = from_bytes(data);
                Some(Record::Slot(r.tgid, r.tid, Box::new(r.slot)))
            }
            RECORD_FAILURE if data.len() >= std::mem::size_of::<failure_record>() => {
                let r: failure_record = from_bytes(data);
                Some(Record::Failure(Failure { tgid: r.tgid, nr: r.nr, fd: r.fd, path_hash: r.path_hash, ns: r.ns }))
            }
            RECORD_PATH => {
                // Cut after the path's NUL: read the header, then the bytes sent.
                let at = std::mem::offset_of!(path_record, path);
                let h = std::mem::offset_of!(path_record, path_hash);
                let hash = u64::from_ne_bytes(data.get(h..h + 8)?.try_into().ok()?);
                // A len past the buffer is the kernel side's mark of a cut path.
                let l = std::mem::offset_of!(path_record, len);
                let len = u32::from_ne_bytes(data.get(l..l + 4)?.try_into().ok()?) as usize;
                Some(Record::Path(hash, PathText::of(data.get(at..)?, len > PATH_BYTES)))
            }
            RECORD_EXEC => {
                // Cut after the environment sent: the header is whole.
                let at = std::mem::offset_of!(exec_record, env);
                let r: exec_record = from_bytes(&[data.get(..at)?, &vec![0u8; std::mem::size_of::<exec_record>() - at]].concat());
                Some(Record::Exec {
                    tgid: r.tgid,
                    exe: exe_id_of(&r.exe),
                    name: c_string(&r.exe_name.map(|c| c as u8)),
                    env: (r.cut != ENV_UNREAD).then(|| crate::target::environment_of_block(data.get(at..).unwrap_or_default())),
                })
            }
            RECORD_EXIT => {
                let head = std::mem::offset_of!(exit_record, e);
                // The record is cut after its last entry: read the header
                // whole, then the entries it says it has.
                let mut full = vec![0u8; std::mem::size_of::<exit_record>()];
                let n = data.len().min(full.len());
                full[..n].copy_from_slice(&data[..n]);
                let r: &exit_record = &from_bytes(&full);
                let entries = r.entries as usize;
                if entries > r.e.len() || data.len() < head + entries * std::mem::size_of::<exit_entry>() {
                    return None;
                }
                Some(Record::Thread(ThreadCounts {
                    tgid: r.tgid,
                    tid: r.tid,
                    ppid: r.ppid,
                    comm: c_string(&r.comm.map(|c| c as u8)),
                    cgroup: r.cgroup,
                    exe: exe_id_of(&r.exe),
                    exit: Some(Exit::from_wait_status(r.exit_code)),
                    stats: r.e[..entries].iter().map(|e| syscall_stats(e.nr, &e.v)).collect(),
                    mask_calls: r.mask_calls,
                    errnos: errnos_of(&r.errnos),
                    errnos_lost: r.errnos_lost,
                    user_ticks: r.user_ticks,
                }))
            }
            _ => None,
        }
    }
}

/// The syscalls a thread's storage counts, in the order it first made them.
pub fn used(ts: &task_state) -> Vec<SyscallStats> {
    let n = (ts.syscalls_used as usize).min(ts.stats.len());
    ts.stat_nr[..n].iter().zip(&ts.stats[..n]).filter(|(_, s)| s.calls > 0).map(|(&nr, s)| syscall_stats(u32::from(nr), s)).collect()
}

/// errno_stats' entries (per-CPU): each key's bytes, and its (tgid,
/// syscall, errno, calls), every CPU's part summed.
pub fn errno_entries(map: &MapEntries) -> impl Iterator<Item = (&[u8], (u32, u32, u32, u64))> {
    map.iter().map(|(k, per_cpu)| {
        let [tgid, nr, err, _]: [u32; 4] = from_bytes(k);
        (k, (tgid, nr, err, per_cpu.chunks_exact(percpu_stride(8)).map(from_bytes::<u64>).sum()))
    })
}

/// syscall_spill's entries (per-CPU): each key's bytes, its process, and
/// its syscall's counts, every CPU's part merged.
pub fn spill_entries(map: &MapEntries) -> impl Iterator<Item = (&[u8], u32, SyscallStats)> {
    map.iter().map(|(k, per_cpu)| {
        let [tgid, nr]: [u32; 2] = from_bytes(k);
        let mut stats = SyscallStats::new(nr);
        for v in per_cpu.chunks_exact(percpu_stride(std::mem::size_of::<sys_val>())).map(from_bytes::<sys_val>) {
            stats.merge(&syscall_stats(nr, &v));
        }
        (k, tgid, stats)
    })
}

/// One syscall's counts, as the kernel side keeps them, in the model's terms.
pub fn syscall_stats(nr: u32, v: &sys_val) -> SyscallStats {
    SyscallStats { calls: v.calls, errors: v.errors, total_ns: v.ns, min_ns: v.min_ns, max_ns: v.max_ns, ..SyscallStats::new(nr) }
}

/// A timeout's class, as the kernel side keys it (in the key's fd).
pub fn timeout_of(class: i64) -> Timeout {
    match u32::try_from(class).map(timeout_class) {
        Ok(timeout_class::TIMEOUT_ZERO) => Timeout::Zero,
        Ok(timeout_class::TIMEOUT_FINITE) => Timeout::Finite,
        Ok(timeout_class::TIMEOUT_NONE) => Timeout::None,
        Ok(timeout_class::TIMEOUT_RAN_OUT) => Timeout::RanOut,
        _ => Timeout::Unreadable,
    }
}

/// What an rt_sigprocmask did to the mask, as the kernel side keys it.
pub fn mask_change_of(class: i64) -> MaskChange {
    match u32::try_from(class).map(mask_change) {
        Ok(mask_change::MASK_QUERY) => MaskChange::Query,
        Ok(mask_change::MASK_SAME) => MaskChange::Same,
        Ok(mask_change::MASK_BLOCK) => MaskChange::Block,
        Ok(mask_change::MASK_UNBLOCK) => MaskChange::Unblock,
        Ok(mask_change::MASK_SET) => MaskChange::Set,
        _ => MaskChange::Undo,
    }
}

/// Which way a brk moved the heap's end, as the kernel side keys it.
pub fn brk_change_of(class: i64) -> BrkChange {
    match u32::try_from(class).map(brk_change) {
        Ok(brk_change::BRK_QUERY) => BrkChange::Query,
        Ok(brk_change::BRK_GROW) => BrkChange::Grow,
        Ok(brk_change::BRK_SHRINK) => BrkChange::Shrink,
        _ => BrkChange::Same,
    }
}

/// A stack sample off the `samples` ring (struct stack_sample in
/// syscount.h); None if it is shorter than its header says (which the
/// kernel never writes).
pub fn stack_sample(b: &[u8]) -> Option<StackSample> {
    let u32_at = |at| field::<4>(b, at).map(u32::from_ne_bytes);
    let u64_at = |at| field::<8>(b, at).map(u64::from_ne_bytes);
    let len = u32_at(offset_of!(stack_sample, stack_len))? as usize;
    let stack_at = offset_of!(stack_sample, stack);
    Some(StackSample {
        tgid: u32_at(offset_of!(stack_sample, tgid))?,
        tid: u32_at(offset_of!(stack_sample, tid))?,
        nr: u32_at(offset_of!(stack_sample, nr))?,
        period: u64_at(offset_of!(stack_sample, period))?,
        ns: u64_at(offset_of!(stack_sample, ns))?,
        time_ns: u64_at(offset_of!(stack_sample, time_ns))?,
        fd: u64_at(offset_of!(stack_sample, fd))? as i64,
        path_hash: u64_at(offset_of!(stack_sample, path_hash))?,
        ip: u64_at(offset_of!(stack_sample, ip))?,
        sp: u64_at(offset_of!(stack_sample, sp))?,
        fp: u64_at(offset_of!(stack_sample, fp))?,
        lr: u64_at(offset_of!(stack_sample, lr))?,
        stack: b.get(stack_at..stack_at + len)?.to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_stack_sample() {
        let mut b = vec![0u8; offset_of!(stack_sample, stack) + 16];
        let put = |b: &mut Vec<u8>, at: usize, v: &[u8]| b[at..at + v.len()].copy_from_slice(v);
        put(&mut b, offset_of!(stack_sample, tgid), &7u32.to_ne_bytes());
        put(&mut b, offset_of!(stack_sample, nr), &262u32.to_ne_bytes());
        put(&mut b, offset_of!(stack_sample, period), &64u64.to_ne_bytes());
        put(&mut b, offset_of!(stack_sample, sp), &0x1000u64.to_ne_bytes());
        put(&mut b, offset_of!(stack_sample, stack_len), &16u32.to_ne_bytes());
        let at = offset_of!(stack_sample, stack) + 8;
        put(&mut b, at, &0xdeadu64.to_ne_bytes());
        let s = stack_sample(&b).unwrap();
        assert_eq!((s.tgid, s.nr, s.period, s.stack.len()), (7, 262, 64, 16));
        assert_eq!(s.read_u64(0x1008), Some(0xdead));
        // Cut short: refused.
        assert!(stack_sample(&b[..b.len() - 1]).is_none());
    }

    #[test]
    fn parses_a_failure() {
        let mut b = vec![0u8; std::mem::size_of::<failure_record>()];
        let put = |b: &mut Vec<u8>, at: usize, v: &[u8]| b[at..at + v.len()].copy_from_slice(v);
        put(&mut b, offset_of!(failure_record, kind), &RECORD_FAILURE.to_ne_bytes());
        put(&mut b, offset_of!(failure_record, tgid), &7u32.to_ne_bytes());
        put(&mut b, offset_of!(failure_record, nr), &257u32.to_ne_bytes());
        put(&mut b, offset_of!(failure_record, fd), &(-100i64).to_ne_bytes());
        put(&mut b, offset_of!(failure_record, path_hash), &0x55u64.to_ne_bytes());
        put(&mut b, offset_of!(failure_record, ns), &900u64.to_ne_bytes());
        let Some(Record::Failure(f)) = Record::parse(&b) else { panic!("not a failure") };
        assert_eq!(f, Failure { tgid: 7, nr: 257, fd: -100, path_hash: 0x55, ns: 900 });
        assert!(Record::parse(&b[..b.len() - 1]).is_none(), "cut short: refused");
    }
}

#[cfg(test)]
mod classes {
    use super::*;

    #[test]
    fn every_class_the_kernel_side_names_is_a_class_of_its_own() {
        let timeouts: std::collections::HashSet<_> = (0..=4).map(|c| format!("{:?}", timeout_of(c))).collect();
        assert_eq!(timeouts.len(), 5);
        let masks: std::collections::HashSet<_> = (0..mask_change::MASK_CLASSES.0 as i64).map(|c| format!("{:?}", mask_change_of(c))).collect();
        assert_eq!(masks.len(), mask_change::MASK_CLASSES.0 as usize);
        let brks: std::collections::HashSet<_> = (0..=3).map(|c| format!("{:?}", brk_change_of(c))).collect();
        assert_eq!(brks.len(), 4);
        assert_eq!((UNREADABLE_PATH, NULL_PATH), (1, 3), "odd, as no real hash is even");
    }
}
