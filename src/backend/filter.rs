//! `-e trace=SET`, as strace reads it: names, `%class`es, `/regex`, `all`,
//! `none`, `?name` (no error if unknown), and a leading `!` to negate.

use crate::error::Error;
use crate::linux::syscalls::{self, Class};

use crate::linux::syscalls::MAX_SYSCALLS;

/// A set of syscall numbers to count.
#[derive(Clone, PartialEq, Eq)]
pub struct SyscallSet {
    members: Box<[bool; MAX_SYSCALLS]>,
    /// The expression it was parsed from, `None` for everything.
    pub expr: Option<String>,
}

impl std::fmt::Debug for SyscallSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SyscallSet({:?})", self.expr)
    }
}

impl Default for SyscallSet {
    fn default() -> Self {
        SyscallSet { members: Box::new([true; MAX_SYSCALLS]), expr: None }
    }
}

impl SyscallSet {
    pub fn contains(&self, nr: u32) -> bool {
        self.members.get(nr as usize).copied().unwrap_or(false)
    }

    /// Parse an `-e` expression: `trace=SET` or a bare `SET`.
    pub fn parse(expr: &str) -> Result<SyscallSet, Error> {
        let bad = |why: String| Error::Usage(format!("-e {expr}: {why}"));
        let set = match expr.split_once('=') {
            Some(("trace", set)) => set,
            Some((qualifier, _)) => return Err(bad(format!("only the `trace` qualifier is supported, not `{qualifier}`"))),
            None => expr,
        };
        let (negate, set) = match set.strip_prefix('!') {
            Some(rest) => (true, rest),
            None => (false, set),
        };
        if set.is_empty() {
            return Err(bad("empty set: name syscalls, e.g. trace=openat,read".into()));
        }
        let mut members = Box::new([false; MAX_SYSCALLS]);
        for item in set.split(',') {
            let (optional, item) = match item.strip_prefix('?') {
                Some(rest) => (true, rest),
                None => (false, item),
            };
            let matched = add_item(&mut members, item).map_err(bad)?;
            if !matched && !optional {
                return Err(bad(format!("unknown syscall or class `{item}` (classes: {})", Class::NAMES)));
            }
        }
        if negate {
            members.iter_mut().for_each(|m| *m = !*m);
        }
        Ok(SyscallSet { members, expr: Some(expr.to_string()) })
    }
}

/// Adds what `item` names; false when it names nothing.
fn add_item(members: &mut [bool; MAX_SYSCALLS], item: &str) -> Result<bool, String> {
    let mut mark = |pred: &dyn Fn(&syscalls::SyscallInfo) -> bool| {
        let mut any = false;
        for s in syscalls::all().iter().filter(|s| pred(s)) {
            members[s.nr as usize] = true;
            any = true;
        }
        any
    };
    if item == "all" {
        members.iter_mut().for_each(|m| *m = true);
        return Ok(true);
    }
    if item == "none" {
        return Ok(true);
    }
    if let Some(class) = item.strip_prefix('%') {
        let class = Class::from_name(class).ok_or_else(|| format!("unknown class `{item}` (classes: {})", Class::NAMES))?;
        return Ok(mark(&|s| s.in_class(class)));
    }
    if let Some(pattern) = item.strip_prefix('/') {
        let re = regex::Regex::new(pattern).map_err(|e| format!("bad regex `{pattern}`: {e}"))?;
        return Ok(mark(&|s| re.is_match(s.name)));
    }
    Ok(mark(&|s| s.name == item))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nr(name: &str) -> u32 {
        syscalls::by_name(name).unwrap().nr
    }

    #[test]
    fn names_and_classes() {
        let s = SyscallSet::parse("trace=openat,%stat").unwrap();
        assert!(s.contains(nr("openat")));
        assert!(s.contains(nr("stat")));
        assert!(!s.contains(nr("newfstatat")), "strace puts newfstatat in %fstat, not %stat");
        assert!(!s.contains(nr("read")));
    }

    #[test]
    fn bare_set_negation_and_regex() {
        let s = SyscallSet::parse("!write").unwrap();
        assert!(!s.contains(nr("write")) && s.contains(nr("read")));
        let s = SyscallSet::parse("trace=/^rt_sig").unwrap();
        assert!(s.contains(nr("rt_sigprocmask")) && !s.contains(nr("kill")));
        let s = SyscallSet::parse("trace=%%stat").unwrap();
        assert!(s.contains(nr("newfstatat")) && s.contains(nr("statx")));
    }

    #[test]
    fn unknown_names_are_errors_unless_optional() {
        let e = SyscallSet::parse("trace=opne").unwrap_err().to_string();
        assert!(e.contains("unknown syscall or class `opne`"), "{e}");
        assert!(SyscallSet::parse("trace=?opne,read").is_ok());
        assert!(SyscallSet::parse("trace=%nope").is_err());
        assert!(SyscallSet::parse("trace=").is_err());
        assert!(SyscallSet::parse("signal=SIGINT").is_err());
        assert!(SyscallSet::parse("trace=/(").is_err());
    }
}
