//! Where the traced processes map their code, as the kernel tells it while
//! it happens: perf's mmap2, comm (exec) and fork records, from a dummy
//! software event on each CPU for the whole host, kept for the traced
//! processes and the processes they fork (`Targets`). Stacks are unwound
//! against these, so a process that lived 20 ms still resolves after it is
//! gone, which /proc/PID/maps read at the end could not do. Not an event
//! per task that every child inherits: the kernel would copy it into each
//! new task and switch it in and out with each of them, which on a run of
//! thousands of short processes cost more than the records
//! (docs/overhead.md).

use std::collections::{HashMap, HashSet};
use std::fs;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
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
    let m = MapsLine::parse(line)?;
    if !m.perms.contains('x') || m.path.is_empty() {
        return None;
    }
    Some(MapEvent::Mmap { pid, time: 0, start: m.start, len: m.end - m.start, pgoff: m.offset, path: m.path.to_string() })
}

/// A /proc/PID/maps line: range, permissions, offset, device, inode, then
/// the path, which may hold spaces (empty for anonymous memory).
struct MapsLine<'a> {
    start: u64,
    end: u64,
    perms: &'a str,
    offset: u64,
    path: &'a str,
}

impl<'a> MapsLine<'a> {
    fn parse(line: &'a str) -> Option<MapsLine<'a>> {
        let mut fields = [""; 5];
        let mut rest = line;
        for field in &mut fields {
            (*field, rest) = rest.trim_start().split_once(' ').unwrap_or((rest.trim_start(), ""));
        }
        let [range, perms, offset, _, _] = fields;
        let (s, e) = range.split_once('-')?;
        let (start, end) = (u64::from_str_radix(s, 16).ok()?, u64::from_str_radix(e, 16).ok()?);
        Some(MapsLine { start, end: end.max(start), perms, offset: u64::from_str_radix(offset, 16).ok()?, path: rest.trim_start() })
    }
}

const PERF_COUNT_SW_DUMMY: u64 = 9;
const PERF_SAMPLE_TID: u64 = 1 << 1;
const PERF_SAMPLE_TIME: u64 = 1 << 2;
// attr.flags bits
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
/// An mmap2 record that holds a build id where maj/min/ino would be.
const MISC_MMAP_BUILD_ID: u16 = 1 << 14;

/// 2^7 data pages per CPU: about 4,000 mmap records between two reads.
const DATA_PAGES: usize = 128;

/// The open perf events and their ring buffers.
pub struct MapEvents {
    rings: Vec<Ring>,
    /// Records the kernel dropped because a ring was full (any process's:
    /// the rings are the host's).
    pub lost: u64,
    targets: Targets,
    paths: VisiblePaths,
}

/// The paths mmap records name, as the processes see them. Ubuntu's
/// kernels (a patch of theirs to overlayfs, in 20.04's and 22.04's) name a
/// file mapped from overlayfs by its path within its layer: a program in
/// `/tmp/t/prog` on an overlay is `/t/prog`, which is no file here, or
/// may be another file (a container's `/usr/bin/python3`, the host's); its
/// /proc/PID/maps line names it as the process does. A recorded path is
/// kept when it is a file of the record's inode; else the maps line's at
/// the mapping's start is taken, when it is; else it is kept as it is.
#[derive(Default)]
struct VisiblePaths {
    /// (recorded path, inode) -> the path that names it (None: the recorded
    /// one, which does or is no worse); only answers that the files gave,
    /// not a process gone.
    known: HashMap<(String, u64), Option<String>>,
}

impl VisiblePaths {
    fn visible(&mut self, pid: u32, start: u64, ino: u64, recorded: String) -> String {
        if ino == 0 || !recorded.starts_with('/') {
            return recorded;
        }
        let key = (recorded, ino);
        if let Some(answer) = self.known.get(&key) {
            return answer.clone().unwrap_or(key.0);
        }
        let answer = if names_inode(&key.0, ino) {
            Some(None)
        } else {
            match maps_path(pid, start) {
                Some(path) if names_inode(&path, ino) => Some(Some(path)),
                // The process's own name is no better (an overlay's own
                // inode numbers, say): kept as recorded from now on.
                Some(_) => Some(None),
                // The process is gone: asked again at the next record.
                None => None,
            }
        };
        match answer {
            Some(found) => {
                self.known.insert(key.clone(), found.clone());
                found.unwrap_or(key.0)
            }
            None => key.0,
        }
    }
}

/// Whether `path` is a file of inode `ino`.
fn names_inode(path: &str, ino: u64) -> bool {
    fs::metadata(path).is_ok_and(|m| m.is_file() && m.ino() == ino)
}

/// The path /proc/PID/maps names for the mapping that starts at `start`.
fn maps_path(pid: u32, start: u64) -> Option<String> {
    let maps = fs::read_to_string(format!("/proc/{pid}/maps")).ok()?;
    let line = maps.lines().filter_map(MapsLine::parse).find(|m| m.start == start)?;
    line.path.starts_with('/').then(|| line.path.to_string())
}

/// The processes whose records are kept: the watched ones and those they
/// fork. A record of a process not known yet waits one read: the rings
/// are read one CPU after another, so a child's first mapping on one CPU
/// can be read before its fork record on another (written first, before
/// the child ran), which the next read then finds.
#[derive(Debug, Default)]
struct Targets {
    pids: HashSet<u32>,
    waiting: Vec<MapEvent>,
    /// Processes known not to be targets: one whose record waited a read
    /// and was dropped (a target's child would be known by then), and any
    /// process one of them forks. Their records are passed over unread.
    strangers: HashSet<u32>,
}

impl Targets {
    /// This read's records (`fresh`) and the last one's that waited, in
    /// time order: the targets' records; those of processes still unknown
    /// wait for the next read if they are fresh, else are dropped.
    fn select(&mut self, fresh: Vec<MapEvent>) -> Vec<MapEvent> {
        let mut all: Vec<(MapEvent, bool)> =
            std::mem::take(&mut self.waiting).into_iter().map(|e| (e, true)).chain(fresh.into_iter().map(|e| (e, false))).collect();
        all.sort_by_key(|(e, _)| e.time());
        let mut kept = Vec::new();
        for (e, waited) in all {
            let ours = match &e {
                MapEvent::Fork { pid, ppid, .. } => {
                    let forked_by_one = self.pids.contains(ppid);
                    if forked_by_one {
                        self.pids.insert(*pid);
                        // A stranger's pid, reused (its exit's record lost).
                        self.strangers.remove(pid);
                    }
                    forked_by_one
                }
                MapEvent::Exit { pid, .. } => self.pids.remove(pid),
                MapEvent::Mmap { pid, .. } | MapEvent::Exec { pid, .. } => self.pids.contains(pid),
            };
            if ours {
                kept.push(e);
            } else if !waited {
                self.waiting.push(e);
            } else {
                match e {
                    MapEvent::Fork { pid, ppid, .. } => self.strangers.extend([pid, ppid]),
                    MapEvent::Mmap { pid, .. } | MapEvent::Exec { pid, .. } => {
                        self.strangers.insert(pid);
                    }
                    MapEvent::Exit { .. } => {}
                }
            }
        }
        kept
    }
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
    /// Watches the mappings of the processes `pids` (a thread's id, or a
    /// process's other threads', adds nothing: records are by process) and
    /// of every process they fork from now on. For a held child, call this
    /// before it execs.
    pub fn open(pids: &[u32]) -> Result<MapEvents> {
        let mut rings = Vec::new();
        for cpu in online_cpus() {
            match Ring::open(cpu) {
                Ok(r) => rings.push(r),
                Err(e) if e.raw_os_error() == Some(libc::EACCES) || e.raw_os_error() == Some(libc::EPERM) => {
                    return Err(perf::refused("mapping events"))
                }
                Err(e) => return Err(Error::Io(std::io::Error::other(format!("perf_event_open (mapping events): {e}")))),
            }
        }
        Ok(MapEvents {
            rings,
            lost: 0,
            targets: Targets { pids: pids.iter().copied().collect(), ..Targets::default() },
            paths: VisiblePaths::default(),
        })
    }

