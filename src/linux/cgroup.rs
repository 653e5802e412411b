//! cgroup v2 ids to names a person knows: the systemd unit or container a
//! process runs in. The kernel side records the id (the cgroup directory's
//! inode under the cgroup2 mount); the name is the directory's.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How often a cgroup tree is walked again for an id not seen before.
const REWALK: Duration = Duration::from_secs(1);

pub struct Units {
    root: Option<PathBuf>,
    /// id -> its path under the mount ("/" for the root).
    paths: HashMap<u64, String>,
    walked: Option<Instant>,
}

impl Units {
    /// Finds the cgroup2 mount (/sys/fs/cgroup, or .../unified on a hybrid
    /// host); ids cannot be named without one.
    pub fn new() -> Units {
        let root = std::fs::read_to_string("/proc/self/mountinfo").ok().and_then(|m| cgroup2_mount(&m));
        Units { root, paths: HashMap::new(), walked: None }
    }

    /// The cgroup's path under the mount: `/system.slice/nginx.service`;
    /// "/" for the root (or without cgroup2); None for one already removed.
    fn path(&mut self, id: u64) -> Option<&str> {
        let Some(root) = self.root.clone() else { return Some("/") };
        if !self.paths.contains_key(&id) && self.walked.is_none_or(|t| t.elapsed() >= REWALK) {
            self.walked = Some(Instant::now());
            walk(&root, &root, &mut self.paths);
        }
        self.paths.get(&id).map(String::as_str)
    }

    /// The unit a cgroup id stands for: "/" for the root, the last part of
    /// its path otherwise (`nginx.service`, `docker-0123456789ab.scope`);
    /// a cgroup already removed is `cgroup-ID`.
    pub fn name(&mut self, id: u64) -> String {
        match self.path(id) {
            Some("/") => "/".into(),
            Some(p) => shorten_ids(p.rsplit('/').next().unwrap_or(p)),
            None if id == 0 => "/".into(),
            None => format!("cgroup-{id}"),
        }
    }

    /// Whether the cgroup is `wanted` or under it: a unit name
    /// (`nginx.service`) or a path under the mount (`/system.slice`).
    pub fn matches(&mut self, id: u64, wanted: &str) -> bool {
        if self.name(id) == wanted {
            return true;
        }
        let Some(path) = self.path(id) else { return false };
        let wanted = format!("/{}", wanted.trim_matches('/'));
        wanted == "/" || path == wanted || path.starts_with(&format!("{wanted}/"))
    }
}

impl Default for Units {
    fn default() -> Self {
        Units::new()
    }
}

fn cgroup2_mount(mountinfo: &str) -> Option<PathBuf> {
    mountinfo.lines().find_map(|l| {
        let (left, right) = l.split_once(" - ")?;
        let mount = left.split_whitespace().nth(4)?;
        (right.split_whitespace().next() == Some("cgroup2")).then(|| PathBuf::from(mount))
    })
}

fn inode(p: &Path) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(p).ok().map(|m| m.ino())
}

fn walk(root: &Path, dir: &Path, paths: &mut HashMap<u64, String>) {
    if let Some(ino) = inode(dir) {
        paths.insert(ino, format!("/{}", dir.strip_prefix(root).unwrap_or(dir).display()));
    }
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            walk(root, &e.path(), paths);
        }
    }
}

/// A container's 64-hex id cut to 12, as docker and podman show it.
fn shorten_ids(name: &str) -> String {
    let bytes = name.as_bytes();
    let mut out = String::new();
    let mut i = 0;
    while i < bytes.len() {
        let run = bytes[i..].iter().take_while(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()).count();
        if run >= 64 {
            out.push_str(&name[i..i + 12]);
            i += run;
        } else if run > 0 {
            out.push_str(&name[i..i + run]);
            i += run;
        } else {
            let c = name[i..].chars().next().unwrap_or('?');
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cgroup2_mount_is_found_on_a_hybrid_host() {
        let m =
            "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n35 31 0:30 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n";
        assert_eq!(cgroup2_mount(m), Some(PathBuf::from("/sys/fs/cgroup/unified")));
        assert_eq!(cgroup2_mount("35 31 0:30 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"), None);
    }

    #[test]
    fn a_container_id_is_cut_to_twelve() {
        let id = "0123456789abcdef".repeat(4);
        assert_eq!(shorten_ids(&format!("docker-{id}.scope")), "docker-0123456789ab.scope");
        assert_eq!(shorten_ids("nginx.service"), "nginx.service");
    }

    #[test]
    fn this_process_cgroup_has_a_name() {
        let mut u = Units::new();
        assert_eq!(u.name(0), "/");
        if let Some(root) = u.root.clone() {
            let id = inode(&root).unwrap();
            assert_eq!(u.name(id), "/");
            assert!(u.matches(id, "/"));
            assert!(!u.matches(id, "nginx.service"));
        }
    }
}
