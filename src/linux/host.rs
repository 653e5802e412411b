//! Facts about the host and its running processes, for `sysdiet check`:
//! where TZ is set system-wide, and each process's TZ and service unit;
//! for the tracers, which file a process runs; and where sysdiet keeps
//! what it makes once and reuses (its cache).

use std::fs;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunningProcess {
    pub pid: u32,
    pub comm: String,
    /// `TZ` in its environment, None when unset.
    pub tz: Option<String>,
    /// The systemd unit it runs in (`nginx.service`), if any.
    pub unit: Option<String>,
}

/// Every user-space process but `except` (kernel threads have no
/// environment), and how many could not be read (their environment is
/// private to their owner and root); processes that vanish are left out.
pub fn processes(except: u32) -> (Vec<RunningProcess>, usize) {
    let Ok(dir) = fs::read_dir("/proc") else { return (Vec::new(), 0) };
    let mut unreadable = 0;
    let mut out: Vec<RunningProcess> = dir
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| pid != except)
        .filter_map(|pid| {
            let environ = match fs::read(format!("/proc/{pid}/environ")) {
                Ok(e) => e,
                Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                    unreadable += 1;
                    return None;
                }
                Err(_) => return None,
            };
            if environ.is_empty() {
                return None;
            }
            let tz = environ.split(|&b| b == 0).find_map(|kv| kv.strip_prefix(b"TZ=")).map(|v| String::from_utf8_lossy(v).into_owned());
            let comm = fs::read_to_string(format!("/proc/{pid}/comm")).ok()?.trim().to_string();
            let unit = fs::read_to_string(format!("/proc/{pid}/cgroup")).ok().and_then(|c| unit_of(&c));
            Some(RunningProcess { pid, comm, tz, unit })
        })
        .collect();
    out.sort_by_key(|p| p.pid);
    (out, unreadable)
}

/// The service unit in a /proc/PID/cgroup text (`0::/system.slice/x.service`).
fn unit_of(cgroup: &str) -> Option<String> {
    cgroup.lines().flat_map(|l| l.rsplit(':').next().unwrap_or("").split('/')).rfind(|p| p.ends_with(".service")).map(str::to_string)
}

/// Where TZ is set for every process the system starts, if anywhere:
/// (file, value).
pub fn system_tz() -> Option<(String, String)> {
    let env = fs::read_to_string("/etc/environment").unwrap_or_default();
    if let Some(v) = env.lines().find_map(|l| l.trim().strip_prefix("TZ=")) {
        return Some(("/etc/environment".into(), v.trim_matches('"').to_string()));
    }
    let conf = fs::read_to_string("/etc/systemd/system.conf").unwrap_or_default();
    conf.lines()
        .filter(|l| l.trim_start().starts_with("DefaultEnvironment="))
        .flat_map(|l| l.split_whitespace())
        .find_map(|w| w.trim_start_matches("DefaultEnvironment=").trim_matches('"').strip_prefix("TZ=").map(str::to_string))
        .map(|v| ("/etc/systemd/system.conf DefaultEnvironment".into(), v))
}

/// The zone /etc/localtime points at (`Europe/Paris`), if it is a link.
pub fn zone() -> Option<String> {
    let target = fs::read_link("/etc/localtime").ok()?;
    let t = target.to_string_lossy();
    Some(t.split("zoneinfo/").nth(1).unwrap_or(&t).to_string())
}

/// Whether this process holds what loading tracing programs takes:
/// CAP_SYS_ADMIN, or CAP_BPF with CAP_PERFMON (Linux 5.8), in its effective
/// set (/proc/self/status's CapEff).
pub fn may_load_bpf() -> bool {
    const CAP_SYS_ADMIN: u32 = 21;
    const CAP_PERFMON: u32 = 38;
    const CAP_BPF: u32 = 39;
    let status = fs::read_to_string("/proc/self/status").unwrap_or_default();
    let Some(eff) = status.lines().find_map(|l| l.strip_prefix("CapEff:")).and_then(|v| u64::from_str_radix(v.trim(), 16).ok()) else {
        return false;
    };
    let has = |cap: u32| eff & (1u64 << cap) != 0;
    has(CAP_SYS_ADMIN) || (has(CAP_BPF) && has(CAP_PERFMON))
}

/// The path of the file process `pid` runs, if that is still the file
/// `exe` ((inode, the kernel's device number)): a pid used again since
/// runs another. A path that is not UTF-8 is shown lossily.
pub fn executable(pid: u32, exe: (u64, u32)) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let link = format!("/proc/{pid}/exe");
    let m = fs::metadata(&link).ok()?;
    // The kernel's dev_t is major << 20 | minor; stat's is glibc's makedev.
    let (major, minor) = (exe.1 >> 20, exe.1 & 0xf_ffff);
    let (ino, dev) = (m.ino(), m.dev());
    if libc::major(dev) != major || libc::minor(dev) != minor {
        return None;
    }
    // An overlay whose layers lie on other file systems numbers its own
    // inodes, and stat shows the layer's: the device has to do.
    if ino != exe.0 && !on_overlay(&link) {
        return None;
    }
    Some(fs::read_link(&link).ok()?.to_string_lossy().into_owned())
}

