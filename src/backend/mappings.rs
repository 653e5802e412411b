//! Where the traced processes map their code, as the kernel tells it while
//! it happens: perf's mmap2, comm (exec) and fork records, from a dummy
//! software event per CPU that every child inherits. Stacks are unwound
//! against these, so a process that lived 20 ms still resolves after it is
//! gone, which /proc/PID/maps read at the end could not do.

use std::fs;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};

use super::perf::{self, online_cpus, page_size, PerfEventAttr, PERF_TYPE_SOFTWARE};
use crate::error::{Error, Result};

/// One change to a process's address space; `time` is CLOCK_MONOTONIC ns,
/// the clock the BPF side stamps samples with.
#[derive(Debug, Clone, PartialEq)]
pub enum MapEvent {
    /// An executable mapping of `path` (or `[vdso]`) at `start`.
    Mmap { pid: u32, time: u64, start: u64, len: u64, pgoff: u64, path: String },
    /// `pid` exec'd: its old mappings are gone.
    Exec { pid: u32, time: u64 },
    /// A new process `pid`, a copy of `ppid`'s address space.
    Fork { pid: u32, ppid: u32, time: u64 },
    /// `pid`'s main thread ended: its address space can go once the
    /// samples taken before are unwound.
    Exit { pid: u32, time: u64 },
}

impl MapEvent {
    pub fn time(&self) -> u64 {
        match self {
            MapEvent::Mmap { time, .. } | MapEvent::Exec { time, .. } | MapEvent::Fork { time, .. } | MapEvent::Exit { time, .. } => *time,
        }
    }
}

/// The executable mappings of a live process now, for processes that were
/// running before tracing began (attach). Time 0: before any sample.
pub fn snapshot(pid: u32) -> Vec<MapEvent> {
    let Ok(maps) = fs::read_to_string(format!("/proc/{pid}/maps")) else { return Vec::new() };
    maps.lines().filter_map(|l| parse_maps_line(pid, l)).collect()
}

fn parse_maps_line(pid: u32, line: &str) -> Option<MapEvent> {
    let mut f = line.split_ascii_whitespace();
    let (range, perms, offset) = (f.next()?, f.next()?, f.next()?);
    let path = f.nth(2)?.to_string(); // skip dev, inode
    if !perms.contains('x') {
        return None;
    }
    let (s, e) = range.split_once('-')?;
    let start = u64::from_str_radix(s, 16).ok()?;
    let end = u64::from_str_radix(e, 16).ok()?;
    Some(MapEvent::Mmap { pid, time: 0, start, len: end - start, pgoff: u64::from_str_radix(offset, 16).ok()?, path })
}

const PERF_COUNT_SW_DUMMY: u64 = 9;
const PERF_SAMPLE_TID: u64 = 1 << 1;
const PERF_SAMPLE_TIME: u64 = 1 << 2;
// attr.flags bits
const INHERIT: u64 = 1 << 1;
const MMAP: u64 = 1 << 8;
const COMM: u64 = 1 << 9;
const TASK: u64 = 1 << 13;
const SAMPLE_ID_ALL: u64 = 1 << 18;
const MMAP2: u64 = 1 << 23;
const COMM_EXEC: u64 = 1 << 24;
const USE_CLOCKID: u64 = 1 << 25;

const RECORD_LOST: u32 = 2;
const RECORD_EXIT: u32 = 4;
const RECORD_COMM: u32 = 3;
const RECORD_FORK: u32 = 7;
const RECORD_MMAP2: u32 = 10;
const MISC_COMM_EXEC: u16 = 1 << 13;

/// 2^7 data pages per CPU: about 4,000 mmap records between two reads.
const DATA_PAGES: usize = 128;

/// The open perf events and their ring buffers.
pub struct MapEvents {
    rings: Vec<Ring>,
    /// Records the kernel dropped because a ring was full.
    pub lost: u64,
}

struct Ring {
    _fd: OwnedFd,
    base: *mut u8,
    len: usize,
    data_size: usize,
}

// SAFETY: the mapping is owned by this Ring alone; it is only read and
// written by whichever thread owns the MapEvents.
unsafe impl Send for Ring {}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: base/len come from our own successful mmap.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

impl MapEvents {
    /// Watches the mappings of each of `tids` and of every task they create
    /// from now on. For a held child, call this before it execs.
    pub fn open(tids: &[u32]) -> Result<MapEvents> {
        let mut events = MapEvents { rings: Vec::new(), lost: 0 };
        events.watch(tids)?;
        Ok(events)
    }

    /// Watches `tids` too (threads not watched yet).
    pub fn watch(&mut self, tids: &[u32]) -> Result<()> {
        let cpus = online_cpus();
        for &tid in tids {
            for &cpu in &cpus {
                match Ring::open(tid, cpu) {
                    Ok(r) => self.rings.push(r),
                    // The thread ended meanwhile: nothing of it to watch.
                    Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
                    Err(e) if e.raw_os_error() == Some(libc::EACCES) || e.raw_os_error() == Some(libc::EPERM) => {
                        return Err(perf::refused("mapping events"))
                    }
                    Err(e) => return Err(Error::Io(std::io::Error::other(format!("perf_event_open (mapping events): {e}")))),
                }
            }
        }
        Ok(())
    }

    /// Takes every record written so far, in time order.
    pub fn drain(&mut self) -> Vec<MapEvent> {
        let mut events = Vec::new();
        for r in &self.rings {
            r.drain(&mut events, &mut self.lost);
        }
        events.sort_by_key(MapEvent::time);
        events
    }
}

