//! Per-argument stats: a path, an fd, a clock, a timeout, and what calls on it did.

use super::{Histogram, SiteShare};
use serde::{Deserialize, Serialize};

/// What identifies one call's argument.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord, Hash, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Argument {
    /// A path (None when it could not be read, or was NULL); `dirfd` for
    /// `*at` calls not relative to the working directory.
    Path {
        path: Option<String>,
        dirfd: Option<i64>,
        /// The argument was NULL, which some calls take for "the file of
        /// `dirfd`" (futimens is utimensat(fd, NULL)): not a lost path.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        null: bool,
        /// The path was longer than sysdiet reads (255 bytes): `path` is
        /// its beginning, and paths that begin alike count together.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        cut: bool,
        /// The path's exact bytes when they are not UTF-8 (`path` then has
        /// U+FFFD in place of each byte that is not).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        raw: Option<Vec<u8>>,
    },
    Fd {
        fd: i64,
    },
    /// clock_gettime's clock id (CLOCK_MONOTONIC = 1, ...).
    Clock {
        clock: i64,
    },
    /// poll/epoll_wait/ppoll/select: the kind of timeout.
    Timeout {
        timeout: Timeout,
    },
    /// rt_sigprocmask: what the call did to the mask it found.
    SigMask {
        change: MaskChange,
    },
    /// brk: which way the call moved the end of the heap.
    Brk {
        change: BrkChange,
    },
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord, Hash, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Timeout {
    /// Returns at once: a poll that never waits.
    Zero,
    Finite,
    /// Waits until something happens.
    None,
    Unreadable,
    /// Zero, or a finite timeout that ran out: select, pselect6 and ppoll
    /// write the time left back, and sampled mode reads it at exit.
    RanOut,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord, Hash, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum MaskChange {
    /// `set == NULL`: only reads the mask.
    Query,
    /// Sets the mask the thread already has.
    Same,
    Block,
    Unblock,
    /// SIG_SETMASK to a different mask.
    Set,
    /// A change right after another change, with no syscall between.
    Undo,
}

/// Against the break the thread last saw; a thread's first move counts as
/// growing.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord, Hash, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum BrkChange {
    /// `brk(0)`: only reads the break.
    Query,
    Grow,
    /// Gives memory back: malloc trimming the top of its heap.
    Shrink,
    /// No move: a grow that failed returns the old break.
    Same,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct ArgumentStats {
    pub pid: u32,
    pub syscall: String,
    pub nr: u32,
    pub argument: Argument,
    pub calls: u64,
    pub errors: u64,
    pub total_ns: u64,
    /// Byte counts asked for and returned (read/write family only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested: Option<Histogram>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub returned: Option<Histogram>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sites: Vec<SiteShare>,
}

impl ArgumentStats {
    /// Adds another entry's counts and byte histograms to this one's.
    pub fn merge(&mut self, other: &ArgumentStats) {
        self.calls += other.calls;
        self.errors += other.errors;
        self.total_ns += other.total_ns;
        for (mine, theirs) in [(&mut self.requested, &other.requested), (&mut self.returned, &other.returned)] {
            match (mine.as_mut(), theirs) {
                (Some(h), Some(t)) => h.add(t),
                (None, Some(t)) => *mine = Some(t.clone()),
                _ => {}
            }
        }
    }

    /// At most how many bytes 90% of the calls moved (read/write family).
    pub fn typical_bytes(&self) -> Option<u64> {
        self.returned.as_ref()?.bound_covering(0.9)
    }

    /// At most how many bytes 90% of the calls asked for.
    pub fn typical_request(&self) -> Option<u64> {
        self.requested.as_ref()?.bound_covering(0.9)
    }
}