/// Whether `path` lies on an overlay file system (a container's root).
fn on_overlay(path: &str) -> bool {
    const OVERLAYFS_SUPER_MAGIC: i64 = 0x794c_7630;
    let Ok(c) = std::ffi::CString::new(path) else { return false };
    // SAFETY: statfs is plain data, for which all zeroes is a value.
    let mut buf: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a statfs buffer of the right size.
    unsafe { libc::statfs(c.as_ptr(), &mut buf) == 0 && buf.f_type as i64 == OVERLAYFS_SUPER_MAGIC }
}

/// The cached file `out`, made now by `make(tmp)` if there is none: `make`
/// writes a private name beside it, which is then renamed, since runs may
/// race to make it. None if it could not be made (nothing is left behind).
pub fn cached_file(out: &std::path::Path, make: impl FnOnce(&std::path::Path) -> bool) -> Option<std::path::PathBuf> {
    if out.is_file() {
        return Some(out.to_path_buf());
    }
    replace_file(out, make)
}

/// Writes the cached file `out` anew by `make(tmp)`, made beside it under
/// a private name and renamed over it, so that a reader never sees half of
/// one; prunes the old files beside it. None if it could not be written.
pub fn replace_file(out: &std::path::Path, make: impl FnOnce(&std::path::Path) -> bool) -> Option<std::path::PathBuf> {
    let dir = out.parent()?;
    fs::create_dir_all(dir).ok()?;
    let tmp = dir.join(format!(".{}.{}.tmp", out.file_name()?.to_string_lossy(), std::process::id()));
    if !make(&tmp) || fs::rename(&tmp, out).is_err() {
        let _ = fs::remove_file(&tmp);
        return None;
    }
    prune(dir, out);
    Some(out.to_path_buf())
}

/// How long a cached file is kept after it was made: a new kernel, glibc or
/// sysdiet makes new ones, and the old would pile up (a debug copy is ~10
/// MB). One still in use is made again, once.
const CACHE_KEEP: std::time::Duration = std::time::Duration::from_secs(30 * 24 * 3600);

/// Removes this user's files in `dir` made more than CACHE_KEEP ago, but
/// `keep`; run when a file is made, which is rare.
fn prune(dir: &std::path::Path, keep: &std::path::Path) {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = fs::read_dir(dir) else { return };
    let me = nix::unistd::geteuid().as_raw();
    for e in entries.flatten() {
        let path = e.path();
        let Ok(m) = e.metadata() else { continue };
        let old = m.modified().ok().and_then(|t| t.elapsed().ok()).is_some_and(|age| age > CACHE_KEEP);
        if old && m.is_file() && m.uid() == me && path != keep {
            let _ = fs::remove_file(&path);
        }
    }
}

/// `path` opened, if it is a file of this process's user that no one else
/// may write: a kept file in a cache that may be a user's (sudo keeping
/// HOME), read through the descriptor that was checked.
pub fn open_own(path: &std::path::Path) -> Option<fs::File> {
    let file = fs::File::open(path).ok()?;
    own_file(&file.metadata().ok()?).then_some(file)
}

/// Whether `m` is a regular file of this process's user that no one else
/// may write.
fn own_file(m: &fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    m.is_file() && m.uid() == nix::unistd::geteuid().as_raw() && m.mode() & 0o022 == 0
}

/// Appends `bytes` to `path` in one write, if it is a file of this user's
/// that no one else may write (as `open_own` reads); true if all went. Not
/// through a symbolic link, nor to a file with another name too, nor
/// waiting on a FIFO: a cache in a user's HOME, written under sudo, must
/// not append to a file that user pointed it at.
pub fn append_own(path: &std::path::Path, bytes: &[u8]) -> bool {
    use std::io::Write;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let flags = libc::O_NOFOLLOW | libc::O_NONBLOCK;
    let Ok(mut file) = fs::OpenOptions::new().append(true).custom_flags(flags).open(path) else { return false };
    file.metadata().is_ok_and(|m| own_file(&m) && m.nlink() == 1) && file.write_all(bytes).is_ok()
}

/// Runs a helper program for its files alone: nothing in, nothing shown;
/// true if it ran and succeeded.
pub fn run_quietly(cmd: &mut std::process::Command) -> bool {
    use std::process::Stdio;
    cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok_and(|s| s.success())
}

/// `$XDG_CACHE_HOME/sysdiet`, else `~/.cache/sysdiet`: files made once and
/// reused (decompressed debug info, the kernel types the tracer needs).
pub fn cache_dir() -> Option<std::path::PathBuf> {
    let base = match std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty()) {
        Some(dir) => std::path::PathBuf::from(dir),
        None => std::path::PathBuf::from(std::env::var_os("HOME").filter(|v| !v.is_empty())?).join(".cache"),
    };
    Some(base.join("sysdiet"))
}