impl Ring {
    fn open(tid: u32, cpu: i32) -> std::io::Result<Ring> {
        let attr = PerfEventAttr {
            kind: PERF_TYPE_SOFTWARE,
            size: std::mem::size_of::<PerfEventAttr>() as u32,
            config: PERF_COUNT_SW_DUMMY,
            sample_type: PERF_SAMPLE_TID | PERF_SAMPLE_TIME,
            flags: INHERIT | MMAP | COMM | TASK | SAMPLE_ID_ALL | MMAP2 | COMM_EXEC | USE_CLOCKID,
            clockid: libc::CLOCK_MONOTONIC,
            ..Default::default()
        };
        let fd = perf::open(&attr, tid as i32, cpu)?;
        let page = page_size();
        let len = page * (1 + DATA_PAGES);
        // SAFETY: mapping the event's ring buffer, as perf_event_open(2) says.
        let base = unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd.as_raw_fd(), 0) };
        if base == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Ring { _fd: fd, base: base.cast(), len, data_size: page * DATA_PAGES })
    }

    fn drain(&self, out: &mut Vec<MapEvent>, lost: &mut u64) {
        let page = page_size();
        // SAFETY: data_head (offset 1024) and data_tail (1032) of the
        // perf_event_mmap_page at the start of our mapping; u64-aligned.
        let (head_ptr, tail_ptr) = unsafe { (&*(self.base.add(1024) as *const AtomicU64), &*(self.base.add(1032) as *const AtomicU64)) };
        let head = head_ptr.load(Ordering::Acquire);
        let mut tail = tail_ptr.load(Ordering::Relaxed);
        // SAFETY: the data area follows the header page, data_size long.
        let data = unsafe { std::slice::from_raw_parts(self.base.add(page), self.data_size) };
        let mut record = Vec::new();
        while tail < head {
            let at = |i: u64| data[((tail + i) % self.data_size as u64) as usize];
            let size = u16::from_ne_bytes([at(6), at(7)]) as u64;
            if size < 8 {
                break; // a corrupt header: stop rather than spin
            }
            record.clear();
            record.extend((0..size).map(at));
            if let Some(e) = parse_record(&record, lost) {
                out.push(e);
            }
            tail += size;
        }
        tail_ptr.store(tail, Ordering::Release);
    }
}

fn u32_at(b: &[u8], i: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(i..i + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], i: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(b.get(i..i + 8)?.try_into().ok()?))
}

fn c_str(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

/// Parses one record. With sample_id_all and TID|TIME, every record ends
/// with pid, tid and time: the time is its last 8 bytes.
fn parse_record(r: &[u8], lost: &mut u64) -> Option<MapEvent> {
    let kind = u32_at(r, 0)?;
    let misc = u16::from_ne_bytes([r[4], r[5]]);
    let time = u64_at(r, r.len() - 8)?;
    match kind {
        RECORD_MMAP2 => {
            // pid tid addr len pgoff (24 bytes of maj/min/ino or build id) prot flags filename
            let name_end = r.len() - 16;
            Some(MapEvent::Mmap {
                pid: u32_at(r, 8)?,
                time,
                start: u64_at(r, 16)?,
                len: u64_at(r, 24)?,
                pgoff: u64_at(r, 32)?,
                path: c_str(r.get(72..name_end)?),
            })
        }
        RECORD_COMM if misc & MISC_COMM_EXEC != 0 => Some(MapEvent::Exec { pid: u32_at(r, 8)?, time }),
        RECORD_FORK => {
            let (pid, ppid) = (u32_at(r, 8)?, u32_at(r, 12)?);
            // A new thread shares its process's address space.
            (pid != ppid).then_some(MapEvent::Fork { pid, ppid, time: u64_at(r, 24)? })
        }
        RECORD_EXIT => {
            // pid ppid tid ptid time: the process's main thread only.
            let (pid, tid) = (u32_at(r, 8)?, u32_at(r, 16)?);
            (pid == tid).then_some(MapEvent::Exit { pid, time: u64_at(r, 24)? })
        }
        RECORD_LOST => {
            *lost += u64_at(r, 16)?;
            None
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_lines() {
        let l = "7f1c2a228000-7f1c2a37d000 r-xp 00028000 08:01 1835 /usr/lib/x86_64-linux-gnu/libc.so.6";
        assert_eq!(
            parse_maps_line(7, l),
            Some(MapEvent::Mmap {
                pid: 7,
                time: 0,
                start: 0x7f1c2a228000,
                len: 0x155000,
                pgoff: 0x28000,
                path: "/usr/lib/x86_64-linux-gnu/libc.so.6".into()
            })
        );
        assert_eq!(parse_maps_line(7, "7f1c2a200000-7f1c2a228000 r--p 00000000 08:01 1835 /x"), None);
        assert_eq!(parse_maps_line(7, "7ffd-7ffe r-xp 00000000 00:00 0 "), None);
    }

    #[test]
    fn mapping_events_of_a_child_arrive() {
        // This process's own events: a thread is a task like any other.
        if unsafe { libc::geteuid() } != 0 {
            return;
        }
        let mut ev = MapEvents::open(&[unsafe { libc::gettid() } as u32]).unwrap();
        let out = std::process::Command::new("true").status().unwrap();
        assert!(out.success());
        let events = ev.drain();
        assert!(events.iter().any(|e| matches!(e, MapEvent::Fork { .. })), "{events:?}");
        assert!(events.iter().any(|e| matches!(e, MapEvent::Exec { .. })), "{events:?}");
        assert!(events.iter().any(|e| matches!(e, MapEvent::Mmap { path, .. } if path.contains("libc.so"))), "{events:?}");
    }

    #[test]
    fn online_cpu_list() {
        assert!(!online_cpus().is_empty());
    }
}