    /// Takes the targets' records written so far, in time order.
    pub fn drain(&mut self) -> Vec<MapEvent> {
        let mut events = Vec::new();
        for r in &self.rings {
            r.drain(&mut events, &mut self.lost, &mut self.targets.strangers, &mut self.paths);
        }
        self.targets.select(events)
    }
}

impl Ring {
    /// CPU `cpu`'s records, of every process.
    fn open(cpu: i32) -> std::io::Result<Ring> {
        let attr = PerfEventAttr {
            kind: PERF_TYPE_SOFTWARE,
            size: std::mem::size_of::<PerfEventAttr>() as u32,
            config: PERF_COUNT_SW_DUMMY,
            sample_type: PERF_SAMPLE_TID | PERF_SAMPLE_TIME,
            flags: MMAP | COMM | TASK | SAMPLE_ID_ALL | MMAP2 | COMM_EXEC | USE_CLOCKID,
            clockid: libc::CLOCK_MONOTONIC,
            ..Default::default()
        };
        let fd = perf::open(&attr, -1, cpu)?;
        let page = page_size();
        let len = page * (1 + DATA_PAGES);
        // SAFETY: mapping the event's ring buffer, as perf_event_open(2) says.
        let base = unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd.as_raw_fd(), 0) };
        if base == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Ring { _fd: fd, base: base.cast(), len, data_size: page * DATA_PAGES })
    }

    /// Reads the records written since the last read, but strangers'.
    fn drain(&self, out: &mut Vec<MapEvent>, lost: &mut u64, strangers: &mut HashSet<u32>, paths: &mut VisiblePaths) {
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
            let word = |i: u64| u32::from_ne_bytes([at(i), at(i + 1), at(i + 2), at(i + 3)]);
            if size >= 24 && passed_over(word(0), word(8), word(12), word(16), strangers) {
                tail += size;
                continue;
            }
            record.clear();
            record.extend((0..size).map(at));
            if let Some(e) = parse_record(&record, lost, paths) {
                out.push(e);
            }
            tail += size;
        }
        tail_ptr.store(tail, Ordering::Release);
    }
}