/// The running kernel's release, as uname says and errors name it.
pub fn kernel_release() -> String {
    nix::sys::utsname::uname().map(|u| u.release().to_string_lossy().into_owned()).unwrap_or_else(|_| "unknown".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appending_goes_only_to_a_plain_file_of_ours() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let (file, elsewhere) = (dir.path().join("names"), dir.path().join("elsewhere"));
        fs::write(&file, b"a\n").unwrap();
        fs::set_permissions(&file, fs::Permissions::from_mode(0o644)).unwrap();
        assert!(append_own(&file, b"b\n"));
        assert_eq!(fs::read(&file).unwrap(), b"a\nb\n");
        // A link to another file, symbolic or hard: that file is left alone.
        fs::write(&elsewhere, b"x").unwrap();
        fs::set_permissions(&elsewhere, fs::Permissions::from_mode(0o644)).unwrap();
        let symlink = dir.path().join("symlink");
        std::os::unix::fs::symlink(&elsewhere, &symlink).unwrap();
        assert!(!append_own(&symlink, b"y"));
        let hardlink = dir.path().join("hardlink");
        fs::hard_link(&elsewhere, &hardlink).unwrap();
        assert!(!append_own(&hardlink, b"y"));
        assert_eq!(fs::read(&elsewhere).unwrap(), b"x");
        // One others may write; a FIFO, with no reader to wait for.
        fs::set_permissions(&file, fs::Permissions::from_mode(0o666)).unwrap();
        assert!(!append_own(&file, b"c\n"));
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o644)).unwrap();
        assert!(!append_own(&fifo, b"c\n"));
        assert!(!append_own(&dir.path().join("missing"), b"c\n"));
    }

    #[test]
    fn making_a_cached_file_removes_the_old_ones() {
        let dir = tempfile::tempdir().unwrap();
        let (old, recent) = (dir.path().join("old.btf"), dir.path().join("recent.btf"));
        fs::write(&old, b"x").unwrap();
        fs::write(&recent, b"x").unwrap();
        let long_ago = std::time::SystemTime::now() - CACHE_KEEP - std::time::Duration::from_secs(60);
        fs::File::options().write(true).open(&old).unwrap().set_modified(long_ago).unwrap();
        let made = cached_file(&dir.path().join("new.btf"), |tmp| fs::write(tmp, b"y").is_ok());
        assert_eq!(made, Some(dir.path().join("new.btf")));
        assert!(!old.exists(), "made more than 30 days ago");
        assert!(recent.exists());
        // Found, not made: nothing is pruned.
        fs::File::options().write(true).open(&recent).unwrap().set_modified(long_ago).unwrap();
        cached_file(&dir.path().join("new.btf"), |_| unreachable!());
        assert!(recent.exists());
    }

    #[test]
    fn a_kept_file_is_opened_only_if_it_is_ours_and_no_one_else_may_write_it() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("kept");
        fs::write(&file, b"types").unwrap();
        assert!(open_own(&file).is_some());
        fs::set_permissions(&file, fs::Permissions::from_mode(0o666)).unwrap();
        assert!(open_own(&file).is_none(), "writable by others");
        fs::set_permissions(&file, fs::Permissions::from_mode(0o644)).unwrap();
        if nix::unistd::geteuid().is_root() {
            std::os::unix::fs::chown(&file, Some(65534), None).unwrap();
            assert!(open_own(&file).is_none(), "another user's");
        }
        assert!(open_own(dir.path()).is_none(), "not a file");
    }

    #[test]
    fn units_from_cgroups() {
        assert_eq!(unit_of("0::/system.slice/nginx.service\n").as_deref(), Some("nginx.service"));
        assert_eq!(unit_of("0::/user.slice/user-0.slice/session-3.scope\n"), None);
        assert_eq!(unit_of("12:pids:/system.slice/cron.service\n").as_deref(), Some("cron.service"));
    }

    #[test]
    fn this_process_is_seen() {
        let me = std::process::id();
        assert!(processes(0).0.iter().any(|p| p.pid == me));
        assert!(!processes(me).0.iter().any(|p| p.pid == me));
    }

    #[test]
    fn an_executable_is_named_only_while_it_is_the_same_file() {
        use std::os::unix::fs::MetadataExt;
        let me = std::process::id();
        let m = fs::metadata("/proc/self/exe").unwrap();
        let kdev = (libc::major(m.dev()) << 20) | libc::minor(m.dev());
        let path = executable(me, (m.ino(), kdev)).expect("named");
        assert_eq!(path, fs::read_link("/proc/self/exe").unwrap().to_string_lossy());
        assert_eq!(executable(me, (m.ino() + 1, kdev)), None, "another file");
        assert_eq!(executable(u32::MAX, (m.ino(), kdev)), None, "no such process");
    }
}
