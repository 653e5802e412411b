//! Perf map files: the names a JIT gives the code it writes into anonymous
//! memory (`/tmp/perf-PID.map`: node `--perf-basic-prof`, python `-X perf`,
//! JVM agents). One line per function: `START SIZE NAME`, hex without 0x.

use std::path::Path;

#[derive(Debug, Default)]
pub struct PerfMap {
    /// (start, end, name), sorted by start; a later line for the same
    /// range (code moved or recompiled) wins.
    entries: Vec<(u64, u64, String)>,
}

impl PerfMap {
    /// The map process `pid` wrote, empty when there is none.
    pub fn of(pid: u32) -> PerfMap {
        Self::read(Path::new(&format!("/tmp/perf-{pid}.map")))
    }

    /// A regular file only: /tmp is anyone's, and a link planted there
    /// must not make sysdiet (root) read another file into a report.
    pub fn read(path: &Path) -> PerfMap {
        use std::io::Read;
        use std::os::unix::fs::OpenOptionsExt;
        let mut text = Vec::new();
        let file = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK).open(path);
        let Ok(mut f) = file else { return PerfMap::default() };
        if !f.metadata().is_ok_and(|m| m.is_file()) || f.read_to_end(&mut text).is_err() {
            return PerfMap::default();
        }
        Self::parse(&String::from_utf8_lossy(&text))
    }

    pub fn parse(text: &str) -> PerfMap {
        let mut entries: Vec<(u64, u64, String)> = Vec::new();
        for line in text.lines() {
            let mut parts = line.splitn(3, ' ');
            let (Some(start), Some(size), Some(name)) = (parts.next(), parts.next(), parts.next()) else { continue };
            let (Ok(start), Ok(size)) =
                (u64::from_str_radix(start.trim_start_matches("0x"), 16), u64::from_str_radix(size.trim_start_matches("0x"), 16))
            else {
                continue;
            };
            if size > 0 && !name.trim().is_empty() {
                entries.push((start, start.saturating_add(size), name.trim().to_string()));
            }
        }
        // Stable: of equal starts, the last line written stays last.
        entries.sort_by_key(|e| e.0);
        PerfMap { entries }
    }

    /// The function whose code holds `addr`.
    pub fn name(&self, addr: u64) -> Option<&str> {
        let i = self.entries.partition_point(|e| e.0 <= addr);
        // The nearest start at or below addr, newest first among equals.
        self.entries[..i].iter().rev().take_while(|e| e.0 == self.entries[i - 1].0).find(|e| addr < e.1).map(|e| e.2.as_str())
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_jit_code_by_range() {
        let m = PerfMap::parse("3a8f2c0 40 LazyCompile:*loop /tmp/st.js:2\n3a8f400 1c0 Builtins_CallApiCallback\nbad line\n3a8f2c0 40 LazyCompile:*loop /tmp/st.js:2 (recompiled)\n");
        assert_eq!(m.name(0x3a8f2c0), Some("LazyCompile:*loop /tmp/st.js:2 (recompiled)"));
        assert_eq!(m.name(0x3a8f2ff), Some("LazyCompile:*loop /tmp/st.js:2 (recompiled)"));
        assert_eq!(m.name(0x3a8f300), None);
        assert_eq!(m.name(0x3a8f5bf), Some("Builtins_CallApiCallback"));
        assert_eq!(m.name(0x1000), None);
        assert!(PerfMap::of(u32::MAX).is_empty());
    }

    #[test]
    fn a_link_in_tmp_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.map");
        std::fs::write(&real, "1000 10 secret\n").unwrap();
        let link = dir.path().join("perf-1.map");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        assert_eq!(PerfMap::read(&real).name(0x1000), Some("secret"));
        assert!(PerfMap::read(&link).is_empty());
    }
}