/// Whether a record (its kind and first three words: pid, then ppid or
/// tid, then tid) is a stranger's, to pass over unread; a stranger's new
/// process is one too, and a stranger that ended is forgotten (its pid
/// may come back as anyone's).
fn passed_over(kind: u32, pid: u32, second: u32, third: u32, strangers: &mut HashSet<u32>) -> bool {
    match kind {
        RECORD_MMAP2 | RECORD_COMM => strangers.contains(&pid),
        // pid ppid tid ptid: a new thread of a stranger, or its new process.
        RECORD_FORK if strangers.contains(&second) => {
            strangers.insert(pid);
            true
        }
        // pid ppid tid ptid: its main thread's end is the process's.
        RECORD_EXIT if strangers.contains(&pid) => {
            if pid == third {
                strangers.remove(&pid);
            }
            true
        }
        _ => false,
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
fn parse_record(r: &[u8], lost: &mut u64, paths: &mut VisiblePaths) -> Option<MapEvent> {
    let kind = u32_at(r, 0)?;
    let misc = u16::from_ne_bytes([r[4], r[5]]);
    let time = u64_at(r, r.len() - 8)?;
    match kind {
        RECORD_MMAP2 => {
            // pid tid addr len pgoff (24 bytes of maj/min/ino or build id) prot flags filename
            let name_end = r.len() - 16;
            let (pid, start) = (u32_at(r, 8)?, u64_at(r, 16)?);
            let ino = if misc & MISC_MMAP_BUILD_ID == 0 { u64_at(r, 48)? } else { 0 };
            let path = paths.visible(pid, start, ino, c_str(r.get(72..name_end)?));
            Some(MapEvent::Mmap { pid, time, start, len: u64_at(r, 24)?, pgoff: u64_at(r, 32)?, path })
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
        // A path with spaces is one path (it was cut at its first).
        let spaced = parse_maps_line(7, "1000-2000 r-xp 00000000 08:01 9   /opt/my app/bin");
        assert!(matches!(spaced, Some(MapEvent::Mmap { ref path, .. }) if path == "/opt/my app/bin"), "{spaced:?}");
    }

    #[test]
    fn mapping_events_of_a_child_arrive_and_a_strangers_do_not() {
        if unsafe { libc::geteuid() } != 0 {
            return;
        }
        // Started before the watch: not this process's child from then on.
        let mut stranger = std::process::Command::new("sh").args(["-c", "read x; exec true"]).stdin(std::process::Stdio::piped()).spawn().unwrap();
        let mut ev = MapEvents::open(&[std::process::id()]).unwrap();
        let child = std::process::Command::new("true").spawn().unwrap();
        let child_pid = child.id();
        assert!(child.wait_with_output().unwrap().status.success());
        drop(stranger.stdin.take());
        assert!(stranger.wait().unwrap().success());
        let events: Vec<MapEvent> = ev.drain().into_iter().chain(ev.drain()).collect();
        let of = |pid: u32| events.iter().filter(move |e| event_pid(e) == pid);
        assert!(of(child_pid).any(|e| matches!(e, MapEvent::Fork { .. })), "{events:?}");
        assert!(of(child_pid).any(|e| matches!(e, MapEvent::Exec { .. })), "{events:?}");
        assert!(of(child_pid).any(|e| matches!(e, MapEvent::Mmap { path, .. } if path.contains("libc.so"))), "{events:?}");
        assert_eq!(of(stranger.id()).count(), 0, "{events:?}");
    }

    /// This test binary's first executable mapping: its start, inode and
    /// path, as /proc/self/maps says.
    fn own_text() -> (u64, u64, String) {
        let exe = fs::read_link("/proc/self/exe").unwrap().to_string_lossy().into_owned();
        let maps = fs::read_to_string("/proc/self/maps").unwrap();
        let line = maps.lines().find(|l| l.ends_with(&exe) && l.split_whitespace().nth(1).is_some_and(|p| p.contains('x'))).unwrap();
        let f: Vec<&str> = line.split_whitespace().collect();
        (u64::from_str_radix(f[0].split_once('-').unwrap().0, 16).unwrap(), f[4].parse().unwrap(), exe)
    }

    #[test]
    fn a_layers_path_is_named_as_the_process_sees_it() {
        let (start, ino, exe) = own_text();
        let pid = std::process::id();
        let mut paths = VisiblePaths::default();
        // As the file's own path: kept.
        assert_eq!(paths.visible(pid, start, ino, exe.clone()), exe);
        // As Ubuntu's overlayfs names it, a path within its layer: no file
        // here, or another one (this one is /bin/sh).
        assert_eq!(paths.visible(pid, start, ino, "/no/such/layer/path".into()), exe);
        assert_eq!(paths.visible(pid, start, ino, "/bin/sh".into()), exe);
        // Answered again from what is known, the process gone or not.
        assert_eq!(paths.visible(0, start, ino, "/no/such/layer/path".into()), exe);
        // No mapping there, nor a file of that inode: kept as recorded.
        assert_eq!(paths.visible(pid, 0x1000, ino, "/no/such/other/path".into()), "/no/such/other/path");
        // No inode (a build-id record), or no path: kept.
        assert_eq!(paths.visible(pid, start, 0, "/bin/sh".into()), "/bin/sh");
        assert_eq!(paths.visible(pid, start, ino, "[vdso]".into()), "[vdso]");
    }

    #[test]
    fn a_maps_line_path_may_hold_spaces() {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("a b");
        fs::copy("/bin/sleep", &exe).unwrap();
        // Another test's fork may hold the copy's descriptor open a moment
        // (ETXTBSY): tried again.
        let spawn = || std::process::Command::new(&exe).arg("5").spawn();
        let mut child = (0..100)
            .find_map(|_| match spawn() {
                Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) => {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                    None
                }
                other => Some(other.unwrap()),
            })
            .expect("the copy runs");
        let pid = child.id();
        let mut found = None;
        for _ in 0..200 {
            let maps = fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
            if let Some(l) = maps.lines().find(|l| l.ends_with("/a b")) {
                found = Some(u64::from_str_radix(l.split_once('-').unwrap().0, 16).unwrap());
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let start = found.expect("the copy's mapping");
        assert_eq!(maps_path(pid, start).as_deref(), exe.to_str());
        child.kill().unwrap();
        child.wait().unwrap();
    }

    fn event_pid(e: &MapEvent) -> u32 {
        match e {
            MapEvent::Mmap { pid, .. } | MapEvent::Exec { pid, .. } | MapEvent::Fork { pid, .. } | MapEvent::Exit { pid, .. } => *pid,
        }
    }

    fn mmap(pid: u32, time: u64) -> MapEvent {
        MapEvent::Mmap { pid, time, start: 0x1000, len: 0x1000, pgoff: 0, path: "/bin/x".into() }
    }

    #[test]
    fn a_targets_children_and_theirs_are_kept_and_strangers_dropped() {
        let mut t = Targets::default();
        t.pids.insert(10);
        let kept = t.select(vec![
            MapEvent::Fork { pid: 11, ppid: 10, time: 1 },
            MapEvent::Fork { pid: 12, ppid: 11, time: 2 },
            mmap(12, 3),
            MapEvent::Fork { pid: 21, ppid: 20, time: 4 },
            mmap(20, 5),
            mmap(21, 6),
        ]);
        assert_eq!(kept.iter().map(event_pid).collect::<Vec<_>>(), [11, 12, 12]);
        // The strangers' records waited one read, and go.
        assert_eq!(t.select(Vec::new()), []);
        assert!(t.waiting.is_empty());
    }

    #[test]
    fn a_childs_mapping_read_before_its_fork_is_kept_in_time_order() {
        let mut t = Targets::default();
        t.pids.insert(10);
        // One CPU's ring read before the fork record reached the other's.
        assert_eq!(t.select(vec![mmap(11, 5), MapEvent::Exec { pid: 11, time: 4 }]), []);
        let kept = t.select(vec![MapEvent::Fork { pid: 11, ppid: 10, time: 3 }, mmap(11, 6)]);
        assert_eq!(kept.iter().map(MapEvent::time).collect::<Vec<_>>(), [3, 4, 5, 6]);
    }

    #[test]
    fn a_process_whose_record_waited_in_vain_is_a_stranger_and_so_are_its_children() {
        let mut t = Targets::default();
        t.pids.insert(10);
        assert_eq!(t.select(vec![MapEvent::Fork { pid: 31, ppid: 30, time: 1 }, mmap(40, 2), mmap(10, 3)]).len(), 1);
        assert!(t.strangers.is_empty(), "nothing decided before a second read");
        assert_eq!(t.select(Vec::new()), []);
        assert_eq!(t.strangers, HashSet::from([30, 31, 40]));
        let s = &mut t.strangers;
        // 30's new process, its mappings, its end; a target's records read.
        assert!(passed_over(RECORD_FORK, 32, 30, 32, s));
        assert!(passed_over(RECORD_MMAP2, 32, 32, 0, s));
        assert!(passed_over(RECORD_EXIT, 32, 30, 32, s));
        assert!(!s.contains(&32), "an ended stranger's pid can come back as anyone's");
        assert!(!passed_over(RECORD_MMAP2, 10, 10, 0, s));
        assert!(!passed_over(RECORD_FORK, 11, 10, 11, s));
        // A stranger's pid that comes back as a target's child (its end lost).
        let kept = t.select(vec![MapEvent::Fork { pid: 40, ppid: 10, time: 5 }]);
        assert_eq!(kept.len(), 1);
        assert!(!t.strangers.contains(&40));
    }

    #[test]
    fn an_ended_target_is_no_longer_one() {
        let mut t = Targets::default();
        t.pids.insert(10);
        assert_eq!(t.select(vec![MapEvent::Exit { pid: 10, time: 1 }]).len(), 1);
        // Its pid, reused by another process's child.
        assert_eq!(t.select(vec![mmap(10, 2)]), []);
        assert_eq!(t.select(Vec::new()), []);
    }

    #[test]
    fn online_cpu_list() {
        assert!(!online_cpus().is_empty());
    }
}
