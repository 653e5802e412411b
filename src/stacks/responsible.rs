//! Which frame of a stack is the program's own code: the first one, from
//! the syscall outward, that is not in a system library (libc, ld.so and
//! every other shared object the distribution installs), not in the vDSO,
//! and not a language runtime's own machinery that we recognise. That frame
//! made the decision to call; the frames inside it are how.

use crate::model::Frame;

/// Where a distribution installs shared libraries.
const SYSTEM_LIBRARY_DIRS: &[&str] = &["/lib/", "/lib64/", "/usr/lib/", "/usr/lib64/", "/lib32/", "/usr/lib32/"];

/// Functions of language runtimes that may be linked into an executable
/// (CPython, Ruby, Perl, Rust's std and core, a static glibc).
const RUNTIME_PREFIXES: &[&str] =
    &["_Py", "rb_", "ruby_", "Perl_", "perl_", "std::", "core::", "alloc::", "<std::", "<core::", "<alloc::", "__libc_", "_IO_", "__GI_", "_dl_"];

/// The responsible frame, and how many frames from it outward are the
/// program's own.
pub fn responsible(frames: &[Frame]) -> Option<(usize, usize)> {
    let first = frames.iter().position(|f| !is_machinery(f))?;
    let own = frames[first..].iter().take_while(|f| !is_machinery(f)).count();
    Some((first, own))
}

fn is_machinery(f: &Frame) -> bool {
    if f.module == super::images::VDSO || is_system_library(&f.module) {
        return true;
    }
    match &f.function {
        Some(name) => RUNTIME_PREFIXES.iter().any(|p| name.starts_with(p)) || is_python_api(name),
        // Code in no known file (JIT, or lost): not ours to blame.
        None => f.module == "?",
    }
}

/// CPython's C API: `PyObject_Call`, `Py_RunMain`; not `Pythagoras`.
fn is_python_api(name: &str) -> bool {
    name.strip_prefix("Py").and_then(|r| r.chars().next()).is_some_and(|c| c == '_' || c.is_ascii_uppercase())
}

fn is_system_library(path: &str) -> bool {
    let file = path.rsplit('/').next().unwrap_or(path);
    let shared_object = file.contains(".so") || file.starts_with("ld-linux");
    shared_object && SYSTEM_LIBRARY_DIRS.iter().any(|d| path.starts_with(d))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(function: &str, module: &str) -> Frame {
        Frame { function: Some(function.into()), module: module.into(), ..Default::default() }
    }

    const LIBC: &str = "/usr/lib/x86_64-linux-gnu/libc.so.6";

    #[test]
    fn the_first_frame_outside_libc_is_blamed() {
        let stack = [f("__GI___fstatat64", LIBC), f("__tz_convert", LIBC), f("use_localtime", "/tmp/timeloop"), f("main", "/tmp/timeloop")];
        assert_eq!(responsible(&stack), Some((2, 2)));
    }

    #[test]
    fn a_library_outside_the_system_dirs_is_the_users() {
        let stack = [f("fsync", LIBC), f("flush_all", "/home/me/build/libmine.so"), f("main", "/home/me/build/app")];
        assert_eq!(responsible(&stack), Some((1, 2)));
    }

    #[test]
    fn runtimes_in_the_executable_are_skipped() {
        let stack = [
            f("__GI___fstatat64", LIBC),
            f("_PyEval_EvalFrameDefault", "/usr/bin/python3.11"),
            f("PyObject_Vectorcall", "/usr/bin/python3.11"),
            f("std::fs::metadata", "/srv/app"),
            f("app::load_config", "/srv/app"),
        ];
        assert_eq!(responsible(&stack), Some((4, 1)));
        assert_eq!(responsible(&[f("Pythagoras", "/srv/app")]), Some((0, 1)));
    }

    #[test]
    fn nothing_of_ours_is_none() {
        let stack = [f("clock_gettime", "[vdso]"), f("__libc_start_main", LIBC)];
        assert_eq!(responsible(&stack), None);
    }

    #[test]
    fn an_executable_in_usr_lib_is_still_a_program() {
        // Not a shared object, so a program's own code.
        let stack = [f("write", LIBC), f("main", "/usr/lib/git-core/git"), f("__libc_start_call_main", LIBC)];
        assert_eq!(responsible(&stack), Some((1, 1)));
    }
}
